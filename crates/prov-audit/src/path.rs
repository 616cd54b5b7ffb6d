//! RFC 6962 audit paths over the Merkle trees of [`prov_store::merkle_root`], and their check
//! (RFC 9162 section 2.1.3.2), with BLAKE3 in place of SHA-256.

use prov_store::{Digest, leaf_hash, merkle_root, node_hash};

/// Returns the audit path of leaf `index` among `leaves`: the sibling subtree roots from the
/// leaf up to the root, as RFC 6962 section 2.1.1 defines `PATH(m, D[n])`.
///
/// # Panics
///
/// When `index` is not below `leaves.len()`; callers pick the index from the leaves.
pub fn audit_path(leaves: &[Digest], index: usize) -> Vec<Digest> {
    assert!(index < leaves.len(), "leaf {index} of {} leaves", leaves.len());
    let mut path = Vec::new();
    push_path(leaves, index, merkle_root, &mut path);
    path
}

/// Pushes the path of `items[index]` (leaves, or nodes already hashed, as `root` reads them).
fn push_path(items: &[Digest], index: usize, root: fn(&[Digest]) -> Digest, out: &mut Vec<Digest>) {
    let n = items.len();
    if n <= 1 {
        return;
    }
    let k = split(n);
    if index < k {
        push_path(&items[..k], index, root, out);
        out.push(root(&items[k..]));
    } else {
        push_path(&items[k..], index - k, root, out);
        out.push(root(&items[..k]));
    }
}

/// Returns the audit path of leaf `index` of a tree whose leaves come in chunks of
/// `chunk_entries` (a power of two),
/// from the leaves of the leaf's own chunk and every chunk's root: the path inside the chunk,
/// then the chunk's path among the chunks (see [`prov_store::chunked_root`]). Equal to
/// [`audit_path`] over all the leaves, without reading the other chunks.
///
/// # Panics
///
/// When `index` does not fall in a chunk of `chunk_roots`, or `chunk` (the leaves of the
/// chunk that holds `index`) is not that chunk's length.
pub fn chunked_audit_path(chunk: &[Digest], chunk_roots: &[Digest], chunk_entries: u64, index: u64) -> Vec<Digest> {
    let c = usize::try_from(index / chunk_entries).expect("a chunk index fits");
    assert!(c < chunk_roots.len(), "leaf {index} is past the last chunk");
    let mut path = audit_path(chunk, usize::try_from(index % chunk_entries).expect("within a chunk"));
    push_path(chunk_roots, c, prov_store::chunked_root, &mut path);
    path
}

/// The largest power of two strictly smaller than `n` (`n > 1`).
fn split(n: usize) -> usize {
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    k
}

/// Returns the root that `path` leads to from the leaf digest `leaf` (before the leaf prefix)
/// at `index` of a tree of `size` leaves, or `None` when the path has the wrong length for
/// that position.
pub fn root_from_path(index: u64, size: u64, leaf: &Digest, path: &[Digest]) -> Option<Digest> {
    if index >= size {
        return None;
    }
    let (mut fn_, mut sn) = (index, size - 1);
    let mut r = leaf_hash(leaf);
    for p in path {
        if sn == 0 {
            return None;
        }
        if fn_ & 1 == 1 || fn_ == sn {
            r = node_hash(p, &r);
            if fn_ & 1 == 0 {
                while fn_ & 1 == 0 && fn_ != 0 {
                    fn_ >>= 1;
                    sn >>= 1;
                }
            }
        } else {
            r = node_hash(&r, p);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    (sn == 0).then_some(r)
}

/// Returns whether `path` proves `leaf` at `index` of a tree of `size` leaves with `root`.
pub fn verify_path(index: u64, size: u64, leaf: &Digest, path: &[Digest], root: &Digest) -> bool {
    root_from_path(index, size, leaf, path).is_some_and(|r| r == *root)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaves(n: usize) -> Vec<Digest> {
        (0..n).map(|i| Digest::of(&(i as u64).to_le_bytes())).collect()
    }

    #[test]
    fn every_leaf_of_every_small_tree_verifies_and_nothing_else_does() {
        for n in 1..=33 {
            let ls = leaves(n);
            let root = merkle_root(&ls);
            for i in 0..n {
                let path = audit_path(&ls, i);
                assert!(path.len() <= 6, "at most ceil(log2 n) digests");
                assert!(verify_path(i as u64, n as u64, &ls[i], &path, &root), "leaf {i} of {n}");
                // Another index, another leaf or a shortened path fail. (The size is not
                // bound by the path alone: leaf 0 of 3 has the path of leaf 0 of 4. Proofs
                // take the size from the committed record.)
                assert!(!verify_path(((i + 1) % n) as u64, n as u64, &ls[i], &path, &root) || n == 1);
                assert!(!verify_path(i as u64, n as u64, &ls[(i + 1) % n], &path, &root) || n == 1);
                if let Some((_, shorter)) = path.split_last() {
                    assert!(!verify_path(i as u64, n as u64, &ls[i], shorter, &root));
                }
            }
        }
    }

    /// The path built from one chunk and the chunk roots is the path over all the leaves,
    /// for every leaf, chunk size and tree size.
    #[test]
    fn a_path_from_one_chunk_equals_the_path_over_all_leaves() {
        for chunk in [1u64, 2, 4, 8] {
            for n in 1..=37 {
                let ls = leaves(n);
                let chunks: Vec<&[Digest]> = ls.chunks(chunk as usize).collect();
                let roots: Vec<Digest> = chunks.iter().map(|c| merkle_root(c)).collect();
                for i in 0..n {
                    let own = chunks[i / chunk as usize];
                    assert_eq!(
                        chunked_audit_path(own, &roots, chunk, i as u64),
                        audit_path(&ls, i),
                        "leaf {i} of {n} in chunks of {chunk}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_books_example_path_for_b() {
        // book/src/formats/ledgers.md: row 1 of 3 has the path [leaf(d_a), leaf(d_c)].
        let ls = leaves(3);
        assert_eq!(audit_path(&ls, 1), vec![leaf_hash(&ls[0]), leaf_hash(&ls[2])]);
        assert!(audit_path(&ls[..1], 0).is_empty());
        assert!(root_from_path(0, 0, &ls[0], &[]).is_none());
    }
}
