//! The URL index: a sorted, Merkle-rooted list of `(BLAKE3(url), id)` entries, written by the
//! `url-index` stage, so that a URL can be mapped to document ids, and its absence proven.
//!
//! Each entry is the canonical JSON object `{"id":ID,"url":"blake3:<hex of BLAKE3(url)>"}`,
//! sorted by `url` then `id` (byte order), without duplicates. The entries are a
//! [`ChunkedIndex`] ([`crate::chunked`]): JSON Lines chunks of a power of two entries, whose
//! Merkle root over all entries the stage records, with the number of entries, in its
//! statistics (`merkle_root`, `entries`), where a proof finds it. The stage's output is a tree
//! of the chunks (`chunks/000000.jsonl`, …) and `index.json`, the [`ChunkedIndex`] that lists
//! them, so a prover reads the chunks around one URL, not the whole index.

use prov_manifest::{ChunkedIndex, Record, SCHEMA_VERSION, TreeEntry, TreeRecord, get_typed, put_record};
use prov_store::{Digest, ObjectKind, Store};
use serde::{Deserialize, Serialize};

use crate::DatasetError;
use crate::chunked::{ChunkWriter, IndexEntry};

/// The file of the index's tree that lists its chunks.
pub const INDEX_FILE: &str = "index.json";

/// Returns a URL's key in the index: `blake3:` and the hex BLAKE3 of its UTF-8 bytes.
pub fn url_key(url: &str) -> String {
    Digest::of(url.as_bytes()).to_string()
}

/// One entry of the URL index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UrlIndexEntry {
    /// `blake3:` and the hex BLAKE3 of the URL's UTF-8 bytes (declared first: entries sort by it).
    pub url: String,
    /// The document id.
    pub id: String,
}

impl UrlIndexEntry {
    /// Returns the entry for a document with `url` and `id`.
    pub fn new(url: &str, id: &str) -> Self {
        Self { url: url_key(url), id: id.to_owned() }
    }
}

impl IndexEntry for UrlIndexEntry {
    fn canonical(&self) -> String {
        String::from_utf8(prov_manifest::to_canonical_bytes(self).expect("two strings encode")).expect("UTF-8")
    }
    fn key(&self) -> &str {
        &self.url
    }
}

/// Stores the tree of an index whose chunks are in the store: `index.json` (the index's
/// canonical JSON) and each chunk as `chunks/NNNNNN.jsonl`. Returns the tree record's digest.
///
/// # Errors
///
/// The store's.
pub fn write_url_index(store: &Store, index: &ChunkedIndex) -> Result<Digest, DatasetError> {
    let listing = prov_manifest::to_canonical_bytes(index).expect("an index encodes");
    let mut entries = vec![TreeEntry {
        path: INDEX_FILE.parse().expect("a valid path"),
        digest: store.put_bytes(ObjectKind::Blob, &listing)?,
        size: listing.len() as u64,
        executable: false,
    }];
    for (i, c) in index.chunks.iter().enumerate() {
        entries.push(TreeEntry {
            path: format!("chunks/{i:06}.jsonl").parse().expect("a valid path"),
            digest: c.digest,
            // The chunk was just written by its writer, which hashed it: its size is read
            // from the file, not by hashing it again.
            size: fs_err::metadata(store.object_path(&c.digest))?.len(),
            executable: false,
        });
    }
    entries.sort_by(|a, b| a.path.as_str().cmp(b.path.as_str()));
    Ok(put_record(store, &Record::Tree(TreeRecord { schema: SCHEMA_VERSION, entries }))?)
}

/// Builds and stores the index of entries in any order (sorted, duplicates dropped), in
/// chunks of `chunk_entries`; returns the tree's digest and the index. The stage streams its
/// entries from an external sort instead; this is for small indexes and tests.
///
/// # Errors
///
/// The store's.
pub fn build_url_index(
    store: &Store,
    mut entries: Vec<UrlIndexEntry>,
    chunk_entries: u64,
) -> Result<(Digest, ChunkedIndex), DatasetError> {
    entries.sort();
    entries.dedup();
    let mut w = ChunkWriter::new(Some(store), chunk_entries);
    for e in entries {
        w.push(e)?;
    }
    let index = w.finish()?;
    Ok((write_url_index(store, &index)?, index))
}

/// Reads a stored URL index's listing: the tree's `index.json`, checked (chunk sizes, root)
/// and against the tree's chunk files. The chunks themselves are read with
/// [`crate::chunked::read_chunk`], as needed.
///
/// # Errors
///
/// [`DatasetError::UrlIndex`] for a tree that is not a URL index; the store's.
pub fn read_url_index(store: &Store, tree: &Digest) -> Result<ChunkedIndex, DatasetError> {
    let bad = |message: String| DatasetError::UrlIndex { digest: *tree, message };
    let record: TreeRecord = get_typed(store, tree)?;
    let listing = record
        .entries
        .iter()
        .find(|e| e.path.as_str() == INDEX_FILE)
        .ok_or_else(|| bad(format!("no `{INDEX_FILE}`")))?;
    let bytes = store.read(&listing.digest)?;
    let index: ChunkedIndex = serde_json::from_slice(&bytes).map_err(|e| bad(format!("`{INDEX_FILE}`: {e}")))?;
    index.validate(None).map_err(|e| bad(format!("`{INDEX_FILE}`: {e}")))?;
    let chunks: Vec<&Digest> =
        record.entries.iter().filter(|e| e.path.as_str() != INDEX_FILE).map(|e| &e.digest).collect();
    if chunks != index.chunks.iter().map(|c| &c.digest).collect::<Vec<_>>() {
        return Err(bad(format!("the tree's chunk files are not the chunks `{INDEX_FILE}` lists")));
    }
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunked::read_chunk;

    /// Entries sort by URL key then id, repeat nothing, and read back from the chunks the
    /// tree lists, at every chunk size.
    #[test]
    fn entries_sort_by_url_key_then_id_and_read_back_from_their_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let entries = vec![
            UrlIndexEntry::new("https://b.example/", "2"),
            UrlIndexEntry::new("https://a.example/", "1"),
            UrlIndexEntry::new("https://b.example/", "2"),
            UrlIndexEntry::new("https://b.example/", "0"),
            UrlIndexEntry::new("https://c.example/", "9"),
        ];
        let mut expected = entries.clone();
        expected.sort();
        expected.dedup();
        for chunk in [1, 2, 4, 1 << 16] {
            let (tree, index) = build_url_index(&store, entries.clone(), chunk).unwrap();
            assert_eq!(index.entries, 4);
            assert_eq!(read_url_index(&store, &tree).unwrap(), index);
            let back: Vec<UrlIndexEntry> =
                index.chunks.iter().flat_map(|c| read_chunk::<UrlIndexEntry>(&store, c).unwrap()).collect();
            assert_eq!(back, expected);
            assert!(back.windows(2).all(|w| (&w[0].url, &w[0].id) < (&w[1].url, &w[1].id)), "{back:?}");
        }
        assert!(expected[0].canonical().starts_with(r#"{"id":"#), "canonical JSON sorts the keys");
    }

    /// A tree whose chunk files are not the chunks its listing names (here, two swapped) is
    /// refused, though the listing itself is valid.
    #[test]
    fn a_tree_unlike_its_listing_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let entries: Vec<UrlIndexEntry> =
            (0..5).map(|i| UrlIndexEntry::new(&format!("https://{i}.example/"), "x")).collect();
        let (tree, _) = build_url_index(&store, entries, 2).unwrap();
        let mut record: TreeRecord = get_typed(&store, &tree).unwrap();
        let chunk_files: Vec<usize> =
            (0..record.entries.len()).filter(|&i| record.entries[i].path.as_str() != INDEX_FILE).collect();
        let (a, b) = (record.entries[chunk_files[0]].digest, record.entries[chunk_files[1]].digest);
        record.entries[chunk_files[0]].digest = b;
        record.entries[chunk_files[1]].digest = a;
        let forged = put_record(&store, &Record::Tree(record)).unwrap();
        assert!(matches!(read_url_index(&store, &forged), Err(DatasetError::UrlIndex { .. })));
    }
}
