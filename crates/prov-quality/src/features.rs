//! Hashed character n-grams within words, as scikit-learn's `HashingVectorizer` with
//! `analyzer="char_wb"`, `lowercase=True`, `alternate_sign=True` and `norm="l2"` computes them:
//!
//! 1. the text is lowercased (`str.lower`: Unicode's full lowercase mapping, final sigma
//!    included) and split at runs of whitespace (`str.split`: Python's `isspace`);
//! 2. each word `w` is padded to `" " + w + " "`, and for each `n` from `min_n` to `max_n` its
//!    n-grams are taken left to right; a padded word shorter than `n` gives itself once and
//!    ends the word's n-grams;
//! 3. each n-gram's UTF-8 bytes are hashed with `MurmurHash3` (x86, 32 bits, seed 0) read as a
//!    signed integer `h`: the n-gram adds `+1` (`h ≥ 0`) or `−1` to bucket `|h| mod F`
//!    (`h = −2³¹` goes to `(2³¹ − 1 − (F − 1)) mod F`);
//! 4. the buckets are divided by the square root of the sum of their squares, summed in
//!    bucket order (none when that sum is 0).
//!
//! Python 3.11's case tables are Unicode 14's and Rust's are newer: a character whose
//! lowercase mapping was added later can hash differently (none of the main job's text has
//! one).

/// The feature map's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashingVectorizer {
    /// Buckets `F` (scikit-learn's `n_features`), from 1 to 2³¹ − 1 (scikit-learn's bound).
    pub n_features: u32,
    /// Shortest n-gram, at least 1.
    pub min_n: usize,
    /// Longest n-gram, at least `min_n`.
    pub max_n: usize,
}

impl HashingVectorizer {
    /// The document's features: `(bucket, value)` in bucket order, buckets whose counts
    /// cancelled to 0 included (as scikit-learn keeps them).
    pub fn transform(&self, text: &str) -> Vec<(u32, f64)> {
        let mut features = self.counts(text);
        let norm = l2_norm(&features);
        if norm != 0.0 {
            for (_, v) in &mut features {
                *v /= norm;
            }
        }
        features
    }

    /// Steps 1 to 3 of the module doc: each bucket's signed n-gram count, in bucket order.
    pub fn counts(&self, text: &str) -> Vec<(u32, f64)> {
        // Sums of ±1 are exact in any order; the map holds one entry per bucket, not per n-gram.
        let mut buckets: std::collections::BTreeMap<u32, f64> = std::collections::BTreeMap::new();
        self.for_each_gram(text, |gram| {
            let (b, sign) = self.bucket(gram);
            *buckets.entry(b).or_default() += sign;
        });
        buckets.into_iter().collect()
    }

    /// Calls `f` with the UTF-8 bytes of each of the text's n-grams, in the order of steps 1
    /// and 2 of the module doc (repeats included).
    pub fn for_each_gram(&self, text: &str, mut f: impl FnMut(&[u8])) {
        let lower = text.to_lowercase();
        let mut gram = String::new();
        for word in lower.split(is_python_space).filter(|w| !w.is_empty()) {
            let padded: Vec<char> = std::iter::once(' ').chain(word.chars()).chain(std::iter::once(' ')).collect();
            for n in self.min_n..=self.max_n {
                let mut offset = 0;
                loop {
                    gram.clear();
                    gram.extend(&padded[offset..(offset + n).min(padded.len())]);
                    f(gram.as_bytes());
                    if offset + n >= padded.len() {
                        break;
                    }
                    offset += 1;
                }
                if offset == 0 {
                    break;
                }
            }
        }
    }

    /// The bucket of one n-gram's bytes, and the sign it adds with.
    pub fn bucket(&self, gram: &[u8]) -> (u32, f64) {
        let h = murmur3_32(gram, 0);
        let f = self.n_features;
        let index =
            if h == i32::MIN { i32::MAX.cast_unsigned().saturating_sub(f - 1) % f } else { h.unsigned_abs() % f };
        (index, if h >= 0 { 1.0 } else { -1.0 })
    }
}

/// Step 4's divisor: the square root of the sum of the values' squares, summed in order.
pub fn l2_norm(values: &[(u32, f64)]) -> f64 {
    let mut squares = 0.0;
    for (_, v) in values {
        squares += v * v;
    }
    squares.sqrt()
}

/// Python's `str.isspace`: Unicode `White_Space` and the four information separators
/// U+001C–U+001F, which Python also splits at.
fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// `MurmurHash3`'s x86 32-bit hash of `key` with `seed` (little-endian blocks), as a signed
/// integer: scikit-learn's `murmurhash3_32(key, seed, positive=False)`.
pub fn murmur3_32(key: &[u8], seed: u32) -> i32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let scramble = |k: u32| k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    let mut h = seed;
    let blocks = key.chunks_exact(4);
    let tail = blocks.remainder();
    for block in blocks {
        h ^= scramble(u32::from_le_bytes([block[0], block[1], block[2], block[3]]));
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    if !tail.is_empty() {
        let mut k = 0u32;
        for (i, &b) in tail.iter().enumerate() {
            k |= u32::from(b) << (8 * i);
        }
        h ^= scramble(k);
    }
    // The length is mixed in modulo 2^32, as the reference's `uint32_t` length is.
    h ^= key.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h.cast_signed()
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // exact values: counts of ±1 and their norms
mod tests {
    use super::*;

    #[test]
    fn murmur3_matches_the_published_vectors() {
        // SMHasher's verification values for MurmurHash3_x86_32.
        assert_eq!(murmur3_32(b"", 0), 0);
        assert_eq!(murmur3_32(b"", 1).cast_unsigned(), 0x514e_28b7);
        assert_eq!(murmur3_32(b"", 0xffff_ffff).cast_unsigned(), 0x81f1_6f39);
        assert_eq!(murmur3_32(b"\x21\x43\x65\x87", 0).cast_unsigned(), 0xf55b_516b);
        assert_eq!(murmur3_32(b"\x21\x43\x65", 0).cast_unsigned(), 0x7e4a_8634);
        assert_eq!(murmur3_32(b"\x21\x43", 0).cast_unsigned(), 0xa0f7_b07a);
        assert_eq!(murmur3_32(b"\x21", 0).cast_unsigned(), 0x7266_1cf4);
        assert_eq!(murmur3_32(b"Hello, world!", 1234).cast_unsigned(), 0xfaf6_cdb3);
    }

    #[test]
    fn words_are_padded_and_short_words_count_once() {
        let v = HashingVectorizer { n_features: 1 << 20, min_n: 1, max_n: 5 };
        // "a" is padded to " a ": 1-grams " ", "a", " "; 2-grams " a", "a "; the 3-gram " a "
        // is the whole padded word (offset 0), which ends the word's n-grams before n = 4.
        // Five distinct n-grams, the space counted twice: squares sum to 4 + 4.
        let one = v.transform("a");
        let norm = 8.0f64.sqrt();
        let mut values: Vec<f64> = one.iter().map(|(_, x)| x.abs() * norm).collect();
        values.sort_by(f64::total_cmp);
        assert_eq!(values, vec![1.0, 1.0, 1.0, 1.0, 2.0]);
        assert_eq!(v.transform("A"), one, "lowercased");
        assert_eq!(v.transform(" a \u{1f}\t "), one, "Python's whitespace");
        assert!(v.transform(" \n ").is_empty());
    }
}
