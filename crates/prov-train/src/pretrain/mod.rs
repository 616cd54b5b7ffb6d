//! `pretrain`: trains the Apertus-style decoder on packed token samples in a pinned data
//! order, with the Goldfish loss, `AdEMAMix` and the WSD schedule, and writes a checkpoint
//! every `checkpoint_every` steps and at the last step.
//!
//! Inputs: `tokens` (the `tokenize` stage's token tree), `order` (its data order) and
//! `tokenizer` (the tokenizer that made them, kept for export). A phased run (`phases`,
//! EuroLLM's schedule: [`crate::phases`]) takes, instead of `tokens` and `order`, a pair
//! `S-tokens` and `S-order` for every source `S` its phases' mixtures name. Outputs: `model`, the last
//! checkpoint; `checkpoints`, a tree naming every checkpoint record by its step
//! (`step-000100.json`); `log`, the per-step log (JSON Lines: step, loss, grad norm, learning rate,
//! labels counted, labels dropped).
//!
//! The class is `envelope`: libtorch's results depend on the thread count and the `ATen` CPU
//! capability, which the executor pins and records.
//!
//! Its configuration and defaults are in `config`, resuming a killed stage in `progress`, and
//! locating where a replay departs from its recording in `forensics`. The training itself
//! runs in the worker (`prov_worker::pretrain`).

mod config;
mod forensics;
mod progress;

pub use config::{DistillationParams, GoldfishParams, ModelParams, PretrainConfig};
pub use progress::{Progress, progress_path};

use prov_exec::{ConfigError, InputSpec, Located, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{Determinism, OutputRef, OutputType, Record};
use prov_store::{Digest, Store};
use serde_json::Value;

use self::forensics::{damaged_tensor, first_log_difference, locate_checkpoint};
use crate::loop_config::{LoopConfig, ScheduleKind, decode_log};
use crate::model_config::ModelConfig;
use crate::phases::{self, PhaseParams};

/// The most samples (`steps × batch_size`) a run may read: 2^48, far past any corpus a
/// recipe names, and small enough that positions and slot counts never wrap.
pub const MAX_SAMPLES: u64 = 1 << 48;

/// The `pretrain` stage kind.
pub struct PretrainStage;

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
        prov_exec::check_threads(u64::from(c.threads))?;
        for (field, v) in [("lr", c.lr), ("clip", c.clip)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(ConfigError::at(&[field], format!("must be a positive number, got {v}")));
            }
        }
        if c.phases.is_empty() {
            c.warmup_steps = Some(c.warmup_steps.unwrap_or(c.steps / 10));
            c.cooldown_steps = Some(c.cooldown_steps.unwrap_or(c.steps / 5));
            if c.warmup_steps.unwrap_or(0) + c.cooldown_steps.unwrap_or(0) > c.steps {
                return Err(ConfigError::at(&["cooldown_steps"], "warmup and cooldown together exceed `steps`"));
            }
        } else {
            resolve_phases(&mut c, params)?;
        }
        // Every sample a run reads is counted in u64 (and, in a phased run, planned slot by
        // slot): a product past it would wrap.
        if c.steps.checked_mul(c.batch_size).is_none_or(|n| n > MAX_SAMPLES) {
            return Err(ConfigError::at(
                &["steps"],
                format!(
                    "{} steps of {} samples exceed the {MAX_SAMPLES} samples a run may read",
                    c.steps, c.batch_size
                ),
            ));
        }
        c.optimizer.resolve(c.steps).map_err(|(field, m)| ConfigError::at(&["optimizer", field], m))?;
        if let Some(g) = c.goldfish
            && (g.k < 2 || g.h < 1)
        {
            return Err(ConfigError::at(&["goldfish"], "k must be at least 2 and h at least 1")
                .with_hint("`goldfish: null` trains on every label"));
        }
        if let Some(d) = c.distillation {
            if !(d.teacher_weight > 0.0 && d.teacher_weight <= 1.0) {
                return Err(ConfigError::at(
                    &["distillation", "teacher_weight"],
                    format!("must be in (0, 1], got {}", d.teacher_weight),
                )
                .with_hint("the report's is 0.9; without distillation leave `distillation` out"));
            }
            if c.goldfish.is_some() {
                return Err(ConfigError::at(&["goldfish"], "distillation trains on every label")
                    .with_hint("set `goldfish: null` in a distillation stage"));
            }
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
    fn inputs_for(&self, config: &Value) -> InputSpec {
        let phases: Vec<PhaseParams> =
            config.get("phases").and_then(|p| serde_json::from_value(p.clone()).ok()).unwrap_or_default();
        let distilled = config.get("distillation").is_some_and(|d| !d.is_null());
        if phases.is_empty() && !distilled {
            return self.inputs();
        }
        let mut named = vec![("tokenizer".to_owned(), vec![OutputType::File])];
        if phases.is_empty() {
            named.push(("tokens".to_owned(), vec![OutputType::Tree]));
            named.push(("order".to_owned(), vec![OutputType::File]));
        }
        for source in phases::sources(&phases) {
            named.push((phases::tokens_input(&source), vec![OutputType::Tree]));
            named.push((phases::order_input(&source), vec![OutputType::File]));
        }
        if distilled {
            named.push(("teacher".to_owned(), vec![OutputType::Checkpoint]));
        }
        InputSpec::Configured(named)
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
        prov_exec::run_in_worker(cx, self)
    }
}

/// Checks and completes `phases` (their total is the run's `steps`; they set the schedule, so
/// WSD's `warmup_steps` and `cooldown_steps` are refused).
fn resolve_phases(c: &mut PretrainConfig, params: &Value) -> Result<(), ConfigError> {
    for field in ["warmup_steps", "cooldown_steps"] {
        if params.get(field).is_some() {
            return Err(ConfigError::at(&[field], "a phased run takes its schedule from `phases`")
                .with_hint("give the first phase `warmup_steps`, and each phase `lr_end`"));
        }
    }
    c.warmup_steps = None;
    c.cooldown_steps = None;
    let total = phases::resolve(&mut c.phases, c.model.rope_theta).map_err(|e| {
        let path: Vec<&str> = std::iter::once("phases").chain(e.path.iter().map(String::as_str)).collect();
        ConfigError::at(&path, e.message)
    })?;
    if params.get("steps").is_some() && c.steps != total {
        return Err(ConfigError::at(&["steps"], format!("is {}, but the phases' steps add up to {total}", c.steps))
            .with_hint("leave `steps` out of a phased run: it is the phases' sum"));
    }
    c.steps = total;
    Ok(())
}

/// The training loop's configuration for a resolved `pretrain` configuration: the WSD
/// schedule, or the phases' segments, with Goldfish when configured.
pub fn loop_config(c: &PretrainConfig) -> LoopConfig {
    let phased = !c.phases.is_empty();
    LoopConfig {
        steps: c.steps,
        batch_size: c.batch_size,
        lr: c.lr,
        warmup_steps: if phased { 0 } else { c.warmup_steps.unwrap_or(c.steps / 10) },
        cooldown_steps: if phased { 0 } else { c.cooldown_steps.unwrap_or(c.steps / 5) },
        schedule: if phased { ScheduleKind::Phased } else { ScheduleKind::Wsd },
        optimizer: c.optimizer.clone(),
        clip: c.clip,
        goldfish_k: c.goldfish.map(|g| g.k),
        goldfish_h: c.goldfish.map_or(0, |g| g.h),
        phases: phases::rates(&c.phases, c.lr),
    }
}

/// The full model configuration from the stage's shape and the data's sizes.
pub fn model_config(p: &ModelParams, vocab_size: i64, seq_len: i64) -> ModelConfig {
    ModelConfig {
        architecture: p.architecture,
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
