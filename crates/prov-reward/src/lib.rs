//! Rewards for alignment, in plain Rust (no libtorch): what a completion is worth and which
//! completion data a preference stage may train on.
//!
//! Owns: chrF and chrF++ ([`chrf`]), computed exactly as sacrebleu 2.x computes them, so that
//! a translation reward pinned in a manifest is the score a reader gets from sacrebleu; the
//! completion data of a prompt with its rewards, its validation with errors that name the
//! prompt and field, QRPO's quantile rewards and DPO's chosen/rejected pairs
//! ([`preference`]); the `reward` stage ([`stage`]). Does not own the losses (they need
//! tensors: `prov-train`) or sampling.
//!
//! # Brief overview
//!
//! - [`chrf::Chrf`]: a chrF configuration (sacrebleu's parameters); `sentence_score`,
//!   `corpus_score`, and the additive [`chrf::ChrfStats`] behind them.
//! - [`preference::PromptCompletions`], [`preference::PromptRewards`], [`preference::validate`],
//!   [`preference::quantile_reward`], [`preference::preference_pair`].
//!
//! ```
//! use prov_reward::chrf::Chrf;
//! use prov_reward::preference::{quantile_rewards, preference_pair, Pair};
//!
//! let reference = "Alle Menschen sind frei und gleich an Würde und Rechten geboren.";
//! let hypotheses = ["Alle Menschen sind frei und gleich geboren.", "Jeder Mensch ist frei."];
//! let rewards: Vec<f64> =
//!     hypotheses.iter().map(|h| Chrf::CHRF.sentence_score(h, &[reference]).unwrap()).collect();
//! assert!(rewards[0] > rewards[1]);
//! assert_eq!(quantile_rewards(&rewards), vec![1.0, 0.5]);
//! assert_eq!(preference_pair(&rewards), Some(Pair { chosen: 0, rejected: 1 }));
//! ```

#![deny(missing_docs)]

pub mod chrf;
pub mod preference;
pub mod stage;

/// Registers the `reward` stage kind.
pub fn register(registry: &mut prov_exec::Registry) {
    registry.register(std::sync::Arc::new(stage::RewardStage));
}
