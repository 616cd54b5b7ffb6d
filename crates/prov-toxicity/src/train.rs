//! `toxicity-train`: training the classifier the `toxicity` filter scores with; its
//! configuration and what a lockfile pins of it. The training itself runs in the worker, which links libtorch
//! (`prov_worker::toxicity`, whose documentation gives the procedure).
//!
//! As in the Apertus report, one 2-layer MLP per language on document embeddings, trained on
//! labelled data balanced 50/50 with 10% held out, for 6 epochs, keeping the epoch with the
//! best validation loss. The embedding is [`crate::embed`]'s hashed character n-grams and the
//! weights are stored in the layout [`crate::model`] reads: the `toxicity` filter
//! scores with them in plain Rust, so only this stage depends on libtorch and its envelope.

use crate::embed::EmbeddingConfig;
use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{Determinism, OutputType};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The resolved configuration of a `toxicity-train` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// Metadata field holding each example's label.
    #[serde(default = "default_label_field")]
    pub label_field: String,
    /// Label values meaning toxic.
    #[serde(default = "default_positive")]
    pub positive: Vec<String>,
    /// Label values meaning not toxic.
    #[serde(default = "default_negative")]
    pub negative: Vec<String>,
    /// The embedding.
    #[serde(default)]
    pub embedding: EmbeddingConfig,
    /// Hidden units of the MLP.
    #[serde(default = "default_hidden")]
    pub hidden: u32,
    /// Passes over the training examples.
    #[serde(default = "default_epochs")]
    pub epochs: u32,
    /// Examples per optimizer step.
    #[serde(default = "default_batch_size")]
    pub batch_size: u32,
    /// Adam's learning rate.
    #[serde(default = "default_learning_rate")]
    pub learning_rate: f64,
    /// Share of the balanced examples held out for validation.
    #[serde(default = "default_holdout")]
    pub holdout: f64,
    /// Fewest examples of each class a language needs to get a classifier.
    #[serde(default = "default_min_per_class")]
    pub min_per_class: u32,
    /// libtorch intra-op threads. The weights differ per thread count, so it is pinned here,
    /// in the lockfile, rather than taken from the run; one thread is also the fastest for a
    /// model this small on a loaded machine.
    #[serde(default = "default_threads")]
    pub threads: u32,
}

fn default_label_field() -> String {
    "label".into()
}
fn default_positive() -> Vec<String> {
    vec!["hateful".into()]
}
fn default_negative() -> Vec<String> {
    vec!["non-hateful".into()]
}
fn default_hidden() -> u32 {
    32
}
fn default_epochs() -> u32 {
    6
}
fn default_batch_size() -> u32 {
    32
}
fn default_learning_rate() -> f64 {
    1e-3
}
fn default_holdout() -> f64 {
    0.1
}
fn default_min_per_class() -> u32 {
    50
}
fn default_threads() -> u32 {
    1
}

/// Trains the per-language toxicity classifiers.
pub struct ToxicityTrainStage;

impl Stage for ToxicityTrainStage {
    fn kind(&self) -> &'static str {
        "toxicity-train"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "train per-language toxicity classifiers (2-layer MLP on hashed character n-grams) with libtorch; output a checkpoint"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let config: TrainConfig = parse_params(params)?;
        if let Some(p) = config.embedding.problem() {
            return Err(ConfigError::at(&["embedding"], p));
        }
        if !(config.holdout > 0.0 && config.holdout < 1.0) {
            return Err(ConfigError::at(&["holdout"], format!("must be between 0 and 1, got {}", config.holdout)));
        }
        if !(config.learning_rate > 0.0 && config.learning_rate.is_finite()) {
            return Err(ConfigError::at(&["learning_rate"], "must be a positive number"));
        }
        for (field, v) in [("hidden", config.hidden), ("epochs", config.epochs), ("batch_size", config.batch_size)] {
            if v == 0 {
                return Err(ConfigError::at(&[field], "must be at least 1"));
            }
        }
        prov_exec::check_threads(u64::from(config.threads))?;
        if config.positive.is_empty() || config.negative.is_empty() {
            return Err(ConfigError::at(&["positive"], "both `positive` and `negative` need at least one label"));
        }
        if let Some(l) = config.positive.iter().find(|l| config.negative.contains(l)) {
            return Err(ConfigError::at(&["negative"], format!("label `{l}` is both positive and negative")));
        }
        Ok(serde_json::to_value(config).expect("numbers and strings encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        // Reductions in libtorch depend on the thread count and the CPU kernels.
        Determinism::Envelope
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("examples", vec![OutputType::Dataset])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("model".into(), OutputType::Checkpoint)]
    }
    fn seed_names(&self) -> &'static [&'static str] {
        &["toxicity"]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        prov_exec::run_in_worker(cx, self)
    }
}
