//! chrF (Popović 2015) and chrF++ (Popović 2017), computed as sacrebleu 2.x computes them, to
//! the bit.
//!
//! For each order `n` of character n-grams (1 to `char_order`) and of word n-grams (1 to
//! `word_order`) a segment contributes three counts: the hypothesis' n-grams, the reference's,
//! and the matches (the multiset intersection). The score is an F-beta over precision and
//! recall averaged across the orders that have both hypothesis and reference n-grams
//! ("effective order", sacrebleu's default), or, with `eps_smoothing`, the mean of the
//! per-order F-beta with `1e-16` for missing counts (chrF++.py, Moses and NLTK).
//!
//! sacrebleu's details kept here, each one a difference a careful reimplementation can miss:
//! - Whitespace is removed before character n-grams are taken (unless `whitespace`), by
//!   Python's `''.join(line.split())`: Python's whitespace, which is Unicode `White_Space`
//!   plus U+001C..U+001F, not Rust's `char::is_whitespace`.
//! - n-grams are over Unicode code points (Python `str`), not bytes or graphemes.
//! - Words (chrF++) are the whitespace-separated tokens with one ASCII punctuation character
//!   split off the end, or else off the start, of tokens longer than one character.
//! - An order whose reference has no n-grams counts zero hypothesis n-grams, so an empty
//!   reference adds nothing to a corpus.
//! - With several references, a segment takes the statistics of the first reference with the
//!   highest sentence F-score.
//! - A corpus score sums the segments' counts and computes one F-score, not a mean of
//!   sentence scores.
//! - The floating-point operations happen in sacrebleu's order, so scores are equal as
//!   `f64` values, not merely close.
//!
//! Lowercasing (`lowercase`) uses Rust's `str::to_lowercase`, which agrees with Python's
//! `str.lower` (full case mappings, final sigma) except for letters whose case mappings were
//! added to Unicode after the version Python was built with (Python 3.11: Unicode 14.0).

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::Hash;
use std::ops::AddAssign;

use serde::{Deserialize, Serialize};

/// The punctuation chrF++ splits off words: Python's `string.punctuation`.
const PUNCTUATION: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

/// The smoothing constant for missing counts (sacrebleu's `eps`).
const EPS: f64 = 1e-16;

/// Whether Python's `str.isspace` holds: Unicode `White_Space` plus the four ASCII
/// information separators U+001C..U+001F, which Python's `str.split()` also splits on.
pub fn is_python_whitespace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// A chrF configuration, with sacrebleu's parameter names and defaults (chrF2: character
/// 6-grams, no word n-grams, beta 2, case-sensitive, whitespace removed, effective order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "snake_case")]
pub struct Chrf {
    /// Largest character n-gram order.
    pub char_order: usize,
    /// Largest word n-gram order: 0 for chrF, 2 for chrF++.
    pub word_order: usize,
    /// Recall is `beta` times as important as precision (an integer, as in sacrebleu).
    pub beta: u32,
    /// Lowercase hypothesis and references first.
    pub lowercase: bool,
    /// Keep whitespace inside character n-grams.
    pub whitespace: bool,
    /// chrF++.py-style epsilon smoothing instead of the effective order.
    pub eps_smoothing: bool,
}

impl Default for Chrf {
    fn default() -> Self {
        Self::CHRF
    }
}

/// The counts one order contributes: hypothesis n-grams, reference n-grams, matches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OrderCounts {
    /// n-grams of the hypothesis (zero when the reference has none of this order).
    pub hypothesis: u64,
    /// n-grams of the reference.
    pub reference: u64,
    /// n-grams in both, counted with multiplicity (the smaller count of each).
    pub matches: u64,
}

/// The sufficient statistics of chrF: per order (character orders first, then word orders),
/// the counts. Statistics of segments add up to the statistics of a corpus.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChrfStats(pub Vec<OrderCounts>);

impl AddAssign<&ChrfStats> for ChrfStats {
    fn add_assign(&mut self, other: &ChrfStats) {
        if self.0.is_empty() {
            self.0.clone_from(&other.0);
            return;
        }
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            a.hypothesis += b.hypothesis;
            a.reference += b.reference;
            a.matches += b.matches;
        }
    }
}

/// What prevents a chrF score.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChrfError {
    /// A segment has no reference to compare with.
    #[error("segment {segment} has no reference")]
    NoReference {
        /// The segment, from 0.
        segment: usize,
    },
    /// Hypotheses and reference lists differ in number.
    #[error("{hypotheses} hypotheses but {references} reference lists")]
    MismatchedLengths {
        /// Hypotheses given.
        hypotheses: usize,
        /// Reference lists given.
        references: usize,
    },
    /// The configuration has no n-gram order at all.
    #[error("chrF needs a character or word order above 0")]
    NoOrder,
}

impl Chrf {
    /// chrF2, sacrebleu's `CHRF()`.
    pub const CHRF: Self =
        Self { char_order: 6, word_order: 0, beta: 2, lowercase: false, whitespace: false, eps_smoothing: false };

    /// chrF++ (chrF2++), sacrebleu's `CHRF(word_order=2)`.
    pub const CHRF_PLUS_PLUS: Self = Self { word_order: 2, ..Self::CHRF };

    /// The number of orders: character orders plus word orders.
    pub fn orders(&self) -> usize {
        self.char_order + self.word_order
    }

    /// The sentence-level score in `[0, 100]` of `hypothesis` against its best reference.
    pub fn sentence_score(&self, hypothesis: &str, references: &[&str]) -> Result<f64, ChrfError> {
        let stats = self.segment_statistics(hypothesis, references).map_err(|e| match e {
            ChrfError::NoReference { .. } => ChrfError::NoReference { segment: 0 },
            other => other,
        })?;
        Ok(self.score(&stats))
    }

    /// The corpus-level score in `[0, 100]`: the counts of every segment summed, then one
    /// F-score. `references[i]` are the references of `hypotheses[i]`.
    pub fn corpus_score<R: AsRef<[S]>, S: AsRef<str>>(
        &self,
        hypotheses: &[S],
        references: &[R],
    ) -> Result<f64, ChrfError> {
        if hypotheses.len() != references.len() {
            return Err(ChrfError::MismatchedLengths { hypotheses: hypotheses.len(), references: references.len() });
        }
        let mut total = ChrfStats::default();
        for (segment, (hypothesis, refs)) in hypotheses.iter().zip(references).enumerate() {
            let refs: Vec<&str> = refs.as_ref().iter().map(AsRef::as_ref).collect();
            let stats = self.segment_statistics(hypothesis.as_ref(), &refs).map_err(|e| match e {
                ChrfError::NoReference { .. } => ChrfError::NoReference { segment },
                other => other,
            })?;
            total += &stats;
        }
        if total.0.is_empty() {
            total.0 = vec![OrderCounts::default(); self.orders()];
        }
        Ok(self.score(&total))
    }

    /// The counts of one segment against the reference that gives it the highest sentence
    /// score (the first such reference on ties).
    pub fn segment_statistics(&self, hypothesis: &str, references: &[&str]) -> Result<ChrfStats, ChrfError> {
        if self.orders() == 0 {
            return Err(ChrfError::NoOrder);
        }
        let hypothesis = self.preprocess(hypothesis);
        let hyp_chars = CharNgrams::new(&hypothesis, self.whitespace);
        let hyp_words = words(&hypothesis);
        let hyp_char_counts: Vec<_> = (1..=self.char_order).map(|n| hyp_chars.count(n)).collect();
        let hyp_word_counts: Vec<_> = (1..=self.word_order).map(|n| word_ngrams(&hyp_words, n)).collect();
        let mut best: Option<(f64, ChrfStats)> = None;
        for reference in references {
            let reference = self.preprocess(reference);
            let ref_chars = CharNgrams::new(&reference, self.whitespace);
            let ref_words = words(&reference);
            let mut stats = Vec::with_capacity(self.orders());
            for (n, hyp) in (1..=self.char_order).zip(&hyp_char_counts) {
                stats.push(match_counts(hyp, &ref_chars.count(n)));
            }
            for (n, hyp) in (1..=self.word_order).zip(&hyp_word_counts) {
                stats.push(match_counts(hyp, &word_ngrams(&ref_words, n)));
            }
            let stats = ChrfStats(stats);
            let f = self.score(&stats);
            if best.as_ref().is_none_or(|(best_f, _)| f > *best_f) {
                best = Some((f, stats));
            }
        }
        best.map(|(_, stats)| stats).ok_or(ChrfError::NoReference { segment: 0 })
    }

    /// The F-score in `[0, 100]` of summed statistics (sacrebleu's `_compute_f_score`, its
    /// operations in its order).
    pub fn score(&self, stats: &ChrfStats) -> f64 {
        // beta² exactly as Python's integer `beta ** 2` becomes a float (exact below 2^26).
        let factor = f64::from(self.beta) * f64::from(self.beta);
        if self.eps_smoothing {
            let mut smoothed = 0.0;
            for c in &stats.0 {
                let prec = if c.hypothesis > 0 { c.matches as f64 / c.hypothesis as f64 } else { EPS };
                let rec = if c.reference > 0 { c.matches as f64 / c.reference as f64 } else { EPS };
                let denom = factor * prec + rec;
                smoothed += if denom > 0.0 { (1.0 + factor) * prec * rec / denom } else { EPS };
            }
            return 100.0 * smoothed / stats.0.len() as f64;
        }
        let (mean_precision, mean_recall) = mean_precision_recall(stats);
        if mean_precision + mean_recall == 0.0 {
            return 0.0;
        }
        let mut score = (1.0 + factor) * mean_precision * mean_recall;
        score /= factor * mean_precision + mean_recall;
        100.0 * score
    }

    fn preprocess<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.lowercase { Cow::Owned(text.to_lowercase()) } else { Cow::Borrowed(text) }
    }
}

/// A segment's text prepared for character n-grams: whitespace removed unless kept, and the
/// byte offset of every code point (plus the end).
struct CharNgrams {
    text: String,
    bounds: Vec<usize>,
}

impl CharNgrams {
    fn new(text: &str, keep_whitespace: bool) -> Self {
        let text: String = if keep_whitespace {
            text.to_owned()
        } else {
            text.chars().filter(|&c| !is_python_whitespace(c)).collect()
        };
        let mut bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        bounds.push(text.len());
        Self { text, bounds }
    }

    /// The n-grams of `n` code points, counted.
    fn count(&self, n: usize) -> HashMap<&str, u64> {
        let chars = self.bounds.len() - 1;
        let mut counts = HashMap::new();
        if n <= chars {
            for i in 0..=chars - n {
                *counts.entry(&self.text[self.bounds[i]..self.bounds[i + n]]).or_insert(0) += 1;
            }
        }
        counts
    }
}

/// chrF++'s words: whitespace-separated tokens with one ASCII punctuation character split off
/// the end, or else off the start, of tokens longer than one code point (sacrebleu's
/// `_remove_punctuation`, which splits `(hi)` into `(hi` and `)`).
fn words(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for w in text.split(is_python_whitespace).filter(|w| !w.is_empty()) {
        let mut chars = w.chars();
        let first = chars.next().expect("tokens are not empty");
        let Some(last) = chars.next_back() else {
            out.push(w);
            continue;
        };
        if PUNCTUATION.contains(last) {
            out.extend([&w[..w.len() - 1], &w[w.len() - 1..]]);
        } else if PUNCTUATION.contains(first) {
            out.extend([&w[..1], &w[1..]]);
        } else {
            out.push(w);
        }
    }
    out
}

/// The word n-grams of order `n`, counted (a slice of words stands for sacrebleu's
/// space-joined string: words hold no whitespace, so the two are one to one).
fn word_ngrams<'a, 'w>(words: &'a [&'w str], n: usize) -> HashMap<&'a [&'w str], u64> {
    let mut counts = HashMap::new();
    for window in words.windows(n) {
        *counts.entry(window).or_insert(0) += 1;
    }
    counts
}

/// The counts of one order (sacrebleu's `_get_match_statistics`): an order whose reference
/// has no n-grams counts no hypothesis n-grams either. Sums of integers, so the hash maps'
/// iteration order cannot change them.
fn match_counts<K: Eq + Hash>(hypothesis: &HashMap<K, u64>, reference: &HashMap<K, u64>) -> OrderCounts {
    let mut hyp_count = 0;
    let mut matches = 0;
    for (ngram, &count) in hypothesis {
        hyp_count += count;
        if let Some(&r) = reference.get(ngram) {
            matches += count.min(r);
        }
    }
    OrderCounts {
        hypothesis: if reference.is_empty() { 0 } else { hyp_count },
        reference: reference.values().sum(),
        matches,
    }
}

/// The mean n-gram precision and recall of `stats` (sacrebleu's `_compute_f_score`): over the
/// orders where both the hypothesis and the reference have n-grams, `matches / hypothesis`
/// and `matches / reference`; `(0, 0)` when no order has both.
pub fn mean_precision_recall(stats: &ChrfStats) -> (f64, f64) {
    let (mut precision, mut recall, mut orders) = (0.0f64, 0.0f64, 0u32);
    for c in stats.0.iter().filter(|c| c.hypothesis > 0 && c.reference > 0) {
        precision += c.matches as f64 / c.hypothesis as f64;
        recall += c.matches as f64 / c.reference as f64;
        orders += 1;
    }
    if orders == 0 {
        return (0.0, 0.0);
    }
    (precision / f64::from(orders), recall / f64::from(orders))
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // sacrebleu's scores are matched exactly, so exact values are the point
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn chrf(h: &str, r: &str) -> f64 {
        Chrf::CHRF.sentence_score(h, &[r]).unwrap()
    }

    #[test]
    fn identical_strings_score_100() {
        assert_eq!(chrf("Der Mensch ist frei.", "Der Mensch ist frei."), 100.0);
        assert_eq!(Chrf::CHRF_PLUS_PLUS.sentence_score("a b c, d", &["a b c, d"]).unwrap(), 100.0);
    }

    #[test]
    fn empty_sides_score_zero() {
        assert_eq!(chrf("", "reference"), 0.0);
        assert_eq!(chrf("hypothesis", ""), 0.0);
        assert_eq!(chrf("", ""), 0.0);
        // An empty reference counts no hypothesis n-grams: the corpus is the other segment.
        let c = Chrf::CHRF;
        let alone = c.corpus_score(&["abc def"], &[["abd def"]]).unwrap();
        let with_empty = c.corpus_score(&["abc def", "anything"], &[["abd def"], [""]]).unwrap();
        assert_eq!(alone, with_empty);
    }

    #[test]
    fn whitespace_is_python_whitespace() {
        // U+001F is whitespace to Python's str.split, not to Rust's char::is_whitespace.
        assert!(is_python_whitespace('\u{1f}') && !'\u{1f}'.is_whitespace());
        assert_eq!(chrf("ab\u{1f}cd", "abcd"), 100.0);
        assert_eq!(chrf("a b\u{3000}c\td\n", "abcd"), 100.0);
        let keep = Chrf { whitespace: true, ..Chrf::CHRF };
        assert!(keep.sentence_score("ab cd", &["abcd"]).unwrap() < 100.0);
    }

    #[test]
    fn words_split_one_punctuation_mark() {
        assert_eq!(words("(hi) a, .b c!! x"), vec!["(hi", ")", "a", ",", ".", "b", "c!", "!", "x"]);
        assert_eq!(words("  , ¿qué?  "), vec![",", "¿qué", "?"]);
    }

    #[test]
    fn counts_by_hand() {
        // "ab" vs "abc": unigrams 2/3 match (prec 1, rec 2/3), bigrams 1/2 (prec 1, rec 1/2),
        // trigrams: hypothesis has none, so the order does not count.
        let s = Chrf { char_order: 3, ..Chrf::CHRF }.segment_statistics("ab", &["abc"]).unwrap();
        let c = |h, r, m| OrderCounts { hypothesis: h, reference: r, matches: m };
        assert_eq!(s.0, vec![c(2, 3, 2), c(1, 2, 1), c(0, 1, 0)]);
        let (p, r) = (1.0, f64::midpoint(2.0 / 3.0, 0.5));
        let want = 100.0 * (5.0 * p * r / (4.0 * p + r));
        assert!((Chrf { char_order: 3, ..Chrf::CHRF }.score(&s) - want).abs() < 1e-12);
    }

    #[test]
    fn the_best_reference_is_taken() {
        let c = Chrf::CHRF;
        let best = c.sentence_score("the cat sat", &["a dog ran", "the cat sat"]).unwrap();
        assert_eq!(best, 100.0);
        assert!(matches!(c.sentence_score("x", &[]), Err(ChrfError::NoReference { segment: 0 })));
        assert!(matches!(
            c.corpus_score(&["x", "y"], &[vec!["x"]]),
            Err(ChrfError::MismatchedLengths { hypotheses: 2, references: 1 })
        ));
        assert!(matches!(
            c.corpus_score(&["x", "y"], &[vec!["x"], vec![]]),
            Err(ChrfError::NoReference { segment: 1 })
        ));
    }

    #[test]
    fn config_reads_with_defaults_and_refuses_unknown_fields() {
        let c: Chrf = serde_json::from_str(r#"{"word_order": 2}"#).unwrap();
        assert_eq!(c, Chrf::CHRF_PLUS_PLUS);
        assert!(serde_json::from_str::<Chrf>(r#"{"char_ordre": 2}"#).is_err());
    }

    proptest! {
        #[test]
        fn scores_lie_in_0_100(h in "[a-c ,.é]{0,24}", r in "[a-c ,.é]{0,24}", words in 0usize..3, eps: bool) {
            let c = Chrf { word_order: words, eps_smoothing: eps, ..Chrf::CHRF };
            let s = c.sentence_score(&h, &[&r]).unwrap();
            prop_assert!((0.0..=100.0 + 1e-9).contains(&s), "{s}");
            let same = c.sentence_score(&h, &[&h]).unwrap();
            if h.chars().any(|ch| !ch.is_whitespace()) && !eps {
                prop_assert!((same - 100.0).abs() < 1e-9, "{same}");
            }
        }

        #[test]
        fn beta_1_is_symmetric(h in "[a-d ]{1,20}", r in "[a-d ]{1,20}") {
            // With beta = 1 precision and recall weigh alike, and swapping the sides swaps them.
            let c = Chrf { beta: 1, ..Chrf::CHRF };
            let (a, b) = (c.sentence_score(&h, &[&r]).unwrap(), c.sentence_score(&r, &[&h]).unwrap());
            prop_assert!((a - b).abs() < 1e-9, "{a} {b}");
        }

        #[test]
        fn corpus_of_one_is_the_sentence(h in "[a-d ]{0,20}", r in "[a-d ]{0,20}") {
            let c = Chrf::CHRF_PLUS_PLUS;
            prop_assert_eq!(c.corpus_score(&[&h], &[[&r]]).unwrap(), c.sentence_score(&h, &[&r]).unwrap());
        }
    }
}
