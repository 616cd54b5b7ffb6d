//! The document embedding of the toxicity classifier: hashed character n-grams.
//!
//! Language-agnostic and local (no vocabulary, no model to download), and portable: every
//! step is integer arithmetic, or IEEE 754 operations that are correctly rounded everywhere
//! (addition, multiplication, division, square root), so a text embeds to the same bits on
//! every machine. The book's toxicity chapter states the algorithm for independent checkers:
//!
//! 1. Each character is lower-cased (Unicode `to_lowercase`, which may yield several
//!    characters); every run of whitespace becomes one space; one space pads each end.
//! 2. For each n in `ngram_min..=ngram_max`, each window of n consecutive characters is
//!    hashed: FNV-1a 64 over its UTF-8 bytes, then the `SplitMix64` finaliser. The feature
//!    index is the hash modulo `dim` (a power of two); the top bit gives the sign, +1 or -1.
//! 3. Signs are summed per index; each non-zero sum `s` becomes `sign(s) * sqrt(|s|)`.
//! 4. The vector is divided by its Euclidean norm (summed in index order, in f64) and
//!    stored as f32, sparse, in index order.

use serde::{Deserialize, Serialize};

/// The embedding's parameters, stored in the classifier checkpoint's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingConfig {
    /// Feature space size, a power of two.
    pub dim: u32,
    /// Shortest n-gram, in characters.
    pub ngram_min: u32,
    /// Longest n-gram, in characters.
    pub ngram_max: u32,
}

impl Default for EmbeddingConfig {
    fn default() -> Self {
        Self { dim: 1 << 12, ngram_min: 2, ngram_max: 4 }
    }
}

impl EmbeddingConfig {
    /// Returns why the parameters cannot be used, if they cannot.
    pub fn problem(&self) -> Option<String> {
        if !self.dim.is_power_of_two() || self.dim < 16 || self.dim > 1 << 24 {
            return Some(format!("`dim` must be a power of two between 16 and 16777216, got {}", self.dim));
        }
        if self.ngram_min == 0 || self.ngram_min > self.ngram_max || self.ngram_max > 16 {
            return Some(format!(
                "n-gram lengths must satisfy 1 <= ngram_min <= ngram_max <= 16, got {}..={}",
                self.ngram_min, self.ngram_max
            ));
        }
        None
    }

    /// Embeds a text as `(index, value)` pairs in increasing index order; empty when the text
    /// has no n-gram (shorter than `ngram_min` after padding).
    pub fn embed(&self, text: &str) -> Vec<(u32, f32)> {
        let chars = normalised_chars(text);
        let mut features: Vec<(u32, i32)> = Vec::new();
        let mut buf = [0u8; 64];
        for n in self.ngram_min as usize..=self.ngram_max as usize {
            for window in chars.windows(n) {
                let mut len = 0;
                for c in window {
                    len += c.encode_utf8(&mut buf[len..]).len();
                }
                let h = mix(fnv1a(&buf[..len]));
                let index = (h & u64::from(self.dim - 1)) as u32;
                features.push((index, if h >> 63 == 1 { -1 } else { 1 }));
            }
        }
        features.sort_unstable_by_key(|&(i, _)| i);
        let mut summed: Vec<(u32, f64)> = Vec::new();
        for (i, s) in features {
            match summed.last_mut() {
                Some((last, acc)) if *last == i => *acc += f64::from(s),
                _ => summed.push((i, f64::from(s))),
            }
        }
        summed.retain(|&(_, s)| s != 0.0);
        for (_, s) in &mut summed {
            *s = s.signum() * s.abs().sqrt();
        }
        let norm = summed.iter().map(|&(_, v)| v * v).sum::<f64>().sqrt();
        summed.into_iter().map(|(i, v)| (i, (v / norm) as f32)).collect()
    }
}

/// Lower-cased characters with whitespace runs collapsed and a space at each end.
fn normalised_chars(text: &str) -> Vec<char> {
    let mut out = vec![' '];
    for c in text.chars() {
        if c.is_whitespace() {
            if out.last() != Some(&' ') {
                out.push(' ');
            }
        } else {
            out.extend(c.to_lowercase());
        }
    }
    if out.last() != Some(&' ') {
        out.push(' ');
    }
    out
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// `SplitMix64`'s finaliser: spreads FNV's weak low bits over the whole word.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Splits a text into chunks of at most `max_chars` characters for scoring: lines are packed
/// greedily (joined by `\n`), a longer line is cut every `max_chars` characters, and chunks of
/// only whitespace are dropped.
pub fn chunks(text: &str, max_chars: usize) -> Vec<String> {
    let max_chars = max_chars.max(1);
    let mut out = Vec::new();
    let mut current = String::new();
    let mut current_chars = 0usize;
    let flush = |current: &mut String, current_chars: &mut usize, out: &mut Vec<String>| {
        if !current.trim().is_empty() {
            out.push(std::mem::take(current));
        }
        current.clear();
        *current_chars = 0;
    };
    for line in text.split('\n') {
        let line_chars = line.chars().count();
        if line_chars > max_chars {
            flush(&mut current, &mut current_chars, &mut out);
            let chars: Vec<char> = line.chars().collect();
            for piece in chars.chunks(max_chars) {
                let mut s: String = piece.iter().collect();
                flush(&mut s, &mut 0, &mut out);
            }
            continue;
        }
        let joined = if current_chars == 0 { line_chars } else { current_chars + 1 + line_chars };
        if joined > max_chars {
            flush(&mut current, &mut current_chars, &mut out);
        }
        if current_chars > 0 {
            current.push('\n');
            current_chars += 1;
        }
        current.push_str(line);
        current_chars += line_chars;
    }
    flush(&mut current, &mut current_chars, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn normalisation_lowercases_and_collapses_whitespace() {
        let s: String = normalised_chars("Straße\t\n  ÉTÉ").into_iter().collect();
        assert_eq!(s, " straße été ");
        let s: String = normalised_chars("İ").into_iter().collect();
        assert_eq!(s, " i\u{307} ", "to_lowercase may yield several characters");
    }

    #[test]
    fn fnv_and_the_finaliser_match_their_published_values() {
        // FNV-1a 64 test vectors (Fowler, Noll, Vo).
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
        // SplitMix64's first output for seed 0 is mix(0x9e3779b97f4a7c15).
        assert_eq!(mix(0x9e37_79b9_7f4a_7c15), 0xe220_a839_7b1d_cdaf);
    }

    #[test]
    fn embedding_of_a_known_text() {
        let cfg = EmbeddingConfig { dim: 1 << 14, ngram_min: 2, ngram_max: 4 };
        let v = cfg.embed("I hate you");
        // " i hate you " has 12 characters: 11 bigrams, 10 trigrams, 9 four-grams.
        let total: usize = 11 + 10 + 9;
        assert!(v.len() <= total && v.len() >= total - 3, "{}", v.len());
        assert!(v.windows(2).all(|w| w[0].0 < w[1].0), "sorted, unique indices");
        let norm: f64 = v.iter().map(|&(_, x)| f64::from(x) * f64::from(x)).sum();
        assert!((norm - 1.0).abs() < 1e-6, "{norm}");
        assert_eq!(cfg.embed("I   HATE\nyou"), v, "case and whitespace do not matter");
        assert!(cfg.embed("").is_empty() || cfg.embed("").len() == 1);
    }

    #[test]
    fn bad_parameters_are_named() {
        assert!(
            EmbeddingConfig { dim: 1000, ..EmbeddingConfig::default() }.problem().unwrap().contains("power of two")
        );
        assert!(EmbeddingConfig { ngram_min: 5, ngram_max: 3, ..EmbeddingConfig::default() }.problem().is_some());
        assert!(EmbeddingConfig::default().problem().is_none());
    }

    #[test]
    fn chunking_packs_lines_and_cuts_long_ones() {
        assert_eq!(chunks("ab\ncd\nef", 5), vec!["ab\ncd", "ef"]);
        assert_eq!(chunks("abcdefg", 3), vec!["abc", "def", "g"]);
        assert_eq!(chunks("  \n\n", 10), Vec::<String>::new());
        assert_eq!(chunks("ab\n\ncd", 100), vec!["ab\n\ncd"]);
    }

    proptest! {
        #[test]
        fn chunks_cover_every_non_whitespace_character(text in "\\PC{0,300}", max in 1usize..50) {
            let got = chunks(&text, max);
            for c in &got {
                prop_assert!(c.chars().count() <= max);
            }
            let strip = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
            prop_assert_eq!(strip(&got.concat()), strip(&text));
        }

        #[test]
        fn embeddings_are_unit_length_and_sorted(text in "\\PC{1,200}") {
            let v = EmbeddingConfig { dim: 256, ngram_min: 1, ngram_max: 3 }.embed(&text);
            prop_assert!(v.windows(2).all(|w| w[0].0 < w[1].0));
            if !v.is_empty() {
                let norm: f64 = v.iter().map(|&(_, x)| f64::from(x) * f64::from(x)).sum();
                prop_assert!((norm - 1.0).abs() < 1e-5);
            }
        }
    }
}
