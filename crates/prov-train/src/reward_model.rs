//! AFM's reward model (§4.3.2, Appendix E.1) as a lockfile sees it: `reward-model` trains a
//! checkpoint's decoder with a score head and four grade heads on graded preference data
//! ([`crate::preference_data`]); `reward-model-score` scores a completions file with one and
//! writes a rewards file (`prov_reward::preference`'s format) that `best-of-n`, `dpo` and
//! `qrpo` read. The heads, the loss and both runs are the worker's
//! (`prov_worker::reward_model`); the book's "The AFM recipe" states them operation by
//! operation.
//!
//! A reward model is a checkpoint whose `config.json` carries `reward_heads`
//! ([`RewardHeads`]) and whose weights add the heads' tensors under `reward.`.

use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{Determinism, OutputType};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::post::{self, LoopParams};
use crate::preference_data::{GRADE_LEVELS, GRADES};

/// The heads a reward model's `config.json` declares under `reward_heads`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RewardHeads {
    /// The grade heads, in order ([`GRADES`]).
    pub grades: Vec<String>,
    /// Levels per grade ([`GRADE_LEVELS`]).
    pub levels: u8,
    /// Width of each grade head's hidden layer.
    pub grade_hidden: i64,
}

impl RewardHeads {
    /// The heads of Appendix E.1 with grade heads `grade_hidden` wide.
    pub fn afm(grade_hidden: i64) -> Self {
        Self { grades: GRADES.iter().map(|g| (*g).to_owned()).collect(), levels: GRADE_LEVELS, grade_hidden }
    }

    /// The heads a checkpoint's `config.json` declares: `None` for a language model, an
    /// error naming the field for heads Provenant does not build.
    pub fn from_hf_config(config: &Value) -> Result<Option<Self>, String> {
        let Some(v) = config.get("reward_heads") else { return Ok(None) };
        let heads: Self = serde_json::from_value(v.clone()).map_err(|e| format!("`reward_heads`: {e}"))?;
        if heads != Self::afm(heads.grade_hidden) || !(1..=MAX_GRADE_HIDDEN).contains(&heads.grade_hidden) {
            return Err(format!(
                "`reward_heads` is {v}; Provenant builds the grades {GRADES:?} with {GRADE_LEVELS} levels and a `grade_hidden` of 1 to {MAX_GRADE_HIDDEN}"
            ));
        }
        Ok(Some(heads))
    }
}

/// The `reward-model` stage's own settings, beside [`LoopParams`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RewardModelConfig {
    /// `λ`, the weight of the grade cross-entropies (the report gives none).
    #[serde(default = "default_grade_weight")]
    pub grade_weight: f64,
    /// Width of each grade head's hidden layer; the checkpoint's `hidden_size` when absent.
    #[serde(default)]
    pub grade_hidden: Option<i64>,
}

fn default_grade_weight() -> f64 {
    1.0
}

/// The stage's own fields.
pub const OWN: &[&str] = &["grade_weight", "grade_hidden"];

/// The widest grade head: far beyond any model's width, small enough that the heads' matrices
/// are allocated rather than refused by libtorch mid-run.
pub const MAX_GRADE_HIDDEN: i64 = 1 << 16;

/// The loop's defaults for `reward-model`.
pub fn defaults() -> LoopParams {
    LoopParams {
        steps: 100,
        batch_size: 8,
        lr: 1e-4,
        warmup_steps: 0,
        schedule: post::PostSchedule::Linear,
        optimizer: post::fine_tuning_optimizer(),
        clip: 1.0,
        threads: 1,
        device: prov_exec::ComputeDevice::Cpu,
    }
}

/// The `reward-model` stage kind.
pub struct RewardModelStage;

impl Stage for RewardModelStage {
    fn kind(&self) -> &'static str {
        "reward-model"
    }
    // 2: rows are checked (ids decode to their text, fit the window) before training.
    fn version(&self) -> u32 {
        2
    }
    fn summary(&self) -> &'static str {
        "trains AFM's reward model (a score and four grade heads) on graded preference pairs"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let (_, own, resolved) = post::parse_stage_params::<RewardModelConfig>(params, OWN, &defaults())?;
        if !(own.grade_weight.is_finite() && own.grade_weight >= 0.0) {
            return Err(ConfigError::at(&["grade_weight"], format!("must be 0 or more, got {}", own.grade_weight)));
        }
        if own.grade_hidden.is_some_and(|h| !(1..=MAX_GRADE_HIDDEN).contains(&h)) {
            return Err(ConfigError::at(&["grade_hidden"], format!("must be 1 to {MAX_GRADE_HIDDEN}")));
        }
        Ok(resolved)
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Envelope
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![
            ("model", vec![OutputType::Checkpoint]),
            ("preferences", vec![OutputType::File, OutputType::Source]),
        ])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("model".into(), OutputType::Checkpoint), ("log".into(), OutputType::File)]
    }
    fn seed_names(&self) -> &'static [&'static str] {
        &["heads", "order"]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        prov_exec::run_in_worker(cx, self)
    }
}

/// The `reward-model-score` stage's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoreConfig {
    /// libtorch's intra-op threads, pinned before the stage computes.
    #[serde(default = "crate::post::one_thread")]
    pub threads: u32,
    /// Where libtorch computes: `cpu` or `cuda:N`.
    #[serde(default)]
    pub device: prov_exec::ComputeDevice,
}

/// The `reward-model-score` stage kind.
pub struct RewardModelScoreStage;

impl Stage for RewardModelScoreStage {
    fn kind(&self) -> &'static str {
        "reward-model-score"
    }
    // 2: rows are checked (ids decode to their text, fit the window); non-finite scores refused.
    fn version(&self) -> u32 {
        2
    }
    fn summary(&self) -> &'static str {
        "scores every completion of a completions file with a reward model"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let c: ScoreConfig = parse_params(params)?;
        prov_exec::check_threads(u64::from(c.threads))?;
        Ok(serde_json::to_value(c).expect("the config encodes"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Envelope
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![
            ("model", vec![OutputType::Checkpoint]),
            ("completions", vec![OutputType::File, OutputType::Source]),
        ])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("rewards".into(), OutputType::File)]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        prov_exec::run_in_worker(cx, self)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn heads_are_read_from_a_config_and_checked() {
        assert_eq!(RewardHeads::from_hf_config(&json!({"model_type": "qwen3"})), Ok(None));
        let heads = RewardHeads::afm(16);
        let config = json!({"reward_heads": heads});
        assert_eq!(RewardHeads::from_hf_config(&config), Ok(Some(heads)));
        let odd = json!({"reward_heads": {"grades": ["verbosity"], "levels": 3, "grade_hidden": 16}});
        assert!(RewardHeads::from_hf_config(&odd).unwrap_err().contains("instruction_following"));
        let zero = json!({"reward_heads": RewardHeads::afm(0)});
        assert!(RewardHeads::from_hf_config(&zero).is_err());
    }

    #[test]
    fn settings_are_checked_by_name() {
        let c = RewardModelStage.resolve_config(&json!({"steps": 3})).unwrap();
        assert_eq!((c["grade_weight"].as_f64(), c["steps"].as_u64()), (Some(1.0), Some(3)));
        assert_eq!(RewardModelStage.resolve_config(&json!({"grade_weight": -1})).unwrap_err().path, ["grade_weight"]);
        assert_eq!(RewardModelStage.resolve_config(&json!({"grade_hidden": 0})).unwrap_err().path, ["grade_hidden"]);
        assert!(RewardModelStage.resolve_config(&json!({"lambda": 1})).is_err());
    }
}
