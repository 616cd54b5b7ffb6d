//! An n-gram as a fixed array of word ids (unused places hold [`NONE`]), and a hash map keyed
//! by it with a fast multiplicative hash: n-gram tables hold millions of entries, and a key
//! that needs no allocation and a hash that costs a few cycles make estimation and scoring
//! an order of magnitude faster than `Vec` keys with `SipHash`. Nothing iterates a map into an
//! output without sorting it first, so the hash leaves no trace in what is written.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The highest order supported: the places of an n-gram.
pub const MAX_ORDER: usize = 8;

/// The id of an unused place.
pub const NONE: u32 = u32::MAX;

/// An n-gram's ids, oldest first, then [`NONE`].
pub type Gram = [u32; MAX_ORDER];

/// A hash map keyed by n-grams.
pub type GramMap<V> = HashMap<Gram, V, BuildHasherDefault<GramHasher>>;

/// An empty map with room for `n` n-grams.
pub fn gram_map<V>(n: usize) -> GramMap<V> {
    GramMap::with_capacity_and_hasher(n, BuildHasherDefault::default())
}

/// The n-gram of `ids` (at most [`MAX_ORDER`] of them).
pub fn gram_of(ids: &[u32]) -> Gram {
    let mut g = [NONE; MAX_ORDER];
    g[..ids.len()].copy_from_slice(ids);
    g
}

/// The first `n - 1` ids of an `n`-gram: its context.
pub fn context(g: &Gram, n: usize) -> Gram {
    let mut c = *g;
    c[n - 1] = NONE;
    c
}

/// The n-gram without its first id.
pub fn suffix(g: &Gram) -> Gram {
    let mut s = [NONE; MAX_ORDER];
    s[..MAX_ORDER - 1].copy_from_slice(&g[1..]);
    s
}

/// A multiply-and-rotate hash over 8 bytes at a time (the scheme of Firefox's `FxHash`).
#[derive(Debug, Default, Clone, Copy)]
pub struct GramHasher(u64);

impl Hasher for GramHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("eight bytes")));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl GramHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}
