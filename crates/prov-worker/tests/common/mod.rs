//! What the optimizer reference tests share: tensors as their float32 bit patterns, and
//! gradients set to given values exactly.

use tch::{Kind, Tensor};

/// The bit patterns of a float32 tensor's values, in row-major order.
pub fn bits(t: &Tensor) -> Vec<u32> {
    prov_torch::f32_values(t).iter().map(|v| v.to_bits()).collect()
}

/// Sets each parameter's gradient to the given values, exactly: the gradients are cleared,
/// then `sum(p * g)` over the parameters is back-propagated (`d/dp sum(p * g) = g`).
pub fn set_gradients(params: &[Tensor], grads: &[Vec<f32>]) {
    for p in params {
        p.shallow_clone().zero_grad();
    }
    let loss = params
        .iter()
        .zip(grads)
        .map(|(p, g)| (p * Tensor::from_slice(g).view(p.size().as_slice())).sum(Kind::Float))
        .reduce(|a, b| a + b)
        .expect("at least one parameter");
    loss.backward();
}
