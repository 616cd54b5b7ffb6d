//! `heuristics`: EuroLLM's heuristic filter (report §2.3) over a dataset, shard-parallel, with
//! a ledger that names the rule behind every removed document and every removed paragraph.
//!
//! | rule | decision | when |
//! | --- | --- | --- |
//! | `heuristics:kept` | kept | no rule fired |
//! | `heuristics:paragraphs` | modified | paragraphs were removed and enough text is left (evidence: paragraph count, removed paragraphs per rule, characters left) |
//! | `heuristics:too-short` | removed | fewer than `min_chars` characters, after paragraph removal (evidence as for `paragraphs`) |
//! | `heuristics:lorem-ipsum` | removed | the text contains "lorem ipsum" (evidence: paragraph, match) |
//! | `heuristics:javascript` | removed | the text contains the word "javascript" (evidence: paragraph, match) |
//! | `heuristics:curly-bracket` | removed | the text contains `{` or `}` (evidence: paragraph, match) |
//! | `heuristics:not-applied` | kept | the document's language is not in `languages` (evidence: language) |
//!
//! The rules and what they count are [`crate::rules`]'s. Statistics besides every filter's:
//! `paragraphs`, the paragraphs read and removed per rule over the documents the rules ran on.

use std::collections::BTreeMap;

use prov_dataset::{Document, LedgerDecision, LedgerRow, ShardWriter, primary_language, shard_documents};
use prov_exec::{
    ConfigError, InputSpec, MapResultText, MapResults, Stage, StageContext, StageError, StageOutput, parse_params,
};
use prov_manifest::{Determinism, OutputType};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::rules::{Outcome, ParagraphRule, Thresholds, assess};

/// The resolved configuration of a `heuristics` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeuristicsConfig {
    /// The languages (primary subtags) the rules apply to, or `["*"]` for every document. The
    /// report applies them to German, Spanish, French and Italian web data.
    #[serde(default = "default_languages")]
    pub languages: Vec<String>,
    /// The rules' thresholds.
    #[serde(flatten)]
    pub thresholds: Thresholds,
}

fn default_languages() -> Vec<String> {
    ["de", "es", "fr", "it"].map(String::from).to_vec()
}

impl HeuristicsConfig {
    /// Whether the rules apply to a document of language `tag`.
    pub fn applies_to(&self, tag: Option<&str>) -> bool {
        self.languages.iter().any(|l| l == "*") || self.languages.contains(&primary_language(tag.unwrap_or("und")))
    }
}

/// Checks and normalises a configuration: fractions in [0, 1], a ratio of at least 0, at
/// least one language, languages lowercase, sorted and unique (one encoding per meaning).
pub fn resolve(params: &Value) -> Result<HeuristicsConfig, ConfigError> {
    let mut config: HeuristicsConfig = parse_params(params)?;
    let t = &config.thresholds;
    for (field, value) in [
        ("max_uppercase_fraction", t.max_uppercase_fraction),
        ("max_non_alpha_word_fraction", t.max_non_alpha_word_fraction),
    ] {
        if !(0.0..=1.0).contains(&value) {
            return Err(ConfigError::at(&[field], format!("must be between 0 and 1, got {value}"))
                .with_hint("a fraction: 0.4 removes paragraphs with more than 40% of it"));
        }
    }
    if !(t.max_symbol_word_ratio >= 0.0 && t.max_symbol_word_ratio.is_finite()) {
        return Err(ConfigError::at(
            &["max_symbol_word_ratio"],
            format!("must be a number of at least 0, got {}", t.max_symbol_word_ratio),
        ));
    }
    if config.languages.is_empty() {
        return Err(ConfigError::at(&["languages"], "names no language")
            .with_hint("list primary subtags such as `de`, or `\"*\"` for every document"));
    }
    for l in &mut config.languages {
        if l != "*" && (l.is_empty() || !l.chars().all(|c| c.is_ascii_alphanumeric())) {
            return Err(ConfigError::at(&["languages"], format!("`{l}` is not a primary language subtag"))
                .with_hint("a subtag such as `de` or `gsw`, or `\"*\"` for every document"));
        }
        l.make_ascii_lowercase();
    }
    config.languages.sort();
    config.languages.dedup();
    Ok(config)
}

/// The ledger row and the text to write (if any) for one document.
fn decide(doc: &Document, config: &HeuristicsConfig, paragraphs: &mut ParagraphCounts) -> (LedgerRow, Option<String>) {
    if !config.applies_to(doc.language.as_deref()) {
        let mut evidence = Map::new();
        evidence.insert("language".into(), Value::String(doc.primary_language()));
        return (LedgerRow::of_document(doc, LedgerDecision::Kept, "heuristics:not-applied", Some(evidence)), None);
    }
    let outcome = assess(&doc.text, &config.thresholds);
    let (rule, evidence) = outcome.ledger_entry();
    let decision = outcome.decision();
    let text = match outcome {
        Outcome::Page(_) => None,
        Outcome::Paragraphs { text, paragraphs: read, removed, .. } => {
            paragraphs.add(read, &removed);
            (decision == LedgerDecision::Modified).then_some(text)
        }
    };
    (LedgerRow::of_document(doc, decision, &format!("heuristics:{rule}"), evidence), text)
}

/// Paragraphs read and removed per rule.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ParagraphCounts {
    read: u64,
    removed: BTreeMap<String, u64>,
}

impl ParagraphCounts {
    fn add(&mut self, read: usize, removed: &BTreeMap<ParagraphRule, Vec<usize>>) {
        self.read += read as u64;
        for (rule, at) in removed {
            *self.removed.entry(rule.name().to_owned()).or_default() += at.len() as u64;
        }
    }

    fn merge(&mut self, other: Self) {
        self.read += other.read;
        for (rule, n) in other.removed {
            *self.removed.entry(rule).or_default() += n;
        }
    }
}

/// Applies EuroLLM's heuristic rules to documents, with a ledger.
pub struct HeuristicsStage;

impl Stage for HeuristicsStage {
    fn kind(&self) -> &'static str {
        "heuristics"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "EuroLLM's heuristic filter: drop short pages and pages with lorem ipsum, javascript or curly brackets; drop \
         paragraphs by uppercase, symbol-to-word and non-alphabetic-word thresholds; with a ledger"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        Ok(serde_json::to_value(resolve(params)?).expect("numbers, booleans and strings encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("docs", vec![OutputType::Dataset])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        prov_filter::outputs()
    }
    fn map_tasks(&self, cx: &StageContext<'_>) -> Result<Option<usize>, StageError> {
        prov_filter::shard_tasks(cx)
    }
    fn map(&self, cx: &StageContext<'_>, tasks: &[usize]) -> Result<Vec<MapResultText>, StageError> {
        let config: HeuristicsConfig = parse_params(cx.config).map_err(StageError::Config)?;
        prov_filter::map_shards(cx, tasks, |s| {
            let mut out = ShardWriter::new(cx.store)?;
            let (mut rows, mut paragraphs) = (Vec::new(), ParagraphCounts::default());
            for doc in shard_documents(cx.store, &s.digest)? {
                let mut doc = doc?;
                let (row, rewritten) = decide(&doc, &config, &mut paragraphs);
                let keep = row.decision != LedgerDecision::Removed;
                rows.push(row);
                if let Some(text) = rewritten {
                    doc.text = text;
                }
                if keep {
                    out.push(doc)?;
                }
            }
            prov_filter::filtered_shard(cx, out.finish()?, rows, json!(paragraphs))
        })
    }
    fn reduce(&self, cx: &StageContext<'_>, results: MapResults<'_>) -> Result<StageOutput, StageError> {
        let mut total = ParagraphCounts::default();
        let mut out = prov_filter::reduce_filtered(cx, results, |task, extra| {
            let counts: ParagraphCounts =
                serde_json::from_value(extra).map_err(|e| StageError::MapResult { task, message: e.to_string() })?;
            total.merge(counts);
            Ok(())
        })?;
        out.stats.insert("paragraphs".into(), json!(total));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(params: &Value) -> HeuristicsConfig {
        resolve(params).unwrap()
    }

    #[test]
    fn configuration_is_checked_and_normalised() {
        let c = config(&json!({}));
        assert_eq!(c.languages, ["de", "es", "fr", "it"]);
        assert_eq!(c.thresholds, Thresholds::default());
        let c = config(&json!({ "languages": ["FR", "de", "fr"], "min_chars": 50 }));
        assert_eq!(c.languages, ["de", "fr"]);
        assert_eq!(c.thresholds.min_chars, 50);
        for bad in [
            json!({ "max_uppercase_fraction": 1.5 }),
            json!({ "max_non_alpha_word_fraction": -0.1 }),
            json!({ "max_symbol_word_ratio": -1.0 }),
            json!({ "languages": [] }),
            json!({ "languages": ["de-CH"] }),
            json!({ "min_char": 3 }),
        ] {
            assert!(resolve(&bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn rows_name_the_rule_and_its_evidence() {
        let c = config(&json!({ "languages": ["de"], "min_chars": 20 }));
        let mut counts = ParagraphCounts::default();
        let doc = |lang: &str, text: &str| Document { language: Some(lang.into()), ..Document::new("d", text) };

        let (row, text) = decide(&doc("fr", "{}"), &c, &mut counts);
        assert_eq!((row.decision, row.rule.as_str(), text), (LedgerDecision::Kept, "heuristics:not-applied", None));
        assert_eq!(row.evidence.unwrap()["language"], "fr");

        let (row, _) = decide(&doc("de-AT", "Bitte JavaScript aktivieren, danke schön."), &c, &mut counts);
        assert_eq!((row.decision, row.rule.as_str()), (LedgerDecision::Removed, "heuristics:javascript"));
        assert_eq!(Value::Object(row.evidence.unwrap()), json!({ "paragraph": 0, "match": "JavaScript" }));

        let (row, text) =
            decide(&doc("de", "Ein ganz normaler Satz hier.\nKAUFEN SIE JETZT\nNoch ein Satz."), &c, &mut counts);
        assert_eq!((row.decision, row.rule.as_str()), (LedgerDecision::Modified, "heuristics:paragraphs"));
        assert_eq!(text.as_deref(), Some("Ein ganz normaler Satz hier.\nNoch ein Satz."));
        assert_eq!(
            Value::Object(row.evidence.unwrap()),
            json!({ "paragraphs": 3, "removed": { "uppercase": [1] }, "chars": 43 })
        );
        // The ledger's word count is the input's.
        assert_eq!(row.words, 11);

        let (row, _) = decide(&doc("de", "Kurz."), &c, &mut counts);
        assert_eq!((row.decision, row.rule.as_str()), (LedgerDecision::Removed, "heuristics:too-short"));
        let (row, text) = decide(&doc("de", "Ein ganz normaler Satz, lang genug."), &c, &mut counts);
        assert_eq!(
            (row.decision, row.rule.as_str(), row.evidence, text),
            (LedgerDecision::Kept, "heuristics:kept", None, None)
        );

        assert_eq!(counts, ParagraphCounts { read: 5, removed: BTreeMap::from([("uppercase".into(), 1)]) });
        assert!(config(&json!({ "languages": ["*"] })).applies_to(None));
    }
}
