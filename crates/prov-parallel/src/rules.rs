//! Bifixer's rule tables as a Provenant input: the file `scripts/bifixer-rules.py` writes from
//! the installed `bifixer` package (format `bifixer-rules 1`, book: formats/bifixer-rules.md).
//!
//! Per language: whether Bifixer treats it as CJK, its character replacements and punctuation
//! normalisations (each an ordered list, since Bifixer matches them as a regular-expression
//! alternation where the first listed key wins at a position), its orthographic corrections
//! and its detokenisation list.

use std::collections::{BTreeMap, HashMap};

use aho_corasick::{AhoCorasick, MatchKind};
use serde::Deserialize;

/// The format line a rules file must carry.
pub const FORMAT: &str = "bifixer-rules 1";

/// Why a rules file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// Not JSON of the documented shape.
    #[error("the Bifixer rules are not a `{FORMAT}` file: {0}")]
    Shape(String),
    /// Another format line.
    #[error("the Bifixer rules say format `{0}`, not `{FORMAT}`")]
    Format(String),
    /// A table that cannot be matched.
    #[error("the Bifixer rules of `{language}` have an unusable {table} table: {reason}")]
    Table {
        /// The language.
        language: String,
        /// `characters` or `punctuation`.
        table: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A language the pairs need and the file lacks.
    #[error("the Bifixer rules have no language `{0}`")]
    MissingLanguage(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    format: String,
    bifixer: String,
    languages: BTreeMap<String, LanguageFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LanguageFile {
    cjk: bool,
    characters: Vec<(String, String)>,
    punctuation: Vec<(String, String)>,
    orthography: Vec<(String, String)>,
    detokenisation: Vec<(String, Vec<String>)>,
}

/// A table of literal replacements matched as Python matches `key1|key2|...`: at each position
/// the first key in the table's order that matches there, left to right without overlap.
pub struct Replacements {
    matcher: AhoCorasick,
    values: Vec<String>,
}

impl Replacements {
    fn new(pairs: Vec<(String, String)>, language: &str, table: &'static str) -> Result<Self, RulesError> {
        if let Some((key, _)) = pairs.iter().find(|(k, _)| k.is_empty()) {
            return Err(RulesError::Table {
                language: language.to_owned(),
                table,
                reason: format!("an empty key {key:?}"),
            });
        }
        let (keys, values): (Vec<String>, Vec<String>) = pairs.into_iter().unzip();
        let matcher = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(&keys)
            .map_err(|e| RulesError::Table { language: language.to_owned(), table, reason: e.to_string() })?;
        Ok(Self { matcher, values })
    }

    /// `text` with every match replaced by its key's value.
    #[must_use]
    pub fn apply(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for m in self.matcher.find_iter(text) {
            out.push_str(&text[last..m.start()]);
            out.push_str(&self.values[m.pattern().as_usize()]);
            last = m.end();
        }
        out.push_str(&text[last..]);
        out
    }
}

/// One language's rules.
pub struct LanguageRules {
    /// Bifixer's CJK languages keep full-width forms and the private-use and specials blocks.
    pub cjk: bool,
    /// Mojibake fragments, HTML entities and homoglyphs replaced after ftfy.
    pub characters: Replacements,
    /// Spaces before punctuation (and a few sequences) normalised.
    pub punctuation: Replacements,
    /// Misspelt words (lowercase keys) and their corrections.
    pub orthography: HashMap<String, String>,
    /// Words whose following space Bifixer removes when the next word is the listed one.
    pub detokenisation: HashMap<String, Vec<String>>,
}

/// Every language's rules, and the Bifixer version they came from.
pub struct Rules {
    /// The `bifixer` package version the tables were read from.
    pub bifixer: String,
    languages: BTreeMap<String, LanguageRules>,
}

impl Rules {
    /// Reads a rules file.
    ///
    /// # Errors
    ///
    /// [`RulesError`] when the file is not of the documented shape or a table cannot be used.
    pub fn parse(bytes: &[u8]) -> Result<Self, RulesError> {
        let file: File = serde_json::from_slice(bytes).map_err(|e| RulesError::Shape(e.to_string()))?;
        if file.format != FORMAT {
            return Err(RulesError::Format(file.format));
        }
        let mut languages = BTreeMap::new();
        for (code, lang) in file.languages {
            let rules = LanguageRules {
                cjk: lang.cjk,
                characters: Replacements::new(lang.characters, &code, "characters")?,
                punctuation: Replacements::new(lang.punctuation, &code, "punctuation")?,
                orthography: lang.orthography.into_iter().collect(),
                detokenisation: lang.detokenisation.into_iter().collect(),
            };
            languages.insert(code, rules);
        }
        Ok(Self { bifixer: file.bifixer, languages })
    }

    /// The rules of `language` (Bifixer lowercases the code it is given).
    ///
    /// # Errors
    ///
    /// [`RulesError::MissingLanguage`] when the file has none.
    pub fn language(&self, language: &str) -> Result<&LanguageRules, RulesError> {
        let code = language.to_lowercase();
        self.languages.get(&code).ok_or(RulesError::MissingLanguage(code))
    }

    /// The languages the file has rules for.
    pub fn languages(&self) -> impl Iterator<Item = &str> {
        self.languages.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_listed_key_wins_at_a_position() {
        let table = Replacements::new(
            vec![("Ã".into(), "X".into()), ("Ã©".into(), "é".into()), ("&amp;".into(), "&".into())],
            "xx",
            "characters",
        )
        .unwrap();
        // Python's `(\Ã|\Ã©|\&amp;)` takes `Ã` first, as this does.
        assert_eq!(table.apply("cafÃ© &amp; Ã"), "cafX© & X");
    }

    #[test]
    fn malformed_files_are_refused() {
        assert!(matches!(Rules::parse(b"{}"), Err(RulesError::Shape(_))));
        assert!(matches!(
            Rules::parse(br#"{"format":"other","bifixer":"0","languages":{}}"#),
            Err(RulesError::Format(_))
        ));
        let empty_key = br#"{"format":"bifixer-rules 1","bifixer":"0","languages":{"en":{"cjk":false,"characters":[["","x"]],"punctuation":[],"orthography":[],"detokenisation":[]}}}"#;
        assert!(matches!(Rules::parse(empty_key), Err(RulesError::Table { .. })));
        let rules = Rules::parse(br#"{"format":"bifixer-rules 1","bifixer":"0","languages":{}}"#).unwrap();
        assert!(matches!(rules.language("EN"), Err(RulesError::MissingLanguage(code)) if code == "en"));
    }
}
