//! Completion data for alignment: per prompt, the completions sampled from the reference
//! policy (a completions file) and their rewards (a rewards file); their validation, the
//! quantile rewards QRPO trains on, and the chosen/rejected pair DPO trains on, both derived
//! from the rewards alone.
//!
//! Both files are JSON Lines, one prompt per line, in the same order:
//!
//! ```text
//! completions: {"id": "...", "prompt_ids": [...], "reference": "...", "completions": [{"ids": [...], "text": "..."}, ...]}
//! rewards:     {"id": "...", "rewards": [0.31, null, ...]}
//! ```
//!
//! A completion is its token ids (what training computes log-probabilities of, closing
//! `<|end|>` included when the sampler reached it) and their decoded text (what the reward
//! reads). It is empty when it has no ids.
//!
//! The quantile reward of a reward `r` against a prompt's `n` reference rewards is the
//! fraction of them at or below it: `R_q = |{j : r_j <= r}| / n`, so ties count as "at or
//! below", the lowest reference reward has `R_q >= 1/n` and the highest `R_q = 1`. It needs
//! `n >= 2` (with one reference every completion of it has `R_q = 1`, which says nothing).

use serde::{Deserialize, Serialize};

/// One completion: its token ids and their text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Completion {
    /// Token ids, as sampled.
    pub ids: Vec<u32>,
    /// The ids decoded (special tokens left out).
    pub text: String,
}

/// One line of a completions file: a prompt and the completions sampled for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptCompletions {
    /// The prompt's identifier (the example it came from).
    pub id: String,
    /// The prompt's token ids, as the model was given them.
    pub prompt_ids: Vec<u32>,
    /// The answer rewards compare completions with.
    pub reference: String,
    /// The completions, in sampling order.
    pub completions: Vec<Completion>,
}

/// One line of a rewards file: the reward of each completion of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptRewards {
    /// The prompt's identifier, as in the completions file.
    pub id: String,
    /// The reward of each completion, in order; `None` (JSON `null`) where none was computed.
    pub rewards: Vec<Option<f64>>,
}

/// Bad completion data: each error names the prompt (its index, from 0, which is its line
/// number minus one) and the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DataError {
    /// There are no prompts at all.
    #[error("no prompts")]
    NoPrompts,
    /// A prompt has no token ids.
    #[error("prompt {prompt}: `prompt_ids` is empty")]
    EmptyPrompt {
        /// The prompt's index.
        prompt: usize,
    },
    /// A completion has no token ids.
    #[error("prompt {prompt}: `completions[{completion}]` is empty")]
    EmptyCompletion {
        /// The prompt's index.
        prompt: usize,
        /// The completion's index.
        completion: usize,
    },
    /// The two files hold different numbers of prompts.
    #[error("{completions} prompts have completions but {rewards} have rewards")]
    PromptCount {
        /// Lines of the completions file.
        completions: usize,
        /// Lines of the rewards file.
        rewards: usize,
    },
    /// The rewards of a line are for another prompt.
    #[error("prompt {prompt}: `id` is `{found}` where the completions have `{expected}`")]
    IdMismatch {
        /// The prompt's index.
        prompt: usize,
        /// The completions file's id.
        expected: String,
        /// The rewards file's id.
        found: String,
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
    /// Fewer than two completions: a quantile among their rewards is meaningless.
    #[error("prompt {prompt}: {n} completions in `completions`, a quantile needs at least 2 (n = 1 says nothing)")]
    TooFewReferences {
        /// The prompt's index.
        prompt: usize,
        /// Completions given.
        n: usize,
    },
}

/// Checks a completions file's prompts: at least one, each with prompt ids, at least two
/// completions, none empty. The first problem found is the error.
pub fn validate_completions(prompts: &[PromptCompletions]) -> Result<(), DataError> {
    if prompts.is_empty() {
        return Err(DataError::NoPrompts);
    }
    for (prompt, p) in prompts.iter().enumerate() {
        if p.prompt_ids.is_empty() {
            return Err(DataError::EmptyPrompt { prompt });
        }
        if p.completions.len() < 2 {
            return Err(DataError::TooFewReferences { prompt, n: p.completions.len() });
        }
        if let Some(completion) = p.completions.iter().position(|c| c.ids.is_empty()) {
            return Err(DataError::EmptyCompletion { prompt, completion });
        }
    }
    Ok(())
}

/// Checks the completions, then that `rewards` has a finite reward for every completion,
/// prompt by prompt with the same ids, and returns the rewards.
pub fn validate(prompts: &[PromptCompletions], rewards: &[PromptRewards]) -> Result<Vec<Vec<f64>>, DataError> {
    validate_completions(prompts)?;
    if prompts.len() != rewards.len() {
        return Err(DataError::PromptCount { completions: prompts.len(), rewards: rewards.len() });
    }
    prompts
        .iter()
        .zip(rewards)
        .enumerate()
        .map(|(prompt, (p, r))| {
            if p.id != r.id {
                return Err(DataError::IdMismatch { prompt, expected: p.id.clone(), found: r.id.clone() });
            }
            if p.completions.len() != r.rewards.len() {
                return Err(DataError::MismatchedLengths {
                    prompt,
                    completions: p.completions.len(),
                    rewards: r.rewards.len(),
                });
            }
            r.rewards
                .iter()
                .enumerate()
                .map(|(completion, reward)| {
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

    fn prompt(id: &str, completions: &[&[u32]]) -> PromptCompletions {
        PromptCompletions {
            id: id.into(),
            prompt_ids: vec![1, 5, 40, 7, 6],
            reference: "Tous les êtres humains naissent libres.".into(),
            completions: completions.iter().map(|ids| Completion { ids: ids.to_vec(), text: "x".into() }).collect(),
        }
    }

    fn rewards(id: &str, rewards: &[Option<f64>]) -> PromptRewards {
        PromptRewards { id: id.into(), rewards: rewards.to_vec() }
    }

    #[test]
    fn good_data_gives_its_rewards() {
        let p = [prompt("a", &[&[9], &[10, 7], &[7]]), prompt("b", &[&[9], &[7]])];
        let r = [rewards("a", &[Some(1.0), Some(-2.5), Some(1.0)]), rewards("b", &[Some(0.0), Some(3.0)])];
        assert_eq!(validate(&p, &r).unwrap(), vec![vec![1.0, -2.5, 1.0], vec![0.0, 3.0]]);
    }

    #[test]
    fn bad_data_names_the_prompt_and_field() {
        let good = prompt("a", &[&[9], &[7]]);
        let good_rewards = rewards("a", &[Some(1.0), Some(2.0)]);
        let check = |bad: PromptCompletions, bad_rewards: PromptRewards, want: DataError, message: &str| {
            let err = validate(&[good.clone(), bad], &[good_rewards.clone(), bad_rewards]).unwrap_err();
            assert_eq!(format!("{err:?}"), format!("{want:?}"), "NaN is not equal to itself: compare the debug text");
            assert_eq!(err.to_string(), message);
        };
        check(
            prompt("b", &[&[9], &[]]),
            rewards("b", &[Some(1.0), Some(2.0)]),
            DataError::EmptyCompletion { prompt: 1, completion: 1 },
            "prompt 1: `completions[1]` is empty",
        );
        check(
            prompt("b", &[&[9], &[8]]),
            rewards("b", &[Some(1.0), None]),
            DataError::MissingReward { prompt: 1, completion: 1 },
            "prompt 1: `rewards[1]` is missing",
        );
        check(
            prompt("b", &[&[9]]),
            rewards("b", &[Some(1.0)]),
            DataError::TooFewReferences { prompt: 1, n: 1 },
            "prompt 1: 1 completions in `completions`, a quantile needs at least 2 (n = 1 says nothing)",
        );
        check(
            prompt("b", &[&[9], &[8]]),
            rewards("b", &[Some(f64::NAN), Some(1.0)]),
            DataError::NonFiniteReward { prompt: 1, completion: 0, value: f64::NAN },
            "prompt 1: `rewards[0]` is not finite: NaN",
        );
        check(
            prompt("b", &[&[9], &[8], &[7]]),
            rewards("b", &[Some(1.0), Some(2.0)]),
            DataError::MismatchedLengths { prompt: 1, completions: 3, rewards: 2 },
            "prompt 1: 3 `completions` but 2 `rewards`",
        );
        check(
            prompt("b", &[&[9], &[8]]),
            rewards("c", &[Some(1.0), Some(2.0)]),
            DataError::IdMismatch { prompt: 1, expected: "b".into(), found: "c".into() },
            "prompt 1: `id` is `c` where the completions have `b`",
        );
        let mut empty = prompt("b", &[&[9], &[8]]);
        empty.prompt_ids.clear();
        check(
            empty,
            rewards("b", &[Some(1.0), Some(2.0)]),
            DataError::EmptyPrompt { prompt: 1 },
            "prompt 1: `prompt_ids` is empty",
        );
        assert_eq!(validate(&[], &[]).unwrap_err(), DataError::NoPrompts);
        assert_eq!(
            validate(std::slice::from_ref(&good), &[]).unwrap_err(),
            DataError::PromptCount { completions: 1, rewards: 0 }
        );
    }

    #[test]
    fn json_null_is_a_missing_reward() {
        let r: PromptRewards = serde_json::from_str(r#"{"id": "a", "rewards": [0.5, null]}"#).unwrap();
        let p = prompt("a", &[&[9], &[7]]);
        assert_eq!(validate(&[p], &[r]).unwrap_err(), DataError::MissingReward { prompt: 0, completion: 1 });
        assert!(serde_json::from_str::<PromptRewards>(r#"{"id": "a", "rewards": [], "x": 1}"#).is_err());
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
