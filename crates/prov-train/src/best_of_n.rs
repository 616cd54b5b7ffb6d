//! `best-of-n`: SFT data by rejection sampling with a reward model, the reduced form of the AFM
//! report's committee distillation (iTeC, §4.3.2). For each prompt, the completions of every
//! source (a completions file sampled from a model of the recipe's choosing) are scored by one
//! reward model (input `model`) and the best kept as the prompt's answer. The stage scores
//! them itself, so that every reward it compares comes from the same pinned reward model and
//! belongs to the completion it is compared for.
//!
//! Config `sources`: names, in order; input `<source>-completions` for each, and `examples`
//! (the chat examples the completions were sampled from, matched by id; each completions
//! line's `reference` must be its example's answer). A prompt is judged where every source
//! holds it (by id, in the first source's order; the distinct prompts some source lacks are
//! counted), and each line's `prompt_ids` must be its example's prompt as the reward model's
//! chat template renders it (the worker checks). Per prompt the completion with the highest
//! score wins, the first source and then the first completion on a tie; completions with
//! empty text, or whose ids hold a special token before their end (which the text does not
//! show), are passed over (counted), and a prompt with none left is skipped (counted). Output `examples`: chat
//! examples (the prompt's conversation, then an assistant message with the winner's text)
//! with the fields `source`, `completion` and `reward` saying where each answer came from.
//! The scoring is the worker's (`prov_worker::reward_model`), as `reward-model-score`'s; the
//! choice is [`choose`], here.

use std::collections::BTreeMap;

use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{Determinism, OutputType};
use prov_reward::preference::PromptCompletions;
use prov_tokenizer::chat::{Message, Role};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::post::ChatExample;

/// The `best-of-n` stage's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BestOfNConfig {
    /// The candidate sources, in tie-breaking order.
    pub sources: Vec<String>,
    /// libtorch's intra-op threads, pinned before the stage computes.
    #[serde(default = "crate::post::one_thread")]
    pub threads: u32,
    /// Where libtorch computes: `cpu` or `cuda:N`.
    #[serde(default)]
    pub device: prov_exec::ComputeDevice,
}

/// The completions input of source `source`.
pub fn completions_input(source: &str) -> String {
    format!("{source}-completions")
}

/// The `best-of-n` stage kind.
pub struct BestOfNStage;

impl Stage for BestOfNStage {
    fn kind(&self) -> &'static str {
        "best-of-n"
    }
    // 2: scores the candidates itself with the reward model (input `model`).
    // 3: passes over completions holding special tokens; checks `prompt_ids`.
    fn version(&self) -> u32 {
        3
    }
    fn summary(&self) -> &'static str {
        "keeps the best-rewarded completion of several sources per prompt as SFT data"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let c: BestOfNConfig = parse_params(params)?;
        prov_exec::check_threads(u64::from(c.threads))?;
        if c.sources.is_empty() {
            return Err(ConfigError::at(&["sources"], "names no source"));
        }
        for (i, s) in c.sources.iter().enumerate() {
            let ok = !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !ok {
                return Err(ConfigError::at(&["sources"], format!("`{s}` is not a name of a-z, 0-9 and `-`")));
            }
            if c.sources[..i].contains(s) {
                return Err(ConfigError::at(&["sources"], format!("`{s}` is named twice")));
            }
        }
        Ok(serde_json::to_value(c).expect("the config encodes"))
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
    fn inputs_for(&self, config: &Value) -> InputSpec {
        let Ok(c) = serde_json::from_value::<BestOfNConfig>(config.clone()) else { return self.inputs() };
        let file = || vec![OutputType::File, OutputType::Source];
        let mut named = vec![("model".to_owned(), vec![OutputType::Checkpoint]), ("examples".to_owned(), file())];
        for s in &c.sources {
            named.push((completions_input(s), file()));
        }
        InputSpec::Configured(named)
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("examples".into(), OutputType::File)]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        prov_exec::run_in_worker(cx, self)
    }
}

/// One source's candidates: its name, its input's name, its completions and each completion's
/// reward, prompt by prompt.
pub struct Candidates<'a> {
    /// The source's name.
    pub name: &'a str,
    /// Its completions input.
    pub input: String,
    /// Its completions file.
    pub prompts: Vec<PromptCompletions>,
    /// The reward of each completion of each prompt.
    pub rewards: Vec<Vec<f64>>,
    /// Per completion of each prompt, whether it may not be chosen: its ids hold a special
    /// token before their end, which its text does not show (the reward would be for ids
    /// the SFT example, tokenized again, does not hold).
    pub passed_over: Vec<Vec<bool>>,
}

/// What [`choose`] decided: the output lines (canonical JSON Lines) and the statistics.
pub struct Chosen {
    /// The `examples` output.
    pub lines: Vec<Value>,
    /// The stage's statistics.
    pub stats: BTreeMap<String, Value>,
}

/// Picks each prompt's answer from `sources` (the rule of the module doc), with `examples`
/// giving each prompt's conversation. Refuses a prompt id twice in a source or in `examples`,
/// a prompt not in `examples`, a completions line whose `reference` is not its example's
/// answer, and an outcome with no answer at all, naming the input and line.
pub fn choose(examples: &[ChatExample], sources: &[Candidates<'_>]) -> Result<Chosen, StageError> {
    let bad = |input: &str, message: String| StageError::Input { input: input.to_owned(), message };
    let mut by_id = BTreeMap::new();
    for (i, e) in examples.iter().enumerate() {
        if by_id.insert(e.id.as_str(), e).is_some() {
            return Err(bad("examples", format!("line {}: example `{}` appears a second time", i + 1, e.id)));
        }
    }
    // Each source's prompts by id; a prompt is judged where every source has it.
    let mut indexes = Vec::with_capacity(sources.len());
    for source in sources {
        let mut index = BTreeMap::new();
        for (i, p) in source.prompts.iter().enumerate() {
            if index.insert(p.id.as_str(), i).is_some() {
                return Err(bad(&source.input, format!("line {}: prompt `{}` appears a second time", i + 1, p.id)));
            }
            let example = by_id
                .get(p.id.as_str())
                .ok_or_else(|| bad(&source.input, format!("line {}: prompt `{}` is not in `examples`", i + 1, p.id)))?;
            let (_, answer) = example.prompt_and_reference().ok_or_else(|| {
                bad("examples", format!("`{}` does not end with an `assistant` answer after a prompt", example.id))
            })?;
            if answer != p.reference {
                return Err(bad(
                    &source.input,
                    format!(
                        "line {}: prompt `{}`'s reference is not the answer of its example in `examples`: the completions were sampled from other examples",
                        i + 1,
                        p.id
                    ),
                ));
            }
        }
        indexes.push(index);
    }
    let shared = |id: &str| indexes.iter().all(|index| index.contains_key(id));
    let not_shared = indexes
        .iter()
        .flat_map(|index| index.keys())
        .filter(|id| !shared(id))
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let mut passed_over = 0u64;
    let mut lines = Vec::new();
    let mut wins: BTreeMap<&str, u64> = sources.iter().map(|s| (s.name, 0)).collect();
    let mut skipped = 0u64;
    let mut total = 0.0;
    for prompt in sources[0].prompts.iter().filter(|p| shared(&p.id)) {
        // Strictly greater wins: ties go to the earlier source, then the earlier completion.
        let mut best: Option<(&str, usize, f64, &str)> = None;
        for (source, index) in sources.iter().zip(&indexes) {
            let i = index[prompt.id.as_str()];
            for (j, (c, &r)) in source.prompts[i].completions.iter().zip(&source.rewards[i]).enumerate() {
                if c.text.is_empty() || source.passed_over[i][j] {
                    passed_over += 1;
                    continue;
                }
                if best.is_none_or(|(_, _, b, _)| r > b) {
                    best = Some((source.name, j, r, c.text.as_str()));
                }
            }
        }
        let Some((source, completion, reward, text)) = best else {
            skipped += 1;
            continue;
        };
        *wins.get_mut(source).expect("every source counted") += 1;
        total += reward;
        let (conversation, _) = by_id[prompt.id.as_str()].prompt_and_reference().expect("checked above");
        let mut messages = conversation.to_vec();
        messages.push(Message::new(Role::Assistant, text));
        lines.push(json!({ "id": prompt.id, "messages": messages, "source": source, "completion": completion, "reward": reward }));
    }
    if lines.is_empty() {
        return Err(bad(
            &sources[0].input,
            format!(
                "no answer to keep: {not_shared} prompts are not in every source, and every completion of the other {skipped} is empty or holds a special token"
            ),
        ));
    }
    let stats = BTreeMap::from([
        ("examples".into(), json!(lines.len())),
        ("prompts_without_an_answer".into(), json!(skipped)),
        ("prompts_not_in_every_source".into(), json!(not_shared)),
        ("completions_passed_over".into(), json!(passed_over)),
        ("wins".into(), json!(wins)),
        ("mean_reward".into(), json!(total / lines.len() as f64)),
    ]);
    Ok(Chosen { lines, stats })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_names_given_once_and_become_inputs() {
        let c = BestOfNStage.resolve_config(&json!({"sources": ["sft", "dpo-2"]})).unwrap();
        let InputSpec::Configured(inputs) = BestOfNStage.inputs_for(&c) else { panic!("configured inputs") };
        let names: Vec<&str> = inputs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["model", "examples", "sft-completions", "dpo-2-completions"]);
        assert!(BestOfNStage.resolve_config(&json!({"sources": []})).is_err());
        assert!(
            BestOfNStage.resolve_config(&json!({"sources": ["a", "a"]})).unwrap_err().to_string().contains("twice")
        );
        assert!(BestOfNStage.resolve_config(&json!({"sources": ["../x"]})).is_err());
    }
}
