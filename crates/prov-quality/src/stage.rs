//! The stage kinds: `quality-train` fits and pins a [`Scorer`] on labelled documents,
//! reporting its error on held-out ones; `quality` scores every document with it and sorts it
//! into a tier by two cut-offs, keeping the tiers `keep` names. EuroLLM draws each training
//! phase from its own tiers: a recipe runs one `quality` stage per tier it needs (each ledger
//! records every document's score and tier).
//!
//! `quality` rules, with `low` and `high` the two `cutoffs` and `s` the clipped score:
//!
//! | rule | when | decision |
//! | --- | --- | --- |
//! | `quality:high` | `s ≥ high` | kept if `keep` names `high` |
//! | `quality:medium` | `low ≤ s < high` | kept if `keep` names `medium` |
//! | `quality:low` | `s < low` | kept if `keep` names `low` |
//!
//! The evidence names the score before and after clipping, the tier and the cut-offs. The
//! statistics add, per language (primary subtag), the documents in each tier (`tiers`).
//!
//! Labels (`quality-train`'s `labels` input) are JSON Lines, one object per labelled document:
//! `{"id": "<document id>", "score": <number from 0 to 5>}`. The report's labels are an LLM's
//! annotations; a recipe names its own, and the book says where the reference recipe's come
//! from.

use std::collections::{BTreeMap, BTreeSet};

use prov_dataset::{Document, LedgerDecision, shard_documents};
use prov_exec::{
    ConfigError, InputSpec, MapResultText, MapResults, Stage, StageContext, StageError, StageOutput, parse_params,
};
use prov_manifest::{DatasetRecord, Determinism, OutputRef, OutputType};
use prov_store::ObjectKind;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::features::HashingVectorizer;
use crate::model::{MAX_FEATURES, SCALE, Scorer};
use crate::ridge::Accumulator;

/// The Unicode version of the lowercase tables the features use (Rust's `char`): a new one can
/// change scores, so both stages' versions go with it.
pub const UNICODE_VERSION: (u8, u8, u8) = (17, 0, 0);

/// The resolved configuration of a `quality-train` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// Feature buckets (at most 4096: the fit holds a dense square of them).
    #[serde(default = "default_features")]
    pub n_features: u32,
    /// Shortest character n-gram.
    #[serde(default = "default_min_n")]
    pub min_n: usize,
    /// Longest character n-gram.
    #[serde(default = "default_max_n")]
    pub max_n: usize,
    /// The ridge penalty.
    #[serde(default = "default_alpha")]
    pub alpha: f64,
    /// Every `hold_out`-th labelled document (the last of each run of `hold_out`, in dataset
    /// order) is left out of the fit and scored afterwards; 0 holds none out.
    #[serde(default = "default_hold_out")]
    pub hold_out: usize,
}

fn default_features() -> u32 {
    1024
}
fn default_min_n() -> usize {
    1
}
fn default_max_n() -> usize {
    4
}
fn default_alpha() -> f64 {
    1.0
}
fn default_hold_out() -> usize {
    10
}

/// Reads the labels: each document id's score, with the line it came from.
fn read_labels(bytes: &[u8]) -> Result<BTreeMap<String, f64>, StageError> {
    let bad = |line: usize, message: String| StageError::Input {
        input: "labels".into(),
        message: format!("line {line}: {message}"),
    };
    let text = std::str::from_utf8(bytes).map_err(|_| bad(1, "the labels are not UTF-8".into()))?;
    let mut labels = BTreeMap::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Label {
            id: String,
            score: f64,
        }
        let label: Label =
            serde_json::from_str(line).map_err(|e| bad(i + 1, format!("{e}: expected {{\"id\": …, \"score\": …}}")))?;
        if !(SCALE.0..=SCALE.1).contains(&label.score) {
            return Err(bad(i + 1, format!("score {} is outside 0 to 5", label.score)));
        }
        if labels.insert(label.id.clone(), label.score).is_some() {
            return Err(bad(i + 1, format!("document `{}` is labelled twice", label.id)));
        }
    }
    Ok(labels)
}

/// Fits and pins a quality scorer.
pub struct QualityTrainStage;

impl QualityTrainStage {
    /// Calls `f` with each labelled document of `docs` in dataset order, its label, and whether
    /// it is held out.
    fn for_each_labelled(
        cx: &StageContext<'_>,
        labels: &BTreeMap<String, f64>,
        hold_out: usize,
        mut f: impl FnMut(&Document, f64, bool) -> Result<(), StageError>,
    ) -> Result<(), StageError> {
        let ds = cx.input_record::<DatasetRecord>("docs")?;
        let mut k = 0usize;
        // A label names one document: a second document with a labelled id would be fitted or
        // held out under a label that was not given for it.
        let mut seen = BTreeSet::new();
        for shard in &ds.shards {
            for doc in shard_documents(cx.store, &shard.digest)? {
                let doc = doc?;
                let Some(&score) = labels.get(&doc.id) else { continue };
                if !seen.insert(doc.id.clone()) {
                    return Err(StageError::Input {
                        input: "docs".into(),
                        message: format!("document id `{}` is labelled and occurs twice", doc.id),
                    });
                }
                let held = hold_out > 0 && k % hold_out == hold_out - 1;
                k += 1;
                f(&doc, score, held)?;
            }
        }
        Ok(())
    }
}

impl Stage for QualityTrainStage {
    fn kind(&self) -> &'static str {
        "quality-train"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "fit a quality scorer (ridge regression on hashed character n-grams, EuroFilter's stand-in) to labelled \
         documents, with its held-out error"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let c: TrainConfig = parse_params(params)?;
        if c.n_features == 0 || c.n_features > MAX_FEATURES {
            return Err(ConfigError::at(&["n_features"], format!("must be from 1 to {MAX_FEATURES}")));
        }
        if c.min_n == 0 || c.max_n < c.min_n || c.max_n > 16 {
            return Err(ConfigError::at(&["max_n"], "need 1 ≤ min_n ≤ max_n ≤ 16"));
        }
        if !(c.alpha.is_finite() && c.alpha > 0.0) {
            return Err(ConfigError::at(&["alpha"], format!("must be positive, got {}", c.alpha)));
        }
        if c.hold_out == 1 {
            return Err(ConfigError::at(&["hold_out"], "1 would hold out every document")
                .with_hint("10 holds out every tenth labelled document; 0 none"));
        }
        Ok(serde_json::to_value(c).expect("numbers encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![
            ("docs", vec![OutputType::Dataset]),
            ("labels", vec![OutputType::Source, OutputType::File]),
        ])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("model".into(), OutputType::File)]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let c: TrainConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let labels = read_labels(&cx.read_file_input("labels")?)?;
        let features = HashingVectorizer { n_features: c.n_features, min_n: c.min_n, max_n: c.max_n };
        let mut sums = Accumulator::new(c.n_features as usize);
        let mut matched = BTreeSet::new();
        Self::for_each_labelled(cx, &labels, c.hold_out, |doc, score, held| {
            matched.insert(doc.id.clone());
            if !held {
                sums.add(&features.transform(&doc.text), score)
                    .map_err(|e| StageError::Input { input: "docs".into(), message: e.to_string() })?;
            }
            Ok(())
        })?;
        let trained = sums.rows();
        let model = sums.finish(c.alpha).map_err(|_| StageError::Input {
            input: "labels".into(),
            message: format!("none of the {} labels names a document of `docs` that is not held out", labels.len()),
        })?;
        let scorer = Scorer { features, model };
        // The fit's error on the documents it saw and on those it did not.
        let (mut train, mut held) = ((0u64, 0.0f64), (0u64, 0.0f64));
        Self::for_each_labelled(cx, &labels, c.hold_out, |doc, score, is_held| {
            let error = scorer.score(&doc.text).1 - score;
            let e = if is_held { &mut held } else { &mut train };
            e.0 += 1;
            e.1 += error * error;
            Ok(())
        })?;
        let rmse = |(n, sq): (u64, f64)| if n == 0 { Value::Null } else { json!((sq / n as f64).sqrt()) };
        let text = scorer.write();
        // What is pinned must read back as this scorer, or no `quality` stage could use it.
        Scorer::parse(&text).map_err(|e| StageError::Input {
            input: "docs".into(),
            message: format!("the fitted scorer does not read back: {e}"),
        })?;
        let digest = cx.store.put_bytes(ObjectKind::Blob, text.as_bytes())?;
        let mut histogram = [0u64; 6];
        for s in labels.values() {
            histogram[(s.floor() as usize).min(5)] += 1;
        }
        let mut out = StageOutput::default();
        out.outputs.insert("model".into(), OutputRef { output_type: OutputType::File, digest });
        out.stats.insert("labels".into(), json!(labels.len()));
        out.stats.insert("labels_by_score".into(), json!(histogram));
        out.stats.insert("unmatched_labels".into(), json!(labels.len() - matched.len()));
        out.stats.insert("trained".into(), json!(trained));
        out.stats.insert("train_rmse".into(), rmse(train));
        out.stats.insert("held_out".into(), json!({ "documents": held.0, "rmse": rmse(held) }));
        Ok(out)
    }
}

/// A tier of the scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// At or above the upper cut-off.
    High,
    /// From the lower cut-off up to the upper.
    Medium,
    /// Below the lower cut-off.
    Low,
}

impl Tier {
    /// The tier of clipped score `s` for cut-offs `[low, high]`.
    pub fn of(s: f64, cutoffs: [f64; 2]) -> Self {
        if s >= cutoffs[1] {
            Self::High
        } else if s >= cutoffs[0] {
            Self::Medium
        } else {
            Self::Low
        }
    }

    /// Its name, as the ledger's rule ends.
    pub fn name(self) -> &'static str {
        match self {
            Self::High => "high",
            Self::Medium => "medium",
            Self::Low => "low",
        }
    }
}

/// The resolved configuration of a `quality` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QualityConfig {
    /// The lower and upper cut-off on the clipped score.
    #[serde(default = "default_cutoffs")]
    pub cutoffs: [f64; 2],
    /// The tiers kept (sorted, without repeats, once resolved).
    #[serde(default = "default_keep")]
    pub keep: Vec<Tier>,
}

fn default_cutoffs() -> [f64; 2] {
    [2.0, 3.0]
}
fn default_keep() -> Vec<Tier> {
    vec![Tier::High, Tier::Medium, Tier::Low]
}

/// Per language, the documents in each tier.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Tally {
    tiers: BTreeMap<String, BTreeMap<Tier, u64>>,
}

/// What `quality` decides for a text.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The score before clipping.
    pub raw: f64,
    /// The score clipped to the scale.
    pub score: f64,
    /// Its tier.
    pub tier: Tier,
    /// Kept when `keep` names the tier.
    pub decision: LedgerDecision,
}

impl Verdict {
    /// The ledger's rule.
    pub fn rule(&self) -> String {
        format!("quality:{}", self.tier.name())
    }

    /// The ledger row's evidence.
    pub fn evidence(&self, config: &QualityConfig) -> Option<serde_json::Map<String, Value>> {
        let evidence =
            json!({ "score": self.score, "raw": self.raw, "tier": self.tier.name(), "cutoffs": config.cutoffs });
        prov_dataset::evidence(evidence)
    }
}

/// The rule of the table in the module doc that decides `text`.
pub fn assess(scorer: &Scorer, text: &str, config: &QualityConfig) -> Verdict {
    let (raw, score) = scorer.score(text);
    let tier = Tier::of(score, config.cutoffs);
    let decision = if config.keep.contains(&tier) { LedgerDecision::Kept } else { LedgerDecision::Removed };
    Verdict { raw, score, tier, decision }
}

/// The ledger decision, rule and evidence for one document, counted in `tally`.
fn decide(doc: &Document, scorer: &Scorer, config: &QualityConfig, tally: &mut Tally) -> prov_filter::Decided {
    let verdict = assess(scorer, &doc.text, config);
    *tally.tiers.entry(doc.primary_language()).or_default().entry(verdict.tier).or_default() += 1;
    (verdict.decision, verdict.rule(), verdict.evidence(config))
}

/// Scores documents with a pinned scorer and keeps the tiers asked for, with a ledger.
pub struct QualityStage;

impl Stage for QualityStage {
    fn kind(&self) -> &'static str {
        "quality"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "score each document with a pinned quality-train scorer, sort it into a tier by two cut-offs and keep the \
         tiers asked for, with a ledger"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let mut c: QualityConfig = parse_params(params)?;
        let [low, high] = c.cutoffs;
        if !(low.is_finite() && high.is_finite() && SCALE.0 <= low && low <= high && high <= SCALE.1) {
            return Err(ConfigError::at(&["cutoffs"], format!("need 0 ≤ low ≤ high ≤ 5, got [{low}, {high}]")));
        }
        c.keep.sort();
        c.keep.dedup();
        if c.keep.is_empty() {
            return Err(ConfigError::at(&["keep"], "keeps no tier").with_hint("name high, medium or low"));
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
        let config: QualityConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let scorer = load(cx)?;
        prov_filter::map_decided(cx, tasks, |doc, tally: &mut Tally| decide(doc, &scorer, &config, tally))
    }
    fn reduce(&self, cx: &StageContext<'_>, results: MapResults<'_>) -> Result<StageOutput, StageError> {
        let mut total: BTreeMap<String, BTreeMap<Tier, u64>> = BTreeMap::new();
        let mut out = prov_filter::reduce_filtered(cx, results, |task, extra| {
            let t: Tally =
                serde_json::from_value(extra).map_err(|e| StageError::MapResult { task, message: e.to_string() })?;
            for (language, tiers) in t.tiers {
                for (tier, n) in tiers {
                    *total.entry(language.clone()).or_default().entry(tier).or_default() += n;
                }
            }
            Ok(())
        })?;
        out.stats.insert("tiers".into(), json!(total));
        Ok(out)
    }
}

/// The pinned scorer of the `model` input.
fn load(cx: &StageContext<'_>) -> Result<Scorer, StageError> {
    Scorer::parse(&cx.read_text_input("model")?)
        .map_err(|e| StageError::Input { input: "model".into(), message: e.to_string() })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::ridge::RidgeModel;

    #[test]
    fn the_unicode_tables_are_the_ones_the_stages_were_versioned_with() {
        assert_eq!(char::UNICODE_VERSION, UNICODE_VERSION, "raise both stages' versions");
    }

    #[test]
    fn tiers_follow_the_cut_offs_and_keep() {
        let scorer = Scorer {
            features: HashingVectorizer { n_features: 4, min_n: 1, max_n: 1 },
            model: RidgeModel { weights: vec![0.0; 4], intercept: 3.0 },
        };
        let config = QualityConfig { cutoffs: [2.0, 3.0], keep: vec![Tier::Medium] };
        let mut tally = Tally::default();
        let doc = Document { language: Some("de-CH".into()), ..Document::new("d", "text") };
        let (decision, rule, evidence) = decide(&doc, &scorer, &config, &mut tally);
        assert_eq!(
            (decision, rule.as_str()),
            (LedgerDecision::Removed, "quality:high"),
            "a score at the cut-off is high"
        );
        assert_eq!(evidence.unwrap()["tier"], "high");
        assert_eq!((Tier::of(2.999, [2.0, 3.0]), Tier::of(2.0, [2.0, 3.0])), (Tier::Medium, Tier::Medium));
        assert_eq!(Tier::of(1.999, [2.0, 3.0]), Tier::Low);
        assert_eq!(tally.tiers["de"][&Tier::High], 1);
    }

    #[test]
    fn labels_are_read_strictly() {
        let ok = read_labels(b"{\"id\": \"a\", \"score\": 3}\n\n{\"id\": \"b\", \"score\": 0.5}\n").unwrap();
        assert_eq!(ok.len(), 2);
        for (bad, says) in [
            (
                &b"{\"id\": \"a\", \"score\": 3}\n{\"id\": \"a\", \"score\": 1}\n"[..],
                "line 2: document `a` is labelled twice",
            ),
            (b"{\"id\": \"a\", \"score\": 6}\n", "line 1: score 6 is outside"),
            (b"{\"id\": \"a\"}\n", "line 1: missing field"),
            (b"{\"id\": \"a\", \"score\": 1, \"note\": 2}\n", "line 1: unknown field"),
        ] {
            let e = read_labels(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn configurations_are_checked() {
        assert!(QualityTrainStage.resolve_config(&json!({ "n_features": 5000 })).is_err());
        assert!(QualityTrainStage.resolve_config(&json!({ "min_n": 3, "max_n": 2 })).is_err());
        assert!(QualityTrainStage.resolve_config(&json!({ "hold_out": 1 })).is_err());
        let c = QualityTrainStage.resolve_config(&json!({})).unwrap();
        assert_eq!(c, json!({ "n_features": 1024, "min_n": 1, "max_n": 4, "alpha": 1.0, "hold_out": 10 }));
        assert!(QualityStage.resolve_config(&json!({ "cutoffs": [3, 2] })).is_err());
        assert!(QualityStage.resolve_config(&json!({ "cutoffs": [0, 6] })).is_err());
        assert!(QualityStage.resolve_config(&json!({ "keep": [] })).is_err());
        let c = QualityStage.resolve_config(&json!({ "keep": ["low", "high", "low"] })).unwrap();
        assert_eq!(c, json!({ "cutoffs": [2.0, 3.0], "keep": ["high", "low"] }));
    }
}
