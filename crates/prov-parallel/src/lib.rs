//! Parallel data, the sentence pairs of EuroLLM's pipeline (report §2.3): "Bifixer-style
//! normalisation and deduplication of sentence pairs, then removal of pairs below quality
//! thresholds".
//!
//! - [`bifixer`]: Bifixer 0.8.12's repair of a pair and its pair hash, equal to PyPI
//!   `bifixer` (`tests/bifixer_reference.rs` runs the real one on UDHR pairs, clean and
//!   mangled), built on `prov-textfix`'s ftfy;
//! - [`rules`]: Bifixer's rule tables as an input, read from the pinned package by
//!   `scripts/bifixer-rules.py` rather than shipped (Bifixer is GPL-3.0, Provenant Apache-2.0).

pub mod bifixer;
pub mod rules;
