//! A ledger's id directory (a [`ChunkedIndex`]): which ledger shards hold each document id.
//!
//! A ledger's shards follow its input's shards, so one id may be in any of them, and without
//! a directory a proof that a filter never saw an id must bracket it in every shard: the
//! proof, and the reading to build it, grow with the shard count. The directory is one entry
//! `{"id":ID,"shard":S}` per ledger row, sorted by id then shard, in chunks
//! ([`crate::chunked`]). A proof brackets the id in the directory (one or two chunks read, a
//! logarithmic path), then proves the rows in the shards the directory names.
//!
//! The directory is built from the ledger shards (already sorted by id) with an external
//! merge, so its memory does not grow with the corpus; the chunks stream into the store.

use std::io::{self, Read, Write};
use std::path::Path;

use prov_manifest::ChunkedIndex;
use prov_store::Store;
use serde::{Deserialize, Serialize};

use crate::DatasetError;
use crate::chunked::{ChunkWriter, IndexEntry};

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

impl IndexEntry for DirectoryEntry {
    fn canonical(&self) -> String {
        String::from_utf8(prov_manifest::to_canonical_bytes(self).expect("a string and a number encode"))
            .expect("canonical JSON is UTF-8")
    }
    fn key(&self) -> &str {
        &self.id
    }
}

/// On disk during the merge: the shard (u32, big endian), then the id as the external sort's
/// own byte-string record (its length and bytes), so the run files are read by the sort's
/// readers, truncation checks included.
impl prov_extsort::Record for DirectoryEntry {
    fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        self.shard.to_be_bytes().write_to(out)?;
        self.id.as_bytes().to_vec().write_to(out)
    }
    fn read_from(input: &mut impl Read) -> io::Result<Option<Self>> {
        let Some(shard) = <[u8; 4]>::read_from(input)? else { return Ok(None) };
        let id = Vec::<u8>::read_from(input)?
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "a run file ends inside an entry"))?;
        let id = String::from_utf8(id).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "an id not UTF-8"))?;
        Ok(Some(Self { id, shard: u32::from_be_bytes(shard) }))
    }
    fn cost(&self) -> usize {
        self.id.len() + std::mem::size_of::<Self>()
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
) -> Result<ChunkedIndex, DatasetError> {
    let sort = prov_extsort::ExternalSort::<DirectoryEntry>::new(scratch, "directory", SORT_BUDGET);
    for (i, ids) in shard_ids.into_iter().enumerate() {
        let shard = u32::try_from(i)
            .map_err(|_| DatasetError::Io(io::Error::new(io::ErrorKind::InvalidInput, "a ledger of 2^32 shards")))?;
        sort.add_run(ids?.into_iter().map(|id| DirectoryEntry { id, shard }).collect())?;
    }
    let mut writer = ChunkWriter::new(keep.then_some(store), chunk_entries);
    for entry in sort.finish()? {
        writer.push(entry?)?;
    }
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunked::{chunks_around, read_chunk};
    use prov_manifest::IndexChunk;
    use prov_store::{Digest, ObjectKind, merkle_root};

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
                d.chunks.iter().flat_map(|c| read_chunk::<DirectoryEntry>(&store, c).unwrap()).collect();
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
        let all: Vec<DirectoryEntry> =
            d.chunks.iter().flat_map(|c| read_chunk::<DirectoryEntry>(&store, c).unwrap()).collect();
        for probe in (0..82).map(|i| format!("d{i:03}")).chain(["a".to_owned(), "e".to_owned()]) {
            let range = chunks_around(&d, &probe);
            let held: Vec<DirectoryEntry> =
                d.chunks[range].iter().flat_map(|c| read_chunk::<DirectoryEntry>(&store, c).unwrap()).collect();
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
        let forged = IndexChunk { digest, ..chunk.clone() };
        assert!(matches!(read_chunk::<DirectoryEntry>(&store, &forged), Err(DatasetError::Chunk { .. })));
        let short =
            store.put_bytes(ObjectKind::Blob, b"{\"id\":\"a\",\"shard\":0}\n{\"id\":\"c\",\"shard\":0}\n").unwrap();
        let dropped = IndexChunk { digest: short, ..chunk.clone() };
        assert!(matches!(read_chunk::<DirectoryEntry>(&store, &dropped), Err(DatasetError::Chunk { .. })));
    }
}
