//! The language identifier: a multinomial naive Bayes classifier over character n-grams
//! ([`crate::grams`]), its training, its file format and its scoring.
//!
//! **Training.** Every gram of every training text is counted per language. Each language's
//! `features_per_language` most frequent grams (ties by gram order) are selected; the
//! vocabulary is their union, `V` grams. For each language `l` and vocabulary gram `f`, `c(f, l)`
//! is the count of `f` in `l`'s texts and `T(l) = Σ_f c(f, l)`.
//!
//! **Scoring.** With additive smoothing `α`, `P(f | l) = (c(f, l) + α) / (T(l) + α V)`, and a
//! text's score for `l` is `Σ n(f) ln P(f | l)` over the vocabulary grams of the text (`n(f)`
//! their counts; other grams are ignored) under a uniform prior. The language with the highest
//! score is the one identified (the first in code order on a tie); its `score` is its posterior
//! probability, `1 / Σ_l exp(s(l) - s_max)`. A text without a vocabulary gram is not identified.
//!
//! Logarithms and exponentials are `libm`'s (a Rust port of musl's), not the platform's, and
//! scores are summed in a fixed order, so the same text gives the same bits on every machine.
//!
//! **File format** (UTF-8 text, `\n` line ends; the model an `langid-train` stage pins):
//!
//! ```text
//! prov-langid 1
//! max_order 4
//! alpha 0.5
//! languages 2
//! de 1000
//! fr 1200
//! grams 3
//! " a"<TAB>0:12 1:40
//! "ab"<TAB>1:3
//! "é"<TAB>1:17
//! ```
//!
//! (`<TAB>` stands for a tab character.) After the header, one line per language (its code and `T(l)`), in code order; then one line
//! per vocabulary gram in gram order (code point by code point): the gram as a JSON string, a
//! tab, and its non-zero counts as `language-index:count`, in index order, separated by spaces.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hashbrown::HashMap;

use crate::grams::{Gram, MAX_ORDER, for_each_gram, pack, unpack};

/// Whether `code` can name a language in a model: a lowercase ASCII letter or digit run, as
/// the primary subtags documents declare (the file format has no escaping for anything else).
pub fn is_language_code(code: &str) -> bool {
    !code.is_empty() && code.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// How a model is trained.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainParams {
    /// The highest gram order, 1 to [`MAX_ORDER`].
    pub max_order: usize,
    /// How many grams each language contributes to the vocabulary.
    pub features_per_language: usize,
    /// Additive smoothing.
    pub alpha: f64,
}

/// Why a model cannot be trained or read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// A parameter out of range.
    #[error("{0}")]
    Params(String),
    /// No language has a gram.
    #[error("no training text has a word")]
    Empty,
    /// A model file line that does not parse.
    #[error("line {line}: {message}")]
    Line {
        /// 1-based.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// Counts grams per language.
#[derive(Debug)]
pub struct Trainer {
    params: TrainParams,
    counts: BTreeMap<String, HashMap<Gram, u64>>,
}

impl Trainer {
    /// A trainer with `params`.
    ///
    /// # Errors
    ///
    /// [`ModelError::Params`] for an order outside 1 to [`MAX_ORDER`], no features per
    /// language, or a smoothing that is not positive and finite.
    pub fn new(params: TrainParams) -> Result<Self, ModelError> {
        if params.max_order == 0 || params.max_order > MAX_ORDER {
            return Err(ModelError::Params(format!("max_order must be between 1 and {MAX_ORDER}")));
        }
        if params.features_per_language == 0 {
            return Err(ModelError::Params("features_per_language must be at least 1".into()));
        }
        if !(params.alpha.is_finite() && params.alpha > 0.0) {
            return Err(ModelError::Params("alpha must be positive".into()));
        }
        Ok(Self { params, counts: BTreeMap::new() })
    }

    /// Counts the grams of one text of `language`, which must be a language code
    /// ([`is_language_code`]; the stage skips documents whose language is not one).
    pub fn add(&mut self, language: &str, text: &str) {
        debug_assert!(is_language_code(language), "`{language}` is not a language code");
        let counts = self.counts.entry(language.to_owned()).or_default();
        for_each_gram(text, self.params.max_order, |g| *counts.entry(g).or_default() += 1);
    }

    /// Selects the vocabulary and makes the model.
    ///
    /// # Errors
    ///
    /// [`ModelError::Empty`] when no language has a gram.
    pub fn finish(self) -> Result<Model, ModelError> {
        let Self { params, counts } = self;
        let counts: Vec<(String, HashMap<Gram, u64>)> = counts.into_iter().filter(|(_, c)| !c.is_empty()).collect();
        if counts.is_empty() {
            return Err(ModelError::Empty);
        }
        let mut vocabulary: Vec<Gram> = Vec::new();
        for (_, c) in &counts {
            let mut ranked: Vec<(u64, Gram)> = c.iter().map(|(g, n)| (*n, *g)).collect();
            ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            vocabulary.extend(ranked.iter().take(params.features_per_language).map(|(_, g)| *g));
        }
        vocabulary.sort_unstable();
        vocabulary.dedup();
        let mut totals = vec![0u64; counts.len()];
        let grams: Vec<(Gram, Vec<(u32, u64)>)> = vocabulary
            .iter()
            .map(|g| {
                let per: Vec<(u32, u64)> =
                    counts.iter().enumerate().filter_map(|(i, (_, c))| c.get(g).map(|n| (i as u32, *n))).collect();
                for (i, n) in &per {
                    totals[*i as usize] += n;
                }
                (*g, per)
            })
            .collect();
        let languages = counts.into_iter().map(|(l, _)| l).zip(totals).collect();
        Ok(Model::from_parts(params.max_order, params.alpha, languages, grams))
    }
}

/// A language identified in a text.
#[derive(Debug, Clone, PartialEq)]
pub struct Identification {
    /// The language's code, as the training data named it.
    pub language: String,
    /// Its posterior probability.
    pub score: f64,
    /// The second most likely language, if the model has more than one.
    pub runner_up: Option<String>,
    /// How many vocabulary grams the text has.
    pub grams: u64,
}

/// The indexes of the highest score and the next (the first in index order on a tie), as the
/// stable sort in [`Model::ranked`] orders them.
fn best_two(scores: &[f64]) -> (usize, Option<usize>) {
    let (mut best, mut second): (usize, Option<usize>) = (0, None);
    for i in 1..scores.len() {
        if scores[i].total_cmp(&scores[best]).is_gt() {
            second = Some(best);
            best = i;
        } else if second.is_none_or(|j| scores[i].total_cmp(&scores[j]).is_gt()) {
            second = Some(i);
        }
    }
    (best, second)
}

/// `Σ_l exp(s(l) - best)`, summed in language order so that the posterior's bits do not depend
/// on the ranking.
fn posterior_denominator(scores: &[f64], best: f64) -> f64 {
    scores.iter().map(|s| libm::exp(s - best)).sum()
}

/// One language's standing for a text.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    /// The language's code.
    pub language: String,
    /// `Σ n(f) ln P(f | l)`.
    pub log_likelihood: f64,
    /// Its posterior under a uniform prior.
    pub posterior: f64,
}

/// Every language's standing for a text, the most likely first.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranking {
    /// How many vocabulary grams the text has.
    pub grams: u64,
    /// The languages, the most likely first; empty without a vocabulary gram.
    pub languages: Vec<Ranked>,
}

/// A trained model (see the module doc).
#[derive(Debug, Clone)]
pub struct Model {
    max_order: usize,
    alpha: f64,
    /// Each language's code and `T(l)`, in code order.
    languages: Vec<(String, u64)>,
    /// Each vocabulary gram's non-zero counts by language index, in gram order.
    grams: Vec<(Gram, Vec<(u32, u64)>)>,
    /// Per vocabulary gram, `ln((c + α) / α)` for each of its languages (a map for lookups
    /// only: its order reaches no output).
    weights: HashMap<Gram, Vec<(u32, f64)>>,
    /// Per language, `ln(α / (T(l) + α V))`: the weight of any vocabulary gram before its
    /// count is added.
    base: Vec<f64>,
}

impl Model {
    fn from_parts(
        max_order: usize,
        alpha: f64,
        languages: Vec<(String, u64)>,
        grams: Vec<(Gram, Vec<(u32, u64)>)>,
    ) -> Self {
        let v = grams.len() as f64;
        let base = languages.iter().map(|(_, t)| libm::log(alpha / (*t as f64 + alpha * v))).collect();
        let weights = grams
            .iter()
            .map(|(g, per)| (*g, per.iter().map(|(i, n)| (*i, libm::log((*n as f64 + alpha) / alpha))).collect()))
            .collect();
        Self { max_order, alpha, languages, grams, weights, base }
    }

    /// The languages, in code order.
    pub fn languages(&self) -> impl Iterator<Item = &str> {
        self.languages.iter().map(|(l, _)| l.as_str())
    }

    /// The vocabulary's size.
    pub fn vocabulary(&self) -> usize {
        self.grams.len()
    }

    /// Each language's score for `text` (the log-likelihood; see the module doc), in language
    /// order, and the number of vocabulary grams.
    pub fn scores(&self, text: &str) -> (Vec<f64>, u64) {
        let mut scores = vec![0f64; self.languages.len()];
        let mut n = 0u64;
        for_each_gram(text, self.max_order, |g| {
            if let Some(per) = self.weights.get(&g) {
                n += 1;
                for (i, w) in per {
                    scores[*i as usize] += w;
                }
            }
        });
        for (s, b) in scores.iter_mut().zip(&self.base) {
            *s += n as f64 * b;
        }
        (scores, n)
    }

    /// The language of `text`, or `None` when it has no vocabulary gram.
    pub fn identify(&self, text: &str) -> Option<Identification> {
        // Only the best two are needed: no sort and no string per language on this hot path.
        let (scores, grams) = self.scores(text);
        if grams == 0 {
            return None;
        }
        let (best, runner_up) = best_two(&scores);
        let total = posterior_denominator(&scores, scores[best]);
        Some(Identification {
            language: self.languages[best].0.clone(),
            score: libm::exp(0.0) / total,
            runner_up: runner_up.map(|i| self.languages[i].0.clone()),
            grams,
        })
    }

    /// Every language for `text`, the most likely first (the first in code order on a tie),
    /// with its log-likelihood and posterior; no language when `text` has no vocabulary gram.
    pub fn ranked(&self, text: &str) -> Ranking {
        let (scores, grams) = self.scores(text);
        if grams == 0 {
            return Ranking { grams, languages: Vec::new() };
        }
        let mut order: Vec<usize> = (0..scores.len()).collect();
        // The sort is stable: ties stay in code order, as in `best_two`.
        order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]));
        let best = scores[order[0]];
        let total = posterior_denominator(&scores, best);
        let languages = order
            .into_iter()
            .map(|i| Ranked {
                language: self.languages[i].0.clone(),
                log_likelihood: scores[i],
                posterior: libm::exp(scores[i] - best) / total,
            })
            .collect();
        Ranking { grams, languages }
    }

    /// The model file (see the module doc).
    pub fn write(&self) -> String {
        let mut out = format!(
            "prov-langid 1\nmax_order {}\nalpha {:?}\nlanguages {}\n",
            self.max_order,
            self.alpha,
            self.languages.len()
        );
        for (l, t) in &self.languages {
            let _ = writeln!(out, "{l} {t}");
        }
        let _ = writeln!(out, "grams {}", self.grams.len());
        for (g, per) in &self.grams {
            let chars: String = unpack(*g).expect("a vocabulary gram unpacks").into_iter().collect();
            out.push_str(&serde_json::to_string(&chars).expect("a string encodes"));
            out.push('\t');
            for (k, (i, n)) in per.iter().enumerate() {
                if k > 0 {
                    out.push(' ');
                }
                let _ = write!(out, "{i}:{n}");
            }
            out.push('\n');
        }
        out
    }

    /// Reads a model file.
    ///
    /// # Errors
    ///
    /// [`ModelError::Line`] for the first line that is not as the format says: a wrong
    /// header, counts that do not add up to a language's total, grams out of order, a
    /// language index out of range.
    pub fn parse(text: &str) -> Result<Self, ModelError> {
        let mut lines = text.split('\n').enumerate().map(|(i, l)| (i + 1, l));
        let mut next = |what: &str| {
            lines.next().ok_or_else(|| ModelError::Line { line: 0, message: format!("ends before {what}") })
        };
        let bad = |line: usize, message: String| ModelError::Line { line, message };
        let (n, header) = next("the header")?;
        if header != "prov-langid 1" {
            return Err(bad(n, "not a `prov-langid 1` model".into()));
        }
        let field = |(n, line): (usize, &str), name: &str| -> Result<String, ModelError> {
            line.strip_prefix(name)
                .and_then(|r| r.strip_prefix(' '))
                .map(str::to_owned)
                .ok_or_else(|| bad(n, format!("expected `{name} …`")))
        };
        let number = |(n, line): (usize, &str), name: &str| -> Result<usize, ModelError> {
            field((n, line), name)?.parse().map_err(|_| bad(n, format!("`{name}` is not a count")))
        };
        let max_order = number(next("max_order")?, "max_order")?;
        if max_order == 0 || max_order > MAX_ORDER {
            return Err(bad(2, format!("max_order must be between 1 and {MAX_ORDER}")));
        }
        let alpha: f64 =
            field(next("alpha")?, "alpha")?.parse().map_err(|_| bad(3, "`alpha` is not a number".into()))?;
        if !(alpha.is_finite() && alpha > 0.0) {
            return Err(bad(3, "alpha must be positive".into()));
        }
        let language_count = number(next("languages")?, "languages")?;
        let mut languages: Vec<(String, u64)> = Vec::with_capacity(language_count.min(1 << 16));
        for _ in 0..language_count {
            let (n, line) = next("a language")?;
            let (code, total) = line.split_once(' ').ok_or_else(|| bad(n, "expected `CODE TOTAL`".into()))?;
            let total: u64 = total.parse().map_err(|_| bad(n, "the total is not a count".into()))?;
            if !is_language_code(code) || languages.last().is_some_and(|(l, _)| l.as_str() >= code) {
                return Err(bad(n, format!("language `{code}` is not a lowercase code, or out of order")));
            }
            languages.push((code.to_owned(), total));
        }
        let gram_count = number(next("grams")?, "grams")?;
        let mut grams: Vec<(Gram, Vec<(u32, u64)>)> = Vec::with_capacity(gram_count.min(1 << 20));
        let mut sums = vec![0u64; languages.len()];
        for _ in 0..gram_count {
            let (n, line) = next("a gram")?;
            let (gram, counts) = line.split_once('\t').ok_or_else(|| bad(n, "expected `GRAM<TAB>COUNTS`".into()))?;
            let chars: String = serde_json::from_str(gram).map_err(|e| bad(n, format!("the gram: {e}")))?;
            let chars: Vec<char> = chars.chars().collect();
            if chars.is_empty() || chars.len() > max_order || chars == [' '] {
                return Err(bad(n, format!("`{gram}` is not a gram of order 1 to {max_order}")));
            }
            let g = pack(&chars);
            if grams.last().is_some_and(|(last, _)| *last >= g) {
                return Err(bad(n, format!("gram {gram} is out of order or repeated")));
            }
            let mut per: Vec<(u32, u64)> = Vec::new();
            for c in counts.split(' ') {
                let parsed =
                    c.split_once(':').and_then(|(i, k)| Some((i.parse::<u32>().ok()?, k.parse::<u64>().ok()?)));
                let Some((i, k)) = parsed.filter(|(i, k)| (*i as usize) < languages.len() && *k > 0) else {
                    return Err(bad(n, format!("`{c}` is not `LANGUAGE-INDEX:COUNT` with a known index and a count")));
                };
                if per.last().is_some_and(|(last, _)| *last >= i) {
                    return Err(bad(n, "language indexes out of order".into()));
                }
                sums[i as usize] = sums[i as usize]
                    .checked_add(k)
                    .ok_or_else(|| bad(n, format!("the counts of language {i} overflow")))?;
                per.push((i, k));
            }
            grams.push((g, per));
        }
        // The text ends with the last gram's line feed: one empty piece after it, nothing more.
        match (next("the end"), next("the end")) {
            (Ok((_, "")), Err(_)) => {}
            (Ok((n, _)), _) => return Err(bad(n, "text after the last gram".into())),
            (Err(_), _) => return Err(bad(0, "the file does not end with a line feed".into())),
        }
        if let Some((i, ((code, total), sum))) =
            languages.iter().zip(&sums).enumerate().find(|(_, ((_, t), s))| t != *s)
        {
            return Err(bad(5 + i, format!("language `{code}` has a total of {total}, its grams count {sum}")));
        }
        let model = Self::from_parts(max_order, alpha, languages, grams);
        if !model.base.iter().chain(model.weights.values().flatten().map(|(_, w)| w)).all(|x| x.is_finite()) {
            return Err(bad(3, format!("alpha {alpha} makes the model's logarithms infinite")));
        }
        // One file per model: a number written otherwise (`04`, `+4`, `0.50`) is refused.
        if model.write() != text {
            return Err(bad(0, "the file is not in the form Provenant writes (numbers or spacing differ)".into()));
        }
        Ok(model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> TrainParams {
        TrainParams { max_order: 3, features_per_language: 50, alpha: 0.5 }
    }

    fn trained() -> Model {
        let mut t = Trainer::new(params()).unwrap();
        t.add("de", "der die das und ist nicht ein eine sich mit auf für");
        t.add("en", "the and is not a an of with on for this that");
        t.add("fr", "le la les et est pas un une de avec sur pour");
        t.finish().unwrap()
    }

    #[test]
    fn identifies_each_training_language() {
        let m = trained();
        assert_eq!(m.identify("Das ist nicht die Frage").unwrap().language, "de");
        assert_eq!(m.identify("This is not the question").unwrap().language, "en");
        assert_eq!(m.identify("Ce n'est pas la question").unwrap().language, "fr");
        assert_eq!(m.identify("123 !!"), None);
        let id = m.identify("the the the").unwrap();
        assert!(id.score > 0.5 && id.score <= 1.0, "{id:?}");
        assert!(id.runner_up.is_some());
    }

    /// The score for each language, from the formula in the module doc written out directly:
    /// independent of the weights the model precomputes.
    #[test]
    fn scores_follow_the_formula() {
        let m = trained();
        let text = "nicht the lesx";
        let (scores, n) = m.scores(text);
        let mut counts: BTreeMap<Gram, u64> = BTreeMap::new();
        for_each_gram(text, 3, |g| *counts.entry(g).or_default() += 1);
        let v = m.grams.len() as f64;
        let alpha = 0.5;
        for (l, (_, total)) in m.languages.iter().enumerate() {
            let mut expected = 0.0;
            let mut seen = 0;
            for (g, k) in &counts {
                let Ok(at) = m.grams.binary_search_by_key(g, |(g, _)| *g) else { continue };
                seen += k;
                let c = m.grams[at].1.iter().find(|(i, _)| *i as usize == l).map_or(0, |(_, c)| *c);
                expected += *k as f64 * ((c as f64 + alpha) / (*total as f64 + alpha * v)).ln();
            }
            assert_eq!(seen, n);
            assert!((scores[l] - expected).abs() < 1e-9 * expected.abs().max(1.0), "{l}: {} vs {expected}", scores[l]);
        }
    }

    #[test]
    fn the_file_round_trips_and_damage_is_refused() {
        let m = trained();
        let text = m.write();
        let back = Model::parse(&text).unwrap();
        assert_eq!(back.write(), text);
        for text_id in ["Das ist nicht die Frage", "the end"] {
            assert_eq!(back.identify(text_id), m.identify(text_id));
        }
        let lines: Vec<&str> = text.lines().collect();
        let edit = |at: usize, to: &str| {
            let mut l = lines.clone();
            l[at] = to;
            l.join("\n") + "\n"
        };
        let gram_line = lines.iter().position(|l| l.starts_with("grams ")).unwrap() + 1;
        for (damaged, why) in [
            (edit(0, "prov-langid 2"), "another version"),
            (edit(4, "de 1"), "a total that is not the grams' sum"),
            (edit(gram_line, lines[gram_line + 1]), "a repeated gram"),
            (edit(gram_line, "\"abcd\"\t0:1"), "a gram above the order"),
            (edit(gram_line, "\" \"\t0:1"), "the lone space"),
            (edit(gram_line, &format!("{}\t9:1", lines[gram_line].split('\t').next().unwrap())), "an unknown language"),
            (text.trim_end().to_owned(), "no final line feed"),
            (text.clone() + "extra\n", "text after the grams"),
            (text.clone() + "\nextra\n", "text after an empty line after the grams"),
            (text.clone() + "\n", "an empty line after the grams"),
            (edit(1, "max_order 03"), "a number not written as Provenant writes it"),
            (edit(2, "alpha 5e-324"), "a smoothing whose logarithms are infinite"),
            (edit(4, "DE 0"), "an uppercase code"),
            (edit(4, " 0"), "an empty code"),
        ] {
            assert!(Model::parse(&damaged).is_err(), "{why} was accepted");
        }
    }

    /// The logarithms and exponentials the scores use give these bits on every machine (they
    /// are `libm`'s, not the platform's); a dependency update that changed them would change
    /// models' scores and must raise the stage versions. The values are Python's `math.log`
    /// and `math.exp` (glibc's) here, written out as bits.
    #[test]
    fn the_transcendental_functions_give_fixed_bits() {
        let bits = [libm::log(1.5).to_bits(), libm::log(0.5 / 12345.5).to_bits(), libm::exp(-3.25).to_bits()];
        assert_eq!(bits, [0x3fd9_f323_ecbf_984c, 0xc024_3a77_a59e_2d59, 0x3fa3_da36_8521_902d], "{bits:x?}");
    }

    proptest::proptest! {
        /// `identify`'s best two and posterior are `ranked`'s first two, to the bit, ties
        /// included.
        #[test]
        fn identify_is_the_head_of_the_ranking(text in "[a-zäéß ]{0,30}") {
            let m = trained();
            let ranked = m.ranked(&text);
            match m.identify(&text) {
                None => proptest::prop_assert!(ranked.languages.is_empty()),
                Some(id) => {
                    proptest::prop_assert_eq!(&id.language, &ranked.languages[0].language);
                    proptest::prop_assert_eq!(id.score.to_bits(), ranked.languages[0].posterior.to_bits());
                    proptest::prop_assert_eq!(id.runner_up.as_deref(), ranked.languages.get(1).map(|r| r.language.as_str()));
                }
            }
        }
    }

    #[test]
    fn best_two_breaks_ties_in_index_order() {
        assert_eq!(best_two(&[1.0, 3.0, 3.0, 2.0]), (1, Some(2)));
        assert_eq!(best_two(&[5.0, 5.0]), (0, Some(1)));
        assert_eq!(best_two(&[-1.0]), (0, None));
        assert_eq!(best_two(&[2.0, 1.0, 2.0]), (0, Some(2)));
    }

    #[test]
    fn parameters_are_checked() {
        for p in [
            TrainParams { max_order: 0, ..params() },
            TrainParams { max_order: MAX_ORDER + 1, ..params() },
            TrainParams { features_per_language: 0, ..params() },
            TrainParams { alpha: 0.0, ..params() },
            TrainParams { alpha: f64::NAN, ..params() },
        ] {
            assert!(Trainer::new(p).is_err(), "{p:?}");
        }
        assert_eq!(Trainer::new(params()).unwrap().finish().unwrap_err(), ModelError::Empty);
    }
}
