//! Datasets of Provenant: documents in Parquet shards with a FineWeb-like schema.
//!
//! `prov-dataset` owns the bytes of a dataset: the document schema (`id`, `text`, `url`,
//! `date`, `language`, `metadata`), reading documents from JSON Lines (optionally gzipped)
//! and Parquet with errors that name file, line and field, writing shards deterministically
//! into the store, and comparing two datasets row by row to find their first difference.
//!
//! It does not decide what goes into a shard (that is the stages' job, in the stage crates) nor
//! how datasets are cached (`prov-exec`).
//!
//! # Determinism of shard bytes
//!
//! A shard is written with fixed writer settings: Parquet format 2 (`WriterVersion::PARQUET_2_0`),
//! zstd level 3, at most [`ROW_GROUP_ROWS`] rows per row group, page statistics, and the
//! `created_by` string [`CREATED_BY`]. No timestamps or paths enter the file, so the same rows
//! give the same bytes on every machine with the same version of this crate.
//!
//! # Brief overview
//!
//! - [`Document`], [`document_schema`]: one row and the schema of a shard.
//! - [`read_documents`]: documents from a `.jsonl`, `.jsonl.gz` or `.parquet` file.
//! - [`ShardWriter`]: documents in, a [`ShardRef`] (digest, rows, bytes) out.
//! - [`read_shard`], [`shard_documents`]: documents back out of a stored shard, verified; the
//!   second streams them.
//! - [`first_difference`]: where two datasets first disagree.
//! - [`LedgerRow`], [`write_ledger_shard`], [`write_ledger`]: per-document decisions of filters;
//!   [`directory`]: which ledger shards hold an id.
//! - [`tokens`]: documents tokenised and packed into training samples, and the data order.
//! - [`url_index`]: the URL index, which maps a URL to document ids with a Merkle root, so
//!   that a proof can show a URL's documents or its absence.
//!
//! # Example
//!
//! ```
//! use prov_dataset::{Document, ShardWriter, read_shard};
//! let dir = tempfile::tempdir()?;
//! let store = prov_store::Store::init(&dir.path().join(".prov"))?;
//! let mut w = ShardWriter::new(&store)?;
//! w.push(Document::new("doc-1", "Hello"))?;
//! let shard = w.finish()?;
//! assert_eq!(shard.rows, 1);
//! assert_eq!(read_shard(&store, &shard.digest)?[0].text, "Hello");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod chunked;
mod diff;
pub mod directory;
mod document;
mod ledger;
mod read;
mod shard;
pub mod tokens;
pub mod url_index;

pub use diff::{DatasetDifference, first_difference};
pub use document::{Document, document_columns, document_schema, primary_language, sample_key};
pub use ledger::{
    LedgerDecision, LedgerRow, LedgerShard, evidence, ledger_schema, read_ledger, read_ledger_ids, read_ledger_shard,
    word_count, write_ledger, write_ledger_chunked, write_ledger_shard,
};
pub use read::{
    DocumentReader, InputFormat, SourceFile, SourceShapeError, read_documents, read_documents_as, source_files,
};
pub use shard::{
    CREATED_BY, ROW_GROUP_ROWS, ShardDocuments, ShardWriter, read_shard, read_shard_batches, shard_documents,
    shard_rows, write_dataset,
};

use std::path::PathBuf;

/// An error reading or writing dataset bytes.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// A document in an input file is malformed.
    #[error("{}:{line}: {}{message}", file.display(), field.as_ref().map(|f| format!("field `{f}`: ")).unwrap_or_default())]
    Input {
        /// The input file.
        file: PathBuf,
        /// 1-based line (JSON Lines) or row (Parquet).
        line: u64,
        /// The field at fault, when one is.
        field: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A file's format is not supported.
    #[error("`{}`: unsupported input format; expected `.jsonl`/`.json` (JSON Lines), `.jsonl.gz`/`.json.gz` or `.parquet`", .0.display())]
    UnsupportedFormat(PathBuf),
    /// Reading or writing failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The store failed or an object is corrupt.
    #[error(transparent)]
    Store(#[from] prov_store::StoreError),
    /// A record could not be stored or read.
    #[error(transparent)]
    Stored(#[from] prov_manifest::StoredError),
    /// A ledger record and its parts record do not match.
    #[error(transparent)]
    Ledger(#[from] prov_manifest::LedgerError),
    /// Parquet or Arrow failed.
    #[error("parquet: {0}")]
    Parquet(String),
    /// A document id occurs twice where ids must be unique (a ledger shard).
    #[error("document id `{0}` appears twice in one shard; ledgers need unique document ids")]
    DuplicateId(String),
    /// Token data is malformed or asked for something it does not hold.
    #[error("token data: {0}")]
    Tokens(String),
    /// A stored URL index is not sorted, unique and canonical.
    #[error("URL index `{digest}`: {message}")]
    UrlIndex {
        /// The index object.
        digest: prov_store::Digest,
        /// What is wrong.
        message: String,
    },
    /// A stored index chunk (of a ledger's id directory or a URL index) is not what its
    /// reference says.
    #[error("index chunk `{digest}`: {message}")]
    Chunk {
        /// The chunk object.
        digest: prov_store::Digest,
        /// What is wrong.
        message: String,
    },
    /// A sample index past the end of the token data.
    #[error("token data: sample {index} is out of range: the data has {samples} samples")]
    SampleOutOfRange {
        /// The index asked for.
        index: u64,
        /// How many samples there are.
        samples: u64,
    },
    /// The Parquet or Arrow reader gave up on a malformed file by panicking (it does on some
    /// inputs, found by fuzzing); caught and reported as the file's fault.
    #[error("{what} is not a readable Parquet file: the reader failed with `{message}`")]
    Malformed {
        /// The shard or file.
        what: String,
        /// The reader's panic message.
        message: String,
    },
    /// A stored shard does not have the document schema.
    #[error("shard `{digest}` does not have the document schema: {message}")]
    Schema {
        /// The shard.
        digest: prov_store::Digest,
        /// What differs.
        message: String,
    },
}

/// Runs a call into the Parquet and Arrow readers, turning a panic into
/// [`DatasetError::Malformed`] naming `what`: those readers panic on some malformed files
/// (offsets out of bounds, a division by zero), and a shard or input file may come from
/// anyone.
pub(crate) fn guard_parquet<T>(what: impl FnOnce() -> String, f: impl FnOnce() -> T) -> Result<T, DatasetError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| DatasetError::Malformed {
        what: what(),
        message: payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_owned()),
    })
}

impl From<parquet::errors::ParquetError> for DatasetError {
    fn from(e: parquet::errors::ParquetError) -> Self {
        Self::Parquet(e.to_string())
    }
}

impl From<arrow_schema::ArrowError> for DatasetError {
    fn from(e: arrow_schema::ArrowError) -> Self {
        Self::Parquet(e.to_string())
    }
}

impl DatasetError {
    /// Returns true when stored bytes do not match their digest.
    pub fn is_integrity_failure(&self) -> bool {
        match self {
            Self::Store(e) => e.is_integrity_failure(),
            Self::Stored(e) => e.is_integrity_failure(),
            Self::Ledger(e) => e.is_integrity_failure(),
            // A stored index that verifies against its digest but is not a valid index was
            // not written by the `url-index` stage; a directory chunk that verifies but is not
            // what its ledger lists was not written by the ledger's writer.
            Self::UrlIndex { .. } | Self::Chunk { .. } => true,
            _ => false,
        }
    }
}
