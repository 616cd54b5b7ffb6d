//! The pair scorer: Provenant's stand-in for the two models EuroLLM filters parallel data
//! with, Bicleaner (a classifier: is this pair a mutual translation?) and CometKiwi-22 (a
//! reference-free quality estimate). Neither model can be had here, so both are rebuilt the
//! way their families are built, small and linear, from the pairs themselves:
//!
//! - **features** ([`features`]): length ratios, agreement of numbers and punctuation, shared
//!   words and character trigrams, and the coverage of each side by a bilingual dictionary
//!   learned from co-occurrence in the training pairs (Dice coefficients), as Bicleaner's
//!   probabilistic dictionaries are learned from its training corpus;
//! - **synthetic noise** ([`noise`]): each training pair also yields a corrupted copy,
//!   misaligned (another pair's target), truncated, or with half its target words replaced,
//!   as Bicleaner's classifiers are trained on;
//! - **the classifier** (Bicleaner's stand-in): logistic regression, pairs against their
//!   corruptions, giving the probability that a pair is parallel;
//! - **the quality estimate** (`CometKiwi`'s stand-in): ridge regression from the same features
//!   to chrF (sacrebleu's definition, `prov-reward`) of the corrupted target against the true
//!   one, over 100: a reference-free score trained to predict a reference-based one, as
//!   quality estimation is.
//!
//! One model per language pair. The model file ([`Model::write`], format `prov-pairscore 1`)
//! is canonical JSON.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::logistic::LogisticModel;

/// The feature names, in vector order.
pub const FEATURES: [&str; 10] = [
    "char_length_log_ratio",
    "char_length_log_ratio_squared",
    "word_length_log_ratio",
    "word_length_log_ratio_squared",
    "number_agreement",
    "punctuation_difference",
    "shared_words",
    "shared_trigrams",
    "source_coverage",
    "target_coverage",
];

/// The model file's format line.
pub const FORMAT: &str = "prov-pairscore 1";

/// A side's words: maximal runs of alphanumeric characters, lowercased.
#[must_use]
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

fn numbers(text: &str) -> BTreeSet<&str> {
    text.split(|c: char| !c.is_ascii_digit()).filter(|w| !w.is_empty()).collect()
}

fn trigrams(text: &str) -> BTreeSet<String> {
    let chars: Vec<char> = text.to_lowercase().chars().collect();
    chars.windows(3).map(|w| w.iter().collect()).collect()
}

/// `|a ∩ b| / |a ∪ b|`, and 1 when both are empty.
fn jaccard<T: Ord>(a: &BTreeSet<T>, b: &BTreeSet<T>) -> f64 {
    let union = a.union(b).count();
    if union == 0 { 1.0 } else { a.intersection(b).count() as f64 / union as f64 }
}

/// Target word → the source words whose entries name it, with their Dice coefficients.
type Reverse = HashMap<String, Vec<(String, f64)>>;

/// The bilingual dictionary: for each source word, its likeliest target words with their Dice
/// coefficients.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Dictionary {
    /// Source word → its target words and their Dice coefficients, best first.
    pub entries: BTreeMap<String, Vec<(String, f64)>>,
    /// The entries read backwards, built once on first use.
    #[serde(skip)]
    reverse: std::sync::OnceLock<Reverse>,
}

impl Dictionary {
    /// Learns the dictionary from parallel pairs: words `w` and `v` co-occurring in `c(w, v)`
    /// pairs, occurring in `c(w)` and `c(v)`, have Dice coefficient `2 c(w,v) / (c(w) + c(v))`;
    /// a source word keeps its `top` target words by Dice (ties by the target word), among
    /// those co-occurring in at least `min_count` pairs. Words are numbered as they are first
    /// seen, so the co-occurrence counts hold two numbers per word pair, not two strings.
    #[must_use]
    pub fn learn(pairs: &[(&str, &str)], top: usize, min_count: u32) -> Self {
        let (mut source_ids, mut target_ids): (HashMap<String, u32>, HashMap<String, u32>) = Default::default();
        let (mut source_count, mut target_count): (Vec<u32>, Vec<u32>) = Default::default();
        let mut both: HashMap<(u32, u32), u32> = HashMap::new();
        let id = |ids: &mut HashMap<String, u32>, counts: &mut Vec<u32>, w: String| -> u32 {
            let next = u32::try_from(counts.len()).expect("fewer than 2^32 words");
            *ids.entry(w).or_insert_with(|| {
                counts.push(0);
                next
            })
        };
        for (s, t) in pairs {
            let sw: BTreeSet<u32> = words(s).into_iter().map(|w| id(&mut source_ids, &mut source_count, w)).collect();
            let tw: BTreeSet<u32> = words(t).into_iter().map(|w| id(&mut target_ids, &mut target_count, w)).collect();
            for &w in &sw {
                source_count[w as usize] += 1;
            }
            for &v in &tw {
                target_count[v as usize] += 1;
            }
            for &w in &sw {
                for &v in &tw {
                    *both.entry((w, v)).or_default() += 1;
                }
            }
        }
        let source_words = names(source_ids);
        let target_words = names(target_ids);
        let mut entries: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
        for ((w, v), c) in both {
            if c < min_count {
                continue;
            }
            let dice = 2.0 * f64::from(c) / f64::from(source_count[w as usize] + target_count[v as usize]);
            entries.entry(source_words[w as usize].clone()).or_default().push((target_words[v as usize].clone(), dice));
        }
        for list in entries.values_mut() {
            list.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            list.truncate(top);
        }
        Self { entries, reverse: std::sync::OnceLock::new() }
    }

    /// The mean, over the words of `from`, of the best Dice coefficient of a word of `to`
    /// (0 for a word with no entry; 0 for no words). With `backwards`, `from` is a target side
    /// and the entries are read from target word to source words.
    fn coverage(&self, from: &[String], to: &BTreeSet<String>, backwards: bool) -> f64 {
        if from.is_empty() {
            return 0.0;
        }
        let best = |w: &str| -> f64 {
            let list = if backwards { self.reversed().get(w) } else { self.entries.get(w) };
            list.into_iter().flatten().filter(|(v, _)| to.contains(v)).map(|(_, d)| *d).fold(0.0, f64::max)
        };
        from.iter().map(|w| best(w)).sum::<f64>() / from.len() as f64
    }

    /// The entries read from target word to source words, built once.
    fn reversed(&self) -> &Reverse {
        self.reverse.get_or_init(|| {
            let mut out: Reverse = HashMap::new();
            for (w, list) in &self.entries {
                for (v, d) in list {
                    out.entry(v.clone()).or_default().push((w.clone(), *d));
                }
            }
            out
        })
    }
}

/// The words of a numbering, by number.
fn names(ids: HashMap<String, u32>) -> Vec<String> {
    let mut out = vec![String::new(); ids.len()];
    for (w, i) in ids {
        out[i as usize] = w;
    }
    out
}

/// A pair's feature vector ([`FEATURES`] order).
#[must_use]
pub fn features(source: &str, target: &str, dictionary: &Dictionary) -> Vec<f64> {
    let (sw, tw) = (words(source), words(target));
    // `libm`'s logarithm, not the platform's: the same bits everywhere.
    let char_ratio = libm::log((target.chars().count() as f64 + 1.0) / (source.chars().count() as f64 + 1.0));
    let word_ratio = libm::log((tw.len() as f64 + 1.0) / (sw.len() as f64 + 1.0));
    let punct = |t: &str| t.chars().filter(|c| ".!?;:".contains(*c)).count() as f64;
    let (ps, pt) = (punct(source), punct(target));
    let (s_set, t_set): (BTreeSet<String>, BTreeSet<String>) =
        (sw.iter().cloned().collect(), tw.iter().cloned().collect());
    vec![
        char_ratio,
        char_ratio * char_ratio,
        word_ratio,
        word_ratio * word_ratio,
        jaccard(&numbers(source), &numbers(target)),
        (ps - pt).abs() / (1.0 + ps.max(pt)),
        jaccard(&s_set, &t_set),
        jaccard(&trigrams(source), &trigrams(target)),
        dictionary.coverage(&sw, &t_set, false),
        dictionary.coverage(&tw, &s_set, true),
    ]
}

/// A uniform number in `[0, 1)` fixed by the seed and the labels: BLAKE3 of them, so that a
/// corruption depends on nothing but its pair's position and the seed.
fn uniform(seed: u64, i: usize, what: &str) -> f64 {
    let mut h = prov_store::Hasher::new();
    h.update(b"prov-parallel-noise")
        .update(&seed.to_le_bytes())
        .update(&(i as u64).to_le_bytes())
        .update(what.as_bytes());
    let bytes: [u8; 8] = h.finalize().as_bytes()[..8].try_into().expect("eight bytes");
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

/// The kinds of corruption, chosen by a pair's position modulo 3 (a one-word target, which
/// cannot be truncated, is misaligned instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Noise {
    /// The target of another pair.
    Misaligned,
    /// The first 20% to 60% of the target's words.
    Truncated,
    /// Each target word replaced, with probability one half, by a word of another target.
    Replaced,
}

/// The corrupted target of pair `i` of `targets` (at least two), and its kind.
#[must_use]
pub fn noise(targets: &[&str], i: usize, seed: u64) -> (String, Noise) {
    let n = targets.len();
    let pick = |what: &str, k: usize, below: usize| {
        ((uniform(seed, i, &format!("{what}{k}")) * below as f64) as usize).min(below - 1)
    };
    match i % 3 {
        1 if targets[i].split_whitespace().nth(1).is_some() => {
            let w: Vec<&str> = targets[i].split_whitespace().collect();
            // At least one word, and always fewer than the target has.
            let keep = ((w.len() as f64) * (0.2 + 0.4 * uniform(seed, i, "cut"))).ceil() as usize;
            (w[..keep.clamp(1, w.len() - 1)].join(" "), Noise::Truncated)
        }
        // Misaligned; also a target of one word, which cannot be cut.
        0 | 1 => {
            let other = (i + 1 + pick("other", 0, n - 1)) % n;
            (targets[other].to_owned(), Noise::Misaligned)
        }
        _ => {
            let replaced: Vec<String> = targets[i]
                .split_whitespace()
                .enumerate()
                .map(|(k, word)| {
                    if uniform(seed, i, &format!("swap{k}")) < 0.5 {
                        let donor = targets[(i + 1 + pick("donor", k, n - 1)) % n];
                        let dw: Vec<&str> = donor.split_whitespace().collect();
                        if dw.is_empty() { word.to_owned() } else { dw[pick("word", k, dw.len())].to_owned() }
                    } else {
                        word.to_owned()
                    }
                })
                .collect();
            (replaced.join(" "), Noise::Replaced)
        }
    }
}

/// A linear model as the file holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Linear {
    /// The intercept.
    pub intercept: f64,
    /// One weight per feature.
    pub weights: Vec<f64>,
}

impl Linear {
    fn value(&self, x: &[f64]) -> f64 {
        self.intercept + self.weights.iter().zip(x).map(|(w, v)| w * v).sum::<f64>()
    }
}

/// One language pair's scorer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairModel {
    /// The bilingual dictionary.
    pub dictionary: Dictionary,
    /// The classifier (Bicleaner's stand-in): a logistic model of "parallel".
    pub classifier: Linear,
    /// The quality estimate (`CometKiwi`'s stand-in): predicted chrF over 100.
    pub quality: Linear,
}

/// What a pair scores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scores {
    /// The classifier's probability that the pair is parallel, 0 to 1.
    pub classifier: f64,
    /// The quality estimate, clipped to 0 to 1.
    pub quality: f64,
}

impl PairModel {
    /// Scores a pair.
    #[must_use]
    pub fn score(&self, source: &str, target: &str) -> Scores {
        let x = features(source, target, &self.dictionary);
        let classifier =
            LogisticModel { weights: self.classifier.weights.clone(), intercept: self.classifier.intercept }
                .predict(&x);
        Scores { classifier, quality: self.quality.value(&x).clamp(0.0, 1.0) }
    }
}

/// The pinned scorer: a model per language pair (`"<source>-<target>"`, primary subtags).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// [`FORMAT`].
    pub format: String,
    /// [`FEATURES`], so that a reader can see what each weight weighs.
    pub features: Vec<String>,
    /// The models.
    pub pairs: BTreeMap<String, PairModel>,
}

/// Why a model file cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("the pair scorer file is unusable: {0}")]
pub struct ModelError(pub String);

impl Model {
    /// The model file's bytes: canonical JSON and a newline.
    #[must_use]
    pub fn write(&self) -> Vec<u8> {
        let mut bytes = prov_manifest::encode_value(&serde_json::to_value(self).expect("a model encodes"));
        bytes.push(b'\n');
        bytes
    }

    /// Reads a model file, refusing any other format, features or weight counts.
    ///
    /// # Errors
    ///
    /// [`ModelError`] naming what is wrong.
    pub fn parse(bytes: &[u8]) -> Result<Self, ModelError> {
        let model: Self = serde_json::from_slice(bytes).map_err(|e| ModelError(e.to_string()))?;
        if model.format != FORMAT {
            return Err(ModelError(format!("format `{}`, expected `{FORMAT}`", model.format)));
        }
        if model.features != FEATURES {
            return Err(ModelError("its features are not this build's".into()));
        }
        for (name, m) in &model.pairs {
            for (which, l) in [("classifier", &m.classifier), ("quality", &m.quality)] {
                if l.weights.len() != FEATURES.len()
                    || !l.intercept.is_finite()
                    || l.weights.iter().any(|w| !w.is_finite())
                {
                    return Err(ModelError(format!(
                        "`{name}`'s {which} does not have {} finite weights",
                        FEATURES.len()
                    )));
                }
            }
        }
        Ok(model)
    }

    /// The model of the pair of languages (primary subtags joined by `-`).
    #[must_use]
    pub fn pair(&self, source: &str, target: &str) -> Option<&PairModel> {
        self.pairs.get(&language_pair(source, target))
    }
}

/// The key of a language pair: the primary subtags of both languages.
#[must_use]
pub fn language_pair(source: &str, target: &str) -> String {
    format!("{}-{}", prov_dataset::primary_language(source), prov_dataset::primary_language(target))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::float_cmp)] // Dice and Jaccard of these sets are exact
    fn words_and_features_are_as_documented() {
        assert_eq!(words("L'homme, 2 fois!"), vec!["l", "homme", "2", "fois"]);
        let d =
            Dictionary::learn(&[("the house", "das haus"), ("the cat", "die katze"), ("a house", "ein haus")], 3, 2);
        assert_eq!(d.entries["house"][0], ("haus".to_owned(), 1.0));
        assert!(!d.entries.contains_key("cat"), "co-occurs once");
        let x = features("the house 12.", "das haus 12.", &d);
        assert_eq!(x.len(), FEATURES.len());
        assert_eq!(x[4], 1.0, "the numbers agree");
        assert_eq!(x[5], 0.0, "the punctuation agrees");
        // Only "house"/"haus" is in the dictionary: one word in three on each side.
        assert!((x[8] - 1.0 / 3.0).abs() < 1e-15 && (x[9] - 1.0 / 3.0).abs() < 1e-15, "{x:?}");
    }

    #[test]
    fn noise_is_fixed_by_the_seed_and_position() {
        let targets = ["one two three four five", "six seven eight", "nine ten eleven twelve"];
        for i in 0..3 {
            assert_eq!(noise(&targets, i, 7), noise(&targets, i, 7));
        }
        assert_eq!(noise(&targets, 0, 7).1, Noise::Misaligned);
        assert_ne!(noise(&targets, 0, 7).0, targets[0]);
        let (cut, kind) = noise(&targets, 1, 7);
        assert_eq!(kind, Noise::Truncated);
        assert!(targets[1].starts_with(&cut) && cut.split_whitespace().count() >= 1);
    }

    #[test]
    fn model_files_are_checked() {
        let m = Model {
            format: FORMAT.into(),
            features: FEATURES.iter().map(|s| (*s).to_owned()).collect(),
            pairs: BTreeMap::new(),
        };
        assert_eq!(Model::parse(&m.write()).unwrap(), m);
        let mut bad = m.clone();
        bad.pairs.insert(
            "en-de".into(),
            PairModel {
                dictionary: Dictionary::default(),
                classifier: Linear { intercept: 0.0, weights: vec![0.0; 3] },
                quality: Linear { intercept: 0.0, weights: vec![0.0; FEATURES.len()] },
            },
        );
        assert!(Model::parse(&bad.write()).unwrap_err().0.contains("10 finite weights"));
        assert!(Model::parse(br#"{"format":"x","features":[],"pairs":{}}"#).is_err());
    }
}
