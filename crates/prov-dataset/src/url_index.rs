//! The URL index: a sorted, Merkle-rooted list of `(BLAKE3(url), id)` entries, written by the
//! `url-index` stage, so that a URL can be mapped to document ids, and its absence proven.
//!
//! The index object is JSON Lines: one entry per line, each the canonical JSON object
//! `{"id":ID,"url":"blake3:<hex of BLAKE3(url)>"}` followed by `\n`, sorted by `url` then
//! `id` (byte order), without duplicates. Its Merkle root is the root over the BLAKE3 of each
//! entry's JSON text (without the newline), in order; the stage records it, with the number of
//! entries, in its statistics (`merkle_root`, `entries`), where a proof finds it.

use prov_store::{Digest, MerkleBuilder, Store, merkle_root};
use serde::{Deserialize, Serialize};

use crate::DatasetError;

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

    /// Returns the entry's canonical JSON text, whose BLAKE3 is its leaf digest.
    pub fn canonical(&self) -> String {
        String::from_utf8(prov_manifest::to_canonical_bytes(self).expect("two strings encode")).expect("UTF-8")
    }
}

/// A built URL index: the object's bytes, its entry count and its Merkle root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlIndex {
    /// The JSON Lines bytes.
    pub bytes: Vec<u8>,
    /// Entries.
    pub entries: u64,
    /// The Merkle root over the entries.
    pub root: Digest,
}

/// Writes a URL index from entries in index order, streaming: the bytes go to a writer, and
/// only the entry count and the Merkle tree's complete subtrees are held. The `url-index`
/// stage feeds it from an external sort, so that its memory does not grow with the corpus;
/// the result is [`build_url_index`]'s, byte for byte.
pub struct UrlIndexWriter<W: std::io::Write> {
    out: W,
    merkle: MerkleBuilder,
    last: Option<UrlIndexEntry>,
}

impl<W: std::io::Write> UrlIndexWriter<W> {
    /// A writer of an empty index.
    pub fn new(out: W) -> Self {
        Self { out, merkle: MerkleBuilder::new(), last: None }
    }

    /// Appends an entry; it must come after the last one (sorted by `url`, then `id`).
    ///
    /// # Errors
    ///
    /// The writer's, and `InvalidInput` for an entry out of order or repeated.
    pub fn push(&mut self, entry: UrlIndexEntry) -> std::io::Result<()> {
        if self.last.as_ref().is_some_and(|last| *last >= entry) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("URL index entry {entry:?} is not after the one before"),
            ));
        }
        let text = entry.canonical();
        self.merkle.push(&Digest::of(text.as_bytes()));
        self.out.write_all(text.as_bytes())?;
        self.out.write_all(b"\n")?;
        self.last = Some(entry);
        Ok(())
    }

    /// The writer back, with the entry count and the Merkle root.
    pub fn finish(self) -> (W, u64, Digest) {
        (self.out, self.merkle.len(), self.merkle.root())
    }
}

/// Builds the index from entries in any order: sorts them and drops duplicates.
pub fn build_url_index(mut entries: Vec<UrlIndexEntry>) -> UrlIndex {
    entries.sort();
    entries.dedup();
    let texts: Vec<String> = entries.iter().map(UrlIndexEntry::canonical).collect();
    let leaves: Vec<Digest> = texts.iter().map(|t| Digest::of(t.as_bytes())).collect();
    let mut bytes = Vec::with_capacity(texts.iter().map(|t| t.len() + 1).sum());
    for t in &texts {
        bytes.extend_from_slice(t.as_bytes());
        bytes.push(b'\n');
    }
    UrlIndex { bytes, entries: texts.len() as u64, root: merkle_root(&leaves) }
}

/// Reads a stored URL index (verified), checking that it is sorted, unique and canonical.
pub fn read_url_index(store: &Store, digest: &Digest) -> Result<Vec<UrlIndexEntry>, DatasetError> {
    let bytes = store.read(digest)?;
    let bad = |message: String| DatasetError::UrlIndex { digest: *digest, message };
    let text = std::str::from_utf8(&bytes).map_err(|_| bad("not UTF-8".into()))?;
    let mut out: Vec<UrlIndexEntry> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let entry: UrlIndexEntry = serde_json::from_str(line).map_err(|e| bad(format!("line {}: {e}", n + 1)))?;
        if entry.canonical() != line || out.last().is_some_and(|last| *last >= entry) {
            return Err(bad(format!("line {}: not canonical, or not after the line before", n + 1)));
        }
        out.push(entry);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_sort_by_url_key_then_id_and_repeat_nothing() {
        let idx = build_url_index(vec![
            UrlIndexEntry::new("https://b.example/", "2"),
            UrlIndexEntry::new("https://a.example/", "1"),
            UrlIndexEntry::new("https://b.example/", "2"),
            UrlIndexEntry::new("https://b.example/", "0"),
        ]);
        assert_eq!(idx.entries, 3);
        let text = String::from_utf8(idx.bytes.clone()).unwrap();
        let parsed: Vec<UrlIndexEntry> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert!(parsed.windows(2).all(|w| (&w[0].url, &w[0].id) < (&w[1].url, &w[1].id)), "{parsed:?}");
        assert_eq!(text.lines().next().unwrap(), parsed[0].canonical());
        assert!(parsed[0].canonical().starts_with(r#"{"id":"#), "canonical JSON sorts the keys");
        assert!(text.ends_with('\n'));
    }

    proptest::proptest! {
        /// Streaming sorted, deduplicated entries gives the in-memory builder's bytes, count
        /// and root; an entry out of order is refused.
        #[test]
        fn the_streaming_writer_equals_the_builder(
            entries in proptest::collection::vec((0u8..5, 0u8..5), 0..60),
        ) {
            let entries: Vec<UrlIndexEntry> =
                entries.iter().map(|(u, i)| UrlIndexEntry::new(&format!("https://{u}.example/"), &i.to_string())).collect();
            let built = build_url_index(entries.clone());
            let mut sorted = entries;
            sorted.sort();
            sorted.dedup();
            let mut w = UrlIndexWriter::new(Vec::new());
            for e in &sorted {
                w.push(e.clone()).unwrap();
            }
            if let Some(last) = sorted.last() {
                proptest::prop_assert!(w.push(last.clone()).is_err());
            }
            let (bytes, n, root) = w.finish();
            proptest::prop_assert_eq!((bytes, n, root), (built.bytes, built.entries, built.root));
        }
    }
}
