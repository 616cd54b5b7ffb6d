//! `mdloo`: AFM's online reinforcement learning, mirror descent with leave-one-out advantage
//! estimation (§4.3.3, Appendix E.2), as a lockfile sees it. Each iteration samples `k`
//! responses per prompt from the policy as it stands, rewards them with a reward model minus
//! `beta` times the log-ratio to the reference policy, and takes `steps_per_iteration`
//! optimizer steps on the importance-weighted leave-one-out advantages with `gamma` times the
//! KL divergence from the iteration's policy. The loop is the worker's
//! (`prov_worker::mdloo`); the book's "The AFM recipe" (MDLOO) states it operation by
//! operation.
//!
//! Each iteration's prompts come from [`iteration_prompts`]: no prompt twice in one.
//!
//! Inputs: `model` (the starting policy, also the reference), `reward_model` (a
//! `reward-model` checkpoint made with the same tokenizer) and `examples` (chat examples: their
//! prompts). Outputs: `model`, `log` and `samples` (every iteration's responses with their
//! rewards and advantages, one prompt per line).

use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput};
use prov_manifest::{Determinism, OutputType};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::post::{self, LoopParams};

/// MDLOO's own settings, beside [`LoopParams`] (whose `steps` must be `iterations ×
/// steps_per_iteration`, and whose `batch_size` is unused: a step takes every response of
/// its iteration).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MdlooConfig {
    /// Iterations `n`: each samples afresh from the policy as it stands.
    pub iterations: u64,
    /// Optimizer steps per iteration.
    #[serde(default = "default_steps_per_iteration")]
    pub steps_per_iteration: u64,
    /// Prompts per iteration.
    pub prompts: u64,
    /// Responses per prompt, `K` (at least 2: the baseline leaves one out).
    #[serde(default = "default_k")]
    pub k: u64,
    /// `β`, the weight of the log-ratio to the reference policy in the reward.
    #[serde(default = "default_beta")]
    pub beta: f64,
    /// `γ`, the weight of the KL divergence from the iteration's policy in the loss.
    #[serde(default = "default_gamma")]
    pub gamma: f64,
    /// Sampling temperature.
    #[serde(default = "default_temperature")]
    pub temperature: f64,
    /// Longest response, in tokens.
    #[serde(default = "default_max_new_tokens")]
    pub max_new_tokens: u64,
}

fn default_steps_per_iteration() -> u64 {
    1
}
fn default_k() -> u64 {
    4
}
fn default_beta() -> f64 {
    0.1
}
fn default_gamma() -> f64 {
    0.1
}
fn default_temperature() -> f64 {
    1.0
}
fn default_max_new_tokens() -> u64 {
    32
}

/// The stage's own fields.
pub const OWN: &[&str] =
    &["iterations", "steps_per_iteration", "prompts", "k", "beta", "gamma", "temperature", "max_new_tokens"];

/// The loop's defaults for `mdloo` (`steps` is filled from the iterations).
pub fn defaults() -> LoopParams {
    LoopParams {
        steps: 1,
        batch_size: 1,
        lr: 1e-5,
        warmup_steps: 0,
        schedule: post::PostSchedule::Linear,
        optimizer: post::fine_tuning_optimizer(),
        clip: 1.0,
        threads: 1,
        device: prov_exec::ComputeDevice::Cpu,
    }
}

/// Parses a stage's params: the loop's (its `steps` set to `iterations ×
/// steps_per_iteration`; given otherwise, refused) and MDLOO's, checked by name.
pub fn parse(params: &Value) -> Result<(LoopParams, MdlooConfig, Value), ConfigError> {
    if params.get("steps").is_some() {
        return Err(ConfigError::at(&["steps"], "is `iterations × steps_per_iteration` in `mdloo`")
            .with_hint("set `iterations` and `steps_per_iteration`"));
    }
    if params.get("batch_size").is_some() {
        return Err(ConfigError::at(&["batch_size"], "is not an `mdloo` setting")
            .with_hint("a step takes all `prompts × k` responses of its iteration"));
    }
    let mut with_steps = params.clone();
    let own: MdlooConfig = prov_exec::parse_params(&Value::Object(
        params
            .as_object()
            .map(|m| m.iter().filter(|(k, _)| OWN.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default(),
    ))?;
    for (field, v) in
        [("iterations", own.iterations), ("steps_per_iteration", own.steps_per_iteration), ("prompts", own.prompts)]
    {
        if v == 0 {
            return Err(ConfigError::at(&[field], "must be at least 1"));
        }
    }
    if own.k < 2 {
        return Err(ConfigError::at(&["k"], format!("must be at least 2, got {}", own.k))
            .with_hint("the leave-one-out baseline of a response is the mean of the others"));
    }
    for (field, v) in [("beta", own.beta), ("gamma", own.gamma)] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(ConfigError::at(&[field], format!("must be 0 or more, got {v}")));
        }
    }
    if !(own.temperature.is_finite() && own.temperature > 0.0) {
        return Err(ConfigError::at(&["temperature"], format!("must be above 0, got {}", own.temperature))
            .with_hint("at 0 the k responses of a prompt are the same, and every advantage is 0"));
    }
    let max = post::MAX_EXAMPLES_SEEN;
    if own.iterations.checked_mul(own.prompts).and_then(|n| n.checked_mul(own.k)).is_none_or(|n| n > max) {
        return Err(ConfigError::at(&["prompts"], format!("iterations × prompts × k is more than {max} responses")));
    }
    if own.max_new_tokens == 0 {
        return Err(ConfigError::at(&["max_new_tokens"], "must be at least 1"));
    }
    let steps = own
        .iterations
        .checked_mul(own.steps_per_iteration)
        .ok_or_else(|| ConfigError::at(&["iterations"], "iterations × steps_per_iteration does not fit in 64 bits"))?;
    if let Value::Object(m) = &mut with_steps {
        m.insert("steps".into(), Value::from(steps));
    } else if with_steps.is_null() {
        with_steps = serde_json::json!({ "steps": steps });
    }
    let (mut loop_params, own, mut resolved) = post::parse_stage_params::<MdlooConfig>(&with_steps, OWN, &defaults())?;
    // `steps` and `batch_size` follow from MDLOO's own settings; the resolved config keeps
    // only what a recipe may write.
    loop_params.batch_size = own.prompts.saturating_mul(own.k);
    if let Value::Object(m) = &mut resolved {
        m.remove("steps");
        m.remove("batch_size");
    }
    Ok((loop_params, own, resolved))
}

/// Leave-one-out advantages of one prompt's rewards: `A_i = R_i − (Σ_{j≠i} R_j) / (k − 1)`,
/// the sum over `j` in order from 0.0. Needs at least two rewards.
pub fn leave_one_out(rewards: &[f64]) -> Vec<f64> {
    assert!(rewards.len() >= 2, "a leave-one-out baseline needs another reward");
    let others = (rewards.len() - 1) as f64;
    (0..rewards.len())
        .map(|i| {
            let sum = rewards.iter().enumerate().filter(|(j, _)| *j != i).fold(0.0, |acc, (_, r)| acc + r);
            rewards[i] - sum / others
        })
        .collect()
}

/// The prompts of each of `iterations` iterations, `prompts` each, as indices into the
/// `eligible` prompts: permutations of `0..eligible` in turn from one `SplitMix64` stream
/// seeded with `seed` (the `tokenize` stage's data order), each cut into runs of `prompts`,
/// the tail of a permutation shorter than `prompts` passed over, so that no iteration holds a
/// prompt twice. `None` when there are fewer eligible prompts than `prompts`.
pub fn iteration_prompts(eligible: u64, prompts: u64, iterations: u64, seed: u64) -> Option<Vec<Vec<u64>>> {
    if prompts == 0 || prompts > eligible {
        return None;
    }
    let mut state = seed;
    let mut out = Vec::new();
    while (out.len() as u64) < iterations {
        let permutation = prov_dataset::tokens::permutation(eligible, &mut state);
        for chunk in permutation.chunks_exact(usize::try_from(prompts).expect("prompts fit in memory")) {
            if (out.len() as u64) < iterations {
                out.push(chunk.to_vec());
            }
        }
    }
    Some(out)
}

/// The `mdloo` stage kind.
pub struct MdlooStage;

impl Stage for MdlooStage {
    fn kind(&self) -> &'static str {
        "mdloo"
    }
    // 2: no iteration holds a prompt twice (`iteration_prompts`).
    fn version(&self) -> u32 {
        2
    }
    fn summary(&self) -> &'static str {
        "online RL with a reward model: mirror descent on leave-one-out advantages (AFM's MDLOO)"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        Ok(parse(params)?.2)
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Envelope
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![
            ("model", vec![OutputType::Checkpoint]),
            ("reward_model", vec![OutputType::Checkpoint]),
            ("examples", vec![OutputType::File, OutputType::Source]),
        ])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![
            ("model".into(), OutputType::Checkpoint),
            ("log".into(), OutputType::File),
            ("samples".into(), OutputType::File),
        ]
    }
    fn seed_names(&self) -> &'static [&'static str] {
        &["order", "sample"]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        prov_exec::run_in_worker(cx, self)
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // exact values are the point: small sums of exact binary fractions
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn advantages_leave_the_response_itself_out_and_sum_to_zero() {
        let a = leave_one_out(&[1.0, 2.0, 3.0, 6.0]);
        // 1 - (2 + 3 + 6) / 3 = -8/3, and so on.
        assert_eq!(a, [1.0 - 11.0 / 3.0, 2.0 - 10.0 / 3.0, 3.0 - 9.0 / 3.0, 6.0 - 6.0 / 3.0]);
        assert!(a.iter().sum::<f64>().abs() < 1e-12);
        assert_eq!(leave_one_out(&[0.5, 0.5]), [0.0, 0.0], "equal rewards: no advantage");
    }

    #[test]
    fn no_iteration_holds_a_prompt_twice() {
        let all = iteration_prompts(7, 3, 10, 9).unwrap();
        assert_eq!(all.len(), 10);
        for it in &all {
            let mut sorted = it.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), 3, "{it:?}");
            assert!(it.iter().all(|&i| i < 7));
        }
        assert_eq!(iteration_prompts(7, 3, 10, 9), Some(all), "fixed by the seed");
        assert_eq!(iteration_prompts(2, 3, 1, 9), None, "more prompts than there are");
        assert_eq!(iteration_prompts(3, 3, 2, 1).unwrap().len(), 2);
    }

    #[test]
    fn steps_follow_from_the_iterations_and_cannot_be_given() {
        let (l, own, resolved) = parse(&json!({"iterations": 3, "steps_per_iteration": 2, "prompts": 4})).unwrap();
        assert_eq!((l.steps, l.batch_size, own.k), (6, 16, 4));
        assert!(resolved.get("steps").is_none() && resolved.get("batch_size").is_none(), "{resolved}");
        assert_eq!(parse(&resolved).unwrap().2, resolved, "resolving again changes nothing");
        assert_eq!(parse(&json!({"iterations": 3, "prompts": 4, "steps": 6})).unwrap_err().path, ["steps"]);
        assert_eq!(parse(&json!({"iterations": 3, "prompts": 4, "k": 1})).unwrap_err().path, ["k"]);
        assert_eq!(parse(&json!({"iterations": 0, "prompts": 4})).unwrap_err().path, ["iterations"]);
        assert_eq!(parse(&json!({"iterations": 1, "prompts": 4, "gamma": -1})).unwrap_err().path, ["gamma"]);
        assert!(parse(&json!({"iterations": 1, "prompts": 4, "delta": 1})).is_err());
        assert!(parse(&json!({"prompts": 4})).is_err(), "iterations is required");
        assert_eq!(parse(&json!({"iterations": 1, "prompts": 4, "temperature": 0})).unwrap_err().path, ["temperature"]);
        let huge = json!({"iterations": 4_294_967_296u64, "prompts": 4_294_967_296u64});
        assert_eq!(parse(&huge).unwrap_err().path, ["prompts"]);
    }
}
