//! Pretraining with libtorch, replayable step by step: the Apertus-style decoder
//! ([`model`]), the Goldfish loss ([`goldfish`]), the `AdEMAMix` optimizer ([`ademamix`]),
//! the warmup-stable-decay learning-rate schedule ([`schedule`]).
//!
//! Every tensor that reaches hashed bytes goes through `prov_torch::NamedTensors`, in name
//! order; every random draw comes from a generator seeded from the stage's seed.

pub mod ademamix;
pub mod align;
pub mod checkpoint;
pub mod goldfish;
pub mod model;
pub mod pretrain;
pub mod schedule;
pub mod trainer;

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
