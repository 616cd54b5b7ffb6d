//! Training with libtorch, replayable step by step: the Apertus-style decoder ([`model`]),
//! the Goldfish loss ([`goldfish`]), the `AdEMAMix` optimizer ([`ademamix`]), the learning-rate
//! schedules ([`schedule`]), and the stages: `pretrain` ([`pretrain`]), supervised
//! fine-tuning ([`sft`]), reference completions ([`completions`]), preference alignment with
//! DPO and QRPO ([`alignment`], losses in [`preference_loss`]) and translation evaluation
//! ([`evaluate`]).
//!
//! Every tensor that reaches hashed bytes goes through `prov_torch::NamedTensors`, in name
//! order; every random draw comes from a generator seeded from the stage's seed.

pub mod ademamix;
pub mod alignment;
pub mod checkpoint;
pub mod completions;
pub mod evaluate;
pub mod goldfish;
pub mod model;
pub mod post;
pub mod preference_loss;
pub mod pretrain;
pub mod schedule;
pub mod sft;
pub mod trainer;

/// Registers the training stage kinds: `pretrain`, `sft`, `sample-completions`, `dpo`,
/// `qrpo` and `chrf-eval`.
pub fn register(registry: &mut prov_exec::Registry) {
    use std::sync::Arc;
    registry.register(Arc::new(pretrain::PretrainStage));
    registry.register(Arc::new(sft::SftStage));
    registry.register(Arc::new(completions::SampleCompletionsStage));
    registry.register(Arc::new(alignment::AlignStage(alignment::Method::Dpo)));
    registry.register(Arc::new(alignment::AlignStage(alignment::Method::Qrpo)));
    registry.register(Arc::new(evaluate::ChrfEvalStage));
}

/// Overwrites `target` (under `no_grad`) with a stored tensor of the same shape; the error
/// names the tensor.
pub(crate) fn copy_stored(target: &mut tch::Tensor, name: &str, stored: &(Vec<usize>, Vec<f32>)) -> Result<(), String> {
    let (shape, values) = stored;
    let dims: Vec<i64> = shape.iter().map(|&d| i64::try_from(d).expect("a tensor dimension fits in i64")).collect();
    if dims != target.size() {
        return Err(format!("`{name}`: the stored shape {dims:?} is not the model's {:?}", target.size()));
    }
    target.copy_(&tch::Tensor::from_slice(values).view(dims.as_slice()).to_device(target.device()));
    Ok(())
}
