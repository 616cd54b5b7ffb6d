//! A ledger's id directory ([`IdDirectory`]): which ledger shards hold each document id.
//!
//! A ledger's shards follow its input's shards, so one id may be in any of them, and without
//! a directory a proof that a filter never saw an id must bracket it in every shard: the
//! proof, and the reading to build it, grow with the shard count. The directory is one entry
//! `{"id":ID,"shard":S}` per ledger row, sorted by id then shard, cut into chunks of a power
//! of two entries. A proof brackets the id in the directory (one or two chunks read, a
//! logarithmic path), then proves the rows in the shards the directory names.
//!
//! The directory is built from the ledger shards (already sorted by id) with an external
//! merge, so its memory does not grow with the corpus; the chunks stream into the store.

use std::io::{self, Read, Write};
use std::path::Path;

use prov_manifest::{DirectoryChunk, IdDirectory};
use prov_store::{Digest, MerkleBuilder, ObjectKind, Store, chunked_root};
use serde::{Deserialize, Serialize};

use crate::DatasetError;

/// Entries per directory chunk that the filters write: 65,536 (about 3 MB of JSON Lines for
/// ids of 20 characters), so that a proof reads a few MB of directory at any corpus size.
pub const DIRECTORY_CHUNK_ENTRIES: u64 = 1 << 16;

/// The budget of the external merge that sorts a ledger's ids.
const SORT_BUDGET: usize = 32 << 20;

/// One directory entry: a document id and the index of a ledger shard that holds it.
/// Ordered by id (byte order), then shard: the directory's order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirectoryEntry {
    /// The document id.
    pub id: String,
    /// The index of the ledger shard.
    pub shard: u32,
}

impl DirectoryEntry {
    /// The entry's canonical JSON text, whose BLAKE3 is its leaf digest.
    pub fn canonical(&self) -> String {
        String::from_utf8(prov_manifest::to_canonical_bytes(self).expect("a string and a number encode"))
            .expect("canonical JSON is UTF-8")
    }
}

/// On disk during the merge: the shard (u32, big endian), the id's length (u32) and its bytes.
impl prov_extsort::Record for DirectoryEntry {
    fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        let len =
            u32::try_from(self.id.len()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "an id of 4 GiB"))?;
        out.write_all(&self.shard.to_be_bytes())?;
        out.write_all(&len.to_le_bytes())?;
        out.write_all(self.id.as_bytes())
    }
    fn read_from(input: &mut impl Read) -> io::Result<Option<Self>> {
        let mut head = [0u8; 8];
        let mut filled = 0;
        while filled < head.len() {
            match input.read(&mut head[filled..])? {
                0 if filled == 0 => return Ok(None),
                0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a run file ends inside an entry")),
                n => filled += n,
            }
        }
        let shard = u32::from_be_bytes(head[..4].try_into().expect("four bytes"));
        let mut id = vec![0u8; u32::from_le_bytes(head[4..].try_into().expect("four bytes")) as usize];
        input.read_exact(&mut id)?;
        let id = String::from_utf8(id).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "an id not UTF-8"))?;
        Ok(Some(Self { id, shard }))
    }
    fn cost(&self) -> usize {
        self.id.len() + std::mem::size_of::<Self>()
    }
}

/// Writes a directory from entries in directory order: chunks of `chunk_entries` go to the
/// store (or, with no store, are only hashed: an auditor recomputing a directory), and only
/// the current chunk's bytes and the chunk references are held.
pub struct DirectoryWriter<'s> {
    store: Option<&'s Store>,
    chunk_entries: u64,
    chunks: Vec<DirectoryChunk>,
    bytes: Vec<u8>,
    merkle: MerkleBuilder,
    first: Option<String>,
    last: Option<DirectoryEntry>,
}

impl<'s> DirectoryWriter<'s> {
    /// A writer of chunks of `chunk_entries` (a power of two) entries.
    ///
    /// # Panics
    ///
    /// When `chunk_entries` is not a power of two (a caller's bug: the writers pass
    /// [`DIRECTORY_CHUNK_ENTRIES`] or a test's size).
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
    pub fn push(&mut self, entry: DirectoryEntry) -> Result<(), DatasetError> {
        if self.last.as_ref().is_some_and(|last| *last >= entry) {
            return Err(DatasetError::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("directory entry {entry:?} is not after the one before"),
            )));
        }
        let text = entry.canonical();
        self.merkle.push(&Digest::of(text.as_bytes()));
        self.bytes.extend_from_slice(text.as_bytes());
        self.bytes.push(b'\n');
        if self.first.is_none() {
            self.first = Some(entry.id.clone());
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
        self.chunks.push(DirectoryChunk {
            digest,
            entries: self.merkle.len(),
            first: self.first.take().expect("a chunk is sealed with an entry"),
            root: self.merkle.root(),
        });
        self.bytes.clear();
        self.merkle = MerkleBuilder::new();
        Ok(())
    }

    /// Seals the last chunk and returns the directory.
    ///
    /// # Errors
    ///
    /// The store's.
    pub fn finish(mut self) -> Result<IdDirectory, DatasetError> {
        if !self.merkle.is_empty() {
            self.seal()?;
        }
        let roots: Vec<Digest> = self.chunks.iter().map(|c| c.root).collect();
        Ok(IdDirectory {
            entries: self.chunks.iter().map(|c| c.entries).sum(),
            chunk_entries: self.chunk_entries,
            root: chunked_root(&roots),
            chunks: self.chunks,
        })
    }
}

/// Builds the directory of a ledger whose shards, in order, hold the ids `shard_ids` yields
/// (one list per shard, read one at a time), merging them on disk in `scratch`: stored in
/// `store` when `keep` is set, otherwise only computed.
///
/// # Errors
///
/// A shard's ids that cannot be read; ids repeated within a shard (no ledger writer makes
/// one); disk.
pub fn build_directory(
    store: &Store,
    scratch: &Path,
    shard_ids: impl IntoIterator<Item = Result<Vec<String>, DatasetError>>,
    chunk_entries: u64,
    keep: bool,
) -> Result<IdDirectory, DatasetError> {
    let sort = prov_extsort::ExternalSort::<DirectoryEntry>::new(scratch, "directory", SORT_BUDGET);
    for (i, ids) in shard_ids.into_iter().enumerate() {
        let shard = u32::try_from(i)
            .map_err(|_| DatasetError::Io(io::Error::new(io::ErrorKind::InvalidInput, "a ledger of 2^32 shards")))?;
        sort.add_run(ids?.into_iter().map(|id| DirectoryEntry { id, shard }).collect())?;
    }
    let mut writer = DirectoryWriter::new(keep.then_some(store), chunk_entries);
    for entry in sort.finish()? {
        writer.push(entry?)?;
    }
    writer.finish()
}

/// Reads a directory chunk (verified), checking that it is canonical, sorted and has the
/// entries and root its reference says.
///
/// # Errors
///
/// [`DatasetError::Directory`] for a chunk that is not what its reference says; the store's.
pub fn read_directory_chunk(store: &Store, chunk: &DirectoryChunk) -> Result<Vec<DirectoryEntry>, DatasetError> {
    let bytes = store.read(&chunk.digest)?;
    let bad = |message: String| DatasetError::Directory { digest: chunk.digest, message };
    let text = std::str::from_utf8(&bytes).map_err(|_| bad("not UTF-8".into()))?;
    let mut entries: Vec<DirectoryEntry> = Vec::new();
    let mut merkle = MerkleBuilder::new();
    for (n, line) in text.split_terminator('\n').enumerate() {
        let entry: DirectoryEntry = serde_json::from_str(line).map_err(|e| bad(format!("line {}: {e}", n + 1)))?;
        if entry.canonical() != line || entries.last().is_some_and(|last| *last >= entry) {
            return Err(bad(format!("line {}: not canonical, or not after the line before", n + 1)));
        }
        merkle.push(&Digest::of(line.as_bytes()));
        entries.push(entry);
    }
    if !text.ends_with('\n') && !text.is_empty() {
        return Err(bad("the last line has no newline".into()));
    }
    if merkle.len() != chunk.entries
        || merkle.root() != chunk.root
        || entries.first().map(|e| &e.id) != Some(&chunk.first)
    {
        return Err(bad("its entries, first id or root are not the ones the ledger record gives".into()));
    }
    Ok(entries)
}

/// The chunks a reader needs to bracket `id`: from the one that holds the last entry before
/// `id` (or the first chunk) to the one that holds the first entry after it (or the last),
/// found from the chunks' first ids alone. Empty for an empty directory.
pub fn chunks_around(directory: &IdDirectory, id: &str) -> std::ops::Range<usize> {
    let n = directory.chunks.len();
    if n == 0 {
        return 0..0;
    }
    // Chunks starting before `id` hold entries < id; the last of them holds the one just
    // before. Chunks starting after `id` hold only entries > id; the first of them holds the
    // one just after, unless an earlier chunk does (then one more chunk costs nothing wrong).
    let before = directory.chunks.partition_point(|c| c.first.as_bytes() < id.as_bytes());
    let after = directory.chunks.partition_point(|c| c.first.as_bytes() <= id.as_bytes());
    before.saturating_sub(1)..(after + 1).min(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prov_store::merkle_root;

    /// The ids of each shard, as a ledger's shards hold them (sorted).
    fn ledger(shards: &[&[&str]]) -> Vec<Result<Vec<String>, DatasetError>> {
        shards
            .iter()
            .map(|ids| {
                let mut v: Vec<String> = ids.iter().map(|s| (*s).to_owned()).collect();
                v.sort();
                Ok(v)
            })
            .collect()
    }

    /// The directory lists every row's (id, shard) once, sorted; its chunks are what they
    /// say; its root is the Merkle root over all entries, whatever the chunk size.
    #[test]
    fn a_directory_lists_every_row_sorted_and_its_root_covers_every_entry() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let shards = || ledger(&[&["c", "a", "q"], &["b", "a"], &[], &["z", "m", "c", "d"]]);
        let expected: Vec<DirectoryEntry> = {
            let mut v: Vec<DirectoryEntry> =
                [(0, "a"), (0, "c"), (0, "q"), (1, "a"), (1, "b"), (3, "c"), (3, "d"), (3, "m"), (3, "z")]
                    .iter()
                    .map(|&(shard, id)| DirectoryEntry { id: id.into(), shard })
                    .collect();
            v.sort();
            v
        };
        let leaves: Vec<Digest> = expected.iter().map(|e| Digest::of(e.canonical().as_bytes())).collect();
        for chunk in [1, 2, 4, 16] {
            let scratch = tempfile::tempdir().unwrap();
            let d = build_directory(&store, scratch.path(), shards(), chunk, true).unwrap();
            assert_eq!(d.entries, 9);
            assert_eq!(d.root, merkle_root(&leaves), "chunks of {chunk}");
            let read: Vec<DirectoryEntry> =
                d.chunks.iter().flat_map(|c| read_directory_chunk(&store, c).unwrap()).collect();
            assert_eq!(read, expected);
            // Computed without storing, the same directory.
            let fresh = tempfile::tempdir().unwrap();
            let other = Store::init(&fresh.path().join(".prov")).unwrap();
            let computed = build_directory(&other, scratch.path(), shards(), chunk, false).unwrap();
            assert_eq!(computed, d);
            assert!(computed.chunks.iter().all(|c| !other.contains(&c.digest)));
        }
        assert_eq!(expected[0].canonical(), r#"{"id":"a","shard":0}"#);
    }

    /// The chunks around an id hold the entry before it and the entry after it.
    #[test]
    fn the_chunks_around_an_id_bracket_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let ids: Vec<String> = (0..40).map(|i| format!("d{:03}", i * 2)).collect();
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let scratch = tempfile::tempdir().unwrap();
        let d = build_directory(&store, scratch.path(), ledger(&[&refs[..15], &refs[10..]]), 4, true).unwrap();
        let all: Vec<DirectoryEntry> = d.chunks.iter().flat_map(|c| read_directory_chunk(&store, c).unwrap()).collect();
        for probe in (0..82).map(|i| format!("d{i:03}")).chain(["a".to_owned(), "e".to_owned()]) {
            let range = chunks_around(&d, &probe);
            let held: Vec<DirectoryEntry> =
                d.chunks[range].iter().flat_map(|c| read_directory_chunk(&store, c).unwrap()).collect();
            let before = all.iter().rfind(|e| e.id < probe);
            let after = all.iter().find(|e| e.id > probe);
            for needed in before.into_iter().chain(after).chain(all.iter().filter(|e| e.id == probe)) {
                assert!(held.contains(needed), "{probe}: {needed:?} not in the chunks read");
            }
        }
    }

    /// A chunk that is not what the record says is refused: reordered, or its root changed.
    #[test]
    fn a_chunk_unlike_its_reference_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let d = build_directory(&store, scratch.path(), ledger(&[&["a", "b", "c"]]), 4, true).unwrap();
        let chunk = &d.chunks[0];
        let swapped = b"{\"id\":\"b\",\"shard\":0}\n{\"id\":\"a\",\"shard\":0}\n{\"id\":\"c\",\"shard\":0}\n";
        let digest = store.put_bytes(ObjectKind::Blob, swapped).unwrap();
        let forged = DirectoryChunk { digest, ..chunk.clone() };
        assert!(matches!(read_directory_chunk(&store, &forged), Err(DatasetError::Directory { .. })));
        let short =
            store.put_bytes(ObjectKind::Blob, b"{\"id\":\"a\",\"shard\":0}\n{\"id\":\"c\",\"shard\":0}\n").unwrap();
        let dropped = DirectoryChunk { digest: short, ..chunk.clone() };
        assert!(matches!(read_directory_chunk(&store, &dropped), Err(DatasetError::Directory { .. })));
    }
}
