//! `sample-completions`: the reference completions of alignment. For each prompt, `n`
//! completions (default 10, as the Apertus report samples) drawn from the reference policy at
//! `temperature` (default 1) with pinned seeds, stored as a completions file
//! (`prov_reward::preference`'s format) that the `reward`, `dpo` and `qrpo` stages read.
//!
//! Inputs: `model` (the reference policy, usually the `sft` stage's model; its recorded
//! tokenizer renders the prompts) and `examples` (chat examples: the conversation without its
//! last message is the prompt, that message the reference answer). A prompt is eligible when
//! its rendering leaves room for `max_new_tokens` in the model's `max_position_embeddings`
//! (a longer one would be sampled from a cut prompt; counted as `prompts_too_long`). With
//! `prompts: N`, the first `N` of a seeded permutation of the eligible examples are used (seed
//! `prompts`), in file order.
//!
//! Completion `j` of the prompt with id `id` draws from `SplitMix64` seeded with
//! `derive_seed(sample, id, "completion-j")` (BLAKE3, see the lockfile chapter), so a
//! completion does not depend on which other prompts were chosen. The `n` completions of a
//! prompt are computed as one batch. A completion ends with `<|end|>` (kept in its ids) or
//! after `max_new_tokens`; its text is its ids decoded without special tokens.

use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{Determinism, OutputType};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `sample-completions` stage's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleConfig {
    /// Completions per prompt.
    #[serde(default = "default_n")]
    pub n: u64,
    /// Softmax temperature (0: the most likely token).
    #[serde(default = "default_temperature")]
    pub temperature: f64,
    /// Longest completion, in tokens.
    #[serde(default = "default_max_new_tokens")]
    pub max_new_tokens: u64,
    /// How many prompts to use (all when absent).
    #[serde(default)]
    pub prompts: Option<u64>,
    /// libtorch's intra-op threads, pinned before the stage computes: its bits depend on them, so
    /// they are configuration (in the stage key), beside the envelope's `ATen` capability.
    #[serde(default = "crate::post::one_thread")]
    pub threads: u32,
    /// Where libtorch computes: `cpu` or `cuda:N`. `prov lock` writes it into the lockfile,
    /// `cpu` when the recipe names none: a GPU is used only where a recipe names it.
    #[serde(default)]
    pub device: prov_exec::ComputeDevice,
}

fn default_n() -> u64 {
    10
}
fn default_temperature() -> f64 {
    1.0
}
fn default_max_new_tokens() -> u64 {
    128
}

/// The `sample-completions` stage kind.
pub struct SampleCompletionsStage;

impl Stage for SampleCompletionsStage {
    fn kind(&self) -> &'static str {
        "sample-completions"
    }
    // 2: only the prompts that leave room for `max_new_tokens` in the model's window.
    fn version(&self) -> u32 {
        2
    }
    fn summary(&self) -> &'static str {
        "samples n reference completions per prompt from a checkpoint with pinned seeds"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let c: SampleConfig = parse_params(params)?;
        if c.n < 2 {
            return Err(ConfigError::at(&["n"], format!("must be at least 2, got {}", c.n))
                .with_hint("quantile rewards and preference pairs compare a prompt's completions with each other"));
        }
        if !(c.temperature.is_finite() && c.temperature >= 0.0) {
            return Err(ConfigError::at(&["temperature"], format!("must be 0 or more, got {}", c.temperature)));
        }
        if c.max_new_tokens == 0 {
            return Err(ConfigError::at(&["max_new_tokens"], "must be at least 1"));
        }
        prov_exec::check_threads(u64::from(c.threads))?;
        if c.prompts == Some(0) {
            return Err(ConfigError::at(&["prompts"], "must be at least 1"));
        }
        Ok(serde_json::to_value(c).expect("finite numbers encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Envelope
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![
            ("model", vec![OutputType::Checkpoint]),
            ("examples", vec![OutputType::File, OutputType::Source]),
        ])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("completions".into(), OutputType::File)]
    }
    fn seed_names(&self) -> &'static [&'static str] {
        &["prompts", "sample"]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        prov_exec::run_in_worker(cx, self)
    }
}

/// Which of `n` examples to use: all, or the first `prompts` of a seeded permutation, in
/// file order.
pub fn choose(n: u64, prompts: Option<u64>, seed: u64) -> Vec<usize> {
    let mut picked: Vec<u64> = match prompts {
        Some(k) if k < n => {
            let mut state = seed;
            prov_dataset::tokens::permutation(n, &mut state).into_iter().take(k as usize).collect()
        }
        _ => (0..n).collect(),
    };
    picked.sort_unstable();
    picked.into_iter().map(|i| usize::try_from(i).expect("an index fits in memory")).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn choosing_prompts_is_seeded_and_in_file_order() {
        let c = choose(100, Some(10), 5);
        assert_eq!(c.len(), 10);
        assert!(c.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(choose(100, Some(10), 5), c);
        assert_ne!(choose(100, Some(10), 6), c);
        assert_eq!(choose(4, Some(10), 5), vec![0, 1, 2, 3], "more than there are: all");
        assert_eq!(choose(3, None, 5), vec![0, 1, 2]);
    }

    #[test]
    fn n_below_two_is_refused_with_a_reason() {
        let err = SampleCompletionsStage.resolve_config(&json!({"n": 1})).unwrap_err();
        assert_eq!(err.path, ["n"]);
        assert!(err.hint.unwrap().contains("quantile"));
        let resolved = SampleCompletionsStage.resolve_config(&json!({})).unwrap();
        assert_eq!(resolved["n"], json!(10));
        assert_eq!(resolved["temperature"], json!(1.0));
    }
}
