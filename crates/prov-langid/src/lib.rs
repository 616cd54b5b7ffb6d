//! Language identification for Provenant (EuroLLM-22B report §2.3, the language identification
//! step of the `CCNet`-based pipeline): a character n-gram naive Bayes identifier
//! ([`model`]) over the grams of [`grams`], trained and pinned by the `langid-train` stage and
//! applied by the `langid` filter ([`stage`]), whose ledger records each document's detected
//! language and posterior and makes a mismatch with the declared language a rule of its own.
//!
//! No pretrained identifier can be downloaded here; the model is trained on the UDHR's
//! translations in the main job, and its held-out accuracy is compared with PyPI's
//! `lingua-language-detector` on the same text (`tests/test_langid.rs`).

pub mod grams;
pub mod model;
pub mod stage;

pub use model::{Identification, Model, ModelError, Ranked, Ranking, TrainParams, Trainer};
pub use stage::{LangidStage, LangidTrainStage};

/// Registers the `langid-train` and `langid` stage kinds.
pub fn register(registry: &mut prov_exec::Registry) {
    registry.register(std::sync::Arc::new(LangidTrainStage));
    registry.register(std::sync::Arc::new(LangidStage));
}
