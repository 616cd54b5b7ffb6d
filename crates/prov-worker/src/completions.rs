//! Running a `sample-completions` stage (its kind is `prov_train::completions`'s): each
//! chosen prompt rendered with the reference policy's chat template and continued `n` ways
//! as one batch, each completion from its own seeded stream.

use std::collections::BTreeMap;

use prov_exec::{StageContext, StageError, StageOutput, StageRun, parse_params};
use prov_manifest::{OutputRef, OutputType, derive_seed};
use prov_reward::preference::{Completion, PromptCompletions};
use prov_store::ObjectKind;
use prov_tokenizer::chat::ChatTemplate;
use prov_train::completions::{SampleConfig, choose};
use prov_train::post;
use serde_json::json;

use crate::fine_tuning;

/// An eligible prompt: its example, its rendered ids and its reference answer.
pub(crate) type EligiblePrompt<'a> = (&'a post::ChatExample, Vec<u32>, &'a str);

/// The examples whose prompt, rendered with `template`, leaves room for `max_new` tokens in
/// the model's `window` (a longer one would be sampled from a cut prompt), each with its
/// rendered ids and reference answer, in file order. Refuses an example that is not a prompt
/// and an answer, and a file with no eligible example, naming the line and id.
pub(crate) fn eligible_prompts<'a>(
    examples: &'a [post::ChatExample],
    template: &ChatTemplate,
    max_new: usize,
    window: usize,
) -> Result<Vec<EligiblePrompt<'a>>, StageError> {
    let mut eligible = Vec::with_capacity(examples.len());
    for (index, example) in examples.iter().enumerate() {
        let bad = |message: String| StageError::Input {
            input: "examples".into(),
            message: format!("line {} (`{}`): {message}", index + 1, example.id),
        };
        let (prompt, reference) = example
            .prompt_and_reference()
            .ok_or_else(|| bad("does not end with an `assistant` answer after a prompt".into()))?;
        let prompt_ids = template.render_prompt(prompt).map_err(|e| bad(e.to_string()))?;
        if prompt_ids.len() + max_new <= window {
            eligible.push((example, prompt_ids, reference));
        }
    }
    if eligible.is_empty() {
        return Err(StageError::Input {
            input: "examples".into(),
            message: format!(
                "no prompt of the {} examples leaves room for `max_new_tokens` {max_new} in the model's {window} positions",
                examples.len()
            ),
        });
    }
    Ok(eligible)
}

/// Runs `sample-completions` stages.
pub struct SampleCompletionsRun;

impl StageRun for SampleCompletionsRun {
    fn kind(&self) -> &'static str {
        "sample-completions"
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: SampleConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let model = fine_tuning::load_checkpoint(cx, "model")?;
        let (_, tokenizer, template) = fine_tuning::chat_template(cx.store, "model", &model)?;
        let examples = post::read_examples(cx, "examples")?;
        let max_new = usize::try_from(config.max_new_tokens).expect("a length fits in memory");
        let window = usize::try_from(model.config.max_position_embeddings).expect("a window fits in memory");
        let eligible = eligible_prompts(&examples, &template, max_new, window)?;
        let too_long = examples.len() - eligible.len();
        let chosen = choose(eligible.len() as u64, config.prompts, cx.seed("prompts")?);
        let sample_seed = cx.seed("sample")?;
        let end = i64::from(template.end_id());
        prov_torch::pin_threads(config.threads as usize);
        prov_torch::set_deterministic_algorithms(true);

        let mut lines = Vec::with_capacity(chosen.len());
        let (mut stopped, mut tokens) = (0u64, 0u64);
        for index in chosen {
            let (example, prompt_ids, reference) = &eligible[index];
            let seeds: Vec<u64> =
                (0..config.n).map(|j| derive_seed(sample_seed, &example.id, &format!("completion-{j}"))).collect();
            let prompt_i64: Vec<i64> = prompt_ids.iter().map(|&t| i64::from(t)).collect();
            let sampled = model.sample_batch(&prompt_i64, &seeds, max_new, config.temperature, Some(end));
            let mut completions = Vec::with_capacity(sampled.len());
            for ids in sampled {
                let ids: Vec<u32> =
                    ids.iter().map(|&t| u32::try_from(t).expect("token ids are vocabulary indices")).collect();
                stopped += u64::from(ids.last() == Some(&template.end_id()));
                tokens += ids.len() as u64;
                let text = tokenizer.decode(&ids, true).map_err(|e| StageError::Input {
                    input: "model".into(),
                    message: format!("decoding a completion of `{}`: {e}", example.id),
                })?;
                completions.push(Completion { ids, text });
            }
            lines.push(PromptCompletions {
                id: example.id.clone(),
                prompt_ids: prompt_ids.clone(),
                reference: (*reference).to_owned(),
                completions,
            });
        }
        let count = lines.iter().map(|l| l.completions.len() as u64).sum::<u64>();
        let digest = cx.store.put_bytes(ObjectKind::Blob, &prov_reward::stage::write_lines(&lines))?;
        let mut out = StageOutput::default();
        out.outputs.insert("completions".into(), OutputRef { output_type: OutputType::File, digest });
        out.stats = BTreeMap::from([
            ("prompts".into(), json!(lines.len())),
            ("completions".into(), json!(count)),
            ("completions_ended".into(), json!(stopped)),
            ("mean_completion_tokens".into(), json!(tokens as f64 / count as f64)),
            ("prompts_too_long".into(), json!(too_long)),
        ]);
        Ok(out)
    }
}
