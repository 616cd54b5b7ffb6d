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
//! The stage runs as one map task per shard, the scoring pass (on any node of a cluster under
//! `--executor slurm`): each writes its shard's scores, one per document, and its scored
//! documents' languages and scores as one sorted run, to the stage's work directory, and names
//! both files with their digests in its result. The reduce step checks the files, merges the
//! runs into each language's threshold and quantiles, and runs pass 2, deciding and writing
//! shard by shard on its threads.
//!
//! Statistics besides every filter's: the threshold, scored and removed documents per language
//! (`thresholds`), and each language's score distribution as 21 quantiles (0, 5, …, 100%,
//! `score_quantiles`) for data cards; every score is in the ledger.

use std::collections::BTreeMap;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use prov_dataset::{Document, LedgerDecision, LedgerRow, ShardWriter, shard_documents};
use prov_exec::{
    ConfigError, InputSpec, MapResultText, MapResults, Stage, StageContext, StageError, StageOutput, WorkFile,
    WorkFileRef, parse_params,
};
use prov_extsort::{ExternalSort, write_run_to};
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

/// The two ranks (0-based, in ascending order) that [`quantile_of`] reads for `q` of `n` values.
fn quantile_ranks(n: usize, q: f64) -> Option<(usize, usize)> {
    let last = n.checked_sub(1)?;
    let below = ((last as f64 * q).floor() as usize).min(last);
    Some((below, (below + 1).min(last)))
}

/// The `q` quantile of sorted values by linear interpolation between closest ranks: with
/// `h = (n - 1) * q`, `v[floor(h)] + (h - floor(h)) * (v[floor(h) + 1] - v[floor(h)])`
/// (Hyndman and Fan's type 7, `numpy.quantile`'s default), of `n` sorted values, reading only
/// the two it needs through `at`. `None` for no values.
fn quantile_of(n: usize, q: f64, at: impl Fn(usize) -> f64) -> Option<f64> {
    let (below, above) = quantile_ranks(n, q)?;
    let virtual_index = (n - 1) as f64 * q;
    let (lo, hi, frac) = (at(below), at(above), virtual_index - below as f64);
    // NumPy's `_lerp`, operation for operation, so that thresholds agree to the bit.
    Some(if frac >= 0.5 { hi - (hi - lo) * (1.0 - frac) } else { lo + (hi - lo) * frac })
}

/// A scored document's language (its index among the classifier's languages, which are in
/// name order) and its score (`f64` bits turned to sort in [`f64::total_cmp`] order), big
/// endian: sorted, each language's scores are adjacent and ascending.
const SCORE_W: usize = 12;

/// What one external sort of scores may buffer before it spills a run.
const SORT_BUDGET: usize = 16 << 20;

/// Maps an `f64` to a `u64` whose unsigned order is [`f64::total_cmp`]'s.
fn sortable(x: f64) -> u64 {
    let b = x.to_bits();
    if b >> 63 == 1 { !b } else { b | 1 << 63 }
}

/// The inverse of [`sortable`].
fn unsortable(u: u64) -> f64 {
    f64::from_bits(if u >> 63 == 1 { u & !(1 << 63) } else { !u })
}

/// Each language's threshold, and its 21 quantiles for the data card.
type Thresholds = (BTreeMap<String, Threshold>, Map<String, Value>);

/// The thresholds and the data card's 21 quantiles per language, from the scores sorted by
/// language then score, reading only the ranks the quantiles need: the same values as sorting
/// each language's scores in memory, at no memory per document.
fn thresholds_from_sorted(
    languages: &[&str],
    counts: &BTreeMap<String, u64>,
    sorted: impl Iterator<Item = std::io::Result<[u8; SCORE_W]>>,
    config: &ToxicityConfig,
) -> Result<Thresholds, StageError> {
    let fractions: Vec<f64> = (0..=20).map(|i| f64::from(i) / 20.0).collect();
    // Per language (by index): the ranks to keep, then the values found at them.
    let mut wanted: Vec<BTreeMap<usize, f64>> = vec![BTreeMap::new(); languages.len()];
    for (i, lang) in languages.iter().enumerate() {
        let n = counts.get(*lang).copied().unwrap_or(0) as usize;
        for q in fractions.iter().chain([&config.quantile]) {
            if let Some((a, b)) = quantile_ranks(n, *q) {
                wanted[i].insert(a, f64::NAN);
                wanted[i].insert(b, f64::NAN);
            }
        }
    }
    let (mut current, mut rank) = (usize::MAX, 0usize);
    let mut seen = vec![0u64; languages.len()];
    for r in sorted {
        let r = r?;
        let lang = u32::from_be_bytes(r[..4].try_into().expect("four bytes")) as usize;
        if let Some(n) = seen.get_mut(lang) {
            *n += 1;
        }
        if lang != current {
            (current, rank) = (lang, 0);
        }
        if let Some(v) = wanted.get_mut(lang).and_then(|w| w.get_mut(&rank)) {
            *v = unsortable(u64::from_be_bytes(r[4..].try_into().expect("eight bytes")));
        }
        rank += 1;
    }
    // A run file cut at a record boundary reads back as fewer scores, not as an error: the
    // counts of the first pass must be met exactly, or the thresholds would be wrong.
    for (i, lang) in languages.iter().enumerate() {
        if seen[i] != counts.get(*lang).copied().unwrap_or(0) {
            return Err(StageError::Input {
                input: "docs".into(),
                message: format!(
                    "the sorted scores of `{lang}` are {}, the first pass scored {}",
                    seen[i],
                    counts.get(*lang).copied().unwrap_or(0)
                ),
            });
        }
    }
    let mut thresholds = BTreeMap::new();
    let mut quantiles = Map::new();
    for (i, lang) in languages.iter().enumerate() {
        let n = counts.get(*lang).copied().unwrap_or(0) as usize;
        if n == 0 {
            continue;
        }
        let at = |k: usize| wanted[i][&k];
        let t = if n < config.min_documents as usize {
            Threshold::TooFew
        } else {
            Threshold::At(quantile_of(n, config.quantile, at).expect("a language with scores has a quantile"))
        };
        thresholds.insert((*lang).to_owned(), t);
        let qs: Vec<f64> = fractions.iter().map(|q| quantile_of(n, *q, at).expect("non-empty")).collect();
        quantiles.insert((*lang).to_owned(), json!(qs));
    }
    Ok((thresholds, quantiles))
}

/// Per shard, for pass 2, on disk: one byte (1 scored, 0 not) and an `f32` (little endian)
/// per document.
const SCORE_FILE_W: usize = 5;

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
        Ok(Some(cx.input_record::<prov_manifest::DatasetRecord>("docs")?.shards.len()))
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
        let languages: Vec<&str> = classifier.languages().collect();
        let (work, scratch) = (cx.work_dir()?, cx.scratch()?);
        // Each task's files, checked to be what it wrote; its sorted scores merged with the
        // others' for the thresholds, its per-document scores read back in pass 2.
        let sort = ExternalSort::<[u8; SCORE_W]>::new(scratch.path(), "scores", SORT_BUDGET);
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        let mut score_files = Vec::with_capacity(ds.shards.len());
        for r in results {
            let (task, value) = r?;
            let shard: Scored =
                serde_json::from_value(value).map_err(|e| StageError::MapResult { task, message: e.to_string() })?;
            let (scores, sorted) = shard.check(&work, task)?;
            sort.adopt_run(&sorted);
            score_files.push(scores);
            for (lang, n) in shard.counts {
                *counts.entry(lang).or_default() += n;
            }
        }
        if score_files.len() != ds.shards.len() {
            return Err(StageError::Input {
                input: "docs".into(),
                message: format!("{} map results for {} shards", score_files.len(), ds.shards.len()),
            });
        }
        let (thresholds, quantiles) = thresholds_from_sorted(&languages, &counts, sort.finish()?, &config)?;

        // Pass 2: decide and write, shard-parallel, each shard's scores read back from its
        // task's file, each shard folded into the stage's parts as it finishes.
        let parts = Mutex::new((prov_filter::FilterParts::new(ds.shards.len()), BTreeMap::<String, u64>::new()));
        cx.pool.install(|| {
            ds.shards.par_iter().enumerate().try_for_each(|(i, s)| {
                let mut out = ShardWriter::new(cx.store)?;
                let mut rows = Vec::new();
                let mut removed: BTreeMap<String, u64> = BTreeMap::new();
                let mut scores = BufReader::new(fs_err::File::open(&score_files[i])?);
                for doc in shard_documents(cx.store, &s.digest)? {
                    let doc = doc?;
                    let mut entry = [0u8; SCORE_FILE_W];
                    scores.read_exact(&mut entry).map_err(|_| shard_changed(s))?;
                    let score = (entry[0] == 1).then(|| f32::from_le_bytes(entry[1..].try_into().expect("four bytes")));
                    let a = Self::assess(&classifier, &config, &doc, |_| score);
                    let (decision, rule, evidence) = decide(&a, &thresholds);
                    if let (Assessment::Scored(lang, _), LedgerDecision::Removed) = (&a, decision) {
                        *removed.entry(lang.clone()).or_default() += 1;
                    }
                    rows.push(LedgerRow::of_document(&doc, decision, rule, evidence));
                    if decision != LedgerDecision::Removed {
                        out.push(doc)?;
                    }
                }
                if scores.read(&mut [0u8; 1])? != 0 {
                    return Err(shard_changed(s));
                }
                let (ledger, stats) = prov_filter::write_counted_ledger(cx, rows)?;
                let written = out.finish()?;
                let mut held = parts.lock().expect("no task panics holding the parts");
                held.0.put(i, (written, ledger, stats));
                for (lang, n) in removed {
                    *held.1.entry(lang).or_default() += n;
                }
                Ok::<_, StageError>(())
            })
        })?;
        let (parts, removed) = parts.into_inner().expect("no task panicked holding the parts");
        let by_language = threshold_summary(&thresholds, &counts, &removed);
        let mut out = parts.finish(cx)?;
        out.stats.insert("thresholds".into(), Value::Object(by_language));
        out.stats.insert("score_quantiles".into(), Value::Object(quantiles));
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

/// What map task `S` (the scoring pass over shard `S`) leaves for the reduce step: how many
/// documents of each language it scored, and two work files: every document's score
/// (`scores-S.bin`, [`SCORE_FILE_W`] bytes a document, for pass 2) and the scored documents'
/// languages and scores as one sorted run (`sorted-S.bin`, [`SCORE_W`] bytes a record, for
/// the thresholds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Scored {
    counts: BTreeMap<String, u64>,
    scores: WorkFileRef,
    sorted: WorkFileRef,
}

/// The name of shard `shard`'s work file `name`.
fn file_name(name: &str, shard: usize) -> String {
    format!("{name}-{shard:06}.bin")
}

impl Scored {
    /// The paths of the two files, each checked to be what task `task` wrote under the name
    /// the reduce step expects.
    fn check(&self, work: &Path, task: usize) -> Result<(PathBuf, PathBuf), StageError> {
        Ok((
            self.scores.check_named(work, task, &file_name("scores", task))?,
            self.sorted.check_named(work, task, &file_name("sorted", task))?,
        ))
    }
}

/// The scoring pass over one shard (a map task): every document's score to `scores-S.bin`,
/// the scored ones by language and score to `sorted-S.bin`; nothing per document stays in
/// memory but the shard's sort records.
fn score_shard(
    cx: &StageContext<'_>,
    classifier: &Classifier,
    config: &ToxicityConfig,
    work: &Path,
    i: usize,
    shard: &prov_manifest::ShardRef,
) -> Result<Scored, StageError> {
    let chunk_chars = config.chunk_chars as usize;
    let languages: Vec<&str> = classifier.languages().collect();
    let mut file = WorkFile::create(work, &file_name("scores", i))?;
    let mut records = Vec::new();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for doc in shard_documents(cx.store, &shard.digest)? {
        let doc = doc?;
        let a = ToxicityStage::assess(classifier, config, &doc, |m| classifier.score(m, &doc.text, chunk_chars));
        let mut entry = [0u8; SCORE_FILE_W];
        if let Assessment::Scored(lang, score) = a {
            let index = languages.binary_search(&lang.as_str()).expect("scored by one of its models");
            let mut r = [0u8; SCORE_W];
            r[..4].copy_from_slice(&(index as u32).to_be_bytes());
            r[4..].copy_from_slice(&sortable(f64::from(score)).to_be_bytes());
            records.push(r);
            *counts.entry(lang).or_default() += 1;
            entry[0] = 1;
            entry[1..].copy_from_slice(&score.to_le_bytes());
        }
        file.write_all(&entry)?;
    }
    let mut sorted = WorkFile::create(work, &file_name("sorted", i))?;
    write_run_to(&mut records, &mut sorted)?;
    Ok(Scored { counts, scores: file.finish()?, sorted: sorted.finish()? })
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

    /// The thresholds as the stage computed them before its scores went to disk (each
    /// language's scores sorted in memory): the reference for [`thresholds_from_sorted`].
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

    fn through_disk(languages: &[&str], scores: &[(usize, f64)], config: &ToxicityConfig) -> Thresholds {
        let dir = tempfile::tempdir().unwrap();
        let sort = ExternalSort::<[u8; SCORE_W]>::new(dir.path(), "t", 64);
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        // Runs of up to 7 records, as shards would hand them over.
        for chunk in scores.chunks(7) {
            sort.add_run(
                chunk
                    .iter()
                    .map(|&(l, v)| {
                        *counts.entry(languages[l].to_owned()).or_default() += 1;
                        let mut r = [0u8; SCORE_W];
                        r[..4].copy_from_slice(&(l as u32).to_be_bytes());
                        r[4..].copy_from_slice(&sortable(v).to_be_bytes());
                        r
                    })
                    .collect(),
            )
            .unwrap();
        }
        thresholds_from_sorted(languages, &counts, sort.finish().unwrap(), config).unwrap()
    }

    #[test]
    fn sortable_bits_follow_total_cmp() {
        let mut v = vec![-1.5, 0.0, -0.0, 3.25, f64::MIN, f64::MAX, -1e-300, 1e-300, f64::NEG_INFINITY, f64::INFINITY];
        let mut by_bits = v.clone();
        v.sort_by(f64::total_cmp);
        by_bits.sort_by_key(|x| sortable(*x));
        assert_eq!(
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            by_bits.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        for x in v {
            assert_eq!(unsortable(sortable(x)).to_bits(), x.to_bits());
        }
    }

    proptest::proptest! {
        /// Thresholds and data-card quantiles from the external sort equal, to the bit, those
        /// of each language's scores sorted in memory, with languages under and over
        /// `min_documents` and ties.
        #[test]
        fn thresholds_through_disk_equal_the_in_memory_ones(
            scores in proptest::collection::vec((0usize..4, -8i32..8, 0u8..3), 0..200),
            q in 0.01f64..0.99,
            min_documents in 1u32..30,
        ) {
            let languages = ["de", "en", "fr", "sw"];
            let scores: Vec<(usize, f64)> =
                scores.iter().map(|&(l, v, frac)| (l, f64::from(v) + f64::from(frac) / 3.0)).collect();
            let config: ToxicityConfig =
                serde_json::from_value(json!({ "quantile": q, "min_documents": min_documents })).unwrap();
            let mut by_language: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            for &(l, v) in &scores {
                by_language.entry(languages[l].to_owned()).or_default().push(v);
            }
            let (t_mem, q_mem) = thresholds_per_language(&mut by_language, &config);
            let (t_disk, q_disk) = through_disk(&languages, &scores, &config);
            proptest::prop_assert_eq!(format!("{t_mem:?}"), format!("{t_disk:?}"));
            proptest::prop_assert_eq!(serde_json::to_string(&q_mem).unwrap(), serde_json::to_string(&q_disk).unwrap());
        }
    }

    fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
        quantile_of(sorted.len(), q, |i| sorted[i])
    }

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
