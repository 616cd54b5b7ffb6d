//! The content-addressed object store of Provenant.
//!
//! `prov-store` owns the bytes: every object is stored under the BLAKE3 of exactly its
//! bytes, written atomically (temp file, fsync, rename, fsync of the directory) and verified
//! on read. Beside the objects, a `SQLite` index (WAL) records each object's kind and size,
//! which manifests reference it, the stage cache and the log of executions. A lock file keeps
//! `gc` from deleting what a running process is writing.
//!
//! Beside the store, it keeps the two file helpers every command uses: [`write_atomically`],
//! and [`read_named_file`], which reads a file the user named only when it is a regular file
//! of bounded size.
//!
//! It does not know what a manifest means: the records and their references belong to
//! `prov-manifest`, reachability and the cache policy to `prov-exec`.
//!
//! # Brief overview
//!
//! - [`Digest`]: the one hash type, `blake3:<hex>`.
//! - [`Store`]: open or create a store, [`Store::writer`] / [`ObjectWriter::finish`] to add
//!   bytes (the store computes the name), [`Store::read`] and [`Store::open_verified`] to read
//!   them back verified, [`Store::verify_all`] to re-hash everything in parallel.
//! - [`Index`]: the `SQLite` index.
//! - [`merkle_root`]: RFC 6962-shaped Merkle roots over ordered digests.
//!
//! # Example
//!
//! ```
//! use prov_store::{Digest, ObjectKind, Store};
//! let dir = tempfile::tempdir()?;
//! let store = Store::init(&dir.path().join(".prov"))?;
//! let digest = store.put_bytes(ObjectKind::Blob, b"hello")?;
//! assert_eq!(digest, Digest::of(b"hello"));
//! assert_eq!(store.read(&digest)?, b"hello");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod digest;
mod error;
mod index;
mod input;
mod merkle;
mod store;

pub use digest::{DIGEST_LEN, DIGEST_PREFIX, Digest, DigestLengthError, DigestParseError, Hasher};
pub use error::{Mismatch, StoreError};
pub use index::{ExecutionRow, FileStamp, Index, StageEventRow, format_utc};
pub use input::{MAX_DOCUMENT_BYTES, open_nonblocking, read_named_file, read_named_text};
pub use merkle::{MerkleBuilder, chunked_root, leaf_hash, merkle_root, node_hash};
pub use store::{
    Access, LAYOUT_VERSION, ObjectKind, ObjectWriter, STORE_DIR_NAME, SealedObject, Store, VerifiedReader,
    VerifyReport, write_atomically,
};
