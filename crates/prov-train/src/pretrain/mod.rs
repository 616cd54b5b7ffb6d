//! `pretrain`: trains the Apertus-style decoder on packed token samples in a pinned data
//! order, with the Goldfish loss, `AdEMAMix` and the WSD schedule, and writes a checkpoint
//! every `checkpoint_every` steps and at the last step.
//!
//! Inputs: `tokens` (the `tokenize` stage's token tree), `order` (its data order) and
//! `tokenizer` (the tokenizer that made them, kept for export). Outputs: `model`, the last
//! checkpoint; `checkpoints`, a tree naming every checkpoint record by its step
//! (`step-000100.json`); `log`, the per-step log (JSON Lines: step, loss, grad norm, learning rate,
//! labels counted, labels dropped).
//!
//! The class is `envelope`: libtorch's results depend on the thread count and the `ATen` CPU
//! capability, which the executor pins and records.
//!
//! Its configuration and defaults are in `config`, resuming a killed stage in `progress`, and
//! locating where a replay departs from its recording in `forensics`.

mod config;
mod forensics;
mod progress;

pub use config::{GoldfishParams, ModelParams, PretrainConfig};
pub use progress::progress_path;

use std::collections::BTreeMap;

use prov_dataset::tokens::TokenData;
use prov_exec::{ConfigError, InputSpec, Located, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{
    CheckpointRecord, Determinism, OutputRef, OutputType, Record, SCHEMA_VERSION, TreeEntry, TreeRecord, encode_value,
    put_record,
};
use prov_store::{Digest, ObjectKind, Store};
use prov_torch::NamedTensors;
use serde::Serialize;
use serde_json::{Value, json};

use self::forensics::{damaged_tensor, first_log_difference, locate_checkpoint};
use self::progress::Progress;
use crate::checkpoint::CheckpointWriter;
use crate::model::ModelConfig;
use crate::trainer::{LoopConfig, Samples, Trainer, decode_log, hf_config};

/// The `pretrain` stage kind.
pub struct PretrainStage;

fn store_tokens<'a>(store: &'a Store, digest: &Digest) -> Result<StoreSamples<'a>, StageError> {
    Ok(StoreSamples { data: TokenData::open(store, digest)? })
}

/// Samples read from the store, one at a time.
struct StoreSamples<'a> {
    data: TokenData<'a>,
}

impl Samples for StoreSamples<'_> {
    type Error = StageError;
    fn sample(&self, index: u64) -> Result<Vec<u32>, StageError> {
        Ok(self.data.sample(index)?)
    }
}

impl PretrainStage {
    fn loop_config(c: &PretrainConfig) -> LoopConfig {
        LoopConfig {
            steps: c.steps,
            batch_size: c.batch_size,
            lr: c.lr,
            warmup_steps: c.warmup_steps.unwrap_or(c.steps / 10),
            cooldown_steps: c.cooldown_steps.unwrap_or(c.steps / 5),
            schedule: crate::trainer::ScheduleKind::Wsd,
            optimizer: c.optimizer.clone(),
            clip: c.clip,
            goldfish_k: c.goldfish.map(|g| g.k),
            goldfish_h: c.goldfish.map_or(0, |g| g.h),
        }
    }
}

impl Stage for PretrainStage {
    fn kind(&self) -> &'static str {
        "pretrain"
    }
    fn version(&self) -> u32 {
        // 2: AdEMAMix in the reference's fused in-place arithmetic (different bits from 1).
        2
    }
    fn summary(&self) -> &'static str {
        "trains the Apertus-style decoder (Goldfish loss, AdEMAMix, WSD) with hashed checkpoints"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let mut c: PretrainConfig = parse_params(params)?;
        let positive = [("steps", c.steps), ("batch_size", c.batch_size), ("checkpoint_every", c.checkpoint_every)];
        for (field, v) in positive {
            if v == 0 {
                return Err(ConfigError::at(&[field], "must be at least 1"));
            }
        }
        if c.threads == 0 {
            return Err(ConfigError::at(&["threads"], "must be at least 1"));
        }
        for (field, v) in [("lr", c.lr), ("clip", c.clip)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(ConfigError::at(&[field], format!("must be a positive number, got {v}")));
            }
        }
        c.warmup_steps = Some(c.warmup_steps.unwrap_or(c.steps / 10));
        c.cooldown_steps = Some(c.cooldown_steps.unwrap_or(c.steps / 5));
        if c.warmup_steps.unwrap_or(0) + c.cooldown_steps.unwrap_or(0) > c.steps {
            return Err(ConfigError::at(&["cooldown_steps"], "warmup and cooldown together exceed `steps`"));
        }
        c.optimizer.resolve(c.steps).map_err(|(field, m)| ConfigError::at(&["optimizer", field], m))?;
        if let Some(g) = c.goldfish
            && (g.k < 2 || g.h < 1)
        {
            return Err(ConfigError::at(&["goldfish"], "k must be at least 2 and h at least 1")
                .with_hint("`goldfish: null` trains on every label"));
        }
        // The shape is checked with placeholder data sizes; the real ones come from the tokens.
        let probe = model_config(&c.model, 2, 2);
        probe.check().map_err(|(field, m)| ConfigError::at(&["model", field], m))?;
        Ok(serde_json::to_value(c).expect("finite numbers encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Envelope
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![
            ("tokens", vec![OutputType::Tree]),
            ("order", vec![OutputType::File]),
            ("tokenizer", vec![OutputType::File]),
        ])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![
            ("model".into(), OutputType::Checkpoint),
            ("checkpoints".into(), OutputType::Tree),
            ("log".into(), OutputType::File),
        ]
    }
    fn seed_names(&self) -> &'static [&'static str] {
        &["init"]
    }
    fn locate_difference(
        &self,
        store: &Store,
        output: &str,
        expected: &OutputRef,
        actual: &OutputRef,
    ) -> Option<Located> {
        match output {
            "checkpoints" => {
                let entries = |d: &Digest| match prov_manifest::get_record(store, d).ok()? {
                    Record::Tree(t) => Some(t.entries),
                    _ => None,
                };
                let (e, a) = (entries(&expected.digest)?, entries(&actual.digest)?);
                let (ce, ca) = e.iter().zip(&a).find(|(x, y)| x.digest != y.digest)?;
                locate_checkpoint(store, ce.path.as_str(), &ce.digest, &ca.digest)
            }
            "model" => locate_checkpoint(store, "model", &expected.digest, &actual.digest),
            "log" => {
                let (e, a) = (store.read(&expected.digest).ok()?, store.read(&actual.digest).ok()?);
                let (e, a) = (decode_log(&e).ok()?, decode_log(&a).ok()?);
                let (line, data) = first_log_difference(&e, &a)?;
                Some(Located { lines: vec![line], data })
            }
            _ => None,
        }
    }
    fn locate_damage(&self, store: &Store, output: &str, recorded: &OutputRef) -> Option<Located> {
        let records: Vec<(String, Digest)> = match output {
            "checkpoints" => match prov_manifest::get_record(store, &recorded.digest).ok()? {
                Record::Tree(t) => t.entries.into_iter().map(|e| (e.path.as_str().to_owned(), e.digest)).collect(),
                _ => return None,
            },
            _ => return None,
        };
        records.iter().find_map(|(name, digest)| damaged_tensor(store, name, digest))
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: PretrainConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let inputs = PretrainInputs {
            tokens: cx.input("tokens")?.digest,
            order: cx.input("order")?.digest,
            tokenizer: cx.input("tokenizer")?.digest,
            seed: cx.seed("init")?,
        };
        let progress = Progress::new(cx.store, &cx.key);
        let done = progress.load(cx.store);
        let out = train(cx.store, &config, &inputs, &done, |so_far| progress.save(so_far))?;
        progress.clear();
        Ok(out)
    }
}

/// What a `pretrain` stage trains on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PretrainInputs {
    /// The token tree.
    pub tokens: Digest,
    /// The data order.
    pub order: Digest,
    /// The tokenizer.
    pub tokenizer: Digest,
    /// The initialisation seed.
    pub seed: u64,
}

/// Trains from scratch, or from the last of `resume` (checkpoint records this configuration
/// wrote, in step order) when it continues them; calls `on_checkpoint` with every checkpoint
/// so far after writing each one.
pub fn train(
    store: &Store,
    config: &PretrainConfig,
    inputs: &PretrainInputs,
    resume: &[Digest],
    mut on_checkpoint: impl FnMut(&[Digest]) -> Result<(), StageError>,
) -> Result<StageOutput, StageError> {
    let data = store_tokens(store, &inputs.tokens)?;
    let order = prov_dataset::tokens::read_order(store, &inputs.order)?;
    let meta = data.data.meta().clone();
    let needed = config.steps * config.batch_size;
    if (order.len() as u64) < needed {
        return Err(StageError::Config(
            ConfigError::at(
                &["steps"],
                format!(
                    "{} steps of {} samples need {needed} samples, the data order holds {}",
                    config.steps,
                    config.batch_size,
                    order.len()
                ),
            )
            .with_hint("lower `steps` or `batch_size`, or raise the `tokenize` stage's `epochs`"),
        ));
    }
    let seq_len = i64::try_from(meta.seq_len).map_err(|_| StageError::Input {
        input: "tokens".into(),
        message: format!("sequence length {} is too large", meta.seq_len),
    })?;
    let model_config = model_config(&config.model, i64::from(meta.vocab_size), seq_len);
    let loop_config = PretrainStage::loop_config(config);
    prov_torch::pin_threads(config.threads as usize);
    prov_torch::set_deterministic_algorithms(true);
    let mut trainer = Trainer::new(&model_config, &loop_config, inputs.seed);
    let hf = encode_value(&hf_config(&model_config, &meta.special_ids()));
    let config_digest = store.put_bytes(ObjectKind::Blob, &hf)?;
    // Nothing after initialisation draws a random number: the generator's seed is the
    // whole RNG state a resumed run needs (and it needs none, since it loads the weights).
    let rng = json!({ "init_seed": inputs.seed, "draws_after_init": 0 });
    let writer = CheckpointWriter { store, config: config_digest, tokenizer: inputs.tokenizer, rng };

    let mut written = continued(store, config, &writer, resume);
    if let Some((_, last)) = written.last() {
        restore(store, &mut trainer, last)?;
    }
    while trainer.step() < config.steps {
        trainer.train_step(&data, &order)?;
        let step = trainer.step();
        if step.is_multiple_of(config.checkpoint_every) || step == config.steps {
            let record = writer.record(&trainer, config.batch_size)?;
            let digest = put_record(store, &Record::Checkpoint(record.clone()))?;
            written.push((digest, record));
            on_checkpoint(&written.iter().map(|(d, _)| *d).collect::<Vec<_>>())?;
        }
    }
    outputs(store, &trainer, &written)
}

/// The prefix of `resume` that this run would have written itself: checkpoint records at
/// the configured steps, with this run's config, tokenizer and seed.
fn continued(
    store: &Store,
    config: &PretrainConfig,
    writer: &CheckpointWriter<'_>,
    resume: &[Digest],
) -> Vec<(Digest, CheckpointRecord)> {
    let mut out = Vec::new();
    for (i, digest) in resume.iter().enumerate() {
        let Ok(record) = crate::checkpoint::read_record(store, digest) else { break };
        let expected_step = ((i as u64 + 1) * config.checkpoint_every).min(config.steps);
        let rng = store.read(&record.rng).ok().and_then(|b| serde_json::from_slice::<Value>(&b).ok());
        let ours = record.step == expected_step
            && record.step < config.steps
            && record.config == writer.config
            && record.tokenizer == Some(writer.tokenizer)
            && rng.as_ref() == Some(&writer.rng)
            && record.log.is_some();
        if !ours {
            break;
        }
        out.push((*digest, record));
    }
    out
}

/// Puts the trainer in the state checkpoint `record` holds.
fn restore(store: &Store, trainer: &mut Trainer, record: &CheckpointRecord) -> Result<(), StageError> {
    let bad = |message: String| StageError::Input { input: "checkpoint".into(), message };
    let weights = NamedTensors::from_safetensors(&store.read(&record.weights)?).map_err(bad)?;
    crate::checkpoint::check_tensors(record, &weights).map_err(|e| bad(e.to_string()))?;
    let optimizer = NamedTensors::from_safetensors(&store.read(&record.optimizer)?).map_err(bad)?;
    let log_digest = record.log.ok_or_else(|| bad("the checkpoint has no log".into()))?;
    let log = decode_log(&store.read(&log_digest)?).map_err(bad)?;
    if log.len() as u64 != record.step {
        return Err(bad(format!("the log holds {} steps, the checkpoint is at step {}", log.len(), record.step)));
    }
    trainer.restore(&weights, &optimizer, log).map_err(bad)
}

/// The stage's outputs and statistics once training is done.
fn outputs(
    store: &Store,
    trainer: &Trainer,
    written: &[(Digest, CheckpointRecord)],
) -> Result<StageOutput, StageError> {
    let mut entries = Vec::with_capacity(written.len());
    for (digest, record) in written {
        let size =
            Record::Checkpoint(record.clone()).to_bytes().map_err(prov_manifest::StoredError::from)?.len() as u64;
        entries.push(TreeEntry {
            path: format!("step-{:06}.json", record.step).parse().expect("a plain name is a valid path"),
            digest: *digest,
            size,
            executable: false,
        });
    }
    let (model, _) = written.last().expect("the last step always writes a checkpoint");
    // Zero-padded steps sort in step order, as tree entries must.
    let tree = put_record(store, &Record::Tree(TreeRecord { schema: SCHEMA_VERSION, entries }))?;
    let log = store.put_bytes(ObjectKind::Blob, &trainer.log_bytes())?;
    let steps = trainer.log();
    let mut out = StageOutput::default();
    out.outputs.insert("model".into(), OutputRef { output_type: OutputType::Checkpoint, digest: *model });
    out.outputs.insert("checkpoints".into(), OutputRef { output_type: OutputType::Tree, digest: tree });
    out.outputs.insert("log".into(), OutputRef { output_type: OutputType::File, digest: log });
    let tokens: u64 = steps.iter().map(|l| l.tokens).sum();
    out.stats = BTreeMap::from([
        ("steps".into(), json!(trainer.step())),
        ("first_loss".into(), json!(steps[0].loss)),
        ("final_loss".into(), json!(steps[steps.len() - 1].loss)),
        ("tokens_trained".into(), json!(tokens)),
        ("goldfish_dropped_fraction".into(), json!(trainer.dropped_fraction())),
        ("parameters".into(), json!(trainer.weights().0.values().map(|(_, v)| v.len()).sum::<usize>())),
    ]);
    Ok(out)
}

/// The full model configuration from the stage's shape and the data's sizes.
pub fn model_config(p: &ModelParams, vocab_size: i64, seq_len: i64) -> ModelConfig {
    ModelConfig {
        vocab_size,
        hidden_size: p.hidden_size,
        intermediate_size: p.intermediate_size,
        num_hidden_layers: p.num_hidden_layers,
        num_attention_heads: p.num_attention_heads,
        num_key_value_heads: p.num_key_value_heads,
        rope_theta: p.rope_theta,
        rms_norm_eps: p.rms_norm_eps,
        init_std: p.init_std,
        max_position_embeddings: seq_len,
    }
}
