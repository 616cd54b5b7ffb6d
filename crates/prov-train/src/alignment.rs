//! `dpo` and `qrpo`: preference alignment from pinned reference completions and rewards, with
//! the losses of `prov_worker::preference_loss`, which runs them.
//!
//! Inputs: `model` (the reference policy, which is also where the trained policy starts),
//! `completions` (a `sample-completions` file) and `rewards` (a `reward` file for it). Outputs:
//! `model` and `log`; `dpo` also writes `pairs`, the chosen/rejected pair of each prompt.
//!
//! - `qrpo` trains on every completion, with its quantile reward among its prompt's rewards
//!   (`prov_reward::preference::quantile_reward`); `beta` 5 and length normalisation by
//!   default, as the Apertus report. A step takes `batch_size` completions.
//! - `dpo` trains on each prompt's pair: the first completion with the highest reward against
//!   the first with the lowest (`preference_pair`); prompts whose rewards are all equal have no
//!   pair. `beta` 0.1 by default. A step takes `batch_size` pairs.
//!
//! Each step's items come from a seeded data order (seed `order`), epoch after epoch. A batch
//! is the items' `prompt ids + completion ids`, padded on the right; the policy's and the
//! frozen reference's log-probabilities of the completion tokens are computed on the same
//! batch. Bad data (no prompts, an empty completion, fewer than two completions, a missing or
//! non-finite reward, files that disagree) stops the stage with the file, line and field named.

use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput};
use prov_manifest::{Determinism, OutputType};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::post::{self, LoopParams};

/// Which preference loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Direct preference optimisation on chosen/rejected pairs.
    Dpo,
    /// Quantile reward policy optimisation on every completion.
    Qrpo,
}

/// The `dpo` or `qrpo` stage kind.
pub struct AlignStage(pub Method);

/// The loss's own settings (beside [`LoopParams`]): `DpoConfig`'s or `QrpoConfig`'s fields.
pub const OWN: &[&str] = &["beta", "length_normalised"];

/// The loop's defaults for `dpo` and `qrpo`.
pub fn defaults() -> LoopParams {
    LoopParams {
        steps: 100,
        batch_size: 8,
        lr: 1e-4,
        warmup_steps: 0,
        schedule: crate::post::PostSchedule::Linear,
        optimizer: post::fine_tuning_optimizer(),
        clip: 1.0,
        threads: 1,
        device: prov_exec::ComputeDevice::Cpu,
    }
}

impl Stage for AlignStage {
    fn kind(&self) -> &'static str {
        match self.0 {
            Method::Dpo => "dpo",
            Method::Qrpo => "qrpo",
        }
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        match self.0 {
            Method::Dpo => "aligns with DPO on chosen/rejected pairs derived from pinned rewards",
            Method::Qrpo => "aligns with QRPO on pinned reference completions and their quantile rewards",
        }
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let resolved = match self.0 {
            Method::Dpo => post::parse_stage_params::<DpoConfig>(params, OWN, &defaults())?.2,
            Method::Qrpo => post::parse_stage_params::<QrpoConfig>(params, OWN, &defaults())?.2,
        };
        let beta = resolved["beta"].as_f64().unwrap_or(f64::NAN);
        if !(beta.is_finite() && beta > 0.0) {
            return Err(ConfigError::at(&["beta"], format!("must be a positive number, got {beta}")));
        }
        Ok(resolved)
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Envelope
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![
            ("model", vec![OutputType::Checkpoint]),
            ("completions", vec![OutputType::File, OutputType::Source]),
            ("rewards", vec![OutputType::File, OutputType::Source]),
        ])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        let mut out = vec![("model".into(), OutputType::Checkpoint), ("log".into(), OutputType::File)];
        if self.0 == Method::Dpo {
            out.push(("pairs".into(), OutputType::File));
        }
        out
    }
    fn seed_names(&self) -> &'static [&'static str] {
        &["order"]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        prov_exec::run_in_worker(cx, self)
    }
}

/// DPO's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "snake_case")]
pub struct DpoConfig {
    /// The KL penalty's weight, `beta`.
    pub beta: f64,
    /// Divide each completion's log-ratio by its token count `|y|` (equivalently: `beta / |y|`
    /// in place of `beta`, per completion).
    pub length_normalised: bool,
}

impl Default for DpoConfig {
    fn default() -> Self {
        Self { beta: 0.1, length_normalised: false }
    }
}

/// QRPO's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "snake_case")]
pub struct QrpoConfig {
    /// The KL penalty's weight, `beta` (the Apertus report: 5, length-normalised).
    pub beta: f64,
    /// `beta / |y|` in place of `beta`, per completion, in the target and the log-ratio.
    pub length_normalised: bool,
}

impl Default for QrpoConfig {
    fn default() -> Self {
        Self { beta: 5.0, length_normalised: true }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn beta_must_be_positive_and_defaults_follow_the_method() {
        let q = AlignStage(Method::Qrpo).resolve_config(&json!({})).unwrap();
        assert_eq!((q["beta"].as_f64(), q["length_normalised"].as_bool()), (Some(5.0), Some(true)));
        let d = AlignStage(Method::Dpo).resolve_config(&json!({"steps": 3})).unwrap();
        assert_eq!((d["beta"].as_f64(), d["steps"].as_u64()), (Some(0.1), Some(3)));
        assert_eq!(AlignStage(Method::Dpo).resolve_config(&json!({"beta": -1.0})).unwrap_err().path, ["beta"]);
        assert!(AlignStage(Method::Qrpo).resolve_config(&json!({"gamma": 1.0})).is_err());
    }
}
