//! `toxicity`: removes, per language, the documents whose toxicity score is at or above the
//! corpus's chosen quantile (the Apertus report drops the 5% most toxic documents of each
//! language), scored by a classifier that the `toxicity-train` stage trained and pinned.
//!
//! A document's score is the maximum logit of its language's classifier over its chunks
//! ([`crate::embed::chunks`]); its language is the primary subtag of its `language` field. For each
//! language, the threshold is the `quantile` (default 0.95) of the scores of that language's
//! scored documents, by [`quantile_of`]'s linear interpolation (`NumPy`'s default), and documents
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
//! The stage runs in two passes ([`prov_filter::scores`]): one map task per shard scores it (on
//! any node of a cluster under `--executor slurm`); the reduce step merges the scores into each
//! language's threshold and quantiles, and runs pass 2, deciding and writing shard by shard on
//! its threads.
//!
//! Statistics besides every filter's: the threshold, scored and removed documents per language
//! (`thresholds`), and each language's score distribution as 21 quantiles (0, 5, …, 100%,
//! `score_quantiles`) for data cards; every score is in the ledger.

use std::collections::BTreeMap;
use std::path::Path;

use prov_dataset::{Document, LedgerDecision, shard_documents};
use prov_exec::{
    ConfigError, InputSpec, MapResultText, MapResults, Stage, StageContext, StageError, StageOutput, parse_params,
};
use prov_filter::scores::{CorpusScores, Decision, ScoredShard, ShardScorer, decide_shards};
use prov_manifest::{CheckpointRecord, Determinism, OutputType};
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
    // 2: the ledger has an id directory (prov_dataset::directory).
    // 3: the ledger record holds its shards' Merkle root, the list is in its parts record
    // (ledger schema 2), so that a proof stays logarithmic in the shard count.
    fn version(&self) -> u32 {
        3
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
    /// One map task per shard: the scoring pass.
    fn map_tasks(&self, cx: &StageContext<'_>) -> Result<Option<usize>, StageError> {
        prov_filter::shard_tasks(cx)
    }
    fn map(&self, cx: &StageContext<'_>, tasks: &[usize]) -> Result<Vec<MapResultText>, StageError> {
        let config: ToxicityConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let classifier = Self::load(cx)?;
        let work = cx.work_dir()?;
        prov_filter::map_input_shards(cx, tasks, |i, shard| score_shard(cx, &classifier, &config, &work, i, shard))
    }
    /// The thresholds, then pass 2 (deciding and writing), where the stage is recorded.
    fn reduce(&self, cx: &StageContext<'_>, results: MapResults<'_>) -> Result<StageOutput, StageError> {
        let config: ToxicityConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let classifier = Self::load(cx)?;
        let ds = cx.input_record::<prov_manifest::DatasetRecord>("docs")?;
        let languages: Vec<String> = classifier.languages().map(str::to_owned).collect();
        let corpus = CorpusScores::collect(&cx.work_dir()?, results, ds.shards.len())?;
        let scratch = cx.scratch()?;
        let thresholds = thresholds(&corpus, &languages, scratch.path(), &config)?;

        // Pass 2, each shard's removed documents counted per language.
        let (mut out, removed) = decide_shards(
            cx,
            &corpus,
            |doc, score, removed: &mut BTreeMap<String, u64>| {
                // Scores were f32s, written as f64s: the conversion back is exact.
                let a = Self::assess(&classifier, &config, doc, |_| score.map(|v| v as f32));
                let decided = decide(&a, &thresholds.0);
                if let (Assessment::Scored(lang, _), LedgerDecision::Removed) = (&a, decided.0) {
                    *removed.entry(lang.clone()).or_default() += 1;
                }
                Ok(decided)
            },
            |all, shard| {
                for (lang, n) in shard {
                    *all.entry(lang).or_default() += n;
                }
            },
        )?;
        let by_language = threshold_summary(&thresholds.0, corpus.counts(), &removed);
        out.stats.insert("thresholds".into(), Value::Object(by_language));
        out.stats.insert("score_quantiles".into(), Value::Object(thresholds.1));
        out.stats.insert("quantile".into(), json!(config.quantile));
        Ok(out)
    }
}

/// The per-language `thresholds` stats entry: threshold, documents scored and removed.
fn threshold_summary(
    thresholds: &BTreeMap<String, Threshold>,
    counts: &BTreeMap<String, u64>,
    removed: &BTreeMap<String, u64>,
) -> Map<String, Value> {
    thresholds
        .iter()
        .map(|(lang, t)| {
            let scored_count = counts.get(lang).copied().unwrap_or(0);
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

/// The scoring pass over one shard (a map task), through a [`ShardScorer`].
fn score_shard(
    cx: &StageContext<'_>,
    classifier: &Classifier,
    config: &ToxicityConfig,
    work: &Path,
    i: usize,
    shard: &prov_manifest::ShardRef,
) -> Result<ScoredShard, StageError> {
    let chunk_chars = config.chunk_chars as usize;
    let languages: Vec<String> = classifier.languages().map(str::to_owned).collect();
    let mut scorer = ShardScorer::create(work, i, &languages)?;
    for doc in shard_documents(cx.store, &shard.digest)? {
        let doc = doc?;
        match ToxicityStage::assess(classifier, config, &doc, |m| classifier.score(m, &doc.text, chunk_chars)) {
            Assessment::Scored(lang, score) => scorer.push(Some((&lang, f64::from(score))))?,
            _ => scorer.push(None)?,
        }
    }
    scorer.finish()
}

/// Each language's threshold, and its 21 quantiles (0, 5, …, 100%) for the data card.
type Thresholds = (BTreeMap<String, Threshold>, Map<String, Value>);

/// The thresholds and the data card's quantiles from the scoring pass.
fn thresholds(
    corpus: &CorpusScores,
    languages: &[String],
    scratch: &Path,
    config: &ToxicityConfig,
) -> Result<Thresholds, StageError> {
    let mut thresholds = BTreeMap::new();
    let mut quantiles = Map::new();
    for (lang, (card, at)) in corpus.card_and(languages, scratch, &[config.quantile])? {
        let n = corpus.counts().get(&lang).copied().unwrap_or(0);
        let t = if n < u64::from(config.min_documents) { Threshold::TooFew } else { Threshold::At(at[0]) };
        thresholds.insert(lang.clone(), t);
        quantiles.insert(lang, json!(card));
    }
    Ok((thresholds, quantiles))
}

/// The ledger decision for one assessed document.
fn decide(a: &Assessment, thresholds: &BTreeMap<String, Threshold>) -> Decision {
    match a {
        Assessment::Exempt(t) => (LedgerDecision::Kept, "toxicity:exempt", prov_dataset::evidence(json!({ "tag": t }))),
        Assessment::Empty => (LedgerDecision::Kept, "toxicity:empty", None),
        Assessment::NoClassifier(lang) => {
            (LedgerDecision::Kept, "toxicity:no-classifier", prov_dataset::evidence(json!({ "language": lang })))
        }
        Assessment::Scored(lang, score) => match thresholds.get(lang) {
            Some(Threshold::At(t)) => {
                let evidence =
                    prov_dataset::evidence(json!({ "language": lang, "score": f64::from(*score), "threshold": t }));
                if f64::from(*score) >= *t {
                    (LedgerDecision::Removed, "toxicity:toxic", evidence)
                } else {
                    (LedgerDecision::Kept, "toxicity:kept", evidence)
                }
            }
            _ => (
                LedgerDecision::Kept,
                "toxicity:too-few",
                prov_dataset::evidence(json!({ "language": lang, "score": f64::from(*score) })),
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
