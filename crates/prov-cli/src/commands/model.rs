//! `prov eval`, `prov sample` and `prov export`: a trained checkpoint on its own.
//!
//! Each loads the checkpoint with every tensor checked against the digest its record lists,
//! so a damaged or substituted checkpoint is refused (exit 2) rather than evaluated.

use std::io::Read as _;
use std::path::PathBuf;

use prov_store::{Access, Digest, Store};
use prov_train::checkpoint::{self, CheckpointError, LoadedCheckpoint};
use serde_json::{Value, json};

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::resolve::resolve_object;
use crate::ui::Ui;

impl From<CheckpointError> for CommandError {
    fn from(e: CheckpointError) -> Self {
        let integrity = e.is_integrity_failure();
        let hint = match &e {
            CheckpointError::NotACheckpoint { .. } => Some(
                "give the digest of a checkpoint record: a `pretrain` stage's `model` output, or an entry of its `checkpoints` tree",
            ),
            CheckpointError::TensorDigest { .. } => Some("run `prov verify`; replay the run that wrote the checkpoint"),
            _ => None,
        };
        let err = if integrity { Self::integrity(e.to_string()) } else { Self::input(e.to_string()) };
        match hint {
            Some(h) => err.with_hint(h),
            None => err,
        }
    }
}

/// Print per-token log-probabilities and the perplexity of token sequences under a checkpoint
///
/// CHECKPOINT is the digest (or a prefix of at least 6 hex digits) of a checkpoint record. The
/// sequences are JSON arrays of token ids, one per line, read from `--ids FILE` (`-` for
/// stdin). Each sequence's first token is context only; every later token is scored by
/// `log p(token | previous tokens)` from the float32 log-softmax of the logits. Prints each
/// sequence's token count, mean negative log-likelihood and perplexity, then the totals; with
/// `--json`, one `eval` message: `{"checkpoint", "threads", "sequences": [{"tokens",
/// "log_probs", "nll", "perplexity", "logits"?}], "tokens", "nll", "perplexity"}`, where
/// `logits` (with `--logits`) holds each position's full row of float32 logits.
#[derive(Debug, clap::Args)]
pub(crate) struct EvalArgs {
    /// Checkpoint record digest (full or a prefix of at least 6 hex digits)
    checkpoint: String,
    /// JSON Lines of token-id arrays (`-` for stdin)
    #[arg(long, value_name = "FILE")]
    ids: PathBuf,
    /// Also write every position's logits (with `--json`)
    #[arg(long)]
    logits: bool,
}

/// Continue a prompt from a checkpoint, reproducibly
///
/// Draws up to `--max-tokens` tokens after the prompt (a JSON array of token ids), each from
/// the softmax of the last position's logits divided by `--temperature`, by inverting the
/// cumulative distribution at a uniform number from `SplitMix64` seeded with `--seed`
/// (temperature 0: the most likely token). Stops after the end-of-sequence token the
/// checkpoint's config names. The same checkpoint, prompt, seed, threads and `ATen`
/// capability give the same tokens. Prints the new token ids as a JSON array; with `--json`,
/// one `sample` message `{"checkpoint", "seed", "temperature", "prompt", "tokens"}`.
#[derive(Debug, clap::Args)]
pub(crate) struct SampleArgs {
    /// Checkpoint record digest (full or a prefix of at least 6 hex digits)
    checkpoint: String,
    /// The prompt as a JSON array of token ids
    #[arg(long, value_name = "JSON")]
    prompt_ids: String,
    /// The sampling seed
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Softmax temperature (0: greedy)
    #[arg(long, default_value_t = 1.0)]
    temperature: f64,
    /// Most tokens to generate
    #[arg(long, default_value_t = 64)]
    max_tokens: usize,
}

/// Write a checkpoint as a Hugging Face model folder
///
/// Writes `config.json`, `model.safetensors`, `tokenizer.json` and `tokenizer_config.json`
/// into DIR (created if needed; existing files of those names are replaced atomically), so
/// that `transformers.AutoModelForCausalLM.from_pretrained(DIR)` loads the model as
/// `ApertusForCausalLM` and `AutoTokenizer.from_pretrained(DIR)` its tokenizer. Prints each
/// file with its BLAKE3 digest.
#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// Checkpoint record digest (full or a prefix of at least 6 hex digits)
    checkpoint: String,
    /// The folder to write
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

fn open_checkpoint(cx: &CommandContext, arg: &str) -> Result<(Store, Digest), CommandError> {
    let (store, _) = cx.open_store(Access::Shared, true)?;
    let digest = resolve_object(&store, arg)?;
    Ok((store, digest))
}

/// Loads the checkpoint with libtorch pinned to the command's thread count.
fn load(cx: &CommandContext, arg: &str) -> Result<(LoadedCheckpoint, Digest, usize), CommandError> {
    let (store, digest) = open_checkpoint(cx, arg)?;
    let threads = cx.threads()?;
    prov_torch::pin_threads(threads);
    Ok((checkpoint::load(&store, &digest)?, digest, threads))
}

fn parse_ids(text: &str, what: &str) -> Result<Vec<i64>, CommandError> {
    serde_json::from_str(text).map_err(|e| {
        CommandError::input(format!("{what}, column {}: {e}", e.column()))
            .with_hint("give a JSON array of integer token ids, e.g. `[0, 17, 4]`")
    })
}

fn check_ids(ids: &[i64], vocab: i64, what: &str) -> Result<(), CommandError> {
    match ids.iter().position(|&t| !(0..vocab).contains(&t)) {
        Some(i) => Err(CommandError::input(format!(
            "{what}: token {} at position {i} is outside the vocabulary (0..{vocab})",
            ids[i]
        ))),
        None => Ok(()),
    }
}

pub(crate) fn cmd_eval(ui: &mut Ui, cx: &CommandContext, args: &EvalArgs) -> Result<(), CommandError> {
    let text = if args.ids.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).map_err(|e| CommandError::input(format!("reading stdin: {e}")))?;
        s
    } else {
        fs_err::read_to_string(&args.ids)?
    };
    let name = if args.ids.as_os_str() == "-" { "stdin".to_owned() } else { args.ids.display().to_string() };
    let mut sequences = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        sequences.push((i + 1, parse_ids(line, &format!("{name}, line {}", i + 1))?));
    }
    if sequences.is_empty() {
        return Err(CommandError::input(format!("{name} holds no token sequences")));
    }
    let (loaded, digest, threads) = load(cx, &args.checkpoint)?;
    let mut out = Vec::new();
    let (mut total_nll, mut total_tokens) = (0.0, 0usize);
    for (line, ids) in &sequences {
        check_ids(ids, loaded.config.vocab_size, &format!("{name}, line {line}"))?;
        let log_probs = loaded.log_probs(ids);
        let nll: f64 = -log_probs.iter().sum::<f64>();
        total_nll += nll;
        total_tokens += log_probs.len();
        let mean = if log_probs.is_empty() { 0.0 } else { nll / log_probs.len() as f64 };
        let mut entry = json!({
            "tokens": log_probs.len(),
            "log_probs": log_probs,
            "nll": mean,
            "perplexity": mean.exp(),
        });
        if args.logits && ids.len() > 1 {
            let logits = loaded.logits(&ids[..ids.len() - 1]);
            let rows: Vec<Vec<f32>> = (0..logits.size()[0]).map(|r| prov_torch::f32_values(&logits.get(r))).collect();
            entry["logits"] = json!(rows);
        }
        ui.line(format!("line {line}: {} tokens, nll {mean:.4}, perplexity {:.3}", log_probs.len(), mean.exp()))?;
        out.push(entry);
    }
    let mean = if total_tokens == 0 { 0.0 } else { total_nll / total_tokens as f64 };
    ui.line(format!("total: {total_tokens} tokens, nll {mean:.4}, perplexity {:.3}", mean.exp()))?;
    ui.json(
        "eval",
        json!({
            "checkpoint": digest.to_string(),
            "threads": threads,
            "sequences": out,
            "tokens": total_tokens,
            "nll": mean,
            "perplexity": mean.exp(),
        }),
    )?;
    Ok(())
}

pub(crate) fn cmd_sample(ui: &mut Ui, cx: &CommandContext, args: &SampleArgs) -> Result<(), CommandError> {
    if !(args.temperature.is_finite() && args.temperature >= 0.0) {
        return Err(CommandError::input(format!("--temperature must be a number >= 0, got {}", args.temperature)));
    }
    let prompt = parse_ids(&args.prompt_ids, "--prompt-ids")?;
    if prompt.is_empty() {
        return Err(CommandError::input("--prompt-ids is empty").with_hint("start with the BOS token, e.g. `[0]`"));
    }
    let (loaded, digest, _) = load(cx, &args.checkpoint)?;
    check_ids(&prompt, loaded.config.vocab_size, "--prompt-ids")?;
    let stop = loaded.hf_config.get("eos_token_id").and_then(Value::as_i64);
    let tokens = loaded.sample(&prompt, args.max_tokens, args.temperature, args.seed, stop);
    ui.line(serde_json::to_string(&tokens).expect("integers encode"))?;
    ui.json(
        "sample",
        json!({
            "checkpoint": digest.to_string(),
            "seed": args.seed,
            "temperature": args.temperature,
            "prompt": prompt,
            "tokens": tokens,
        }),
    )?;
    Ok(())
}

pub(crate) fn cmd_export(ui: &mut Ui, cx: &CommandContext, args: &ExportArgs) -> Result<(), CommandError> {
    let (store, digest) = open_checkpoint(cx, &args.checkpoint)?;
    let files = checkpoint::hf_folder(&store, &digest)?;
    fs_err::create_dir_all(&args.out)?;
    let mut written = serde_json::Map::new();
    for (name, bytes) in &files {
        // The temp file sits in DIR itself, so the rename never crosses a file system.
        prov_store::write_atomically(&args.out, &args.out.join(name), bytes)?;
        let file_digest = Digest::of(bytes);
        ui.line(format!("{file_digest}  {}", args.out.join(name).display()))?;
        written.insert((*name).to_owned(), json!(file_digest.to_string()));
    }
    ui.json("export", json!({ "checkpoint": digest.to_string(), "out": args.out, "files": written }))?;
    Ok(())
}
