//! `term-filter`: removes the documents that hold a pinned list's terms, or keeps only them,
//! shard-parallel, with a ledger row for every document.
//!
//! | rule | decision | when |
//! | --- | --- | --- |
//! | `term-filter:clean` | kept | `mode: remove`, fewer than `min_matches` occurrences |
//! | `term-filter:matched` | removed | `mode: remove`, at least `min_matches` |
//! | `term-filter:matched` | kept | `mode: keep`, at least `min_matches` |
//! | `term-filter:unmatched` | removed | `mode: keep`, fewer than `min_matches` |
//! | `term-filter:no-list` | kept with `mode: remove`, removed with `mode: keep` | the lists are per language and the document's has none |
//!
//! The `terms` input is one list for every document, or a directory of lists named
//! `<language>.txt`, each for the documents of that primary language subtag ([`TermLists`]).
//! A document with an occurrence has the evidence `{"term", "matches", "distinct"}`
//! ([`crate::Scan`]); one without a list, `{"language"}`. Statistics besides every filter's:
//! `terms`, the number of terms of each list (`*` for a single list).

use std::collections::BTreeMap;

use prov_dataset::{Document, LedgerDecision};
use prov_exec::{
    ConfigError, InputSpec, MapResultText, MapResults, Stage, StageContext, StageError, StageOutput, parse_params,
};
use prov_manifest::{Determinism, OutputType};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::list::{CaseMode, MatchMode, Scan, TermList};

/// The lists of a stage: one for every document, or one per primary language subtag.
#[derive(Debug, Clone)]
pub enum TermLists {
    /// One list.
    Single(TermList),
    /// A list per language (`de` for `de.txt`).
    PerLanguage(BTreeMap<String, TermList>),
}

impl TermLists {
    /// The list a document is matched against, or the language it has none for.
    pub fn for_document(&self, doc: &Document) -> Result<&TermList, String> {
        match self {
            Self::Single(list) => Ok(list),
            Self::PerLanguage(lists) => {
                let language = doc.primary_language();
                lists.get(&language).ok_or(language)
            }
        }
    }

    /// The number of terms of each list, `*` naming a single list.
    pub fn sizes(&self) -> BTreeMap<String, usize> {
        match self {
            Self::Single(list) => BTreeMap::from([("*".to_owned(), list.len())]),
            Self::PerLanguage(lists) => lists.iter().map(|(l, list)| (l.clone(), list.len())).collect(),
        }
    }
}

/// Which documents a term filter keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FilterMode {
    /// Those that do not match (a profanity list).
    Remove,
    /// Only those that match (math tags and symbols).
    Keep,
}

/// The resolved configuration of a `term-filter` stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TermFilterConfig {
    /// Which documents are kept.
    #[serde(default = "default_mode")]
    pub mode: FilterMode,
    /// Whether occurrences must stand alone.
    #[serde(default = "default_match", rename = "match")]
    pub matching: MatchMode,
    /// Whether case is folded.
    #[serde(default = "default_case")]
    pub case: CaseMode,
    /// The occurrences that make a document match.
    #[serde(default = "default_min_matches")]
    pub min_matches: u64,
}

fn default_mode() -> FilterMode {
    FilterMode::Remove
}
fn default_match() -> MatchMode {
    MatchMode::Word
}
fn default_case() -> CaseMode {
    CaseMode::Insensitive
}
fn default_min_matches() -> u64 {
    1
}

impl TermFilterConfig {
    /// The ledger decision, rule and evidence for a document with `scan`.
    pub fn decide(&self, scan: &Scan) -> (LedgerDecision, &'static str, Option<Map<String, Value>>) {
        let matched = scan.matches >= self.min_matches;
        let (decision, rule) = match (self.mode, matched) {
            (FilterMode::Remove, false) => (LedgerDecision::Kept, "term-filter:clean"),
            (FilterMode::Remove, true) => (LedgerDecision::Removed, "term-filter:matched"),
            (FilterMode::Keep, true) => (LedgerDecision::Kept, "term-filter:matched"),
            (FilterMode::Keep, false) => (LedgerDecision::Removed, "term-filter:unmatched"),
        };
        let evidence = scan.first.as_ref().map(|term| {
            let mut e = Map::new();
            e.insert("term".into(), json!(term));
            e.insert("matches".into(), json!(scan.matches));
            e.insert("distinct".into(), json!(scan.distinct));
            e
        });
        (decision, rule, evidence)
    }
}

/// Filters documents by a pinned term list.
pub struct TermFilterStage;

impl Stage for TermFilterStage {
    fn kind(&self) -> &'static str {
        "term-filter"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "remove the documents holding terms of a pinned list (AFM's profanity filter), or keep only them (its math \
         tag and symbol filters), with a ledger naming the first term"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let config: TermFilterConfig = parse_params(params)?;
        if config.min_matches == 0 {
            return Err(ConfigError::at(&["min_matches"], "must be at least 1")
                .with_hint("with 0 every document would match, whatever it holds"));
        }
        Ok(serde_json::to_value(config).expect("strings and numbers encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![
            ("docs", vec![OutputType::Dataset]),
            ("terms", vec![OutputType::Source, OutputType::File]),
        ])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        prov_filter::outputs()
    }
    fn map_tasks(&self, cx: &StageContext<'_>) -> Result<Option<usize>, StageError> {
        prov_filter::shard_tasks(cx)
    }
    fn map(&self, cx: &StageContext<'_>, tasks: &[usize]) -> Result<Vec<MapResultText>, StageError> {
        let config: TermFilterConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let lists = cx.prepared(|| read_term_lists(cx, "terms", config.matching, config.case))?;
        prov_filter::map_decided(cx, tasks, |doc, (): &mut ()| match lists.for_document(doc) {
            Ok(list) => {
                let (decision, rule, evidence) = config.decide(&list.scan(&doc.text));
                (decision, rule.to_owned(), evidence)
            }
            Err(language) => {
                let decision = match config.mode {
                    FilterMode::Remove => LedgerDecision::Kept,
                    FilterMode::Keep => LedgerDecision::Removed,
                };
                let mut evidence = Map::new();
                evidence.insert("language".into(), json!(language));
                (decision, "term-filter:no-list".to_owned(), Some(evidence))
            }
        })
    }
    fn reduce(&self, cx: &StageContext<'_>, results: MapResults<'_>) -> Result<StageOutput, StageError> {
        let config: TermFilterConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let mut out = prov_filter::reduce_filtered(cx, results, |_, _| Ok(()))?;
        out.stats.insert("terms".into(), json!(read_term_lists(cx, "terms", config.matching, config.case)?.sizes()));
        Ok(out)
    }
}

/// The lists of input `input` (the `term-filter` stage's `terms`), matched as `matching` and
/// `case` say: one file, or a directory of `<language>.txt` lists (license and notice files
/// passed over). Errors name the input and the file.
pub fn read_term_lists(
    cx: &StageContext<'_>,
    input: &str,
    matching: MatchMode,
    case: CaseMode,
) -> Result<TermLists, StageError> {
    let bad = |message: String| StageError::Input { input: input.to_owned(), message };
    let parse = |text: &[u8], name: &str| {
        let text = std::str::from_utf8(text)
            .map_err(|e| bad(format!("`{name}` is not UTF-8 (at byte {})", e.valid_up_to())))?;
        TermList::parse(text, matching, case).map_err(|m| bad(format!("`{name}`: {m}")))
    };
    let tree = match prov_manifest::get_record(cx.store, &cx.input(input)?.digest)? {
        prov_manifest::Record::Source(prov_manifest::SourceRecord {
            content: prov_manifest::Content::Tree { digest, .. },
            ..
        }) => prov_manifest::get_typed::<prov_manifest::TreeRecord>(cx.store, &digest)
            .map_err(|e| StageError::of_input(input, e))?,
        _ => return Ok(TermLists::Single(parse(&cx.read_file_input(input)?, input)?)),
    };
    let mut lists = BTreeMap::new();
    for entry in tree.entries {
        let path = entry.path.as_str();
        let file_name = path.rsplit('/').next().unwrap_or(path);
        if prov_license::detect::is_license_file(file_name) || file_name.to_ascii_lowercase().starts_with("readme") {
            continue;
        }
        if path.contains('/') {
            return Err(bad(format!("`{path}` is in a subdirectory; a directory of lists holds its lists at the top")));
        }
        let language = path
            .strip_suffix(".txt")
            .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
            .ok_or_else(|| {
                bad(format!(
                    "`{path}` is not a list named after a primary language subtag (`de.txt`); a directory of lists \
                     holds only those, and license or readme files"
                ))
            })?;
        lists.insert(language.to_owned(), parse(&cx.store.read(&entry.digest)?, path)?);
    }
    if lists.is_empty() {
        return Err(bad("the directory holds no `<language>.txt` list".into()));
    }
    Ok(TermLists::PerLanguage(lists))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_is_explicit_and_checked() {
        let c = TermFilterStage.resolve_config(&json!({})).unwrap();
        assert_eq!(c, json!({"mode": "remove", "match": "word", "case": "insensitive", "min_matches": 1}));
        for bad in [json!({"min_matches": 0}), json!({"mode": "drop"}), json!({"matching": "word"})] {
            assert!(TermFilterStage.resolve_config(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn each_mode_decides_by_the_threshold() {
        let scan = |n: u64| Scan { matches: n, distinct: n.min(1), first: (n > 0).then(|| "x".to_owned()) };
        let config = |mode, min_matches| TermFilterConfig {
            mode,
            matching: MatchMode::Word,
            case: CaseMode::Insensitive,
            min_matches,
        };
        let remove = config(FilterMode::Remove, 2);
        assert_eq!(remove.decide(&scan(1)).1, "term-filter:clean");
        assert_eq!(remove.decide(&scan(1)).2.unwrap()["matches"], 1, "evidence below the threshold too");
        assert_eq!(remove.decide(&scan(2)).0, LedgerDecision::Removed);
        let keep = config(FilterMode::Keep, 1);
        assert_eq!(keep.decide(&scan(0)), (LedgerDecision::Removed, "term-filter:unmatched", None));
        assert_eq!(keep.decide(&scan(3)).0, LedgerDecision::Kept);
    }
}
