//! Graded preference data, what AFM's reward model trains on (Appendix E.1): per prompt, the
//! responses with four single-sided grades each, and preference pairs with a level. The
//! format ([`PromptPreferences`]), its validation, and the `preference-data` stage
//! ([`PreferenceDataStage`]), which derives a small real set from a completions file and a
//! pinned term list by the rules of the book's "The AFM recipe" (Graded preference data):
//!
//! - each response's chrF against the prompt's reference, and from the same statistics its
//!   mean character n-gram precision and recall (`prov_reward::chrf::mean_precision_recall`);
//! - a pair for every two responses whose chrF differ, the higher chosen, its level from the
//!   margin (`level_margins`);
//! - grades: instruction following from the recall, truthfulness from the precision,
//!   verbosity from the length ratio to the reference, harmlessness from the occurrences of
//!   the pinned list's terms.
//!
//! The report's data are human judgements and unpublished; these rules stand in for them and
//! are Provenant's. The stage is portable: the same bytes on any machine.

use std::collections::BTreeMap;

use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{Determinism, OutputRef, OutputType};
use prov_reward::chrf::{Chrf, mean_precision_recall};
use prov_reward::stage::{read_completions, read_lines, write_lines};
use prov_store::ObjectKind;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The four single-sided grades, in the order the reward model's grade heads take them.
pub const GRADES: [&str; 4] = ["instruction_following", "verbosity", "truthfulness", "harmlessness"];

/// Levels per grade.
pub const GRADE_LEVELS: u8 = 3;

/// How much better the chosen response of a pair is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    /// Significantly better.
    SignificantlyBetter,
    /// Better.
    Better,
    /// Slightly better.
    SlightlyBetter,
    /// Negligibly better.
    NegligiblyBetter,
}

impl Level {
    /// The levels, most decided first.
    pub const ALL: [Self; 4] = [Self::SignificantlyBetter, Self::Better, Self::SlightlyBetter, Self::NegligiblyBetter];

    /// The soft label of the ranking loss: the probability that the chosen response is
    /// preferred (Appendix E.1: 0.95, 0.85, 0.75, 0.65).
    pub fn probability(self) -> f64 {
        match self {
            Self::SignificantlyBetter => 0.95,
            Self::Better => 0.85,
            Self::SlightlyBetter => 0.75,
            Self::NegligiblyBetter => 0.65,
        }
    }

    /// The name the data files use.
    pub fn name(self) -> &'static str {
        match self {
            Self::SignificantlyBetter => "significantly-better",
            Self::Better => "better",
            Self::SlightlyBetter => "slightly-better",
            Self::NegligiblyBetter => "negligibly-better",
        }
    }
}

/// A response's grades, each `0..GRADE_LEVELS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grades {
    /// How much of what was asked for the response holds.
    pub instruction_following: u8,
    /// 0 too short, 1 about right, 2 too long.
    pub verbosity: u8,
    /// How much of what it says is supported.
    pub truthfulness: u8,
    /// 2 harmless, 0 harmful.
    pub harmlessness: u8,
}

impl Grades {
    /// The grades in [`GRADES`]' order.
    pub fn as_array(&self) -> [u8; 4] {
        [self.instruction_following, self.verbosity, self.truthfulness, self.harmlessness]
    }
}

/// One graded response: its tokens and text as sampled, the measurements its grades come from,
/// and the grades.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GradedResponse {
    /// Token ids, as sampled.
    pub ids: Vec<u32>,
    /// The ids decoded.
    pub text: String,
    /// chrF against the reference, 0 to 100 (derived data only: a file of human judgements
    /// leaves the measurements out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chrf: Option<f64>,
    /// Mean character n-gram precision against the reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<f64>,
    /// Mean character n-gram recall against the reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recall: Option<f64>,
    /// Characters of the response over characters of the reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length_ratio: Option<f64>,
    /// Occurrences of the pinned list's terms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsafe_terms: Option<u64>,
    /// The grades.
    pub grades: Grades,
}

/// A preference between two responses of a prompt, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreferencePair {
    /// The preferred response.
    pub chosen: usize,
    /// The other.
    pub rejected: usize,
    /// How much better the chosen one is.
    pub level: Level,
}

/// One line of a preference file: a prompt, its graded responses and its pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptPreferences {
    /// The prompt's identifier.
    pub id: String,
    /// The prompt's token ids.
    pub prompt_ids: Vec<u32>,
    /// The responses.
    pub responses: Vec<GradedResponse>,
    /// The preferences among them.
    pub pairs: Vec<PreferencePair>,
}

/// Reads and checks a preference file: every prompt and response has ids, every pair names
/// two different responses of its prompt, every grade is below [`GRADE_LEVELS`]. Errors name
/// the line and field.
pub fn parse_preferences(bytes: &[u8]) -> Result<Vec<PromptPreferences>, String> {
    let prompts: Vec<PromptPreferences> = read_lines(bytes)?;
    if prompts.is_empty() {
        return Err("holds no prompts".into());
    }
    for (i, p) in prompts.iter().enumerate() {
        let line = i + 1;
        if p.prompt_ids.is_empty() {
            return Err(format!("line {line}: `prompt_ids` is empty"));
        }
        for (j, r) in p.responses.iter().enumerate() {
            if r.ids.is_empty() {
                return Err(format!("line {line}: `responses[{j}].ids` is empty"));
            }
            if let Some((g, v)) = GRADES.iter().zip(r.grades.as_array()).find(|(_, v)| *v >= GRADE_LEVELS) {
                return Err(format!("line {line}: `responses[{j}].grades.{g}` is {v}, grades are 0 to 2"));
            }
        }
        for (k, pair) in p.pairs.iter().enumerate() {
            let n = p.responses.len();
            if pair.chosen >= n || pair.rejected >= n || pair.chosen == pair.rejected {
                return Err(format!(
                    "line {line}: `pairs[{k}]` names responses {} and {}; the prompt has {n}, and a pair two different ones",
                    pair.chosen, pair.rejected
                ));
            }
        }
    }
    Ok(prompts)
}

/// The `preference-data` stage's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreferenceDataConfig {
    /// chrF margins (points) at or above which a pair is significantly better, better,
    /// slightly better; below the last, negligibly better. Decreasing.
    #[serde(default = "default_level_margins")]
    pub level_margins: [f64; 3],
    /// Recall below the first is instruction-following grade 0, below the second 1, else 2.
    #[serde(default = "default_cut_points")]
    pub recall_levels: [f64; 2],
    /// Precision cut points for the truthfulness grade, as `recall_levels`.
    #[serde(default = "default_cut_points")]
    pub precision_levels: [f64; 2],
    /// Length ratios below the first are verbosity 0 (too short), above the second 2 (too long).
    #[serde(default = "default_length_bounds")]
    pub length_bounds: [f64; 2],
}

fn default_level_margins() -> [f64; 3] {
    [20.0, 10.0, 5.0]
}
fn default_cut_points() -> [f64; 2] {
    [0.2, 0.4]
}
fn default_length_bounds() -> [f64; 2] {
    [0.5, 2.0]
}

impl PreferenceDataConfig {
    fn check(&self) -> Result<(), ConfigError> {
        let m = self.level_margins;
        if !(m.iter().all(|v| v.is_finite() && *v > 0.0) && m[0] > m[1] && m[1] > m[2]) {
            return Err(ConfigError::at(&["level_margins"], format!("must be positive and decreasing, got {m:?}")));
        }
        for (field, [a, b]) in [("recall_levels", self.recall_levels), ("precision_levels", self.precision_levels)] {
            if !((0.0..=1.0).contains(&a) && (0.0..=1.0).contains(&b) && a < b) {
                return Err(ConfigError::at(&[field], format!("must be increasing, within [0, 1], got [{a}, {b}]")));
            }
        }
        let [lo, hi] = self.length_bounds;
        if !(lo.is_finite() && hi.is_finite() && lo > 0.0 && lo < hi) {
            return Err(ConfigError::at(
                &["length_bounds"],
                format!("must be positive and increasing, got [{lo}, {hi}]"),
            ));
        }
        Ok(())
    }

    /// The level of a pair whose chrF differ by `margin` (> 0).
    pub fn level(&self, margin: f64) -> Level {
        let [significant, better, slight] = self.level_margins;
        if margin >= significant {
            Level::SignificantlyBetter
        } else if margin >= better {
            Level::Better
        } else if margin >= slight {
            Level::SlightlyBetter
        } else {
            Level::NegligiblyBetter
        }
    }

    /// The grades of a response with these measurements.
    pub fn grades(&self, precision: f64, recall: f64, length_ratio: f64, unsafe_terms: u64) -> Grades {
        let three = |v: f64, [a, b]: [f64; 2]| u8::from(v >= a) + u8::from(v >= b);
        let [lo, hi] = self.length_bounds;
        Grades {
            instruction_following: three(recall, self.recall_levels),
            verbosity: if length_ratio < lo {
                0
            } else if length_ratio > hi {
                2
            } else {
                1
            },
            truthfulness: three(precision, self.precision_levels),
            harmlessness: match unsafe_terms {
                0 => 2,
                1 => 1,
                _ => 0,
            },
        }
    }
}

/// Every pair of `scores` (in `(i, j)` order, `i < j`) whose scores differ, the higher chosen.
pub fn pairs(config: &PreferenceDataConfig, scores: &[f64]) -> Vec<PreferencePair> {
    let mut out = Vec::new();
    for i in 0..scores.len() {
        for j in i + 1..scores.len() {
            let (chosen, rejected) = if scores[i] > scores[j] {
                (i, j)
            } else if scores[j] > scores[i] {
                (j, i)
            } else {
                continue;
            };
            out.push(PreferencePair { chosen, rejected, level: config.level(scores[chosen] - scores[rejected]) });
        }
    }
    out
}

/// The `preference-data` stage kind.
pub struct PreferenceDataStage;

impl Stage for PreferenceDataStage {
    fn kind(&self) -> &'static str {
        "preference-data"
    }
    // 2: one term list only (a directory of lists is refused).
    fn version(&self) -> u32 {
        2
    }
    fn summary(&self) -> &'static str {
        "derives graded preference pairs from sampled completions, chrF and a pinned term list"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let c: PreferenceDataConfig = parse_params(params)?;
        c.check()?;
        Ok(serde_json::to_value(c).expect("finite numbers encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![
            ("completions", vec![OutputType::File, OutputType::Source]),
            ("unsafe_terms", vec![OutputType::File, OutputType::Source]),
        ])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("preferences".into(), OutputType::File)]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: PreferenceDataConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let prompts = read_completions(cx, "completions")?;
        let terms = match prov_terms::read_term_lists(
            cx,
            "unsafe_terms",
            prov_terms::MatchMode::Word,
            prov_terms::CaseMode::Insensitive,
        )? {
            prov_terms::TermLists::Single(list) => list,
            prov_terms::TermLists::PerLanguage(lists) => {
                return Err(StageError::Input {
                    input: "unsafe_terms".into(),
                    message: format!(
                        "is a directory of {} lists; the grade reads one list against every response: give one list \
                         (every language's list together would flag ordinary words: Spanish `del` is Dutch profanity)",
                        lists.len()
                    ),
                });
            }
        };
        let chrf = Chrf::CHRF;
        let mut lines = Vec::with_capacity(prompts.len());
        let mut levels: BTreeMap<&str, u64> = Level::ALL.iter().map(|l| (l.name(), 0)).collect();
        let mut grade_counts: BTreeMap<&str, [u64; 3]> = GRADES.iter().map(|g| (*g, [0; 3])).collect();
        for (i, p) in prompts.iter().enumerate() {
            let bad = |message: String| StageError::Input {
                input: "completions".into(),
                message: format!("line {} (`{}`): {message}", i + 1, p.id),
            };
            let reference_chars = p.reference.chars().count();
            if reference_chars == 0 {
                return Err(bad("`reference` is empty: nothing to grade against".into()));
            }
            let mut responses = Vec::with_capacity(p.completions.len());
            let mut scores = Vec::with_capacity(p.completions.len());
            for c in &p.completions {
                let stats =
                    chrf.segment_statistics(&c.text, &[p.reference.as_str()]).map_err(|e| bad(e.to_string()))?;
                let (precision, recall) = mean_precision_recall(&stats);
                let length_ratio = c.text.chars().count() as f64 / reference_chars as f64;
                let unsafe_terms = terms.scan(&c.text).matches;
                let grades = config.grades(precision, recall, length_ratio, unsafe_terms);
                for (g, v) in GRADES.iter().zip(grades.as_array()) {
                    grade_counts.get_mut(g).expect("every grade counted")[usize::from(v)] += 1;
                }
                scores.push(chrf.score(&stats));
                responses.push(GradedResponse {
                    ids: c.ids.clone(),
                    text: c.text.clone(),
                    chrf: Some(chrf.score(&stats)),
                    precision: Some(precision),
                    recall: Some(recall),
                    length_ratio: Some(length_ratio),
                    unsafe_terms: Some(unsafe_terms),
                    grades,
                });
            }
            let pairs = pairs(&config, &scores);
            for pair in &pairs {
                *levels.get_mut(pair.level.name()).expect("every level counted") += 1;
            }
            lines.push(PromptPreferences { id: p.id.clone(), prompt_ids: p.prompt_ids.clone(), responses, pairs });
        }
        let pair_count: u64 = levels.values().sum();
        if pair_count == 0 {
            return Err(StageError::Input {
                input: "completions".into(),
                message: "no prompt has two responses with different chrF: there is no preference to learn".into(),
            });
        }
        let digest = cx.store.put_bytes(ObjectKind::Blob, &write_lines(&lines))?;
        let mut out = StageOutput::default();
        out.outputs.insert("preferences".into(), OutputRef { output_type: OutputType::File, digest });
        out.stats = BTreeMap::from([
            ("prompts".into(), json!(lines.len())),
            ("responses".into(), json!(lines.iter().map(|l| l.responses.len()).sum::<usize>())),
            ("pairs".into(), json!(pair_count)),
            ("levels".into(), json!(levels)),
            ("grades".into(), json!(grade_counts)),
        ]);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> PreferenceDataConfig {
        parse_params(&json!({})).unwrap()
    }

    #[test]
    fn levels_follow_the_margins_and_the_reports_probabilities() {
        let c = config();
        assert_eq!(c.level(20.0), Level::SignificantlyBetter);
        assert_eq!(c.level(19.99), Level::Better);
        assert_eq!(c.level(10.0), Level::Better);
        assert_eq!(c.level(5.0), Level::SlightlyBetter);
        assert_eq!(c.level(4.9), Level::NegligiblyBetter);
        let p: Vec<f64> = Level::ALL.iter().map(|l| l.probability()).collect();
        assert_eq!(p, [0.95, 0.85, 0.75, 0.65]);
        assert_eq!(serde_json::to_value(Level::SlightlyBetter).unwrap(), json!("slightly-better"));
    }

    #[test]
    fn pairs_skip_ties_and_choose_the_higher_score() {
        let got = pairs(&config(), &[30.0, 50.0, 30.0, 31.0]);
        let want = [
            (1, 0, Level::SignificantlyBetter),
            (3, 0, Level::NegligiblyBetter),
            (1, 2, Level::SignificantlyBetter),
            (1, 3, Level::Better),
            (3, 2, Level::NegligiblyBetter),
        ];
        let got: Vec<(usize, usize, Level)> = got.iter().map(|p| (p.chosen, p.rejected, p.level)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn grades_cut_at_the_configured_points() {
        let c = config();
        let g = c.grades(0.19, 0.4, 0.5, 0);
        assert_eq!(g.as_array(), [2, 1, 0, 2]);
        let g = c.grades(0.2, 0.0, 2.01, 1);
        assert_eq!(g.as_array(), [0, 2, 1, 1]);
        assert_eq!(c.grades(1.0, 1.0, 0.49, 5).as_array(), [2, 0, 2, 0]);
    }

    #[test]
    fn bad_configurations_and_files_are_named() {
        let err = PreferenceDataStage.resolve_config(&json!({"level_margins": [5, 10, 20]})).unwrap_err();
        assert_eq!(err.path, ["level_margins"]);
        let err = PreferenceDataStage.resolve_config(&json!({"recall_levels": [0.5, 0.2]})).unwrap_err();
        assert_eq!(err.path, ["recall_levels"]);
        assert_eq!(
            PreferenceDataStage.resolve_config(&json!({"length_bounds": [0, 2]})).unwrap_err().path,
            ["length_bounds"]
        );
        let response = json!({"ids": [5], "text": "a", "chrf": 1.0, "precision": 0.1, "recall": 0.1, "length_ratio": 1.0,
            "unsafe_terms": 0, "grades": {"instruction_following": 0, "verbosity": 1, "truthfulness": 0, "harmlessness": 3}});
        let line = json!({"id": "p", "prompt_ids": [1], "responses": [response], "pairs": []});
        let err = parse_preferences(format!("{line}\n").as_bytes()).unwrap_err();
        assert!(err.contains("line 1: `responses[0].grades.harmlessness` is 3"), "{err}");
        let mut ok = response.clone();
        ok["grades"]["harmlessness"] = json!(2);
        let line = json!({"id": "p", "prompt_ids": [1], "responses": [ok.clone(), ok], "pairs": [{"chosen": 1, "rejected": 1, "level": "better"}]});
        let err = parse_preferences(format!("{line}\n").as_bytes()).unwrap_err();
        assert!(err.contains("`pairs[0]` names responses 1 and 1"), "{err}");
        assert!(parse_preferences(b"").unwrap_err().contains("no prompts"));
    }
}
