//! `perplexity`: `CCNet`'s perplexity filter (EuroLLM-22B report §2.3). Each document is
//! scored by its language's n-gram model (the `models` tree of an `ngram-train` stage), put in
//! one of `CCNet`'s buckets by two per-language cut-offs, and kept or removed by bucket.
//!
//! A document's perplexity is `CCNet`'s `DocLM` one ([`crate::ccnet::doc_perplexity`]): per
//! paragraph (the text split at `\n`), the normalised paragraph's log10 probability with an
//! end of sentence, summed over the document, divided by the document's tokens (each
//! paragraph's words plus its end of sentence), `10^(-sum / length)` rounded to one decimal.
//! Its language is the primary subtag of its `language` field, whose model is `<subtag>.arpa`.
//!
//! Buckets are `CCNet`'s `PerplexityBucket`: below the head cut-off is `head`, below the tail
//! cut-off `middle`, anything else `tail`. A language's cut-offs are fixed in `cutoffs` (`*`
//! for every language without its own, which with equal cut-offs is a plain threshold), or
//! else the `percentile_head` and `percentile_tail` percentiles (`CCNet`: 30 and 60) of the
//! perplexities of that language's documents in this dataset, by `numpy.percentile`'s linear
//! interpolation ([`prov_filter::scores::quantile_of`]); `CCNet` ships such percentiles,
//! computed on a sample of Common Crawl, as `cutoff.csv`. Documents in a bucket listed in `keep`
//! (default `head` and `middle`, dropping the tail, as `RedPajama`'s use of `CCNet` did) are kept.
//!
//! | rule | decision | when |
//! | --- | --- | --- |
//! | `perplexity:head`, `perplexity:middle`, `perplexity:tail` | by `keep` | scored; evidence: language, perplexity, the two cut-offs and where they came from |
//! | `perplexity:too-few` | kept | its language has no fixed cut-offs and fewer than `min_documents` scored documents |
//! | `perplexity:no-model` | kept | no model for its language (`CCNet`'s bucket `all`) |
//! | `perplexity:empty` | kept | no text (`DocLM` gives no perplexity) |
//!
//! Scoring must finish before the percentiles exist, so the stage runs in two passes
//! ([`prov_filter::scores`]): one map task per shard scores it; the reduce step computes the
//! cut-offs and decides shard by shard. Statistics besides every filter's: per language the
//! cut-offs, their source and the documents per bucket (`cutoffs`), and 21 quantiles (0, 5, …,
//! 100%) of the perplexities (`perplexity_quantiles`) for data cards.

use std::collections::BTreeMap;
use std::path::Path;

use prov_dataset::{Document, LedgerDecision, shard_documents};
use prov_exec::{
    ConfigError, InputSpec, MapResultText, MapResults, Stage, StageContext, StageError, StageOutput, parse_params,
};
use prov_filter::scores::{CorpusScores, Decision, ScoredShard, ShardScorer, decide_shards};
use prov_manifest::{DatasetRecord, Determinism, OutputType, ShardRef, TreeRecord};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::ccnet::doc_perplexity;
use crate::{Arpa, Model};

/// `CCNet`'s buckets, from the most to the least like the model's training text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Bucket {
    /// Below the head cut-off.
    Head,
    /// At or above the head cut-off, below the tail one.
    Middle,
    /// At or above the tail cut-off.
    Tail,
}

impl Bucket {
    /// `CCNet`'s `PerplexityBucket.get_bucket` for a scored document.
    pub fn of(perplexity: f64, cutoffs: [f64; 2]) -> Self {
        if perplexity < cutoffs[0] {
            Self::Head
        } else if perplexity < cutoffs[1] {
            Self::Middle
        } else {
            Self::Tail
        }
    }

    /// The ledger rule of a document in this bucket.
    pub fn rule(self) -> &'static str {
        match self {
            Self::Head => "perplexity:head",
            Self::Middle => "perplexity:middle",
            Self::Tail => "perplexity:tail",
        }
    }

    /// The bucket's name, as `CCNet` and the configuration write it.
    pub fn name(self) -> &'static str {
        &self.rule()["perplexity:".len()..]
    }
}

/// The resolved configuration of a `perplexity` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerplexityConfig {
    /// The percentile of a language's perplexities below which a document is `head`.
    #[serde(default = "default_head")]
    pub percentile_head: f64,
    /// The percentile below which a document not in the head is `middle`.
    #[serde(default = "default_tail")]
    pub percentile_tail: f64,
    /// Fixed `[head, tail]` cut-offs per language (`*`: every other language), in place of
    /// the dataset's percentiles.
    #[serde(default)]
    pub cutoffs: BTreeMap<String, [f64; 2]>,
    /// The buckets whose documents are kept.
    #[serde(default = "default_keep")]
    pub keep: Vec<Bucket>,
    /// Fewest scored documents a language needs for its percentiles to be applied.
    #[serde(default = "default_min_documents")]
    pub min_documents: u32,
}

fn default_head() -> f64 {
    30.0
}
fn default_tail() -> f64 {
    60.0
}
fn default_keep() -> Vec<Bucket> {
    vec![Bucket::Head, Bucket::Middle]
}
fn default_min_documents() -> u32 {
    20
}

impl PerplexityConfig {
    /// The fixed cut-offs of `language`, if it has any.
    fn fixed(&self, language: &str) -> Option<[f64; 2]> {
        self.cutoffs.get(language).or_else(|| self.cutoffs.get("*")).copied()
    }
}

/// Where a language's cut-offs come from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cutoffs {
    /// The dataset's percentiles.
    Percentiles([f64; 2]),
    /// The configuration's `cutoffs`.
    Fixed([f64; 2]),
    /// Neither: too few documents for percentiles.
    TooFew,
}

impl Cutoffs {
    fn values(self) -> Option<([f64; 2], &'static str)> {
        match self {
            Self::Percentiles(c) => Some((c, "percentiles")),
            Self::Fixed(c) => Some((c, "fixed")),
            Self::TooFew => None,
        }
    }
}

/// Documents per language and bucket.
type Buckets = BTreeMap<String, BTreeMap<&'static str, u64>>;

/// Each scored language's cut-offs, and its 21 perplexity quantiles.
type LanguageCutoffs = (BTreeMap<String, Cutoffs>, Map<String, Value>);

/// Every language's model, by primary subtag.
struct Models(BTreeMap<String, Model>);

fn models_error(message: String) -> StageError {
    StageError::Input { input: "models".into(), message }
}

/// The `models` tree's files by language (`de` of `de.arpa`), in language order, without
/// reading them: each name must be a lowercase subtag and `.arpa`.
fn model_files(cx: &StageContext<'_>) -> Result<Vec<(String, prov_store::Digest)>, StageError> {
    let tree = cx.input_record::<TreeRecord>("models")?;
    let mut files = Vec::with_capacity(tree.entries.len());
    for e in &tree.entries {
        let path = e.path.as_str();
        let language = path
            .strip_suffix(".arpa")
            .filter(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()))
            .ok_or_else(|| models_error(format!("`{path}` is not a model file named by its language (`de.arpa`)")))?;
        files.push((language.to_owned(), e.digest));
    }
    if files.is_empty() {
        return Err(models_error("the tree holds no model".into()));
    }
    // Tree entries are in path order, so the languages are sorted and distinct.
    Ok(files)
}

impl Models {
    /// Reads and parses every model of the `models` tree.
    fn load(cx: &StageContext<'_>) -> Result<Self, StageError> {
        let mut models = BTreeMap::new();
        for (language, digest) in model_files(cx)? {
            let bytes = cx.store.read(&digest)?;
            let at = |message: String| models_error(format!("`{language}.arpa`: {message}"));
            let text = std::str::from_utf8(&bytes).map_err(|_| at("not UTF-8".into()))?;
            let arpa = Arpa::parse(text).map_err(|e| at(e.to_string()))?;
            models.insert(language, Model::new(&arpa));
        }
        Ok(Self(models))
    }
}

/// A document's language and perplexity, if its language has a model and it has text.
fn assess(models: &Models, doc: &Document) -> Option<(String, f64)> {
    let language = doc.primary_language();
    let perplexity = doc_perplexity(models.0.get(&language)?, &doc.text)?.0;
    Some((language, perplexity))
}

/// Filters documents by their perplexity under their language's n-gram model, as `CCNet`.
pub struct PerplexityStage;

impl Stage for PerplexityStage {
    fn kind(&self) -> &'static str {
        "perplexity"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "bucket documents by CCNet's perplexity under their language's n-gram model (head/middle/tail by per-language \
         percentiles or fixed cut-offs) and keep the chosen buckets, with a ledger"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let mut config: PerplexityConfig = parse_params(params)?;
        let (h, t) = (config.percentile_head, config.percentile_tail);
        if !(0.0..=100.0).contains(&h) || !(0.0..=100.0).contains(&t) || h > t {
            return Err(ConfigError::at(
                &["percentile_head"],
                format!("percentiles must satisfy 0 <= head <= tail <= 100, got {h} and {t}"),
            )
            .with_hint("CCNet uses 30 and 60"));
        }
        for (language, [head, tail]) in &config.cutoffs {
            if language != "*" && (language.is_empty() || !language.chars().all(|c| c.is_ascii_alphanumeric())) {
                return Err(ConfigError::at(&["cutoffs"], format!("`{language}` is not a primary language subtag"))
                    .with_hint("a subtag such as `de`, or `*` for every other language"));
            }
            if !(head.is_finite() && tail.is_finite() && *head >= 0.0 && head <= tail) {
                return Err(ConfigError::at(
                    &["cutoffs", language],
                    format!("cut-offs must satisfy 0 <= head <= tail, got [{head}, {tail}]"),
                ));
            }
        }
        config.cutoffs = config.cutoffs.into_iter().map(|(l, c)| (l.to_ascii_lowercase(), c)).collect();
        config.keep.sort();
        config.keep.dedup();
        if config.keep.is_empty() {
            return Err(ConfigError::at(&["keep"], "keeps no bucket").with_hint("CCNet-style: [head, middle]"));
        }
        Ok(serde_json::to_value(config).expect("numbers and strings encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("docs", vec![OutputType::Dataset]), ("models", vec![OutputType::Tree])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        prov_filter::outputs()
    }
    /// One map task per shard: the scoring pass.
    fn map_tasks(&self, cx: &StageContext<'_>) -> Result<Option<usize>, StageError> {
        prov_filter::shard_tasks(cx)
    }
    fn map(&self, cx: &StageContext<'_>, tasks: &[usize]) -> Result<Vec<MapResultText>, StageError> {
        let models = Models::load(cx)?;
        let languages: Vec<String> = models.0.keys().cloned().collect();
        let work = cx.work_dir()?;
        prov_filter::map_input_shards(cx, tasks, |i, shard| score_shard(cx, &models, &languages, &work, i, shard))
    }
    /// The cut-offs, then pass 2 (deciding and writing), where the stage is recorded.
    fn reduce(&self, cx: &StageContext<'_>, results: MapResults<'_>) -> Result<StageOutput, StageError> {
        let config: PerplexityConfig = parse_params(cx.config).map_err(StageError::Config)?;
        // Only the languages: the models were read by the scoring pass.
        let languages: Vec<String> = model_files(cx)?.into_iter().map(|(l, _)| l).collect();
        let ds = cx.input_record::<DatasetRecord>("docs")?;
        let corpus = CorpusScores::collect(&cx.work_dir()?, results, ds.shards.len())?;
        let scratch = cx.scratch()?;
        let (cutoffs, quantiles) = cutoffs(&corpus, &languages, scratch.path(), &config)?;

        // Pass 2, each shard's documents counted per language and bucket.
        let (mut out, buckets) = decide_shards(
            cx,
            &corpus,
            |doc, score, buckets: &mut Buckets| {
                let decided = decide(doc, score, &languages, &cutoffs, &config)?;
                if let Some(bucket) =
                    [Bucket::Head, Bucket::Middle, Bucket::Tail].iter().find(|b| b.rule() == decided.1)
                {
                    *buckets.entry(doc.primary_language()).or_default().entry(bucket.name()).or_default() += 1;
                }
                Ok(decided)
            },
            |all, shard| {
                for (language, counts) in shard {
                    for (bucket, n) in counts {
                        *all.entry(language.clone()).or_default().entry(bucket).or_default() += n;
                    }
                }
            },
        )?;
        out.stats.insert("cutoffs".into(), Value::Object(cutoff_summary(&cutoffs, &corpus, &buckets)));
        out.stats.insert("perplexity_quantiles".into(), Value::Object(quantiles));
        Ok(out)
    }
}

/// The scoring pass over one shard (a map task): every document's perplexity, by language.
fn score_shard(
    cx: &StageContext<'_>,
    models: &Models,
    languages: &[String],
    work: &Path,
    i: usize,
    shard: &ShardRef,
) -> Result<ScoredShard, StageError> {
    let mut scorer = ShardScorer::create(work, i, languages)?;
    for doc in shard_documents(cx.store, &shard.digest)? {
        let found = assess(models, &doc?);
        scorer.push(found.as_ref().map(|(language, perplexity)| (language.as_str(), *perplexity)))?;
    }
    scorer.finish()
}

/// Each scored language's cut-offs, and its 21 perplexity quantiles for the data card.
fn cutoffs(
    corpus: &CorpusScores,
    languages: &[String],
    scratch: &Path,
    config: &PerplexityConfig,
) -> Result<LanguageCutoffs, StageError> {
    let percentiles = [config.percentile_head / 100.0, config.percentile_tail / 100.0];
    let mut cutoffs = BTreeMap::new();
    let mut quantiles = Map::new();
    for (language, (card, at)) in corpus.card_and(languages, scratch, &percentiles)? {
        let (head, tail) = (at[0], at[1]);
        let n = corpus.counts().get(&language).copied().unwrap_or(0);
        let c = match config.fixed(&language) {
            Some(fixed) => Cutoffs::Fixed(fixed),
            None if n < u64::from(config.min_documents) => Cutoffs::TooFew,
            None => Cutoffs::Percentiles([head, tail]),
        };
        cutoffs.insert(language.clone(), c);
        quantiles.insert(language, json!(card));
    }
    Ok((cutoffs, quantiles))
}

/// The `cutoffs` stats entry: per language the cut-offs, where they came from, the documents
/// scored and the documents per bucket.
fn cutoff_summary(cutoffs: &BTreeMap<String, Cutoffs>, corpus: &CorpusScores, buckets: &Buckets) -> Map<String, Value> {
    cutoffs
        .iter()
        .map(|(language, c)| {
            let (values, from) = c.values().map_or((None, "too-few"), |(v, f)| (Some(v), f));
            let entry = json!({
                "cutoffs": values,
                "from": from,
                "scored": corpus.counts().get(language).copied().unwrap_or(0),
                "buckets": buckets.get(language).cloned().unwrap_or_default(),
            });
            (language.clone(), entry)
        })
        .collect()
}

/// The ledger decision for one document, from its score of pass 1.
///
/// Whether the document has a score is decided again from the document and the models'
/// languages, and must agree with pass 1: a scores file that says otherwise is refused rather
/// than turned into a ledger row (`no-model` for a language that has a model, say).
fn decide(
    doc: &Document,
    score: Option<f64>,
    languages: &[String],
    cutoffs: &BTreeMap<String, Cutoffs>,
    config: &PerplexityConfig,
) -> Result<Decision, StageError> {
    let language = doc.primary_language();
    let has_model = languages.binary_search(&language).is_ok();
    let scored = has_model && !doc.text.is_empty();
    if scored != score.is_some() {
        return Err(StageError::Input {
            input: "docs".into(),
            message: format!(
                "document `{}` has {} score from pass 1, and should have {}",
                doc.id,
                if score.is_some() { "a" } else { "no" },
                if scored { "one" } else { "none" }
            ),
        });
    }
    let Some(perplexity) = score else {
        return Ok(if doc.text.is_empty() {
            (LedgerDecision::Kept, "perplexity:empty", None)
        } else {
            (LedgerDecision::Kept, "perplexity:no-model", prov_dataset::evidence(json!({ "language": language })))
        });
    };
    let Some((values, from)) = cutoffs.get(&language).and_then(|c| c.values()) else {
        return Ok((
            LedgerDecision::Kept,
            "perplexity:too-few",
            prov_dataset::evidence(json!({ "language": language, "perplexity": perplexity })),
        ));
    };
    let bucket = Bucket::of(perplexity, values);
    let decision = if config.keep.contains(&bucket) { LedgerDecision::Kept } else { LedgerDecision::Removed };
    let evidence = json!({
        "language": language,
        "perplexity": perplexity,
        "bucket": bucket.name(),
        "cutoffs": values,
        "from": from,
    });
    Ok((decision, bucket.rule(), prov_dataset::evidence(evidence)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_follow_ccnet() {
        // PerplexityBucket: `perplexity < pp_head` is head, `< pp_tail` middle, else tail.
        assert_eq!(Bucket::of(99.9, [100.0, 200.0]), Bucket::Head);
        assert_eq!(Bucket::of(100.0, [100.0, 200.0]), Bucket::Middle);
        assert_eq!(Bucket::of(199.9, [100.0, 200.0]), Bucket::Middle);
        assert_eq!(Bucket::of(200.0, [100.0, 200.0]), Bucket::Tail);
        // Equal cut-offs are a threshold: no middle.
        assert_eq!(Bucket::of(300.0, [300.0, 300.0]), Bucket::Tail);
        assert_eq!(Bucket::of(299.9, [300.0, 300.0]), Bucket::Head);
    }

    fn doc(language: &str, text: &str) -> Document {
        Document { language: Some(language.to_owned()), ..Document::new("d", text) }
    }

    #[test]
    fn decisions_follow_the_buckets_kept() {
        let config: PerplexityConfig =
            serde_json::from_value(PerplexityStage.resolve_config(&json!({})).unwrap()).unwrap();
        let cutoffs = BTreeMap::from([
            ("de".to_owned(), Cutoffs::Percentiles([100.0, 200.0])),
            ("fr".to_owned(), Cutoffs::TooFew),
        ]);
        let d = |language: &str, text: &str, score: Option<f64>| {
            let languages = ["de".to_owned(), "fr".to_owned()];
            let (decision, rule, _) = decide(&doc(language, text), score, &languages, &cutoffs, &config).unwrap();
            (decision, rule)
        };
        assert_eq!(d("de", "x", Some(50.0)), (LedgerDecision::Kept, "perplexity:head"));
        assert_eq!(d("de-CH", "x", Some(150.0)), (LedgerDecision::Kept, "perplexity:middle"));
        assert_eq!(d("de", "x", Some(200.0)), (LedgerDecision::Removed, "perplexity:tail"));
        assert_eq!(d("fr", "x", Some(9e9)), (LedgerDecision::Kept, "perplexity:too-few"));
        assert_eq!(d("sw", "x", None), (LedgerDecision::Kept, "perplexity:no-model"));
        assert_eq!(d("de", "", None), (LedgerDecision::Kept, "perplexity:empty"));
    }

    #[test]
    fn configuration_is_checked_and_normalised() {
        let stage = PerplexityStage;
        let c = stage.resolve_config(&json!({ "keep": ["middle", "head", "head"], "cutoffs": { "DE": [1, 2] } }));
        let c = c.unwrap();
        assert_eq!(c["keep"], json!(["head", "middle"]));
        assert_eq!(c["cutoffs"], json!({ "de": [1.0, 2.0] }));
        assert_eq!(c["percentile_head"], json!(30.0));
        let config: PerplexityConfig =
            serde_json::from_value(stage.resolve_config(&json!({ "cutoffs": { "de": [1, 2], "*": [5, 5] } })).unwrap())
                .unwrap();
        assert_eq!(config.fixed("de"), Some([1.0, 2.0]));
        assert_eq!(config.fixed("fr"), Some([5.0, 5.0]));
        for bad in [
            json!({ "percentile_head": 70 }),
            json!({ "percentile_tail": 101 }),
            json!({ "keep": [] }),
            json!({ "keep": ["all"] }),
            json!({ "cutoffs": { "de": [3, 2] } }),
            json!({ "cutoffs": { "de": [-1, 2] } }),
            json!({ "cutoffs": { "de-CH": [1, 2] } }),
        ] {
            assert!(stage.resolve_config(&bad).is_err(), "{bad} was accepted");
        }
    }
}
