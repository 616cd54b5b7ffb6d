//! Completion data for alignment: per prompt, the completions sampled from the reference
//! policy and their rewards; its validation, the quantile rewards QRPO trains on, and the
//! chosen/rejected pair DPO trains on, both derived from the rewards alone.
//!
//! The quantile reward of a reward `r` against a prompt's `n` reference rewards is the
//! fraction of them at or below it: `R_q = |{j : r_j <= r}| / n`, so ties count as "at or
//! below", the lowest reference reward has `R_q >= 1/n` and the highest `R_q = 1`. It needs
//! `n >= 2` (with one reference every completion of it has `R_q = 1`, which says nothing).

use serde::{Deserialize, Serialize};

/// One prompt's completions and their rewards, as a reference-completion stage stores them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct PromptCompletions {
    /// The prompt, as text.
    pub prompt: String,
    /// The completions, in sampling order.
    pub completions: Vec<String>,
    /// The reward of each completion; `None` (JSON `null`) where none was computed.
    pub rewards: Vec<Option<f64>>,
}

/// Bad completion data: each error names the prompt (its index, from 0) and the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DataError {
    /// There are no prompts at all.
    #[error("no prompts")]
    NoPrompts,
    /// A prompt is the empty string.
    #[error("prompt {prompt}: `prompt` is empty")]
    EmptyPrompt {
        /// The prompt's index.
        prompt: usize,
    },
    /// A completion is the empty string.
    #[error("prompt {prompt}: `completions[{completion}]` is empty")]
    EmptyCompletion {
        /// The prompt's index.
        prompt: usize,
        /// The completion's index.
        completion: usize,
    },
    /// `completions` and `rewards` differ in length.
    #[error("prompt {prompt}: {completions} `completions` but {rewards} `rewards`")]
    MismatchedLengths {
        /// The prompt's index.
        prompt: usize,
        /// Completions given.
        completions: usize,
        /// Rewards given.
        rewards: usize,
    },
    /// A completion has no reward.
    #[error("prompt {prompt}: `rewards[{completion}]` is missing")]
    MissingReward {
        /// The prompt's index.
        prompt: usize,
        /// The completion's index.
        completion: usize,
    },
    /// A reward is NaN or infinite.
    #[error("prompt {prompt}: `rewards[{completion}]` is not finite: {value}")]
    NonFiniteReward {
        /// The prompt's index.
        prompt: usize,
        /// The completion's index.
        completion: usize,
        /// The value found.
        value: f64,
    },
    /// Fewer than two reference rewards: a quantile among them is meaningless.
    #[error("prompt {prompt}: {n} reference rewards in `rewards`, a quantile needs at least 2")]
    TooFewReferences {
        /// The prompt's index.
        prompt: usize,
        /// Rewards given.
        n: usize,
    },
}

/// Checks every prompt and returns its rewards, in order; the first problem found is the
/// error (prompts in order, and within a prompt: the prompt, the lengths, the count, then each
/// completion and its reward).
pub fn validate(prompts: &[PromptCompletions]) -> Result<Vec<Vec<f64>>, DataError> {
    if prompts.is_empty() {
        return Err(DataError::NoPrompts);
    }
    prompts
        .iter()
        .enumerate()
        .map(|(prompt, p)| {
            if p.prompt.is_empty() {
                return Err(DataError::EmptyPrompt { prompt });
            }
            if p.completions.len() != p.rewards.len() {
                return Err(DataError::MismatchedLengths {
                    prompt,
                    completions: p.completions.len(),
                    rewards: p.rewards.len(),
                });
            }
            if p.rewards.len() < 2 {
                return Err(DataError::TooFewReferences { prompt, n: p.rewards.len() });
            }
            p.completions
                .iter()
                .zip(&p.rewards)
                .enumerate()
                .map(|(completion, (text, reward))| {
                    if text.is_empty() {
                        return Err(DataError::EmptyCompletion { prompt, completion });
                    }
                    let value = reward.ok_or(DataError::MissingReward { prompt, completion })?;
                    if !value.is_finite() {
                        return Err(DataError::NonFiniteReward { prompt, completion, value });
                    }
                    Ok(value)
                })
                .collect()
        })
        .collect()
}

/// The quantile reward of `reward` among `references`: the fraction at or below it, in
/// `[0, 1]` (`0` when it is below all of them, `1` when at or above all). For rewards that
/// [`validate`] accepted: finite, at least two references.
pub fn quantile_reward(reward: f64, references: &[f64]) -> f64 {
    debug_assert!(references.len() >= 2, "validated data has at least two references");
    let at_or_below = references.iter().filter(|&&r| r <= reward).count();
    at_or_below as f64 / references.len() as f64
}

/// The quantile reward of each of a prompt's reference completions among all of them (QRPO
/// trained offline on the reference completions themselves).
pub fn quantile_rewards(rewards: &[f64]) -> Vec<f64> {
    rewards.iter().map(|&r| quantile_reward(r, rewards)).collect()
}

/// A DPO pair: indices into a prompt's completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct Pair {
    /// The completion with the highest reward (the first such on ties).
    pub chosen: usize,
    /// The completion with the lowest reward (the first such on ties).
    pub rejected: usize,
}

/// The chosen/rejected pair of a prompt, derived from its rewards alone: the first
/// completion with the highest reward against the first with the lowest. `None` when all
/// rewards are equal (no preference to learn) or there are fewer than two.
pub fn preference_pair(rewards: &[f64]) -> Option<Pair> {
    let mut chosen = 0;
    let mut rejected = 0;
    for (i, &r) in rewards.iter().enumerate() {
        if r > rewards[chosen] {
            chosen = i;
        }
        if r < rewards[rejected] {
            rejected = i;
        }
    }
    (rewards.len() >= 2 && rewards[chosen] > rewards[rejected]).then_some(Pair { chosen, rejected })
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // quantiles are exact fractions
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn prompt(completions: &[&str], rewards: &[Option<f64>]) -> PromptCompletions {
        PromptCompletions {
            prompt: "Translate article 1 into French.".into(),
            completions: completions.iter().map(|&s| s.to_owned()).collect(),
            rewards: rewards.to_vec(),
        }
    }

    #[test]
    fn good_data_gives_its_rewards() {
        let p = [
            prompt(&["a", "b", "c"], &[Some(1.0), Some(-2.5), Some(1.0)]),
            prompt(&["d", "e"], &[Some(0.0), Some(3.0)]),
        ];
        assert_eq!(validate(&p).unwrap(), vec![vec![1.0, -2.5, 1.0], vec![0.0, 3.0]]);
    }

    #[test]
    fn bad_data_names_the_prompt_and_field() {
        let good = prompt(&["a", "b"], &[Some(1.0), Some(2.0)]);
        let check = |bad: PromptCompletions, want: DataError, message: &str| {
            let err = validate(&[good.clone(), bad]).unwrap_err();
            assert_eq!(format!("{err:?}"), format!("{want:?}"), "NaN is not equal to itself: compare the debug text");
            assert_eq!(err.to_string(), message);
        };
        check(
            prompt(&["a", ""], &[Some(1.0), Some(2.0)]),
            DataError::EmptyCompletion { prompt: 1, completion: 1 },
            "prompt 1: `completions[1]` is empty",
        );
        check(
            prompt(&["a", "b"], &[Some(1.0), None]),
            DataError::MissingReward { prompt: 1, completion: 1 },
            "prompt 1: `rewards[1]` is missing",
        );
        check(
            prompt(&["a"], &[Some(1.0)]),
            DataError::TooFewReferences { prompt: 1, n: 1 },
            "prompt 1: 1 reference rewards in `rewards`, a quantile needs at least 2",
        );
        check(
            prompt(&["a", "b"], &[Some(f64::NAN), Some(1.0)]),
            DataError::NonFiniteReward { prompt: 1, completion: 0, value: f64::NAN },
            "prompt 1: `rewards[0]` is not finite: NaN",
        );
        check(
            prompt(&["a", "b"], &[Some(1.0), Some(f64::NEG_INFINITY)]),
            DataError::NonFiniteReward { prompt: 1, completion: 1, value: f64::NEG_INFINITY },
            "prompt 1: `rewards[1]` is not finite: -inf",
        );
        check(
            prompt(&["a", "b", "c"], &[Some(1.0), Some(2.0)]),
            DataError::MismatchedLengths { prompt: 1, completions: 3, rewards: 2 },
            "prompt 1: 3 `completions` but 2 `rewards`",
        );
        let mut empty = good.clone();
        empty.prompt.clear();
        check(empty, DataError::EmptyPrompt { prompt: 1 }, "prompt 1: `prompt` is empty");
        assert_eq!(validate(&[]).unwrap_err(), DataError::NoPrompts);
    }

    #[test]
    fn json_null_is_a_missing_reward() {
        let p: PromptCompletions =
            serde_json::from_str(r#"{"prompt": "p", "completions": ["a", "b"], "rewards": [0.5, null]}"#).unwrap();
        assert_eq!(validate(&[p]).unwrap_err(), DataError::MissingReward { prompt: 0, completion: 1 });
        assert!(
            serde_json::from_str::<PromptCompletions>(r#"{"prompt": "p", "completions": [], "rewards": [], "x": 1}"#)
                .is_err()
        );
    }

    #[test]
    fn quantile_edge_cases() {
        let refs = [0.2, 0.5, 0.5, 0.9];
        assert_eq!(quantile_reward(0.1, &refs), 0.0, "below all");
        assert_eq!(quantile_reward(0.2, &refs), 0.25, "equal to the lowest counts it");
        assert_eq!(quantile_reward(0.5, &refs), 0.75, "ties all count");
        assert_eq!(quantile_reward(0.7, &refs), 0.75);
        assert_eq!(quantile_reward(0.9, &refs), 1.0);
        assert_eq!(quantile_reward(5.0, &refs), 1.0, "above all");
        assert_eq!(quantile_rewards(&[3.0; 5]), vec![1.0; 5], "all equal: every one is at the top");
        assert_eq!(quantile_rewards(&[2.0, 1.0, 3.0, 1.0]), vec![0.75, 0.5, 1.0, 0.5]);
    }

    #[test]
    fn pairs_take_the_first_extreme() {
        assert_eq!(preference_pair(&[0.1, 0.9, 0.0, 0.9, 0.0]), Some(Pair { chosen: 1, rejected: 2 }));
        assert_eq!(preference_pair(&[0.5, 0.5]), None, "no preference");
        assert_eq!(preference_pair(&[0.5]), None);
        assert_eq!(preference_pair(&[]), None);
    }

    proptest! {
        #[test]
        fn quantiles_are_fractions_and_monotone(rewards in prop::collection::vec(-5i32..5, 2..12), a in -6i32..6, b in -6i32..6) {
            let refs: Vec<f64> = rewards.iter().map(|&r| f64::from(r)).collect();
            let (lo, hi) = (f64::from(a.min(b)), f64::from(a.max(b)));
            let (qlo, qhi) = (quantile_reward(lo, &refs), quantile_reward(hi, &refs));
            prop_assert!((0.0..=1.0).contains(&qlo) && qlo <= qhi);
            let n = refs.len() as f64;
            prop_assert!((qlo * n - (qlo * n).round()).abs() < 1e-9, "a multiple of 1/n");
            // Each reference's own quantile is at least 1/n (it counts itself).
            prop_assert!(quantile_rewards(&refs).iter().all(|&q| q >= 1.0 / n));
        }
    }
}
