//! `best-of-n`: SFT data by rejection sampling with a reward model, the reduced form of the AFM
//! report's committee distillation (iTeC, §4.3.2). For each prompt, the completions of every
//! source (a completions file and its `reward-model-score` rewards, from models of the
//! recipe's choosing) are reranked by reward and the best kept as the prompt's answer.
//!
//! Config `sources`: names, in order; inputs `<source>-completions` and `<source>-rewards` for
//! each, and `examples` (the chat examples the completions were sampled from, matched by id).
//! A prompt is judged where every source holds it (by id; the others are counted), in the
//! first source's order. Per prompt the completion with the highest reward wins, the first
//! source and then the first completion on a tie; completions with empty text are passed
//! over, and a prompt with none left is skipped (counted). Output `examples`: chat examples (the prompt's conversation, then an assistant
//! message with the winner's text) with the fields `source`, `completion` and `reward` saying
//! where each answer came from. The stage is portable.

use std::collections::BTreeMap;

use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{Determinism, OutputRef, OutputType};
use prov_reward::preference::{PromptRewards, validate};
use prov_reward::stage::{data_error, read_completions, read_lines, write_lines};
use prov_store::ObjectKind;
use prov_tokenizer::chat::{Message, Role};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::post;

/// The `best-of-n` stage's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BestOfNConfig {
    /// The candidate sources, in tie-breaking order.
    pub sources: Vec<String>,
}

/// The completions input of source `source`.
pub fn completions_input(source: &str) -> String {
    format!("{source}-completions")
}

/// The rewards input of source `source`.
pub fn rewards_input(source: &str) -> String {
    format!("{source}-rewards")
}

/// One line of the output: a chat example and where its answer came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct Chosen<'a> {
    id: &'a str,
    messages: Vec<Message>,
    source: &'a str,
    completion: usize,
    reward: f64,
}

/// The `best-of-n` stage kind.
pub struct BestOfNStage;

impl Stage for BestOfNStage {
    fn kind(&self) -> &'static str {
        "best-of-n"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "keeps the best-rewarded completion of several sources per prompt as SFT data"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let c: BestOfNConfig = parse_params(params)?;
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
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("examples", vec![OutputType::File, OutputType::Source])])
    }
    fn inputs_for(&self, config: &Value) -> InputSpec {
        let Ok(c) = serde_json::from_value::<BestOfNConfig>(config.clone()) else { return self.inputs() };
        let file = || vec![OutputType::File, OutputType::Source];
        let mut named = vec![("examples".to_owned(), file())];
        for s in &c.sources {
            named.push((completions_input(s), file()));
            named.push((rewards_input(s), file()));
        }
        InputSpec::Configured(named)
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("examples".into(), OutputType::File)]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: BestOfNConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let examples = post::read_examples(cx, "examples")?;
        let prompts_by_id: BTreeMap<&str, _> = examples.iter().map(|e| (e.id.as_str(), e)).collect();
        let mut sources = Vec::with_capacity(config.sources.len());
        for s in &config.sources {
            let (c_input, r_input) = (completions_input(s), rewards_input(s));
            let prompts = read_completions(cx, &c_input)?;
            let lines: Vec<PromptRewards> = read_lines(&cx.read_file_input(&r_input)?)
                .map_err(|message| StageError::Input { input: r_input.clone(), message })?;
            let rewards = validate(&prompts, &lines).map_err(|e| data_error(&r_input, &e))?;
            sources.push((s.as_str(), c_input, prompts, rewards));
        }
        // Each source's prompts by id; a prompt is judged where every source has it.
        let mut indexes = Vec::with_capacity(sources.len());
        for (_, input, prompts, _) in &sources {
            let mut by_id = BTreeMap::new();
            for (i, p) in prompts.iter().enumerate() {
                if by_id.insert(p.id.as_str(), i).is_some() {
                    return Err(StageError::Input {
                        input: input.clone(),
                        message: format!("line {}: prompt `{}` appears a second time", i + 1, p.id),
                    });
                }
            }
            indexes.push(by_id);
        }
        let (_, first_input, first, _) = &sources[0];
        let mut out_lines = Vec::with_capacity(first.len());
        let mut wins: BTreeMap<&str, u64> = config.sources.iter().map(|s| (s.as_str(), 0)).collect();
        let (mut skipped, mut not_shared) = (0u64, 0u64);
        for (i, prompt) in first.iter().enumerate() {
            let Some(at): Option<Vec<usize>> = indexes.iter().map(|ix| ix.get(prompt.id.as_str()).copied()).collect()
            else {
                not_shared += 1;
                continue;
            };
            let example = prompts_by_id.get(prompt.id.as_str()).ok_or_else(|| StageError::Input {
                input: first_input.clone(),
                message: format!("line {}: prompt `{}` is not in `examples`", i + 1, prompt.id),
            })?;
            let (conversation, _) = example.prompt_and_reference().ok_or_else(|| StageError::Input {
                input: "examples".into(),
                message: format!("`{}` does not end with an `assistant` answer after a prompt", example.id),
            })?;
            // Strictly greater wins: ties go to the earlier source, then the earlier completion.
            let mut best: Option<(&str, usize, f64, &str)> = None;
            for ((name, _, prompts, rewards), &i) in sources.iter().zip(&at) {
                for (j, (c, &r)) in prompts[i].completions.iter().zip(&rewards[i]).enumerate() {
                    if !c.text.is_empty() && best.is_none_or(|(_, _, b, _)| r > b) {
                        best = Some((name, j, r, c.text.as_str()));
                    }
                }
            }
            let Some((source, completion, reward, text)) = best else {
                skipped += 1;
                continue;
            };
            *wins.get_mut(source).expect("every source counted") += 1;
            let mut messages = conversation.to_vec();
            messages.push(Message::new(Role::Assistant, text));
            out_lines.push(Chosen { id: &prompt.id, messages, source, completion, reward });
        }
        if out_lines.is_empty() {
            return Err(StageError::Input {
                input: first_input.clone(),
                message: format!(
                    "no answer to keep: {not_shared} prompts are not in every source, and every completion of the other {skipped} is empty"
                ),
            });
        }
        let mean = out_lines.iter().map(|l| l.reward).sum::<f64>() / out_lines.len() as f64;
        let digest = cx.store.put_bytes(ObjectKind::Blob, &write_lines(&out_lines))?;
        let mut out = StageOutput::default();
        out.outputs.insert("examples".into(), OutputRef { output_type: OutputType::File, digest });
        out.stats = BTreeMap::from([
            ("examples".into(), json!(out_lines.len())),
            ("prompts_without_an_answer".into(), json!(skipped)),
            ("prompts_not_in_every_source".into(), json!(not_shared)),
            ("wins".into(), json!(wins)),
            ("mean_reward".into(), json!(mean)),
        ]);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_names_given_once_and_become_inputs() {
        let c = BestOfNStage.resolve_config(&json!({"sources": ["sft", "dpo-2"]})).unwrap();
        let InputSpec::Configured(inputs) = BestOfNStage.inputs_for(&c) else { panic!("configured inputs") };
        let names: Vec<&str> = inputs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["examples", "sft-completions", "sft-rewards", "dpo-2-completions", "dpo-2-rewards"]);
        assert!(BestOfNStage.resolve_config(&json!({"sources": []})).is_err());
        assert!(
            BestOfNStage.resolve_config(&json!({"sources": ["a", "a"]})).unwrap_err().to_string().contains("twice")
        );
        assert!(BestOfNStage.resolve_config(&json!({"sources": ["../x"]})).is_err());
    }
}
