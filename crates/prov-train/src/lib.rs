//! The training stage kinds as a lockfile sees them: `pretrain` ([`pretrain`]), supervised
//! fine-tuning ([`sft`]), LoRA adapters ([`lora`]), reference completions ([`completions`]), preference alignment with
//! DPO and QRPO ([`alignment`]), translation evaluation ([`evaluate`]), and AFM's
//! post-training: graded preference data ([`preference_data`]), the reward model and scoring
//! with it ([`reward_model`]), best-of-N selection ([`best_of_n`]) and MDLOO ([`mdloo`]). For each: its
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
//! Every kind here but `preference-data` (plain Rust, run in `prov`) computes
//! with libtorch, which `prov` does not load: each such kind's
//! [`prov_exec::Stage::run`] hands the stage to the worker executable
//! ([`prov_exec::run_in_worker`]), where `prov-worker` runs it against the same store. See the
//! book's "How Provenant is built".

pub mod alignment;
pub mod best_of_n;
pub mod checkpoint;
pub mod checkpoint_tasks;
pub mod completions;
pub mod evaluate;
pub mod goldfish;
pub mod loop_config;
pub mod lora;
pub mod mdloo;
pub mod model_config;
pub mod optimizer;
pub mod phases;
pub mod post;
pub mod preference_data;
pub mod pretrain;
pub mod reward_model;
pub mod schedule;
pub mod sft;

/// Registers the training stage kinds: those the worker computes
/// ([`register_libtorch_kinds`]) and AFM's `preference-data`, which `prov` runs itself.
pub fn register(registry: &mut prov_exec::Registry) {
    use std::sync::Arc;
    register_libtorch_kinds(registry);
    registry.register(Arc::new(preference_data::PreferenceDataStage));
}

/// Registers the kinds computed with libtorch in the worker: `pretrain`, `sft`, `lora`,
/// `sample-completions`, `dpo`, `qrpo`, `chrf-eval`, and AFM's `reward-model`,
/// `reward-model-score`, `mdloo` and `best-of-n`.
pub fn register_libtorch_kinds(registry: &mut prov_exec::Registry) {
    use std::sync::Arc;
    registry.register(Arc::new(pretrain::PretrainStage));
    registry.register(Arc::new(sft::SftStage));
    registry.register(Arc::new(lora::LoraStage));
    registry.register(Arc::new(completions::SampleCompletionsStage));
    registry.register(Arc::new(alignment::AlignStage(alignment::Method::Dpo)));
    registry.register(Arc::new(alignment::AlignStage(alignment::Method::Qrpo)));
    registry.register(Arc::new(evaluate::ChrfEvalStage));
    registry.register(Arc::new(reward_model::RewardModelStage));
    registry.register(Arc::new(reward_model::RewardModelScoreStage));
    registry.register(Arc::new(mdloo::MdlooStage));
    registry.register(Arc::new(best_of_n::BestOfNStage));
}
