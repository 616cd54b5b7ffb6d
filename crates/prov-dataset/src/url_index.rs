//! The URL index: a sorted, Merkle-rooted list of `(BLAKE3(url), id)` entries, written by the
//! `url-index` stage, so that a URL can be mapped to document ids, and its absence proven.
//!
//! The index object is JSON Lines: one entry per line, each the canonical JSON object
//! `{"id":ID,"url":"blake3:<hex of BLAKE3(url)>"}` followed by `\n`, sorted by `url` then
//! `id` (byte order), without duplicates. Its Merkle root is the root over the BLAKE3 of each
//! entry's JSON text (without the newline), in order; the stage records it, with the number of
//! entries, in its statistics (`merkle_root`, `entries`), where a proof finds it.

use prov_store::{Digest, Store, merkle_root};
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
}
