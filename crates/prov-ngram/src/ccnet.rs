//! `CCNet`'s text normaliser and document perplexity (Wenzek et al. 2020, `cc_net` 1.0.0 on
//! PyPI: `text_normalizer.normalize` and `perplexity.DocLM`), which the EuroLLM report's
//! perplexity filter follows.
//!
//! [`normalize`] applies, to one paragraph, in this order: strip leading and trailing
//! whitespace (Python's `str.isspace`); lowercase (full Unicode lowercasing, final sigma
//! included); NFD, then drop every nonspacing mark (category Mn); turn every decimal digit
//! (category Nd) into `0`; replace 34 punctuation characters by ASCII ones (`，` by `,`, `—` by
//! ` - `, `…` by `...`, …: [`UNICODE_PUNCT`]); drop the control characters U+0000..U+001F and
//! U+007F..U+009F. The category tables are Python 3.11's (Unicode 14), as `cc_net` sees them.
//!
//! [`doc_perplexity`] is `DocLM` with `normalize=True`: the document split at `\n` into
//! paragraphs, each normalised and scored as a sentence (`<s>` … `</s>`), its length its
//! words (split at Python whitespace) plus one; the perplexity `10^(-Σ score / Σ length)`,
//! the scores summed in double precision in paragraph order, rounded to one decimal as
//! Python's `round` does (to the nearer, ties to even, on the exact binary value).
//!
//! `CCNet`'s own mining pipeline normalises a whole document before tokenising it, which
//! removes its line feeds (they are control characters), so there a document is one
//! "paragraph"; `DocLM` as a step of its own, used here, keeps the paragraphs.

use unicode_normalization::UnicodeNormalization as _;

use crate::query::Model;
use crate::unicode_tables::{MN_RANGES, ND_RANGES};

/// `CCNet`'s `UNICODE_PUNCT`: each character and what replaces it.
pub const UNICODE_PUNCT: [(char, &str); 34] = [
    ('，', ","),
    ('。', "."),
    ('、', ","),
    ('„', "\""),
    ('”', "\""),
    ('“', "\""),
    ('«', "\""),
    ('»', "\""),
    ('１', "\""),
    ('」', "\""),
    ('「', "\""),
    ('《', "\""),
    ('》', "\""),
    ('´', "'"),
    ('∶', ":"),
    ('：', ":"),
    ('？', "?"),
    ('！', "!"),
    ('（', "("),
    ('）', ")"),
    ('；', ";"),
    ('–', "-"),
    ('—', " - "),
    ('．', ". "),
    ('～', "~"),
    ('’', "'"),
    ('…', "..."),
    ('━', "-"),
    ('〈', "<"),
    ('〉', ">"),
    ('【', "["),
    ('】', "]"),
    ('％', "%"),
    ('►', "-"),
];

fn in_ranges(c: char, ranges: &[(u32, u32)]) -> bool {
    let c = u32::from(c);
    ranges
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// Python's `str.isspace` for one character: Unicode `White_Space` and U+001C..U+001F.
pub fn python_isspace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// `cc_net.text_normalizer.normalize(line)` with its defaults.
pub fn normalize(line: &str) -> String {
    let line = line.trim_matches(python_isspace);
    if line.is_empty() {
        return String::new();
    }
    let mut out = String::with_capacity(line.len());
    for c in line.to_lowercase().nfd() {
        if in_ranges(c, MN_RANGES) {
            continue;
        }
        if in_ranges(c, ND_RANGES) {
            out.push('0');
            continue;
        }
        if let Some((_, to)) = UNICODE_PUNCT.iter().find(|(from, _)| *from == c) {
            // A replacement is printable ASCII: nothing of it is removed below.
            out.push_str(to);
            continue;
        }
        if matches!(u32::from(c), 0..=0x1f | 0x7f..=0x9f) {
            continue;
        }
        out.push(c);
    }
    out
}

/// Python's `round(x, 1)`: the nearer multiple of 0.1 as a decimal, ties (exact binary values
/// halfway) to the even digit.
pub fn round1(x: f64) -> f64 {
    let fixed = format!("{x:.1}");
    // A tie at one decimal is a value whose fraction is exactly .x5 in binary: x·4 an integer
    // and x·2 not.
    if (x * 4.0).fract() == 0.0 && (x * 2.0).fract() != 0.0 {
        let down = (x * 10.0).floor();
        let even = if down % 2.0 == 0.0 { down } else { down + 1.0 };
        return format!("{:.1}", even / 10.0).parse().expect("a formatted number");
    }
    fixed.parse().expect("a formatted number")
}

/// One paragraph as `CCNet`'s `DocLM` scores it.
#[derive(Debug, Clone, PartialEq)]
pub struct ParagraphScore {
    /// The paragraph normalised ([`normalize`]): what the model scores.
    pub normalized: String,
    /// Its log10 probability with an end of sentence.
    pub log10: f32,
    /// Its tokens: its words (split at Python's whitespace) and the end of sentence.
    pub length: u64,
}

/// Each paragraph of `text` (split at `\n`) as `DocLM` scores it, in order.
pub fn paragraph_scores<'a>(model: &'a Model, text: &'a str) -> impl Iterator<Item = ParagraphScore> + 'a {
    text.split('\n').map(|paragraph| {
        let normalized = normalize(paragraph);
        let log10 = model.score_sentence(&normalized);
        let length = normalized.split(python_isspace).filter(|w| !w.is_empty()).count() as u64 + 1;
        ParagraphScore { normalized, log10, length }
    })
}

/// A document's perplexity as `CCNet`'s `DocLM` computes it (normalising each paragraph), and
/// the sums it comes from: `(perplexity, Σ log10 score, Σ length)`, the sums over
/// [`paragraph_scores`], the log10 probabilities added as `f64` (Python's floats). An empty
/// text has none (`DocLM` leaves such a document without a perplexity).
pub fn doc_perplexity(model: &Model, text: &str) -> Option<(f64, f64, u64)> {
    if text.is_empty() {
        return None;
    }
    let (mut log_score, mut length) = (0f64, 0u64);
    for p in paragraph_scores(model, text) {
        log_score += f64::from(p.log10);
        length += p.length;
    }
    // libm's pow (musl's, in Rust), not the platform's: the same bits on every machine, and
    // the ones glibc's (the same algorithm) gives cc_net here.
    Some((round1(libm::pow(10.0, -log_score / length as f64)), log_score, length))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_follows_ccnet() {
        assert_eq!(normalize("  Héllo Wörld 123 — «ok»\n"), "hello world 000  -  \"ok\"");
        assert_eq!(normalize("\u{1c} \t "), "");
        assert_eq!(normalize("ΟΔΟΣ ٣٤"), "οδος 00");
        assert_eq!(normalize("a\u{85}b\u{7f}c"), "abc");
        assert_eq!(normalize("İstanbul"), "istanbul");
    }

    #[test]
    #[allow(clippy::float_cmp)] // Python's `round` gives these values exactly.
    fn round1_rounds_as_python() {
        assert_eq!(round1(0.25), 0.2);
        assert_eq!(round1(0.75), 0.8);
        assert_eq!(round1(12.25), 12.2);
        assert_eq!(round1(2.675), 2.7);
        assert_eq!(round1(1234.56), 1234.6);
        assert_eq!(round1(0.04), 0.0);
    }
}
