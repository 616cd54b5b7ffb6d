//! `prov eval`, `prov sample` and `prov export`: a trained checkpoint on its own.
//!
//! Each loads the checkpoint with every tensor checked against the digest its record lists,
//! so a damaged or substituted checkpoint is refused (exit 2) rather than evaluated.

use std::io::Read as _;
use std::path::PathBuf;

use prov_exec::worker::{self, Reply};
use prov_store::{Access, Digest, Store};
use prov_train::checkpoint_tasks::{EvalReply, EvalRequest, ExportReply, ExportRequest, SampleRequest, TaskFailure};
use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::resolve::resolve_object;
use crate::ui::Ui;

impl From<TaskFailure> for CommandError {
    fn from(f: TaskFailure) -> Self {
        if f.internal {
            return Self::internal(f.message);
        }
        let err = if f.integrity { Self::integrity(f.message) } else { Self::input(f.message) };
        match f.hint {
            Some(h) => err.with_hint(h),
            None => err,
        }
    }
}

/// Asks the worker, which loads the checkpoint with libtorch, to do `verb`.
fn ask_worker<Req: serde::Serialize, T: serde::de::DeserializeOwned>(
    verb: &str,
    request: &Req,
) -> Result<T, CommandError> {
    match worker::call::<_, T, TaskFailure>(&CommandContext::worker(), verb, request) {
        Ok(Reply::Ok(value)) => Ok(value),
        Ok(Reply::Err(failure)) => Err(failure.into()),
        Err(e @ worker::WorkerError::Missing(_)) => Err(CommandError::input(e.to_string())
            .with_hint("build the worker with `cargo build` (it sits beside `prov`), or set PROV_WORKER")),
        Err(e) => {
            Err(CommandError::input(e.to_string())
                .with_hint("the worker computes with libtorch; `prov doctor` checks it"))
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
    /// A LoRA adapter to attach first: the digest of a `lora` stage's `adapter` output
    #[arg(long, value_name = "ADAPTER")]
    adapter: Option<String>,
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

/// Write a checkpoint as a Hugging Face model folder, or an adapter as a PEFT folder
///
/// Writes `config.json`, `model.safetensors`, `tokenizer.json` and `tokenizer_config.json`
/// into DIR (created if needed; existing files of those names are replaced atomically), so
/// that `transformers.AutoModelForCausalLM.from_pretrained(DIR)` loads the model as
/// `ApertusForCausalLM` and `AutoTokenizer.from_pretrained(DIR)` its tokenizer. Given the
/// `adapter` output of a `lora` stage instead, writes `adapter_config.json` and
/// `adapter_model.safetensors`, which `peft.PeftModel.from_pretrained(model, DIR)` loads onto
/// the exported base. Prints each file with its BLAKE3 digest.
///
/// With `--sign KEY` (an ECDSA P-256 private key), also writes `DIR/model.sig`: the folder
/// signed in the `OpenSSF` model signing format (a Sigstore bundle, no online service), which
/// `model_signing verify key DIR --signature DIR/model.sig --public_key KEY.pub` and `prov
/// verify-attestation DIR/model.sig --key KEY.pub --model DIR` check. The folder must then
/// hold only what the export wrote.
#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// Checkpoint record digest (full or a prefix of at least 6 hex digits)
    checkpoint: String,
    /// The folder to write
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Sign the folder with this ECDSA P-256 private key (PEM or OpenSSH), into DIR/model.sig
    #[arg(long, value_name = "KEY")]
    sign: Option<PathBuf>,
}

/// The store, held open (its shared lock keeps `prov gc` away while the worker reads the
/// checkpoint), and the checkpoint's digest.
fn checkpoint(cx: &CommandContext, arg: &str) -> Result<(Store, Digest), CommandError> {
    let (store, _) = cx.open_store(Access::Shared, true)?;
    let digest = resolve_object(&store, arg)?;
    Ok((store, digest))
}

/// Prints and returns what a palettized checkpoint's scores say beside its float model's
/// (`float`, the same sequences): the bits per weight and the change in mean negative
/// log-likelihood per token.
fn palette_change(
    ui: &mut Ui,
    palette: &serde_json::Value,
    source: &Digest,
    float: &EvalReply,
    (mean, tokens): (f64, usize),
) -> Result<serde_json::Value, CommandError> {
    let float_nll: f64 =
        -float.scored.iter().flat_map(prov_train::checkpoint_tasks::ScoredSequence::log_probs).sum::<f64>();
    let float_mean = if tokens == 0 { 0.0 } else { float_nll / tokens as f64 };
    let (bpw, model_bpw) = (palette["bits_per_weight"].as_f64(), palette["model_bits_per_weight"].as_f64());
    let shown = |b: Option<f64>| b.map_or_else(|| "?".to_owned(), |b| format!("{b:.3}"));
    ui.line(format!(
        "palettized: {} bits per weight (projections), {} (whole model); float model {source}: nll {float_mean:.4}, change {:+.4} per token",
        shown(bpw),
        shown(model_bpw),
        mean - float_mean
    ))?;
    Ok(json!({
        "bits_per_weight": bpw,
        "model_bits_per_weight": model_bpw,
        "layers": palette["layers"],
        "source": source.to_string(),
        "source_nll": float_mean,
        "nll_change": mean - float_mean,
    }))
}

/// The palette description a checkpoint names, and the float checkpoint it was made from;
/// `None` for a checkpoint that is not palettized.
fn palette_of(store: &Store, digest: &Digest) -> Result<Option<(serde_json::Value, Digest)>, CommandError> {
    let Ok(prov_manifest::Record::Checkpoint(c)) = prov_manifest::get_record(store, digest) else { return Ok(None) };
    let Some(palette) = c.palette else { return Ok(None) };
    let value: serde_json::Value = serde_json::from_slice(&store.read(&palette)?).map_err(|e| {
        CommandError::integrity(format!("palette `{palette}` of checkpoint `{digest}` is not JSON: {e}"))
    })?;
    let source = value["source"]
        .as_str()
        .and_then(|s| s.parse::<Digest>().ok())
        .ok_or_else(|| CommandError::integrity(format!("palette `{palette}` names no source checkpoint")))?;
    Ok(Some((value, source)))
}

fn parse_ids(text: &str, what: &str) -> Result<Vec<i64>, CommandError> {
    serde_json::from_str(text).map_err(|e| {
        CommandError::input(format!("{what}, column {}: {e}", e.column()))
            .with_hint("give a JSON array of integer token ids, e.g. `[0, 17, 4]`")
    })
}

pub(crate) fn cmd_eval(ui: &mut Ui, cx: &CommandContext, args: &EvalArgs) -> Result<(), CommandError> {
    let text = if args.ids.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).map_err(|e| CommandError::input(format!("reading stdin: {e}")))?;
        s
    } else {
        prov_store::read_named_text(&args.ids, 64 << 20, "the ids file")?
    };
    let name = if args.ids.as_os_str() == "-" { "stdin".to_owned() } else { args.ids.display().to_string() };
    let mut sequences = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        sequences.push((i + 1, parse_ids(line, &format!("{name}, line {}", i + 1))?));
    }
    if sequences.is_empty() {
        return Err(CommandError::input(format!("{name} holds no token sequences")));
    }
    let (store, digest) = checkpoint(cx, &args.checkpoint)?;
    let adapter = args.adapter.as_deref().map(|a| resolve_object(&store, a)).transpose()?;
    let threads = cx.threads()?;
    let request = EvalRequest {
        store: store.root().to_path_buf(),
        checkpoint: digest,
        threads,
        sequences: sequences.iter().map(|(line, ids)| (format!("{name}, line {line}"), ids.clone())).collect(),
        logits: args.logits,
        adapter,
    };
    let reply: EvalReply = ask_worker("eval", &request)?;
    // A palettized checkpoint names its palette, whose source is the float model: scored too,
    // for the change in log-likelihood the palettization made.
    let palette = palette_of(&store, &digest)?;
    let float_reply = match &palette {
        Some((_, source)) if reply.stopped.is_none() => {
            let request = EvalRequest { checkpoint: *source, adapter: None, logits: false, ..request };
            Some(ask_worker::<EvalRequest, EvalReply>("eval", &request)?)
        }
        _ => None,
    };
    drop(store);
    let answered = reply.scored.len() + usize::from(reply.stopped.is_some());
    if answered > sequences.len() || (reply.stopped.is_none() && reply.scored.len() != sequences.len()) {
        return Err(CommandError::internal(format!(
            "the worker scored {} of {} sequences without saying why",
            reply.scored.len(),
            sequences.len()
        )));
    }
    let mut out = Vec::new();
    let (mut total_nll, mut total_tokens) = (0.0, 0usize);
    for ((line, _), scored) in sequences.iter().zip(&reply.scored) {
        let log_probs = scored.log_probs();
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
        if let Some(rows) = scored.logits() {
            entry["logits"] = json!(rows);
        }
        ui.line(format!("line {line}: {} tokens, nll {mean:.4}, perplexity {:.3}", log_probs.len(), mean.exp()))?;
        out.push(entry);
    }
    if let Some(failure) = reply.stopped {
        return Err(failure.into());
    }
    let mean = if total_tokens == 0 { 0.0 } else { total_nll / total_tokens as f64 };
    ui.line(format!("total: {total_tokens} tokens, nll {mean:.4}, perplexity {:.3}", mean.exp()))?;
    let mut data = json!({
        "checkpoint": digest.to_string(),
        "threads": threads,
        "sequences": out,
        "tokens": total_tokens,
        "nll": mean,
        "perplexity": mean.exp(),
    });
    if let Some(a) = adapter {
        data["adapter"] = json!(a.to_string());
    }
    if let (Some((palette, source)), Some(float)) = (&palette, &float_reply) {
        data["palette"] = palette_change(ui, palette, source, float, (mean, total_tokens))?;
    }
    ui.json("eval", data)?;
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
    let (store, digest) = checkpoint(cx, &args.checkpoint)?;
    let request = SampleRequest {
        store: store.root().to_path_buf(),
        checkpoint: digest,
        threads: cx.threads()?,
        prompt: prompt.clone(),
        max_tokens: args.max_tokens,
        temperature: args.temperature,
        seed: args.seed,
    };
    let tokens: Vec<i64> = ask_worker("sample", &request)?;
    drop(store);
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
    // The key is read first, so that a key that cannot sign fails before the export.
    let key = args.sign.as_ref().map(|k| prov_attest::SigningKey::read(&cx.cwd.join(k))).transpose()?;
    if let Some(key) = &key
        && key.public().algorithm() != prov_attest::KeyAlgorithm::EcdsaP256
    {
        return Err(prov_attest::AttestError::from(prov_attest::ModelSigningError::KeyAlgorithm(
            key.public().algorithm().name(),
        ))
        .into());
    }
    let (store, digest) = checkpoint(cx, &args.checkpoint)?;
    // An adapter is two stored files: written here. A checkpoint needs libtorch: the worker.
    let files: ExportReply = if let Ok(prov_manifest::Record::Tree(tree)) = prov_manifest::get_record(&store, &digest) {
        export_adapter(&store, &digest, &tree, &cx.cwd.join(&args.out))?
    } else {
        let request =
            ExportRequest { store: store.root().to_path_buf(), checkpoint: digest, out: cx.cwd.join(&args.out) };
        ask_worker("export", &request)?
    };
    drop(store);
    let mut written = serde_json::Map::new();
    for (name, file_digest) in &files {
        ui.line(format!("{file_digest}  {}", args.out.join(name).display()))?;
        written.insert(name.clone(), json!(file_digest.to_string()));
    }
    let signature = match &key {
        Some(key) => {
            sign_export(ui, &cx.cwd.join(&args.out), &files, key)?;
            Some(args.out.join(prov_attest::SIGNATURE_FILE))
        }
        None => None,
    };
    let mut data = json!({ "checkpoint": digest.to_string(), "out": args.out, "files": written });
    if let Some(s) = signature {
        data["signature"] = json!(s);
    }
    ui.json("export", data)?;
    Ok(())
}

/// The files PEFT reads from an adapter folder, which a `lora` stage's `adapter` tree holds.
const ADAPTER_FILES: [&str; 2] = ["adapter_config.json", "adapter_model.safetensors"];

/// Writes an adapter tree's two files into `out` (each atomically), as PEFT's
/// `PeftModel.from_pretrained(model, out)` reads them; any other tree is refused.
fn export_adapter(
    store: &Store,
    digest: &Digest,
    tree: &prov_manifest::TreeRecord,
    out: &std::path::Path,
) -> Result<ExportReply, CommandError> {
    let names: Vec<&str> = tree.entries.iter().map(|e| e.path.as_str()).collect();
    if names != ADAPTER_FILES {
        return Err(CommandError::input(format!("`{digest}` is a tree of {names:?}, not a LoRA adapter"))
            .with_hint("give a checkpoint, or the `adapter` output of a `lora` stage"));
    }
    fs_err::create_dir_all(out)?;
    let mut written = Vec::new();
    for entry in &tree.entries {
        let bytes = store.read(&entry.digest)?;
        prov_store::write_atomically(out, &out.join(entry.path.as_str()), &bytes)?;
        written.push((entry.path.as_str().to_owned(), Digest::of(&bytes)));
    }
    Ok(written)
}

/// Signs an exported folder, and writes the signature only once the files it signs are shown
/// to be exactly the export's: the names the worker wrote, with the BLAKE3 it reported (a file
/// added or changed meanwhile is refused, not signed). One read of each file gives both the
/// SHA-256 the signature lists and the BLAKE3 checked here.
fn sign_export(
    ui: &mut Ui,
    dir: &std::path::Path,
    exported: &ExportReply,
    key: &prov_attest::SigningKey,
) -> Result<(), CommandError> {
    let (bundle, found) = prov_attest::sign_model_folder(dir, key).map_err(prov_attest::AttestError::from)?;
    for f in &found {
        match exported.iter().find(|(name, _)| *name == f.name).map(|(_, d)| d) {
            None => {
                return Err(CommandError::input(format!(
                    "{}: `{}` is not a file the export wrote; a signature covers the whole folder",
                    dir.display(),
                    f.name
                ))
                .with_hint("export into an empty folder to sign it"));
            }
            Some(d) if d.to_hex() != f.blake3 => {
                return Err(CommandError::integrity(format!(
                    "{}: `{}` changed after the export wrote it",
                    dir.display(),
                    f.name
                )));
            }
            Some(_) => {}
        }
    }
    if let Some((gone, _)) = exported.iter().find(|(name, _)| !found.iter().any(|f| f.name == *name)) {
        return Err(CommandError::integrity(format!("{}: `{gone}` is gone since the export wrote it", dir.display())));
    }
    prov_store::write_atomically(dir, &dir.join(prov_attest::SIGNATURE_FILE), &bundle)
        .map_err(|e| CommandError::input(format!("writing the signature: {e}")))?;
    ui.line(format!(
        "signed {} files into {} (model signing v1.0, ECDSA P-256 key {})",
        found.len(),
        dir.join(prov_attest::SIGNATURE_FILE).display(),
        key.public().keyid()
    ))?;
    Ok(())
}
