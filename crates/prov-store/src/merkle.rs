//! Merkle roots over ordered lists of digests (dataset shards, ledgers).
//!
//! The tree is the one of RFC 6962 (Certificate Transparency, section 2.1) with BLAKE3 in place
//! of SHA-256, so that inclusion and consistency proofs keep their well-studied shape:
//!
//! - the root of the empty list is `BLAKE3("")`;
//! - the root of one leaf `d` is `BLAKE3(0x00 || d)` (32 raw digest bytes);
//! - the root of `n > 1` leaves is `BLAKE3(0x01 || root(first k) || root(rest))`, where `k` is
//!   the largest power of two strictly smaller than `n`.
//!
//! The 0x00 / 0x01 prefixes keep a leaf from ever being mistaken for an inner node.

use crate::Digest;

/// Returns the hash of one leaf.
pub fn leaf_hash(leaf: &Digest) -> Digest {
    let mut h = blake3::Hasher::new();
    h.update(&[0x00]);
    h.update(leaf.as_bytes());
    h.finalize().into()
}

/// Returns the hash of an inner node from its two children.
pub fn node_hash(left: &Digest, right: &Digest) -> Digest {
    let mut h = blake3::Hasher::new();
    h.update(&[0x01]);
    h.update(left.as_bytes());
    h.update(right.as_bytes());
    h.finalize().into()
}

/// Returns the Merkle root of `leaves`, in the order given.
pub fn merkle_root(leaves: &[Digest]) -> Digest {
    match leaves.len() {
        0 => Digest::of(b""),
        1 => leaf_hash(&leaves[0]),
        n => {
            let k = largest_power_of_two_below(n);
            node_hash(&merkle_root(&leaves[..k]), &merkle_root(&leaves[k..]))
        }
    }
}

/// Returns the root of a tree whose leaves come in consecutive groups of `chunk` (a power of
/// two), the last group possibly smaller, from the roots of the groups' own trees: the
/// [`merkle_root`] of all the leaves, computed without them.
///
/// It holds because RFC 6962 splits `n` leaves at the largest power of two below `n`, which
/// is a multiple of `chunk` whenever `n > chunk`: every split falls on a group boundary until
/// a part is one group. So the groups' roots combine as the nodes of a tree of their own.
/// A reader that holds one group's leaves and every group's root can thus give a leaf's audit
/// path in the whole tree (its path in the group, then the group's among the groups).
pub fn chunked_root(chunk_roots: &[Digest]) -> Digest {
    match chunk_roots.len() {
        0 => Digest::of(b""),
        1 => chunk_roots[0],
        n => {
            let k = largest_power_of_two_below(n);
            node_hash(&chunked_root(&chunk_roots[..k]), &chunked_root(&chunk_roots[k..]))
        }
    }
}

/// The Merkle root of leaves pushed one at a time: the same root as [`merkle_root`] over the
/// same leaves, holding `log2(n)` digests instead of `n`.
///
/// It keeps the roots of complete subtrees of strictly decreasing sizes (the binary digits of
/// the count), merging two of equal size as they appear; the root folds them from the right.
/// That is RFC 6962's tree: the left subtree of `n` leaves is the complete one of the largest
/// power of two below `n`.
#[derive(Debug, Clone, Default)]
pub struct MerkleBuilder {
    /// (leaves, root) of complete subtrees, largest first.
    complete: Vec<(u64, Digest)>,
}

impl MerkleBuilder {
    /// An empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a leaf.
    pub fn push(&mut self, leaf: &Digest) {
        let mut node = (1u64, leaf_hash(leaf));
        while let Some(&(size, left)) = self.complete.last() {
            if size != node.0 {
                break;
            }
            self.complete.pop();
            node = (size * 2, node_hash(&left, &node.1));
        }
        self.complete.push(node);
    }

    /// The number of leaves pushed.
    pub fn len(&self) -> u64 {
        self.complete.iter().map(|(n, _)| n).sum()
    }

    /// True before the first leaf.
    pub fn is_empty(&self) -> bool {
        self.complete.is_empty()
    }

    /// The root of the leaves pushed so far.
    pub fn root(&self) -> Digest {
        let mut subtrees = self.complete.iter().rev();
        let Some(&(_, mut acc)) = subtrees.next() else { return Digest::of(b"") };
        for (_, left) in subtrees {
            acc = node_hash(left, &acc);
        }
        acc
    }
}

fn largest_power_of_two_below(n: usize) -> usize {
    debug_assert!(n > 1);
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(i: u8) -> Digest {
        Digest::of(&[i])
    }

    #[test]
    fn shape_follows_rfc6962() {
        assert_eq!(merkle_root(&[]), Digest::of(b""));
        assert_eq!(merkle_root(&[d(0)]), leaf_hash(&d(0)));
        let three = merkle_root(&[d(0), d(1), d(2)]);
        let expect = node_hash(&node_hash(&leaf_hash(&d(0)), &leaf_hash(&d(1))), &leaf_hash(&d(2)));
        assert_eq!(three, expect);
        let five = merkle_root(&[d(0), d(1), d(2), d(3), d(4)]);
        let left = merkle_root(&[d(0), d(1), d(2), d(3)]);
        assert_eq!(five, node_hash(&left, &leaf_hash(&d(4))));
    }

    #[test]
    fn the_builder_gives_the_same_root_at_every_count() {
        let leaves: Vec<Digest> = (0..=200u8).map(d).collect();
        let mut b = MerkleBuilder::new();
        assert_eq!(b.root(), merkle_root(&[]));
        for (n, leaf) in leaves.iter().enumerate() {
            b.push(leaf);
            assert_eq!(b.len(), n as u64 + 1);
            assert_eq!(b.root(), merkle_root(&leaves[..=n]), "{} leaves", n + 1);
        }
    }

    /// Grouped in any power-of-two chunk, the groups' roots give the root of all the leaves,
    /// at every count (full and partial last groups, one group, none).
    #[test]
    fn chunk_roots_combine_into_the_root_of_all_leaves() {
        let leaves: Vec<Digest> = (0..=70u8).map(d).collect();
        for chunk in [1usize, 2, 4, 8, 16] {
            for n in 0..=leaves.len() {
                let roots: Vec<Digest> = leaves[..n].chunks(chunk).map(merkle_root).collect();
                assert_eq!(chunked_root(&roots), merkle_root(&leaves[..n]), "{n} leaves in chunks of {chunk}");
            }
        }
        // Not so for a chunk size that is not a power of two: the split would cut a group.
        let roots: Vec<Digest> = leaves[..9].chunks(3).map(merkle_root).collect();
        assert_ne!(chunked_root(&roots), merkle_root(&leaves[..9]));
    }

    #[test]
    fn order_and_duplication_matter() {
        assert_ne!(merkle_root(&[d(0), d(1)]), merkle_root(&[d(1), d(0)]));
        // A tree of two equal leaves is not the tree of one.
        assert_ne!(merkle_root(&[d(0), d(0)]), merkle_root(&[d(0)]));
        // A leaf never equals an inner node built from the same bytes.
        assert_ne!(merkle_root(&[d(0)]), d(0));
    }
}
