//! The AFM report's RMSProp with momentum (§3.2), as Apple's AXLearn `adastar_optimizer`
//! computes it in AFM's setting: the gradient divided by the root of a bias-corrected EMA of
//! its square (ε added to the square first) is the instantaneous update; it is clipped per
//! parameter block (by its root mean square, AXLearn's `clip_by_block_rms`, or by its 2-norm);
//! an EMA of the clipped updates without bias correction is the net update, scaled by the peak
//! learning rate, with decoupled weight decay added, times the schedule's factor (or, with
//! `weight_decay_scale: learning-rate`, the sum of update and decay times the scheduled rate).
//!
//! The book's "The AFM recipe" gives the update as a list of `PyTorch` operations, in order;
//! [`RmsPropMomentum::step`] runs exactly those, so that an implementation written from the
//! book (`tests/python/rmsprop_momentum_reference.py`) gives the same bits.

use prov_torch::{NamedTensors, TorchTensors as _};
use prov_train::optimizer::{RmsPropMomentumConfig, UpdateClip, WeightDecayScale};
use tch::{Kind, Tensor};

/// The state names of one parameter, as in AXLearn's `adastar` state.
const STATES: [&str; 2] = ["gradient_square_ema", "update_ema"];

/// One parameter and its state.
struct Slot {
    name: String,
    param: Tensor,
    decay: bool,
    /// `v`, the EMA of the squared gradient.
    v: Tensor,
    /// `m`, the EMA of the clipped updates.
    m: Tensor,
    /// What the smoothed update is multiplied by before the learning rate: μParam (simple)'s
    /// factor for a projection matrix, 1 otherwise.
    update_scale: f64,
}

/// The optimizer over a fixed, ordered list of parameters.
pub struct RmsPropMomentum {
    config: RmsPropMomentumConfig,
    /// `η`, the schedule's peak learning rate: the schedule's factor is `lr(t) / η`.
    peak_lr: f64,
    slots: Vec<Slot>,
    t: u64,
}

impl RmsPropMomentum {
    /// The optimizer for `params` (name, the parameter, whether it is weight-decayed), in the
    /// order given, under a schedule peaking at `peak_lr`; its state starts at zero.
    pub fn new(config: RmsPropMomentumConfig, peak_lr: f64, params: Vec<(String, Tensor, bool)>) -> Self {
        let slots = params
            .into_iter()
            .map(|(name, param, decay)| {
                let zeros = || param.zeros_like().detach();
                Slot { v: zeros(), m: zeros(), name, param, decay, update_scale: 1.0 }
            })
            .collect();
        Self { config, peak_lr, slots, t: 0 }
    }

    /// Scales the updates of the projection matrices ([`crate::model::is_linear_projection`])
    /// by `scale`: μParam (simple), with the factor
    /// [`RmsPropMomentumConfig::linear_update_scale`] gives.
    #[must_use]
    pub fn with_linear_update_scale(mut self, scale: f64) -> Self {
        for slot in &mut self.slots {
            if crate::model::is_linear_projection(&slot.name) {
                slot.update_scale = scale;
            }
        }
        self
    }

    /// Steps taken.
    pub fn steps(&self) -> u64 {
        self.t
    }

    /// The parameters, in order.
    pub fn params(&self) -> impl Iterator<Item = &Tensor> {
        self.slots.iter().map(|s| &s.param)
    }

    /// One update at the scheduled learning rate `lr` (the book's operation list).
    pub fn step(&mut self, lr: f64) -> Result<(), prov_torch::InPlaceError> {
        self.t += 1;
        let config = &self.config;
        let [b1, b2] = config.betas;
        // `pow`, as Python's `b ** t` computes it.
        let d2 = 1.0 - b2.powf(self.t as f64);
        let (eta, schedule) = (self.peak_lr, lr / self.peak_lr);
        tch::no_grad(|| {
            for slot in &mut self.slots {
                let grad = slot.param.grad();
                if !grad.defined() {
                    continue;
                }
                let mut square = &grad * &grad;
                square += config.eps_square;
                slot.v *= b2;
                prov_torch::add_scaled_(&mut slot.v, &square, 1.0 - b2)?;
                let mut root = (&slot.v / d2).sqrt_();
                root += config.eps;
                let update = &grad / &root;
                let measure = match config.clip {
                    UpdateClip::Rms => (&update * &update).mean(None::<Kind>).sqrt(),
                    UpdateClip::Norm => update.norm(),
                };
                let update = &update / (measure / config.update_clip).clamp_min(1.0);
                slot.m *= b1;
                prov_torch::add_scaled_(&mut slot.m, &update, 1.0 - b1)?;
                // μParam (simple): the smoothed update, scaled (the state keeps it unscaled). A
                // factor of exactly 1 is no scaling: the product would be the same bits.
                #[expect(clippy::float_cmp, reason = "exactly 1 is the unscaled case the book names")]
                let smoothed =
                    if slot.update_scale == 1.0 { slot.m.shallow_clone() } else { &slot.m * slot.update_scale };
                match config.weight_decay_scale {
                    WeightDecayScale::Schedule => {
                        let mut delta = &smoothed * eta;
                        if slot.decay {
                            prov_torch::add_scaled_(&mut delta, &slot.param, config.weight_decay)?;
                        }
                        delta *= schedule;
                        slot.param -= &delta;
                    }
                    WeightDecayScale::LearningRate => {
                        let mut delta = smoothed.copy();
                        if slot.decay {
                            prov_torch::add_scaled_(&mut delta, &slot.param, config.weight_decay)?;
                        }
                        prov_torch::add_scaled_(&mut slot.param, &delta, -lr)?;
                    }
                }
            }
            Ok(())
        })
    }

    /// The state, by `<parameter>.<state>` name.
    pub fn state(&self) -> NamedTensors {
        let mut named = Vec::with_capacity(self.slots.len() * STATES.len());
        for s in &self.slots {
            for (state, t) in STATES.iter().zip([&s.v, &s.m]) {
                named.push((format!("{}.{state}", s.name), t));
            }
        }
        NamedTensors::from_tensors(named)
    }

    /// Continues from `state`, taken after `steps` steps: every parameter's two tensors, with
    /// the parameter's shape, and nothing else.
    pub fn load_state(&mut self, state: &NamedTensors, steps: u64) -> Result<(), String> {
        let mut targets = Vec::with_capacity(self.slots.len() * STATES.len());
        for Slot { name, v, m, .. } in &mut self.slots {
            for (state_name, tensor) in STATES.iter().zip([v, m]) {
                targets.push((format!("{name}.{state_name}"), tensor));
            }
        }
        crate::parameter_state::load_states(state, targets)?;
        self.t = steps;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // exact values are the point where the formulas are exact
mod tests {
    use prov_train::optimizer::RmsPropMomentumKind;
    use tch::Device;

    use super::*;

    fn config(clip: UpdateClip, scale: WeightDecayScale) -> RmsPropMomentumConfig {
        RmsPropMomentumConfig {
            kind: RmsPropMomentumKind::RmsPropMomentum,
            betas: [0.95, 0.95],
            eps_square: 1e-30,
            eps: 0.0,
            update_clip: 1.0,
            clip,
            weight_decay: 0.1,
            weight_decay_scale: scale,
            mup_base_hidden_size: None,
        }
    }

    /// One scalar parameter under the formulas in plain f64: the update of the first step is
    /// `sign(g)` (clipped to 1 by either measure), so `m = 0.05 * sign(g)`.
    #[test]
    fn a_first_step_follows_the_formulas() {
        for (scale, want) in [
            // p - s * (eta * m + wd * p), s = lr / eta = 0.5
            (WeightDecayScale::Schedule, 2.0 - 0.5 * (0.2 * 0.05 + 0.1 * 2.0)),
            // p - lr * (m + wd * p)
            (WeightDecayScale::LearningRate, 2.0 - 0.1 * (0.05 + 0.1 * 2.0)),
        ] {
            let p = Tensor::from_slice(&[2.0f32]).set_requires_grad(true);
            let mut opt =
                RmsPropMomentum::new(config(UpdateClip::Rms, scale), 0.2, vec![("w".into(), p.shallow_clone(), true)]);
            (&p * 3.0).sum(Kind::Float).backward();
            opt.step(0.1).unwrap();
            let got = p.double_value(&[0]);
            assert!((got - want).abs() < 1e-6, "{scale:?}: {got} vs {want}");
            assert!((opt.state().0["w.update_ema"].1[0] - 0.05).abs() < 1e-7);
        }
    }

    #[test]
    fn a_block_is_clipped_by_its_rms_or_its_norm() {
        // After one step the unclipped update is sign(g) everywhere: rms 1 (not clipped), 2-norm
        // sqrt(4) = 2 (halved).
        for (clip, m) in [(UpdateClip::Rms, 0.05), (UpdateClip::Norm, 0.025)] {
            let p = Tensor::zeros([4], (Kind::Float, Device::Cpu)).set_requires_grad(true);
            let mut opt = RmsPropMomentum::new(
                config(clip, WeightDecayScale::Schedule),
                1.0,
                vec![("w".into(), p.shallow_clone(), false)],
            );
            (&p * Tensor::from_slice(&[1.0f32, -2.0, 3.0, -4.0])).sum(Kind::Float).backward();
            opt.step(1.0).unwrap();
            let state = opt.state();
            let got = &state.0["w.update_ema"].1;
            for (g, want) in got.iter().zip([m, -m, m, -m]) {
                assert!((f64::from(*g) - want).abs() < 1e-7, "{clip:?}: {got:?}");
            }
        }
    }

    #[test]
    fn a_zero_gradient_moves_nothing_and_state_round_trips() {
        let p = Tensor::ones([2, 3], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let mut opt = RmsPropMomentum::new(
            config(UpdateClip::Rms, WeightDecayScale::Schedule),
            0.1,
            vec![("p".into(), p.shallow_clone(), false)],
        );
        (&p * 0.0).sum(Kind::Float).backward();
        opt.step(0.1).unwrap();
        assert_eq!(p.double_value(&[0, 0]), 1.0, "eps_square keeps 0/0 away: the update is 0");
        let state = opt.state();
        assert_eq!(state.0.keys().collect::<Vec<_>>(), ["p.gradient_square_ema", "p.update_ema"]);
        let q = Tensor::ones([2, 3], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let mut other = RmsPropMomentum::new(
            config(UpdateClip::Rms, WeightDecayScale::Schedule),
            0.1,
            vec![("p".into(), q, false)],
        );
        other.load_state(&state, 1).unwrap();
        assert_eq!((other.state(), other.steps()), (state.clone(), 1));
        let mut missing = state;
        missing.0.remove("p.update_ema");
        assert!(other.load_state(&missing, 1).unwrap_err().contains("holds 1 tensors"));
    }
}
