//! Running AFM's reward model (Appendix E.1): the `reward-model` stage, which trains a
//! checkpoint's decoder with a score head and four grade heads on graded preference pairs
//! (the loss is [`reward_model_loss`]), `reward-model-score`, which scores a completions file
//! with one, and `best-of-n`, which scores several sources' completions with one and keeps
//! each prompt's best (`prov_train::best_of_n::choose`). The kinds are `prov_train::reward_model`'s; the heads are
//! [`crate::model::Decoder::attach_reward_heads`].
//!
//! A row is `prompt ids + response ids`, right-padded; the heads read the final hidden state
//! at its last token.

use std::collections::BTreeMap;

use prov_exec::{StageContext, StageError, StageOutput, StageRun, parse_params};
use prov_manifest::{OutputRef, OutputType};
use prov_reward::preference::{PromptCompletions, PromptRewards};
use prov_reward::stage::{read_completions, write_lines};
use prov_store::ObjectKind;
use prov_train::best_of_n::{BestOfNConfig, Candidates, choose, completions_input};
use prov_train::post;
use prov_train::preference_data::{PreferencePair, PromptPreferences, parse_preferences};
use prov_train::reward_model::{OWN, RewardHeads, RewardModelConfig, ScoreConfig, defaults};
use serde_json::json;
use tch::{Device, Kind, Reduction, Tensor};

use crate::checkpoint::LoadedCheckpoint;
use crate::fine_tuning;
use crate::model::{Decoder, RewardOutput};
use crate::trainer::Trainer;

/// AFM's reward model loss over `B` pairs (Appendix E.1), exactly the operations of the
/// book's "The AFM recipe" (The model and its loss), in float32: `scores` `[2B]` (the chosen
/// responses, then the rejected ones), each grade head's `logits` `[2B, levels]` with its
/// `grades` `[2B]` (int64), each pair's soft label `p` `[B]`, and `lam`:
/// `mean(-(p·logσ(d) + (1-p)·logσ(-d))) + lam · mean(Σ_g CE_g)`, `d` the score differences,
/// the cross-entropies per row, summed over the heads left to right.
pub fn reward_model_loss(scores: &Tensor, logits: &[Tensor], grades: &[Tensor], p: &Tensor, lam: f64) -> Tensor {
    let pairs = scores.size()[0] / 2;
    let d = scores.narrow(0, 0, pairs) - scores.narrow(0, pairs, pairs);
    let agree: Tensor = p * d.log_sigmoid();
    let one_minus_p: Tensor = 1.0 - p;
    let disagree: Tensor = one_minus_p * (-&d).log_sigmoid();
    let ranking: Tensor = -(agree + disagree);
    let mut cross_entropies =
        logits.iter().zip(grades).map(|(l, g)| l.cross_entropy_loss::<Tensor>(g, None, Reduction::None, -100, 0.0));
    let first = cross_entropies.next().expect("at least one grade head");
    let grading = cross_entropies.fold(first, |acc, ce| acc + ce);
    ranking.mean(Kind::Float) + lam * grading.mean(Kind::Float)
}

/// Token ids `[rows, time]` right-padded with `pad`, and each row's last position `[rows]`.
pub fn reward_batch(rows: &[Vec<i64>], pad: i64, device: Device) -> (Tensor, Tensor) {
    let time = rows.iter().map(Vec::len).max().expect("a batch is not empty");
    let mut flat = Vec::with_capacity(rows.len() * time);
    for row in rows {
        flat.extend_from_slice(row);
        flat.resize(flat.len() + time - row.len(), pad);
    }
    let last: Vec<i64> = rows.iter().map(|r| i64::try_from(r.len()).expect("a length fits") - 1).collect();
    let shape = [i64::try_from(rows.len()).expect("a batch fits"), i64::try_from(time).expect("a length fits")];
    (Tensor::from_slice(&flat).view(shape).to_device(device), Tensor::from_slice(&last).to_device(device))
}

/// `prompt + response` as int64 ids.
fn row(prompt: &[u32], response: &[u32]) -> Vec<i64> {
    prompt.iter().chain(response).map(|&t| i64::from(t)).collect()
}

/// The scores of `rows` by reward model `model`, as f64 (float32 widened).
pub fn scores(model: &Decoder, rows: &[Vec<i64>], pad: i64, device: Device) -> Vec<f64> {
    let (ids, last) = reward_batch(rows, pad, device);
    let out = tch::no_grad(|| model.reward(&ids, &last)).expect("a reward model has heads");
    prov_torch::f32_values(&out.scores.to_kind(Kind::Float).to_device(Device::Cpu)).into_iter().map(f64::from).collect()
}

/// One prompt's completions scored by `model` (one batch), each `prompt + completion`; a
/// non-finite score is refused, naming the line and completion (it would be written as a
/// missing reward).
fn score_prompt(
    model: &LoadedCheckpoint,
    input: &str,
    line: usize,
    p: &PromptCompletions,
    pad: i64,
) -> Result<Vec<f64>, StageError> {
    let rows: Vec<Vec<i64>> = p.completions.iter().map(|c| row(&p.prompt_ids, &c.ids)).collect();
    let scored = scores(&model.model, &rows, pad, prov_torch::device());
    if let Some(j) = scored.iter().position(|s| !s.is_finite()) {
        return Err(StageError::Input {
            input: "model".into(),
            message: format!(
                "gives a non-finite score to `{input}` line {line}, completion {j}: the reward model has diverged"
            ),
        });
    }
    Ok(scored)
}

/// A prompt as [`check_rows`] reads it: its line, its ids, and each response's field name,
/// ids and text.
pub(crate) type Rows<'a> = (usize, &'a [u32], Vec<(String, &'a [u32], &'a str)>);

/// Checks what a reward model is about to read: every id inside its vocabulary, every row
/// (`prompt + response`) inside its window, and every response's ids decoding (special tokens
/// left out) to the text the file gives, which is what shows the ids were made with the reward
/// model's tokenizer. Errors name the input, the line and the field.
pub(crate) fn check_rows<'a>(
    input: &str,
    model: &LoadedCheckpoint,
    tokenizer: &tokenizers::Tokenizer,
    prompts: impl IntoIterator<Item = Rows<'a>>,
) -> Result<(), StageError> {
    let bad = |line: usize, message: String| StageError::Input {
        input: input.to_owned(),
        message: format!("line {line}: {message}"),
    };
    let (vocab, window) = (model.config.vocab_size, model.config.max_position_embeddings);
    for (line, prompt, responses) in prompts {
        let fields = std::iter::once(("prompt_ids".to_owned(), prompt))
            .chain(responses.iter().map(|(f, ids, _)| (format!("{f}.ids"), *ids)));
        for (field, ids) in fields {
            if let Some((k, id)) = ids.iter().enumerate().find(|(_, t)| i64::from(**t) >= vocab) {
                return Err(bad(
                    line,
                    format!("`{field}[{k}]` is {id}, outside the model's vocabulary of {vocab} ids"),
                ));
            }
        }
        for (field, ids, text) in &responses {
            let length = prompt.len() + ids.len();
            if length as u64 > window.unsigned_abs() {
                return Err(bad(
                    line,
                    format!(
                        "`prompt_ids` and `{field}.ids` are {length} tokens, beyond the reward model's {window} positions"
                    ),
                ));
            }
            let decoded = tokenizer.decode(ids, true).map_err(|e| bad(line, format!("`{field}.ids`: {e}")))?;
            if decoded != *text {
                return Err(bad(
                    line,
                    format!(
                        "`{field}.ids` decode to {decoded:?} with the reward model's tokenizer, not to its `text` {text:?}: \
                         the ids were made with another tokenizer, or the text was changed"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The completions of a completions file as [`check_rows`] reads them.
fn completion_rows(prompts: &[PromptCompletions]) -> impl Iterator<Item = Rows<'_>> {
    prompts.iter().enumerate().map(|(i, p)| {
        let responses = p
            .completions
            .iter()
            .enumerate()
            .map(|(j, c)| (format!("completions[{j}]"), c.ids.as_slice(), c.text.as_str()))
            .collect();
        (i + 1, p.prompt_ids.as_slice(), responses)
    })
}

/// The reward model checkpoint of input `input`: refused unless it has heads.
pub(crate) fn load_reward_model(cx: &StageContext<'_>, input: &str) -> Result<LoadedCheckpoint, StageError> {
    let digest = cx.input(input)?.digest;
    let model = crate::checkpoint::load_any(cx.store, &digest).map_err(|e| fine_tuning::checkpoint_error(input, e))?;
    if !model.model.is_reward_model() {
        return Err(StageError::Input {
            input: input.into(),
            message: "is a language model, not a reward model: its config.json has no `reward_heads`".into(),
        });
    }
    Ok(model)
}

/// Runs `reward-model` stages.
pub struct RewardModelRun;

impl StageRun for RewardModelRun {
    fn kind(&self) -> &'static str {
        "reward-model"
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let (params, own, _) =
            post::parse_stage_params::<RewardModelConfig>(cx.config, OWN, &defaults()).map_err(StageError::Config)?;
        let base = fine_tuning::load_checkpoint(cx, "model")?;
        let prompts = parse_preferences(&cx.read_file_input("preferences")?)
            .map_err(|message| StageError::Input { input: "preferences".into(), message })?;
        let (tokenizer_digest, tokenizer, _) = fine_tuning::chat_template(cx.store, "model", &base)?;
        let rows = prompts.iter().enumerate().map(|(i, p)| {
            let responses = p
                .responses
                .iter()
                .enumerate()
                .map(|(j, r)| (format!("responses[{j}]"), r.ids.as_slice(), r.text.as_str()))
                .collect();
            (i + 1, p.prompt_ids.as_slice(), responses)
        });
        check_rows("preferences", &base, &tokenizer, rows)?;
        let pairs: Vec<(usize, PreferencePair)> =
            prompts.iter().enumerate().flat_map(|(i, p)| p.pairs.iter().map(move |pair| (i, *pair))).collect();
        if pairs.is_empty() {
            return Err(StageError::Input { input: "preferences".into(), message: "holds no preference pair".into() });
        }
        let pad = i64::from(prov_tokenizer::special_ids(&tokenizer)?["pad"]);
        let heads = RewardHeads::afm(own.grade_hidden.unwrap_or(base.config.hidden_size));
        let (heads_seed, order_seed) = (cx.seed("heads")?, cx.seed("order")?);
        prov_torch::pin_threads(params.threads as usize);
        prov_torch::set_deterministic_algorithms(true);
        let mut trainer = Trainer::reward_model(&base.config, &params.loop_config(), &base.weights, &heads, heads_seed)
            .map_err(|message| StageError::Input { input: "model".into(), message })?;
        let device = trainer.device();
        let order = post::order(pairs.len() as u64, params.steps * params.batch_size, order_seed);
        for step in order.chunks(usize::try_from(params.batch_size).expect("a batch size fits")) {
            let chosen: Vec<&(usize, PreferencePair)> = step.iter().map(|&i| &pairs[i as usize]).collect();
            let batch = PairBatch::new(&prompts, &chosen, pad, device);
            let tokens = batch.tokens;
            trainer.step_with(tokens, 0, |model| -> Result<Tensor, StageError> {
                let out = model.reward(&batch.ids, &batch.last).expect("the trainer's model has heads");
                Ok(reward_model_loss(&out.scores, &out.grades, &batch.grades, &batch.p, own.grade_weight))
            })?;
        }
        let accuracy = ranking_accuracy(trainer.model(), &prompts, &pairs, pad, device);
        let mut hf_config = base.hf_config.clone();
        hf_config["reward_heads"] = json!(heads);
        let rng = json!({ "heads_seed": heads_seed, "order_seed": order_seed });
        let mut out = fine_tuning::finish(cx.store, &trainer, &hf_config, tokenizer_digest, rng, params.batch_size)?;
        out.stats.insert("pairs".into(), json!(pairs.len()));
        out.stats.insert("ranking_accuracy".into(), json!(accuracy));
        Ok(out)
    }
}

/// A training batch of pairs: ids and last positions of the chosen rows then the rejected
/// ones, the grades per head, the soft labels.
struct PairBatch {
    ids: Tensor,
    last: Tensor,
    grades: Vec<Tensor>,
    p: Tensor,
    tokens: u64,
}

impl PairBatch {
    fn new(prompts: &[PromptPreferences], pairs: &[&(usize, PreferencePair)], pad: i64, device: Device) -> Self {
        let mut rows = Vec::with_capacity(pairs.len() * 2);
        let mut grades: Vec<Vec<i64>> = vec![Vec::new(); prov_train::preference_data::GRADES.len()];
        for pick in [|p: &PreferencePair| p.chosen, |p: &PreferencePair| p.rejected] {
            for (prompt, pair) in pairs {
                let response = &prompts[*prompt].responses[pick(pair)];
                rows.push(row(&prompts[*prompt].prompt_ids, &response.ids));
                for (g, v) in grades.iter_mut().zip(response.grades.as_array()) {
                    g.push(i64::from(v));
                }
            }
        }
        let p: Vec<f32> = pairs.iter().map(|(_, pair)| pair.level.probability() as f32).collect();
        let tokens = rows.iter().map(|r| r.len() as u64).sum();
        let (ids, last) = reward_batch(&rows, pad, device);
        Self {
            ids,
            last,
            grades: grades.iter().map(|g| Tensor::from_slice(g).to_device(device)).collect(),
            p: Tensor::from_slice(&p).to_device(device),
            tokens,
        }
    }
}

/// The share of `pairs` whose chosen response the model scores above the rejected one.
fn ranking_accuracy(
    model: &Decoder,
    prompts: &[PromptPreferences],
    pairs: &[(usize, PreferencePair)],
    pad: i64,
    device: Device,
) -> f64 {
    let mut right = 0usize;
    for chunk in pairs.chunks(16) {
        let refs: Vec<&(usize, PreferencePair)> = chunk.iter().collect();
        let batch = PairBatch::new(prompts, &refs, pad, device);
        let RewardOutput { scores, .. } =
            tch::no_grad(|| model.reward(&batch.ids, &batch.last)).expect("the trainer's model has heads");
        let s = prov_torch::f32_values(&scores.to_kind(Kind::Float).to_device(Device::Cpu));
        let n = chunk.len();
        right += (0..n).filter(|&i| s[i] > s[n + i]).count();
    }
    right as f64 / pairs.len() as f64
}

/// Runs `reward-model-score` stages.
pub struct RewardModelScoreRun;

impl StageRun for RewardModelScoreRun {
    fn kind(&self) -> &'static str {
        "reward-model-score"
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: ScoreConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let model = load_reward_model(cx, "model")?;
        let prompts = read_completions(cx, "completions")?;
        let (_, tokenizer, _) = fine_tuning::chat_template(cx.store, "model", &model)?;
        check_rows("completions", &model, &tokenizer, completion_rows(&prompts))?;
        let pad = i64::from(prov_tokenizer::special_ids(&tokenizer)?["pad"]);
        prov_torch::pin_threads(config.threads as usize);
        prov_torch::set_deterministic_algorithms(true);
        let mut lines = Vec::with_capacity(prompts.len());
        for (i, p) in prompts.iter().enumerate() {
            let rewards = score_prompt(&model, "completions", i + 1, p, pad)?.into_iter().map(Some).collect();
            lines.push(PromptRewards { id: p.id.clone(), rewards });
        }
        prov_reward::stage::rewards_output(cx, &lines)
    }
}

/// Runs `best-of-n` stages: every source's completions scored by the reward model as
/// `reward-model-score` scores them, then `prov_train::best_of_n::choose`.
pub struct BestOfNRun;

impl StageRun for BestOfNRun {
    fn kind(&self) -> &'static str {
        "best-of-n"
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: BestOfNConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let model = load_reward_model(cx, "model")?;
        let (_, tokenizer, template) = fine_tuning::chat_template(cx.store, "model", &model)?;
        let pad = i64::from(prov_tokenizer::special_ids(&tokenizer)?["pad"]);
        let special: std::collections::BTreeSet<u32> =
            tokenizer.get_added_tokens_decoder().into_iter().filter(|(_, t)| t.special).map(|(id, _)| id).collect();
        let end = template.end_id();
        let examples = post::read_examples(cx, "examples")?;
        let rendered: BTreeMap<&str, Option<Vec<u32>>> = examples
            .iter()
            .map(|e| {
                (e.id.as_str(), e.prompt_and_reference().and_then(|(prompt, _)| template.render_prompt(prompt).ok()))
            })
            .collect();
        prov_torch::pin_threads(config.threads as usize);
        prov_torch::set_deterministic_algorithms(true);
        let mut sources = Vec::with_capacity(config.sources.len());
        for name in &config.sources {
            let input = completions_input(name);
            let prompts = read_completions(cx, &input)?;
            check_rows(&input, &model, &tokenizer, completion_rows(&prompts))?;
            // The prompt scored must be the example's, as the chat template renders it.
            for (i, p) in prompts.iter().enumerate() {
                if let Some(Some(ids)) = rendered.get(p.id.as_str())
                    && *ids != p.prompt_ids
                {
                    return Err(StageError::Input {
                        input: input.clone(),
                        message: format!(
                            "line {}: `prompt_ids` of `{}` are not its example's prompt as the chat template renders it",
                            i + 1,
                            p.id
                        ),
                    });
                }
            }
            let rewards = prompts
                .iter()
                .enumerate()
                .map(|(i, p)| score_prompt(&model, &input, i + 1, p, pad))
                .collect::<Result<Vec<_>, _>>()?;
            let passed_over = prompts
                .iter()
                .map(|p| {
                    p.completions
                        .iter()
                        .map(|c| {
                            let body = c.ids.strip_suffix(&[end]).unwrap_or(&c.ids);
                            body.iter().any(|id| special.contains(id))
                        })
                        .collect()
                })
                .collect();
            sources.push(Candidates { name, input, prompts, rewards, passed_over });
        }
        let chosen = choose(&examples, &sources)?;
        let digest = cx.store.put_bytes(ObjectKind::Blob, &write_lines(&chosen.lines))?;
        let mut out = StageOutput::default();
        out.outputs.insert("examples".into(), OutputRef { output_type: OutputType::File, digest });
        out.stats = chosen.stats;
        Ok(out)
    }
}
