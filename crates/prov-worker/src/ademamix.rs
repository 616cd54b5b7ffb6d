//! `AdEMAMix` (Pagliardini et al., Apple's reference implementation, as the Apertus report uses
//! it): Adam with a second, slow momentum mixed into the numerator.
//!
//! For each parameter `p` with gradient `g`, at step `t` (from 1):
//!
//! ```text
//! m1 = b1*m1 + (1-b1)*g
//! m2 = b3(t)*m2 + (1-b3(t))*g
//! v  = b2*v + (1-b2)*g^2
//! update = (m1/(1-b1^t) + alpha(t)*m2) / (sqrt(v)/sqrt(1-b2^t) + eps) + wd*p   (wd only where decayed)
//! p -= lr*update
//! ```
//!
//! `alpha(t) = (t/T_alpha)*alpha` for `t < T_alpha`, `alpha` after; `b3(t)` rises from `b1` to
//! `b3` over `T_b3` steps linearly in half-life space: `f(b) = ln(0.5)/ln(b+1e-8) - 1`,
//! `f_inv(x) = 0.5^(1/(x+1))`, `b3(t) = f_inv((1-t/T_b3)*f(b1) + (t/T_b3)*f(b3))` for `t < T_b3`,
//! `b3` after.
//!
//! The step is the reference implementation's, operation for operation and in its order, so
//! that the two give the same bits: scalars in f64 as Python computes them (`b**t` through
//! libm's `pow`, the warmups in the reference's own arithmetic), and the tensor operations in
//! place, `m.mul_(b).add_(g, alpha=1-b)` and `v.mul_(b2).addcmul_(g, g, value=1-b2)`, whose
//! `alpha` and `value` forms `ATen` computes in one fused kernel (through
//! [`prov_torch::add_scaled_`] and [`prov_torch::addcmul_`], which tch lacks). A test checks
//! the bits against the reference written in `PyTorch`.

use prov_torch::{NamedTensors, TorchTensors as _};
use tch::Tensor;

pub use prov_train::optimizer::AdEMAMixConfig;

/// One parameter and its optimizer state.
struct Slot {
    name: String,
    param: Tensor,
    decay: bool,
    /// `m1`, the fast momentum (state `exp_avg_fast`).
    m1: Tensor,
    /// `m2`, the slow momentum (state `exp_avg_slow`).
    m2: Tensor,
    /// `v`, the second moment (state `exp_avg_sq`).
    v: Tensor,
}

/// The state names of one parameter, as in the reference implementation.
const STATES: [&str; 3] = ["exp_avg_fast", "exp_avg_slow", "exp_avg_sq"];

/// The optimizer over a fixed, ordered list of parameters.
pub struct AdEMAMix {
    config: AdEMAMixConfig,
    slots: Vec<Slot>,
    /// Steps taken.
    t: u64,
}

impl AdEMAMix {
    /// The optimizer for `params` (name, the parameter, whether it is weight-decayed), in the
    /// order given; its state starts at zero.
    pub fn new(config: AdEMAMixConfig, params: Vec<(String, Tensor, bool)>) -> Self {
        let slots = params
            .into_iter()
            .map(|(name, param, decay)| {
                let zeros = || param.zeros_like().detach();
                Slot { m1: zeros(), m2: zeros(), v: zeros(), name, param, decay }
            })
            .collect();
        Self { config, slots, t: 0 }
    }

    /// Steps taken.
    pub fn steps(&self) -> u64 {
        self.t
    }

    /// The parameters, in order.
    pub fn params(&self) -> impl Iterator<Item = &Tensor> {
        self.slots.iter().map(|s| &s.param)
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
        self.t += 1;
        let t = self.t as f64;
        let [b1, b2, _] = self.config.betas;
        let b3 = self.config.beta3_at(self.t);
        let alpha = self.config.alpha_at(self.t);
        // `pow`, as Python's `b ** t` computes it (not `powi`, which multiplies repeatedly).
        let bias_correction1 = 1.0 - b1.powf(t);
        let bias_correction2 = 1.0 - b2.powf(t);
        let (eps, wd) = (self.config.eps, self.config.weight_decay);
        tch::no_grad(|| {
            for s in &mut self.slots {
                let g = s.param.grad();
                if !g.defined() {
                    continue;
                }
                s.m1 *= b1;
                prov_torch::add_scaled_(&mut s.m1, &g, 1.0 - b1)?;
                s.m2 *= b3;
                prov_torch::add_scaled_(&mut s.m2, &g, 1.0 - b3)?;
                s.v *= b2;
                prov_torch::addcmul_(&mut s.v, &g, &g, 1.0 - b2)?;
                let mut denom = s.v.sqrt() / bias_correction2.sqrt();
                denom += eps;
                let mut update = (&s.m1 / bias_correction1 + &s.m2 * alpha) / &denom;
                if s.decay && wd != 0.0 {
                    prov_torch::add_scaled_(&mut update, &s.param, wd)?;
                }
                prov_torch::add_scaled_(&mut s.param, &update, -lr)?;
            }
            Ok(())
        })
    }

    /// The state, by `<parameter>.<state>` name.
    pub fn state(&self) -> NamedTensors {
        let mut named = Vec::with_capacity(self.slots.len() * 3);
        for s in &self.slots {
            for (state, t) in STATES.iter().zip([&s.m1, &s.m2, &s.v]) {
                named.push((format!("{}.{state}", s.name), t));
            }
        }
        NamedTensors::from_tensors(named)
    }

    /// Continues from `state`, taken after `steps` steps. Every parameter's three tensors must
    /// be there with the parameter's shape, and nothing else.
    pub fn load_state(&mut self, state: &NamedTensors, steps: u64) -> Result<(), String> {
        let mut targets = Vec::with_capacity(self.slots.len() * STATES.len());
        for Slot { name, m1, m2, v, .. } in &mut self.slots {
            for (state_name, tensor) in STATES.iter().zip([m1, m2, v]) {
                targets.push((format!("{name}.{state_name}"), tensor));
            }
        }
        crate::parameter_state::load_states(state, targets)?;
        self.t = steps;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // exact values are the point: the formulas are exact here
mod tests {
    use tch::{Device, Kind};

    use super::*;

    /// The update of one scalar parameter, computed in plain f64 from the formulas.
    fn reference(config: &AdEMAMixConfig, grads: &[f64], p0: f64, lr: f64) -> f64 {
        let [b1, b2, _] = config.betas;
        let (mut p, mut m1, mut m2, mut v) = (p0, 0.0, 0.0, 0.0);
        for (i, g) in grads.iter().enumerate() {
            let t = i as u64 + 1;
            let b3 = config.beta3_at(t);
            m1 = b1 * m1 + (1.0 - b1) * g;
            m2 = b3 * m2 + (1.0 - b3) * g;
            v = b2 * v + (1.0 - b2) * g * g;
            let num = m1 / (1.0 - b1.powi(t as i32)) + config.alpha_at(t) * m2;
            let den = v.sqrt() / (1.0 - b2.powi(t as i32)).sqrt() + config.eps;
            p -= lr * (num / den + config.weight_decay * p);
        }
        p
    }

    #[test]
    fn schedules_follow_the_formulas() {
        let mut c = AdEMAMixConfig::default();
        c.resolve(100).unwrap();
        assert_eq!(c.alpha_at(0), 0.0);
        assert_eq!(c.alpha_at(50), 4.0);
        assert_eq!(c.alpha_at(200), 8.0);
        assert!((c.beta3_at(0) - 0.9).abs() < 1e-7);
        assert_eq!(c.beta3_at(100), 0.9999);
        let mid = c.beta3_at(50);
        assert!(0.9 < mid && mid < 0.9999);
        // Half-lives interpolate linearly: the midpoint's half-life is the mean of the ends'.
        let half_life = |b: f64| 0.5f64.ln() / b.ln();
        let expected = f64::midpoint(half_life(0.9 + 1e-8), half_life(0.9999 + 1e-8));
        assert!((half_life(mid) - expected).abs() / expected < 1e-6);
    }

    #[test]
    fn steps_match_the_formulas_in_f64() {
        let mut c = AdEMAMixConfig { weight_decay: 0.1, ..AdEMAMixConfig::default() };
        c.resolve(10).unwrap();
        let p = Tensor::from_slice(&[0.5f32]).set_requires_grad(true);
        let mut opt = AdEMAMix::new(c.clone(), vec![("w".into(), p.shallow_clone(), true)]);
        let grads = [0.3, -0.2, 0.7, 0.1, -0.4];
        for g in grads {
            opt.zero_grad();
            // d/dp (g * p) = g.
            (&p * g).sum(Kind::Float).backward();
            opt.step(1e-2).unwrap();
        }
        let got = p.double_value(&[0]);
        let want = reference(&c, &grads, 0.5, 1e-2);
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    }

    #[test]
    fn clipping_scales_to_the_bound_and_reports_the_norm() {
        let a = Tensor::from_slice(&[3.0f32]).set_requires_grad(true);
        let b = Tensor::from_slice(&[4.0f32]).set_requires_grad(true);
        let mut opt = AdEMAMix::new(
            AdEMAMixConfig::default(),
            vec![("a".into(), a.shallow_clone(), false), ("b".into(), b.shallow_clone(), false)],
        );
        ((&a * &a + &b * &b) * 0.5).sum(Kind::Float).backward();
        let norm = opt.clip_grad_norm(1.0);
        assert!((norm - 5.0).abs() < 1e-6);
        let clipped = (a.grad().double_value(&[0]), b.grad().double_value(&[0]));
        assert!((clipped.0 - 0.6).abs() < 1e-6 && (clipped.1 - 0.8).abs() < 1e-6, "{clipped:?}");
        // Below the bound nothing changes.
        assert!((opt.clip_grad_norm(10.0) - 1.0).abs() < 1e-5);
        assert!((a.grad().double_value(&[0]) - 0.6).abs() < 1e-6);
    }

    #[test]
    fn state_round_trips_and_wrong_states_are_errors() {
        let p = Tensor::ones([2, 3], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let mut opt = AdEMAMix::new(AdEMAMixConfig::default(), vec![("p".into(), p.shallow_clone(), true)]);
        (&p * 2.0).sum(Kind::Float).backward();
        opt.step(0.1).unwrap();
        let state = opt.state();
        assert_eq!(state.0.keys().collect::<Vec<_>>(), ["p.exp_avg_fast", "p.exp_avg_slow", "p.exp_avg_sq"]);
        let q = Tensor::ones([2, 3], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let mut other = AdEMAMix::new(AdEMAMixConfig::default(), vec![("p".into(), q, true)]);
        other.load_state(&state, 1).unwrap();
        assert_eq!(other.state(), state);
        assert_eq!(other.steps(), 1);

        let mut missing = state.clone();
        missing.0.remove("p.exp_avg_sq");
        assert!(other.load_state(&missing, 1).unwrap_err().contains("holds 2 tensors"));
        let mut renamed = state.clone();
        let v = renamed.0.remove("p.exp_avg_sq").unwrap();
        renamed.0.insert("q.exp_avg_sq".into(), v);
        assert!(other.load_state(&renamed, 1).unwrap_err().contains("lacks `p.exp_avg_sq`"));
    }

    #[test]
    fn bad_settings_name_their_field() {
        let mut c = AdEMAMixConfig { betas: [0.9, 1.0, 0.9999], ..AdEMAMixConfig::default() };
        assert_eq!(c.resolve(10).unwrap_err().0, "betas");
        let mut c = AdEMAMixConfig { eps: 0.0, ..AdEMAMixConfig::default() };
        assert_eq!(c.resolve(10).unwrap_err().0, "eps");
        let mut c = AdEMAMixConfig { alpha: f64::NAN, ..AdEMAMixConfig::default() };
        assert_eq!(c.resolve(10).unwrap_err().0, "alpha");
    }
}
