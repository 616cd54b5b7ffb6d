//! `lora`: a LoRA adapter (the AFM report, §5) trained on chat examples on top of a frozen,
//! pinned checkpoint, and written in the PEFT format.
//!
//! The adapter is attached to every projection of every attention and feed-forward block
//! (query, key, value, output; gate, up, down), each `W x` becoming `W x + (alpha / rank) B A x`
//! with `A` (`[rank, in]`) drawn uniformly in `±1/sqrt(in)` (seed `init`) and `B` (`[out,
//! rank]`) zero, so that training starts at the base model. Only `A` and `B` train; the loss,
//! rows and data order are `sft`'s (the loss on the assistant's tokens; seed `order`).
//!
//! Inputs: `model` (the base checkpoint; its recorded tokenizer renders the conversations) and
//! `examples`. Outputs: `adapter`, a tree of the two files PEFT reads
//! (`adapter_config.json`, `adapter_model.safetensors`; [`adapter_config`]), and `log`.
//! The adapter names its base by the checkpoint's digest (`base_model_name_or_path`).

use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput};
use prov_manifest::{Determinism, OutputType};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::post::{self, LoopParams};
use crate::sft::SftParams;

/// The `lora` stage's own settings (beside [`LoopParams`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoraParams {
    /// The adapter's rank (the report's adapters have rank 16).
    #[serde(default = "default_rank")]
    pub rank: u32,
    /// LoRA's alpha: the update is scaled by `alpha / rank`; by default the rank (scale 1).
    #[serde(default)]
    pub alpha: Option<f64>,
    /// Tokens a row's inputs hold.
    #[serde(default = "default_seq_len")]
    pub seq_len: u64,
    /// Several conversations per row.
    #[serde(default)]
    pub packing: bool,
}

fn default_rank() -> u32 {
    16
}
fn default_seq_len() -> u64 {
    256
}

impl LoraParams {
    /// The row settings, as `sft` reads them.
    pub fn rows(&self) -> SftParams {
        SftParams { seq_len: self.seq_len, packing: self.packing }
    }

    /// `alpha`, resolved.
    pub fn alpha(&self) -> f64 {
        self.alpha.unwrap_or(f64::from(self.rank))
    }
}

/// The `lora` stage's own fields, beside the loop's.
pub const OWN: &[&str] = &["rank", "alpha", "seq_len", "packing"];

/// The loop's defaults for `lora`: `sft`'s.
pub fn defaults() -> LoopParams {
    crate::sft::defaults()
}

/// The projections an adapter is attached to, as PEFT's `target_modules` names them.
pub const TARGET_MODULES: [&str; 7] = ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"];

/// The prefix PEFT gives every adapter tensor of a causal language model
/// (`base_model.model.` before the model's own names).
pub const PEFT_PREFIX: &str = "base_model.model.";

/// PEFT's `adapter_config.json` for an adapter of `rank` and `alpha` on `base` (a checkpoint
/// digest): a LoRA adapter of a causal language model on [`TARGET_MODULES`] (an Apertus model
/// has no `gate_proj`: PEFT passes over names it does not find), no dropout, no bias, not
/// rank-stabilised. The fields are those PEFT writes; the file is canonical JSON.
pub fn adapter_config(rank: u32, alpha: f64, base: &str) -> Value {
    json!({
        "base_model_name_or_path": base,
        "bias": "none",
        "fan_in_fan_out": false,
        "inference_mode": true,
        "init_lora_weights": true,
        "lora_alpha": alpha,
        "lora_dropout": 0.0,
        "modules_to_save": null,
        "peft_type": "LORA",
        "r": rank,
        "target_modules": TARGET_MODULES,
        "task_type": "CAUSAL_LM",
        "use_dora": false,
        "use_rslora": false,
    })
}

/// The `lora` stage kind.
pub struct LoraStage;

impl Stage for LoraStage {
    fn kind(&self) -> &'static str {
        "lora"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "trains a LoRA adapter on every attention and feed-forward projection of a frozen checkpoint on chat \
         examples (AFM's adapters), written in the PEFT format"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let (_, own, mut resolved) = post::parse_stage_params::<LoraParams>(params, OWN, &defaults())?;
        if own.seq_len < 2 {
            return Err(ConfigError::at(&["seq_len"], "must be at least 2"));
        }
        if own.rank == 0 {
            return Err(
                ConfigError::at(&["rank"], "must be at least 1").with_hint("the report's adapters have rank 16")
            );
        }
        let alpha = own.alpha();
        if !(alpha.is_finite() && alpha > 0.0) {
            return Err(ConfigError::at(&["alpha"], format!("must be a positive number, got {alpha}")));
        }
        resolved["alpha"] = json!(alpha);
        Ok(resolved)
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Envelope
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![
            ("model", vec![OutputType::Checkpoint]),
            ("examples", vec![OutputType::File, OutputType::Source]),
        ])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("adapter".into(), OutputType::Tree), ("log".into(), OutputType::File)]
    }
    fn seed_names(&self) -> &'static [&'static str] {
        &["init", "order"]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        prov_exec::run_in_worker(cx, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_resolves_alpha_and_checks_the_rank() {
        let stage = LoraStage;
        let resolved = stage.resolve_config(&json!({"rank": 8, "steps": 10})).unwrap();
        assert_eq!((&resolved["rank"], &resolved["alpha"], &resolved["steps"]), (&json!(8), &json!(8.0), &json!(10)));
        let resolved = stage.resolve_config(&json!({"alpha": 32})).unwrap();
        assert_eq!((&resolved["rank"], &resolved["alpha"]), (&json!(16), &json!(32.0)));
        assert_eq!(stage.resolve_config(&json!({"rank": 0})).unwrap_err().path, ["rank"]);
        assert_eq!(stage.resolve_config(&json!({"alpha": -1})).unwrap_err().path, ["alpha"]);
        assert!(stage.resolve_config(&json!({"dropout": 0.1})).is_err(), "unknown fields are refused");
    }
}
