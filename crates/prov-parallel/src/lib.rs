//! Parallel data, the sentence pairs of EuroLLM's pipeline (report §2.3): "Bifixer-style
//! normalisation and deduplication of sentence pairs, then removal of pairs below quality
//! thresholds".
//!
//! - [`bifixer`]: Bifixer 0.8.12's repair of a pair and its pair hash, equal to PyPI
//!   `bifixer` (`tests/bifixer_reference.rs` runs the real one on UDHR pairs, clean and
//!   mangled), built on `prov-textfix`'s ftfy;
//! - [`rules`]: Bifixer's rule tables as an input, read from the pinned package by
//!   `scripts/bifixer-rules.py` rather than shipped (Bifixer is GPL-3.0, Provenant Apache-2.0);
//! - [`pairs`]: a sentence pair as a document (the source side its text, the target side in its
//!   metadata), so that pairs have ledgers, explanations and proofs like documents;
//! - [`stage`]: the `sentence-pairs`, `bifixer` and `pair-examples` stage kinds (the last
//!   turns pairs into translation examples for SFT);
//! - [`scorer`] and [`logistic`]: the pair scorer that stands in for Bicleaner and `CometKiwi`
//!   (a logistic classifier and a ridge quality estimate on dictionary and length features,
//!   trained against synthetic noise), and [`score_stage`]: `pair-score-train`, which pins it,
//!   and `pair-score`, which applies the report's thresholds.

pub mod bifixer;
pub mod logistic;
pub mod pairs;
pub mod rules;
pub mod score_stage;
pub mod scorer;
pub mod stage;

/// Registers `sentence-pairs`, `bifixer`, `pair-score-train`, `pair-score` and
/// `pair-examples`.
pub fn register(registry: &mut prov_exec::Registry) {
    use std::sync::Arc;
    registry.register(Arc::new(stage::SentencePairsStage));
    registry.register(Arc::new(stage::BifixerStage));
    registry.register(Arc::new(score_stage::PairScoreTrainStage));
    registry.register(Arc::new(score_stage::PairScoreStage));
    registry.register(Arc::new(stage::PairExamplesStage));
}
