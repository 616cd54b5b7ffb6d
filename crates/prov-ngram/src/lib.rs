//! n-gram language models, for EuroLLM's perplexity filter (EuroLLM-22B report §2.3, after
//! `CCNet`): estimating an interpolated modified Kneser-Ney model from token sentences as
//! KenLM's `lmplz` does ([`train`]), writing and reading it as an ARPA file ([`arpa`]), and
//! scoring text with it as KenLM's query does ([`query`]), so that the model Provenant trains
//! is the one `lmplz` would have trained and the scores are the ones the `kenlm` Python module
//! gives on the same file. The `ngram-train` stage ([`stage`]) estimates one model per language
//! from a dataset and pins them as ARPA files; the `perplexity` stage ([`perplexity`]) scores
//! each document with its language's model as `CCNet` does and filters by `CCNet`'s buckets.

pub mod arpa;
pub mod ccnet;
mod gram;
pub mod perplexity;
pub mod query;
pub mod stage;
pub mod train;
mod unicode_tables;

pub use arpa::{Arpa, ArpaError, NGramEntry};
pub use perplexity::PerplexityStage;
pub use query::{Model, WordScore};
pub use stage::NgramTrainStage;
pub use train::{Discounts, TrainError, Trainer};

/// Registers the `ngram-train` and `perplexity` stage kinds.
pub fn register(registry: &mut prov_exec::Registry) {
    registry.register(std::sync::Arc::new(NgramTrainStage));
    registry.register(std::sync::Arc::new(PerplexityStage));
}
