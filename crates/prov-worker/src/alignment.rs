//! Running `dpo` and `qrpo` stages: preference alignment from pinned reference completions and rewards, with
//! the losses of [`crate::preference_loss`].
//!
//! Inputs: `model` (the reference policy, which is also where the trained policy starts),
//! `completions` (a `sample-completions` file) and `rewards` (a `reward` file for it). Outputs:
//! `model` and `log`; `dpo` also writes `pairs`, the chosen/rejected pair of each prompt.
//!
//! - `qrpo` trains on every completion, with its quantile reward among its prompt's rewards
//!   (`prov_reward::preference::quantile_reward`); `beta` 5 and length normalisation by
//!   default, as the Apertus report. A step takes `batch_size` completions.
//! - `dpo` trains on each prompt's pair: the first completion with the highest reward against
//!   the first with the lowest (`preference_pair`); prompts whose rewards are all equal have no
//!   pair. `beta` 0.1 by default. A step takes `batch_size` pairs.
//!
//! Each step's items come from a seeded data order (seed `order`), epoch after epoch. A batch
//! is the items' `prompt ids + completion ids`, padded on the right; the policy's and the
//! frozen reference's log-probabilities of the completion tokens are computed on the same
//! batch. Bad data (no prompts, an empty completion, fewer than two completions, a missing or
//! non-finite reward, files that disagree) stops the stage with the file, line and field named.

use std::collections::BTreeMap;

use prov_exec::{StageContext, StageError, StageOutput, StageRun};
use prov_manifest::{OutputRef, OutputType};
use prov_reward::preference::{Pair, PromptCompletions, PromptRewards, preference_pair, quantile_reward, validate};
use prov_reward::stage::{data_error, read_completions, read_lines, write_lines};
use prov_store::ObjectKind;
use prov_train::alignment::{DpoConfig, Method, OWN, QrpoConfig, defaults};
use prov_train::post::{self, LoopParams};
use serde_json::{Value, json};
use tch::{Device, Tensor};

use crate::checkpoint::LoadedCheckpoint;
use crate::fine_tuning;
use crate::model::Decoder;
use crate::preference_loss::{AlignError, Completions, completion_log_probs, dpo_loss, qrpo_loss};
use crate::trainer::Trainer;

/// Runs `dpo` or `qrpo` stages.
pub struct AlignRun(pub Method);

/// One completion to score: prompt and completion ids.
pub(crate) struct Item<'a> {
    pub(crate) prompt: &'a [u32],
    pub(crate) completion: &'a [u32],
}

/// A padded batch: inputs, labels and the completion mask, all `[rows, time]`.
pub(crate) struct Batch {
    pub(crate) inputs: Tensor,
    pub(crate) labels: Tensor,
    pub(crate) mask: Tensor,
}

/// The batch of `items`: `prompt + completion` ids padded on the right with `pad`, the inputs
/// all but the last position, the labels all but the first, the mask true exactly where a
/// label is a completion token.
pub(crate) fn batch(items: &[Item<'_>], pad: i64, device: Device) -> Batch {
    let len = items.iter().map(|i| i.prompt.len() + i.completion.len()).max().expect("a batch is not empty");
    let time = len - 1;
    let (mut inputs, mut labels, mut mask) = (Vec::new(), Vec::new(), Vec::new());
    for item in items {
        let ids: Vec<i64> = item.prompt.iter().chain(item.completion).map(|&t| i64::from(t)).collect();
        let mut row = ids.clone();
        row.resize(len, pad);
        inputs.extend_from_slice(&row[..time]);
        labels.extend_from_slice(&row[1..]);
        // Label position t predicts id t + 1: a completion token when t + 1 >= |prompt|.
        mask.extend((1..len).map(|next| next >= item.prompt.len() && next < ids.len()));
    }
    let shape = [i64::try_from(items.len()).expect("a batch fits"), i64::try_from(time).expect("a length fits")];
    Batch {
        inputs: Tensor::from_slice(&inputs).view(shape).to_device(device),
        labels: Tensor::from_slice(&labels).view(shape).to_device(device),
        mask: Tensor::from_slice(&mask).view(shape).to_device(device),
    }
}

/// Summed completion log-probabilities of `model` on `b`, and `|y|` per row.
fn log_probs(model: &Decoder, b: &Batch) -> Result<(Tensor, Vec<i64>), AlignError> {
    let logits = model.forward(&b.inputs);
    let lp = completion_log_probs(&logits, &b.labels, &b.mask)?;
    Ok((lp.sum, lp.tokens))
}

impl StageRun for AlignRun {
    fn kind(&self) -> &'static str {
        match self.0 {
            Method::Dpo => "dpo",
            Method::Qrpo => "qrpo",
        }
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let prompts = read_completions(cx, "completions")?;
        let reward_lines: Vec<PromptRewards> = read_lines(&cx.read_file_input("rewards")?)
            .map_err(|message| StageError::Input { input: "rewards".into(), message })?;
        let rewards = validate(&prompts, &reward_lines).map_err(|e| data_error("rewards", &e))?;
        let reference = fine_tuning::load_checkpoint(cx, "model")?;
        check_vocabulary(&prompts, reference.config.vocab_size)?;
        let (tokenizer_digest, tokenizer, _) = fine_tuning::chat_template(cx.store, "model", &reference)?;
        let pad = i64::from(prov_tokenizer::special_ids(&tokenizer)?["pad"]);
        let seed = cx.seed("order")?;
        let rng = json!({ "order_seed": seed });
        match self.0 {
            Method::Qrpo => {
                let (params, loss, _) =
                    post::parse_stage_params::<QrpoConfig>(cx.config, OWN, &defaults()).map_err(StageError::Config)?;
                let run = Run { reference: &reference, params: &params, pad, seed };
                let (trainer, mut stats) = run.qrpo(&loss, &prompts, &rewards)?;
                let mut out = fine_tuning::finish(
                    cx.store,
                    &trainer,
                    &reference.hf_config,
                    tokenizer_digest,
                    rng,
                    params.batch_size,
                )?;
                out.stats.append(&mut stats);
                Ok(out)
            }
            Method::Dpo => {
                let (params, loss, _) =
                    post::parse_stage_params::<DpoConfig>(cx.config, OWN, &defaults()).map_err(StageError::Config)?;
                let pairs: Vec<(usize, Pair)> =
                    rewards.iter().enumerate().filter_map(|(i, r)| preference_pair(r).map(|p| (i, p))).collect();
                if pairs.is_empty() {
                    return Err(StageError::Input {
                        input: "rewards".into(),
                        message: "no prompt has a preference: every prompt's completions have equal rewards".into(),
                    });
                }
                let run = Run { reference: &reference, params: &params, pad, seed };
                let (trainer, mut stats) = run.dpo(&loss, &prompts, &pairs)?;
                let mut out = fine_tuning::finish(
                    cx.store,
                    &trainer,
                    &reference.hf_config,
                    tokenizer_digest,
                    rng,
                    params.batch_size,
                )?;
                out.stats.append(&mut stats);
                let lines: Vec<Value> = pairs
                    .iter()
                    .map(|(i, p)| {
                        json!({
                            "id": prompts[*i].id,
                            "chosen": p.chosen,
                            "rejected": p.rejected,
                            "chosen_reward": rewards[*i][p.chosen],
                            "rejected_reward": rewards[*i][p.rejected],
                        })
                    })
                    .collect();
                let digest = cx.store.put_bytes(ObjectKind::Blob, &write_lines(&lines))?;
                out.outputs.insert("pairs".into(), OutputRef { output_type: OutputType::File, digest });
                Ok(out)
            }
        }
    }
}

/// Refuses a token id of the pinned preference data that the model's embedding has no row
/// for, naming the prompt, the field and the line: libtorch would stop the process instead.
fn check_vocabulary(prompts: &[PromptCompletions], vocab_size: i64) -> Result<(), StageError> {
    for (i, p) in prompts.iter().enumerate() {
        let completions = p.completions.iter().enumerate().map(|(j, c)| (format!("completions[{j}].ids"), &c.ids));
        for (field, ids) in std::iter::once(("prompt_ids".to_owned(), &p.prompt_ids)).chain(completions) {
            if let Some((k, id)) = ids.iter().enumerate().find(|(_, t)| i64::from(**t) >= vocab_size) {
                return Err(StageError::Input {
                    input: "completions".into(),
                    message: format!(
                        "prompt {i}: `{field}[{k}]` is {id}, outside the model's vocabulary of {vocab_size} ids (line {})",
                        i + 1
                    ),
                });
            }
        }
    }
    Ok(())
}

/// What both losses' loops share.
struct Run<'a> {
    reference: &'a LoadedCheckpoint,
    params: &'a LoopParams,
    pad: i64,
    seed: u64,
}

impl Run<'_> {
    fn trainer(&self) -> Result<Trainer, StageError> {
        prov_torch::pin_threads(self.params.threads as usize);
        prov_torch::set_deterministic_algorithms(true);
        Trainer::from_weights(&self.reference.config, &self.params.loop_config(), &self.reference.weights)
            .map_err(|message| StageError::Input { input: "model".into(), message })
    }

    fn loss_error(e: &AlignError) -> StageError {
        StageError::Input { input: "completions".into(), message: e.to_string() }
    }

    fn qrpo(
        &self,
        config: &QrpoConfig,
        prompts: &[PromptCompletions],
        rewards: &[Vec<f64>],
    ) -> Result<(Trainer, BTreeMap<String, Value>), StageError> {
        let mut items = Vec::new();
        let mut quantiles = Vec::new();
        for (p, r) in prompts.iter().zip(rewards) {
            for (c, &reward) in p.completions.iter().zip(r) {
                items.push(Item { prompt: &p.prompt_ids, completion: &c.ids });
                quantiles.push(quantile_reward(reward, r));
            }
        }
        let order = post::order(items.len() as u64, self.params.steps * self.params.batch_size, self.seed);
        let mut trainer = self.trainer()?;
        let device = trainer.device();
        for step in order.chunks(self.params.batch_size as usize) {
            let chosen: Vec<Item<'_>> = step
                .iter()
                .map(|&i| Item { prompt: items[i as usize].prompt, completion: items[i as usize].completion })
                .collect();
            let q: Vec<f64> = step.iter().map(|&i| quantiles[i as usize]).collect();
            let b = batch(&chosen, self.pad, device);
            let (reference, _) =
                tch::no_grad(|| log_probs(&self.reference.model, &b)).map_err(|e| Self::loss_error(&e))?;
            let tokens: u64 = chosen.iter().map(|i| i.completion.len() as u64).sum();
            trainer
                .step_with(tokens, 0, |model| {
                    let (policy, counts) = log_probs(model, &b)?;
                    let batch = Completions { policy: &policy, reference: &reference, tokens: &counts };
                    Ok(qrpo_loss(config, &batch, &q)?.mean)
                })
                .map_err(|e: AlignError| Self::loss_error(&e))?;
        }
        let stats = BTreeMap::from([
            ("completions".into(), json!(items.len())),
            ("mean_quantile_reward".into(), json!(quantiles.iter().sum::<f64>() / quantiles.len() as f64)),
        ]);
        Ok((trainer, stats))
    }

    fn dpo(
        &self,
        config: &DpoConfig,
        prompts: &[PromptCompletions],
        pairs: &[(usize, Pair)],
    ) -> Result<(Trainer, BTreeMap<String, Value>), StageError> {
        let order = post::order(pairs.len() as u64, self.params.steps * self.params.batch_size, self.seed);
        let mut trainer = self.trainer()?;
        let device = trainer.device();
        for step in order.chunks(self.params.batch_size as usize) {
            // Chosen completions first, then the rejected ones, in one batch.
            let mut rows = Vec::with_capacity(step.len() * 2);
            for pick in [|p: &Pair| p.chosen, |p: &Pair| p.rejected] {
                for &i in step {
                    let (prompt, pair) = &pairs[i as usize];
                    let p = &prompts[*prompt];
                    rows.push(Item { prompt: &p.prompt_ids, completion: &p.completions[pick(pair)].ids });
                }
            }
            let b = batch(&rows, self.pad, device);
            let n = i64::try_from(step.len()).expect("a batch fits");
            let (reference, _) =
                tch::no_grad(|| log_probs(&self.reference.model, &b)).map_err(|e| Self::loss_error(&e))?;
            let tokens: u64 = rows.iter().map(|i| i.completion.len() as u64).sum();
            trainer
                .step_with(tokens, 0, |model| {
                    let (policy, counts) = log_probs(model, &b)?;
                    let (n_us, halves) = (usize::try_from(n).expect("a batch fits"), [0, n]);
                    let side = |k: usize| (policy.narrow(0, halves[k], n), reference.narrow(0, halves[k], n));
                    let ((pw, rw), (pl, rl)) = (side(0), side(1));
                    let chosen = Completions { policy: &pw, reference: &rw, tokens: &counts[..n_us] };
                    let rejected = Completions { policy: &pl, reference: &rl, tokens: &counts[n_us..] };
                    Ok(dpo_loss(config, &chosen, &rejected)?.mean)
                })
                .map_err(|e: AlignError| Self::loss_error(&e))?;
        }
        let stats = BTreeMap::from([
            ("pairs".into(), json!(pairs.len())),
            ("prompts_without_a_preference".into(), json!(prompts.len() - pairs.len())),
        ]);
        Ok((trainer, stats))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_mask_exactly_the_completion_tokens() {
        let (p1, c1) = ([1u32, 5, 40, 6], [30u32, 31, 7]);
        let (p2, c2) = ([1u32, 5, 6], [32u32, 7]);
        let b = batch(&[Item { prompt: &p1, completion: &c1 }, Item { prompt: &p2, completion: &c2 }], 0, Device::Cpu);
        assert_eq!(b.inputs.size(), [2, 6]);
        let inputs: Vec<i64> = Vec::try_from(&b.inputs.view([-1])).unwrap();
        assert_eq!(inputs, vec![1, 5, 40, 6, 30, 31, 1, 5, 6, 32, 7, 0]);
        let labels: Vec<i64> = Vec::try_from(&b.labels.view([-1])).unwrap();
        assert_eq!(labels, vec![5, 40, 6, 30, 31, 7, 5, 6, 32, 7, 0, 0]);
        let mask: Vec<bool> = Vec::try_from(&b.mask.view([-1])).unwrap();
        assert_eq!(
            mask,
            vec![false, false, false, true, true, true, false, false, true, true, false, false],
            "labels 30 31 7 and 32 7, nothing of the prompts or the padding"
        );
        assert_eq!(b.mask.kind(), tch::Kind::Bool);
    }
}
