//! The optimizers' settings as a recipe gives them, checked and resolved ([`OptimizerConfig`]):
//! `AdEMAMix` (Apertus), with the scalars of its update at step `t` (`alpha(t)`, `b3(t)`) in the
//! reference implementation's arithmetic, and the AFM report's RMSProp with momentum
//! ([`RmsPropMomentumConfig`]). The updates themselves run on libtorch tensors in the worker
//! (`prov_worker::ademamix`, `prov_worker::rmsprop`), whose documentation gives the full rules.

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

/// Which decay rate the weight decay of [`RmsPropMomentumConfig`] is scaled by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WeightDecayScale {
    /// By the schedule's factor only, outside the learning rate: AXLearn's `adastar_optimizer`,
    /// which AFM ran (`-s(t) * (lr * m + wd * p)`).
    Schedule,
    /// By the scheduled learning rate, as `AdamW` (`-lr(t) * (m + wd * p)`).
    LearningRate,
}

/// How [`RmsPropMomentumConfig`] measures an update block before clipping it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UpdateClip {
    /// The root mean square of its elements: AXLearn's `clip_by_block_rms`.
    Rms,
    /// Its 2-norm: the report's word.
    Norm,
}

/// The marker of [`RmsPropMomentumConfig`] in a configuration: `kind: rmsprop-momentum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RmsPropMomentumKind {
    /// The only value.
    #[serde(rename = "rmsprop-momentum")]
    RmsPropMomentum,
}

/// The AFM report's RMSProp with momentum (§3.2), as AXLearn's `adastar_optimizer` computes it
/// in AFM's setting. The book's "The AFM recipe" gives the update operation by operation;
/// `prov_worker::rmsprop` runs it. The defaults are the report's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RmsPropMomentumConfig {
    /// `rmsprop-momentum`.
    pub kind: RmsPropMomentumKind,
    /// `(b1, b2)`: the update EMA's decay and the squared gradient EMA's.
    #[serde(default = "default_rmsprop_betas")]
    pub betas: [f64; 2],
    /// Added to the squared gradient before it is smoothed.
    #[serde(default = "default_eps_square")]
    pub eps_square: f64,
    /// Added to the root of the bias-corrected squared-gradient EMA.
    #[serde(default)]
    pub eps: f64,
    /// The largest measure of one parameter's instantaneous update.
    #[serde(default = "default_update_clip")]
    pub update_clip: f64,
    /// How an update is measured for clipping.
    #[serde(default = "default_clip_measure")]
    pub clip: UpdateClip,
    /// Decoupled weight decay, applied to the parameters the model marks as decayed.
    #[serde(default = "default_rmsprop_weight_decay")]
    pub weight_decay: f64,
    /// What scales the weight decay.
    #[serde(default = "default_weight_decay_scale")]
    pub weight_decay_scale: WeightDecayScale,
    /// μParam (simple) (the report's §3.2, after Wortsman et al. 2023, §3.2.4, as AXLearn's
    /// `mup_simple_adam_update_transformation`): the hidden size of the base model whose
    /// learning rate was tuned. The smoothed update of every attention and feed-forward
    /// projection matrix is scaled by `min(base / hidden_size, 1)` before the learning rate;
    /// `None` (the default, not written) scales nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mup_base_hidden_size: Option<u64>,
}

fn default_rmsprop_betas() -> [f64; 2] {
    [0.95, 0.95]
}
fn default_eps_square() -> f64 {
    1e-30
}
fn default_update_clip() -> f64 {
    1.0
}
fn default_clip_measure() -> UpdateClip {
    UpdateClip::Rms
}
fn default_rmsprop_weight_decay() -> f64 {
    3.16e-4
}
fn default_weight_decay_scale() -> WeightDecayScale {
    WeightDecayScale::Schedule
}

impl RmsPropMomentumConfig {
    /// Checks the settings; the error names the field.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        for (i, b) in self.betas.iter().enumerate() {
            if !(0.0..1.0).contains(b) {
                return Err(("betas", format!("b{} must be in [0, 1), got {b}", i + 1)));
            }
        }
        for (field, v) in [("eps_square", self.eps_square), ("eps", self.eps), ("weight_decay", self.weight_decay)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err((field, format!("must be a non-negative number, got {v}")));
            }
        }
        // The EMA of squared gradients and the update are float32: what keeps a zero gradient
        // from dividing 0 by 0 must survive rounding to float32 (1e-45 does not).
        let smoothed = (1.0 - self.betas[1]) as f32 * self.eps_square as f32;
        if smoothed == 0.0 && self.eps as f32 == 0.0 {
            return Err((
                "eps_square",
                "and `eps` both vanish in float32 (`(1 - b2) * eps_square` and `eps`): a zero gradient would divide 0 \
                 by 0"
                    .into(),
            ));
        }
        if !(self.update_clip.is_finite() && self.update_clip > 0.0) {
            return Err(("update_clip", format!("must be a positive number, got {}", self.update_clip)));
        }
        if self.mup_base_hidden_size == Some(0) {
            return Err(("mup_base_hidden_size", "must be at least 1 (or null: no μParam scaling)".into()));
        }
        Ok(())
    }

    /// The factor μParam (simple) scales the projections' updates by in a model of
    /// `hidden_size`: `min(base / hidden_size, 1)` in double precision (a model narrower than
    /// the base is not scaled up, as in AXLearn), 1 without a base.
    pub fn linear_update_scale(&self, hidden_size: i64) -> f64 {
        self.mup_base_hidden_size.map_or(1.0, |base| (base as f64 / hidden_size as f64).min(1.0))
    }
}

/// A training stage's optimizer: `AdEMAMix` (no `kind`, or `kind: ademamix`; written without
/// it, so that recorded configurations keep their digests) or the AFM report's RMSProp with
/// momentum (`kind: rmsprop-momentum`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum OptimizerConfig {
    /// `AdEMAMix`.
    AdEMAMix(AdEMAMixConfig),
    /// RMSProp with momentum.
    RmsPropMomentum(RmsPropMomentumConfig),
}

impl Default for OptimizerConfig {
    fn default() -> Self {
        Self::AdEMAMix(AdEMAMixConfig::default())
    }
}

impl<'de> Deserialize<'de> for OptimizerConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let mut value = serde_json::Value::deserialize(deserializer)?;
        let kind = value.get("kind").cloned();
        match kind.as_ref().and_then(serde_json::Value::as_str) {
            Some("rmsprop-momentum") => {
                serde_json::from_value(value).map(Self::RmsPropMomentum).map_err(D::Error::custom)
            }
            None | Some("ademamix") if kind.as_ref().is_none_or(serde_json::Value::is_string) => {
                if let Some(map) = value.as_object_mut() {
                    map.remove("kind");
                }
                serde_json::from_value(value).map(Self::AdEMAMix).map_err(D::Error::custom)
            }
            _ => Err(D::Error::custom(format!(
                "unknown optimizer kind {}: expected `ademamix` (the default) or `rmsprop-momentum`",
                kind.unwrap_or_default()
            ))),
        }
    }
}

impl OptimizerConfig {
    /// Checks the settings and fills what depends on the step count; the error names the
    /// field.
    pub fn resolve(&mut self, steps: u64) -> Result<(), (&'static str, String)> {
        match self {
            Self::AdEMAMix(c) => c.resolve(steps),
            Self::RmsPropMomentum(c) => c.check(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ademamix_is_the_default_and_keeps_its_encoding() {
        let c: OptimizerConfig = serde_json::from_value(json!({"alpha": 4.0})).unwrap();
        assert_eq!(c, OptimizerConfig::AdEMAMix(AdEMAMixConfig { alpha: 4.0, ..AdEMAMixConfig::default() }));
        let named: OptimizerConfig = serde_json::from_value(json!({"kind": "ademamix", "alpha": 4.0})).unwrap();
        assert_eq!(named, c);
        let encoded = serde_json::to_value(&c).unwrap();
        assert_eq!(encoded, serde_json::to_value(AdEMAMixConfig { alpha: 4.0, ..AdEMAMixConfig::default() }).unwrap());
        assert!(encoded.get("kind").is_none());
    }

    #[test]
    fn rmsprop_momentum_takes_the_reports_defaults() {
        let c: OptimizerConfig = serde_json::from_value(json!({"kind": "rmsprop-momentum"})).unwrap();
        let encoded = serde_json::to_value(&c).unwrap();
        assert_eq!(
            encoded,
            json!({"kind": "rmsprop-momentum", "betas": [0.95, 0.95], "eps_square": 1e-30, "eps": 0.0,
                   "update_clip": 1.0, "clip": "rms", "weight_decay": 3.16e-4, "weight_decay_scale": "schedule"})
        );
        assert_eq!(serde_json::from_value::<OptimizerConfig>(encoded).unwrap(), c);
        let other: OptimizerConfig = serde_json::from_value(
            json!({"kind": "rmsprop-momentum", "clip": "norm", "weight_decay_scale": "learning-rate"}),
        )
        .unwrap();
        assert!(matches!(
            other,
            OptimizerConfig::RmsPropMomentum(RmsPropMomentumConfig { clip: UpdateClip::Norm, .. })
        ));
    }

    #[test]
    fn wrong_settings_are_refused_with_their_field() {
        for bad in [json!({"kind": "adam"}), json!({"kind": 3}), json!({"kind": "rmsprop-momentum", "alpha": 8.0})] {
            assert!(serde_json::from_value::<OptimizerConfig>(bad.clone()).is_err(), "{bad}");
        }
        let mut c: OptimizerConfig =
            serde_json::from_value(json!({"kind": "rmsprop-momentum", "betas": [0.95, 1.0]})).unwrap();
        assert_eq!(c.resolve(10).unwrap_err().0, "betas");
        for tiny in [0.0, 1e-45] {
            let mut c: OptimizerConfig =
                serde_json::from_value(json!({"kind": "rmsprop-momentum", "eps_square": tiny})).unwrap();
            assert_eq!(c.resolve(10).unwrap_err().0, "eps_square", "{tiny}");
        }
        let mut c: OptimizerConfig =
            serde_json::from_value(json!({"kind": "rmsprop-momentum", "eps_square": 0.0, "eps": 1e-8})).unwrap();
        assert!(c.resolve(10).is_ok());
        let mut c: OptimizerConfig =
            serde_json::from_value(json!({"kind": "rmsprop-momentum", "update_clip": 0.0})).unwrap();
        assert_eq!(c.resolve(10).unwrap_err().0, "update_clip");
    }
}
