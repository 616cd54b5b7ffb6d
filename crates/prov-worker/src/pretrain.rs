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
use prov_train::phases::{self, PhaseSlots, Plan, Slot};
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
        let mut data = BTreeMap::new();
        if config.phases.is_empty() {
            data.insert(String::new(), (cx.input("tokens")?.digest, cx.input("order")?.digest));
        } else {
            for source in phases::sources(&config.phases) {
                let tokens = cx.input(&phases::tokens_input(&source))?.digest;
                let order = cx.input(&phases::order_input(&source))?.digest;
                data.insert(source, (tokens, order));
            }
        }
        let teacher = match config.distillation {
            Some(_) => Some(cx.input("teacher")?.digest),
            None => None,
        };
        let inputs = PretrainInputs { data, tokenizer: cx.input("tokenizer")?.digest, seed: cx.seed("init")?, teacher };
        let progress = Progress::new(cx.store, &cx.key);
        let done = progress.load(cx.store);
        let out = train(cx.store, &config, &inputs, &done, |so_far| progress.save(so_far))?;
        progress.clear();
        Ok(out)
    }
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PretrainInputs {
    /// Token trees and their data orders, by source: the one source of an unphased run is
    /// named `""`.
    pub data: BTreeMap<String, (Digest, Digest)>,
    /// The tokenizer.
    pub tokenizer: Digest,
    /// The initialisation seed.
    pub seed: u64,
    /// The teacher's checkpoint, when the stage distills.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub teacher: Option<Digest>,
}

/// The samples of each step: one token tree in one data order, or a phased run's sources.
struct Feed<'a> {
    /// Each source's tokens and data order.
    sources: BTreeMap<String, (StoreSamples<'a>, Vec<u64>)>,
    /// The phased run's plan; `None` for an unphased run.
    plan: Option<Plan>,
    batch_size: u64,
    /// The phase being read, the slots read of it, and the rest of its slots.
    reading: Option<(usize, u64, PhaseSlots)>,
}

impl<'a> Feed<'a> {
    fn open(store: &'a Store, config: &PretrainConfig, inputs: &PretrainInputs) -> Result<Self, StageError> {
        let mut sources = BTreeMap::new();
        for (name, (tokens, order)) in &inputs.data {
            let data = StoreSamples { data: TokenData::open(store, tokens)? };
            let order = prov_dataset::tokens::read_order(store, order)?;
            sources.insert(name.clone(), (data, order));
        }
        let plan = (!config.phases.is_empty()).then(|| Plan::new(&config.phases, config.batch_size));
        let feed = Self { sources, plan, batch_size: config.batch_size, reading: None };
        feed.check(config)?;
        Ok(feed)
    }

    /// Every source holds the positions the run reads, and all share one vocabulary.
    fn check(&self, config: &PretrainConfig) -> Result<(), StageError> {
        let needed: BTreeMap<String, u64> = match &self.plan {
            Some(plan) => plan.needed().clone(),
            None => BTreeMap::from([(String::new(), config.steps * config.batch_size)]),
        };
        for (name, (_, order)) in &self.sources {
            let want = needed.get(name).copied().unwrap_or(0);
            if (order.len() as u64) < want {
                let input = if name.is_empty() { "order".to_owned() } else { phases::order_input(name) };
                return Err(StageError::Config(
                    ConfigError::at(
                        &["steps"],
                        format!(
                            "{} steps of {} samples read {want} samples of `{input}`, its data order holds {}",
                            config.steps,
                            config.batch_size,
                            order.len()
                        ),
                    )
                    .with_hint("lower `steps` or `batch_size`, or raise the `tokenize` stage's `epochs`"),
                ));
            }
        }
        let metas: Vec<(&String, &prov_dataset::tokens::TokenMeta)> =
            self.sources.iter().map(|(n, (d, _))| (n, d.data.meta())).collect();
        if let Some(((first, a), rest)) = metas.split_first() {
            for (other, b) in rest {
                if (b.vocab_size, &b.special) != (a.vocab_size, &a.special) {
                    return Err(StageError::Input {
                        input: phases::tokens_input(other),
                        message: format!(
                            "its vocabulary ({} tokens, special {:?}) is not `{}`'s ({} tokens, special {:?}): \
                             one tokenizer must make every source",
                            b.vocab_size,
                            b.special,
                            phases::tokens_input(first),
                            a.vocab_size,
                            a.special
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// The sequence length of the samples of phase `phase` (0 for an unphased run).
    fn seq_len(&self, phase: usize) -> Result<u64, StageError> {
        let names: Vec<&String> = match &self.plan {
            Some(plan) => plan.phases()[phase].mixture.keys().collect(),
            None => self.sources.keys().collect(),
        };
        let lens: Vec<(&String, u64)> = names.iter().map(|n| (*n, self.sources[*n].0.data.meta().seq_len)).collect();
        if let Some((other, len)) = lens.iter().find(|(_, l)| *l != lens[0].1) {
            return Err(StageError::Input {
                input: phases::tokens_input(other),
                message: format!(
                    "its samples are {len} tokens, `{}`'s {}: a phase's sources must share one sequence length",
                    phases::tokens_input(lens[0].0),
                    lens[0].1
                ),
            });
        }
        Ok(lens[0].1)
    }

    /// The phase of step `step` (from 1).
    fn phase_of(&self, step: u64) -> usize {
        self.plan.as_ref().and_then(|p| p.phase_of(step)).map_or(0, |(i, _)| i)
    }

    /// The samples of step `step` (from 1).
    fn rows(&mut self, step: u64) -> Result<Vec<Vec<u32>>, StageError> {
        let b = usize::try_from(self.batch_size).expect("a batch fits in memory");
        let Some(plan) = &self.plan else {
            let (data, order) = &self.sources[""];
            let from = usize::try_from(step - 1).expect("a step fits in usize") * b;
            return order[from..from + b].iter().map(|&i| data.sample(i)).collect();
        };
        let (phase, before) = plan.phase_of(step).ok_or_else(|| {
            StageError::Config(ConfigError::at(&["phases"], format!("the phases do not reach step {step}")))
        })?;
        let from = (step - before - 1) * self.batch_size;
        // Training reads the slots in order; a resumed run starts past some of them.
        if self.reading.as_ref().is_none_or(|(p, read, _)| (*p, *read) != (phase, from)) {
            let mut slots = plan.phase_slots(phase);
            if from > 0 {
                slots.nth(usize::try_from(from - 1).expect("a slot index fits in usize"));
            }
            self.reading = Some((phase, from, slots));
        }
        let (_, read, slots) = self.reading.as_mut().expect("just set");
        *read += self.batch_size;
        let batch: Vec<Slot> = slots.take(b).collect();
        batch
            .iter()
            .map(|slot| {
                let (data, order) = &self.sources[&slot.source];
                data.sample(order[usize::try_from(slot.position).expect("checked against the order")])
            })
            .collect()
    }
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
    let mut feed = Feed::open(store, config, inputs)?;
    let meta = feed.sources.values().next().expect("a run has a source").0.data.meta().clone();
    // Each phase's model configuration (its RoPE base and context) and stored `config.json`.
    let phase_count = config.phases.len().max(1);
    let mut phase_models = Vec::with_capacity(phase_count);
    for phase in 0..phase_count {
        let seq_len = feed.seq_len(phase)?;
        let seq_len = i64::try_from(seq_len).map_err(|_| StageError::Input {
            input: "tokens".into(),
            message: format!("sequence length {seq_len} is too large"),
        })?;
        let mut model = config.model.clone();
        if let Some(theta) = config.phases.get(phase).and_then(|p| p.rope_theta) {
            model.rope_theta = theta;
        }
        let model_config = model_config(&model, i64::from(meta.vocab_size), seq_len);
        let hf = encode_value(&hf_config(&model_config, &meta.special_ids()));
        let digest = store.put_bytes(ObjectKind::Blob, &hf)?;
        phase_models.push((model_config, digest));
    }
    let loop_config = loop_config(config);
    prov_torch::pin_threads(config.threads as usize);
    prov_torch::set_deterministic_algorithms(true);
    let teacher = match (&inputs.teacher, config.distillation) {
        (Some(digest), Some(d)) => {
            Some((load_teacher(store, digest, inputs.tokenizer, &phase_models)?, d.teacher_weight))
        }
        _ => None,
    };
    let mut trainer = Trainer::new(&phase_models[0].0, &loop_config, inputs.seed);
    // Nothing after initialisation draws a random number: the generator's seed is the
    // whole RNG state a resumed run needs (and it needs none, since it loads the weights).
    let rng = json!({ "init_seed": inputs.seed, "draws_after_init": 0 });
    let mut writer = CheckpointWriter { store, config: phase_models[0].1, tokenizer: inputs.tokenizer, rng };

    let config_at = |step: u64| phase_models[feed.phase_of(step)].1;
    let mut written = continued(store, config, &writer, &config_at, resume);
    if let Some((_, last)) = written.last() {
        restore(store, &mut trainer, last)?;
    }
    while trainer.step() < config.steps {
        let next = trainer.step() + 1;
        let phase = feed.phase_of(next);
        let (model_config, config_digest) = &phase_models[phase];
        trainer.model_mut().extend_context(model_config.rope_theta, model_config.max_position_embeddings);
        writer.config = *config_digest;
        let rows = feed.rows(next)?;
        match &teacher {
            Some((t, weight)) => trainer.train_rows_distilled(&rows, &t.model, *weight),
            None => trainer.train_rows(&rows),
        };
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

/// The teacher of a distillation run: a checkpoint trained with the student's tokenizer and of
/// its vocabulary, whose context covers every phase's sequence length (a damaged checkpoint is
/// an integrity failure).
fn load_teacher(
    store: &Store,
    digest: &Digest,
    tokenizer: Digest,
    phase_models: &[(prov_train::model_config::ModelConfig, Digest)],
) -> Result<crate::checkpoint::LoadedCheckpoint, StageError> {
    let teacher =
        crate::checkpoint::load(store, digest).map_err(|e| crate::fine_tuning::checkpoint_error("teacher", e))?;
    let bad = |message: String| StageError::Input { input: "teacher".into(), message };
    let student = &phase_models[0].0;
    if teacher.record.tokenizer != Some(tokenizer) {
        return Err(bad(format!(
            "the teacher was trained with tokenizer {}, the student's tokens are {tokenizer}'s: distill with the teacher's tokenizer",
            teacher.record.tokenizer.map_or_else(|| "none recorded".to_owned(), |t| format!("`{t}`"))
        )));
    }
    if teacher.config.vocab_size != student.vocab_size {
        return Err(bad(format!(
            "the teacher has a vocabulary of {} tokens, the student's tokens {}: distill with the teacher's tokenizer",
            teacher.config.vocab_size, student.vocab_size
        )));
    }
    let longest = phase_models.iter().map(|(m, _)| m.max_position_embeddings).max().unwrap_or(0);
    if teacher.config.max_position_embeddings < longest {
        return Err(bad(format!(
            "the teacher was trained on sequences of {} tokens, the student reads {longest}",
            teacher.config.max_position_embeddings
        )));
    }
    Ok(teacher)
}

/// The prefix of `resume` that this run would have written itself: checkpoint records at
/// the configured steps, with this run's config, tokenizer and seed.
fn continued(
    store: &Store,
    config: &PretrainConfig,
    writer: &CheckpointWriter<'_>,
    config_at: &dyn Fn(u64) -> Digest,
    resume: &[Digest],
) -> Vec<(Digest, CheckpointRecord)> {
    let mut out = Vec::new();
    for (i, digest) in resume.iter().enumerate() {
        let Ok(record) = prov_train::checkpoint::read_record(store, digest) else { break };
        let expected_step = ((i as u64 + 1) * config.checkpoint_every).min(config.steps);
        let rng = store.read(&record.rng).ok().and_then(|b| serde_json::from_slice::<Value>(&b).ok());
        let ours = record.step == expected_step
            && record.step < config.steps
            && record.config == config_at(record.step)
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use prov_manifest::Finite;
    use prov_train::phases::PhaseParams;

    fn phase(name: &str, steps: u64, theta: Option<f64>) -> PhaseParams {
        PhaseParams { rope_theta: theta, ..PhaseParams::new(name, steps, &[("web", 1.0)]) }
    }

    /// A killed phased run continues from the checkpoints it wrote, each written with its own
    /// phase's `config.json`: a checkpoint of the last phase (another RoPE base) is taken under
    /// that phase's configuration, and the prefix stops at the first checkpoint that is not
    /// this run's (here: one that names the first phase's configuration in the last phase).
    #[test]
    fn a_phased_run_resumes_from_checkpoints_of_every_phase() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let mut config: PretrainConfig = serde_json::from_value(json!({"checkpoint_every": 5})).unwrap();
        config.phases = vec![phase("one", 10, None), phase("two", 10, Some(1e6))];
        prov_train::phases::resolve(&mut config.phases, config.model.rope_theta).unwrap();
        config.steps = 20;
        let put = |bytes: &[u8]| store.put_bytes(ObjectKind::Blob, bytes).unwrap();
        let (first_config, last_config) = (put(b"{\"phase\":1}"), put(b"{\"phase\":2}"));
        let rng = json!({ "init_seed": 7, "draws_after_init": 0 });
        let writer = CheckpointWriter { store: &store, config: first_config, tokenizer: put(b"tok"), rng: rng.clone() };
        let config_at = |step: u64| if step <= 10 { first_config } else { last_config };
        let record = |step: u64, config: Digest| {
            let record = CheckpointRecord {
                schema: SCHEMA_VERSION,
                step,
                config,
                weights: put(b"w"),
                tensors: BTreeMap::new(),
                optimizer: put(b"o"),
                rng: put(&encode_value(&rng)),
                data_position: step,
                loss: Finite::new(1.0),
                log: Some(put(b"")),
                tokenizer: Some(writer.tokenizer),
                palette: None,
            };
            put_record(&store, &Record::Checkpoint(record)).unwrap()
        };
        let written = [record(5, first_config), record(10, first_config), record(15, last_config)];
        let taken = continued(&store, &config, &writer, &config_at, &written);
        assert_eq!(taken.iter().map(|(d, _)| *d).collect::<Vec<_>>(), written);
        // A checkpoint in the last phase with the first phase's configuration is not this run's.
        let foreign = [written[0], written[1], record(15, first_config)];
        assert_eq!(continued(&store, &config, &writer, &config_at, &foreign).len(), 2);
    }
}
