//! What the post-training stages (`sft`, `sample-completions`, `dpo`, `qrpo`, `chrf-eval`)
//! share: chat examples, the training-loop parameters they all take and their data order.
//! Loading the checkpoint they start from and writing the one they end with is the worker's
//! (`prov_worker::fine_tuning`).
//!
//! Every post-training stage starts from a checkpoint input (`model`) and uses the tokenizer
//! that checkpoint records, so a recipe cannot pair a model with another tokenizer.

use prov_exec::{ConfigError, StageContext, StageError, parse_params};
use prov_tokenizer::chat::{Message, Role};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::Value;

use crate::loop_config::{LoopConfig, ScheduleKind};
use crate::optimizer::AdEMAMixConfig;

/// One line of a chat-examples file (JSON Lines): an id and a conversation ending with the
/// assistant's answer. Other fields (a `translation-pairs` line's `source` and `target`) are
/// provenance for people and are ignored here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatExample {
    /// The example's identifier.
    pub id: String,
    /// The conversation.
    pub messages: Vec<Message>,
}

impl ChatExample {
    /// The conversation without its last message (the prompt), and the last message's
    /// content (the reference answer); `None` unless it ends with an assistant message.
    pub fn prompt_and_reference(&self) -> Option<(&[Message], &str)> {
        let (last, prompt) = self.messages.split_last()?;
        (last.role == Role::Assistant && !prompt.is_empty()).then_some((prompt, last.content.as_str()))
    }
}

/// Reads the chat-examples file of input `input`; errors name the line.
pub fn read_examples(cx: &StageContext<'_>, input: &str) -> Result<Vec<ChatExample>, StageError> {
    let bytes = cx.read_file_input(input)?;
    let examples: Vec<ChatExample> = prov_reward::stage::read_lines(&bytes)
        .map_err(|message| StageError::Input { input: input.to_owned(), message })?;
    if examples.is_empty() {
        return Err(StageError::Input { input: input.to_owned(), message: "holds no examples".into() });
    }
    Ok(examples)
}

/// The intra-op threads a post-training stage pins when its recipe names none.
pub fn one_thread() -> u32 {
    1
}

/// The optimizer settings of the Apertus report's SFT (and alignment): `AdEMAMix` with
/// `b1 = 0.9`, `b2 = 0.999`, `b3 = 0.99`, `alpha = 8`, both warmups over all steps.
pub fn fine_tuning_optimizer() -> AdEMAMixConfig {
    AdEMAMixConfig { betas: [0.9, 0.999, 0.99], alpha: 8.0, ..AdEMAMixConfig::default() }
}

/// The learning-rate decay of a post-training stage, after its linear warmup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PostSchedule {
    /// Linear to 0, as transformers' `get_linear_schedule_with_warmup` (the Apertus report).
    #[default]
    Linear,
    /// Half-cosine to 0, as transformers' `get_cosine_schedule_with_warmup` (the EuroLLM
    /// report's SFT, §3.2).
    Cosine,
}

impl PostSchedule {
    /// Whether it is the default, which configurations do not write.
    pub fn is_linear(&self) -> bool {
        *self == Self::Linear
    }
}

/// The most examples a post-training stage's data order holds (`steps × batch_size`): its order
/// is materialised (8 bytes an example), so that a stage refuses a size it cannot hold at lock
/// time instead of failing to allocate mid-run.
pub const MAX_EXAMPLES_SEEN: u64 = 1 << 30;

/// The training-loop parameters every post-training stage takes, as its recipe spells them,
/// beside the stage's own (see [`parse_stage_params`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopParams {
    /// Optimizer steps.
    pub steps: u64,
    /// Examples (SFT rows, QRPO completions, DPO pairs) per step.
    pub batch_size: u64,
    /// Peak learning rate.
    pub lr: f64,
    /// Linear warmup steps from 0 (then the decay of `schedule`).
    pub warmup_steps: u64,
    /// The decay after the warmup: `linear` (the default, not written, so that recorded
    /// configurations keep their digests) or `cosine`.
    #[serde(default, skip_serializing_if = "PostSchedule::is_linear")]
    pub schedule: PostSchedule,
    /// `AdEMAMix`'s settings.
    pub optimizer: AdEMAMixConfig,
    /// Largest global gradient norm.
    pub clip: f64,
    /// libtorch's intra-op threads, pinned before the stage computes: its bits depend on them, so
    /// they are configuration (in the stage key), beside the envelope's `ATen` capability.
    pub threads: u32,
    /// Where libtorch computes: `cpu` or `cuda:N`. `prov lock` writes it into the lockfile,
    /// `cpu` when the recipe names none: a GPU is used only where a recipe names it.
    #[serde(default)]
    pub device: prov_exec::ComputeDevice,
}

impl LoopParams {
    /// Checks the values and fills the optimizer's open warmups; errors name the field.
    pub fn resolve(&mut self) -> Result<(), ConfigError> {
        for (field, v) in [("steps", self.steps), ("batch_size", self.batch_size)] {
            if v == 0 {
                return Err(ConfigError::at(&[field], "must be at least 1"));
            }
        }
        prov_exec::check_threads(u64::from(self.threads))?;
        for (field, v) in [("lr", self.lr), ("clip", self.clip)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(ConfigError::at(&[field], format!("must be a positive number, got {v}")));
            }
        }
        if self.steps.checked_mul(self.batch_size).is_none_or(|n| n > MAX_EXAMPLES_SEEN) {
            return Err(ConfigError::at(
                &["steps"],
                format!("steps × batch_size is more than {MAX_EXAMPLES_SEEN} examples, the most a data order holds"),
            ));
        }
        if self.warmup_steps >= self.steps {
            return Err(ConfigError::at(&["warmup_steps"], "must be below `steps`"));
        }
        self.optimizer.resolve(self.steps).map_err(|(field, m)| ConfigError::at(&["optimizer", field], m))
    }

    /// The loop's configuration: the linear warmup and `schedule`'s decay, no Goldfish.
    pub fn loop_config(&self) -> LoopConfig {
        LoopConfig {
            steps: self.steps,
            batch_size: self.batch_size,
            lr: self.lr,
            warmup_steps: self.warmup_steps,
            cooldown_steps: 0,
            schedule: match self.schedule {
                PostSchedule::Linear => ScheduleKind::Linear,
                PostSchedule::Cosine => ScheduleKind::Cosine,
            },
            optimizer: crate::optimizer::OptimizerConfig::AdEMAMix(self.optimizer.clone()),
            clip: self.clip,
            goldfish_k: None,
            goldfish_h: 0,
            phases: Vec::new(),
        }
    }
}

/// Splits a stage's params into the loop's (over `defaults`; a partial `optimizer` map keeps
/// the default's other settings) and the stage's own `S`, whose fields are `own`; checks the
/// loop's. Unknown fields are errors, named. The resolved config is both, in one map.
pub fn parse_stage_params<S: DeserializeOwned + Serialize>(
    params: &Value,
    own: &[&str],
    defaults: &LoopParams,
) -> Result<(LoopParams, S, Value), ConfigError> {
    let given = match params {
        Value::Null => serde_json::Map::new(),
        Value::Object(m) => m.clone(),
        other => return Err(ConfigError::at(&[], format!("params must be a map, got {other}"))),
    };
    let (mine, rest): (serde_json::Map<String, Value>, serde_json::Map<String, Value>) =
        given.into_iter().partition(|(k, _)| own.contains(&k.as_str()));
    let mut loop_value = serde_json::to_value(defaults).expect("the defaults encode");
    overlay(&mut loop_value, Value::Object(rest));
    let mut loop_params: LoopParams = parse_params(&loop_value)?;
    loop_params.resolve()?;
    let stage: S = parse_params(&Value::Object(mine))?;
    let mut resolved = serde_json::to_value(&loop_params).expect("finite numbers encode");
    overlay(&mut resolved, serde_json::to_value(&stage).expect("finite numbers encode"));
    Ok((loop_params, stage, resolved))
}

/// Writes `top`'s entries over `base`'s, map into map.
fn overlay(base: &mut Value, top: Value) {
    match (base, top) {
        (Value::Object(b), Value::Object(t)) => {
            for (k, v) in t {
                match b.get_mut(&k) {
                    Some(existing) if existing.is_object() && v.is_object() => overlay(existing, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, t) => *b = t,
    }
}

/// `epochs` permutations of `0..n` in turn, from one `SplitMix64` stream seeded with `seed`
/// (the `tokenize` stage's data order), cut to `needed` indices.
pub fn order(n: u64, needed: u64, seed: u64) -> Vec<u64> {
    let mut state = seed;
    let mut out = Vec::with_capacity(usize::try_from(needed).unwrap_or(0));
    while (out.len() as u64) < needed {
        out.extend(prov_dataset::tokens::permutation(n, &mut state));
    }
    out.truncate(usize::try_from(needed).expect("an order fits in memory"));
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn orders_cycle_through_fresh_permutations() {
        let o = order(5, 12, 3);
        assert_eq!(o.len(), 12);
        let mut first: Vec<u64> = o[..5].to_vec();
        first.sort_unstable();
        assert_eq!(first, vec![0, 1, 2, 3, 4]);
        assert_eq!(order(5, 12, 3), o, "fixed by the seed");
        assert_ne!(order(5, 12, 4), o);
    }

    #[test]
    fn loop_params_name_the_bad_field() {
        let mut p = LoopParams {
            steps: 10,
            batch_size: 2,
            lr: 1e-3,
            warmup_steps: 10,
            schedule: PostSchedule::Linear,
            optimizer: fine_tuning_optimizer(),
            clip: 1.0,
            threads: 1,
            device: prov_exec::ComputeDevice::Cpu,
        };
        assert_eq!(p.resolve().unwrap_err().path, ["warmup_steps"]);
        p.warmup_steps = 0;
        p.resolve().unwrap();
        assert_eq!(p.optimizer.alpha_warmup, Some(10), "warmups over all steps");
        assert_eq!(p.optimizer.beta3_warmup, Some(10));
        p.lr = f64::NAN;
        assert_eq!(p.resolve().unwrap_err().path, ["lr"]);
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Own {
        #[serde(default)]
        beta: f64,
    }

    #[test]
    fn stage_params_split_and_merge() {
        let defaults = LoopParams {
            steps: 10,
            batch_size: 2,
            lr: 1e-3,
            warmup_steps: 0,
            schedule: PostSchedule::Linear,
            optimizer: fine_tuning_optimizer(),
            clip: 1.0,
            threads: 1,
            device: prov_exec::ComputeDevice::Cpu,
        };
        let (l, own, resolved) = parse_stage_params::<Own>(
            &json!({"beta": 5.0, "steps": 4, "optimizer": {"alpha": 4.0}}),
            &["beta"],
            &defaults,
        )
        .unwrap();
        assert_eq!((l.steps, l.optimizer.alpha, l.optimizer.betas[2], own.beta), (4, 4.0, 0.99, 5.0));
        assert_eq!(resolved["beta"], json!(5.0));
        assert_eq!(resolved["optimizer"]["beta3_warmup"], json!(4));
        // Resolving the resolved config again changes nothing.
        let (_, _, again) = parse_stage_params::<Own>(&resolved, &["beta"], &defaults).unwrap();
        assert_eq!(again, resolved);
        let err = parse_stage_params::<Own>(&json!({"stepz": 4}), &["beta"], &defaults).unwrap_err();
        assert!(err.to_string().contains("stepz"), "{err}");
        // The default schedule is not written (recorded configurations keep their digests);
        // a cosine one is, and reaches the loop.
        assert!(resolved.get("schedule").is_none(), "{resolved}");
        let (l, _, resolved) =
            parse_stage_params::<Own>(&json!({"schedule": "cosine", "warmup_steps": 2}), &["beta"], &defaults).unwrap();
        assert_eq!((resolved["schedule"].as_str(), l.loop_config().schedule), (Some("cosine"), ScheduleKind::Cosine));
        assert!(parse_stage_params::<Own>(&json!({"schedule": "cosine_with_restarts"}), &["beta"], &defaults).is_err());
    }

    #[test]
    fn a_prompt_is_all_but_the_answer() {
        let e = ChatExample {
            id: "x".into(),
            messages: vec![Message::new(Role::User, "Translate: Hallo"), Message::new(Role::Assistant, "Hello")],
        };
        let (prompt, reference) = e.prompt_and_reference().unwrap();
        assert_eq!((prompt.len(), reference), (1, "Hello"));
        let no_answer = ChatExample { id: "y".into(), messages: vec![Message::new(Role::User, "Hi")] };
        assert!(no_answer.prompt_and_reference().is_none());
    }
}
