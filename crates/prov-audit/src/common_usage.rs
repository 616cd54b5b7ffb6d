//! The audit's own implementation of AFM's decontamination by common usage, written from the
//! book's specification ("The AFM recipe": benchmark n-grams, the counts file, the decision)
//! and not from the `benchmark-ngrams` and `ngram-decontaminate` stages' code, so that the
//! claim can recount the corpus and rescan kept documents without trusting the stages.
//!
//! The method differs from the stages' on purpose: they walk a trie of word ids; this check
//! keys every benchmark n-gram by its text (tokens joined by single spaces) in a map, and for
//! each position of a document looks up every length from `min_n` to `max_n` whose first token
//! starts some benchmark n-gram.

use std::collections::{BTreeMap, HashMap, HashSet};

use prov_dataset::Document;
use prov_store::{Digest, Store};

use crate::overlap::tokens;

/// A benchmark's n-grams of `min_n` to `max_n` tokens, each with the first example holding it.
#[derive(Debug)]
pub struct BenchmarkNgrams {
    min_n: usize,
    max_n: usize,
    /// N-gram text -> the id of the first example, in benchmark order, that holds it.
    ngrams: HashMap<String, String>,
    /// The tokens that begin some n-gram: a position starting with another token holds none.
    first_tokens: HashSet<String>,
    examples: usize,
}

/// A benchmark n-gram a text holds: its text, length and first position.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Held {
    /// Tokens joined by single spaces.
    pub text: String,
    /// Tokens.
    pub n: usize,
    /// The lowest position where the text holds it.
    pub position: usize,
}

impl BenchmarkNgrams {
    /// Reads the examples of a benchmark source (its document files in path order, license
    /// files passed over, ids unique) and collects their n-grams.
    ///
    /// # Errors
    ///
    /// A sentence naming the file or example at fault.
    pub fn read(store: &Store, source: &Digest, min_n: usize, max_n: usize) -> Result<Self, String> {
        let mut out = Self { min_n, max_n, ngrams: HashMap::new(), first_tokens: HashSet::new(), examples: 0 };
        crate::overlap::read_examples(store, source, |id, text| out.add(&id, text))?;
        Ok(out)
    }

    fn add(&mut self, id: &str, text: &str) {
        self.examples += 1;
        let words = tokens(text);
        for n in self.min_n..=self.max_n {
            for gram in words.windows(n) {
                self.first_tokens.insert(gram[0].clone());
                self.ngrams.entry(gram.join(" ")).or_insert_with(|| id.to_owned());
            }
        }
    }

    /// The number of examples.
    pub fn examples(&self) -> usize {
        self.examples
    }

    /// The example that names n-gram `text`, if it is one of the benchmark's.
    pub fn example(&self, text: &str) -> Option<&str> {
        self.ngrams.get(text).map(String::as_str)
    }

    /// Every distinct benchmark n-gram a text holds, with its first position and its number of
    /// occurrences.
    pub fn held(&self, text: &str) -> BTreeMap<String, (Held, u64)> {
        let words = tokens(text);
        let mut out: BTreeMap<String, (Held, u64)> = BTreeMap::new();
        for position in 0..words.len() {
            if !self.first_tokens.contains(&words[position]) {
                continue;
            }
            for n in self.min_n..=self.max_n.min(words.len() - position) {
                let gram = words[position..position + n].join(" ");
                if self.ngrams.contains_key(&gram) {
                    out.entry(gram.clone()).or_insert_with(|| (Held { text: gram, n, position }, 0)).1 += 1;
                }
            }
        }
        out
    }
}

/// What a document adds to a count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counting {
    /// 1 per n-gram it holds.
    Documents,
    /// Its occurrences.
    Occurrences,
}

/// Counts the benchmark's n-grams over documents, as the counts file's `ngrams` holds them:
/// only n-grams counted at least once, by text.
pub fn count<E>(
    bench: &BenchmarkNgrams,
    counting: Counting,
    docs: impl Iterator<Item = Result<Document, E>>,
) -> Result<(u64, BTreeMap<String, u64>), E> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut documents = 0;
    for doc in docs {
        documents += 1;
        for (text, (_, occurrences)) in bench.held(&doc?.text) {
            *counts.entry(text).or_default() += match counting {
                Counting::Documents => 1,
                Counting::Occurrences => occurrences,
            };
        }
    }
    Ok((documents, counts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bench(min_n: usize, max_n: usize, examples: &[(&str, &str)]) -> BenchmarkNgrams {
        let mut b = BenchmarkNgrams { min_n, max_n, ngrams: HashMap::new(), first_tokens: HashSet::new(), examples: 0 };
        for (id, text) in examples {
            b.add(id, text);
        }
        b
    }

    #[test]
    fn a_text_holds_every_length_at_its_first_position() {
        let b = bench(2, 3, &[("q", "One, two THREE four."), ("r", "two three")]);
        assert_eq!(b.example("two three"), Some("q"), "the first example names it");
        let held = b.held("x two three four two three");
        let got: Vec<(&str, usize, u64)> = held.values().map(|(h, n)| (h.text.as_str(), h.position, *n)).collect();
        assert_eq!(got, [("three four", 2, 1), ("two three", 1, 2), ("two three four", 1, 1)]);
    }

    #[test]
    fn counts_are_per_document_or_per_occurrence() {
        let b = bench(2, 2, &[("q", "a b")]);
        let docs = || ["a b a b", "a b", "c"].map(|t| Ok::<_, ()>(Document::new("d", t))).into_iter();
        assert_eq!(count(&b, Counting::Documents, docs()).unwrap(), (3, BTreeMap::from([("a b".into(), 2)])));
        assert_eq!(count(&b, Counting::Occurrences, docs()).unwrap(), (3, BTreeMap::from([("a b".into(), 3)])));
    }
}
