//! What document stages share: the document files of a source input ([`source_files`]), and
//! the scaffold every filter stage stands on ([`filter`]): its per-shard results, the
//! statistics each filter reports (documents and words per rule, removed per language), and
//! writing the kept documents and the ledger as the stage's `dataset` and `ledger` outputs;
//! and the two passes of the filters that cut at quantiles of the corpus's own scores
//! ([`scores`]).
//!
//! The filter kinds themselves live in the crates of their concepts (`prov-robots`,
//! `prov-pii`, `prov-dedup`, `prov-toxicity`, `prov-prep`'s `license`).

pub mod filter;
pub mod scores;
mod sources;

pub use filter::{
    CountedShard, Decided, FilterParts, FilterStats, FilteredShard, filtered_shard, map_decided, map_input_shards,
    map_shards, outputs, reduce_filtered, shard_tasks, write_counted_ledger,
};
pub use sources::source_files;
