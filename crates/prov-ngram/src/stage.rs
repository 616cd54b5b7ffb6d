//! `ngram-train`: estimates one n-gram model per language from a dataset, for `CCNet`-style
//! perplexity filtering, and pins them as ARPA files in one tree output, `models`
//! (`de.arpa`, `fr.arpa`, …).
//!
//! Each document whose primary language subtag is listed contributes its paragraphs (the text
//! split at `\n`), each normalised by `CCNet`'s normaliser ([`crate::ccnet::normalize`]) and
//! split at spaces into tokens; an empty normalised paragraph is not a training sentence.
//! Documents are read in dataset order. The estimate is `lmplz`'s ([`crate::train`]), so each
//! file is the one `lmplz -o ORDER` writes for the same sentences.
//!
//! Tokens are whitespace words. `CCNet` tokenises with a `SentencePiece` model per language
//! first; no such model can be obtained here, and words keep the model readable and the
//! scorer's input what `kenlm` splits.
//!
//! Statistics: per language, the documents, sentences and tokens read and the n-grams of each
//! order.

use std::collections::BTreeMap;

use prov_dataset::shard_documents;
use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{
    DatasetRecord, Determinism, OutputRef, OutputType, Record, SCHEMA_VERSION, TreeEntry, TreeRecord, put_record,
};
use prov_store::ObjectKind;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::ccnet::normalize;
use crate::train::{Discounts, MAX_ORDER, Trainer};

/// The resolved configuration of an `ngram-train` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NgramTrainConfig {
    /// The model order; `CCNet` uses 5.
    #[serde(default = "default_order")]
    pub order: usize,
    /// The languages (primary subtags) to estimate a model for: one model each.
    pub languages: Vec<String>,
    /// Discounts for adjusted counts 1, 2 and 3+ where the closed form fails (`lmplz
    /// --discount_fallback`, whose values are 0.5, 1 and 1.5); without them such data fails.
    #[serde(default)]
    pub discount_fallback: Option<[f32; 3]>,
}

fn default_order() -> usize {
    5
}

/// One language's trainer and what it has read.
struct Language {
    trainer: Trainer,
    documents: u64,
    tokens: u64,
}

/// One language's model, or why it has none, and what it was estimated from.
struct Estimated {
    language: String,
    documents: u64,
    sentences: u64,
    tokens: u64,
    arpa: Result<crate::Arpa, crate::TrainError>,
}

/// Estimates `CCNet`-style n-gram models per language.
pub struct NgramTrainStage;

impl Stage for NgramTrainStage {
    fn kind(&self) -> &'static str {
        "ngram-train"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "estimate a modified Kneser-Ney n-gram model per language on CCNet-normalised paragraphs, as KenLM's lmplz, \
         written as ARPA files"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let mut config: NgramTrainConfig = parse_params(params)?;
        if config.order == 0 || config.order > MAX_ORDER {
            return Err(ConfigError::at(
                &["order"],
                format!("must be between 1 and {MAX_ORDER}, got {}", config.order),
            ));
        }
        if config.languages.is_empty() {
            return Err(
                ConfigError::at(&["languages"], "names no language").with_hint("list primary subtags such as `de`")
            );
        }
        for l in &mut config.languages {
            if l.is_empty() || !l.chars().all(|c| c.is_ascii_alphanumeric()) {
                return Err(ConfigError::at(&["languages"], format!("`{l}` is not a primary language subtag"))
                    .with_hint("a subtag such as `de` or `gsw`; it names the model's file"));
            }
            l.make_ascii_lowercase();
        }
        config.languages.sort();
        config.languages.dedup();
        if let Some(d) = config.discount_fallback {
            for (k, v) in d.iter().enumerate() {
                if !(0.0..=(k + 1) as f32).contains(v) {
                    return Err(ConfigError::at(
                        &["discount_fallback"],
                        format!("the discount for adjusted count {} must be between 0 and {}, got {v}", k + 1, k + 1),
                    ));
                }
            }
        }
        Ok(serde_json::to_value(config).expect("numbers and strings encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("docs", vec![OutputType::Dataset])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("models".into(), OutputType::Tree)]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: NgramTrainConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let ds = cx.input_record::<DatasetRecord>("docs")?;
        let mut trainers: BTreeMap<String, Language> = BTreeMap::new();
        for l in &config.languages {
            let trainer = Trainer::new(config.order)
                .map_err(|e| StageError::Input { input: "docs".into(), message: e.to_string() })?;
            trainers.insert(l.clone(), Language { trainer, documents: 0, tokens: 0 });
        }
        for shard in &ds.shards {
            for doc in shard_documents(cx.store, &shard.digest)? {
                let doc = doc?;
                let Some(l) = trainers.get_mut(&doc.primary_language()) else { continue };
                l.documents += 1;
                for paragraph in doc.text.split('\n') {
                    let line = normalize(paragraph);
                    let words: Vec<&str> = line.split(' ').filter(|w| !w.is_empty()).collect();
                    if !words.is_empty() {
                        l.tokens += words.len() as u64;
                        l.trainer.add_sentence(words);
                    }
                }
            }
        }
        let fallback = config.discount_fallback.map(Discounts);
        // Each language's model on the stage's threads; collected in language order.
        let estimated: Vec<Estimated> = cx.pool.install(|| {
            trainers
                .into_par_iter()
                .map(|(language, Language { trainer, documents, tokens })| {
                    let sentences = trainer.sentences();
                    let arpa = if sentences == 0 { Err(crate::TrainError::Empty) } else { trainer.estimate(fallback) };
                    Estimated { language, documents, sentences, tokens, arpa }
                })
                .collect()
        });
        let mut entries = Vec::with_capacity(estimated.len());
        let mut stats = serde_json::Map::new();
        for Estimated { language, documents, sentences, tokens, arpa } in estimated {
            let arpa = arpa.map_err(|e| StageError::Input {
                input: "docs".into(),
                message: format!("the `{language}` model: {e}"),
            })?;
            let text = arpa.write();
            let digest = cx.store.put_bytes(ObjectKind::Blob, text.as_bytes())?;
            let path = format!("{language}.arpa").parse().expect("a subtag and a suffix make a valid path");
            entries.push(TreeEntry { path, digest, size: text.len() as u64, executable: false });
            let ngrams: Vec<usize> = arpa.grams.iter().map(Vec::len).collect();
            stats.insert(
                language,
                json!({ "documents": documents, "sentences": sentences, "tokens": tokens, "ngrams": ngrams }),
            );
        }
        entries.sort_by(|a, b| a.path.as_str().cmp(b.path.as_str()));
        let tree = put_record(cx.store, &Record::Tree(TreeRecord { schema: SCHEMA_VERSION, entries }))?;
        let mut out = StageOutput::default();
        out.outputs.insert("models".into(), OutputRef { output_type: OutputType::Tree, digest: tree });
        out.stats.insert("languages".into(), Value::Object(stats));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_is_checked_and_normalised() {
        let stage = NgramTrainStage;
        let c = stage.resolve_config(&json!({ "languages": ["FR", "de", "fr"] })).unwrap();
        assert_eq!(c, json!({ "order": 5, "languages": ["de", "fr"], "discount_fallback": null }));
        for bad in [
            json!({ "languages": [] }),
            json!({ "languages": ["de-CH"] }),
            json!({ "languages": ["de"], "order": 0 }),
            json!({ "languages": ["de"], "order": 9 }),
            json!({ "languages": ["de"], "discount_fallback": [0.5, 2.5, 1.5] }),
            json!({ "order": 3 }),
        ] {
            assert!(stage.resolve_config(&bad).is_err(), "{bad} was accepted");
        }
    }
}
