//! The stage kinds: `langid-train` trains and pins a language identifier ([`crate::model`]) on
//! labelled text, reporting its accuracy on held-out documents; `langid` identifies each
//! document's language with it and records the detection, filtering documents whose detected
//! language is not the declared one.
//!
//! `langid` rules:
//!
//! | rule | decision | when |
//! | --- | --- | --- |
//! | `langid:match` | kept | the detected language is the declared one's primary subtag |
//! | `langid:mismatch` | removed (or kept with `mismatch: keep`) | another language was detected |
//! | `langid:uncertain` | kept | the detection's posterior is below `min_score` |
//! | `langid:undeclared` | kept | the document declares no language (or `und`) |
//! | `langid:unknown-language` | kept | the model does not know the declared language |
//! | `langid:no-words` | kept | the text has no gram the model knows |
//!
//! The evidence of every detection names the declared and detected languages, the posterior
//! (`score`) and the runner-up. Statistics besides every filter's: per declared language, the
//! documents matched and mismatched (`languages`), and each `declared→detected` pair of a
//! mismatch with its count (`confusions`).

use std::collections::BTreeMap;

use prov_dataset::{Document, LedgerDecision, shard_documents};
use prov_exec::{
    ConfigError, InputSpec, MapResultText, MapResults, Stage, StageContext, StageError, StageOutput, parse_params,
};
use prov_manifest::{DatasetRecord, Determinism, OutputRef, OutputType};
use prov_store::ObjectKind;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::grams::MAX_ORDER;
use crate::model::{Identification, Model, TrainParams, Trainer, is_language_code};

/// The resolved configuration of a `langid-train` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// The highest character n-gram order.
    #[serde(default = "default_max_order")]
    pub max_order: usize,
    /// How many grams each language contributes to the vocabulary.
    #[serde(default = "default_features")]
    pub features_per_language: usize,
    /// Additive smoothing.
    #[serde(default = "default_alpha")]
    pub alpha: f64,
    /// Every `hold_out`-th document of each language (the last of each run of `hold_out`, in
    /// dataset order) is held out of training and identified afterwards; 0 holds none out.
    #[serde(default)]
    pub hold_out: usize,
}

fn default_max_order() -> usize {
    4
}
fn default_features() -> usize {
    400
}
fn default_alpha() -> f64 {
    0.5
}

impl TrainConfig {
    fn params(&self) -> TrainParams {
        TrainParams { max_order: self.max_order, features_per_language: self.features_per_language, alpha: self.alpha }
    }

    /// Whether the `k`-th document (0-based) of a language is held out.
    fn held_out(&self, k: u64) -> bool {
        self.hold_out > 0 && k % self.hold_out as u64 == self.hold_out as u64 - 1
    }
}

/// The language a training document teaches: its primary subtag, `None` for none, `und`, or
/// a subtag that is not a language code (an empty `language`, say).
fn label(doc: &Document) -> Option<String> {
    Some(doc.primary_language()).filter(|l| l != "und" && is_language_code(l))
}

/// Calls `f` with each labelled document of `ds` in dataset order, its language, and whether
/// it is held out ([`TrainConfig::held_out`], counting each language's documents from 0).
fn for_each_labelled(
    cx: &StageContext<'_>,
    ds: &DatasetRecord,
    config: &TrainConfig,
    mut f: impl FnMut(String, Document, bool),
) -> Result<(), StageError> {
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    for shard in &ds.shards {
        for doc in shard_documents(cx.store, &shard.digest)? {
            let doc = doc?;
            let Some(language) = label(&doc) else { continue };
            let k = seen.entry(language.clone()).or_default();
            let held_out = config.held_out(*k);
            *k += 1;
            f(language, doc, held_out);
        }
    }
    Ok(())
}

/// Trains a language identifier.
pub struct LangidTrainStage;

impl Stage for LangidTrainStage {
    fn kind(&self) -> &'static str {
        "langid-train"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "train a character n-gram naive Bayes language identifier on the documents' declared languages, with held-out \
         accuracy per language"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let config: TrainConfig = parse_params(params)?;
        if config.max_order == 0 || config.max_order > MAX_ORDER {
            return Err(ConfigError::at(&["max_order"], format!("must be between 1 and {MAX_ORDER}")));
        }
        if config.features_per_language == 0 {
            return Err(ConfigError::at(&["features_per_language"], "must be at least 1"));
        }
        if !(config.alpha.is_finite() && config.alpha > 0.0) {
            return Err(ConfigError::at(&["alpha"], format!("must be positive, got {}", config.alpha)));
        }
        if config.hold_out == 1 {
            return Err(ConfigError::at(&["hold_out"], "1 would hold out every document")
                .with_hint("5 holds out every fifth document of each language; 0 none"));
        }
        Ok(serde_json::to_value(config).expect("numbers encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("docs", vec![OutputType::Dataset])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("model".into(), OutputType::File)]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: TrainConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let bad = |message: String| StageError::Input { input: "docs".into(), message };
        let ds = cx.input_record::<DatasetRecord>("docs")?;
        let mut trainer = Trainer::new(config.params())
            .map_err(|e| StageError::Config(prov_exec::ConfigError::at(&[], e.to_string())))?;
        let mut taught: BTreeMap<String, u64> = BTreeMap::new();
        for_each_labelled(cx, &ds, &config, |language, doc, held_out| {
            if !held_out {
                trainer.add(&language, &doc.text);
                *taught.entry(language).or_default() += 1;
            }
        })?;
        let model = trainer.finish().map_err(|e| bad(e.to_string()))?;
        // The held-out documents, read again and identified.
        let mut held: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        let mut confusions: BTreeMap<String, u64> = BTreeMap::new();
        if config.hold_out > 0 {
            for_each_labelled(cx, &ds, &config, |language, doc, held_out| {
                if !held_out {
                    return;
                }
                let detected = model.identify(&doc.text).map(|id| id.language);
                let entry = held.entry(language.clone()).or_default();
                entry.0 += 1;
                if detected.as_deref() == Some(language.as_str()) {
                    entry.1 += 1;
                } else {
                    let to = detected.unwrap_or_else(|| "none".into());
                    *confusions.entry(format!("{language}→{to}")).or_default() += 1;
                }
            })?;
        }
        let text = model.write();
        // What is pinned must read back as this model, or no `langid` stage could use it.
        Model::parse(&text).map_err(|e| StageError::Input {
            input: "docs".into(),
            message: format!("the trained model does not read back: {e}"),
        })?;
        let digest = cx.store.put_bytes(ObjectKind::Blob, text.as_bytes())?;
        let mut out = StageOutput::default();
        out.outputs.insert("model".into(), OutputRef { output_type: OutputType::File, digest });
        out.stats.insert("languages".into(), json!(model.languages().count()));
        out.stats.insert("vocabulary".into(), json!(model.vocabulary()));
        out.stats.insert("trained".into(), json!(taught));
        if config.hold_out > 0 {
            let (n, correct) = held.values().fold((0, 0), |(n, c), (a, b)| (n + a, c + b));
            let per: Map<String, Value> =
                held.iter().map(|(l, (n, c))| (l.clone(), json!({ "documents": n, "correct": c }))).collect();
            out.stats.insert(
                "held_out".into(),
                json!({ "documents": n, "correct": correct, "languages": per, "confusions": confusions }),
            );
        }
        Ok(out)
    }
}

/// What `langid` does with a document whose detected language is not its declared one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnMismatch {
    /// Remove it.
    Remove,
    /// Keep it; the ledger still records the mismatch.
    Keep,
}

/// The resolved configuration of a `langid` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LangidConfig {
    /// What a mismatch does.
    #[serde(default = "default_mismatch")]
    pub mismatch: OnMismatch,
    /// The least posterior at which a detection is trusted.
    #[serde(default)]
    pub min_score: f64,
}

fn default_mismatch() -> OnMismatch {
    OnMismatch::Remove
}

/// Per declared language, the documents matched and mismatched, and the mismatches by pair.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Tally {
    languages: BTreeMap<String, (u64, u64)>,
    confusions: BTreeMap<String, u64>,
}

impl Tally {
    fn merge(&mut self, other: Self) {
        for (l, (m, x)) in other.languages {
            let e = self.languages.entry(l).or_default();
            e.0 += m;
            e.1 += x;
        }
        for (pair, n) in other.confusions {
            *self.confusions.entry(pair).or_default() += n;
        }
    }
}

/// What `langid` decides for a text of a declared language.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The ledger's decision.
    pub decision: LedgerDecision,
    /// The ledger's rule (`langid:match`, …).
    pub rule: &'static str,
    /// The declared language's primary subtag (`und` for none).
    pub declared: String,
    /// The detection, if the text has a gram the model knows.
    pub identification: Option<Identification>,
}

impl Verdict {
    /// The ledger row's evidence.
    pub fn evidence(&self) -> Option<Map<String, Value>> {
        prov_dataset::evidence(match &self.identification {
            None => json!({ "declared": self.declared }),
            Some(id) => json!({
                "declared": self.declared,
                "detected": id.language,
                "score": id.score,
                "runner_up": id.runner_up,
            }),
        })
    }
}

/// The rule of the table in the module doc that decides `text`, declared as `declared` (a
/// language tag; its primary subtag is compared).
pub fn assess(model: &Model, declared: Option<&str>, text: &str, config: &LangidConfig) -> Verdict {
    let declared = prov_dataset::primary_language(declared.unwrap_or("und"));
    let identification = model.identify(text);
    let (decision, rule) = match &identification {
        None => (LedgerDecision::Kept, "langid:no-words"),
        Some(_) if declared == "und" => (LedgerDecision::Kept, "langid:undeclared"),
        Some(_) if !model.languages().any(|l| l == declared) => (LedgerDecision::Kept, "langid:unknown-language"),
        Some(id) if id.score < config.min_score => (LedgerDecision::Kept, "langid:uncertain"),
        Some(id) if id.language == declared => (LedgerDecision::Kept, "langid:match"),
        Some(_) => match config.mismatch {
            OnMismatch::Remove => (LedgerDecision::Removed, "langid:mismatch"),
            OnMismatch::Keep => (LedgerDecision::Kept, "langid:mismatch"),
        },
    };
    Verdict { decision, rule, declared, identification }
}

/// The ledger decision for one document, counted in `tally`.
fn decide(
    doc: &Document,
    model: &Model,
    config: &LangidConfig,
    tally: &mut Tally,
) -> (LedgerDecision, &'static str, Option<Map<String, Value>>) {
    let verdict = assess(model, doc.language.as_deref(), &doc.text, config);
    if let ("langid:match" | "langid:mismatch", Some(id)) = (verdict.rule, &verdict.identification) {
        let counts = tally.languages.entry(verdict.declared.clone()).or_default();
        if verdict.rule == "langid:match" {
            counts.0 += 1;
        } else {
            counts.1 += 1;
            *tally.confusions.entry(format!("{}→{}", verdict.declared, id.language)).or_default() += 1;
        }
    }
    (verdict.decision, verdict.rule, verdict.evidence())
}

/// Identifies each document's language and filters mismatches, with a ledger.
pub struct LangidStage;

impl LangidStage {
    fn load(cx: &StageContext<'_>) -> Result<Model, StageError> {
        Model::parse(&cx.read_text_input("model")?)
            .map_err(|e| StageError::Input { input: "model".into(), message: e.to_string() })
    }
}

impl Stage for LangidStage {
    fn kind(&self) -> &'static str {
        "langid"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "identify each document's language with a pinned langid-train model and remove those whose detected language \
         is not the declared one, with a ledger"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let config: LangidConfig = parse_params(params)?;
        if !(0.0..=1.0).contains(&config.min_score) {
            return Err(ConfigError::at(&["min_score"], format!("must be between 0 and 1, got {}", config.min_score)));
        }
        Ok(serde_json::to_value(config).expect("numbers and strings encode"))
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
        let config: LangidConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let model = Self::load(cx)?;
        prov_filter::map_decided(cx, tasks, |doc, tally: &mut Tally| {
            let (decision, rule, evidence) = decide(doc, &model, &config, tally);
            (decision, rule.to_owned(), evidence)
        })
    }
    fn reduce(&self, cx: &StageContext<'_>, results: MapResults<'_>) -> Result<StageOutput, StageError> {
        let mut total = Tally::default();
        let mut out = prov_filter::reduce_filtered(cx, results, |task, extra| {
            let t: Tally =
                serde_json::from_value(extra).map_err(|e| StageError::MapResult { task, message: e.to_string() })?;
            total.merge(t);
            Ok(())
        })?;
        let languages: Map<String, Value> =
            total.languages.iter().map(|(l, (m, x))| (l.clone(), json!({ "match": m, "mismatch": x }))).collect();
        out.stats.insert("languages".into(), Value::Object(languages));
        out.stats.insert("confusions".into(), json!(total.confusions));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> Model {
        let mut t = Trainer::new(TrainParams { max_order: 3, features_per_language: 100, alpha: 0.5 }).unwrap();
        t.add("de", "der die das und ist nicht ein eine sich mit auf für");
        t.add("en", "the and is not a an of with on for this that");
        t.finish().unwrap()
    }

    fn doc(language: Option<&str>, text: &str) -> Document {
        Document { language: language.map(str::to_owned), ..Document::new("d", text) }
    }

    #[test]
    fn each_rule_decides_as_the_table_says() {
        let (m, mut tally) = (model(), Tally::default());
        let remove = LangidConfig { mismatch: OnMismatch::Remove, min_score: 0.0 };
        let mut d = |language: Option<&str>, text: &str, config: &LangidConfig| {
            let (decision, rule, _) = decide(&doc(language, text), &m, config, &mut tally);
            (decision, rule)
        };
        assert_eq!(d(Some("de-CH"), "das ist nicht die", &remove), (LedgerDecision::Kept, "langid:match"));
        assert_eq!(d(Some("de"), "this is not the", &remove), (LedgerDecision::Removed, "langid:mismatch"));
        let keep = LangidConfig { mismatch: OnMismatch::Keep, ..remove.clone() };
        assert_eq!(d(Some("de"), "this is not the", &keep), (LedgerDecision::Kept, "langid:mismatch"));
        assert_eq!(d(None, "this is not the", &remove), (LedgerDecision::Kept, "langid:undeclared"));
        assert_eq!(d(Some("fr"), "this is not the", &remove), (LedgerDecision::Kept, "langid:unknown-language"));
        assert_eq!(d(Some("de"), "1234 !!", &remove), (LedgerDecision::Kept, "langid:no-words"));
        let strict = LangidConfig { min_score: 1.0, ..remove };
        assert_eq!(d(Some("de"), "ist", &strict).1, "langid:uncertain");
        assert_eq!(tally.languages["de"], (1, 2));
        assert_eq!(tally.confusions["de→en"], 2);
    }

    #[test]
    fn configurations_are_checked() {
        assert!(LangidTrainStage.resolve_config(&json!({ "hold_out": 1 })).is_err());
        assert!(LangidTrainStage.resolve_config(&json!({ "max_order": 6 })).is_err());
        assert!(LangidTrainStage.resolve_config(&json!({ "alpha": 0 })).is_err());
        let c = LangidTrainStage.resolve_config(&json!({})).unwrap();
        assert_eq!(c, json!({ "max_order": 4, "features_per_language": 400, "alpha": 0.5, "hold_out": 0 }));
        assert!(LangidStage.resolve_config(&json!({ "min_score": 1.5 })).is_err());
        assert!(LangidStage.resolve_config(&json!({ "mismatch": "drop" })).is_err());
        assert_eq!(LangidStage.resolve_config(&json!({})).unwrap(), json!({ "mismatch": "remove", "min_score": 0.0 }));
    }
}
