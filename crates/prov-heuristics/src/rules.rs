//! The rules of EuroLLM's heuristic filter (EuroLLM-22B report, §2.3), on one document's text.
//!
//! The report names the rules and their thresholds but not the units they count. These are
//! the definitions used here (the book's "The EuroLLM recipe" gives the reasons):
//!
//! - A **paragraph** is a line: the text split at every `\n` (U+000A), as `CCNet` splits
//!   documents into paragraphs and as Common Crawl's extracted text puts one block element per
//!   line. A text with `n` newlines has `n + 1` paragraphs; what is kept is the kept
//!   paragraphs joined by `\n`.
//! - A **character** is a Unicode scalar value (Python's `len`).
//! - A **word** is a maximal run of characters that are not Unicode `White_Space` (Python's
//!   `str.split()` but for U+001C..U+001F, which Python also splits at).
//! - A **letter** (an "alphabetic character") is a character with the Unicode `Alphabetic`
//!   property; an **uppercase character** is a letter with the `Uppercase` property. The
//!   uppercase fraction is uppercase letters over letters (0 for a paragraph without letters),
//!   so that digits, punctuation and spacing, which the other two rules cover, do not dilute it.
//! - The **symbol-to-word ratio** is Gopher's (Rae et al. 2021, whose rule the report's wording
//!   follows): for the hash `#` and for the ellipsis (`...` counted without overlap, and `…`)
//!   separately, occurrences over words; a paragraph exceeds it when either ratio does.
//! - A paragraph without words has no ratios and is never removed by them.
//!
//! A document is removed as a whole when its text contains `lorem ipsum` (ASCII letters in any
//! case, one or more `White_Space` characters between the two words), the word `javascript`
//! (ASCII letters in any case, not preceded or followed by a letter or digit, so `JavaScript:`
//! counts and `javascripts` does not) or a curly bracket (`{` or `}`); these page rules read the
//! text as it came in. Then the paragraph rules remove paragraphs, checked in the order
//! uppercase, symbol ratio, words without letters (the first that fires names the removal), and
//! last a document whose remaining text has fewer than `min_chars` characters is removed.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The thresholds of the rules, with the report's values as defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Thresholds {
    /// Documents with fewer characters than this (after paragraph removal) are removed.
    #[serde(default = "default_min_chars")]
    pub min_chars: u64,
    /// Remove documents containing "lorem ipsum".
    #[serde(default = "yes")]
    pub lorem_ipsum: bool,
    /// Remove documents containing the word "javascript".
    #[serde(default = "yes")]
    pub javascript: bool,
    /// Remove documents containing a curly bracket.
    #[serde(default = "yes")]
    pub curly_brackets: bool,
    /// Paragraphs whose uppercase letters over letters exceed this are removed.
    #[serde(default = "default_max_uppercase_fraction")]
    pub max_uppercase_fraction: f64,
    /// Paragraphs whose hashes or ellipses over words exceed this are removed.
    #[serde(default = "default_max_symbol_word_ratio")]
    pub max_symbol_word_ratio: f64,
    /// Paragraphs whose words without a letter over words exceed this are removed.
    #[serde(default = "default_max_non_alpha_word_fraction")]
    pub max_non_alpha_word_fraction: f64,
}

fn default_min_chars() -> u64 {
    200
}
fn yes() -> bool {
    true
}
fn default_max_uppercase_fraction() -> f64 {
    0.4
}
fn default_max_symbol_word_ratio() -> f64 {
    0.1
}
fn default_max_non_alpha_word_fraction() -> f64 {
    0.2
}

impl Default for Thresholds {
    /// The report's values.
    fn default() -> Self {
        Self {
            min_chars: default_min_chars(),
            lorem_ipsum: true,
            javascript: true,
            curly_brackets: true,
            max_uppercase_fraction: default_max_uppercase_fraction(),
            max_symbol_word_ratio: default_max_symbol_word_ratio(),
            max_non_alpha_word_fraction: default_max_non_alpha_word_fraction(),
        }
    }
}

/// A rule that removes a whole document for what its text contains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PageRule {
    /// "lorem ipsum".
    LoremIpsum,
    /// The word "javascript".
    Javascript,
    /// `{` or `}`.
    CurlyBracket,
}

impl PageRule {
    /// The rule's name in ledgers (after `heuristics:`).
    pub fn name(self) -> &'static str {
        match self {
            Self::LoremIpsum => "lorem-ipsum",
            Self::Javascript => "javascript",
            Self::CurlyBracket => "curly-bracket",
        }
    }
}

/// A rule that removes one paragraph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ParagraphRule {
    /// Too large a fraction of its letters are uppercase.
    Uppercase,
    /// Too many hashes or ellipses per word.
    SymbolRatio,
    /// Too large a fraction of its words have no letter.
    NonAlphaWords,
}

impl ParagraphRule {
    /// The rule's name in ledgers and statistics.
    pub fn name(self) -> &'static str {
        match self {
            Self::Uppercase => "uppercase",
            Self::SymbolRatio => "symbol-ratio",
            Self::NonAlphaWords => "non-alpha-words",
        }
    }
}

/// What the paragraph rules count in one paragraph.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Measures {
    /// Words (runs of non-`White_Space` characters).
    pub words: u64,
    /// Words without a letter.
    pub non_alpha_words: u64,
    /// Letters (`Alphabetic` characters).
    pub letters: u64,
    /// Letters that are `Uppercase`.
    pub uppercase: u64,
    /// `#` characters.
    pub hashes: u64,
    /// `...` (counted without overlap) and `…`.
    pub ellipses: u64,
}

impl Measures {
    /// Counts one paragraph in one pass over its characters.
    pub fn of(paragraph: &str) -> Self {
        let mut m = Self::default();
        let (mut in_word, mut word_has_letter, mut dots) = (false, false, 0u64);
        for c in paragraph.chars() {
            if c != '.' {
                m.ellipses += dots / 3;
                dots = 0;
            }
            if c.is_whitespace() {
                if in_word {
                    m.end_word(word_has_letter);
                    in_word = false;
                }
                continue;
            }
            if !in_word {
                (in_word, word_has_letter) = (true, false);
            }
            if c.is_alphabetic() {
                m.letters += 1;
                word_has_letter = true;
                if c.is_uppercase() {
                    m.uppercase += 1;
                }
            }
            match c {
                '#' => m.hashes += 1,
                '…' => m.ellipses += 1,
                '.' => dots += 1,
                _ => {}
            }
        }
        m.ellipses += dots / 3;
        if in_word {
            m.end_word(word_has_letter);
        }
        m
    }

    fn end_word(&mut self, has_letter: bool) {
        self.words += 1;
        if !has_letter {
            self.non_alpha_words += 1;
        }
    }

    /// Uppercase letters over letters; 0 without letters.
    pub fn uppercase_fraction(&self) -> f64 {
        if self.letters == 0 { 0.0 } else { self.uppercase as f64 / self.letters as f64 }
    }

    /// The paragraph rule that removes this paragraph, if any, in the order the rules are
    /// checked.
    pub fn rule(&self, t: &Thresholds) -> Option<ParagraphRule> {
        if self.uppercase_fraction() > t.max_uppercase_fraction {
            return Some(ParagraphRule::Uppercase);
        }
        if self.words == 0 {
            return None;
        }
        let words = self.words as f64;
        if self.hashes as f64 / words > t.max_symbol_word_ratio
            || self.ellipses as f64 / words > t.max_symbol_word_ratio
        {
            return Some(ParagraphRule::SymbolRatio);
        }
        if self.non_alpha_words as f64 / words > t.max_non_alpha_word_fraction {
            return Some(ParagraphRule::NonAlphaWords);
        }
        None
    }
}

/// Where a page rule matched: the paragraph (0-based) and the matched text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PageMatch {
    /// The rule (the ledger row's rule names it; not repeated in the evidence).
    #[serde(skip)]
    pub rule: PageRule,
    /// The paragraph of the first match.
    pub paragraph: usize,
    /// The text matched (as written: `JavaScript`, `Lorem  Ipsum`, `{`).
    #[serde(rename = "match")]
    pub matched: String,
}

/// What the rules decided for one document.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A page rule matched: the document is removed.
    Page(PageMatch),
    /// The paragraph rules ran; `text` is what is left.
    Paragraphs {
        /// The remaining text (the input when nothing was removed).
        text: String,
        /// The input's paragraph count.
        paragraphs: usize,
        /// The removed paragraphs (0-based) of each rule that removed any, ascending.
        removed: BTreeMap<ParagraphRule, Vec<usize>>,
        /// The remaining text's characters.
        chars: u64,
        /// Fewer characters than `min_chars`: the document is removed.
        too_short: bool,
    },
}

impl Outcome {
    /// The ledger's rule (after `heuristics:`) and evidence for this outcome: a page rule's
    /// paragraph and match; for the paragraph rules, the paragraph count, the removed
    /// paragraphs per rule and the characters left (no evidence when nothing was removed and
    /// the document is long enough).
    pub fn ledger_entry(&self) -> (&'static str, Option<Map<String, Value>>) {
        match self {
            Self::Page(m) => (m.rule.name(), prov_dataset::evidence(json!(m))),
            Self::Paragraphs { paragraphs, removed, chars, too_short, .. } => {
                let rule = match (too_short, removed.is_empty()) {
                    (true, _) => "too-short",
                    (false, true) => return ("kept", None),
                    (false, false) => "paragraphs",
                };
                let by_rule: Map<String, Value> =
                    removed.iter().map(|(r, at)| (r.name().to_owned(), json!(at))).collect();
                (rule, prov_dataset::evidence(json!({ "paragraphs": paragraphs, "removed": by_rule, "chars": chars })))
            }
        }
    }

    /// The ledger's decision: a page rule or too little text left removes the document,
    /// removed paragraphs modify it, and otherwise it is kept.
    pub fn decision(&self) -> prov_dataset::LedgerDecision {
        use prov_dataset::LedgerDecision::{Kept, Modified, Removed};
        match self {
            Self::Page(_) | Self::Paragraphs { too_short: true, .. } => Removed,
            Self::Paragraphs { removed, .. } if removed.is_empty() => Kept,
            Self::Paragraphs { .. } => Modified,
        }
    }
}

/// `lorem ipsum` in any ASCII case, with any `White_Space` run between.
static LOREM_IPSUM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i-u:lorem)\s+(?i-u:ipsum)").expect("a valid pattern"));
/// `javascript` in any ASCII case; that it stands as a word is checked around the match.
static JAVASCRIPT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?i-u:javascript)").expect("a valid pattern"));

/// The paragraph that byte `at` of `text` is in.
fn paragraph_at(text: &str, at: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_bytes()[..at]).count()
}

/// The first page rule that matches `text`, checked in the order lorem ipsum, javascript,
/// curly bracket.
pub fn page_rule(text: &str, t: &Thresholds) -> Option<PageMatch> {
    let found = |rule, start: usize, end: usize| PageMatch {
        rule,
        paragraph: paragraph_at(text, start),
        matched: text[start..end].to_owned(),
    };
    if t.lorem_ipsum
        && let Some(m) = LOREM_IPSUM.find(text)
    {
        return Some(found(PageRule::LoremIpsum, m.start(), m.end()));
    }
    if t.javascript {
        let letter_or_digit = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
        let mut from = 0;
        while let Some(m) = JAVASCRIPT.find_at(text, from) {
            if !letter_or_digit(text[..m.start()].chars().next_back())
                && !letter_or_digit(text[m.end()..].chars().next())
            {
                return Some(found(PageRule::Javascript, m.start(), m.end()));
            }
            // The match is ASCII: one byte on is a character boundary.
            from = m.start() + 1;
        }
    }
    if t.curly_brackets
        && let Some(at) = text.find(['{', '}'])
    {
        return Some(found(PageRule::CurlyBracket, at, at + 1));
    }
    None
}

/// Applies the rules to one document's text.
pub fn assess(text: &str, t: &Thresholds) -> Outcome {
    if let Some(m) = page_rule(text, t) {
        return Outcome::Page(m);
    }
    let mut removed: BTreeMap<ParagraphRule, Vec<usize>> = BTreeMap::new();
    let mut kept: Vec<&str> = Vec::new();
    let mut paragraphs = 0;
    for (i, p) in text.split('\n').enumerate() {
        paragraphs += 1;
        match Measures::of(p).rule(t) {
            Some(rule) => removed.entry(rule).or_default().push(i),
            None => kept.push(p),
        }
    }
    let text = if removed.is_empty() { text.to_owned() } else { kept.join("\n") };
    let chars = text.chars().count() as u64;
    Outcome::Paragraphs { too_short: chars < t.min_chars, text, paragraphs, removed, chars }
}

/// The Unicode version whose `Alphabetic`, `White_Space` and case properties (Rust's `char`
/// methods) the rules count with. A toolchain with other tables counts some texts differently:
/// the test beside it fails then, and the `heuristics` stage's version must be raised.
pub const UNICODE_VERSION: (u8, u8, u8) = (17, 0, 0);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unicode_tables_are_the_ones_the_stage_was_versioned_with() {
        assert_eq!(char::UNICODE_VERSION, UNICODE_VERSION, "raise the heuristics stage's version");
    }

    fn rule_of(p: &str) -> Option<ParagraphRule> {
        Measures::of(p).rule(&Thresholds::default())
    }

    /// The report's paragraph thresholds, each just below and just above its limit.
    #[test]
    fn paragraph_rules_fire_only_past_their_thresholds() {
        // 4 of 10 letters uppercase is 40%: not above.
        assert_eq!(rule_of("ABCDefghij"), None);
        assert_eq!(rule_of("ABCDEfghij"), Some(ParagraphRule::Uppercase));
        // One hash in ten words is 0.1: not above; in nine it is.
        let ten = "one two three four five six seven eight nine #ten";
        assert_eq!(rule_of(ten), None);
        assert_eq!(rule_of("one two three four five six seven eight #nine"), Some(ParagraphRule::SymbolRatio));
        // Ellipses count alike, `...` without overlap and `…`.
        assert_eq!(rule_of("one two three four five six seven eight nine ten..."), None);
        assert_eq!(rule_of("one two three four five six seven eight nine... ten…"), Some(ParagraphRule::SymbolRatio));
        // 2 of 10 words without a letter is 0.2: not above; 3 of 10 is.
        assert_eq!(rule_of("1 2 three four five six seven eight nine ten"), None);
        assert_eq!(rule_of("1 2 3 four five six seven eight nine ten"), Some(ParagraphRule::NonAlphaWords));
    }

    #[test]
    fn measures_follow_the_definitions() {
        let m = Measures::of("  Ça va... 42 —  #tag ....... …\tÉTÉ\u{3000}x");
        // Words: Ça va... 42 — #tag ....... … ÉTÉ x (U+3000 is White_Space).
        assert_eq!(m.words, 9);
        // 42, —, ......., … have no letter.
        assert_eq!(m.non_alpha_words, 4);
        assert_eq!((m.letters, m.uppercase), (11, 4));
        assert_eq!(m.hashes, 1);
        // `...` once, `.......` twice, `…` once.
        assert_eq!(m.ellipses, 4);
        // Letters of any script count, and case only where the script has it.
        let m = Measures::of("Ελληνικά Русский हिन्दी 中文");
        assert_eq!((m.words, m.non_alpha_words, m.uppercase), (4, 0, 2));
        assert_eq!(Measures::of(""), Measures::default());
        assert_eq!(rule_of("   \t"), None);
    }

    #[test]
    fn page_rules_match_as_defined() {
        let t = Thresholds::default();
        let rule = |text: &str| page_rule(text, &t).map(|m| (m.rule, m.paragraph, m.matched));
        assert_eq!(rule("a\nb Lorem \n IPSUM dolor"), Some((PageRule::LoremIpsum, 1, "Lorem \n IPSUM".into())));
        assert_eq!(rule("loremipsum"), None);
        assert_eq!(rule("Enable JavaScript: now"), Some((PageRule::Javascript, 0, "JavaScript".into())));
        assert_eq!(rule("javascripts and nojavascript and javascript2"), None);
        assert_eq!(rule("nojavascript then\n(javascript)"), Some((PageRule::Javascript, 1, "javascript".into())));
        // The long s folds to `s` in Unicode case folding, not in ASCII.
        assert_eq!(rule("java\u{17F}cript"), None);
        assert_eq!(rule("x\ny\nz }"), Some((PageRule::CurlyBracket, 2, "}".into())));
        assert_eq!(rule("full width \u{FF5B} is not one"), None);
        let off = Thresholds { lorem_ipsum: false, javascript: false, curly_brackets: false, ..Thresholds::default() };
        assert_eq!(page_rule("lorem ipsum javascript {}", &off), None);
    }

    #[test]
    fn assess_removes_paragraphs_then_checks_the_length() {
        let t = Thresholds { min_chars: 10, ..Thresholds::default() };
        let Outcome::Paragraphs { text, paragraphs, removed, chars, too_short } =
            assess("A fine line of text.\nTHIS IS SHOUTING\n\n### ## #\nend", &t)
        else {
            panic!("no page rule applies")
        };
        assert_eq!(text, "A fine line of text.\n\nend");
        assert_eq!(paragraphs, 5);
        assert_eq!(
            removed,
            BTreeMap::from([(ParagraphRule::Uppercase, vec![1]), (ParagraphRule::SymbolRatio, vec![3])])
        );
        assert_eq!((chars, too_short), (25, false));
        // What is left is too short; the input was long enough.
        let Outcome::Paragraphs { text, too_short, .. } = assess("SHOUTING LOUDLY HERE\nok", &t) else { panic!() };
        assert_eq!((text.as_str(), too_short), ("ok", true));
        // Nothing removed: the text is the input, byte for byte.
        let Outcome::Paragraphs { text, removed, .. } = assess("one\r\ntwo\n", &t) else { panic!() };
        assert!(removed.is_empty());
        assert_eq!(text, "one\r\ntwo\n");
        assert!(matches!(assess("a {b} SHOUT", &t), Outcome::Page(PageMatch { rule: PageRule::CurlyBracket, .. })));
    }

    #[test]
    fn the_defaults_are_the_reports() {
        let t: Thresholds = serde_json::from_str("{}").unwrap();
        assert_eq!(t, Thresholds::default());
        assert_eq!(t.min_chars, 200);
        assert_eq!((t.max_uppercase_fraction, t.max_symbol_word_ratio, t.max_non_alpha_word_fraction), (0.4, 0.1, 0.2));
        assert!(t.lorem_ipsum && t.javascript && t.curly_brackets);
    }

    proptest::proptest! {
        /// Splitting and joining by `\n` loses nothing: without a removal the text is the
        /// input; with removals, the kept text is exactly the kept paragraphs.
        #[test]
        fn kept_text_is_the_kept_paragraphs(text in "[a-zA-Z #.\n1 ]{0,200}") {
            let t = Thresholds { curly_brackets: false, ..Thresholds::default() };
            if let Outcome::Paragraphs { text: kept, removed, paragraphs, .. } = assess(&text, &t) {
                let parts: Vec<&str> = text.split('\n').collect();
                proptest::prop_assert_eq!(paragraphs, parts.len());
                let dropped: Vec<usize> = removed.values().flatten().copied().collect();
                let expect: Vec<&str> =
                    parts.iter().enumerate().filter(|(i, _)| !dropped.contains(i)).map(|(_, p)| *p).collect();
                proptest::prop_assert_eq!(kept, expect.join("\n"));
            }
        }
    }
}
