//! Toxicity, as the Apertus report filters it: a document embedding of hashed character
//! n-grams ([`embed`]), a small classifier per language and its stored layout ([`model`]), the
//! `toxicity` filter that removes each language's most toxic documents with a ledger
//! ([`ToxicityStage`], in `filter`), and the `toxicity-train` stage kind that trains the
//! classifier ([`ToxicityTrainStage`], in `train`; its libtorch training runs in the worker,
//! `prov_worker::toxicity`). Scoring is plain Rust, so the filter is portable; only training
//! depends on libtorch and its envelope.

pub mod embed;
mod filter;
pub mod model;
mod train;

pub use filter::{ToxicityConfig, ToxicityStage};
pub use train::{ToxicityTrainStage, TrainConfig};

/// Registers the `toxicity` and `toxicity-train` stage kinds.
pub fn register(registry: &mut prov_exec::Registry) {
    registry.register(std::sync::Arc::new(ToxicityStage));
    registry.register(std::sync::Arc::new(ToxicityTrainStage));
}
