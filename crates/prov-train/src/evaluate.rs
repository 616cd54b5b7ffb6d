//! `chrf-eval`: how well a model translates held-out examples, against a baseline model,
//! by chrF (sacrebleu's, through `prov-reward`).
//!
//! Inputs: `model` and `baseline` (checkpoints with the same tokenizer; e.g. the aligned model
//! and the SFT model it started from) and `examples` (chat examples, e.g. `translation-pairs`'
//! `eval`). Each model answers each prompt greedily (temperature 0: the most likely token,
//! the lowest id on ties) up to `<|end|>` or `max_new_tokens`. Output `translations`: one line
//! per example with the reference and each model's answer and sentence chrF. Statistics:
//! corpus chrF of each (`chrf`, `baseline_chrf`) and their difference, which `prov run`
//! prints in its summary.

use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{Determinism, OutputType};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `chrf-eval` stage's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalConfig {
    /// Longest answer, in tokens.
    #[serde(default = "default_max_new_tokens")]
    pub max_new_tokens: u64,
    /// libtorch's intra-op threads, pinned before the stage computes: its bits depend on them, so
    /// they are configuration (in the stage key), beside the envelope's `ATen` capability.
    #[serde(default = "crate::post::one_thread")]
    pub threads: u32,
    /// Where libtorch computes: `cpu` or `cuda:N`. `prov lock` writes it into the lockfile,
    /// `cpu` when the recipe names none: a GPU is used only where a recipe names it.
    #[serde(default)]
    pub device: prov_exec::ComputeDevice,
}

fn default_max_new_tokens() -> u64 {
    160
}

/// The `chrf-eval` stage kind.
pub struct ChrfEvalStage;

impl Stage for ChrfEvalStage {
    fn kind(&self) -> &'static str {
        "chrf-eval"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "scores a model's greedy translations of held-out examples by chrF, beside a baseline's"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let c: EvalConfig = parse_params(params)?;
        if c.max_new_tokens == 0 {
            return Err(ConfigError::at(&["max_new_tokens"], "must be at least 1"));
        }
        prov_exec::check_threads(u64::from(c.threads))?;
        Ok(serde_json::to_value(c).expect("the config encodes"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Envelope
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![
            ("model", vec![OutputType::Checkpoint]),
            ("baseline", vec![OutputType::Checkpoint]),
            ("examples", vec![OutputType::File, OutputType::Source]),
        ])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("translations".into(), OutputType::File)]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        prov_exec::run_in_worker(cx, self)
    }
}
