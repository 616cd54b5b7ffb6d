//! What every optimizer does with its parameters besides its update: clear their gradients,
//! clip the gradients' global norm before a step, and load a stored optimizer state.

use prov_torch::NamedTensors;
use tch::Tensor;

/// Copies a stored optimizer state into its tensors: `targets` names every tensor
/// (`<parameter>.<state>`), and `state` must hold exactly those, each with its tensor's shape.
pub fn load_states(state: &NamedTensors, targets: Vec<(String, &mut Tensor)>) -> Result<(), String> {
    if state.0.len() != targets.len() {
        return Err(format!("the optimizer state holds {} tensors, this model needs {}", state.0.len(), targets.len()));
    }
    tch::no_grad(|| {
        for (name, tensor) in targets {
            let stored = state.0.get(&name).ok_or_else(|| format!("the optimizer state lacks `{name}`"))?;
            crate::copy_stored(tensor, &name, stored)?;
        }
        Ok(())
    })
}

/// Clears the gradients of `params`.
pub fn zero_grads<'a>(params: impl Iterator<Item = &'a Tensor>) {
    for p in params {
        p.shallow_clone().zero_grad();
    }
}

/// The global gradient norm of `params` (the 2-norm of all gradients together), and, when it
/// exceeds `max`, every gradient scaled by `max / (norm + 1e-6)` (as
/// `torch.nn.utils.clip_grad_norm_`).
pub fn clip_grad_norm<'a>(params: impl Iterator<Item = &'a Tensor>, max: f64) -> f64 {
    tch::no_grad(|| {
        let grads: Vec<Tensor> = params.map(Tensor::grad).filter(Tensor::defined).collect();
        if grads.is_empty() {
            return 0.0;
        }
        let norms: Vec<Tensor> = grads.iter().map(Tensor::norm).collect();
        let total = Tensor::stack(&norms, 0).norm().double_value(&[]);
        if total > max {
            let coef = max / (total + 1e-6);
            for mut g in grads {
                g *= coef;
            }
        }
        total
    })
}
