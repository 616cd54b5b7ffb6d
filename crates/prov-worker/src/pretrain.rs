//! Training a `pretrain` stage (its kind, configuration and forensics are
//! `prov_train::pretrain`'s): samples read from the store in the pinned data order, the
//! trainer stepped to the configured steps, a checkpoint record every `checkpoint_every`
//! steps, resumable from the checkpoints a killed run wrote.

use std::collections::BTreeMap;

use prov_dataset::tokens::TokenData;
use prov_exec::{ConfigError, StageContext, StageError, StageOutput, StageRun, parse_params};
use prov_manifest::{
    CheckpointRecord, OutputRef, OutputType, Record, SCHEMA_VERSION, TreeEntry, TreeRecord, encode_value, put_record,
};
use prov_store::{Digest, ObjectKind, Store};
use prov_torch::NamedTensors;
use prov_train::checkpoint::check_tensors;
use prov_train::loop_config::decode_log;
use prov_train::model_config::hf_config;
use prov_train::pretrain::{PretrainConfig, Progress, loop_config, model_config};
use serde::Serialize;
use serde_json::{Value, json};

use crate::checkpoint::CheckpointWriter;
use crate::trainer::{Samples, Trainer};

/// Runs `pretrain` stages.
pub struct PretrainRun;

impl StageRun for PretrainRun {
    fn kind(&self) -> &'static str {
        "pretrain"
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
    let loop_config = loop_config(config);
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
        let Ok(record) = prov_train::checkpoint::read_record(store, digest) else { break };
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
    check_tensors(record, &weights).map_err(|e| bad(e.to_string()))?;
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
