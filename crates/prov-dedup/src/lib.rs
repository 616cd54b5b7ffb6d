//! Duplicates and contamination: the `dedup` stage kind, which removes exact and near
//! (`MinHash` LSH) duplicates keeping the first of each group ([`DedupStage`], in `dedup`), and
//! the `decontaminate` stage kind, which removes training documents whose n-grams cover a
//! pinned benchmark's prompts ([`DecontaminateStage`], in `decontaminate`). Both write a ledger
//! row for every document. AFM's decontamination, which spares n-grams of common usage, is two
//! stage kinds: `benchmark-ngrams` counts the benchmark's n-grams over a corpus and
//! `ngram-decontaminate` removes documents by those counts ([`common_usage`]).

pub mod common_usage;
mod decontaminate;
mod dedup;

pub use decontaminate::{BenchmarkIndex, Contamination, DecontaminateConfig, DecontaminateStage, ngram_tokens};
pub use dedup::{DedupConfig, DedupKey, DedupStage, MinHasher, band_hashes, estimated_jaccard, normalise};

/// Registers the `dedup`, `decontaminate`, `benchmark-ngrams` and `ngram-decontaminate` stage kinds.
pub fn register(registry: &mut prov_exec::Registry) {
    registry.register(std::sync::Arc::new(DedupStage));
    registry.register(std::sync::Arc::new(DecontaminateStage));
    registry.register(std::sync::Arc::new(common_usage::BenchmarkNgramsStage));
    registry.register(std::sync::Arc::new(common_usage::NgramDecontaminateStage));
}
