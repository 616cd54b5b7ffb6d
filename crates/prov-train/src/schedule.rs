//! The warmup-stable-decay learning-rate schedule (WSD) of the Apertus report: a linear warmup
//! from 10% of the peak, a constant phase, and a 1-sqrt cooldown to 10% of the peak.
//!
//! With `T` steps, `W` warmup steps, `C` cooldown steps, and `t = step - 1` the steps taken
//! before the one whose rate is asked (steps count from 1):
//!
//! ```text
//! t <  W         lr = peak * (0.1 + 0.9 * t / W)
//! W <= t < T - C lr = peak
//! t >= T - C     lr = peak * (0.1 + 0.9 * (1 - sqrt((t - (T - C) + 1) / C)))
//! ```
//!
//! so the first step runs at 10% of the peak and the last at exactly 10%.
//!
//! Fine-tuning and alignment use [`Linear`] instead: the linear warmup and decay of
//! transformers' `get_linear_schedule_with_warmup`, which the Apertus report's SFT settings
//! name; or [`Cosine`], transformers' `get_cosine_schedule_with_warmup`, which the EuroLLM
//! report's SFT uses (§3.2: "a cosine scheduler with warm-up steps"). EuroLLM's pretraining
//! follows [`Phased`]: one Megatron-LM segment per phase ([`crate::phases`]).

use crate::phases::PhaseLr;

/// A WSD schedule over a fixed number of steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Wsd {
    peak: f64,
    steps: u64,
    warmup: u64,
    cooldown: u64,
}

/// The share of the peak at the start of warmup and at the end of cooldown.
pub const FLOOR: f64 = 0.1;

impl Wsd {
    /// The schedule; `warmup + cooldown` must not exceed `steps` (the stage's configuration
    /// checks it).
    pub fn new(peak: f64, steps: u64, warmup: u64, cooldown: u64) -> Self {
        debug_assert!(warmup + cooldown <= steps);
        Self { peak, steps, warmup, cooldown }
    }

    /// The learning rate of step `step` (from 1).
    pub fn lr(&self, step: u64) -> f64 {
        let t = step.saturating_sub(1);
        let decay_start = self.steps - self.cooldown;
        let share = if t < self.warmup {
            FLOOR + (1.0 - FLOOR) * t as f64 / self.warmup as f64
        } else if t < decay_start {
            1.0
        } else {
            let progress = ((t - decay_start + 1) as f64 / self.cooldown as f64).min(1.0);
            FLOOR + (1.0 - FLOOR) * (1.0 - progress.sqrt())
        };
        self.peak * share
    }
}

/// Linear warmup from 0 and linear decay towards 0, as transformers'
/// `get_linear_schedule_with_warmup` computes it, with `t = step - 1` the steps taken before:
///
/// ```text
/// t <  W   lr = peak * t / W
/// t >= W   lr = peak * max(0, (T - t) / (T - W))
/// ```
///
/// so without warmup the first step runs at the peak and the last at `peak / (T - W)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Linear {
    peak: f64,
    steps: u64,
    warmup: u64,
}

impl Linear {
    /// The schedule; `warmup` must be below `steps` (the stage's configuration checks it).
    pub fn new(peak: f64, steps: u64, warmup: u64) -> Self {
        debug_assert!(warmup < steps);
        Self { peak, steps, warmup }
    }

    /// The learning rate of step `step` (from 1).
    pub fn lr(&self, step: u64) -> f64 {
        let t = step.saturating_sub(1);
        let share = if t < self.warmup {
            t as f64 / self.warmup as f64
        } else {
            (self.steps.saturating_sub(t) as f64 / (self.steps - self.warmup) as f64).max(0.0)
        };
        self.peak * share
    }
}

/// Linear warmup from 0 and a half-cosine decay to 0, as transformers'
/// `get_cosine_schedule_with_warmup` (one half cycle) computes it, with `t = step - 1`:
///
/// ```text
/// t <  W   lr = peak * t / W
/// t >= W   lr = peak * max(0, 0.5 * (1 + cos(π · (t - W) / (T - W))))
/// ```
///
/// in transformers' order of operations (`math.pi * 0.5 * 2.0 * progress`), so that the rates
/// are its rates to the bit on the same machine. The cosine is the platform's: the stages that
/// use it are of class `envelope`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cosine {
    peak: f64,
    steps: u64,
    warmup: u64,
}

impl Cosine {
    /// The schedule; `warmup` must be below `steps` (the stage's configuration checks it).
    pub fn new(peak: f64, steps: u64, warmup: u64) -> Self {
        debug_assert!(warmup < steps);
        Self { peak, steps, warmup }
    }

    /// The learning rate of step `step` (from 1).
    pub fn lr(&self, step: u64) -> f64 {
        let t = step.saturating_sub(1);
        let share = if t < self.warmup {
            t as f64 / self.warmup.max(1) as f64
        } else {
            let progress = (t - self.warmup) as f64 / (self.steps - self.warmup).max(1) as f64;
            (0.5 * (1.0 + (std::f64::consts::PI * 0.5 * 2.0 * progress).cos())).max(0.0)
        };
        self.peak * share
    }
}

/// Consecutive phases, each its own Megatron-LM segment ([`PhaseLr`]) with its step count
/// restarted at the phase's start: EuroLLM's three-phase pretraining (§2.2).
#[derive(Debug, Clone, PartialEq)]
pub struct Phased {
    segments: Vec<PhaseLr>,
}

impl Phased {
    /// The schedule of `segments`, in order.
    pub fn new(segments: Vec<PhaseLr>) -> Self {
        Self { segments }
    }

    /// The learning rate of step `step` (from 1); past the last phase, its final rate.
    pub fn lr(&self, step: u64) -> f64 {
        let mut t = step.saturating_sub(1);
        for s in &self.segments {
            if t < s.steps {
                return s.lr(t);
            }
            t -= s.steps;
        }
        self.segments.last().map_or(0.0, |s| s.lr(s.steps))
    }
}

/// The learning-rate schedule a training loop follows.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    /// Pretraining's warmup-stable-decay.
    Wsd(Wsd),
    /// Fine-tuning's linear warmup and decay.
    Linear(Linear),
    /// Fine-tuning's linear warmup and cosine decay.
    Cosine(Cosine),
    /// Phased pretraining's segments.
    Phased(Phased),
}

impl Schedule {
    /// The learning rate of step `step` (from 1).
    pub fn lr(&self, step: u64) -> f64 {
        match self {
            Self::Wsd(s) => s.lr(step),
            Self::Linear(s) => s.lr(step),
            Self::Cosine(s) => s.lr(step),
            Self::Phased(s) => s.lr(step),
        }
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // the stable phase is exactly the peak
mod tests {
    use super::*;

    #[test]
    fn linear_decays_as_transformers_does() {
        // get_linear_schedule_with_warmup(opt, 0, 4) with lr 1: 1, 0.75, 0.5, 0.25.
        let s = Linear::new(1.0, 4, 0);
        assert_eq!((1..=4).map(|t| s.lr(t)).collect::<Vec<_>>(), vec![1.0, 0.75, 0.5, 0.25]);
        // With 2 warmup steps of 6: 0, 0.5, then (6 - t) / 4 for t = 2..5.
        let s = Linear::new(2.0, 6, 2);
        assert_eq!((1..=6).map(|t| s.lr(t)).collect::<Vec<_>>(), vec![0.0, 1.0, 2.0, 1.5, 1.0, 0.5]);
        assert_eq!(Schedule::Linear(s).lr(3), 2.0);
    }

    #[test]
    fn phases() {
        let s = Wsd::new(1.0, 100, 10, 20);
        assert!((s.lr(1) - 0.1).abs() < 1e-12);
        assert!((s.lr(6) - (0.1 + 0.9 * 0.5)).abs() < 1e-12);
        assert_eq!(s.lr(11), 1.0);
        assert_eq!(s.lr(80), 1.0);
        // First cooldown step: progress 1/20.
        assert!((s.lr(81) - (0.1 + 0.9 * (1.0 - (0.05f64).sqrt()))).abs() < 1e-12);
        assert!((s.lr(100) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn monotone_up_then_down() {
        let s = Wsd::new(3e-3, 300, 30, 60);
        let lrs: Vec<f64> = (1..=300).map(|t| s.lr(t)).collect();
        assert!(lrs[..31].windows(2).all(|w| w[0] <= w[1]));
        assert!(lrs[30..].windows(2).all(|w| w[0] >= w[1]));
        assert!(lrs.iter().all(|&l| (3e-4 - 1e-15..=3e-3).contains(&l)));
    }

    #[test]
    fn no_warmup_or_cooldown() {
        let s = Wsd::new(2.0, 5, 0, 0);
        assert!((1..=5).all(|t| s.lr(t) == 2.0));
    }
}
