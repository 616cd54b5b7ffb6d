//! `toxicity`: removes, per language, the documents whose toxicity score is at or above the
//! corpus's chosen quantile (the Apertus report drops the 5% most toxic documents of each
//! language), scored by a classifier that the `toxicity-train` stage trained and pinned.
//!
//! A document's score is the maximum logit of its language's classifier over its chunks
//! ([`crate::embed::chunks`]); its language is the primary subtag of its `language` field. For each
//! language, the threshold is the `quantile` (default 0.95) of the scores of that language's
//! scored documents, by [`quantile`]'s linear interpolation (`NumPy`'s default), and documents
//! scoring at or above it are removed.
//!
//! | rule | decision | when |
//! | --- | --- | --- |
//! | `toxicity:kept` | kept | scored below its language's threshold (evidence: score, threshold) |
//! | `toxicity:toxic` | removed | scored at or above the threshold (evidence: score, threshold) |
//! | `toxicity:exempt` | kept | its `tag` metadata field is in `exempt_tags` (default code, edu, math) |
//! | `toxicity:no-classifier` | kept | no classifier for its language (evidence: language) |
//! | `toxicity:too-few` | kept | its language has fewer than `min_documents` scored documents, too few for a quantile |
//! | `toxicity:empty` | kept | no text to score |
//!
//! Statistics besides every filter's: the threshold, scored and removed documents per language
//! (`thresholds`), and each language's score distribution as 21 quantiles (0, 5, …, 100%,
//! `score_quantiles`) for data cards; every score is in the ledger.

use std::collections::BTreeMap;

use prov_dataset::{Document, LedgerDecision, LedgerRow, ShardWriter, shard_documents};
use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{CheckpointRecord, Determinism, OutputType};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::model::{Classifier, Mlp, classifier_language};

/// The resolved configuration of a `toxicity` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToxicityConfig {
    /// Documents at or above this quantile of their language's scores are removed.
    #[serde(default = "default_quantile")]
    pub quantile: f64,
    /// Values of the documents' `tag` metadata field whose documents are not scored.
    #[serde(default = "default_exempt_tags")]
    pub exempt_tags: Vec<String>,
    /// Longest chunk scored, in characters.
    #[serde(default = "default_chunk_chars")]
    pub chunk_chars: u32,
    /// Fewest scored documents a language needs for its quantile to be applied.
    #[serde(default = "default_min_documents")]
    pub min_documents: u32,
}

fn default_quantile() -> f64 {
    0.95
}
fn default_exempt_tags() -> Vec<String> {
    vec!["code".into(), "edu".into(), "math".into()]
}
fn default_chunk_chars() -> u32 {
    256
}
fn default_min_documents() -> u32 {
    20
}

/// The `q` quantile of sorted values by linear interpolation between closest ranks: with
/// `h = (n - 1) * q`, `v[floor(h)] + (h - floor(h)) * (v[floor(h) + 1] - v[floor(h)])`
/// (Hyndman and Fan's type 7, `numpy.quantile`'s default). `None` for no values.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let virtual_index = last as f64 * q;
    let below = (virtual_index.floor() as usize).min(last);
    let above = (below + 1).min(last);
    let (lo, hi, frac) = (sorted[below], sorted[above], virtual_index - below as f64);
    // NumPy's `_lerp`, operation for operation, so that thresholds agree to the bit.
    Some(if frac >= 0.5 { hi - (hi - lo) * (1.0 - frac) } else { lo + (hi - lo) * frac })
}

/// Per shard: each document's score (if scored), and the scores by language.
type ShardScores = (Vec<Option<f32>>, BTreeMap<String, Vec<f64>>);

/// What the scoring pass found for one document.
#[derive(Debug, Clone, PartialEq)]
enum Assessment {
    Exempt(String),
    Empty,
    NoClassifier(String),
    Scored(String, f32),
}

/// Returns the document's `tag` metadata field, if it has one.
fn tag(doc: &Document) -> Option<String> {
    let meta: Value = serde_json::from_str(doc.metadata.as_deref()?).ok()?;
    meta.get("tag")?.as_str().map(str::to_owned)
}

/// One language's threshold, or why it has none.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Threshold {
    At(f64),
    TooFew,
}

/// Removes the most toxic documents of each language, with a ledger.
pub struct ToxicityStage;

impl ToxicityStage {
    fn load(cx: &StageContext<'_>) -> Result<Classifier, StageError> {
        let bad = |message: String| StageError::Input { input: "model".into(), message };
        // The `model` output of a `toxicity-train` stage.
        let ck = cx.input_record::<CheckpointRecord>("model")?;
        let config = cx.store.read(&ck.config)?;
        let weights = cx.store.read(&ck.weights)?;
        Classifier::from_parts(&config, &weights).map_err(|e| bad(e.to_string()))
    }

    /// Assesses a document; `score` is asked only when it needs one, with its language's model.
    fn assess(
        classifier: &Classifier,
        config: &ToxicityConfig,
        doc: &Document,
        score: impl FnOnce(&Mlp) -> Option<f32>,
    ) -> Assessment {
        if let Some(t) = tag(doc).filter(|t| config.exempt_tags.contains(t)) {
            return Assessment::Exempt(t);
        }
        let language = classifier_language(doc.language.as_deref().unwrap_or("und"));
        let Some(model) = classifier.model(&language) else { return Assessment::NoClassifier(language) };
        match score(model) {
            Some(score) => Assessment::Scored(language, score),
            None => Assessment::Empty,
        }
    }
}

impl Stage for ToxicityStage {
    fn kind(&self) -> &'static str {
        "toxicity"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "remove each language's most toxic documents (score at or above a quantile) by a pinned classifier, with a ledger"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let mut config: ToxicityConfig = parse_params(params)?;
        if !(config.quantile > 0.0 && config.quantile < 1.0) {
            return Err(ConfigError::at(&["quantile"], format!("must be between 0 and 1, got {}", config.quantile))
                .with_hint("0.95 removes the 5% most toxic documents of each language"));
        }
        if config.chunk_chars == 0 {
            return Err(ConfigError::at(&["chunk_chars"], "must be at least 1"));
        }
        config.exempt_tags.sort();
        config.exempt_tags.dedup();
        Ok(serde_json::to_value(config).expect("numbers and strings encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("docs", vec![OutputType::Dataset]), ("model", vec![OutputType::Checkpoint])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        prov_filter::outputs()
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: ToxicityConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let classifier = Self::load(cx)?;
        let ds = cx.input_record::<prov_manifest::DatasetRecord>("docs")?;

        // Pass 1: score every document, shard-parallel, in shard order. Only the scores stay
        // in memory (16 bytes a document); pass 2 reads the documents again.
        let chunk_chars = config.chunk_chars as usize;
        let scored: Vec<ShardScores> = cx.pool.install(|| {
            ds.shards
                .par_iter()
                .map(|s| {
                    let mut per_doc = Vec::new();
                    let mut by_language: BTreeMap<String, Vec<f64>> = BTreeMap::new();
                    for doc in shard_documents(cx.store, &s.digest)? {
                        let doc = doc?;
                        let a =
                            Self::assess(&classifier, &config, &doc, |m| classifier.score(m, &doc.text, chunk_chars));
                        if let Assessment::Scored(lang, score) = a {
                            by_language.entry(lang).or_default().push(f64::from(score));
                            per_doc.push(Some(score));
                        } else {
                            per_doc.push(None);
                        }
                    }
                    Ok::<_, StageError>((per_doc, by_language))
                })
                .collect::<Result<_, _>>()
        })?;
        let mut scores_by_language: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let mut shard_scores = Vec::with_capacity(scored.len());
        for (per_doc, by_language) in scored {
            for (lang, v) in by_language {
                scores_by_language.entry(lang).or_default().extend(v);
            }
            shard_scores.push(per_doc);
        }
        let (thresholds, quantiles) = thresholds_per_language(&mut scores_by_language, &config);

        // Pass 2: decide and write, shard-parallel, collected in shard order. Each shard's
        // rows are counted and written as soon as the shard is done.
        let results: Vec<(prov_filter::CountedShard, BTreeMap<String, u64>)> = cx.pool.install(|| {
            ds.shards
                .par_iter()
                .zip(shard_scores.par_iter())
                .map(|(s, doc_scores)| {
                    let mut out = ShardWriter::new(cx.store)?;
                    let mut rows = Vec::with_capacity(doc_scores.len());
                    let mut removed: BTreeMap<String, u64> = BTreeMap::new();
                    let mut docs = shard_documents(cx.store, &s.digest)?;
                    for score in doc_scores {
                        let doc = docs.next().ok_or_else(|| shard_changed(s))??;
                        let a = Self::assess(&classifier, &config, &doc, |_| *score);
                        let (decision, rule, evidence) = decide(&a, &thresholds);
                        if let (Assessment::Scored(lang, _), LedgerDecision::Removed) = (&a, decision) {
                            *removed.entry(lang.clone()).or_default() += 1;
                        }
                        rows.push(LedgerRow::of_document(&doc, decision, rule, evidence));
                        if decision != LedgerDecision::Removed {
                            out.push(doc)?;
                        }
                    }
                    if docs.next().is_some() {
                        return Err(shard_changed(s));
                    }
                    let (ledger, stats) = prov_filter::write_counted_ledger(cx, rows)?;
                    Ok::<_, StageError>(((out.finish()?, ledger, stats), removed))
                })
                .collect::<Result<_, _>>()
        })?;

        let mut removed: BTreeMap<String, u64> = BTreeMap::new();
        let mut shards = Vec::with_capacity(results.len());
        for (shard, shard_removed) in results {
            for (lang, n) in shard_removed {
                *removed.entry(lang).or_default() += n;
            }
            shards.push(shard);
        }
        let by_language = threshold_summary(&thresholds, &scores_by_language, &removed);
        let mut out = prov_filter::finish_counted(cx, shards)?;
        out.stats.insert("thresholds".into(), Value::Object(by_language));
        out.stats.insert("score_quantiles".into(), Value::Object(quantiles));
        out.stats.insert("quantile".into(), json!(config.quantile));
        Ok(out)
    }
}

/// Sorts each language's scores and derives its removal threshold (or `TooFew`) and the
/// 21 quantiles kept for the data card.
fn thresholds_per_language(
    scores_by_language: &mut BTreeMap<String, Vec<f64>>,
    config: &ToxicityConfig,
) -> (BTreeMap<String, Threshold>, Map<String, Value>) {
    let mut thresholds: BTreeMap<String, Threshold> = BTreeMap::new();
    let mut quantiles = Map::new();
    for (lang, v) in scores_by_language.iter_mut() {
        v.sort_by(f64::total_cmp);
        let t = if v.len() < config.min_documents as usize {
            Threshold::TooFew
        } else {
            Threshold::At(quantile(v, config.quantile).expect("a language with scores has a quantile"))
        };
        thresholds.insert(lang.clone(), t);
        let qs: Vec<f64> = (0..=20).map(|i| quantile(v, f64::from(i) / 20.0).expect("non-empty")).collect();
        quantiles.insert(lang.clone(), json!(qs));
    }
    (thresholds, quantiles)
}

/// The per-language `thresholds` stats entry: threshold, documents scored and removed.
fn threshold_summary(
    thresholds: &BTreeMap<String, Threshold>,
    scores_by_language: &BTreeMap<String, Vec<f64>>,
    removed: &BTreeMap<String, u64>,
) -> Map<String, Value> {
    thresholds
        .iter()
        .map(|(lang, t)| {
            let scored_count = scores_by_language.get(lang).map_or(0, Vec::len);
            let entry = match t {
                Threshold::At(t) => json!({
                    "threshold": t,
                    "scored": scored_count,
                    "removed": removed.get(lang).copied().unwrap_or(0),
                }),
                Threshold::TooFew => json!({ "threshold": null, "scored": scored_count, "removed": 0 }),
            };
            (lang.clone(), entry)
        })
        .collect()
}

/// A shard read twice gave a different number of documents: its object changed in the
/// store between the passes (the store is content-addressed, so only damage does that).
fn shard_changed(s: &prov_manifest::ShardRef) -> StageError {
    StageError::Input {
        input: "docs".into(),
        message: format!("shard {} gave a different number of documents on the second pass", s.digest),
    }
}

/// The ledger decision for one assessed document.
fn decide(
    a: &Assessment,
    thresholds: &BTreeMap<String, Threshold>,
) -> (LedgerDecision, &'static str, Option<Map<String, Value>>) {
    let obj = |v: Value| if let Value::Object(m) = v { Some(m) } else { None };
    match a {
        Assessment::Exempt(t) => (LedgerDecision::Kept, "toxicity:exempt", obj(json!({ "tag": t }))),
        Assessment::Empty => (LedgerDecision::Kept, "toxicity:empty", None),
        Assessment::NoClassifier(lang) => {
            (LedgerDecision::Kept, "toxicity:no-classifier", obj(json!({ "language": lang })))
        }
        Assessment::Scored(lang, score) => match thresholds.get(lang) {
            Some(Threshold::At(t)) => {
                let evidence = obj(json!({ "language": lang, "score": f64::from(*score), "threshold": t }));
                if f64::from(*score) >= *t {
                    (LedgerDecision::Removed, "toxicity:toxic", evidence)
                } else {
                    (LedgerDecision::Kept, "toxicity:kept", evidence)
                }
            }
            _ => {
                (LedgerDecision::Kept, "toxicity:too-few", obj(json!({ "language": lang, "score": f64::from(*score) })))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_matches_numpy_linear() {
        // numpy.quantile([1, 2, 3, 4], 0.95) == 3.85; numpy.quantile(range(31), 0.95) == 28.5.
        assert!((quantile(&[1.0, 2.0, 3.0, 4.0], 0.95).unwrap() - 3.85).abs() < 1e-12);
        let v: Vec<f64> = (0..31).map(f64::from).collect();
        assert!((quantile(&v, 0.95).unwrap() - 28.5).abs() < 1e-12);
        assert_eq!(quantile(&[7.0], 0.95), Some(7.0));
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&[1.0, 2.0], 1.0), Some(2.0));
        assert_eq!(quantile(&[1.0, 2.0], 0.0), Some(1.0));
    }

    #[test]
    fn at_the_threshold_is_removed_below_is_kept() {
        let t = BTreeMap::from([("en".to_owned(), Threshold::At(1.5)), ("fr".to_owned(), Threshold::TooFew)]);
        assert_eq!(decide(&Assessment::Scored("en".into(), 1.5), &t).1, "toxicity:toxic");
        assert_eq!(decide(&Assessment::Scored("en".into(), 1.4), &t).1, "toxicity:kept");
        assert_eq!(decide(&Assessment::Scored("fr".into(), 9.0), &t).1, "toxicity:too-few");
        assert_eq!(decide(&Assessment::NoClassifier("sw".into()), &t).0, LedgerDecision::Kept);
        assert_eq!(decide(&Assessment::Empty, &t).1, "toxicity:empty");
    }

    #[test]
    fn config_rejects_a_quantile_outside_zero_one() {
        let e = ToxicityStage.resolve_config(&json!({ "quantile": 1.5 })).unwrap_err();
        assert_eq!(e.path, vec!["quantile"]);
        let ok = ToxicityStage.resolve_config(&json!({ "exempt_tags": ["math", "code", "math"] })).unwrap();
        assert_eq!(ok["exempt_tags"], json!(["code", "math"]));
        assert_eq!(ok["quantile"], json!(0.95));
    }
}
