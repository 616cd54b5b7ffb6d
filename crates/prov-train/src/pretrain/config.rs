//! The `pretrain` stage's configuration: the model's shape, the Goldfish settings, and every
//! training setting with its default (the defaults are the main job's; a lockfile states
//! them all).

use serde::{Deserialize, Serialize};

use crate::model_config::Architecture;
use crate::optimizer::OptimizerConfig;
use crate::phases::PhaseParams;

/// The model's shape, without what the data fixes (vocabulary, sequence length).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelParams {
    /// The decoder's architecture: `apertus` (the default, not written), `llama` (EuroLLM's
    /// SwiGLU decoder) or `afm` (AFM's: SwiGLU, QK-norm, shared embeddings).
    #[serde(skip_serializing_if = "Architecture::is_apertus")]
    pub architecture: Architecture,
    /// Width of the residual stream.
    pub hidden_size: i64,
    /// Width of the MLP.
    pub intermediate_size: i64,
    /// Layers.
    pub num_hidden_layers: i64,
    /// Query heads.
    pub num_attention_heads: i64,
    /// Key-value heads.
    pub num_key_value_heads: i64,
    /// RoPE's base.
    pub rope_theta: f64,
    /// RMSNorm's epsilon.
    pub rms_norm_eps: f64,
    /// Initialisation standard deviation (Apertus: 0.008944).
    pub init_std: f64,
}

impl Default for ModelParams {
    fn default() -> Self {
        Self {
            architecture: Architecture::Apertus,
            hidden_size: 256,
            intermediate_size: 1024,
            num_hidden_layers: 4,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            rope_theta: 500_000.0,
            rms_norm_eps: 1e-5,
            init_std: 0.008_944,
        }
    }
}

/// Goldfish's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoldfishParams {
    /// One label in `k` is dropped.
    pub k: u64,
    /// The hashed context's width.
    pub h: u64,
}

/// Distillation (the AFM report, §3.2.1): the target of each next-token prediction is a convex
/// combination of the true label and the teacher's top-1 prediction, the teacher a pinned
/// checkpoint (input `teacher`) with the student's vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistillationParams {
    /// The teacher's share of the target (the report's 0.9); the true label has the rest.
    #[serde(default = "default_teacher_weight")]
    pub teacher_weight: f64,
}

fn default_teacher_weight() -> f64 {
    0.9
}

/// The resolved configuration of a `pretrain` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PretrainConfig {
    /// The model's shape.
    #[serde(default)]
    pub model: ModelParams,
    /// Optimizer steps.
    #[serde(default = "default_steps")]
    pub steps: u64,
    /// Samples per step.
    #[serde(default = "default_batch_size")]
    pub batch_size: u64,
    /// Peak learning rate.
    #[serde(default = "default_lr")]
    pub lr: f64,
    /// Warmup steps; default a tenth of `steps` (none when `phases` set the schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_steps: Option<u64>,
    /// Cooldown steps; default a fifth of `steps` (none when `phases` set the schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown_steps: Option<u64>,
    /// Phased training (EuroLLM, §2.2): each phase's steps, learning-rate segment, data
    /// mixture and RoPE base ([`crate::phases`]). Empty (the default, not written): one phase
    /// of WSD on the inputs `tokens` and `order`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseParams>,
    /// The optimizer: `AdEMAMix` (Apertus pretraining's settings by default) or AFM's RMSProp
    /// with momentum (`kind: rmsprop-momentum`).
    #[serde(default)]
    pub optimizer: OptimizerConfig,
    /// Largest global gradient norm.
    #[serde(default = "default_clip")]
    pub clip: f64,
    /// Goldfish loss settings, or `null` for the plain loss.
    #[serde(default = "default_goldfish")]
    pub goldfish: Option<GoldfishParams>,
    /// Distillation from the checkpoint of input `teacher`; absent (the default, not written):
    /// the plain next-token loss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distillation: Option<DistillationParams>,
    /// Steps between checkpoints (the last step always gets one).
    #[serde(default = "default_checkpoint_every")]
    pub checkpoint_every: u64,
    /// libtorch's intra-op threads, pinned before the stage computes: its bits depend on them, so
    /// they are configuration (in the stage key), beside the envelope's `ATen` capability.
    #[serde(default = "default_threads")]
    pub threads: u32,
    /// Where libtorch computes: `cpu` or `cuda:N`. `prov lock` writes it into the lockfile,
    /// `cpu` when the recipe names none: a GPU is used only where a recipe names it.
    #[serde(default)]
    pub device: prov_exec::ComputeDevice,
}

fn default_steps() -> u64 {
    300
}
fn default_batch_size() -> u64 {
    8
}
fn default_lr() -> f64 {
    3e-3
}
fn default_clip() -> f64 {
    0.1
}
#[allow(clippy::unnecessary_wraps)]
fn default_goldfish() -> Option<GoldfishParams> {
    Some(GoldfishParams { k: 50, h: 50 })
}
fn default_checkpoint_every() -> u64 {
    100
}
fn default_threads() -> u32 {
    1
}
