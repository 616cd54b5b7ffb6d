//! Data cards and plots from a run's manifests alone.
//!
//! `prov-card` owns what a dataset curator publishes about a run's output: a Hugging Face
//! dataset card (`README.md` with YAML front matter), a Croissant 1.0 JSON-LD file with the
//! Responsible AI (RAI) fields, and plots (SVG, and PNG rasterised with an embedded font).
//! Everything is read from the run's records in the store: the run, stage, source, dataset and
//! verdict records and their statistics. The only other bytes read are the output dataset's
//! Parquet shards, to give Croissant the SHA-256 it requires (the store names objects by BLAKE3
//! only). It never reads the corpus, ledgers or the sources' bytes.
//!
//! Every number in a card names the manifest it comes from: as a Markdown footnote in the
//! Hugging Face card (its label is the manifest digest's first 12 hex digits, the full digest
//! is listed at the end), and inline as `(blake3:…)` in Croissant's text fields.
//!
//! It does not decide anything: the numbers are the stages' own statistics.
//!
//! # Brief overview
//!
//! - [`CardInputs`]: a run's records, with the chain of stages that made the output dataset.
//! - [`hf::render`], [`croissant::build`], [`plots::plots`] and [`plots::png`]: the outputs.
//! - [`write_card`]: all of it into a directory.
//!
//! # Example
//!
//! ```
//! assert_eq!(prov_card::hf::size_category(15_640), "10K<n<100K");
//! assert_eq!(prov_card::group(1_234_567), "1,234,567");
//! ```

#![deny(missing_docs)]

pub mod croissant;
pub mod hf;
mod inputs;
pub mod plots;

use std::fmt::Write as _;
use std::path::Path;

pub use inputs::{CardInputs, Output, Source};
use prov_manifest::StoredError;
use prov_store::{Digest, Store, StoreError};

/// An error generating a card.
#[derive(Debug, thiserror::Error)]
pub enum CardError {
    /// A record could not be read.
    #[error(transparent)]
    Stored(#[from] StoredError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run writes no dataset.
    #[error("run `{run}` has no stage with a `dataset` output; a data card describes a dataset")]
    NoDataset {
        /// The run record.
        run: Digest,
    },
    /// The stage asked for is not in the run or has no dataset output.
    #[error("run `{run}` has no stage `{stage}` with a `dataset` output")]
    NoSuchDataset {
        /// The run record.
        run: Digest,
        /// The stage asked for.
        stage: String,
    },
    /// A shard of the output is not in the store.
    #[error("shard `{digest}` of the output dataset is not in the store; Croissant needs its SHA-256")]
    MissingShard {
        /// The shard.
        digest: Digest,
    },
    /// A shard could not be read (or does not match its digest).
    #[error("reading shard `{digest}`: {source}")]
    ReadShard {
        /// The shard.
        digest: Digest,
        /// Why.
        source: std::io::Error,
    },
    /// The output directory could not be written.
    #[error(transparent)]
    Io(std::io::Error),
    /// A plot could not be rasterised.
    #[error("rendering plot `{name}`: {reason}")]
    Render {
        /// The plot.
        name: String,
        /// Why.
        reason: String,
    },
}

impl CardError {
    /// Returns true when stored bytes do not match their digest.
    pub fn is_integrity_failure(&self) -> bool {
        match self {
            Self::Stored(e) => e.is_integrity_failure(),
            Self::Store(e) => e.is_integrity_failure(),
            Self::ReadShard { source, .. } => source.kind() == std::io::ErrorKind::InvalidData,
            _ => false,
        }
    }
}

/// Formats an integer with thousands separators: `1,234,567`.
pub fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The primary subtag of a language tag, lower-cased: `pt-PT` → `pt`.
pub fn primary_language(tag: &str) -> String {
    tag.split(['-', '_']).next().unwrap_or(tag).to_lowercase()
}

/// The manifests a card cites, in order of first citation.
#[derive(Debug, Default)]
pub struct Refs {
    cited: Vec<(Digest, String)>,
    inline: bool,
}

impl Refs {
    /// Citations written inline, ` (blake3:<12 hex>)`, for text outside Markdown.
    pub fn inline() -> Self {
        Self { cited: Vec::new(), inline: true }
    }

    /// Returns the reference for a manifest (a Markdown footnote reference, or inline),
    /// recording it.
    pub fn cite(&mut self, digest: Digest, what: impl Into<String>) -> String {
        if !self.cited.iter().any(|(d, _)| *d == digest) {
            self.cited.push((digest, what.into()));
        }
        if self.inline { format!(" (blake3:{})", digest.short()) } else { format!("[^{}]", digest.short()) }
    }

    /// The cited manifests, in order of first citation.
    pub fn list(&self) -> &[(Digest, String)] {
        &self.cited
    }

    /// The footnote definitions.
    pub fn footnotes(&self) -> String {
        let mut out = String::new();
        for (d, what) in &self.cited {
            let _ = writeln!(out, "[^{}]: `{d}`: {what}", d.short());
        }
        out
    }
}

/// Which card to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `README.md` and the plots (`plots/*.svg`, `plots/*.png`).
    Hf,
    /// `croissant.json`.
    Croissant,
}

/// What [`write_card`] does.
#[derive(Debug, Clone)]
pub struct CardOptions {
    /// The card to write.
    pub format: Format,
    /// How many languages the language plot shows.
    pub top_languages: usize,
    /// Also copy the output's shards to `data/shard-NNNNN.parquet`, where Croissant's
    /// `contentUrl`s point.
    pub with_data: bool,
    /// The stage whose `dataset` output the card describes; `None` for the run's last.
    pub dataset: Option<String>,
}

/// A file written, relative to the output directory.
#[derive(Debug, Clone)]
pub struct Written {
    /// The path, relative to the output directory.
    pub path: String,
    /// Its size in bytes.
    pub bytes: u64,
}

fn fs_create(dir: &Path) -> Result<(), CardError> {
    fs_err::create_dir_all(dir).map_err(CardError::Io)
}

/// One file of a card: its path (relative to the card's directory) and its bytes.
#[derive(Debug, Clone)]
pub struct CardFile {
    /// The path, `/`-separated (`README.md`, `plots/<stem>.svg`, `croissant.json`).
    pub path: String,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// The files of a card for the run `run_manifest`, in memory: what [`write_card`] writes,
/// except the data shards of `with_data` (a corpus is not held in memory).
///
/// # Errors
///
/// [`CardError`] when a record, a shard or a plot cannot be read or drawn.
pub fn card_files(store: &Store, run_manifest: &Digest, options: &CardOptions) -> Result<Vec<CardFile>, CardError> {
    let ev = CardInputs::read_output(store, run_manifest, options.dataset.as_deref())?;
    let mut out = Vec::new();
    let mut add = |path: String, bytes: Vec<u8>| out.push(CardFile { path, bytes });
    match options.format {
        Format::Hf => {
            let plots = plots::plots(&ev, options.top_languages);
            let mut listed = Vec::new();
            for p in &plots {
                add(format!("plots/{}.svg", p.stem), p.svg.clone().into_bytes());
                add(format!("plots/{}.png", p.stem), plots::png(p.stem, &p.svg)?);
                listed.push((format!("plots/{}.png", p.stem), p.caption.clone()));
            }
            add("README.md".into(), hf::render(&ev, &listed).into_bytes());
        }
        Format::Croissant => {
            let mut sha = Vec::new();
            for shard in &ev.output.record.shards {
                sha.push(croissant::sha256_of(store, &shard.digest)?);
            }
            let doc = croissant::build(&ev, &sha);
            let mut text = serde_json::to_string_pretty(&doc).expect("JSON serialises");
            text.push('\n');
            add("croissant.json".into(), text.into_bytes());
        }
    }
    Ok(out)
}

/// Writes a card for the run `run_manifest` into `dir` ([`card_files`]), each file
/// atomically, and returns the files written.
///
/// # Errors
///
/// [`CardError`] as [`card_files`], and when a file cannot be written.
pub fn write_card(
    store: &Store,
    run_manifest: &Digest,
    dir: &Path,
    options: &CardOptions,
) -> Result<Vec<Written>, CardError> {
    let mut written = Vec::new();
    let mut write = |path: String, bytes: &[u8]| -> Result<(), CardError> {
        let dest = dir.join(&path);
        let parent = dest.parent().map_or_else(|| dir.to_path_buf(), Path::to_path_buf);
        fs_create(&parent)?;
        prov_store::write_atomically(&parent, &dest, bytes)?;
        written.push(Written { path, bytes: bytes.len() as u64 });
        Ok(())
    };
    // Made first: a shard missing from the store fails here, before anything is written.
    let files = card_files(store, run_manifest, options)?;
    if matches!(options.format, Format::Croissant) && options.with_data {
        // The shards one at a time, each read from the store and written before the next.
        let ev = CardInputs::read_output(store, run_manifest, options.dataset.as_deref())?;
        for (i, shard) in ev.output.record.shards.iter().enumerate() {
            write(croissant::shard_path(i), &store.read(&shard.digest)?)?;
        }
    }
    for file in files {
        write(file.path, &file.bytes)?;
    }
    Ok(written)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
