//! Running a `chrf-eval` stage (its kind is `prov_train::evaluate`'s): each model's greedy
//! answers to the held-out prompts, scored by chrF against the references.

use std::collections::BTreeMap;

use prov_exec::{StageContext, StageError, StageOutput, StageRun, parse_params};
use prov_manifest::{OutputRef, OutputType};
use prov_reward::chrf::Chrf;
use prov_store::ObjectKind;
use prov_train::evaluate::EvalConfig;
use prov_train::post::{self, ChatExample};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::checkpoint::LoadedCheckpoint;
use crate::fine_tuning;

/// Runs `chrf-eval` stages.
pub struct ChrfEvalRun;

impl StageRun for ChrfEvalRun {
    fn kind(&self) -> &'static str {
        "chrf-eval"
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: EvalConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let examples = post::read_examples(cx, "examples")?;
        let max_new = usize::try_from(config.max_new_tokens).expect("a length fits in memory");
        prov_torch::pin_threads(config.threads as usize);
        prov_torch::set_deterministic_algorithms(true);
        let mut outputs = Vec::new();
        for input in ["model", "baseline"] {
            let model = fine_tuning::load_checkpoint(cx, input)?;
            outputs.push(answers(cx, input, &model, &examples, max_new)?);
        }
        let references: Vec<[&str; 1]> =
            examples.iter().map(|e| [e.prompt_and_reference().map_or("", |(_, r)| r)]).collect();
        let chrf = Chrf::CHRF;
        let score_error =
            |e: prov_reward::chrf::ChrfError| StageError::Input { input: "examples".into(), message: e.to_string() };
        let corpus: Vec<f64> = outputs
            .iter()
            .map(|h| chrf.corpus_score(&h.iter().map(String::as_str).collect::<Vec<_>>(), &references))
            .collect::<Result<_, _>>()
            .map_err(score_error)?;
        let mut lines = Vec::with_capacity(examples.len());
        for (i, e) in examples.iter().enumerate() {
            let answer = |k: usize| -> Result<Answer, StageError> {
                let text = outputs[k][i].clone();
                let chrf = chrf.sentence_score(&text, &references[i]).map_err(score_error)?;
                Ok(Answer { text, chrf })
            };
            lines.push(json!({
                "id": e.id,
                "reference": references[i][0],
                "model": answer(0)?,
                "baseline": answer(1)?,
            }));
        }
        let digest = cx.store.put_bytes(ObjectKind::Blob, &prov_reward::stage::write_lines(&lines))?;
        let mut out = StageOutput::default();
        out.outputs.insert("translations".into(), OutputRef { output_type: OutputType::File, digest });
        out.stats = BTreeMap::from([
            ("examples".into(), json!(examples.len())),
            ("chrf".into(), json!(corpus[0])),
            ("baseline_chrf".into(), json!(corpus[1])),
            ("chrf_difference".into(), json!(corpus[0] - corpus[1])),
        ]);
        Ok(out)
    }
}

/// One model's answer to one example.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Answer {
    text: String,
    chrf: f64,
}

/// Each example's greedy answer from `model`, decoded without special tokens.
fn answers(
    cx: &StageContext<'_>,
    input: &str,
    model: &LoadedCheckpoint,
    examples: &[ChatExample],
    max_new: usize,
) -> Result<Vec<String>, StageError> {
    let (_, tokenizer, template) = fine_tuning::chat_template(cx.store, input, model)?;
    let end = i64::from(template.end_id());
    examples
        .iter()
        .enumerate()
        .map(|(line, e)| {
            let bad = |message: String| StageError::Input {
                input: "examples".into(),
                message: format!("line {} (`{}`): {message}", line + 1, e.id),
            };
            let (prompt, _) =
                e.prompt_and_reference().ok_or_else(|| bad("does not end with an `assistant` answer".into()))?;
            let ids: Vec<i64> = template
                .render_prompt(prompt)
                .map_err(|err| bad(err.to_string()))?
                .into_iter()
                .map(i64::from)
                .collect();
            let out = model.sample_batch(&ids, &[0], max_new, 0.0, Some(end)).remove(0);
            let out: Vec<u32> =
                out.iter().map(|&t| u32::try_from(t).expect("token ids are vocabulary indices")).collect();
            tokenizer.decode(&out, true).map_err(|err| bad(format!("decoding an answer: {err}")))
        })
        .collect()
}
