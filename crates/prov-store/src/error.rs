//! Errors of store operations.

use std::path::PathBuf;

use crate::Digest;

/// Bytes that do not hash to the digest they are stored under.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("object `{expected}` is corrupt: its bytes hash to `{actual}`")]
pub struct Mismatch {
    /// The digest the object is named by.
    pub expected: Digest,
    /// The digest of the bytes actually found.
    pub actual: Digest,
}

/// An error of a store operation.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A filesystem operation failed (the message names the path).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The `SQLite` index failed.
    #[error("store index `{path}`: {source}")]
    Index {
        /// Path of `index.sqlite`.
        path: PathBuf,
        /// What `SQLite` said.
        source: rusqlite::Error,
    },
    /// No store exists at the path.
    #[error("no provenant store at `{0}`")]
    NotAStore(PathBuf),
    /// The store was written by an incompatible version.
    #[error("store at `{path}` has layout version {found}, but only version {supported} is supported")]
    UnsupportedVersion {
        /// Store directory.
        path: PathBuf,
        /// Version found on disk.
        found: String,
        /// Version this build reads.
        supported: u32,
    },
    /// Another process holds the store lock in a conflicting mode.
    #[error("store `{0}` is in use by another prov process")]
    Busy(PathBuf),
    /// An object is not in the store.
    #[error("object not found in store: `{0}`")]
    NotFound(Digest),
    /// An object's bytes do not match its name.
    #[error(transparent)]
    Corrupt(#[from] Mismatch),
}

impl StoreError {
    pub(crate) fn index(path: &std::path::Path, source: rusqlite::Error) -> Self {
        Self::Index { path: path.to_owned(), source }
    }

    /// The error of a read from a [`crate::VerifiedReader`]: the mismatch it found at the end
    /// of the object, or the I/O error.
    pub fn from_verified_read(e: std::io::Error) -> Self {
        match e.get_ref().and_then(|inner| inner.downcast_ref::<Mismatch>()) {
            Some(m) => Self::Corrupt(m.clone()),
            None => Self::Io(e),
        }
    }

    /// Returns true when the error means stored bytes do not match their digest.
    pub fn is_integrity_failure(&self) -> bool {
        matches!(self, Self::Corrupt(_))
    }
}
