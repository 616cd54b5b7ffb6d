//! The optimizer a training loop runs, as its configuration names it ([`Optimizer`]).

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
    /// of a model of `hidden_size` under a schedule peaking at `peak_lr`.
    pub fn new(config: &OptimizerConfig, peak_lr: f64, params: Vec<(String, Tensor, bool)>, hidden_size: i64) -> Self {
        match config {
            OptimizerConfig::AdEMAMix(c) => Self::AdEMAMix(AdEMAMix::new(c.clone(), params)),
            OptimizerConfig::RmsPropMomentum(c) => Self::RmsPropMomentum(
                RmsPropMomentum::new(c.clone(), peak_lr, params)
                    .with_linear_update_scale(c.linear_update_scale(hidden_size)),
            ),
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
        crate::parameter_state::zero_grads(self.params());
    }

    /// The global gradient norm, and the gradients scaled down to `max` when it exceeds it
    /// ([`crate::parameter_state::clip_grad_norm`]).
    pub fn clip_grad_norm(&mut self, max: f64) -> f64 {
        crate::parameter_state::clip_grad_norm(self.params(), max)
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
