//! The optimizer a training loop runs, as its configuration names it ([`Optimizer`]), and what
//! every optimizer shares: clearing the gradients and clipping their global norm before a step.

use prov_torch::NamedTensors;
use prov_train::optimizer::OptimizerConfig;
use tch::Tensor;

use crate::ademamix::AdEMAMix;
use crate::rmsprop::RmsPropMomentum;

/// `AdEMAMix` or RMSProp with momentum, over the model's parameters in name order.
pub enum Optimizer {
    /// Apertus' and EuroLLM's.
    AdEMAMix(AdEMAMix),
    /// AFM's.
    RmsPropMomentum(RmsPropMomentum),
}

impl Optimizer {
    /// The optimizer `config` names, for `params` (name, parameter, whether weight-decayed)
    /// under a schedule peaking at `peak_lr`.
    pub fn new(config: &OptimizerConfig, peak_lr: f64, params: Vec<(String, Tensor, bool)>) -> Self {
        match config {
            OptimizerConfig::AdEMAMix(c) => Self::AdEMAMix(AdEMAMix::new(c.clone(), params)),
            OptimizerConfig::RmsPropMomentum(c) => {
                Self::RmsPropMomentum(RmsPropMomentum::new(c.clone(), peak_lr, params))
            }
        }
    }

    fn params(&self) -> Box<dyn Iterator<Item = &Tensor> + '_> {
        match self {
            Self::AdEMAMix(o) => Box::new(o.params()),
            Self::RmsPropMomentum(o) => Box::new(o.params()),
        }
    }

    /// Clears every parameter's gradient.
    pub fn zero_grad(&mut self) {
        zero_grads(self.params());
    }

    /// The global gradient norm, and the gradients scaled down to `max` when it exceeds it
    /// ([`clip_grad_norm`]).
    pub fn clip_grad_norm(&mut self, max: f64) -> f64 {
        clip_grad_norm(self.params(), max)
    }

    /// One update at learning rate `lr`.
    pub fn step(&mut self, lr: f64) -> Result<(), prov_torch::InPlaceError> {
        match self {
            Self::AdEMAMix(o) => o.step(lr),
            Self::RmsPropMomentum(o) => o.step(lr),
        }
    }

    /// The state, by `<parameter>.<state>` name.
    pub fn state(&self) -> NamedTensors {
        match self {
            Self::AdEMAMix(o) => o.state(),
            Self::RmsPropMomentum(o) => o.state(),
        }
    }

    /// Continues from `state`, taken after `steps` steps.
    pub fn load_state(&mut self, state: &NamedTensors, steps: u64) -> Result<(), String> {
        match self {
            Self::AdEMAMix(o) => o.load_state(state, steps),
            Self::RmsPropMomentum(o) => o.load_state(state, steps),
        }
    }
}

/// Copies a stored optimizer state into its tensors: `targets` names every tensor
/// (`<parameter>.<state>`), and `state` must hold exactly those, each with its tensor's shape.
pub(crate) fn load_states(state: &NamedTensors, targets: Vec<(String, &mut Tensor)>) -> Result<(), String> {
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
