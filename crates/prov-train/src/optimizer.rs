//! `AdEMAMix`'s settings as a recipe gives them, checked and resolved, and the scalars of its
//! update at step `t` (`alpha(t)`, `b3(t)`) in the reference implementation's arithmetic. The
//! update itself runs on libtorch tensors in the worker (`prov_worker::ademamix`), whose
//! documentation gives the full rule.

use serde::{Deserialize, Serialize};

/// `AdEMAMix`'s settings. The defaults are the Apertus report's pretraining settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdEMAMixConfig {
    /// `(b1, b2, b3)`: the fast momentum's, the second moment's and the slow momentum's decay.
    pub betas: [f64; 3],
    /// The slow momentum's weight.
    pub alpha: f64,
    /// Added to the denominator.
    pub eps: f64,
    /// Decoupled weight decay, applied to the parameters the model marks as decayed.
    pub weight_decay: f64,
    /// `T_alpha`: steps over which `alpha` rises from 0; `None` resolves to all steps.
    pub alpha_warmup: Option<u64>,
    /// `T_b3`: steps over which `b3` rises from `b1`; `None` resolves to all steps.
    pub beta3_warmup: Option<u64>,
}

impl Default for AdEMAMixConfig {
    fn default() -> Self {
        Self {
            betas: [0.9, 0.999, 0.9999],
            alpha: 8.0,
            eps: 1e-8,
            weight_decay: 0.1,
            alpha_warmup: None,
            beta3_warmup: None,
        }
    }
}

impl AdEMAMixConfig {
    /// Checks the settings and fills the warmups left open with `steps`. The error names the
    /// field.
    pub fn resolve(&mut self, steps: u64) -> Result<(), (&'static str, String)> {
        for (i, b) in self.betas.iter().enumerate() {
            if !(0.0..1.0).contains(b) {
                return Err(("betas", format!("b{} must be in [0, 1), got {b}", i + 1)));
            }
        }
        for (field, v) in [("alpha", self.alpha), ("weight_decay", self.weight_decay)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err((field, format!("must be a non-negative number, got {v}")));
            }
        }
        if !(self.eps.is_finite() && self.eps > 0.0) {
            return Err(("eps", format!("must be a positive number, got {}", self.eps)));
        }
        self.alpha_warmup.get_or_insert(steps);
        self.beta3_warmup.get_or_insert(steps);
        Ok(())
    }

    /// `alpha(t)`, in the reference's arithmetic: `(1-a)*0 + a*alpha` with `a = t/T_alpha`.
    pub fn alpha_at(&self, t: u64) -> f64 {
        match self.alpha_warmup {
            Some(w) if t < w => {
                let a = t as f64 / w as f64;
                (1.0 - a) * 0.0 + a * self.alpha
            }
            _ => self.alpha,
        }
    }

    /// `b3(t)`.
    pub fn beta3_at(&self, t: u64) -> f64 {
        let [b1, _, b3] = self.betas;
        match self.beta3_warmup {
            Some(w) if t < w => {
                let f = |b: f64| 0.5f64.ln() / (b + 1e-8).ln() - 1.0;
                let f_inv = |x: f64| 0.5f64.powf(1.0 / (x + 1.0));
                let a = t as f64 / w as f64;
                f_inv((1.0 - a) * f(b1) + a * f(b3))
            }
            _ => b3,
        }
    }
}
