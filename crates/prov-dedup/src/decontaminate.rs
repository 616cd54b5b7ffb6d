//! `decontaminate`: removes training documents that contain a benchmark prompt, as the
//! Apertus report describes: 8-gram token matches against pinned benchmark sets, overlaps
//! shorter than 5 tokens ignored, and a benchmark example contaminated when the overlaps cover
//! more than half of its prompt.
//!
//! Inputs: `docs`, a dataset, and `benchmark`, a source: a JSON Lines (or Parquet) file, or a
//! directory of them (files in path order), read like the `shard` stage reads its sources.
//! Each benchmark example is a document whose `text` is the benchmark prompt and whose `id`
//! names it; ids must be unique. Every training document gets one ledger row:
//!
//! | rule | decision | when |
//! | --- | --- | --- |
//! | `decontaminate:clean` | kept | no benchmark example's coverage exceeds `max_coverage` (evidence: the best partial coverage, when some n-gram matched; none otherwise) |
//! | `decontaminate:contaminated` | removed | some benchmark example's coverage exceeds `max_coverage` (evidence: that example) |
//!
//! The evidence is `{"benchmark": id, "coverage": "0.8125", "ngrams": 7}`: the example with
//! the highest coverage (the first in benchmark order on a tie), its coverage as a decimal
//! string with 4 digits after the point (rounded; the decision uses the unrounded value), and
//! the number of its prompt's n-gram positions found in the document. A contaminated
//! document's evidence also has `examples`, the number of benchmark examples it contaminates.
//!
//! # Tokens
//!
//! Until a tokenizer is pinned, tokens are normalised words: the text is lowercased
//! (`str::to_lowercase`, full Unicode), split on Unicode white space (`str::split_whitespace`),
//! and every character of Unicode general category Punctuation (`\p{P}`: connector, dash,
//! open, close, initial, final and other punctuation) is stripped from both ends of each word;
//! words that become empty are dropped. Punctuation inside a word stays (`don't`, `e-mail`,
//! `3.14`); symbols (`$`, `+`, `€`) are not punctuation and stay. So `"Hello, World!"` is
//! `["hello", "world"]` and `"« Tous les êtres »"` is `["tous", "les", "êtres"]`. Text
//! without white space between words (Chinese, Japanese, Thai) is one token per run: such
//! benchmarks match only once a real tokenizer replaces this one, which changes the stage
//! version.
//!
//! # Matching
//!
//! 1. **Index.** Every `ngram`-gram (window of `ngram` consecutive tokens) of every benchmark
//!    prompt is keyed by BLAKE3 of its tokens joined by single spaces (tokens never contain
//!    white space, so the join is unambiguous) — a stable hash, no `std::hash::Hasher` — and
//!    mapped to the list of (benchmark example, window start) pairs where it occurs. A prompt
//!    with fewer than `ngram` tokens has no n-gram and can never match: it is counted in the
//!    stats as `benchmark_too_short`, never dropped silently.
//! 2. **Scan.** For each training document, every window of its tokens is looked up. For each
//!    benchmark example, the set of its prompt's windows found anywhere in the document is
//!    collected (`ngrams` counts them); the covered prompt positions are the union of those
//!    windows (`[start, start + ngram)` each), merged into maximal spans of consecutive
//!    positions.
//! 3. **Overlap floor.** Spans shorter than `min_overlap` tokens are ignored. Every span is at
//!    least `ngram` tokens long, so with the defaults (`ngram: 8`, `min_overlap: 5`) the floor
//!    never drops a span; it matters when `ngram < min_overlap`.
//! 4. **Coverage.** Coverage is the number of covered prompt tokens in the remaining spans
//!    divided by the prompt's token count. An example is contaminated by the document when its
//!    coverage is *strictly greater* than `max_coverage` (default 0.5: exactly half is clean).
//!    A document contaminating at least one example is removed.
//!
//! Decisions are per document, so they depend neither on the thread count nor on the shards.
//! The index is a `HashMap` used for look-ups only, never iterated: its random state cannot
//! reach the output. It holds every benchmark window (a 32-byte key and a list per distinct
//! n-gram), which is small for benchmark sets; the documents are streamed shard by shard.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::LazyLock;

use prov_dataset::{LedgerDecision, read_documents_as};
use prov_exec::{
    ConfigError, InputSpec, MapResultText, MapResults, Stage, StageContext, StageError, StageOutput, parse_params,
};
use prov_manifest::{Determinism, OutputType};
use prov_store::{Digest, Hasher};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The resolved configuration of a `decontaminate` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecontaminateConfig {
    /// Tokens per n-gram.
    #[serde(default = "default_ngram")]
    pub ngram: u32,
    /// Overlapping spans shorter than this many tokens are ignored.
    #[serde(default = "default_min_overlap")]
    pub min_overlap: u32,
    /// An example is contaminated when its matched spans cover more than this fraction of its
    /// prompt's tokens (0 ≤ `max_coverage` < 1).
    #[serde(default = "default_max_coverage")]
    pub max_coverage: f64,
}

fn default_ngram() -> u32 {
    8
}
fn default_min_overlap() -> u32 {
    5
}
fn default_max_coverage() -> f64 {
    0.5
}

/// The longest n-gram this stage accepts.
const MAX_NGRAM: u32 = 256;

static PUNCTUATION: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\p{P}$").expect("a valid pattern"));

fn is_punctuation(c: char) -> bool {
    let mut buf = [0; 4];
    PUNCTUATION.is_match(c.encode_utf8(&mut buf))
}

/// The tokens of a text: lowercased words split on white space, with Unicode punctuation
/// stripped from both ends; empty words dropped (see the module documentation).
pub fn ngram_tokens(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split_whitespace()
        .map(|w| w.trim_matches(is_punctuation))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The stable key of an n-gram: BLAKE3 of its tokens joined by single spaces.
fn gram_key(gram: &[String]) -> Digest {
    let mut h = Hasher::new();
    for (i, t) in gram.iter().enumerate() {
        if i > 0 {
            h.update(b" ");
        }
        h.update(t.as_bytes());
    }
    h.finalize()
}

/// The best match of one document against the benchmark.
#[derive(Debug, Clone, PartialEq)]
pub struct Contamination {
    /// The benchmark example with the highest coverage (the first in benchmark order on a tie).
    pub benchmark: String,
    /// Covered prompt tokens / prompt tokens, after the overlap floor.
    pub coverage: f64,
    /// The number of the example's prompt windows found in the document.
    pub ngrams: u64,
    /// The number of examples whose coverage exceeds `max_coverage`.
    pub contaminated_examples: u64,
}

/// Every n-gram of every benchmark prompt, keyed by its stable hash.
#[derive(Debug)]
pub struct BenchmarkIndex {
    ngram: usize,
    min_overlap: usize,
    max_coverage: f64,
    ids: Vec<String>,
    lengths: Vec<usize>,
    grams: HashMap<Digest, Vec<(u32, u32)>>,
    too_short: u64,
    windows: u64,
}

impl BenchmarkIndex {
    /// An empty index for a configuration; add examples in benchmark order.
    pub fn new(config: &DecontaminateConfig) -> Self {
        Self {
            ngram: config.ngram.max(1) as usize,
            min_overlap: config.min_overlap as usize,
            max_coverage: config.max_coverage,
            ids: Vec::new(),
            lengths: Vec::new(),
            grams: HashMap::new(),
            too_short: 0,
            windows: 0,
        }
    }

    /// Adds one benchmark example; fails when its id was already added.
    ///
    /// # Errors
    ///
    /// A message naming the repeated id.
    pub fn add(&mut self, id: &str, prompt: &str) -> Result<(), String> {
        if self.ids.len() >= u32::MAX as usize {
            return Err("more than 2^32 - 1 benchmark examples".into());
        }
        if self.ids.iter().any(|i| i == id) {
            return Err(format!("benchmark example id `{id}` appears twice; ids must name examples"));
        }
        let example = self.ids.len() as u32;
        let tokens = ngram_tokens(prompt);
        if tokens.len() < self.ngram {
            self.too_short += 1;
        }
        for (start, gram) in tokens.windows(self.ngram).enumerate() {
            let start = u32::try_from(start).map_err(|_| format!("benchmark example `{id}` is too long"))?;
            self.grams.entry(gram_key(gram)).or_default().push((example, start));
            self.windows += 1;
        }
        self.ids.push(id.to_owned());
        self.lengths.push(tokens.len());
        Ok(())
    }

    /// The number of indexed examples.
    pub fn examples(&self) -> usize {
        self.ids.len()
    }

    /// The number of examples with fewer than `ngram` tokens (never matched).
    pub fn too_short(&self) -> u64 {
        self.too_short
    }

    /// The best match of a document, if any of its n-grams is a benchmark n-gram.
    pub fn scan(&self, text: &str) -> Option<Contamination> {
        if self.grams.is_empty() {
            return None;
        }
        let tokens = ngram_tokens(text);
        // Example -> its prompt windows found in the document.
        let mut found: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
        for gram in tokens.windows(self.ngram) {
            if let Some(hits) = self.grams.get(&gram_key(gram)) {
                for &(example, start) in hits {
                    found.entry(example).or_default().insert(start);
                }
            }
        }
        let mut best: Option<Contamination> = None;
        let mut contaminated = 0;
        for (example, starts) in found {
            let covered = self.covered(&starts);
            let coverage = covered as f64 / self.lengths[example as usize] as f64;
            if coverage > self.max_coverage {
                contaminated += 1;
            }
            if best.as_ref().is_none_or(|b| coverage > b.coverage) {
                best = Some(Contamination {
                    benchmark: self.ids[example as usize].clone(),
                    coverage,
                    ngrams: starts.len() as u64,
                    contaminated_examples: 0,
                });
            }
        }
        best.map(|b| Contamination { contaminated_examples: contaminated, ..b })
    }

    /// Covered prompt tokens: windows merged into maximal spans, spans under `min_overlap` dropped.
    fn covered(&self, starts: &BTreeSet<u32>) -> usize {
        let mut total = 0;
        let mut span: Option<(usize, usize)> = None;
        for &s in starts {
            let (s, e) = (s as usize, s as usize + self.ngram);
            span = match span {
                Some((a, b)) if s <= b => Some((a, b.max(e))),
                Some((a, b)) => {
                    total += self.span_len(a, b);
                    Some((s, e))
                }
                None => Some((s, e)),
            };
        }
        if let Some((a, b)) = span {
            total += self.span_len(a, b);
        }
        total
    }

    fn span_len(&self, a: usize, b: usize) -> usize {
        if b - a < self.min_overlap { 0 } else { b - a }
    }

    /// The ledger decision for a document.
    fn decide(&self, text: &str) -> (LedgerDecision, &'static str, Option<Map<String, Value>>) {
        let Some(c) = self.scan(text) else {
            return (LedgerDecision::Kept, "decontaminate:clean", None);
        };
        let mut evidence = Map::new();
        evidence.insert("benchmark".into(), Value::from(c.benchmark));
        evidence.insert("coverage".into(), Value::from(format!("{:.4}", c.coverage)));
        evidence.insert("ngrams".into(), Value::from(c.ngrams));
        if c.contaminated_examples > 0 {
            evidence.insert("examples".into(), Value::from(c.contaminated_examples));
            (LedgerDecision::Removed, "decontaminate:contaminated", Some(evidence))
        } else {
            (LedgerDecision::Kept, "decontaminate:clean", Some(evidence))
        }
    }
}

/// Removes training documents that contain benchmark prompts, with a ledger.
pub struct DecontaminateStage;

impl Stage for DecontaminateStage {
    fn kind(&self) -> &'static str {
        "decontaminate"
    }
    // 2: the ledger has an id directory (prov_dataset::directory).
    // 3: the ledger record holds its shards' Merkle root, the list is in its parts record
    // (ledger schema 2), so that a proof stays logarithmic in the shard count.
    fn version(&self) -> u32 {
        3
    }
    fn summary(&self) -> &'static str {
        "remove documents whose n-grams cover more than a fraction of a pinned benchmark prompt, with a ledger"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let config: DecontaminateConfig = parse_params(params)?;
        if config.ngram == 0 || config.ngram > MAX_NGRAM {
            return Err(ConfigError::at(&["ngram"], format!("`ngram` must be between 1 and {MAX_NGRAM}")));
        }
        if config.min_overlap == 0 {
            return Err(ConfigError::at(&["min_overlap"], "`min_overlap` must be at least 1 token"));
        }
        if !(0.0..1.0).contains(&config.max_coverage) {
            return Err(ConfigError::at(&["max_coverage"], "`max_coverage` is a fraction: at least 0 and below 1")
                .with_hint("coverage can never exceed 1, so `max_coverage: 1` would remove nothing"));
        }
        Ok(serde_json::to_value(config).expect("numbers encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("docs", vec![OutputType::Dataset]), ("benchmark", vec![OutputType::Source])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        prov_filter::outputs()
    }
    fn map_tasks(&self, cx: &StageContext<'_>) -> Result<Option<usize>, StageError> {
        prov_filter::shard_tasks(cx)
    }

    fn map(&self, cx: &StageContext<'_>, tasks: &[usize]) -> Result<Vec<MapResultText>, StageError> {
        // Built once per run in this process, not once per batch of map tasks.
        let index = cx.prepared(|| benchmark_index(cx))?;
        prov_filter::map_decided(cx, tasks, |doc, removed: &mut BTreeMap<String, u64>| {
            let (decision, rule, evidence) = index.decide(&doc.text);
            tally_removal(decision, evidence.as_ref(), removed);
            (decision, rule.to_owned(), evidence)
        })
    }

    fn reduce(&self, cx: &StageContext<'_>, results: MapResults<'_>) -> Result<StageOutput, StageError> {
        let (mut out, removed_by_benchmark) = reduce_by_benchmark(cx, results)?;
        // Built after the shards are folded, so that the index and the map results are not
        // held at once.
        let index = benchmark_index(cx)?;
        out.stats.extend([
            ("benchmark_examples".to_owned(), Value::from(index.examples())),
            ("benchmark_too_short".to_owned(), Value::from(index.too_short())),
            ("benchmark_ngrams".to_owned(), Value::from(index.windows)),
            ("contaminating_examples".to_owned(), Value::from(removed_by_benchmark.len())),
            ("removed_by_benchmark".to_owned(), serde_json::to_value(removed_by_benchmark).expect("counts encode")),
        ]);
        Ok(out)
    }
}

/// Counts a removal under the benchmark example its evidence names: what a decontamination
/// filter's map task returns as its own counts.
pub(crate) fn tally_removal(
    decision: LedgerDecision,
    evidence: Option<&Map<String, Value>>,
    removed: &mut BTreeMap<String, u64>,
) {
    if decision == LedgerDecision::Removed
        && let Some(Value::String(b)) = evidence.and_then(|e| e.get("benchmark"))
    {
        *removed.entry(b.clone()).or_default() += 1;
    }
}

/// The reduce step of a decontamination filter: the filter's outputs and statistics, and the
/// removals per benchmark example summed over the map tasks' [`tally_removal`] counts.
pub(crate) fn reduce_by_benchmark(
    cx: &StageContext<'_>,
    results: MapResults<'_>,
) -> Result<(StageOutput, BTreeMap<String, u64>), StageError> {
    let mut removed_by_benchmark: BTreeMap<String, u64> = BTreeMap::new();
    let out = prov_filter::reduce_filtered(cx, results, |task, extra| {
        let removed: BTreeMap<String, u64> =
            serde_json::from_value(extra).map_err(|e| StageError::MapResult { task, message: e.to_string() })?;
        for (b, n) in removed {
            *removed_by_benchmark.entry(b).or_default() += n;
        }
        Ok(())
    })?;
    Ok((out, removed_by_benchmark))
}

/// The n-gram index of the stage's `benchmark` input, as its configuration reads it.
fn benchmark_index(cx: &StageContext<'_>) -> Result<BenchmarkIndex, StageError> {
    let config: DecontaminateConfig = parse_params(cx.config).map_err(StageError::Config)?;
    let mut index = BenchmarkIndex::new(&config);
    read_benchmark(cx, |id, text| index.add(id, text))?;
    Ok(index)
}

/// Hands every example of the stage's `benchmark` input to `add` (its id and text), in
/// benchmark order: the files of the source in path order, each file's documents in order.
pub(crate) fn read_benchmark(
    cx: &StageContext<'_>,
    mut add: impl FnMut(&str, &str) -> Result<(), String>,
) -> Result<(), StageError> {
    let files = prov_filter::source_files(cx.store, &cx.input("benchmark")?.digest, "benchmark", "a benchmark source")?;
    for (path, format, display) in files {
        for doc in read_documents_as(&path, format, Path::new(&display))? {
            let doc = doc?;
            add(&doc.id, &doc.text)
                .map_err(|m| StageError::Input { input: "benchmark".into(), message: format!("`{display}`: {m}") })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config() -> DecontaminateConfig {
        serde_json::from_value(DecontaminateStage.resolve_config(&json!({})).unwrap()).unwrap()
    }

    /// Sixteen tokens.
    const PROMPT: &str =
        "Question: which planet in the solar system has the largest number of known natural moons today?";

    fn index(prompts: &[(&str, &str)]) -> BenchmarkIndex {
        let mut i = BenchmarkIndex::new(&config());
        for (id, p) in prompts {
            i.add(id, p).unwrap();
        }
        i
    }

    fn words(text: &str, range: std::ops::Range<usize>) -> String {
        text.split_whitespace().skip(range.start).take(range.len()).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn tokens_are_lowercased_words_without_edge_punctuation() {
        assert_eq!(ngram_tokens("Hello, World!"), ["hello", "world"]);
        assert_eq!(ngram_tokens("« Tous les ÊTRES »\n"), ["tous", "les", "êtres"]);
        assert_eq!(
            ngram_tokens("don't e-mail 3.14 ¿Qué? (x) — $5 +1"),
            ["don't", "e-mail", "3.14", "qué", "x", "$5", "+1"]
        );
        assert_eq!(ngram_tokens("“quoted”… ‘single’ «ΣΊΣΥΦΟΣ»"), ["quoted", "single", "σίσυφος"]);
        assert!(ngram_tokens(" ... -- \t!").is_empty());
        assert_eq!(ngram_tokens(PROMPT).len(), 16);
    }

    #[test]
    fn defaults_are_explicit_and_checked() {
        let c = DecontaminateStage.resolve_config(&json!({})).unwrap();
        assert_eq!(c, json!({"ngram": 8, "min_overlap": 5, "max_coverage": 0.5}));
        assert!(DecontaminateStage.resolve_config(&json!({"ngram": 0})).is_err());
        assert!(DecontaminateStage.resolve_config(&json!({"min_overlap": 0})).is_err());
        assert!(DecontaminateStage.resolve_config(&json!({"max_coverage": 1.0})).is_err());
        assert!(DecontaminateStage.resolve_config(&json!({"max_coverage": -0.1})).is_err());
        assert!(DecontaminateStage.resolve_config(&json!({"max_coverage": 0.0})).is_ok());
        assert!(DecontaminateStage.resolve_config(&json!({"n": 8})).is_err());
    }

    #[test]
    fn most_of_a_prompt_contaminates() {
        let i = index(&[("q1", PROMPT), ("q2", "an unrelated prompt about cooking rice in a pot with water")]);
        let doc = format!("Trivia night. {}. Answers below.", words(PROMPT, 2..15).to_uppercase());
        let (decision, rule, evidence) = i.decide(&doc);
        assert_eq!((decision, rule), (LedgerDecision::Removed, "decontaminate:contaminated"));
        let e = Value::Object(evidence.unwrap());
        assert_eq!(e, json!({"benchmark": "q1", "coverage": "0.8125", "ngrams": 6, "examples": 1}));
    }

    #[test]
    fn a_six_token_fragment_does_not() {
        let i = index(&[("q1", PROMPT)]);
        let doc = format!("Someone asked {} and left.", words(PROMPT, 3..9));
        assert_eq!(i.decide(&doc), (LedgerDecision::Kept, "decontaminate:clean", None));
        assert!(i.scan("nothing in common at all with the benchmark prompt here").is_none());
    }

    #[test]
    fn exactly_half_is_clean_and_more_is_contaminated() {
        let i = index(&[("q1", PROMPT)]);
        // The first 8 tokens: one window, 8 of 16 tokens covered.
        let (decision, rule, evidence) = i.decide(&words(PROMPT, 0..8));
        assert_eq!((decision, rule), (LedgerDecision::Kept, "decontaminate:clean"));
        assert_eq!(Value::Object(evidence.unwrap()), json!({"benchmark": "q1", "coverage": "0.5000", "ngrams": 1}));
        // The first 9 tokens: two windows, 9 of 16 tokens covered.
        let (decision, _, evidence) = i.decide(&words(PROMPT, 0..9));
        assert_eq!(decision, LedgerDecision::Removed);
        assert_eq!(Value::Object(evidence.unwrap())["coverage"], "0.5625");
        // Two separate windows: 0..8 and 8..16 found apart still cover the whole prompt.
        let apart = format!("{} filler words here {}", words(PROMPT, 8..16), words(PROMPT, 0..8));
        assert!((i.scan(&apart).unwrap().coverage - 1.0).abs() < f64::EPSILON);
    }

    #[test]
    fn min_overlap_drops_short_spans_and_short_prompts_are_counted() {
        let c = DecontaminateConfig { ngram: 2, min_overlap: 5, max_coverage: 0.1 };
        let mut i = BenchmarkIndex::new(&c);
        i.add("q1", PROMPT).unwrap();
        i.add("short", "too short").unwrap();
        i.add("empty", "").unwrap();
        assert!(i.add("q1", "again").is_err());
        assert_eq!((i.examples(), i.too_short()), (3, 1));
        let c8 = config();
        let mut i8 = BenchmarkIndex::new(&c8);
        i8.add("a", "seven tokens are not enough for eight").unwrap();
        assert_eq!(i8.too_short(), 1);
        // Two 2-grams next to each other: a 3-token span, under the floor of 5.
        let m = i.scan(&words(PROMPT, 4..7)).unwrap();
        assert_eq!((m.coverage, m.ngrams, m.contaminated_examples), (0.0, 2, 0));
        // Five tokens: one span of 5, kept; 5/16 > 0.1.
        let m = i.scan(&words(PROMPT, 4..9)).unwrap();
        assert_eq!((m.coverage, m.ngrams, m.contaminated_examples), (5.0 / 16.0, 4, 1));
    }

    #[test]
    fn the_best_example_is_reported_and_ties_go_to_the_first() {
        let i = index(&[("a", PROMPT), ("b", PROMPT)]);
        let m = i.scan(PROMPT).unwrap();
        assert_eq!((m.benchmark.as_str(), m.coverage, m.ngrams, m.contaminated_examples), ("a", 1.0, 9, 2));
        assert_eq!(gram_key(&["a".into(), "b".into()]), Digest::of(b"a b"));
    }
}
