//! Running `mdloo` stages: AFM's mirror descent with leave-one-out estimation (§4.3.3,
//! Appendix E.2), an online loop. Each iteration samples `k` responses per prompt from the
//! policy as it stands (`π_t`), rewards each with the reward model's score minus `β` times
//! its log-ratio to the reference policy, computes leave-one-out advantages
//! (`prov_train::mdloo::leave_one_out`) and takes `steps_per_iteration` optimizer steps on
//! [`mdloo_loss`]. The kind is `prov_train::mdloo`'s; the book's "The AFM recipe" (MDLOO)
//! states every operation.

use std::collections::BTreeMap;

use prov_exec::{StageContext, StageError, StageOutput, StageRun};
use prov_manifest::{OutputRef, OutputType, derive_seed};
use prov_reward::stage::write_lines;
use prov_store::ObjectKind;
use prov_train::mdloo::{iteration_prompts, leave_one_out, parse};
use prov_train::post;
use serde_json::json;
use tch::{Kind, Tensor};

use crate::alignment::{Item, batch};
use crate::checkpoint::generate;
use crate::completions::eligible_prompts;
use crate::fine_tuning;
use crate::preference_loss::completion_log_probs;
use crate::reward_model::{load_reward_model, scores};
use crate::trainer::Trainer;

/// MDLOO's loss, exactly the operations of the book's "The AFM recipe" (MDLOO), in float32:
/// with the policy's and the iteration policy's log-softmax `logp`, `logq` over `[R, T, V]`
/// logits, the completion tokens' summed log-probabilities `lp`, `lq` (`labels` and `mask`
/// `[R, T]`, masked labels read as 0), the ratio `exp(lp - lq)` and the KL divergence
/// `Σ_t Σ_v exp(logp)·(logp - logq)` over the masked positions:
/// `mean(-(ratio · advantages) + gamma · kl)`.
pub fn mdloo_loss(
    policy: &Tensor,
    old: &Tensor,
    labels: &Tensor,
    mask: &Tensor,
    advantages: &Tensor,
    gamma: f64,
) -> Tensor {
    let outside = mask.logical_not();
    let labels = labels.masked_fill(&outside, 0).unsqueeze(-1);
    let log_policy = policy.log_softmax(-1, Kind::Float);
    let log_old = old.log_softmax(-1, Kind::Float);
    let summed = |t: &Tensor| t.masked_fill(&outside, 0.0).sum_dim_intlist([-1i64].as_slice(), false, Kind::Float);
    let policy_sum = summed(&log_policy.gather(-1, &labels, false).squeeze_dim(-1));
    let old_sum = summed(&log_old.gather(-1, &labels, false).squeeze_dim(-1));
    let ratio = (policy_sum - old_sum).exp();
    let kl =
        summed(&(log_policy.exp() * (&log_policy - &log_old)).sum_dim_intlist([-1i64].as_slice(), false, Kind::Float));
    (-(ratio * advantages) + gamma * kl).mean(Kind::Float)
}

/// Runs `mdloo` stages.
pub struct MdlooRun;

/// One iteration's sampled responses of a prompt, with what the loss and the `samples` file need.
struct Group {
    id: String,
    prompt: Vec<u32>,
    responses: Vec<Vec<u32>>,
}

impl StageRun for MdlooRun {
    fn kind(&self) -> &'static str {
        "mdloo"
    }
    #[allow(clippy::too_many_lines)] // one iteration's steps in order read better than split apart
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let (params, config, _) = parse(cx.config).map_err(StageError::Config)?;
        let reference = fine_tuning::load_checkpoint(cx, "model")?;
        let reward_model = load_reward_model(cx, "reward_model")?;
        if reward_model.config.max_position_embeddings < reference.config.max_position_embeddings {
            return Err(StageError::Input {
                input: "reward_model".into(),
                message: format!(
                    "reads {} positions, fewer than the policy's {}: it could not score every response the policy samples",
                    reward_model.config.max_position_embeddings, reference.config.max_position_embeddings
                ),
            });
        }
        let (tokenizer_digest, tokenizer, template) = fine_tuning::chat_template(cx.store, "model", &reference)?;
        if reward_model.record.tokenizer != Some(tokenizer_digest) {
            return Err(StageError::Input {
                input: "reward_model".into(),
                message: format!(
                    "was trained with tokenizer {}, the policy with {tokenizer_digest}: it cannot read the policy's responses",
                    reward_model.record.tokenizer.map_or_else(|| "none".to_owned(), |d| d.to_string())
                ),
            });
        }
        let pad = i64::from(prov_tokenizer::special_ids(&tokenizer)?["pad"]);
        let end = i64::from(template.end_id());
        let examples = post::read_examples(cx, "examples")?;
        let max_new = usize::try_from(config.max_new_tokens).expect("a length fits in memory");
        let window = usize::try_from(reference.config.max_position_embeddings).expect("a window fits in memory");
        let eligible = eligible_prompts(&examples, &template, max_new, window)?;
        let (order_seed, sample_seed) = (cx.seed("order")?, cx.seed("sample")?);
        let order = iteration_prompts(eligible.len() as u64, config.prompts, config.iterations, order_seed)
            .ok_or_else(|| StageError::Input {
                input: "examples".into(),
                message: format!(
                    "{} prompts leave room for `max_new_tokens` {max_new} in the policy's {window} positions, fewer than `prompts` {}",
                    eligible.len(),
                    config.prompts
                ),
            })?;
        prov_torch::pin_threads(params.threads as usize);
        prov_torch::set_deterministic_algorithms(true);
        let mut trainer = Trainer::from_weights(&reference.config, &params.loop_config(), &reference.weights)
            .map_err(|message| StageError::Input { input: "model".into(), message })?;
        let device = trainer.device();
        let k = usize::try_from(config.k).expect("k fits in memory");
        let mut sample_lines = Vec::new();
        let mut mean_scores = Vec::new();
        for (t, chosen) in order.iter().enumerate() {
            let iteration = t + 1;
            // 1-3: sample from the policy as it stands.
            let mut groups = Vec::with_capacity(chosen.len());
            for &index in chosen {
                let (example, prompt_ids, _) = &eligible[usize::try_from(index).expect("an index fits")];
                let seeds: Vec<u64> = (0..k)
                    .map(|j| derive_seed(sample_seed, &example.id, &format!("iteration-{iteration}-response-{j}")))
                    .collect();
                let prompt: Vec<i64> = prompt_ids.iter().map(|&t| i64::from(t)).collect();
                let sampled =
                    generate(trainer.model(), device, window, &prompt, &seeds, max_new, config.temperature, Some(end));
                let responses = sampled
                    .into_iter()
                    .map(|ids| {
                        ids.into_iter().map(|t| u32::try_from(t).expect("token ids are vocabulary indices")).collect()
                    })
                    .collect();
                groups.push(Group { id: example.id.clone(), prompt: prompt_ids.clone(), responses });
            }
            let items: Vec<Item<'_>> = groups
                .iter()
                .flat_map(|g| g.responses.iter().map(|r| Item { prompt: &g.prompt, completion: r }))
                .collect();
            let b = batch(&items, pad, device);
            // 4: rewards. The iteration's logits are kept for the loss's ratio and KL.
            let old = tch::no_grad(|| trainer.model().forward(&b.inputs));
            let lp = |logits: &Tensor| -> Result<Vec<f64>, StageError> {
                let sums = completion_log_probs(logits, &b.labels, &b.mask)
                    .map_err(|e| StageError::Input { input: "examples".into(), message: e.to_string() })?
                    .sum;
                Ok(prov_torch::f32_values(&sums.to_kind(Kind::Float).to_device(tch::Device::Cpu))
                    .into_iter()
                    .map(f64::from)
                    .collect())
            };
            let old_logp = lp(&old)?;
            let ref_logp = lp(&tch::no_grad(|| reference.model.forward(&b.inputs)))?;
            let mut rm_scores = Vec::with_capacity(items.len());
            for g in &groups {
                let rows: Vec<Vec<i64>> =
                    g.responses.iter().map(|r| g.prompt.iter().chain(r).map(|&t| i64::from(t)).collect()).collect();
                rm_scores.extend(scores(&reward_model.model, &rows, pad, device));
            }
            let rewards: Vec<f64> =
                (0..items.len()).map(|i| rm_scores[i] - config.beta * (old_logp[i] - ref_logp[i])).collect();
            // 5: leave-one-out advantages per prompt.
            let advantages: Vec<f64> = rewards.chunks(k).flat_map(leave_one_out).collect();
            let adv32: Vec<f32> = advantages.iter().map(|&a| a as f32).collect();
            let adv = Tensor::from_slice(&adv32).to_device(device);
            // 6: the mirror-descent steps.
            let tokens: u64 = items.iter().map(|i| i.completion.len() as u64).sum();
            for _ in 0..config.steps_per_iteration {
                trainer.step_with(tokens, 0, |model| -> Result<Tensor, StageError> {
                    let policy = model.forward(&b.inputs);
                    Ok(mdloo_loss(&policy, &old, &b.labels, &b.mask, &adv, config.gamma))
                })?;
            }
            mean_scores.push(rm_scores.iter().sum::<f64>() / rm_scores.len() as f64);
            for (g, at) in groups.iter().zip((0..).step_by(k)) {
                let mut responses = Vec::with_capacity(k);
                for (j, ids) in g.responses.iter().enumerate() {
                    let text = tokenizer.decode(ids, true).map_err(|e| StageError::Input {
                        input: "model".into(),
                        message: format!("decoding a response to `{}`: {e}", g.id),
                    })?;
                    responses.push(json!({
                        "ids": ids, "text": text, "score": rm_scores[at + j], "reward": rewards[at + j],
                        "advantage": advantages[at + j],
                    }));
                }
                sample_lines.push(json!({ "iteration": iteration, "id": g.id, "responses": responses }));
            }
        }
        let rng = json!({ "order_seed": order_seed, "sample_seed": sample_seed });
        let mut out =
            fine_tuning::finish(cx.store, &trainer, &reference.hf_config, tokenizer_digest, rng, params.batch_size)?;
        let digest = cx.store.put_bytes(ObjectKind::Blob, &write_lines(&sample_lines))?;
        out.outputs.insert("samples".into(), OutputRef { output_type: OutputType::File, digest });
        out.stats.append(&mut BTreeMap::from([
            ("iterations".into(), json!(config.iterations)),
            ("first_mean_score".into(), json!(mean_scores[0])),
            ("final_mean_score".into(), json!(mean_scores[mean_scores.len() - 1])),
        ]));
        Ok(out)
    }
}
