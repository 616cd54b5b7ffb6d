//! Range proofs over a Merkle tree of sorted leaves: which leaves have a given key, and that
//! no other leaf has it.
//!
//! The leaves are canonical JSON objects sorted by one string member, the key (a ledger row's
//! `id`, a URL index entry's `url`), in byte order. A [`RangeProof`] for key `k` lists a window
//! of consecutive leaves, each with its audit path: every leaf whose key is `k`, plus the leaf
//! just before them (key < `k`) unless they start at leaf 0, plus the leaf just after them
//! (key > `k`) unless they end at the last leaf. With no leaf of key `k`, the window is the two
//! neighbours that bracket `k`, or the one edge leaf that `k` lies beyond. Since the leaves are
//! sorted, the window proves the complete set of leaves with key `k`, empty or not.

use std::cmp::Ordering;

use prov_store::Digest;
use serde::{Deserialize, Serialize};

use crate::path::{audit_path, chunked_audit_path, verify_path};

/// One leaf of a range proof: its entry and its audit path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvenLeaf {
    /// The entry: canonical JSON text, whose BLAKE3 is the leaf digest.
    pub entry: String,
    /// The audit path from the leaf to the root (RFC 6962 `PATH`).
    pub path: Vec<Digest>,
}

/// Consecutive leaves of a sorted tree that prove which leaves have one key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RangeProof {
    /// Index of the first leaf listed (0 for an empty tree).
    pub index: u64,
    /// The window of leaves, in tree order; empty only for an empty tree.
    pub leaves: Vec<ProvenLeaf>,
}

/// Why a range proof does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    /// The tree is empty, but the proof lists leaves or its root is not the empty root.
    #[error("the tree has no leaves, but the proof lists {leaves} or its root `{root}` is not the empty root")]
    Empty {
        /// Leaves listed.
        leaves: usize,
        /// The tree's root.
        root: Digest,
    },
    /// The window is empty or reaches past the last leaf.
    #[error("the window of {len} leaves at index {index} does not lie within the tree's {size} leaves")]
    Window {
        /// First index.
        index: u64,
        /// Leaves listed.
        len: usize,
        /// Leaves in the tree.
        size: u64,
    },
    /// A leaf's audit path does not lead to the root.
    #[error("the audit path of leaf {index} does not lead to the root `{root}`")]
    Path {
        /// The leaf's index.
        index: u64,
        /// The expected root.
        root: Digest,
    },
    /// A leaf is not a JSON object with the key member.
    #[error("leaf {index} is not a JSON object with a string `{member}`")]
    Entry {
        /// The leaf's index.
        index: u64,
        /// The key member.
        member: &'static str,
    },
    /// The leaves do not bracket the key as a minimal window must.
    #[error("the leaves do not bracket `{key}`: {reason}")]
    Bracket {
        /// The key.
        key: String,
        /// What is wrong.
        reason: &'static str,
    },
}

/// Returns the range proof for `key` over `entries` (canonical JSON texts, sorted by `keys`,
/// which holds each entry's key in the same order).
///
/// # Panics
///
/// When `entries` and `keys` differ in length.
pub fn prove_range(entries: &[String], keys: &[&str], key: &str) -> RangeProof {
    assert_eq!(entries.len(), keys.len(), "one key per entry");
    let m = entries.len();
    if m == 0 {
        return RangeProof { index: 0, leaves: Vec::new() };
    }
    let lo = keys.partition_point(|k| k.as_bytes() < key.as_bytes());
    let hi = keys.partition_point(|k| k.as_bytes() <= key.as_bytes());
    let start = lo.saturating_sub(1).min(m - 1);
    let end = if hi < m { hi + 1 } else { m };
    let leaves: Vec<Digest> = entries.iter().map(|e| Digest::of(e.as_bytes())).collect();
    RangeProof {
        index: start as u64,
        leaves: (start..end).map(|i| ProvenLeaf { entry: entries[i].clone(), path: audit_path(&leaves, i) }).collect(),
    }
}

/// Returns the range proof for `key` over a tree stored in chunks of `chunk_entries` leaves
/// (a power of two), from consecutive chunks only: `loaded` holds chunks `first_chunk..`,
/// each as its entries' `(key, canonical text)` in order, and `roots` every chunk's root. The
/// proof is [`prove_range`]'s over all the entries, provided the chunks loaded hold the entry
/// just before `key` and the one just after (when there are such entries), which is what
/// `prov_dataset::chunked::chunks_around` picks.
pub fn prove_range_chunked(
    first_chunk: usize,
    loaded: &[Vec<(String, String)>],
    roots: &[Digest],
    chunk_entries: u64,
    key: &str,
) -> RangeProof {
    // (chunk, position in it) of every loaded entry, and each loaded chunk's leaves.
    let spots: Vec<(usize, usize)> =
        loaded.iter().enumerate().flat_map(|(c, entries)| (0..entries.len()).map(move |j| (c, j))).collect();
    let m = spots.len();
    if m == 0 {
        return RangeProof { index: 0, leaves: Vec::new() };
    }
    let key_at = |p: usize| loaded[spots[p].0][spots[p].1].0.as_bytes();
    let lo = (0..m).find(|&p| key_at(p) >= key.as_bytes()).unwrap_or(m);
    let hi = (lo..m).find(|&p| key_at(p) > key.as_bytes()).unwrap_or(m);
    let start = lo.saturating_sub(1).min(m - 1);
    let end = if hi < m { hi + 1 } else { m };
    let leaves: Vec<Vec<Digest>> =
        loaded.iter().map(|entries| entries.iter().map(|(_, e)| Digest::of(e.as_bytes())).collect()).collect();
    let global = |p: usize| (first_chunk + spots[p].0) as u64 * chunk_entries + spots[p].1 as u64;
    RangeProof {
        index: global(start),
        leaves: (start..end)
            .map(|p| {
                let (c, j) = spots[p];
                ProvenLeaf {
                    entry: loaded[c][j].1.clone(),
                    path: chunked_audit_path(&leaves[c], roots, chunk_entries, global(p)),
                }
            })
            .collect(),
    }
}

/// Returns the string member `member` of a JSON object's text.
pub(crate) fn key_of<'a>(entry: &'a serde_json::Value, member: &str) -> Option<&'a str> {
    entry.as_object()?.get(member)?.as_str()
}

/// Checks `proof` for `key` against a tree of `size` leaves with `root`, where each leaf's
/// key is its string member `member`. Returns the parsed entries whose key is `key`, with
/// their indices, in tree order.
pub fn verify_range(
    proof: &RangeProof,
    member: &'static str,
    key: &str,
    size: u64,
    root: &Digest,
) -> Result<Vec<(u64, serde_json::Value)>, RangeError> {
    if size == 0 {
        if proof.index != 0 || !proof.leaves.is_empty() || *root != Digest::of(b"") {
            return Err(RangeError::Empty { leaves: proof.leaves.len(), root: *root });
        }
        return Ok(Vec::new());
    }
    let len = proof.leaves.len() as u64;
    if len == 0 || proof.index.checked_add(len).is_none_or(|end| end > size) {
        return Err(RangeError::Window { index: proof.index, len: proof.leaves.len(), size });
    }
    let bracket = |reason| RangeError::Bracket { key: key.to_owned(), reason };
    let mut matches = Vec::new();
    let (mut before, mut after) = (0, 0);
    for (i, leaf) in (proof.index..).zip(&proof.leaves) {
        if !verify_path(i, size, &Digest::of(leaf.entry.as_bytes()), &leaf.path, root) {
            return Err(RangeError::Path { index: i, root: *root });
        }
        let value: serde_json::Value =
            serde_json::from_str(&leaf.entry).map_err(|_| RangeError::Entry { index: i, member })?;
        let k = key_of(&value, member).ok_or(RangeError::Entry { index: i, member })?;
        match k.as_bytes().cmp(key.as_bytes()) {
            Ordering::Less if matches.is_empty() && after == 0 => before += 1,
            Ordering::Equal if after == 0 => matches.push((i, value)),
            Ordering::Greater => after += 1,
            _ => return Err(bracket("they are not sorted by key")),
        }
    }
    if before > 1 || after > 1 {
        return Err(bracket("more than one neighbour on one side"));
    }
    if proof.index > 0 && before == 0 {
        return Err(bracket("no leaf before the key, yet the window does not start at leaf 0"));
    }
    if proof.index + len < size && after == 0 {
        return Err(bracket("no leaf after the key, yet the window does not end at the last leaf"));
    }
    Ok(matches)
}

#[cfg(test)]
mod tests {
    use prov_store::merkle_root;

    use super::*;

    fn tree(ids: &[&str]) -> (Vec<String>, Digest) {
        let entries: Vec<String> = ids.iter().map(|id| format!(r#"{{"id":"{id}"}}"#)).collect();
        let leaves: Vec<Digest> = entries.iter().map(|e| Digest::of(e.as_bytes())).collect();
        (entries, merkle_root(&leaves))
    }

    fn check(ids: &[&str], key: &str) -> Result<Vec<u64>, RangeError> {
        let (entries, root) = tree(ids);
        let proof = prove_range(&entries, ids, key);
        let found = verify_range(&proof, "id", key, ids.len() as u64, &root)?;
        Ok(found.into_iter().map(|(i, _)| i).collect())
    }

    #[test]
    fn inclusion_and_absence_everywhere_in_a_small_tree() {
        let ids = ["b", "d", "f", "h", "j"];
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(check(&ids, id).unwrap(), [i as u64], "{id}");
        }
        for absent in ["a", "c", "e", "g", "i", "k", "", "bb", "\u{ff}"] {
            assert_eq!(check(&ids, absent).unwrap(), Vec::<u64>::new(), "{absent}");
        }
        let (entries, _) = tree(&ids);
        assert_eq!(prove_range(&entries, &ids, "a").leaves.len(), 1, "before the first: one edge leaf");
        assert_eq!(prove_range(&entries, &ids, "k").index, 4, "after the last: the last leaf");
        assert_eq!(prove_range(&entries, &ids, "e").leaves.len(), 2, "in the middle: two neighbours");
        assert_eq!(prove_range(&entries, &ids, "f").leaves.len(), 3, "a match and its neighbours");
    }

    #[test]
    fn empty_tree_and_single_leaf() {
        assert_eq!(check(&[], "x").unwrap(), Vec::<u64>::new());
        let empty = RangeProof { index: 0, leaves: Vec::new() };
        let other = Digest::of(b"x");
        assert!(matches!(verify_range(&empty, "id", "x", 0, &other), Err(RangeError::Empty { .. })));
        assert!(matches!(verify_range(&empty, "id", "x", 1, &other), Err(RangeError::Window { .. })));
        assert_eq!(check(&["m"], "m").unwrap(), [0]);
        assert_eq!(check(&["m"], "a").unwrap(), Vec::<u64>::new());
        assert_eq!(check(&["m"], "z").unwrap(), Vec::<u64>::new());
    }

    #[test]
    fn repeated_keys_are_all_listed() {
        let keys = ["a", "b", "b", "b", "c"];
        let entries: Vec<String> =
            keys.iter().enumerate().map(|(i, k)| format!(r#"{{"i":{i},"url":"{k}"}}"#)).collect();
        let root = merkle_root(&entries.iter().map(|e| Digest::of(e.as_bytes())).collect::<Vec<_>>());
        let proof = prove_range(&entries, &keys, "b");
        let found = verify_range(&proof, "url", "b", 5, &root).unwrap();
        assert_eq!(found.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [1, 2, 3]);
        // Dropping a match from the window is caught.
        let mut short = proof.clone();
        short.leaves.pop();
        assert!(verify_range(&short, "url", "b", 5, &root).is_err());
    }

    /// From the chunks around a key, the proof is the one over all the entries, for keys
    /// present, repeated, absent, before the first and after the last, in chunks of any size.
    #[test]
    fn a_proof_from_the_chunks_around_a_key_equals_the_proof_over_all() {
        let keys: Vec<String> =
            [1, 3, 3, 3, 5, 7, 9, 9, 11, 13, 15, 17, 19].iter().map(|k| format!("k{k:02}")).collect();
        let entries: Vec<String> = keys.iter().enumerate().map(|(i, k)| format!(r#"{{"id":"{k}","n":{i}}}"#)).collect();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        for chunk in [1usize, 2, 4, 8, 16] {
            let pairs: Vec<(String, String)> = keys.iter().cloned().zip(entries.iter().cloned()).collect();
            let chunks: Vec<Vec<(String, String)>> = pairs.chunks(chunk).map(<[_]>::to_vec).collect();
            let roots: Vec<Digest> = chunks
                .iter()
                .map(|c| merkle_root(&c.iter().map(|(_, e)| Digest::of(e.as_bytes())).collect::<Vec<_>>()))
                .collect();
            for probe in (0..=20).map(|k| format!("k{k:02}")).chain(["a".into(), "z".into()]) {
                // The chunks a reader picks: from the last starting before the key to the
                // first starting after it.
                let firsts: Vec<&str> = chunks.iter().map(|c| c[0].0.as_str()).collect();
                let from = firsts.partition_point(|f| f.as_bytes() < probe.as_bytes()).saturating_sub(1);
                let to = (firsts.partition_point(|f| f.as_bytes() <= probe.as_bytes()) + 1).min(chunks.len());
                let proof = prove_range_chunked(from, &chunks[from..to], &roots, chunk as u64, &probe);
                assert_eq!(proof, prove_range(&entries, &refs, &probe), "{probe} in chunks of {chunk}");
            }
        }
        assert_eq!(prove_range_chunked(0, &[], &[], 4, "x"), RangeProof { index: 0, leaves: Vec::new() });
    }

    #[test]
    fn a_window_that_does_not_bracket_is_refused() {
        let ids = ["b", "d", "f", "h"];
        let (entries, root) = tree(&ids);
        // A true inclusion proof of "d" is no proof of absence for "e": "f" is missing.
        let proof = prove_range(&entries, &ids, "d");
        let cut = RangeProof { index: 1, leaves: proof.leaves[1..2].to_vec() };
        let err = verify_range(&cut, "id", "e", 4, &root).unwrap_err();
        assert!(err.to_string().contains("does not end at the last leaf"), "{err}");
        let mut two_before = proof.clone();
        two_before.leaves.pop();
        let err = verify_range(&two_before, "id", "e", 4, &root).unwrap_err();
        assert!(err.to_string().contains("more than one neighbour"), "{err}");
        // The proof for "c" moved one leaf to the right proves nothing about "c".
        let c = prove_range(&entries, &ids, "c");
        let mut moved = prove_range(&entries, &ids, "e");
        moved.index = c.index + 1;
        assert!(verify_range(&moved, "id", "c", 4, &root).is_err());
    }
}
