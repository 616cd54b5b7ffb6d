//! The scoring stage kinds: `pair-score-train` fits and pins the pair scorer ([`crate::scorer`])
//! on clean pairs, reporting how it does on held-out ones; `pair-score` scores every pair and
//! removes those below the report's thresholds.
//!
//! `pair-score` rules, with `c` the classifier's probability, `q` the quality estimate, and the
//! thresholds named after the models they stand in for:
//!
//! | rule | decision | when |
//! | --- | --- | --- |
//! | `pair-score:kept` | kept | `c ≥ bicleaner_threshold` and `q ≥ cometkiwi_threshold` |
//! | `pair-score:bicleaner` | removed | `c < bicleaner_threshold` (the threshold of the pair's target language, else its source language, else `*`) |
//! | `pair-score:cometkiwi` | removed | `c` passes and `q < cometkiwi_threshold` |
//!
//! The evidence gives `classifier`, `quality`, both thresholds applied and the language pair.

use std::collections::BTreeMap;

use prov_dataset::{LedgerDecision, LedgerRow, ShardWriter, shard_documents};
use prov_exec::{
    ConfigError, InputSpec, MapResultText, MapResults, Stage, StageContext, StageError, StageOutput, parse_params,
};
use prov_manifest::{DatasetRecord, Determinism, OutputRef, OutputType};
use prov_store::ObjectKind;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::pairs::Pair;
use crate::scorer::{Dictionary, FEATURES, FORMAT, Linear, Model, PairModel, features, language_pair, noise};

/// The resolved configuration of a `pair-score-train` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// The penalty of both fits (logistic and ridge).
    #[serde(default = "default_alpha")]
    pub alpha: f64,
    /// Every `hold_out`-th pair of a language pair (the last of each run) is left out of the
    /// fit and scored afterwards; 0 holds none out.
    #[serde(default = "default_hold_out")]
    pub hold_out: usize,
    /// At most this many pairs per language pair are read, the first in dataset order.
    #[serde(default = "default_max_pairs")]
    pub max_pairs: usize,
    /// Target words kept per source word in the dictionary.
    #[serde(default = "default_top")]
    pub dictionary_top: usize,
    /// Pairs a word pair must co-occur in to enter the dictionary.
    #[serde(default = "default_min_count")]
    pub dictionary_min_count: u32,
}

fn default_alpha() -> f64 {
    1.0
}
fn default_hold_out() -> usize {
    10
}
fn default_max_pairs() -> usize {
    100_000
}
fn default_top() -> usize {
    5
}
fn default_min_count() -> u32 {
    2
}

/// Training and held-out examples of one language pair: features, labels (parallel or not)
/// and quality targets (chrF of the target used against the true target, over 100).
#[derive(Default)]
struct Examples {
    rows: Vec<Vec<f64>>,
    parallel: Vec<f64>,
    quality: Vec<f64>,
}

impl Examples {
    /// Each pair and its corruption.
    fn of(pairs: &[(String, String)], dictionary: &Dictionary, seed: u64) -> Result<Self, StageError> {
        let chrf = prov_reward::chrf::Chrf::default();
        let targets: Vec<&str> = pairs.iter().map(|(_, t)| t.as_str()).collect();
        let mut out = Self::default();
        for (i, (s, t)) in pairs.iter().enumerate() {
            let (noisy, _) = noise(&targets, i, seed);
            let q = chrf
                .sentence_score(&noisy, &[t.as_str()])
                .map_err(|e| StageError::Input { input: "docs".into(), message: e.to_string() })?;
            for (target, parallel, quality) in [(t.as_str(), 1.0, 1.0), (noisy.as_str(), 0.0, q / 100.0)] {
                out.rows.push(features(s, target, dictionary));
                out.parallel.push(parallel);
                out.quality.push(quality);
            }
        }
        Ok(out)
    }
}

/// Fits one language pair's scorer; returns it and what the fit and the held-out pairs say.
fn fit_pair(pairs: &[(String, String)], config: &TrainConfig, seed: u64) -> Result<(PairModel, Value), StageError> {
    let held = |k: usize| config.hold_out > 0 && k % config.hold_out == config.hold_out - 1;
    let (train, test): (Vec<_>, Vec<_>) = pairs.iter().cloned().enumerate().partition(|(k, _)| !held(*k));
    let train: Vec<(String, String)> = train.into_iter().map(|(_, p)| p).collect();
    let test: Vec<(String, String)> = test.into_iter().map(|(_, p)| p).collect();
    let bad = |message: String| StageError::Input { input: "docs".into(), message };
    if train.len() < 2 {
        return Err(bad(format!("{} pairs to fit on; a scorer needs at least 2", train.len())));
    }
    let as_refs: Vec<(&str, &str)> = train.iter().map(|(s, t)| (s.as_str(), t.as_str())).collect();
    let dictionary = Dictionary::learn(&as_refs, config.dictionary_top, config.dictionary_min_count);
    let examples = Examples::of(&train, &dictionary, seed)?;
    let classifier =
        crate::logistic::fit(&examples.rows, &examples.parallel, config.alpha).map_err(|e| bad(e.to_string()))?;
    let sparse: Vec<Vec<(u32, f64)>> =
        examples.rows.iter().map(|r| r.iter().enumerate().map(|(j, v)| (j as u32, *v)).collect()).collect();
    let quality = prov_quality::ridge::fit(&sparse, &examples.quality, FEATURES.len(), config.alpha)
        .map_err(|e| bad(e.to_string()))?;
    let model = PairModel {
        dictionary,
        classifier: Linear { intercept: classifier.intercept, weights: classifier.weights },
        quality: Linear { intercept: quality.intercept, weights: quality.weights },
    };
    let mut stats =
        json!({ "trained": train.len(), "held_out": test.len(), "dictionary_words": model.dictionary.entries.len() });
    if test.len() >= 2 {
        // Held-out pairs and their corruptions, scored by the pinned model.
        let held_out = Examples::of(&test, &model.dictionary, seed)?;
        let (mut right, mut squared) = (0usize, 0.0f64);
        for ((x, &parallel), &quality) in held_out.rows.iter().zip(&held_out.parallel).zip(&held_out.quality) {
            let c = crate::logistic::LogisticModel {
                weights: model.classifier.weights.clone(),
                intercept: model.classifier.intercept,
            }
            .predict(x);
            right += usize::from((c >= 0.5) == (parallel > 0.5));
            let q = model.quality.intercept + model.quality.weights.iter().zip(x).map(|(w, v)| w * v).sum::<f64>();
            squared += (q.clamp(0.0, 1.0) - quality).powi(2);
        }
        let n = held_out.rows.len() as f64;
        stats["held_out_accuracy"] = json!(right as f64 / n);
        stats["held_out_quality_rmse"] = json!((squared / n).sqrt());
    }
    Ok((model, stats))
}

/// Fits and pins the pair scorer.
pub struct PairScoreTrainStage;

impl Stage for PairScoreTrainStage {
    fn kind(&self) -> &'static str {
        "pair-score-train"
    }
    fn version(&self) -> u32 {
        2
    }
    fn summary(&self) -> &'static str {
        "fit the pair scorer (Bicleaner's and CometKiwi's stand-ins: a classifier and a quality estimate on \
         dictionary and length features, trained against synthetic noise) on clean sentence pairs"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let c: TrainConfig = parse_params(params)?;
        if !(c.alpha.is_finite() && c.alpha > 0.0) {
            return Err(ConfigError::at(&["alpha"], format!("must be positive, got {}", c.alpha)));
        }
        if c.hold_out == 1 {
            return Err(ConfigError::at(&["hold_out"], "1 would hold out every pair")
                .with_hint("10 holds out every tenth; 0 none"));
        }
        if c.max_pairs < 2 || c.dictionary_top == 0 || c.dictionary_min_count == 0 {
            return Err(ConfigError::at(
                &["max_pairs"],
                "`max_pairs` is at least 2, `dictionary_top` and `dictionary_min_count` at least 1",
            ));
        }
        Ok(serde_json::to_value(c).expect("numbers encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn seed_names(&self) -> &'static [&'static str] {
        &["noise"]
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("docs", vec![OutputType::Dataset])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("model".into(), OutputType::File)]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: TrainConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let seed = cx.seed("noise")?;
        let mut by_pair: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
        let ds = cx.input_record::<DatasetRecord>("docs")?;
        for shard in &ds.shards {
            for doc in shard_documents(cx.store, &shard.digest)? {
                let pair =
                    Pair::of(&doc?).map_err(|e| StageError::Input { input: "docs".into(), message: e.to_string() })?;
                let list = by_pair.entry(language_pair(&pair.source_language, &pair.target_language)).or_default();
                if list.len() < config.max_pairs {
                    list.push((pair.source, pair.target));
                }
            }
        }
        let mut model = Model {
            format: FORMAT.into(),
            features: FEATURES.iter().map(|f| (*f).to_owned()).collect(),
            pairs: BTreeMap::new(),
        };
        let mut stats = serde_json::Map::new();
        for (name, pairs) in &by_pair {
            let (m, s) = fit_pair(pairs, &config, seed).map_err(|e| match e {
                StageError::Input { input, message } => {
                    StageError::Input { input, message: format!("language pair `{name}`: {message}") }
                }
                other => other,
            })?;
            model.pairs.insert(name.clone(), m);
            stats.insert(name.clone(), s);
        }
        if model.pairs.is_empty() {
            return Err(StageError::Input { input: "docs".into(), message: "no sentence pairs to fit on".into() });
        }
        let bytes = model.write();
        Model::parse(&bytes).map_err(|e| StageError::Input {
            input: "docs".into(),
            message: format!("the fitted scorer does not read back: {e}"),
        })?;
        let digest = cx.store.put_bytes(ObjectKind::Blob, &bytes)?;
        let mut out = StageOutput::default();
        out.outputs.insert("model".into(), OutputRef { output_type: OutputType::File, digest });
        out.stats.insert("language_pairs".into(), Value::Object(stats));
        Ok(out)
    }
}

/// The resolved configuration of a `pair-score` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoreConfig {
    /// The least classifier probability kept, per language (primary subtag), `*` for the rest:
    /// EuroLLM's Bicleaner thresholds by default, 0.6 for Portuguese and 0.5 otherwise.
    #[serde(default = "default_bicleaner")]
    pub bicleaner_threshold: BTreeMap<String, f64>,
    /// The least quality estimate kept: EuroLLM's CometKiwi-22 threshold, 0.7, by default.
    #[serde(default = "default_cometkiwi")]
    pub cometkiwi_threshold: f64,
}

fn default_bicleaner() -> BTreeMap<String, f64> {
    BTreeMap::from([("pt".to_owned(), 0.6), ("*".to_owned(), 0.5)])
}
fn default_cometkiwi() -> f64 {
    0.7
}

impl ScoreConfig {
    /// The classifier threshold of a pair: its target language's, else its source language's,
    /// else `*`'s.
    #[must_use]
    pub fn bicleaner_for(&self, source: &str, target: &str) -> f64 {
        let get = |l: &str| self.bicleaner_threshold.get(&prov_dataset::primary_language(l)).copied();
        // A configuration without `*` is refused when locked; read from a record, it takes
        // nothing (every pair falls below), rather than panicking.
        get(target)
            .or_else(|| get(source))
            .or_else(|| self.bicleaner_threshold.get("*").copied())
            .unwrap_or(f64::INFINITY)
    }
}

/// What `pair-score` decides for a pair its language pair's scorer scores: the decision, the
/// rule and the evidence. `prov explain pair-score` reports the same.
#[must_use]
pub fn assess(pair_model: &PairModel, pair: &Pair, config: &ScoreConfig) -> (LedgerDecision, &'static str, Value) {
    let scores = pair_model.score(&pair.source, &pair.target);
    let bicleaner = config.bicleaner_for(&pair.source_language, &pair.target_language);
    let (decision, rule) = if scores.classifier < bicleaner {
        (LedgerDecision::Removed, "pair-score:bicleaner")
    } else if scores.quality < config.cometkiwi_threshold {
        (LedgerDecision::Removed, "pair-score:cometkiwi")
    } else {
        (LedgerDecision::Kept, "pair-score:kept")
    };
    let evidence = json!({
        "classifier": scores.classifier,
        "quality": scores.quality,
        "bicleaner_threshold": bicleaner,
        "cometkiwi_threshold": config.cometkiwi_threshold,
        "language_pair": language_pair(&pair.source_language, &pair.target_language),
    });
    (decision, rule, evidence)
}

/// The ledger row of one pair, counted per language pair and rule.
fn decide(
    doc: &prov_dataset::Document,
    model: &Model,
    config: &ScoreConfig,
    counts: &mut BTreeMap<String, BTreeMap<String, u64>>,
) -> Result<LedgerRow, StageError> {
    let pair = Pair::of(doc).map_err(|e| StageError::Input { input: "docs".into(), message: e.to_string() })?;
    let name = language_pair(&pair.source_language, &pair.target_language);
    let pair_model = model.pair(&pair.source_language, &pair.target_language).ok_or_else(|| StageError::Input {
        input: "model".into(),
        message: format!("the scorer has no model for language pair `{name}` (pair `{}`)", doc.id),
    })?;
    let (decision, rule, evidence) = assess(pair_model, &pair, config);
    *counts.entry(name).or_default().entry(rule.to_owned()).or_default() += 1;
    Ok(LedgerRow::of_document(doc, decision, rule, prov_dataset::evidence(evidence)))
}

/// Scores sentence pairs with the pinned scorer and removes those below the thresholds.
pub struct PairScoreStage;

impl Stage for PairScoreStage {
    fn kind(&self) -> &'static str {
        "pair-score"
    }
    fn version(&self) -> u32 {
        2
    }
    fn summary(&self) -> &'static str {
        "score sentence pairs with a pinned pair-score-train scorer and remove those below the Bicleaner and \
         CometKiwi thresholds of EuroLLM's report, with a ledger"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let mut c: ScoreConfig = parse_params(params)?;
        // Languages are matched by lowercase primary subtag: one spelling per key.
        let mut lowered = BTreeMap::new();
        for (lang, t) in std::mem::take(&mut c.bicleaner_threshold) {
            if lowered.insert(lang.to_lowercase(), t).is_some() {
                return Err(ConfigError::at(
                    &["bicleaner_threshold", &lang],
                    format!("`{lang}` is given twice, in two cases"),
                ));
            }
        }
        c.bicleaner_threshold = lowered;
        if !c.bicleaner_threshold.contains_key("*") {
            return Err(ConfigError::at(&["bicleaner_threshold"], "has no `*` entry for the other languages")
                .with_hint("for example `{pt: 0.6, \"*\": 0.5}`, the report's"));
        }
        for (lang, t) in &c.bicleaner_threshold {
            if !(0.0..=1.0).contains(t) {
                return Err(ConfigError::at(&["bicleaner_threshold", lang], format!("{t} is not between 0 and 1")));
            }
        }
        if !(0.0..=1.0).contains(&c.cometkiwi_threshold) {
            return Err(ConfigError::at(
                &["cometkiwi_threshold"],
                format!("{} is not between 0 and 1", c.cometkiwi_threshold),
            ));
        }
        Ok(serde_json::to_value(c).expect("numbers encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("docs", vec![OutputType::Dataset]), ("model", vec![OutputType::File])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        prov_filter::outputs()
    }
    fn map_tasks(&self, cx: &StageContext<'_>) -> Result<Option<usize>, StageError> {
        prov_filter::shard_tasks(cx)
    }
    fn map(&self, cx: &StageContext<'_>, tasks: &[usize]) -> Result<Vec<MapResultText>, StageError> {
        let config: ScoreConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let model = Model::parse(&cx.read_file_input("model")?)
            .map_err(|e| StageError::Input { input: "model".into(), message: e.to_string() })?;
        prov_filter::map_shards(cx, tasks, |s| {
            let mut out = ShardWriter::new(cx.store)?;
            let (mut rows, mut counts) = (Vec::new(), BTreeMap::new());
            for doc in shard_documents(cx.store, &s.digest)? {
                let doc = doc?;
                let row = decide(&doc, &model, &config, &mut counts)?;
                let kept = row.decision == LedgerDecision::Kept;
                rows.push(row);
                if kept {
                    out.push(doc)?;
                }
            }
            prov_filter::filtered_shard(cx, out.finish()?, rows, json!(counts))
        })
    }
    fn reduce(&self, cx: &StageContext<'_>, results: MapResults<'_>) -> Result<StageOutput, StageError> {
        let mut total: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        let mut out = prov_filter::reduce_filtered(cx, results, |task, extra| {
            let counts: BTreeMap<String, BTreeMap<String, u64>> =
                serde_json::from_value(extra).map_err(|e| StageError::MapResult { task, message: e.to_string() })?;
            for (pair, rules) in counts {
                for (rule, n) in rules {
                    *total.entry(pair.clone()).or_default().entry(rule).or_default() += n;
                }
            }
            Ok(())
        })?;
        out.stats.insert("language_pairs".into(), json!(total));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scorer whose classifier gives `sigmoid(c)` and whose quality estimate gives `q`, for
    /// every pair (all weights zero).
    fn constant(c: f64, q: f64) -> PairModel {
        let zero = vec![0.0; FEATURES.len()];
        PairModel {
            dictionary: Dictionary::default(),
            classifier: Linear { intercept: c, weights: zero.clone() },
            quality: Linear { intercept: q, weights: zero },
        }
    }

    #[test]
    fn each_rule_fires_at_its_threshold() {
        let config: ScoreConfig = serde_json::from_value(PairScoreStage.resolve_config(&json!({})).unwrap()).unwrap();
        let pair = |target_language: &str| Pair {
            source: "a".into(),
            source_language: "en".into(),
            target: "b".into(),
            target_language: target_language.into(),
            metadata: serde_json::Map::new(),
        };
        // logit(0.5) = 0: exactly at the threshold passes; just below does not.
        let rule = |c: f64, q: f64, lang: &str| assess(&constant(c, q), &pair(lang), &config).1;
        assert_eq!(rule(0.0, 0.7, "de"), "pair-score:kept");
        assert_eq!(rule(-1e-9, 0.9, "de"), "pair-score:bicleaner");
        assert_eq!(rule(0.0, 0.9, "pt"), "pair-score:bicleaner", "Portuguese needs 0.6");
        assert_eq!(rule(0.5, 0.9, "pt"), "pair-score:kept", "sigmoid(0.5) = 0.62");
        assert_eq!(rule(1.0, 0.699_999, "de"), "pair-score:cometkiwi");
        assert_eq!(rule(-1.0, 0.1, "de"), "pair-score:bicleaner", "the classifier is asked first");
        let (decision, _, evidence) = assess(&constant(1.0, 2.0), &pair("pt-PT"), &config);
        assert_eq!(decision, LedgerDecision::Kept);
        assert_eq!(evidence["quality"], 1.0, "the estimate is clipped to 1");
        assert_eq!(evidence["bicleaner_threshold"], 0.6);
        assert_eq!(evidence["language_pair"], "en-pt");
    }

    #[test]
    #[allow(clippy::float_cmp)] // the thresholds are the configured values themselves
    fn thresholds_follow_the_report_and_the_language() {
        let c: ScoreConfig = serde_json::from_value(PairScoreStage.resolve_config(&json!({})).unwrap()).unwrap();
        assert_eq!(c.bicleaner_for("en", "pt-PT"), 0.6);
        assert_eq!(c.bicleaner_for("pt", "en"), 0.6);
        assert_eq!(c.bicleaner_for("en", "de"), 0.5);
        assert_eq!(c.cometkiwi_threshold, 0.7);
        assert!(PairScoreStage.resolve_config(&json!({"bicleaner_threshold": {"pt": 0.6}})).is_err());
        assert!(PairScoreStage.resolve_config(&json!({"cometkiwi_threshold": 1.5})).is_err());
        assert!(PairScoreTrainStage.resolve_config(&json!({"hold_out": 1})).is_err());
        assert_eq!(
            PairScoreTrainStage.resolve_config(&json!({})).unwrap(),
            json!({"alpha": 1.0, "hold_out": 10, "max_pairs": 100_000, "dictionary_top": 5, "dictionary_min_count": 2})
        );
    }
}
