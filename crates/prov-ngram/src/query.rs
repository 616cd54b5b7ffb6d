//! Scoring text with a back-off model exactly as KenLM's query does, so that Provenant's
//! perplexities are the ones a user gets from the Python `kenlm` module on the same ARPA file.
//!
//! A word `w` after a context is scored by the longest n-gram `c_k … c_1 w` in the model
//! (`ngram_length` = k + 1; the unigram `<unk>` for a word outside the vocabulary):
//! `log10 p = log10 p(c_k … c_1 w) + Σ b(c_j … c_1)` over the context n-grams of the state for
//! j = k + 1 up to the state's length, added in that order in single precision. The state
//! after a word keeps the back-off weights of the n-grams ending at it, up to the longest one
//! (below the highest order) that can be extended: whose weight is not the "no extension"
//! zero. A zero weight marks no extension when no longer n-gram starts with the n-gram (KenLM
//! stores it as -0.0 and every other zero as +0.0). A sentence starts in the state of `<s>`
//! and its score, the single-precision sum of its words' and `</s>`'s, is what
//! `kenlm.Model.score` returns.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::arpa::Arpa;
use crate::gram::{GramHasher, MAX_ORDER, NONE};
use crate::train::{BOS, EOS, UNK};

/// KenLM's "no extension" back-off: a zero with the sign bit set.
const NO_EXTENSION: u32 = 0x8000_0000;

/// One n-gram of a loaded model: its ids newest first, `log10 p` and the `log10` back-off as
/// KenLM keeps it.
#[derive(Debug, Clone)]
struct Entry {
    key: [u32; MAX_ORDER],
    log_prob: f32,
    backoff: f32,
}

/// The hash of an n-gram, newest word first, one word at a time: the hash of a context one
/// word longer is one step from the shorter one's, which is what scoring asks in turn.
fn extend_hash(h: u64, word: u32) -> u64 {
    (h.rotate_left(5) ^ u64::from(word)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
}

/// The hash of a whole key.
fn key_hash(key: &[u32; MAX_ORDER]) -> u64 {
    key.iter().take_while(|&&w| w != NONE).fold(0, |h, &w| extend_hash(h, w))
}

/// A loaded model, ready to score.
#[derive(Debug, Clone)]
pub struct Model {
    order: usize,
    ids: HashMap<String, u32, BuildHasherDefault<GramHasher>>,
    /// Per order (index n-1): the n-grams, found by [`key_hash`] and compared whole, so that
    /// a hash collision can never return another n-gram.
    grams: Vec<hashbrown::HashTable<Entry>>,
    unk: u32,
    /// The ids of `<s>` and `</s>`.
    bos: u32,
    eos: u32,
}

/// One word's score, as `kenlm.Model.full_scores` yields it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WordScore {
    /// `log10 p(word | context)`.
    pub log_prob: f32,
    /// The length of the n-gram that matched.
    pub ngram_length: usize,
    /// The word is not in the vocabulary.
    pub oov: bool,
}

/// The words before the next one, newest first, and the back-off weights of the n-grams
/// they end (of lengths 1 to `len`).
#[derive(Debug, Clone, Copy)]
struct State {
    words: [u32; MAX_ORDER],
    backoffs: [f32; MAX_ORDER],
    len: usize,
}

/// `ids` newest first, as a key of [`Model::grams`].
fn reversed_key(ids: &[u32]) -> [u32; MAX_ORDER] {
    let mut key = [NONE; MAX_ORDER];
    for (k, id) in key.iter_mut().zip(ids.iter().rev()) {
        *k = *id;
    }
    key
}

impl Model {
    /// Loads a parsed ARPA model.
    pub fn new(arpa: &Arpa) -> Self {
        let order = arpa.order();
        let ids = arpa.vocab.iter().enumerate().map(|(i, w)| (w.clone(), i as u32)).collect();
        let mut grams: Vec<hashbrown::HashTable<Entry>> = Vec::with_capacity(order);
        for level in &arpa.grams {
            let mut table = hashbrown::HashTable::with_capacity(level.len());
            for e in level {
                let b = e.backoff.unwrap_or(0.0);
                let key = reversed_key(&e.ids);
                // Zero means "no extension" until a longer n-gram shows one.
                let entry = Entry { key, log_prob: e.log_prob, backoff: if b == 0.0 { -0.0 } else { b } };
                table.insert_unique(key_hash(&key), entry, |e| key_hash(&e.key));
            }
            grams.push(table);
        }
        for n in 1..order {
            for e in &arpa.grams[n] {
                let key = reversed_key(&e.ids[..n]);
                if let Some(context) = grams[n - 1].find_mut(key_hash(&key), |c| c.key == key)
                    && context.backoff.to_bits() == NO_EXTENSION
                {
                    context.backoff = 0.0;
                }
            }
        }
        let id = |w: &str| arpa.vocab.iter().position(|v| v == w).map(|i| i as u32);
        let unk = id("<unk>").unwrap_or(UNK);
        // Found by name: a model need not list them where lmplz does (`Arpa::parse` refuses
        // one without them; an `Arpa` built by hand falls back to lmplz's places).
        let (bos, eos) = (id("<s>").unwrap_or(BOS), id("</s>").unwrap_or(EOS));
        Self { order, ids, grams, unk, bos, eos }
    }

    /// The n-gram `key` of order `n` (index n-1), whose hash is `h`.
    fn find(&self, n: usize, h: u64, key: &[u32; MAX_ORDER]) -> Option<(f32, f32)> {
        self.grams[n].find(h, |e| e.key == *key).map(|e| (e.log_prob, e.backoff))
    }

    /// The highest order.
    pub fn order(&self) -> usize {
        self.order
    }

    /// A word's id, or `<unk>`'s.
    fn id(&self, word: &str) -> u32 {
        self.ids.get(word).copied().unwrap_or(self.unk)
    }

    /// Scores `word` after `state` and moves the state on.
    fn score(&self, state: &mut State, word: u32) -> WordScore {
        let oov = word == self.unk;
        let mut key = [NONE; MAX_ORDER];
        key[0] = word;
        let mut h = extend_hash(0, word);
        let mut next = State { words: [NONE; MAX_ORDER], backoffs: [0.0; MAX_ORDER], len: 0 };
        // A model without `<unk>`: KenLM charges -100.
        let (mut log_prob, b) = self.find(0, h, &key).unwrap_or((-100.0, -0.0));
        next.backoffs[0] = b;
        let (mut length, mut recorded) = (1, 1);
        for j in 1..=state.len.min(self.order - 1) {
            key[j] = state.words[j - 1];
            h = extend_hash(h, key[j]);
            let Some((p, b)) = self.find(j, h, &key) else { break };
            log_prob = p;
            length = j + 1;
            if length < self.order {
                next.backoffs[j] = b;
                recorded = length;
            }
        }
        for b in &state.backoffs[length - 1..state.len.max(length - 1)] {
            log_prob += *b;
        }
        // The next state: up to the longest n-gram that can be extended.
        next.len = next.backoffs[..recorded].iter().rposition(|b| b.to_bits() != NO_EXTENSION).map_or(0, |i| i + 1);
        if next.len > 0 {
            next.words[0] = word;
            next.words[1..next.len].copy_from_slice(&state.words[..next.len - 1]);
        }
        *state = next;
        WordScore { log_prob, ngram_length: length, oov }
    }

    /// The state at the start of a sentence: `<s>` with its back-off weight (KenLM keeps it
    /// whether or not `<s>` can be extended).
    fn begin_sentence(&self) -> State {
        let key = reversed_key(&[self.bos]);
        let b = self.find(0, key_hash(&key), &key).map_or(-0.0, |(_, b)| b);
        let mut state = State { words: [NONE; MAX_ORDER], backoffs: [0.0; MAX_ORDER], len: 1 };
        state.words[0] = self.bos;
        state.backoffs[0] = b;
        state
    }

    /// Each word's score and then `</s>`'s, as `kenlm.Model.full_scores(sentence)` with
    /// `bos` and `eos` true. Words are `sentence` split at ASCII whitespace as Python's
    /// `bytes.split()` splits (space, tab, line feed, carriage return, vertical tab, form feed).
    pub fn full_scores(&self, sentence: &str) -> Vec<WordScore> {
        let mut state = self.begin_sentence();
        let mut out: Vec<WordScore> = words(sentence).map(|w| self.score(&mut state, self.id(w))).collect();
        out.push(self.score(&mut state, self.eos));
        out
    }

    /// The sentence's `log10` probability, as `kenlm.Model.score(sentence)`: the
    /// single-precision sum of [`Model::full_scores`].
    pub fn score_sentence(&self, sentence: &str) -> f32 {
        let mut state = self.begin_sentence();
        let total = words(sentence).fold(0f32, |t, w| t + self.score(&mut state, self.id(w)).log_prob);
        total + self.score(&mut state, self.eos).log_prob
    }
}

/// The words of a sentence as Python's `bytes.split()` splits: at runs of space, tab, line
/// feed, carriage return, vertical tab and form feed (all ASCII, so every piece is UTF-8).
fn words(sentence: &str) -> impl Iterator<Item = &str> {
    sentence.split([' ', '\t', '\n', '\r', '\u{b}', '\u{c}']).filter(|w| !w.is_empty())
}
