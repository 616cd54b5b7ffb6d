//! Data preparation stages of Provenant.
//!
//! `prov-prep` owns the stages that transform documents: for now [`ShardStage`] (JSON Lines or
//! Parquet in, N deterministic Parquet shards out) and [`SampleStage`] (seeded sampling,
//! shard-parallel). The compliance filters (robots.txt, PII, toxicity, licenses, dedup,
//! decontamination) join them here, each writing a per-document ledger:
//!
//! - [`RobotsStage`] applies a pinned robots.txt snapshot with hindsight, using [`robots`], the
//!   RFC 9309 robots.txt parser and matcher;
//! - [`PiiStage`] replaces e-mail, IP and IBAN spans by markers, using [`pii`];
//! - [`LicenseStage`] keeps documents whose declared license the policy allows (`prov-license`);
//! - [`DedupStage`] removes exact and near (`MinHash` LSH) duplicates, keep-first;
//! - [`DecontaminateStage`] removes documents that contain a pinned benchmark's prompts;
//! - [`UrlIndexStage`] indexes a dataset's URLs (`BLAKE3(url) -> id`, Merkle-rooted) for proofs;
//! - [`ToxicityStage`] removes each language's most toxic documents, scored by a classifier
//!   that `prov-toxicity` trains with libtorch; the embedding and the scoring live here, in
//!   plain Rust, so that the filter itself is portable.
//!
//! [`TranslationPairsStage`] turns parallel documents (ids `<prefix>-<translation>-<unit>`, the
//! UDHR's translations) into [`TranslationExample`]s for supervised fine-tuning, which
//! [`read_examples`] reads back.
//!
//! Stages read documents through `prov-dataset` and never touch anything but their
//! [`prov_exec::StageContext`].
//!
//! # Example
//!
//! ```
//! let mut registry = prov_exec::Registry::with_builtins();
//! prov_prep::register(&mut registry);
//! assert!(registry.get("shard").is_some() && registry.get("sample").is_some());
//! ```

mod decontaminate;
mod dedup;
mod filter;
mod license_filter;
pub mod pii;
mod pii_filter;
pub mod robots;
mod robots_filter;
mod sample;
mod shard;
pub mod toxicity;
mod translation_pairs;
mod url_index;

pub use decontaminate::{BenchmarkIndex, Contamination, DecontaminateConfig, DecontaminateStage, ngram_tokens};
pub use dedup::{DedupConfig, DedupStage, MinHasher, band_hashes, estimated_jaccard, normalise};
pub use license_filter::{LicenseConfig, LicenseStage, MissingLicense};
pub use pii_filter::{PiiConfig, PiiStage};
pub use robots_filter::{APERTUS_AGENTS, RobotsConfig, RobotsMode, RobotsStage, robots_decider, url_host};
pub use sample::{SampleConfig, SampleStage, sample_key};
pub use shard::{ShardConfig, ShardStage};
pub use toxicity::{ToxicityConfig, ToxicityStage};
pub use translation_pairs::{
    DEFAULT_TEMPLATE, ExamplesError, PairCounts, ParallelDocuments, ParallelId, TranslationExample,
    TranslationPairsConfig, TranslationPairsStage, TranslationSide, parse_parallel_id, read_examples, write_examples,
};
pub use url_index::{URL_INDEX_KIND, UrlIndexConfig, UrlIndexStage};

use std::sync::Arc;

/// Registers every stage kind of this crate.
pub fn register(registry: &mut prov_exec::Registry) {
    registry.register(Arc::new(ShardStage));
    registry.register(Arc::new(SampleStage));
    registry.register(Arc::new(RobotsStage));
    registry.register(Arc::new(PiiStage));
    registry.register(Arc::new(DedupStage));
    registry.register(Arc::new(DecontaminateStage));
    registry.register(Arc::new(LicenseStage));
    registry.register(Arc::new(ToxicityStage));
    registry.register(Arc::new(UrlIndexStage));
    registry.register(Arc::new(TranslationPairsStage));
}
