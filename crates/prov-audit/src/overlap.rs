//! The audit's own benchmark-overlap check, written from the `decontaminate` stage's
//! specification (the book's page on the stage: tokens, windows, spans, coverage) and not from
//! its code, so that the decontamination claim can rescan kept documents without trusting the
//! stage's index.
//!
//! The method differs from the stage's on purpose: the stage keys every benchmark window by
//! its BLAKE3 hash in a map from window to (example, position) and scans each document's
//! windows against it; this check keeps windows as token slices in ordered sets, first asks
//! whether the document shares any window with the whole benchmark, and only then walks every
//! example's prompt positions against the document's windows.
//!
//! Tokens: the text lowercased, split on Unicode white space, Unicode punctuation (`\p{P}`)
//! trimmed from both ends of each word, empty words dropped.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use prov_store::{Digest, Store};
use regex::Regex;
use serde_json::Value;

static PUNCTUATION: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\p{P}").expect("a valid pattern"));

/// The tokens of a text, as the stage's specification defines them.
pub fn tokens(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut out = Vec::new();
    for word in lower.split_whitespace() {
        let chars: Vec<char> = word.chars().collect();
        let is_p = |c: &char| PUNCTUATION.is_match(c.encode_utf8(&mut [0; 4]));
        let start = chars.iter().position(|c| !is_p(c));
        let end = chars.iter().rposition(|c| !is_p(c));
        if let (Some(s), Some(e)) = (start, end) {
            out.push(chars[s..=e].iter().collect());
        }
    }
    out
}

/// The rule's parameters, read from the stage's recorded config.
#[derive(Debug, Clone, Copy)]
pub struct OverlapRule {
    /// Tokens per window.
    pub ngram: usize,
    /// Spans shorter than this are ignored.
    pub min_overlap: usize,
    /// Coverage above this contaminates.
    pub max_coverage: f64,
}

impl OverlapRule {
    /// The rule of a `decontaminate` stage's config: `ngram`, `min_overlap`, `max_coverage`.
    ///
    /// # Errors
    ///
    /// A message naming the field that is missing or out of range.
    pub fn from_config(config: &Value) -> Result<Self, String> {
        let whole = |name: &str| {
            config
                .get(name)
                .and_then(Value::as_u64)
                .filter(|&n| n >= 1)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| format!("the config's `{name}` is not a whole number of at least 1"))
        };
        let max_coverage = config
            .get("max_coverage")
            .and_then(Value::as_f64)
            .filter(|c| (0.0..1.0).contains(c))
            .ok_or_else(|| "the config's `max_coverage` is not a fraction below 1".to_owned())?;
        Ok(Self { ngram: whole("ngram")?, min_overlap: whole("min_overlap")?, max_coverage })
    }
}

/// Hands every example of a benchmark source to `add` (its id and text), in benchmark order:
/// its document files in path order, license files passed over, ids unique.
///
/// # Errors
///
/// A sentence naming the file or example at fault.
pub(crate) fn read_examples(store: &Store, source: &Digest, mut add: impl FnMut(String, &str)) -> Result<(), String> {
    let files = prov_dataset::source_files(store, source, &prov_license::detect::is_license_file)
        .map_err(|e| format!("benchmark `{source}`: {e}"))?
        .map_err(|e| format!("benchmark `{source}`: {e}"))?;
    let mut ids = BTreeSet::new();
    for f in files {
        let docs = prov_dataset::read_documents_as(&f.path, f.format, std::path::Path::new(&f.display))
            .map_err(|e| e.to_string())?;
        for doc in docs {
            let doc = doc.map_err(|e| e.to_string())?;
            if !ids.insert(doc.id.clone()) {
                return Err(format!("`{}`: benchmark example `{}` appears twice", f.display, doc.id));
            }
            add(doc.id, &doc.text);
        }
    }
    Ok(())
}

/// A benchmark example's id and its prompt's tokens.
#[derive(Debug)]
struct Example {
    id: String,
    tokens: Vec<String>,
}

/// A benchmark read for the check.
#[derive(Debug)]
pub struct Benchmark {
    rule: OverlapRule,
    examples: Vec<Example>,
    /// Every window of every prompt: a document that shares none is clean without a walk.
    windows: BTreeSet<Vec<String>>,
}

/// The example a document contaminates the most.
#[derive(Debug, Clone, PartialEq)]
pub struct Overlap {
    /// The example's id.
    pub example: String,
    /// Its covered share of prompt tokens.
    pub coverage: f64,
}

impl Benchmark {
    /// Reads the examples of a benchmark source (its document files, license files passed
    /// over, ids unique).
    ///
    /// # Errors
    ///
    /// A sentence naming the file or example at fault.
    pub fn read(store: &Store, source: &Digest, rule: OverlapRule) -> Result<Self, String> {
        let mut examples = Vec::new();
        read_examples(store, source, |id, text| examples.push(Example { tokens: tokens(text), id }))?;
        Ok(Self::new(rule, examples))
    }

    fn new(rule: OverlapRule, examples: Vec<Example>) -> Self {
        let windows = examples.iter().flat_map(|e| e.tokens.windows(rule.ngram).map(<[String]>::to_vec)).collect();
        Self { rule, examples, windows }
    }

    /// How many examples the benchmark holds.
    pub fn len(&self) -> usize {
        self.examples.len()
    }

    /// True when it holds none.
    pub fn is_empty(&self) -> bool {
        self.examples.is_empty()
    }

    /// The example `text` contaminates the most, when its coverage exceeds the rule's
    /// `max_coverage` (the first in benchmark order on a tie); `None` when the text is clean.
    pub fn contaminated(&self, text: &str) -> Option<Overlap> {
        let n = self.rule.ngram;
        let doc = tokens(text);
        let doc_windows: BTreeSet<&[String]> = doc.windows(n).collect();
        if !doc_windows.iter().any(|w| self.windows.contains(*w)) {
            return None;
        }
        let mut worst: Option<Overlap> = None;
        for ex in &self.examples {
            if ex.tokens.len() < n {
                continue;
            }
            let mut covered = vec![false; ex.tokens.len()];
            for (start, w) in ex.tokens.windows(n).enumerate() {
                if doc_windows.contains(w) {
                    covered[start..start + n].iter_mut().for_each(|c| *c = true);
                }
            }
            let mut counted = 0usize;
            let mut span = 0usize;
            for &c in covered.iter().chain([false].iter()) {
                if c {
                    span += 1;
                } else {
                    if span >= self.rule.min_overlap {
                        counted += span;
                    }
                    span = 0;
                }
            }
            let coverage = counted as f64 / ex.tokens.len() as f64;
            if coverage > self.rule.max_coverage && worst.as_ref().is_none_or(|w| coverage > w.coverage) {
                worst = Some(Overlap { example: ex.id.clone(), coverage });
            }
        }
        worst
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bench(prompts: &[&str], rule: OverlapRule) -> Benchmark {
        Benchmark::new(
            rule,
            prompts.iter().enumerate().map(|(i, p)| Example { id: format!("b{i}"), tokens: tokens(p) }).collect(),
        )
    }

    #[test]
    fn tokens_follow_the_specification() {
        assert_eq!(tokens("Hello, World!"), ["hello", "world"]);
        assert_eq!(tokens("« Tous les êtres »"), ["tous", "les", "êtres"]);
        assert_eq!(tokens("don't e-mail 3.14 $5 ..."), ["don't", "e-mail", "3.14", "$5"]);
    }

    #[test]
    fn coverage_counts_spans_and_decides_strictly_above_the_fraction() {
        let rule = OverlapRule { ngram: 2, min_overlap: 1, max_coverage: 0.5 };
        let b = bench(&["a b c d"], rule);
        // Windows `a b` cover 2 of 4 tokens: exactly half is clean.
        assert_eq!(b.contaminated("x a b y"), None);
        // `a b` and `b c` cover 3 of 4.
        assert_eq!(b.contaminated("a b c"), Some(Overlap { example: "b0".into(), coverage: 0.75 }));
        // Spans shorter than the floor are ignored: two separate windows of 2 under a floor of 3.
        let floor = bench(&["a b c d e f"], OverlapRule { ngram: 2, min_overlap: 3, max_coverage: 0.0 });
        assert_eq!(floor.contaminated("a b x e f"), None);
        assert!(floor.contaminated("a b c").is_some());
        // A prompt shorter than a window never matches.
        assert_eq!(bench(&["a"], rule).contaminated("a a a"), None);
    }
}
