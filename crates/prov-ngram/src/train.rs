//! Estimating an interpolated modified Kneser-Ney model (Chen and Goodman 1998, as KenLM's
//! `lmplz` estimates it; Heafield et al. 2013), from sentences of tokens.
//!
//! The estimate, step by step, so that an independent implementation can follow it:
//!
//! 1. **Vocabulary.** `<unk>` is id 0, `<s>` 1, `</s>` 2; every other token gets the next id
//!    in order of first appearance. A token equal to one of the three, or empty, is dropped (as
//!    `lmplz --skip_symbols` treats them as whitespace).
//! 2. **Windows.** Each sentence becomes `<s> w1 … wm </s>`. Every n-gram (n = 1..N) that ends
//!    at a word or at `</s>` is counted: its raw count `c`. n-grams never end in `<s>`.
//! 3. **Adjusted counts.** For an n-gram of the highest order, or one that starts with `<s>`,
//!    `a = c`. For any other, `a` is the number of distinct tokens `v` such that `v` followed by
//!    it is a counted (n+1)-gram. The unigrams `<unk>` and `<s>` have `a = 0`.
//! 4. **Discounts.** Per order, with `t_k` the number of n-grams whose adjusted count is `k`:
//!    `Y = t1 / (t1 + 2 t2)` and `D(k) = k - (k + 1) Y t_{k+1} / t_k` for k = 1, 2, 3 (`D(3)`
//!    applies to every count of 3 or more, `D(0) = 0`). When a `t_k` (k = 1..3) is 0 or a
//!    discount falls outside (0, k], the fallback discounts apply if given, else training fails
//!    (a discount of 0 would give a context's backoff weight log10 0 = -inf, which ARPA
//!    readers, KenLM's included, refuse).
//! 5. **Context sums.** For each context `h` (the first n-1 tokens of n-grams of order n, the
//!    empty context for unigrams): `S(h) = Σ a(h w)` and the backoff weight
//!    `γ(h) = (D(1) N1(h) + D(2) N2(h) + D(3) N3+(h)) / S(h)`, where `Nk(h)` counts the `w`
//!    with `a(h w) = k` (3 or more for `N3+`). Unigrams with `a = 0` count in neither.
//! 6. **Probabilities.** The uninterpolated `u(h w) = (a(h w) - D(a(h w))) / S(h)`, and
//!    `p(h w) = u(h w) + γ(h) p(h' w)`, where `h'` is `h` without its first token and, for
//!    unigrams, `p(w) = u(w) + γ(ε) / V`, `V` being the number of unigrams other than `<s>`
//!    (`<unk>` included). `u(<unk>) = 0`; `<s>` has `p = 1` and no backoff weight of its own
//!    in the sum.
//! 7. **Output.** Each n-gram's `log10 p` (never above 0) and, below the highest order, the
//!    backoff `log10 γ(g)` of the n-gram as a context when it is one and does not end in
//!    `<unk>` or `</s>`, otherwise 0.
//!
//! Every quantity from step 4 on is an IEEE single-precision float computed in the order
//! written (counts are exact integers until they are converted), as `lmplz` computes them, so
//! that the ARPA files agree to the bit; `log10` is the platform's `log10f`.

use crate::arpa::{Arpa, NGramEntry};
use crate::gram::{GramMap, context, gram_map, gram_of, suffix};

/// `<unk>`'s id.
pub const UNK: u32 = 0;
/// `<s>`'s id.
pub const BOS: u32 = 1;
/// `</s>`'s id.
pub const EOS: u32 = 2;

/// Why a model cannot be estimated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrainError {
    /// The order is 0 or above the supported maximum.
    #[error("the order must be between 1 and {max}, got {order}")]
    Order {
        /// The order asked for.
        order: usize,
        /// The largest supported.
        max: usize,
    },
    /// The closed-form discounts do not exist for this data.
    #[error(
        "cannot estimate Kneser-Ney discounts for {order}-grams: {reason} (counts of counts t1..t4 = {counts:?}); \
         deduplicate the corpus or give fallback discounts"
    )]
    Discount {
        /// The order.
        order: usize,
        /// What failed.
        reason: String,
        /// `t1` to `t4`.
        counts: [u64; 4],
    },
    /// Nothing to estimate from.
    #[error("no sentence with a token to train on")]
    Empty,
}

/// The highest order supported.
pub use crate::gram::MAX_ORDER;

/// The three discounts of one order, for adjusted counts 1, 2 and 3 or more.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Discounts(pub [f32; 3]);

impl Discounts {
    /// `D(count)`: 0 for 0, the third for 3 and above.
    fn get(self, count: u64) -> f32 {
        match count {
            0 => 0.0,
            c => self.0[(c.min(3) - 1) as usize],
        }
    }

    /// The closed form of step 4, from the counts of counts `t[0..4]` (= t1..t4).
    fn estimate(order: usize, t: [u64; 4]) -> Result<Self, TrainError> {
        let fail = |reason: String| TrainError::Discount { order, reason, counts: t };
        for (k, &n) in t.iter().take(3).enumerate() {
            if n == 0 {
                return Err(fail(format!("no {order}-gram has adjusted count {}", k + 1)));
            }
        }
        // Y is computed as lmplz does: the denominator in double, then both sides in single.
        let y = t[0] as f32 / (t[0] as f64 + 2.0 * t[1] as f64) as f32;
        let mut d = [0f32; 3];
        for j in 1..=3usize {
            d[j - 1] = j as f32 - (j + 1) as f32 * y * t[j] as f32 / t[j - 1] as f32;
            // A discount of 0 leaves a context whose counts all take it no backoff mass: its
            // weight's log10 is -inf, which no ARPA reader takes (KenLM's refuses it as a bad
            // backoff), so 0 is out of range too.
            if !(d[j - 1] > 0.0 && d[j - 1] <= j as f32) {
                return Err(fail(format!("the discount for adjusted count {j} is {}, outside (0, {j}]", d[j - 1])));
            }
        }
        Ok(Self(d))
    }
}

/// Counts sentences, then estimates the model ([`Trainer::estimate`]).
#[derive(Debug, Clone)]
pub struct Trainer {
    order: usize,
    vocab: Vec<String>,
    ids: std::collections::HashMap<String, u32>,
    /// Raw counts of every window, per order (index n-1).
    counts: Vec<GramMap<u64>>,
    sentences: u64,
}

impl Trainer {
    /// A trainer for a model of `order` (1 to [`MAX_ORDER`]).
    pub fn new(order: usize) -> Result<Self, TrainError> {
        if order == 0 || order > MAX_ORDER {
            return Err(TrainError::Order { order, max: MAX_ORDER });
        }
        let vocab: Vec<String> = ["<unk>", "<s>", "</s>"].map(String::from).to_vec();
        let ids = vocab.iter().enumerate().map(|(i, w)| (w.clone(), i as u32)).collect();
        Ok(Self { order, vocab, ids, counts: vec![GramMap::default(); order], sentences: 0 })
    }

    /// Counts one sentence's tokens (steps 1 and 2).
    pub fn add_sentence<'a>(&mut self, tokens: impl IntoIterator<Item = &'a str>) {
        let mut seq = vec![BOS];
        for t in tokens {
            if t.is_empty() || t == "<unk>" || t == "<s>" || t == "</s>" {
                continue;
            }
            let id = if let Some(&id) = self.ids.get(t) {
                id
            } else {
                let id = self.vocab.len() as u32;
                self.vocab.push(t.to_owned());
                self.ids.insert(t.to_owned(), id);
                id
            };
            seq.push(id);
        }
        seq.push(EOS);
        self.sentences += 1;
        for end in 1..seq.len() {
            for n in 1..=self.order.min(end + 1) {
                *self.counts[n - 1].entry(gram_of(&seq[end + 1 - n..=end])).or_default() += 1;
            }
        }
    }

    /// The sentences counted so far.
    pub fn sentences(&self) -> u64 {
        self.sentences
    }

    /// Estimates the model (steps 3 to 7). `fallback` replaces the discounts of an order whose
    /// closed form fails (KenLM's `--discount_fallback`, whose values are 0.5, 1 and 1.5).
    pub fn estimate(self, fallback: Option<Discounts>) -> Result<Arpa, TrainError> {
        if self.sentences == 0 {
            return Err(TrainError::Empty);
        }
        let order = self.order;
        let adjusted = self.adjusted_counts();
        let mut discounts = Vec::with_capacity(order);
        for (n, grams) in adjusted.iter().enumerate() {
            let mut t = [0u64; 4];
            for &a in grams.values() {
                if (1..=4).contains(&a) {
                    t[(a - 1) as usize] += 1;
                }
            }
            discounts.push(match (Discounts::estimate(n + 1, t), fallback) {
                (Ok(d), _) => d,
                (Err(_), Some(f)) => f,
                (Err(e), None) => return Err(e),
            });
        }
        // Step 5: per context, S(h), then γ(h).
        let gammas: Vec<GramMap<(f32, f32)>> =
            adjusted.iter().zip(&discounts).enumerate().map(|(n, (grams, d))| context_sums(grams, n + 1, *d)).collect();
        // Step 6, order by order: p of each n-gram from its suffix's p.
        let vocab_size = adjusted[0].len() - 1;
        let uniform = (1.0f64 / f64::from(vocab_size as f32)) as f32;
        let mut probs: Vec<GramMap<f32>> = Vec::with_capacity(order);
        for (n, grams) in adjusted.iter().enumerate() {
            let mut p = gram_map(grams.len());
            for (g, &a) in grams {
                let (sum, gamma) = gammas[n][&context(g, n + 1)];
                let (u, gamma) = match (n, g[0]) {
                    (0, UNK) => (0.0, gamma),
                    (0, BOS) => (1.0, 0.0),
                    _ => ((a as f32 - discounts[n].get(a)) / sum, gamma),
                };
                let lower = if n == 0 { uniform } else { probs[n - 1][&suffix(g)] };
                p.insert(*g, u + gamma * lower);
            }
            probs.push(p);
        }
        // Step 7.
        let mut grams = Vec::with_capacity(order);
        for (n, p) in probs.iter().enumerate() {
            let mut entries: Vec<NGramEntry> = p
                .iter()
                .map(|(g, &prob)| {
                    let backoff = (n + 1 < order).then(|| {
                        let last = g[n];
                        match gammas.get(n + 1).and_then(|c| c.get(g)) {
                            Some(&(_, gamma)) if last != UNK && last != EOS => gamma.log10(),
                            _ => 0.0,
                        }
                    });
                    NGramEntry { ids: g[..=n].to_vec(), log_prob: 0f32.min(prob.log10()), backoff }
                })
                .collect();
            // Suffix order: by the last id, then the one before, and so on.
            entries.sort_by(|a, b| a.ids.iter().rev().cmp(b.ids.iter().rev()));
            grams.push(entries);
        }
        Ok(Arpa { vocab: self.vocab, grams })
    }

    /// Step 3, with `<unk>` and `<s>` as unigrams of adjusted count 0.
    fn adjusted_counts(&self) -> Vec<GramMap<u64>> {
        let order = self.order;
        let mut adjusted: Vec<GramMap<u64>> = Vec::with_capacity(order);
        for n in 0..order {
            let mut a = gram_map(self.counts[n].len());
            for (g, &c) in &self.counts[n] {
                a.insert(*g, if n + 1 == order || g[0] == BOS { c } else { 0 });
            }
            adjusted.push(a);
        }
        // Distinct left extensions: each (n+1)-gram adds one to its suffix.
        for n in 1..order {
            for g in self.counts[n].keys() {
                // `<s>` stands only first, so no suffix starts with it: every suffix's count
                // is a count of extensions.
                if let Some(a) = adjusted[n - 1].get_mut(&suffix(g)) {
                    *a += 1;
                }
            }
        }
        adjusted[0].entry(gram_of(&[UNK])).or_insert(0);
        adjusted[0].entry(gram_of(&[BOS])).or_insert(0);
        adjusted
    }
}

/// `S(h)` and `γ(h)` of every context of one order's n-grams.
fn context_sums(grams: &GramMap<u64>, n: usize, d: Discounts) -> GramMap<(f32, f32)> {
    // Per context: S(h) and N1, N2, N3+.
    let mut sums: GramMap<(u64, [u64; 3])> = GramMap::default();
    for (g, &a) in grams {
        let e = sums.entry(context(g, n)).or_default();
        e.0 += a;
        if a > 0 {
            e.1[(a.min(3) - 1) as usize] += 1;
        }
    }
    sums.into_iter()
        .map(|(h, (s, n))| {
            let sum = s as f32;
            let mut gamma = 0f32;
            for (k, &count) in n.iter().enumerate() {
                gamma += d.0[k] * count as f32;
            }
            (h, (sum, gamma / sum))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::Model;

    fn model(order: usize, sentences: &[Vec<&str>]) -> Model {
        let mut t = Trainer::new(order).unwrap();
        for s in sentences {
            t.add_sentence(s.iter().copied());
        }
        let arpa = t.estimate(Some(Discounts([0.5, 1.0, 1.5]))).unwrap();
        Model::new(&crate::Arpa::parse(&arpa.write()).unwrap())
    }

    #[test]
    fn markers_and_empty_tokens_are_not_words() {
        let mut t = Trainer::new(2).unwrap();
        t.add_sentence(["a", "<s>", "", "b", "</s>", "<unk>"]);
        let arpa = t.estimate(Some(Discounts([0.5, 1.0, 1.5]))).unwrap();
        assert_eq!(arpa.vocab, ["<unk>", "<s>", "</s>", "a", "b"]);
        let bigrams: Vec<&[u32]> = arpa.grams[1].iter().map(|e| e.ids.as_slice()).collect();
        assert_eq!(bigrams, [&[4, 2][..], &[1, 3], &[3, 4]]);
        assert!(matches!(Trainer::new(0), Err(TrainError::Order { .. })));
        assert!(matches!(Trainer::new(MAX_ORDER + 1), Err(TrainError::Order { .. })));
        assert_eq!(Trainer::new(3).unwrap().estimate(None).unwrap_err(), TrainError::Empty);
    }

    /// A corpus proptest found where order 2's closed-form discount for counts of 3 or more
    /// is exactly 0 (`f` is only ever followed by `</s>`): the fallback applies, and the ARPA
    /// file reads back.
    #[test]
    fn a_zero_discount_takes_the_fallback() {
        let words = ["a", "b", "c", "d", "e", "f"];
        let corpus: [&[usize]; 9] =
            [&[0], &[4, 1, 2, 1], &[], &[2, 0, 2], &[5], &[0, 3, 0, 0, 1, 5], &[1, 3, 5], &[], &[0, 0, 2, 5]];
        let sentences: Vec<Vec<&str>> = corpus.iter().map(|s| s.iter().map(|&i| words[i]).collect()).collect();
        let _ = model(2, &sentences);
        let mut t = Trainer::new(2).unwrap();
        for s in &sentences {
            t.add_sentence(s.iter().copied());
        }
        assert!(t.estimate(None).is_err(), "without a fallback the zero discount fails training");
    }

    proptest::proptest! {
        /// Every conditional distribution the model gives sums to 1 over the vocabulary
        /// (`<unk>` and `</s>` included, `<s>` excluded): here the first word's, after `<s>`,
        /// which interpolates every order down to the uniform distribution.
        #[test]
        fn the_first_words_distribution_sums_to_one(
            corpus in proptest::collection::vec(proptest::collection::vec(0usize..6, 0..8), 1..30),
            order in 1usize..5,
        ) {
            let words = ["a", "b", "c", "d", "e", "f"];
            let sentences: Vec<Vec<&str>> = corpus.iter().map(|s| s.iter().map(|&i| words[i]).collect()).collect();
            let m = model(order, &sentences);
            // `</s>` first is the empty sentence; an unseen word is `<unk>`.
            let mut total = 10f64.powf(f64::from(m.full_scores("")[0].log_prob));
            total += 10f64.powf(f64::from(m.full_scores("zzz")[0].log_prob));
            let seen: std::collections::BTreeSet<&str> = sentences.iter().flatten().copied().collect();
            for w in seen {
                total += 10f64.powf(f64::from(m.full_scores(w)[0].log_prob));
            }
            proptest::prop_assert!((total - 1.0).abs() < 1e-4, "{total}");
        }
    }
}
