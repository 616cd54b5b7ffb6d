//! The general data stages of Provenant: [`ShardStage`] (JSON Lines or Parquet in, N
//! deterministic Parquet shards out), [`SampleStage`] (seeded sampling, shard-parallel),
//! [`LicenseStage`] (keeps documents whose declared license the policy allows, with a ledger,
//! through `prov-license`), [`UrlIndexStage`] (a dataset's URLs indexed, `BLAKE3(url) -> id`,
//! Merkle-rooted, for proofs) and [`TranslationPairsStage`], which turns parallel documents
//! (ids `<prefix>-<translation>-<unit>`, the UDHR's translations) into
//! [`TranslationExample`]s for supervised fine-tuning, which [`read_examples`] reads back.
//!
//! The compliance filters with libraries of their own live in the crates of their concepts:
//! `prov-robots`, `prov-pii`, `prov-dedup` (dedup and decontamination) and `prov-toxicity`;
//! what filters share is `prov-filter`'s.
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

mod license_filter;
mod sample;
mod shard;
mod translation_pairs;
mod url_index_stage;

pub use license_filter::{LicenseConfig, LicenseStage, MissingLicense};
pub use sample::{SampleConfig, SampleStage};
pub use shard::{ShardConfig, ShardStage};
pub use translation_pairs::{
    DEFAULT_TEMPLATE, ExamplesError, PairCounts, ParallelDocuments, ParallelId, Template, TranslationExample,
    TranslationPairsConfig, TranslationPairsStage, TranslationSide, parse_parallel_id, read_examples, write_examples,
};
pub use url_index_stage::{URL_INDEX_KIND, UrlIndexConfig, UrlIndexStage};

use std::sync::Arc;

/// Registers every stage kind of this crate.
pub fn register(registry: &mut prov_exec::Registry) {
    registry.register(Arc::new(ShardStage));
    registry.register(Arc::new(SampleStage));
    registry.register(Arc::new(LicenseStage));
    registry.register(Arc::new(UrlIndexStage));
    registry.register(Arc::new(TranslationPairsStage));
}
