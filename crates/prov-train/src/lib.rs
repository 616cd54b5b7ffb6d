//! The training stage kinds as a lockfile sees them: `pretrain` ([`pretrain`]), supervised
//! fine-tuning ([`sft`]), LoRA adapters ([`lora`]), reference completions ([`completions`]), preference alignment with
//! DPO and QRPO ([`alignment`]) and translation evaluation ([`evaluate`]). For each: its
//! configuration with every default explicit, its inputs, outputs, seeds, determinism class
//! and version, and (for `pretrain`) where a replay departs from its recording.
//!
//! Around them, what needs no libtorch: the decoder's shape and its transformers
//! configuration ([`model_config`]), `AdEMAMix`'s settings ([`optimizer`]), the learning-rate
//! schedules ([`schedule`]), phased pretraining's rates and data mixtures ([`phases`]), the
//! loop's configuration and per-step log ([`loop_config`]), the Goldfish mask ([`goldfish`]),
//! checkpoint records and their tensors ([`checkpoint`]), and what the post-training stages
//! share ([`post`]).
//!
//! Every kind here computes with libtorch, which `prov` does not load: each kind's
//! [`prov_exec::Stage::run`] hands the stage to the worker executable
//! ([`prov_exec::run_in_worker`]), where `prov-worker` runs it against the same store. See the
//! book's "How Provenant is built".

pub mod alignment;
pub mod checkpoint;
pub mod checkpoint_tasks;
pub mod completions;
pub mod evaluate;
pub mod goldfish;
pub mod loop_config;
pub mod lora;
pub mod model_config;
pub mod optimizer;
pub mod phases;
pub mod post;
pub mod pretrain;
pub mod schedule;
pub mod sft;

/// Registers the training stage kinds: `pretrain`, `sft`, `sample-completions`, `dpo`,
/// `qrpo` and `chrf-eval`.
pub fn register(registry: &mut prov_exec::Registry) {
    use std::sync::Arc;
    registry.register(Arc::new(pretrain::PretrainStage));
    registry.register(Arc::new(sft::SftStage));
    registry.register(Arc::new(lora::LoraStage));
    registry.register(Arc::new(completions::SampleCompletionsStage));
    registry.register(Arc::new(alignment::AlignStage(alignment::Method::Dpo)));
    registry.register(Arc::new(alignment::AlignStage(alignment::Method::Qrpo)));
    registry.register(Arc::new(evaluate::ChrfEvalStage));
}
