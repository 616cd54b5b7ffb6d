//! The `reward` stage: scores every completion of a completions file against its prompt's
//! reference with a pinned reward function, and writes the rewards file that the `dpo` and
//! `qrpo` stages train from (see [`crate::preference`] for both formats).
//!
//! Input `completions` (a file); param `metric`: `chrf` (default; sacrebleu's chrF, `c = 6`,
//! `beta = 2`) or `chrf++` (`w = 2`). Output `rewards`. The stage is portable: the same bytes
//! on any machine. Bad completion data (no prompts, empty prompts or completions, a prompt with
//! fewer than two completions) stops it with the line and field named.

use std::collections::BTreeMap;

use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{Determinism, OutputRef, OutputType, encode_value};
use prov_store::ObjectKind;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::{Value, json};

use crate::chrf::Chrf;
use crate::preference::{DataError, PromptCompletions, PromptRewards, preference_pair, validate_completions};

/// The reward function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Metric {
    /// chrF (`c = 6`, `w = 0`, `beta = 2`).
    #[serde(rename = "chrf")]
    Chrf,
    /// chrF++ (`c = 6`, `w = 2`, `beta = 2`).
    #[serde(rename = "chrf++")]
    ChrfPlusPlus,
}

impl Metric {
    /// sacrebleu's configuration of the metric.
    pub fn chrf(self) -> Chrf {
        match self {
            Self::Chrf => Chrf::CHRF,
            Self::ChrfPlusPlus => Chrf::CHRF_PLUS_PLUS,
        }
    }
}

/// The `reward` stage's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RewardConfig {
    /// The reward function.
    #[serde(default = "default_metric")]
    pub metric: Metric,
}

fn default_metric() -> Metric {
    Metric::Chrf
}

/// Reads a JSON Lines file of `T`, one per non-empty line; the error names the line (from 1)
/// and what serde found wrong there.
pub fn read_lines<T: DeserializeOwned>(bytes: &[u8]) -> Result<Vec<T>, String> {
    bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, l)| serde_json::from_slice(l).map_err(|e| format!("line {}: {e}", i + 1)))
        .collect()
}

/// Canonical JSON Lines of `items`.
pub fn write_lines<T: Serialize>(items: &[T]) -> Vec<u8> {
    let mut out = Vec::new();
    for item in items {
        out.extend(encode_value(&serde_json::to_value(item).expect("the line types encode")));
        out.push(b'\n');
    }
    out
}

/// A [`DataError`] as a stage error on input `input`, with the line of the prompt it names.
pub fn data_error(input: &str, e: &DataError) -> StageError {
    let line = match e {
        DataError::EmptyPrompt { prompt }
        | DataError::EmptyCompletion { prompt, .. }
        | DataError::IdMismatch { prompt, .. }
        | DataError::MismatchedLengths { prompt, .. }
        | DataError::MissingReward { prompt, .. }
        | DataError::NonFiniteReward { prompt, .. }
        | DataError::TooFewReferences { prompt, .. } => format!(" (line {})", prompt + 1),
        DataError::NoPrompts | DataError::PromptCount { .. } => String::new(),
    };
    StageError::Input { input: input.to_owned(), message: format!("{e}{line}") }
}

/// Reads and validates the completions file `digest` of input `input`.
pub fn read_completions(cx: &StageContext<'_>, input: &str) -> Result<Vec<PromptCompletions>, StageError> {
    let bytes = cx.read_file_input(input)?;
    let prompts: Vec<PromptCompletions> =
        read_lines(&bytes).map_err(|message| StageError::Input { input: input.to_owned(), message })?;
    validate_completions(&prompts).map_err(|e| data_error(input, &e))?;
    Ok(prompts)
}

/// The `reward` stage kind.
pub struct RewardStage;

impl Stage for RewardStage {
    fn kind(&self) -> &'static str {
        "reward"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "scores sampled completions against their references (chrF), for DPO pairs and QRPO quantiles"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let c: RewardConfig = parse_params(params)?;
        Ok(serde_json::to_value(c).expect("the config encodes"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("completions", vec![OutputType::File, OutputType::Source])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("rewards".into(), OutputType::File)]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: RewardConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let prompts = read_completions(cx, "completions")?;
        let chrf = config.metric.chrf();
        let mut lines = Vec::with_capacity(prompts.len());
        for (i, p) in prompts.iter().enumerate() {
            let rewards = p
                .completions
                .iter()
                .map(|c| chrf.sentence_score(&c.text, &[p.reference.as_str()]).map(Some))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| StageError::Input {
                    input: "completions".into(),
                    message: format!("line {}: `reference`: {e}", i + 1),
                })?;
            lines.push(PromptRewards { id: p.id.clone(), rewards });
        }
        let with_pair = lines
            .iter()
            .filter(|l| preference_pair(&l.rewards.iter().flatten().copied().collect::<Vec<_>>()).is_some())
            .count();
        let mut out = rewards_output(cx, &lines)?;
        out.stats.insert("prompts_with_a_preference".into(), json!(with_pair));
        Ok(out)
    }
}

/// Stores a rewards file of `lines` as the output `rewards`, with the statistics every stage
/// that writes one gives: `prompts`, `completions` (rewards computed), `mean_reward`,
/// `max_reward`.
pub fn rewards_output(cx: &StageContext<'_>, lines: &[PromptRewards]) -> Result<StageOutput, StageError> {
    let values: Vec<f64> = lines.iter().flat_map(|l| l.rewards.iter().flatten().copied()).collect();
    let digest = cx.store.put_bytes(ObjectKind::Blob, &write_lines(lines))?;
    let mut out = StageOutput::default();
    out.outputs.insert("rewards".into(), OutputRef { output_type: OutputType::File, digest });
    out.stats = BTreeMap::from([
        ("prompts".into(), json!(lines.len())),
        ("completions".into(), json!(values.len())),
        ("mean_reward".into(), json!(values.iter().sum::<f64>() / values.len() as f64)),
        ("max_reward".into(), json!(values.iter().copied().fold(f64::NEG_INFINITY, f64::max))),
    ]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_where_they_are_wrong() {
        let bytes = b"{\"id\": \"a\", \"rewards\": [1.0]}\n\n{\"id\": \"b\", \"reward\": []}\n";
        let err = read_lines::<PromptRewards>(bytes).unwrap_err();
        assert!(err.starts_with("line 3: unknown field `reward`"), "{err}");
        let ok: Vec<PromptRewards> = read_lines(&bytes[..31]).unwrap();
        // Canonical JSON writes an integral float without its fraction.
        assert_eq!(write_lines(&ok), b"{\"id\":\"a\",\"rewards\":[1]}\n");
    }

    #[test]
    fn data_errors_name_the_line() {
        let e = data_error("completions", &DataError::TooFewReferences { prompt: 4, n: 1 });
        assert_eq!(
            e.to_string(),
            "input `completions`: prompt 4: 1 completions in `completions`, a quantile needs at least 2 (n = 1 says nothing) (line 5)"
        );
    }

    #[test]
    fn metrics_parse_as_recipes_spell_them() {
        let c: RewardConfig = parse_params(&json!({"metric": "chrf++"})).unwrap();
        assert_eq!(c.metric.chrf(), Chrf::CHRF_PLUS_PLUS);
        assert_eq!(parse_params::<RewardConfig>(&json!({})).unwrap().metric, Metric::Chrf);
        assert!(parse_params::<RewardConfig>(&json!({"metric": "bleu"})).is_err());
    }
}
