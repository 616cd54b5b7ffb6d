//! AFM's decontamination (Apple Intelligence Foundation Language Models, 2024, §3.1.1 item 5):
//! "we remove documents that have 4-13 gram collisions with any of the benchmark datasets,
//! unless the collision count for a given n-gram reaches a 'common-usage' threshold of 1000".
//!
//! Two stages, as datatrove splits its decontamination into an indexer and a filter:
//!
//! - `benchmark-ngrams` ([`BenchmarkNgramsStage`]) counts, over a corpus, the documents (or the
//!   occurrences) of every benchmark n-gram of `min_n` to `max_n` tokens: a map task per input
//!   shard, a reduce step that sums. It pins the counts as a file ([`CountsFile`]), so that the
//!   threshold can be checked against them and they can be recounted.
//! - `ngram-decontaminate` ([`NgramDecontaminateStage`]) removes every document that holds a
//!   benchmark n-gram whose count is under `threshold`, with a ledger row naming the n-gram,
//!   the benchmark example and the count ([`Decontaminator::assess`]).
//!
//! Tokens are the normalised words of the `decontaminate` stage ([`ngram_tokens`]). The
//! benchmark's n-grams are held in a trie of word ids ([`BenchmarkGrams`]): n-grams are
//! compared token by token, so no hash collision can decide a match, and a corpus word that
//! no benchmark example holds ends every walk at once. What the stages hold grows with the
//! benchmark's n-grams, never with the corpus. The book's "The AFM recipe" is the
//! specification an independent verifier reads (`tests/python/afm_decontaminate_reference.py`
//! implements it from there).

use std::collections::{BTreeMap, HashMap, HashSet};

use prov_dataset::{LedgerDecision, shard_documents};
use prov_exec::{
    ConfigError, InputSpec, MapResultText, MapResults, Stage, StageContext, StageError, StageOutput, parse_params,
};
use prov_manifest::{Determinism, OutputRef, OutputType, to_canonical_bytes};
use prov_store::ObjectKind;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::decontaminate::{ngram_tokens, read_benchmark, reduce_by_benchmark, tally_removal};

/// The longest n-gram the stages accept, in tokens.
pub const MAX_N: u32 = 64;

/// The counts file's `format` member.
pub const COUNTS_FORMAT: &str = "prov-benchmark-ngrams";

/// What a corpus document adds to the count of a benchmark n-gram it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CountMode {
    /// 1, however often it holds the n-gram.
    Documents,
    /// The number of positions where it holds the n-gram.
    Occurrences,
}

/// The resolved configuration of a `benchmark-ngrams` stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchmarkNgramsConfig {
    /// The shortest n-gram, in tokens.
    #[serde(default = "default_min_n")]
    pub min_n: u32,
    /// The longest n-gram, in tokens.
    #[serde(default = "default_max_n")]
    pub max_n: u32,
    /// What a document adds to a count.
    #[serde(default = "default_count")]
    pub count: CountMode,
}

fn default_min_n() -> u32 {
    4
}
fn default_max_n() -> u32 {
    13
}
fn default_count() -> CountMode {
    CountMode::Documents
}

/// Checks a configuration: 1 ≤ `min_n` ≤ `max_n` ≤ [`MAX_N`].
///
/// # Errors
///
/// The offending field, with a hint.
pub fn resolve_counting(params: &Value) -> Result<BenchmarkNgramsConfig, ConfigError> {
    let config: BenchmarkNgramsConfig = parse_params(params)?;
    if config.min_n == 0 {
        return Err(ConfigError::at(&["min_n"], "must be at least 1 token").with_hint("the report uses 4"));
    }
    if config.max_n < config.min_n || config.max_n > MAX_N {
        return Err(ConfigError::at(
            &["max_n"],
            format!("must be from `min_n` ({}) to {MAX_N}, got {}", config.min_n, config.max_n),
        )
        .with_hint("the report uses 13"));
    }
    Ok(config)
}

/// One node of the trie: the n-gram of the words on the path from the root to it.
#[derive(Debug, Clone, Copy)]
struct Node {
    parent: u32,
    word: u32,
    depth: u32,
    /// The first example, in benchmark order, that holds the n-gram.
    example: u32,
}

/// A benchmark n-gram held by a text: its node and the position (token index) of its first
/// token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    /// The n-gram ([`BenchmarkGrams::text`], [`BenchmarkGrams::length`]).
    pub ngram: u32,
    /// Where it starts in the text's tokens.
    pub position: u32,
}

/// Every n-gram of `min_n` to `max_n` tokens of every benchmark example, as a trie of word
/// ids. Node ids follow the order of insertion, so they are the same for the same benchmark
/// and lengths on any machine; they never leave a run (files and ledgers hold n-gram texts).
/// The maps are used for look-ups only, never iterated.
#[derive(Debug)]
pub struct BenchmarkGrams {
    min_n: usize,
    max_n: usize,
    vocabulary: HashMap<String, u32>,
    words: Vec<String>,
    children: HashMap<(u32, u32), u32>,
    nodes: Vec<Node>,
    examples: Vec<String>,
    seen: HashSet<String>,
    too_short: u64,
    ngrams: u64,
}

impl BenchmarkGrams {
    /// An empty trie for n-grams of `min_n` to `max_n` tokens; add examples in benchmark order.
    pub fn new(min_n: u32, max_n: u32) -> Self {
        Self {
            min_n: min_n.max(1) as usize,
            max_n: max_n.max(min_n).max(1) as usize,
            vocabulary: HashMap::new(),
            words: Vec::new(),
            children: HashMap::new(),
            nodes: vec![Node { parent: 0, word: 0, depth: 0, example: 0 }],
            examples: Vec::new(),
            seen: HashSet::new(),
            too_short: 0,
            ngrams: 0,
        }
    }

    /// Adds one benchmark example.
    ///
    /// # Errors
    ///
    /// A message when its id was already added, or when the trie would exceed 2^32 - 1 nodes.
    pub fn add(&mut self, id: &str, text: &str) -> Result<(), String> {
        if !self.seen.insert(id.to_owned()) {
            return Err(format!("benchmark example id `{id}` appears twice; ids must name examples"));
        }
        let example = u32::try_from(self.examples.len()).map_err(|_| "more than 2^32 - 1 benchmark examples")?;
        self.examples.push(id.to_owned());
        let tokens = ngram_tokens(text);
        if tokens.len() < self.min_n {
            self.too_short += 1;
            return Ok(());
        }
        let ids: Vec<u32> = tokens.into_iter().map(|t| self.word_id(t)).collect::<Result<_, _>>()?;
        for start in 0..=ids.len() - self.min_n {
            let mut node = 0;
            for &word in &ids[start..ids.len().min(start + self.max_n)] {
                node = match self.children.get(&(node, word)) {
                    Some(&child) => child,
                    None => self.new_node(node, word, example)?,
                };
            }
        }
        Ok(())
    }

    fn word_id(&mut self, word: String) -> Result<u32, String> {
        if let Some(&id) = self.vocabulary.get(&word) {
            return Ok(id);
        }
        let id = u32::try_from(self.words.len()).map_err(|_| "more than 2^32 - 1 distinct benchmark words")?;
        self.vocabulary.insert(word.clone(), id);
        self.words.push(word);
        Ok(id)
    }

    fn new_node(&mut self, parent: u32, word: u32, example: u32) -> Result<u32, String> {
        let id = u32::try_from(self.nodes.len())
            .ok()
            .filter(|&id| id < u32::MAX)
            .ok_or("the benchmark has more than 2^32 - 2 n-gram prefixes")?;
        let depth = self.nodes[parent as usize].depth + 1;
        self.nodes.push(Node { parent, word, depth, example });
        self.children.insert((parent, word), id);
        if depth as usize >= self.min_n {
            self.ngrams += 1;
        }
        Ok(id)
    }

    /// The number of examples added.
    pub fn examples(&self) -> usize {
        self.examples.len()
    }

    /// The number of examples with fewer than `min_n` tokens (they hold no n-gram).
    pub fn too_short(&self) -> u64 {
        self.too_short
    }

    /// The number of distinct benchmark n-grams.
    pub fn ngrams(&self) -> u64 {
        self.ngrams
    }

    /// The lengths of the n-grams, in tokens.
    pub fn lengths(&self) -> (usize, usize) {
        (self.min_n, self.max_n)
    }

    /// Every benchmark n-gram a text holds, at every position: by position, then by length.
    pub fn scan(&self, text: &str) -> Vec<Hit> {
        let ids: Vec<Option<u32>> =
            ngram_tokens(text).iter().map(|t| self.vocabulary.get(t.as_str()).copied()).collect();
        let mut hits = Vec::new();
        for start in 0..ids.len() {
            let mut node = 0;
            for word in &ids[start..ids.len().min(start + self.max_n)] {
                let Some(&child) = word.and_then(|w| self.children.get(&(node, w))) else { break };
                node = child;
                if self.length(node) >= self.min_n {
                    hits.push(Hit { ngram: node, position: start as u32 });
                }
            }
        }
        hits
    }

    /// The length of n-gram `ngram`, in tokens.
    pub fn length(&self, ngram: u32) -> usize {
        self.nodes[ngram as usize].depth as usize
    }

    /// The text of n-gram `ngram`: its tokens joined by single spaces.
    pub fn text(&self, ngram: u32) -> String {
        let mut words = Vec::with_capacity(self.length(ngram));
        let mut node = ngram;
        while node != 0 {
            let n = self.nodes[node as usize];
            words.push(self.words[n.word as usize].as_str());
            node = n.parent;
        }
        words.reverse();
        words.join(" ")
    }

    /// The id of the first example, in benchmark order, that holds n-gram `ngram`.
    pub fn example(&self, ngram: u32) -> &str {
        &self.examples[self.nodes[ngram as usize].example as usize]
    }

    /// The benchmark n-gram with this text, if there is one.
    pub fn find(&self, text: &str) -> Option<u32> {
        let mut node = 0;
        for word in text.split(' ') {
            let id = *self.vocabulary.get(word)?;
            node = *self.children.get(&(node, id))?;
        }
        (self.length(node) >= self.min_n).then_some(node)
    }
}

/// The `counts` file of a `benchmark-ngrams` stage (the book's "The AFM recipe" gives its
/// members). Written in canonical JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CountsFile {
    /// [`COUNTS_FORMAT`].
    pub format: String,
    /// 1.
    pub version: u32,
    /// The shortest n-gram counted.
    pub min_n: u32,
    /// The longest n-gram counted.
    pub max_n: u32,
    /// What a document added.
    pub count: CountMode,
    /// The digest of the benchmark source the n-grams are of.
    pub benchmark: String,
    /// The digest of the dataset counted: the counts hold for this corpus only.
    pub corpus: String,
    /// The number of benchmark examples.
    pub benchmark_examples: u64,
    /// The number of corpus documents read.
    pub documents: u64,
    /// Each benchmark n-gram with a count of at least 1 and its count, by text (byte order).
    pub ngrams: Vec<(String, u64)>,
}

impl CountsFile {
    /// Reads a counts file, checking what a reader relies on: the format and version, lengths
    /// within bounds, n-grams strictly in byte order (so none twice) and counts of at least 1.
    ///
    /// # Errors
    ///
    /// A message naming what is wrong.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let file: Self =
            serde_json::from_slice(bytes).map_err(|e| format!("not a benchmark-ngrams counts file: {e}"))?;
        if file.format != COUNTS_FORMAT || file.version != 1 {
            return Err(format!(
                "format `{} {}` is not `{COUNTS_FORMAT} 1`; give the `counts` output of a benchmark-ngrams stage",
                file.format, file.version
            ));
        }
        if file.min_n == 0 || file.max_n < file.min_n || file.max_n > MAX_N {
            return Err(format!("n-gram lengths {} to {} are out of bounds", file.min_n, file.max_n));
        }
        for pair in file.ngrams.windows(2) {
            if pair[0].0.as_bytes() >= pair[1].0.as_bytes() {
                return Err(format!("n-gram `{}` is not after `{}` in byte order", pair[1].0, pair[0].0));
            }
        }
        if let Some((text, _)) = file.ngrams.iter().find(|(_, c)| *c == 0) {
            return Err(format!("n-gram `{text}` has a count of 0; the file lists only counts of at least 1"));
        }
        if file.count == CountMode::Documents
            && let Some((text, c)) = file.ngrams.iter().find(|(_, c)| *c > file.documents)
        {
            return Err(format!("n-gram `{text}` is counted in {c} documents of the {} counted", file.documents));
        }
        Ok(file)
    }
}

/// What one map task of `benchmark-ngrams` returns: its shard's documents and each n-gram's
/// count there, by n-gram id.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShardCounts {
    documents: u64,
    counts: Vec<(u32, u64)>,
}

/// Counts the benchmark's n-grams over a corpus and pins the counts.
pub struct BenchmarkNgramsStage;

impl Stage for BenchmarkNgramsStage {
    fn kind(&self) -> &'static str {
        "benchmark-ngrams"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "count, over a corpus, the documents holding each 4- to 13-gram of a pinned benchmark (AFM's common-usage \
         counts), as a file"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        Ok(serde_json::to_value(resolve_counting(params)?).expect("numbers and strings encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("docs", vec![OutputType::Dataset]), ("benchmark", vec![OutputType::Source])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("counts".into(), OutputType::File)]
    }
    fn map_tasks(&self, cx: &StageContext<'_>) -> Result<Option<usize>, StageError> {
        prov_filter::shard_tasks(cx)
    }

    fn map(&self, cx: &StageContext<'_>, tasks: &[usize]) -> Result<Vec<MapResultText>, StageError> {
        let config: BenchmarkNgramsConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let grams = cx.prepared(|| benchmark_grams(cx, config.min_n, config.max_n))?;
        prov_filter::map_input_shards(cx, tasks, |_, s| {
            let mut counts: HashMap<u32, u64> = HashMap::new();
            let mut documents = 0;
            for doc in shard_documents(cx.store, &s.digest)? {
                documents += 1;
                let mut held: Vec<u32> = grams.scan(&doc?.text).into_iter().map(|h| h.ngram).collect();
                if config.count == CountMode::Documents {
                    held.sort_unstable();
                    held.dedup();
                }
                for ngram in held {
                    *counts.entry(ngram).or_default() += 1;
                }
            }
            let mut counts: Vec<(u32, u64)> = counts.into_iter().collect();
            counts.sort_unstable();
            Ok(ShardCounts { documents, counts })
        })
    }

    fn reduce(&self, cx: &StageContext<'_>, results: MapResults<'_>) -> Result<StageOutput, StageError> {
        let config: BenchmarkNgramsConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let grams = benchmark_grams(cx, config.min_n, config.max_n)?;
        let mut totals: BTreeMap<u32, u64> = BTreeMap::new();
        let mut documents = 0;
        for result in results {
            let (task, value) = result?;
            let shard: ShardCounts =
                serde_json::from_value(value).map_err(|e| StageError::MapResult { task, message: e.to_string() })?;
            documents += shard.documents;
            for (ngram, n) in shard.counts {
                if ngram as usize >= grams.nodes.len() || grams.length(ngram) < grams.min_n {
                    return Err(StageError::MapResult {
                        task,
                        message: format!("n-gram {ngram} is not the benchmark's"),
                    });
                }
                *totals.entry(ngram).or_default() += n;
            }
        }
        let mut ngrams: Vec<(String, u64)> = totals.into_iter().map(|(g, n)| (grams.text(g), n)).collect();
        ngrams.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let file = CountsFile {
            format: COUNTS_FORMAT.into(),
            version: 1,
            min_n: config.min_n,
            max_n: config.max_n,
            count: config.count,
            benchmark: cx.input("benchmark")?.digest.to_string(),
            corpus: cx.input("docs")?.digest.to_string(),
            benchmark_examples: grams.examples() as u64,
            documents,
            ngrams,
        };
        let bytes = to_canonical_bytes(&file).map_err(|e| StageError::Worker(format!("encoding the counts: {e}")))?;
        let digest = cx.store.put_bytes(ObjectKind::Blob, &bytes)?;
        let mut out = StageOutput::default();
        out.outputs.insert("counts".into(), OutputRef { output_type: OutputType::File, digest });
        out.stats.extend([
            ("benchmark_examples".to_owned(), json!(grams.examples())),
            ("benchmark_too_short".to_owned(), json!(grams.too_short())),
            ("benchmark_distinct_ngrams".to_owned(), json!(grams.ngrams())),
            ("documents".to_owned(), json!(documents)),
            ("ngrams_found".to_owned(), json!(file.ngrams.len())),
        ]);
        Ok(out)
    }
}

/// The n-gram trie of the stage's `benchmark` input.
fn benchmark_grams(cx: &StageContext<'_>, min_n: u32, max_n: u32) -> Result<BenchmarkGrams, StageError> {
    let mut grams = BenchmarkGrams::new(min_n, max_n);
    read_benchmark(cx, |id, text| grams.add(id, text))?;
    Ok(grams)
}

/// The resolved configuration of an `ngram-decontaminate` stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NgramDecontaminateConfig {
    /// An n-gram whose count is at least this is common usage and removes nothing.
    #[serde(default = "default_threshold")]
    pub threshold: u64,
}

fn default_threshold() -> u64 {
    1000
}

/// A benchmark n-gram a document holds, with its count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// Its text.
    pub ngram: String,
    /// Its length in tokens.
    pub n: usize,
    /// The id of the example that names it.
    pub benchmark: String,
    /// Its count in the counts file (0 when absent).
    pub corpus_count: u64,
    /// The first position where the document holds it.
    pub position: u32,
    /// Whether its count is at least the threshold.
    pub common: bool,
}

/// A decision of `ngram-decontaminate`.
#[derive(Debug, Clone, PartialEq)]
pub struct Assessment {
    /// Kept or removed.
    pub decision: LedgerDecision,
    /// `ngram-decontaminate:clean`, `:common-usage` or `:contaminated`.
    pub rule: &'static str,
    /// The ledger evidence.
    pub evidence: Option<Map<String, Value>>,
}

/// The benchmark's n-grams with their corpus counts and a threshold: what decides documents.
#[derive(Debug)]
pub struct Decontaminator {
    grams: BenchmarkGrams,
    counts: HashMap<u32, u64>,
    threshold: u64,
    common: u64,
}

impl Decontaminator {
    /// Joins a benchmark's n-grams (of the counts file's lengths) with the counts file.
    ///
    /// # Errors
    ///
    /// A message when the lengths differ or the file names an n-gram the benchmark does not
    /// have.
    pub fn new(grams: BenchmarkGrams, file: &CountsFile, threshold: u64) -> Result<Self, String> {
        if grams.lengths() != (file.min_n as usize, file.max_n as usize) {
            return Err(format!(
                "the benchmark's n-grams are of {:?} tokens, the counts of {}..={}",
                grams.lengths(),
                file.min_n,
                file.max_n
            ));
        }
        let mut counts = HashMap::with_capacity(file.ngrams.len());
        let mut common = 0;
        for (text, n) in &file.ngrams {
            let ngram = grams
                .find(text)
                .ok_or_else(|| format!("the counts name `{text}`, which is not an n-gram of the benchmark"))?;
            counts.insert(ngram, *n);
            common += u64::from(*n >= threshold);
        }
        Ok(Self { grams, counts, threshold, common })
    }

    /// The number of n-grams of the counts file whose count reaches the threshold.
    pub fn common_ngrams(&self) -> u64 {
        self.common
    }

    /// Decides one document (the book's "The `ngram-decontaminate` stage").
    pub fn assess(&self, text: &str) -> Assessment {
        let held = self.held_ids(text);
        let rare = held.iter().filter(|h| h.2 < self.threshold).count();
        let common = held.len() - rare;
        // The deciding kind's longest n-gram; then the lowest count; then the lowest position.
        let pick = |want_common: bool| {
            held.iter()
                .filter(|h| (h.2 >= self.threshold) == want_common)
                .min_by_key(|&&(g, p, c)| (std::cmp::Reverse(self.grams.length(g)), c, p))
        };
        let (decision, rule, chosen) = if rare > 0 {
            (LedgerDecision::Removed, "ngram-decontaminate:contaminated", pick(false))
        } else if common > 0 {
            (LedgerDecision::Kept, "ngram-decontaminate:common-usage", pick(true))
        } else {
            (LedgerDecision::Kept, "ngram-decontaminate:clean", None)
        };
        let evidence = chosen.map(|&(g, p, c)| {
            let mut e = Map::new();
            e.insert("benchmark".into(), json!(self.grams.example(g)));
            e.insert("ngram".into(), json!(self.grams.text(g)));
            e.insert("n".into(), json!(self.grams.length(g)));
            e.insert("corpus_count".into(), json!(c));
            e.insert("position".into(), json!(p));
            e.insert("rare".into(), json!(rare));
            e.insert("common".into(), json!(common));
            e
        });
        Assessment { decision, rule, evidence }
    }

    /// Every distinct benchmark n-gram `text` holds, with its count, by first position, then
    /// by length: what `prov explain` lists (the stage needs only [`Self::assess`]).
    pub fn held(&self, text: &str) -> Vec<Held> {
        self.held_ids(text)
            .into_iter()
            .map(|(g, p, c)| Held {
                ngram: self.grams.text(g),
                n: self.grams.length(g),
                benchmark: self.grams.example(g).to_owned(),
                corpus_count: c,
                position: p,
                common: c >= self.threshold,
            })
            .collect()
    }

    /// The distinct n-grams `text` holds as (n-gram, first position, count), by first
    /// position, then by length.
    fn held_ids(&self, text: &str) -> Vec<(u32, u32, u64)> {
        let mut first: BTreeMap<u32, u32> = BTreeMap::new();
        for hit in self.grams.scan(text) {
            first.entry(hit.ngram).or_insert(hit.position);
        }
        let mut held: Vec<(u32, u32, u64)> =
            first.into_iter().map(|(g, p)| (g, p, self.counts.get(&g).copied().unwrap_or(0))).collect();
        held.sort_unstable_by_key(|&(g, p, _)| (p, self.grams.length(g)));
        held
    }
}

/// Removes documents holding a benchmark n-gram under the common-usage threshold.
pub struct NgramDecontaminateStage;

impl Stage for NgramDecontaminateStage {
    fn kind(&self) -> &'static str {
        "ngram-decontaminate"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "remove documents holding a benchmark n-gram whose corpus count is under AFM's common-usage threshold, with a \
         ledger naming the n-gram, the example and the count"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let config: NgramDecontaminateConfig = parse_params(params)?;
        if config.threshold == 0 {
            return Err(ConfigError::at(&["threshold"], "must be at least 1")
                .with_hint("with 0 every n-gram would be common usage and nothing removed; the report uses 1000"));
        }
        Ok(serde_json::to_value(config).expect("numbers encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![
            ("docs", vec![OutputType::Dataset]),
            ("benchmark", vec![OutputType::Source]),
            ("counts", vec![OutputType::File]),
        ])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        prov_filter::outputs()
    }
    fn map_tasks(&self, cx: &StageContext<'_>) -> Result<Option<usize>, StageError> {
        prov_filter::shard_tasks(cx)
    }

    fn map(&self, cx: &StageContext<'_>, tasks: &[usize]) -> Result<Vec<MapResultText>, StageError> {
        let decontaminator = cx.prepared(|| decontaminator(cx))?;
        prov_filter::map_decided(cx, tasks, |doc, removed: &mut BTreeMap<String, u64>| {
            let a = decontaminator.assess(&doc.text);
            tally_removal(a.decision, a.evidence.as_ref(), removed);
            (a.decision, a.rule.to_owned(), a.evidence)
        })
    }

    fn reduce(&self, cx: &StageContext<'_>, results: MapResults<'_>) -> Result<StageOutput, StageError> {
        let (mut out, removed_by_benchmark) = reduce_by_benchmark(cx, results)?;
        // The map tasks checked the counts against the benchmark and the corpus; the
        // statistics need only the file, not the benchmark's trie again.
        let config: NgramDecontaminateConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let file = CountsFile::parse(&cx.read_file_input("counts")?)
            .map_err(|message| StageError::Input { input: "counts".into(), message })?;
        let common = file.ngrams.iter().filter(|(_, n)| *n >= config.threshold).count();
        out.stats.extend([
            ("threshold".to_owned(), json!(config.threshold)),
            ("min_n".to_owned(), json!(file.min_n)),
            ("max_n".to_owned(), json!(file.max_n)),
            ("common_ngrams".to_owned(), json!(common)),
            ("counted_documents".to_owned(), json!(file.documents)),
            ("removed_by_benchmark".to_owned(), json!(removed_by_benchmark)),
        ]);
        Ok(out)
    }
}

/// The stage's counts file, checked against its `benchmark` input, joined with that
/// benchmark's n-grams.
fn decontaminator(cx: &StageContext<'_>) -> Result<Decontaminator, StageError> {
    let config: NgramDecontaminateConfig = parse_params(cx.config).map_err(StageError::Config)?;
    let counts_error = |message: String| StageError::Input { input: "counts".into(), message };
    let file = CountsFile::parse(&cx.read_file_input("counts")?).map_err(counts_error)?;
    let benchmark = cx.input("benchmark")?.digest.to_string();
    if file.benchmark != benchmark {
        return Err(counts_error(format!(
            "the counts were taken against benchmark {}, not this stage's `benchmark` ({benchmark}); count with the \
             same benchmark source",
            file.benchmark
        )));
    }
    let corpus = cx.input("docs")?.digest.to_string();
    if file.corpus != corpus {
        return Err(counts_error(format!(
            "the counts were taken over corpus {}, not this stage's `docs` ({corpus}); the common-usage counts are \
             those of the corpus filtered",
            file.corpus
        )));
    }
    let grams = benchmark_grams(cx, file.min_n, file.max_n)?;
    if grams.examples() as u64 != file.benchmark_examples {
        return Err(counts_error(format!(
            "the counts name {} benchmark examples, the benchmark has {}",
            file.benchmark_examples,
            grams.examples()
        )));
    }
    Decontaminator::new(grams, &file, config.threshold).map_err(counts_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grams(min_n: u32, max_n: u32, examples: &[(&str, &str)]) -> BenchmarkGrams {
        let mut g = BenchmarkGrams::new(min_n, max_n);
        for (id, text) in examples {
            g.add(id, text).unwrap();
        }
        g
    }

    fn counts(min_n: u32, max_n: u32, ngrams: &[(&str, u64)]) -> CountsFile {
        CountsFile {
            format: COUNTS_FORMAT.into(),
            version: 1,
            min_n,
            max_n,
            count: CountMode::Documents,
            benchmark: String::new(),
            corpus: String::new(),
            benchmark_examples: 0,
            documents: 10,
            ngrams: ngrams.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect(),
        }
    }

    #[test]
    fn configurations_are_explicit_and_checked() {
        let c = BenchmarkNgramsStage.resolve_config(&json!({})).unwrap();
        assert_eq!(c, json!({"min_n": 4, "max_n": 13, "count": "documents"}));
        assert!(BenchmarkNgramsStage.resolve_config(&json!({"count": "occurrences"})).is_ok());
        for bad in [json!({"min_n": 0}), json!({"min_n": 5, "max_n": 4}), json!({"max_n": 65}), json!({"count": "x"})] {
            assert!(BenchmarkNgramsStage.resolve_config(&bad).is_err(), "{bad}");
        }
        assert_eq!(NgramDecontaminateStage.resolve_config(&json!({})).unwrap(), json!({"threshold": 1000}));
        assert!(NgramDecontaminateStage.resolve_config(&json!({"threshold": 0})).is_err());
        assert!(NgramDecontaminateStage.resolve_config(&json!({"min_n": 4})).is_err());
    }

    #[test]
    fn every_length_from_min_to_max_is_a_benchmark_ngram() {
        // Five tokens, lengths 2 to 3: 4 bigrams and 3 trigrams.
        let g = grams(2, 3, &[("q", "One, two THREE four five."), ("short", "one")]);
        assert_eq!((g.examples(), g.too_short(), g.ngrams()), (2, 1, 7));
        assert_eq!(g.find("two three four").map(|n| g.text(n)), Some("two three four".into()));
        assert!(g.find("one").is_none(), "shorter than min_n");
        assert!(g.find("one two three four").is_none(), "longer than max_n");
        assert!(g.find("two  three").is_none());
        let hits = g.scan("zero one two three");
        let texts: Vec<(String, u32)> = hits.iter().map(|h| (g.text(h.ngram), h.position)).collect();
        assert_eq!(
            texts,
            [("one two".into(), 1), ("one two three".into(), 1), ("two three".into(), 2)],
            "by position, then by length"
        );
        let mut twice = grams(2, 3, &[("q", "a b")]);
        assert!(twice.add("q", "c d").is_err());
    }

    #[test]
    fn the_first_example_names_an_ngram() {
        let g = grams(2, 2, &[("a", "x y z"), ("b", "w x y")]);
        assert_eq!(g.example(g.find("x y").unwrap()), "a");
        assert_eq!(g.example(g.find("w x").unwrap()), "b");
    }

    #[test]
    fn a_count_at_the_threshold_is_common_and_one_under_is_rare() {
        let g = grams(2, 3, &[("q", "alpha beta gamma delta")]);
        let file = counts(2, 3, &[("alpha beta", 5), ("beta gamma", 4)]);
        let d = Decontaminator::new(g, &file, 5).unwrap();
        assert_eq!(d.common_ngrams(), 1);
        let a = d.assess("Alpha beta!");
        assert_eq!((a.decision, a.rule), (LedgerDecision::Kept, "ngram-decontaminate:common-usage"));
        let e = Value::Object(a.evidence.unwrap());
        assert_eq!(
            e,
            json!({"benchmark": "q", "ngram": "alpha beta", "n": 2, "corpus_count": 5, "position": 0, "rare": 0, "common": 1})
        );
        let a = d.assess("so: beta gamma");
        assert_eq!((a.decision, a.rule), (LedgerDecision::Removed, "ngram-decontaminate:contaminated"));
        assert_eq!(a.evidence.unwrap()["corpus_count"], 4);
        // Absent from the counts: 0, rare.
        let a = d.assess("gamma delta");
        assert_eq!((a.decision, a.evidence.unwrap()["corpus_count"].clone()), (LedgerDecision::Removed, json!(0)));
        assert_eq!(d.assess("nothing shared").rule, "ngram-decontaminate:clean");
        assert_eq!(d.assess("nothing shared").evidence, None);
    }

    #[test]
    fn the_evidence_is_the_longest_then_rarest_then_first() {
        let g = grams(2, 3, &[("q", "a b c d e f")]);
        let file = counts(2, 3, &[("a b", 1), ("a b c", 3), ("b c", 1), ("d e", 1), ("d e f", 2), ("e f", 9)]);
        let d = Decontaminator::new(g, &file, 10).unwrap();
        let a = d.assess("a b c x d e f");
        let e = a.evidence.unwrap();
        assert_eq!((e["ngram"].clone(), e["position"].clone()), (json!("d e f"), json!(4)), "length 3, count 2");
        assert_eq!((e["rare"].clone(), e["common"].clone()), (json!(6), json!(0)));
        assert_eq!(d.held("a b c x d e f").len(), 6);
        // A repeated n-gram counts once and is reported at its first position.
        let a = d.assess("x d e f y d e f a b c");
        assert_eq!(a.evidence.unwrap()["position"], 1);
    }

    #[test]
    fn a_counts_file_is_checked() {
        let g = || grams(2, 3, &[("q", "alpha beta gamma")]);
        assert!(Decontaminator::new(g(), &counts(2, 3, &[("alpha omega", 1)]), 5).is_err());
        assert!(Decontaminator::new(g(), &counts(2, 4, &[]), 5).is_err());
        let ok = to_canonical_bytes(&counts(2, 3, &[("alpha beta", 2), ("beta gamma", 1)])).unwrap();
        assert!(CountsFile::parse(&ok).is_ok());
        let unordered = to_canonical_bytes(&counts(2, 3, &[("beta gamma", 1), ("alpha beta", 2)])).unwrap();
        assert!(CountsFile::parse(&unordered).unwrap_err().contains("byte order"));
        let twice = to_canonical_bytes(&counts(2, 3, &[("alpha beta", 1), ("alpha beta", 1)])).unwrap();
        assert!(CountsFile::parse(&twice).is_err());
        let zero = to_canonical_bytes(&counts(2, 3, &[("alpha beta", 0)])).unwrap();
        assert!(CountsFile::parse(&zero).unwrap_err().contains("count of 0"));
        let over = to_canonical_bytes(&counts(2, 3, &[("alpha beta", 11)])).unwrap();
        assert!(CountsFile::parse(&over).unwrap_err().contains("in 11 documents of the 10"));
        let mut other = counts(2, 3, &[]);
        other.format = "something".into();
        assert!(CountsFile::parse(&to_canonical_bytes(&other).unwrap()).is_err());
    }
}
