//! The apertus mode: Python `re.finditer` per kind, then `str.replace` of each distinct match,
//! longest first, then in byte order.
//!
//! The text being rewritten is kept as a list of [`Piece`]s: spans of the input that are
//! still there, and markers that replaced a span of the input. `str.replace` on the whole
//! text equals replacing within each remaining span on its own, because no match string of
//! any kind can overlap a marker: every e-mail match holds `@`, every IPv4 match digits and
//! dots, every IBAN match digits, and no marker holds `@` or a digit, while a string that
//! reaches into a marker from outside would have to hold its `<` or `>`, which none of the
//! three patterns matches. For the same reason the IPv4 and IBAN patterns, which have no
//! assertions, find the same matches in each span on its own as in the whole current text.
//! The e-mail pattern (the one with `\b`) runs first, on the input itself.
//!
//! Before any pattern runs, one pass counts the bytes every match of it must hold
//! ([`Needed`]): an e-mail match holds `@`; an IPv4 match four digits and three dots; an IBAN
//! match (two letters, two digits, four groups of four digits, one or two more) eighteen
//! digits. A pattern is not run on a text that holds fewer: it could not match there, so the
//! redaction is the same, and prose, which rarely holds eighteen digits, skips the IBAN
//! pattern, the slowest of the three.

use std::borrow::Cow;
use std::ops::Range;

use regex::Regex;

use super::{Patterns, PiiKind, PiiMatch, Redaction, python_word_boundary};

/// A span of the current text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    /// Input text still in place.
    Text(Range<usize>),
    /// A marker that replaced this span of the input.
    Marker(PiiKind, Range<usize>),
}

/// How many of the bytes that matches need a text holds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Needed {
    at_signs: usize,
    digits: usize,
    dots: usize,
}

impl Needed {
    pub(super) fn count(text: &str) -> Self {
        let mut n = Self::default();
        for &b in text.as_bytes() {
            n.at_signs += usize::from(b == b'@');
            n.digits += usize::from(b.is_ascii_digit());
            n.dots += usize::from(b == b'.');
        }
        n
    }

    /// Whether a match of `kind`'s apertus pattern could be in the text.
    pub(super) fn may_match(self, kind: PiiKind) -> bool {
        match kind {
            PiiKind::Email => self.at_signs >= 1,
            PiiKind::Ip => self.digits >= 4 && self.dots >= 3,
            PiiKind::Iban => self.digits >= 18,
        }
    }
}

pub(super) fn redact<'a>(patterns: &Patterns, text: &'a str) -> Redaction<'a> {
    let mut pieces = vec![Piece::Text(0..text.len())];
    let mut scratch = Vec::new();
    let needed = Needed::count(text);
    // Markers hold none of the counted bytes, so a count over the input bounds every
    // later piece of text too.
    for kind in PiiKind::ALL.into_iter().filter(|k| needed.may_match(*k)) {
        let mut found: Vec<&str> = match kind {
            PiiKind::Email => find_emails(&patterns.email, text).map(|r| &text[r]).collect(),
            PiiKind::Ip | PiiKind::Iban => {
                let re = if kind == PiiKind::Ip { &patterns.ip } else { &patterns.iban };
                pieces
                    .iter()
                    .filter_map(|p| match p {
                        Piece::Text(r) => Some(r),
                        Piece::Marker(..) => None,
                    })
                    .flat_map(|r| re.find_iter(&text[r.clone()]).map(|m| &text[r.start + m.start()..r.start + m.end()]))
                    .collect()
            }
        };
        // Distinct matches, longest first, then in byte order.
        found.sort_unstable_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        found.dedup();
        for needle in found {
            replace_all(text, &mut pieces, &mut scratch, needle, kind);
        }
    }
    let matches: Vec<PiiMatch> = pieces
        .iter()
        .filter_map(|p| match p {
            Piece::Marker(kind, r) => Some(PiiMatch { kind: *kind, start: r.start, end: r.end }),
            Piece::Text(_) => None,
        })
        .collect();
    let text = if matches.is_empty() {
        Cow::Borrowed(text)
    } else {
        let mut out = String::with_capacity(text.len());
        for p in &pieces {
            match p {
                Piece::Text(r) => out.push_str(&text[r.clone()]),
                Piece::Marker(kind, _) => out.push_str(kind.marker()),
            }
        }
        Cow::Owned(out)
    };
    Redaction { text, matches }
}

/// Python's `text.replace(needle, marker)` on the pieces: every non-overlapping occurrence of
/// `needle`, left to right, in every remaining span of input text becomes a marker.
fn replace_all(text: &str, pieces: &mut Vec<Piece>, scratch: &mut Vec<Piece>, needle: &str, kind: PiiKind) {
    debug_assert!(!needle.is_empty(), "no pattern matches the empty string");
    scratch.clear();
    let mut changed = false;
    for piece in pieces.iter() {
        let Piece::Text(r) = piece else {
            scratch.push(piece.clone());
            continue;
        };
        let mut at = r.start;
        for (i, _) in text[r.clone()].match_indices(needle) {
            let start = r.start + i;
            if start > at {
                scratch.push(Piece::Text(at..start));
            }
            scratch.push(Piece::Marker(kind, start..start + needle.len()));
            at = start + needle.len();
            changed = true;
        }
        if at < r.end {
            scratch.push(Piece::Text(at..r.end));
        }
    }
    if changed {
        std::mem::swap(pieces, scratch);
    }
}

/// Python's `re.finditer` of the apertus e-mail pattern over `text`: leftmost-first,
/// non-overlapping matches of `email` (the pattern without its leading `\b`) that start where
/// Python's `\b` holds.
///
/// A match of the pattern without `\b` that starts at `s` is the match Python finds at `s`
/// when `\b` holds there (the assertion comes first and consumes nothing). When it does not
/// hold, no Python match starts before the next position where it does, so the search goes
/// on from there.
pub(super) fn find_emails<'t>(email: &'t Regex, text: &'t str) -> impl Iterator<Item = Range<usize>> + 't {
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < text.len() {
            let m = email.find_at(text, at)?;
            if python_word_boundary(text, m.start()) {
                // The pattern never matches the empty string, so this makes progress.
                at = m.end().max(m.start() + 1);
                return Some(m.range());
            }
            at = next_python_boundary(text, m.start());
        }
        None
    })
}

/// Returns the first char boundary after `from` where Python's `\b` holds, or `text.len()`.
fn next_python_boundary(text: &str, from: usize) -> usize {
    text[from..]
        .char_indices()
        .skip(1)
        .map(|(i, _)| from + i)
        .find(|&i| python_word_boundary(text, i))
        .unwrap_or(text.len())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    /// Texts made of the bytes the patterns are built from, so that matches are frequent.
    fn pii_like() -> impl Strategy<Value = String> {
        proptest::string::string_regex("[0-9A-Z. @a-z<>-]{0,60}").unwrap()
    }

    proptest! {
        /// A pattern the prefilter skips has no match in the text: the skip changes nothing.
        #[test]
        fn a_skipped_pattern_would_have_found_nothing(text in pii_like()) {
            let patterns = &*PATTERNS;
            let needed = Needed::count(&text);
            for kind in PiiKind::ALL {
                if !needed.may_match(kind) {
                    let found = match kind {
                        PiiKind::Email => find_emails(&patterns.email, &text).count(),
                        PiiKind::Ip => patterns.ip.find_iter(&text).count(),
                        PiiKind::Iban => patterns.iban.find_iter(&text).count(),
                    };
                    prop_assert_eq!(found, 0, "{:?} in {:?}", kind, text);
                }
            }
        }
    }

    use super::super::{PATTERNS, Redactor};
    use super::*;

    fn redact(text: &str) -> String {
        Redactor::apertus().redact(text).text.into_owned()
    }

    /// The same algorithm on a `String`, literally: Python's `str.replace` for every distinct
    /// match, longest first, then in byte order.
    fn reference(text: &str) -> String {
        let p = &*PATTERNS;
        let mut text = text.to_owned();
        for kind in PiiKind::ALL {
            let mut found: Vec<String> = match kind {
                PiiKind::Email => find_emails(&p.email, &text).map(|r| text[r].to_owned()).collect(),
                PiiKind::Ip => p.ip.find_iter(&text).map(|m| m.as_str().to_owned()).collect(),
                PiiKind::Iban => p.iban.find_iter(&text).map(|m| m.as_str().to_owned()).collect(),
            };
            found.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
            found.dedup();
            for s in found {
                text = text.replace(&s, kind.marker());
            }
        }
        text
    }

    #[test]
    fn the_three_kinds_are_replaced_with_their_markers() {
        assert_eq!(
            redact("Write to Jane.Doe@Example.ORG or [1.2.3.4]; host 192.168.0.1; IBAN CH93 0076 2011 6238 5295 7."),
            "Write to <email-pii> or [<ip-pii>]; host <ip-pii>; IBAN <iban-pii>."
        );
        // Every occurrence of a distinct match goes, wherever it is.
        assert_eq!(redact("a@b.cd a@b.cd xa@b.cd"), "<email-pii> <email-pii> <email-pii>");
        // IBANs only in the one layout the pattern knows: 2 letters, 2 digits, 4 groups of 4
        // digits and 1 or 2 more characters (a greedy `{1,2}`).
        assert_eq!(redact("DE89 3704 0044 0532 0130 00"), "<iban-pii>");
        assert_eq!(redact("DE89370400440532013000"), "DE89370400440532013000");
        assert_eq!(redact("GR16 0110 1250 0000 0001 2300 695"), "<iban-pii>00 695");
    }

    /// The book's PII page, "Replacement order": an address that is the tail of a
    /// Message-ID. Longest first replaces the Message-ID whole; the other order (one of the
    /// orders a Python set may give) would leave `<20050101.<email-pii>>`.
    #[test]
    fn a_message_id_and_its_tail_are_replaced_longest_first() {
        let text = "Message-ID: <20050101.foo@example.org>\nFrom: foo@example.org\n";
        let out = Redactor::apertus().redact(text);
        assert_eq!(out.text, "Message-ID: <<email-pii>>\nFrom: <email-pii>\n");
        let spans: Vec<_> = out.matches.iter().map(|m| (m.kind, &text[m.start..m.end])).collect();
        assert_eq!(spans, [(PiiKind::Email, "20050101.foo@example.org"), (PiiKind::Email, "foo@example.org")]);

        // The order matters: replacing the shorter first gives another text.
        let shortest_first =
            text.replace("foo@example.org", "<email-pii>").replace("20050101.foo@example.org", "<email-pii>");
        assert_eq!(shortest_first, "Message-ID: <20050101.<email-pii>>\nFrom: <email-pii>\n");
        assert_ne!(shortest_first, out.text);
        assert_eq!(out.text, reference(text));
    }

    /// `str.replace` also hits occurrences that are not matches of the pattern.
    #[test]
    fn replacement_hits_occurrences_the_pattern_did_not_match() {
        // `\b` fails before `foo` in `éfoo@…` (é is a word character), so the pattern finds
        // only the second address; replacing it also rewrites the tail of the first.
        let text = "éfoo@example.org and foo@example.org";
        let out = Redactor::apertus().redact(text);
        assert_eq!(out.text, "é<email-pii> and <email-pii>");
        assert_eq!(out.matches[0].start, "é".len());
        // An IPv4 address inside a longer dotted number is still replaced.
        assert_eq!(redact("1.2.3.4.5 and 1.2.3.4"), "<ip-pii>.5 and <ip-pii>");
    }

    /// Later kinds see the text after the earlier kinds were replaced.
    #[test]
    fn kinds_apply_in_order_to_the_current_text() {
        // The e-mail address swallows the IPv4 address before the IP pattern runs.
        let out = Redactor::apertus().redact("root@10.0.0.1 and 10.0.0.1");
        assert_eq!(out.text, "<email-pii> and <ip-pii>");
        let kinds: Vec<_> = out.matches.iter().map(|m| (m.kind, m.start, m.end)).collect();
        assert_eq!(kinds, [(PiiKind::Email, 0, 13), (PiiKind::Ip, 18, 26)]);
    }

    /// Python's `\b` decides on Python's word characters, not on the `regex` crate's.
    #[test]
    fn word_boundaries_follow_python() {
        // U+0301 (a combining mark) is no word character for Python: `\b` holds before `f`.
        assert_eq!(redact("e\u{301}foo@example.org"), "e\u{301}<email-pii>");
        // `²` is one (isdigit): no `\b` before `f`, and no other start either.
        assert_eq!(redact("²foo@example.org"), "²foo@example.org");
        // `ZWJ` and `‿` are not; `Ⓐ` is not either (a symbol, though Other_Alphabetic).
        assert_eq!(redact("\u{200D}a@b.cd \u{203F}a@b.cd"), "\u{200D}<email-pii> \u{203F}<email-pii>");
        assert_eq!(redact("Ⓐfoo@example.org"), "Ⓐ<email-pii>");
        // A match may start with a non-word character when a word character precedes it.
        assert_eq!(redact("x-y@example.org"), "<email-pii>");
        assert_eq!(redact("é-y@example.org"), "é<email-pii>");
        assert_eq!(redact(" -y@example.org"), " -<email-pii>");
    }

    #[test]
    fn offsets_are_in_the_input_and_spans_hold_the_replaced_text() {
        let text = "ä a@b.cd, 1.2.3.4 und AB12 1234 5678 9012 3456 X9 ö a@b.cd";
        let out = Redactor::apertus().redact(text);
        let spans: Vec<_> = out.matches.iter().map(|m| (m.kind, &text[m.start..m.end])).collect();
        assert_eq!(
            spans,
            [
                (PiiKind::Email, "a@b.cd"),
                (PiiKind::Ip, "1.2.3.4"),
                (PiiKind::Iban, "AB12 1234 5678 9012 3456 X9"),
                (PiiKind::Email, "a@b.cd")
            ]
        );
        assert_eq!(out.text, reference(text));
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        #[rustfmt::skip]
        const ATOMS: &[&str] = &[
            "a", "Z", "x.y", "@", ".", "-", "_", " ", "\n", "[", "]", ":", "1", "25", "192.168.", "0.1", "é", "²",
            "\u{301}", "\u{200D}", "ж", "<", ">", "foo@example.org", "20050101.", "DE89", " 3704", " 0044 0532",
            " 0130 00", "AB", "12", "9", "<email-pii>", "+", "'",
        ];

        fn pii_like() -> impl Strategy<Value = String> {
            prop::collection::vec(prop::sample::select(ATOMS), 0..40).prop_map(|v| v.concat())
        }

        proptest! {
            // The pieces give what Python's str.replace on the whole string gives.
            #[test]
            fn pieces_equal_the_literal_algorithm(text in pii_like()) {
                let out = Redactor::apertus().redact(&text);
                let expected = reference(&text);
                prop_assert_eq!(out.text.as_ref(), expected.as_str());
            }

            #[test]
            fn any_text_is_redacted_without_panicking(text in any::<String>()) {
                let out = Redactor::apertus().redact(&text);
                let expected = reference(&text);
                prop_assert_eq!(out.text.as_ref(), expected.as_str());
            }

            #[test]
            fn spans_are_sorted_disjoint_and_on_char_boundaries(text in pii_like()) {
                let out = Redactor::apertus().redact(&text);
                let mut at = 0;
                for m in &out.matches {
                    prop_assert!(m.start >= at && m.start < m.end && m.end <= text.len());
                    prop_assert!(text.is_char_boundary(m.start) && text.is_char_boundary(m.end));
                    at = m.end;
                }
                let spliced = super::super::super::splice(&text, &out.matches);
                prop_assert_eq!(out.text.as_ref(), spliced.as_ref());
            }
        }
    }
}
