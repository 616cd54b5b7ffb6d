//! What a training loop is told ([`LoopConfig`]) and what it writes down each step
//! ([`StepLog`], stored as JSON Lines): shared by every training stage, and read by replay
//! forensics without libtorch.

use serde::{Deserialize, Serialize};

use crate::optimizer::OptimizerConfig;
use crate::phases::PhaseLr;

/// The label value the loss ignores (transformers' and Megatron's convention).
pub const IGNORE_INDEX: i64 = -100;

/// What the loop needs beyond the model's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopConfig {
    /// Optimizer steps.
    pub steps: u64,
    /// Samples per step.
    pub batch_size: u64,
    /// The schedule's peak learning rate.
    pub lr: f64,
    /// Warmup steps (from 10% of the peak).
    pub warmup_steps: u64,
    /// Cooldown steps at the end (1-sqrt, to 10% of the peak); the linear schedule has none.
    pub cooldown_steps: u64,
    /// The learning-rate schedule's shape.
    #[serde(default)]
    pub schedule: ScheduleKind,
    /// The optimizer's settings.
    pub optimizer: OptimizerConfig,
    /// Largest global gradient norm; larger gradients are scaled down to it.
    pub clip: f64,
    /// Goldfish `k` (drop one label in `k`), or none for the plain loss.
    pub goldfish_k: Option<u64>,
    /// Goldfish context width `h`.
    pub goldfish_h: u64,
    /// The phases' learning-rate segments when `schedule` is `phased`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseLr>,
}

/// Which learning-rate schedule a loop follows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleKind {
    /// Warmup-stable-decay (pretraining).
    #[default]
    Wsd,
    /// Linear warmup and decay (fine-tuning and alignment).
    Linear,
    /// Linear warmup and a half-cosine decay to 0 (fine-tuning, as the EuroLLM report's SFT).
    Cosine,
    /// One Megatron-LM segment per phase (EuroLLM's phased pretraining), from `phases`.
    Phased,
}

/// One line of the per-step log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepLog {
    /// The step, from 1.
    pub step: u64,
    /// Mean loss over the labels kept.
    pub loss: f64,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    /// The learning rate this step used.
    pub lr: f64,
    /// Labels that counted in the loss.
    pub tokens: u64,
    /// Labels Goldfish dropped.
    pub dropped: u64,
}

/// The per-step log as JSON Lines (canonical JSON, one object per line).
pub fn encode_log(log: &[StepLog]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in log {
        out.extend(prov_manifest::encode_value(&serde_json::to_value(l).expect("finite numbers encode")));
        out.push(b'\n');
    }
    out
}

/// Reads a log written by [`encode_log`].
pub fn decode_log(bytes: &[u8]) -> Result<Vec<StepLog>, String> {
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .enumerate()
        .map(|(i, l)| serde_json::from_slice(l).map_err(|e| format!("log line {}: {e}", i + 1)))
        .collect()
}
