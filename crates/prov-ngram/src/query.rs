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

use crate::arpa::Arpa;
use crate::train::{BOS, EOS, UNK};

/// A loaded model, ready to score.
#[derive(Debug, Clone)]
pub struct Model {
    order: usize,
    ids: HashMap<String, u32>,
    /// Per order (index n-1): n-gram ids to (`log10 p`, `log10` back-off as KenLM keeps it).
    grams: Vec<HashMap<Vec<u32>, (f32, f32)>>,
    unk: u32,
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

/// The back-off weights of the n-grams ending at the last word, shortest first.
#[derive(Debug, Clone, Default)]
struct State {
    words: Vec<u32>,
    backoffs: Vec<f32>,
}

impl Model {
    /// Loads a parsed ARPA model.
    pub fn new(arpa: &Arpa) -> Self {
        let order = arpa.order();
        let ids: HashMap<String, u32> = arpa.vocab.iter().enumerate().map(|(i, w)| (w.clone(), i as u32)).collect();
        let mut grams: Vec<HashMap<Vec<u32>, (f32, f32)>> = Vec::with_capacity(order);
        for level in &arpa.grams {
            grams.push(
                level
                    .iter()
                    .map(|e| {
                        let b = e.backoff.unwrap_or(0.0);
                        // Zero means "no extension" until a longer n-gram shows one.
                        (e.ids.clone(), (e.log_prob, if b == 0.0 { -0.0 } else { b }))
                    })
                    .collect(),
            );
        }
        for n in 1..order {
            let (lower, upper) = grams.split_at_mut(n);
            for g in upper[0].keys() {
                if let Some((_, b)) = lower[n - 1].get_mut(&g[..n])
                    && b.to_bits() == (-0.0f32).to_bits()
                {
                    *b = 0.0;
                }
            }
        }
        let unk = ids.get("<unk>").copied().unwrap_or(UNK);
        Self { order, ids, grams, unk }
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
        let mut gram = vec![word];
        let (mut log_prob, mut new_backoffs) = match self.grams[0].get(&gram) {
            Some(&(p, b)) => (p, vec![b]),
            // A model without `<unk>`: KenLM charges -100.
            None => (-100.0, vec![-0.0]),
        };
        let mut length = 1;
        for &c in &state.words {
            if gram.len() >= self.order {
                break;
            }
            gram.insert(0, c);
            let Some(&(p, b)) = self.grams[gram.len() - 1].get(&gram) else { break };
            log_prob = p;
            length = gram.len();
            if gram.len() < self.order {
                new_backoffs.push(b);
            }
        }
        for b in state.backoffs.iter().skip(length - 1) {
            log_prob += *b;
        }
        // The next state: up to the longest n-gram that can be extended.
        let keep = new_backoffs.iter().rposition(|b| b.to_bits() != (-0.0f32).to_bits()).map_or(0, |i| i + 1);
        new_backoffs.truncate(keep);
        let mut words = Vec::with_capacity(keep);
        words.push(word);
        words.extend(state.words.iter().take(keep.saturating_sub(1)));
        words.truncate(keep);
        *state = State { words, backoffs: new_backoffs };
        WordScore { log_prob, ngram_length: length, oov }
    }

    /// The state at the start of a sentence: `<s>` with its back-off weight (KenLM keeps it
    /// whether or not `<s>` can be extended).
    fn begin_sentence(&self) -> State {
        let b = self.grams[0].get(&vec![BOS]).map_or(-0.0, |&(_, b)| b);
        State { words: vec![BOS], backoffs: vec![b] }
    }

    /// Each word's score and then `</s>`'s, as `kenlm.Model.full_scores(sentence)` with
    /// `bos` and `eos` true. Words are `sentence` split at ASCII whitespace as Python's
    /// `bytes.split()` splits (space, tab, line feed, carriage return, vertical tab, form feed).
    pub fn full_scores(&self, sentence: &str) -> Vec<WordScore> {
        let mut state = self.begin_sentence();
        let mut out: Vec<WordScore> = sentence
            .split([' ', '\t', '\n', '\r', '\u{b}', '\u{c}'])
            .filter(|w| !w.is_empty())
            .map(|w| self.score(&mut state, self.id(w)))
            .collect();
        out.push(self.score(&mut state, EOS));
        out
    }

    /// The sentence's `log10` probability, as `kenlm.Model.score(sentence)`: the
    /// single-precision sum of [`Model::full_scores`].
    pub fn score_sentence(&self, sentence: &str) -> f32 {
        self.full_scores(sentence).iter().fold(0f32, |t, s| t + s.log_prob)
    }
}
