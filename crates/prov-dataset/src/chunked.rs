//! Sorted indexes in chunks ([`ChunkedIndex`]): the ledgers' id directories
//! ([`crate::directory`]) and the URL index ([`crate::url_index`]).
//!
//! An index is canonical JSON entries in key order, written as JSON Lines chunks of a power
//! of two entries, each a store object. The Merkle root over all the entries follows from
//! the chunks' roots ([`prov_store::chunked_root`]), so a reader proves a key's entries, or
//! their absence, from the one or two chunks around the key and the list of chunk roots,
//! whatever the size of the index.

use prov_manifest::{ChunkedIndex, IndexChunk};
use prov_store::{Digest, MerkleBuilder, ObjectKind, Store, chunked_root};
use serde::de::DeserializeOwned;

use crate::DatasetError;

/// Entries per chunk that the writers use: 65,536 (a few MB of JSON Lines), so that a proof
/// reads a few MB of an index at any corpus size.
pub const CHUNK_ENTRIES: u64 = 1 << 16;

/// An entry of a chunked index: ordered as the index is, with its canonical JSON text and
/// the key that [`chunks_around`] finds it by.
pub trait IndexEntry: DeserializeOwned + Ord {
    /// The canonical JSON text, whose BLAKE3 is the entry's leaf.
    fn canonical(&self) -> String;
    /// The key: the member a proof brackets (`id` of a directory entry, `url` of a URL
    /// index entry), whose byte order the index follows first.
    fn key(&self) -> &str;
}

/// Writes an index from entries in index order: chunks go to the store as they fill (or,
/// with no store, are only hashed), and only the current chunk's bytes and the chunk
/// references are held.
pub struct ChunkWriter<'s, E: IndexEntry> {
    store: Option<&'s Store>,
    chunk_entries: u64,
    chunks: Vec<IndexChunk>,
    bytes: Vec<u8>,
    merkle: MerkleBuilder,
    first: Option<String>,
    last: Option<E>,
}

impl<'s, E: IndexEntry> ChunkWriter<'s, E> {
    /// A writer of chunks of `chunk_entries` (a power of two) entries.
    ///
    /// # Panics
    ///
    /// When `chunk_entries` is not a power of two (a caller's bug: writers pass
    /// [`CHUNK_ENTRIES`] or a test's size).
    pub fn new(store: Option<&'s Store>, chunk_entries: u64) -> Self {
        assert!(chunk_entries.is_power_of_two(), "chunk size {chunk_entries} is not a power of two");
        Self {
            store,
            chunk_entries,
            chunks: Vec::new(),
            bytes: Vec::new(),
            merkle: MerkleBuilder::new(),
            first: None,
            last: None,
        }
    }

    /// Appends an entry, which must come after the last one.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for an entry out of order or repeated; the store's.
    pub fn push(&mut self, entry: E) -> Result<(), DatasetError> {
        if self.last.as_ref().is_some_and(|last| *last >= entry) {
            return Err(DatasetError::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("index entry `{}` is not after the one before", entry.canonical()),
            )));
        }
        let text = entry.canonical();
        self.merkle.push(&Digest::of(text.as_bytes()));
        self.bytes.extend_from_slice(text.as_bytes());
        self.bytes.push(b'\n');
        if self.first.is_none() {
            self.first = Some(entry.key().to_owned());
        }
        self.last = Some(entry);
        if self.merkle.len() == self.chunk_entries {
            self.seal()?;
        }
        Ok(())
    }

    fn seal(&mut self) -> Result<(), DatasetError> {
        let digest = match self.store {
            Some(store) => store.put_bytes(ObjectKind::Blob, &self.bytes)?,
            None => Digest::of(&self.bytes),
        };
        self.chunks.push(IndexChunk {
            digest,
            entries: self.merkle.len(),
            first: self.first.take().expect("a chunk is sealed with an entry"),
            root: self.merkle.root(),
        });
        self.bytes.clear();
        self.merkle = MerkleBuilder::new();
        Ok(())
    }

    /// Seals the last chunk and returns the index.
    ///
    /// # Errors
    ///
    /// The store's.
    pub fn finish(mut self) -> Result<ChunkedIndex, DatasetError> {
        if !self.merkle.is_empty() {
            self.seal()?;
        }
        let roots: Vec<Digest> = self.chunks.iter().map(|c| c.root).collect();
        Ok(ChunkedIndex {
            entries: self.chunks.iter().map(|c| c.entries).sum(),
            chunk_entries: self.chunk_entries,
            root: chunked_root(&roots),
            chunks: self.chunks,
        })
    }
}

/// Reads a chunk (verified), checking that its entries are canonical, strictly in order, and
/// as many, with the first key and the root, as its reference gives.
///
/// # Errors
///
/// [`DatasetError::Chunk`] for a chunk that is not what its reference says; the store's.
pub fn read_chunk<E: IndexEntry>(store: &Store, chunk: &IndexChunk) -> Result<Vec<E>, DatasetError> {
    let bytes = store.read(&chunk.digest)?;
    let bad = |message: String| DatasetError::Chunk { digest: chunk.digest, message };
    let text = std::str::from_utf8(&bytes).map_err(|_| bad("not UTF-8".into()))?;
    if !text.is_empty() && !text.ends_with('\n') {
        return Err(bad("the last line has no newline".into()));
    }
    let mut entries: Vec<E> = Vec::new();
    let mut merkle = MerkleBuilder::new();
    for (n, line) in text.split_terminator('\n').enumerate() {
        let entry: E = serde_json::from_str(line).map_err(|e| bad(format!("line {}: {e}", n + 1)))?;
        if entry.canonical() != line || entries.last().is_some_and(|last| *last >= entry) {
            return Err(bad(format!("line {}: not canonical, or not after the line before", n + 1)));
        }
        merkle.push(&Digest::of(line.as_bytes()));
        entries.push(entry);
    }
    if merkle.len() != chunk.entries || merkle.root() != chunk.root || entries.first().map(E::key) != Some(&chunk.first)
    {
        return Err(bad("its entries, first key or root are not the ones its reference gives".into()));
    }
    Ok(entries)
}

/// The chunks a reader needs to bracket `key`: from the one that holds the last entry before
/// `key` (or the first chunk) to the one that holds the first entry after it (or the last),
/// found from the chunks' first keys alone. Empty for an empty index.
pub fn chunks_around(index: &ChunkedIndex, key: &str) -> std::ops::Range<usize> {
    let n = index.chunks.len();
    if n == 0 {
        return 0..0;
    }
    // Chunks starting before `key` hold entries < key; the last of them holds the one just
    // before. Chunks starting after `key` hold only entries > key; the first of them holds
    // the one just after, unless an earlier chunk does (then one chunk more is read).
    let before = index.chunks.partition_point(|c| c.first.as_bytes() < key.as_bytes());
    let after = index.chunks.partition_point(|c| c.first.as_bytes() <= key.as_bytes());
    before.saturating_sub(1)..(after + 1).min(n)
}
