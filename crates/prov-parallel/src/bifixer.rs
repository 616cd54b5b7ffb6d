//! Bifixer 0.8.12's repair of a sentence pair and its pair hash, step for step:
//!
//! 1. a pair with an empty side is dropped;
//! 2. each side (unless it is longer than 5,000 characters, when it is only stripped of spaces
//!    and newlines) is repaired with ftfy (`fix_text_segment`, quotes left curled, ligatures
//!    kept, character width fixed outside CJK languages), the language's character table,
//!    Python's `html.unescape`, tabs and line breaks made spaces;
//! 3. HTML tags become spaces;
//! 4. punctuation and spaces are normalised ([`normalize`]);
//! 5. orthographic corrections and detokenisation are applied word by word
//!    ([`orthography`]);
//! 6. a pair with a side left empty (or only whitespace) is dropped; otherwise its hash is
//!    XXH64 of `source TAB target` in UTF-8, as sixteen hexadecimal digits.
//!
//! Bifixer's options map to [`Options`]. Not carried over: segmentation of long pairs (it needs
//! NLTK's Punkt models, which no registry serves) and `--aggressive_dedup` (it needs
//! Unidecode's tables); the stage refuses both by name.

use std::sync::LazyLock;

use regex::Regex;

use crate::rules::LanguageRules;

/// Which of Bifixer's steps run; each field is the opposite of Bifixer's `--ignore_*` flag, and
/// [`Options::default`] is Bifixer's default (everything on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools)] // one switch per Bifixer flag, as Bifixer has them
pub struct Options {
    /// ftfy and the character table (`--ignore_characters`).
    pub characters: bool,
    /// HTML tags removed (`--ignore_html`).
    pub html: bool,
    /// Punctuation and spaces normalised (`--ignore_normalization`).
    pub normalization: bool,
    /// Orthographic corrections (`--ignore_orthography`).
    pub orthography: bool,
    /// Detokenisation (`--ignore_detokenization`), which runs only with orthography.
    pub detokenization: bool,
    /// Pairs with an empty side dropped (`--ignore_empty`).
    pub drop_empty: bool,
    /// Sides over 5,000 characters left unrepaired (`--ignore_long`).
    pub skip_long: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            characters: true,
            html: true,
            normalization: true,
            orthography: true,
            detokenization: true,
            drop_empty: true,
            skip_long: true,
        }
    }
}

/// What Bifixer made of a pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The repaired pair and its hash.
    Kept {
        /// The repaired source side.
        source: String,
        /// The repaired target side.
        target: String,
        /// XXH64 of `source\ttarget`, sixteen lowercase hexadecimal digits.
        hash: String,
    },
    /// A side was empty before repair.
    EmptyInput(Side),
    /// A side was empty, or only whitespace, after repair.
    EmptyAfterRepair(Side),
}

/// One side of a pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The source side.
    Source,
    /// The target side.
    Target,
}

impl Side {
    /// Its name in ledgers.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Source => "source",
            Self::Target => "target",
        }
    }
}

/// Bifixer's longest side it repairs, in characters.
pub const LONG_SIDE: usize = 5000;

/// Bifixer's treatment of one pair.
#[must_use]
pub fn fix_pair(source: &str, target: &str, src: &LanguageRules, trg: &LanguageRules, options: Options) -> Outcome {
    if options.drop_empty && (source.is_empty() || target.is_empty()) {
        return Outcome::EmptyInput(if source.is_empty() { Side::Source } else { Side::Target });
    }
    let very_long = is_very_long(source, target, options);
    let source = fix_side(source, src, options, very_long);
    let target = fix_side(target, trg, options, very_long);
    // Bifixer drops a side that is empty, then one that is only whitespace; both are blank.
    let blank = |s: &str| prov_textfix::python::strip(s).is_empty();
    if options.drop_empty && (blank(&source) || blank(&target)) {
        return Outcome::EmptyAfterRepair(if blank(&source) { Side::Source } else { Side::Target });
    }
    let hash = pair_hash(&source, &target);
    Outcome::Kept { source, target, hash }
}

/// Bifixer's hash of a repaired pair.
#[must_use]
pub fn pair_hash(source: &str, target: &str) -> String {
    let mut bytes = Vec::with_capacity(source.len() + target.len() + 1);
    bytes.extend_from_slice(source.as_bytes());
    bytes.push(b'\t');
    bytes.extend_from_slice(target.as_bytes());
    format!("{:016x}", twox_hash::XxHash64::oneshot(0, &bytes))
}

fn fix_side(text: &str, rules: &LanguageRules, options: Options, very_long: bool) -> String {
    side_steps(text, rules, options, very_long).pop().map_or_else(String::new, |(_, t)| t)
}

/// One side through each of Bifixer's steps that runs: the step's name (`characters` or
/// `strip`, then `html`, `normalization`, `orthography`) and the text after it. The last is
/// the repaired side; `prov explain bifixer` shows them all.
#[must_use]
pub fn side_steps(text: &str, rules: &LanguageRules, options: Options, very_long: bool) -> Vec<(&'static str, String)> {
    let mut steps = vec![if options.characters && !very_long {
        ("characters", fix_characters(text, rules))
    } else {
        ("strip", text.trim_matches([' ', '\n']).to_owned())
    }];
    if very_long {
        return steps;
    }
    let last = |steps: &Vec<(&str, String)>| steps.last().map(|(_, t)| t.clone()).unwrap_or_default();
    if options.html {
        steps.push(("html", remove_html_tags(&last(&steps))));
    }
    if options.normalization {
        steps.push(("normalization", normalize(&last(&steps), rules)));
    }
    if options.orthography {
        let no_detok = std::collections::HashMap::new();
        let detok = if options.detokenization { &rules.detokenisation } else { &no_detok };
        steps.push(("orthography", orthography(&last(&steps), &rules.orthography, detok)));
    }
    steps
}

/// Whether a pair has a side over [`LONG_SIDE`] characters, which Bifixer leaves unrepaired
/// (unless `skip_long` is off).
#[must_use]
pub fn is_very_long(source: &str, target: &str, options: Options) -> bool {
    options.skip_long && (source.chars().count() > LONG_SIDE || target.chars().count() > LONG_SIDE)
}

/// Bifixer's `fix`: ftfy as Bifixer configures it, the character table, `html.unescape`, and
/// tabs and line breaks made spaces.
#[must_use]
pub fn fix_characters(text: &str, rules: &LanguageRules) -> String {
    let config = prov_textfix::Config {
        uncurl_quotes: false,
        fix_latin_ligatures: false,
        fix_character_width: !rules.cjk,
        ..prov_textfix::Config::default()
    };
    let repaired = prov_textfix::fix_text_segment(text, &config);
    let replaced = rules.characters.apply(&repaired);
    prov_textfix::html::unescape(&replaced).replace(['\r', '\n', '\t'], " ")
}

/// Bifixer's `remove_html_tags`: every `<...>` on one line (shortest first) becomes a space,
/// and the result is stripped of Python whitespace.
#[must_use]
pub fn remove_html_tags(text: &str) -> String {
    static TAG: LazyLock<Regex> = LazyLock::new(|| Regex::new("<.*?>").expect("a fixed pattern"));
    prov_textfix::python::strip(&TAG.replace_all(text, " ")).to_owned()
}

/// Bifixer's `normalize`: outside CJK languages the private-use and specials blocks
/// (U+E000..U+FFFF) removed; general punctuation spaces (U+2000..U+200F) and no-break spaces
/// made spaces; DEL and C1 controls removed; a doubled apostrophe in a contraction (`don''t`)
/// made single; runs of whitespace made one space before and after the punctuation table; an
/// entity written with spaces (`& # 39 ;`) closed up; spaces and newlines stripped.
#[must_use]
pub fn normalize(text: &str, rules: &LanguageRules) -> String {
    static QUOTES: LazyLock<Regex> = LazyLock::new(|| {
        // The `regex` module's `[[:alpha:]]` is Alphabetic and its `\W` the complement of the
        // Unicode word class, as in the `regex` crate.
        Regex::new(r"(\p{Alphabetic})''((?:s|S|t|T|m|M|d|D|re|RE|ll|LL|ve|VE|em|EM)\W)").expect("a fixed pattern")
    });
    static SPACES: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(&format!("{}+", prov_textfix::python::SPACE_CLASS)).expect("a fixed pattern"));
    static ENTITY: LazyLock<Regex> =
        LazyLock::new(|| Regex::new("([&][ ]*[#][ ]*)([0-9]{2,6})([ ]*[;])").expect("a fixed pattern"));
    let mut text: String = text
        .chars()
        .filter(|&c| rules.cjk || !('\u{E000}'..='\u{FFFF}').contains(&c))
        .filter_map(|c| match c {
            '\u{2000}'..='\u{200F}' | '\u{A0}' => Some(' '),
            '\u{7F}'..='\u{9F}' => None,
            other => Some(other),
        })
        .collect();
    text = QUOTES.replace_all(&text, "$1'$2").into_owned();
    text = SPACES.replace_all(&text, " ").into_owned();
    text = rules.punctuation.apply(&text);
    text = SPACES.replace_all(&text, " ").into_owned();
    text = ENTITY.replace_all(&text, "&#$2;").into_owned();
    text.trim_matches([' ', '\n']).to_owned()
}

/// A word (`w`: letters, `-` and `'`) or the run of other characters between words (`s`).
fn tokens(text: &str) -> Vec<(&str, bool)> {
    let is_word_char = |c: char| c == '-' || c == '\'' || c.is_alphabetic();
    let mut out = Vec::new();
    let mut start = 0;
    let mut word: Option<bool> = None;
    for (i, c) in text.char_indices() {
        let w = is_word_char(c);
        if word.is_some_and(|current| current != w) {
            out.push((&text[start..i], word.expect("set")));
            start = i;
        }
        word = Some(w);
    }
    if let Some(w) = word {
        out.push((&text[start..], w));
    }
    out
}

/// Bifixer's `ortho_detok_fix`: each word replaced by its orthographic correction (the case of
/// its first letter and of the rest kept, when the correction is lowercase), and the space
/// after a word of the detokenisation list removed when the listed word follows it.
#[must_use]
pub fn orthography<S: std::hash::BuildHasher, T: std::hash::BuildHasher>(
    text: &str,
    corrections: &std::collections::HashMap<String, String, S>,
    detok: &std::collections::HashMap<String, Vec<String>, T>,
) -> String {
    if corrections.is_empty() && detok.is_empty() {
        return text.to_owned();
    }
    let line = tokens(text);
    let mut out = String::with_capacity(text.len());
    let mut skip_space = 0;
    for (i, &(tok, is_word)) in line.iter().enumerate() {
        if is_word {
            match corrections.get(&tok.to_lowercase()) {
                Some(fix) if python_islower(fix) => out.push_str(&preserve_case(tok, fix)),
                _ => out.push_str(corrections.get(tok).map_or(tok, String::as_str)),
            }
            if let Some(next) = detok.get(tok)
                && line.len() > i + 2
                && next.first().is_some_and(|n| n == line[i + 2].0)
                && line[i + 1].0 == " "
            {
                // Bifixer checks only that a second space follows, not the second listed word.
                skip_space = if line.len() > i + 4 && next.len() == 2 && line[i + 3].0 == " " { 2 } else { 1 };
            }
        } else if skip_space == 0 {
            out.push_str(tok);
        } else {
            skip_space -= 1;
        }
    }
    out
}

/// Titlecase letters (general category Lt), which Python counts as neither upper nor lower.
fn is_titlecase(c: char) -> bool {
    matches!(c, '\u{1C5}' | '\u{1C8}' | '\u{1CB}' | '\u{1F2}' | '\u{1F88}'..='\u{1F8F}' | '\u{1F98}'..='\u{1F9F}' | '\u{1FA8}'..='\u{1FAF}' | '\u{1FBC}' | '\u{1FCC}' | '\u{1FFC}')
}

/// Python's `str.isupper()`: some cased character, and none lowercase or titlecase.
fn python_isupper(text: &str) -> bool {
    let mut cased = false;
    for c in text.chars() {
        if c.is_lowercase() || is_titlecase(c) {
            return false;
        }
        cased |= c.is_uppercase();
    }
    cased
}

/// Python's `str.islower()`: some cased character, and none uppercase or titlecase.
fn python_islower(text: &str) -> bool {
    let mut cased = false;
    for c in text.chars() {
        if c.is_uppercase() || is_titlecase(c) {
            return false;
        }
        cased |= c.is_lowercase();
    }
    cased
}

/// Bifixer's `preserve_case(orig, dest)`: `dest`'s first character uppercased when `orig`'s
/// is uppercase, and the rest of `dest` uppercased when the rest of `orig` is; a one-letter
/// `orig` keeps only `dest`'s first character, as Bifixer's does.
fn preserve_case(orig: &str, dest: &str) -> String {
    let mut dest_chars = dest.chars();
    let Some(first) = dest_chars.next() else { return String::new() };
    let rest_of_dest = dest_chars.as_str();
    let mut orig_chars = orig.chars();
    let orig_first = orig_chars.next().expect("a word is not empty");
    let rest_of_orig = orig_chars.as_str();
    let mut out: String =
        if python_isupper(&orig_first.to_string()) { first.to_uppercase().collect() } else { first.to_string() };
    if !rest_of_orig.is_empty() {
        if python_isupper(rest_of_orig) {
            out.push_str(&rest_of_dest.to_uppercase());
        } else {
            out.push_str(rest_of_dest);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_separators_alternate() {
        assert_eq!(
            tokens("l'homme, c'est--moi!"),
            vec![("l'homme", true), (", ", false), ("c'est--moi", true), ("!", false)]
        );
        assert_eq!(tokens(""), vec![]);
    }

    #[test]
    fn case_is_carried_over_as_bifixer_carries_it() {
        assert_eq!(preserve_case("Teh", "the"), "The");
        assert_eq!(preserve_case("TEH", "the"), "THE");
        assert_eq!(preserve_case("teh", "the"), "the");
        assert_eq!(preserve_case("T", "the"), "T");
        assert!(python_isupper("ABC1") && !python_isupper("ǅ") && !python_isupper("123"));
        assert!(python_islower("abc1") && !python_islower("aB"));
    }

    #[test]
    fn the_pair_hash_is_xxh64_of_source_tab_target() {
        // xxhash.xxh64("Hello\tHola").hexdigest() and of the empty pair "\t".
        assert_eq!(pair_hash("Hello", "Hola"), format!("{:016x}", twox_hash::XxHash64::oneshot(0, b"Hello\tHola")));
        assert_eq!(pair_hash("", "").len(), 16);
    }
}
