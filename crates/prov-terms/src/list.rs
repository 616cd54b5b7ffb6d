//! A term list and the occurrences of its terms in a text.

use std::collections::HashMap;

use aho_corasick::{AhoCorasick, MatchKind};
use serde::{Deserialize, Serialize};

/// Whether an occurrence must stand alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MatchMode {
    /// The characters just before and after it (where there are any) are not alphanumeric.
    Word,
    /// Any occurrence.
    Substring,
}

/// Whether text and terms are compared as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseMode {
    /// Both lowercased first (`str::to_lowercase`).
    Insensitive,
    /// As written.
    Sensitive,
}

/// The occurrences of a list's terms in one text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scan {
    /// Every occurrence that counts.
    pub matches: u64,
    /// The distinct terms among them.
    pub distinct: u64,
    /// The term of the first occurrence (lowest position; at one position the longest), as
    /// the list spells it.
    pub first: Option<String>,
}

/// A list of terms, with the automaton that finds them.
#[derive(Debug, Clone)]
pub struct TermList {
    /// The terms as the list spells them, in list order.
    terms: Vec<String>,
    automaton: AhoCorasick,
    matching: MatchMode,
    case: CaseMode,
}

impl TermList {
    /// Reads a list: UTF-8 text, one term per line; a trailing `\r` is dropped, empty lines and
    /// lines starting with `#` are skipped, nothing else is trimmed.
    ///
    /// # Errors
    ///
    /// A message naming the line of a repeated term (after lowercasing, when case-insensitive),
    /// or saying the list is empty.
    pub fn parse(text: &str, matching: MatchMode, case: CaseMode) -> Result<Self, String> {
        if text.starts_with('\u{feff}') {
            return Err("the list starts with a byte order mark, which would become part of its first term".into());
        }
        let mut terms = Vec::new();
        let mut keys = Vec::new();
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (i, line) in text.split('\n').enumerate() {
            let term = line.strip_suffix('\r').unwrap_or(line);
            if term.is_empty() || term.starts_with('#') {
                continue;
            }
            let key = fold(term, case);
            if let Some(first) = seen.insert(key.clone(), i + 1) {
                return Err(format!("line {}: `{term}` repeats the term of line {first}", i + 1));
            }
            terms.push(term.to_owned());
            keys.push(key);
        }
        if terms.is_empty() {
            return Err("the list holds no term (lines that are empty or start with `#` are skipped)".into());
        }
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .build(&keys)
            .map_err(|e| format!("the terms cannot be searched: {e}"))?;
        Ok(Self { terms, automaton, matching, case })
    }

    /// The number of terms.
    pub fn len(&self) -> usize {
        self.terms.len()
    }

    /// Whether the list is empty (never, once parsed).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The occurrences of the terms in `text` (the book's "Occurrences").
    pub fn scan(&self, text: &str) -> Scan {
        let folded = fold(text, self.case);
        let haystack = folded.as_ref();
        let mut scan = Scan::default();
        let mut seen: Vec<usize> = Vec::new();
        // (position, -length, term) of the first occurrence so far.
        let mut first: Option<(usize, std::cmp::Reverse<usize>, usize)> = None;
        for m in self.automaton.find_overlapping_iter(haystack) {
            let (start, end) = (m.start(), m.end());
            if self.matching == MatchMode::Word
                && !(stands_alone_before(haystack, start) && stands_alone_after(haystack, end))
            {
                continue;
            }
            let term = m.pattern().as_usize();
            scan.matches += 1;
            seen.push(term);
            let key = (start, std::cmp::Reverse(end - start), term);
            if first.is_none_or(|f| key < f) {
                first = Some(key);
            }
        }
        seen.sort_unstable();
        seen.dedup();
        scan.distinct = seen.len() as u64;
        scan.first = first.map(|(_, _, term)| self.terms[term].clone());
        scan
    }
}

/// `text` lowercased when case-insensitive.
fn fold(text: &str, case: CaseMode) -> String {
    match case {
        CaseMode::Insensitive => text.to_lowercase(),
        CaseMode::Sensitive => text.to_owned(),
    }
}

fn stands_alone_before(text: &str, start: usize) -> bool {
    text[..start].chars().next_back().is_none_or(|c| !c.is_alphanumeric())
}

fn stands_alone_after(text: &str, end: usize) -> bool {
    text[end..].chars().next().is_none_or(|c| !c.is_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(text: &str, matching: MatchMode, case: CaseMode) -> TermList {
        TermList::parse(text, matching, case).unwrap()
    }

    #[test]
    fn lines_are_terms_and_repeats_are_refused() {
        let l = list("# a comment\nfoo\r\n\n bar \nBaz", MatchMode::Substring, CaseMode::Sensitive);
        assert_eq!(l.terms, ["foo", " bar ", "Baz"]);
        let err = TermList::parse("foo\nbar\nFOO", MatchMode::Word, CaseMode::Insensitive).unwrap_err();
        assert!(err.contains("line 3") && err.contains("line 1"), "{err}");
        assert!(TermList::parse("foo\nFOO", MatchMode::Word, CaseMode::Sensitive).is_ok());
        assert!(TermList::parse("# only\n\n", MatchMode::Word, CaseMode::Sensitive).unwrap_err().contains("no term"));
        assert!(
            TermList::parse("\u{feff}foo", MatchMode::Word, CaseMode::Sensitive).unwrap_err().contains("byte order")
        );
    }

    #[test]
    fn every_occurrence_counts_overlaps_included() {
        let l = list("aa\naaa", MatchMode::Substring, CaseMode::Sensitive);
        let s = l.scan("aaaa");
        // aa at 0, 1, 2; aaa at 0, 1.
        assert_eq!((s.matches, s.distinct, s.first.as_deref()), (5, 2, Some("aaa")));
        assert_eq!(l.scan("bab"), Scan::default());
    }

    #[test]
    fn words_stand_alone_and_case_folds() {
        let l = list("Ass\nbad word", MatchMode::Word, CaseMode::Insensitive);
        assert_eq!(l.scan("An ASS. Assess, glass, ass1, ass!").matches, 2);
        assert_eq!(l.scan("a bad words list").matches, 0, "followed by a letter");
        assert_eq!(l.scan("bad word").first.as_deref(), Some("bad word"));
        // A combining mark is alphabetic: the word does not stand alone.
        assert_eq!(l.scan("ass\u{0903}").matches, 0);
        let sensitive = list("Ass", MatchMode::Word, CaseMode::Sensitive);
        assert_eq!(sensitive.scan("ass Ass").matches, 1);
    }

    #[test]
    fn symbols_match_anywhere() {
        let l = list("∑\n\\frac{\n≤", MatchMode::Substring, CaseMode::Sensitive);
        let s = l.scan("x≤y and ∑i \\frac{1}{2}∑");
        assert_eq!((s.matches, s.distinct, s.first.as_deref()), (4, 3, Some("≤")));
    }
}
