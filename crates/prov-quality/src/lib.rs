//! Document quality scoring, the part of EuroLLM's pipeline the report calls EuroFilter
//! (§2.3): a regression from a document's text to a quality score, trained on labelled
//! documents. The report's scorer is mDeBERTa fine-tuned on LLM annotations; neither the model
//! nor the annotations can be had here, so Provenant's scorer is the classic linear stand-in,
//! built from parts a user can check against scikit-learn itself:
//!
//! - [`features`]: a document's hashed character n-grams within words, exactly as
//!   scikit-learn's `HashingVectorizer(analyzer="char_wb", alternate_sign=True, norm="l2")`
//!   computes them (`MurmurHash3`, signed buckets, L2 normalisation), bit for bit;
//! - [`ridge`]: least squares with an L2 penalty and an unpenalised intercept, scikit-learn's
//!   `Ridge(fit_intercept=True)`, solved by Cholesky on the normal equations.
//!
//! `crates/prov-quality/tests/sklearn_reference.rs` holds both to scikit-learn on real text.
//!
//! Around them: the pinned scorer's file ([`model`]), and the stage kinds ([`stage`]):
//! `quality-train`, which fits the scorer to labelled documents and pins it, and `quality`,
//! which scores every document and keeps the tiers a recipe asks for, with a ledger.

pub mod features;
pub mod model;
pub mod ridge;
pub mod stage;

/// Registers `quality-train` and `quality`.
pub fn register(registry: &mut prov_exec::Registry) {
    use std::sync::Arc;
    registry.register(Arc::new(stage::QualityTrainStage));
    registry.register(Arc::new(stage::QualityStage));
}
