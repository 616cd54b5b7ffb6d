//! `sft`: supervised fine-tuning of a checkpoint on chat examples, the loss on the assistant's
//! tokens only (the chat template's mask), with the Apertus report's SFT optimizer settings
//! (`AdEMAMix`, `b3 = 0.99`, `alpha = 8`, both warmups over all steps) and a linear
//! learning-rate decay.
//!
//! Inputs: `model` (the checkpoint to start from; its recorded tokenizer renders the
//! conversations) and `examples` (a chat-examples file, e.g. `translation-pairs`' `train`).
//! Outputs: `model` (the final checkpoint, whose `config.json` says `max_position_embeddings =
//! seq_len`) and `log`.
//!
//! Rows hold `seq_len + 1` tokens (inputs are the first `seq_len`, labels the last). A
//! conversation longer than a row is left out, counted in the statistics, never cut: a cut
//! answer would teach the model not to stop. With `packing: false` (the default) each row
//! holds one conversation, padded on the right with `<|pad|>` (causal attention never lets a
//! real token see the padding after it). With `packing: true` whole conversations are laid
//! into rows one after another, in data order, a new row starting when the next does not fit;
//! attention then crosses from one conversation into the next within a row (no
//! per-conversation mask), as transformers' simple packing does. Labels are `-100` wherever the
//! template does not train (prompts, role tokens, padding).
//!
//! The data order is a fresh seeded permutation of the conversations that fit for each epoch
//! (seed `order`), as many epochs as `steps * batch_size` rows need.

use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput};
use prov_manifest::{Determinism, OutputType};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::loop_config::IGNORE_INDEX;
use crate::post::{self, LoopParams};

/// The `sft` stage's own settings (beside [`LoopParams`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SftParams {
    /// Tokens a row's inputs hold.
    #[serde(default = "default_seq_len")]
    pub seq_len: u64,
    /// Several conversations per row.
    #[serde(default)]
    pub packing: bool,
}

fn default_seq_len() -> u64 {
    256
}

/// The `sft` stage's own fields, beside the loop's.
pub const OWN: &[&str] = &["seq_len", "packing"];

/// The loop's defaults for `sft`.
pub fn defaults() -> LoopParams {
    LoopParams {
        steps: 200,
        batch_size: 8,
        lr: 1e-3,
        warmup_steps: 0,
        schedule: crate::post::PostSchedule::Linear,
        optimizer: post::fine_tuning_optimizer(),
        clip: 1.0,
        threads: 1,
        device: prov_exec::ComputeDevice::Cpu,
    }
}

/// A rendered conversation: ids and whether the loss trains on each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    /// Token ids.
    pub ids: Vec<i64>,
    /// Whether the loss trains on the id at the same position.
    pub trained: Vec<bool>,
}

/// Rows of `seq_len + 1` ids and labels from conversations in order: one conversation per
/// row, or packed (see the module's documentation). Each row is `(inputs, labels)`, both
/// `seq_len` long. Every conversation must fit in a row.
pub fn rows(conversations: &[&Conversation], seq_len: usize, packing: bool, pad: i64) -> Vec<(Vec<i64>, Vec<i64>)> {
    let mut out = Vec::new();
    let mut ids: Vec<i64> = Vec::with_capacity(seq_len + 1);
    let mut trained: Vec<bool> = Vec::with_capacity(seq_len + 1);
    let flush = |ids: &mut Vec<i64>, trained: &mut Vec<bool>, out: &mut Vec<(Vec<i64>, Vec<i64>)>| {
        if ids.is_empty() {
            return;
        }
        ids.resize(seq_len + 1, pad);
        trained.resize(seq_len + 1, false);
        let labels = (1..=seq_len).map(|t| if trained[t] { ids[t] } else { IGNORE_INDEX }).collect();
        out.push((ids[..seq_len].to_vec(), labels));
        ids.clear();
        trained.clear();
    };
    for c in conversations {
        debug_assert!(c.ids.len() <= seq_len + 1, "callers leave out conversations that do not fit");
        if !packing || ids.len() + c.ids.len() > seq_len + 1 {
            flush(&mut ids, &mut trained, &mut out);
        }
        ids.extend_from_slice(&c.ids);
        trained.extend_from_slice(&c.trained);
    }
    flush(&mut ids, &mut trained, &mut out);
    out
}

/// The `sft` stage kind.
pub struct SftStage;

impl Stage for SftStage {
    fn kind(&self) -> &'static str {
        "sft"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "supervised fine-tuning on chat examples, the loss on assistant tokens (AdEMAMix, linear decay)"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let (_, own, resolved) = post::parse_stage_params::<SftParams>(params, OWN, &defaults())?;
        if own.seq_len < 2 {
            return Err(ConfigError::at(&["seq_len"], "must be at least 2"));
        }
        Ok(resolved)
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
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("model".into(), OutputType::Checkpoint), ("log".into(), OutputType::File)]
    }
    fn seed_names(&self) -> &'static [&'static str] {
        &["order"]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        prov_exec::run_in_worker(cx, self)
    }
}

/// The first `needed` rows of epoch after epoch over `conversations`, each epoch in a fresh
/// seeded order.
pub fn epoch_rows(
    conversations: &[Conversation],
    needed: usize,
    seq_len: usize,
    packing: bool,
    pad: i64,
    seed: u64,
) -> Vec<(Vec<i64>, Vec<i64>)> {
    let mut state = seed;
    let mut out = Vec::with_capacity(needed);
    while out.len() < needed {
        let order = prov_dataset::tokens::permutation(conversations.len() as u64, &mut state);
        let epoch: Vec<&Conversation> = order.iter().map(|&i| &conversations[i as usize]).collect();
        out.extend(rows(&epoch, seq_len, packing, pad));
    }
    out.truncate(needed);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(ids: &[i64], trained: &[bool]) -> Conversation {
        Conversation { ids: ids.to_vec(), trained: trained.to_vec() }
    }

    #[test]
    fn one_conversation_per_row_pads_and_masks() {
        let a = conv(&[1, 5, 20, 7, 6, 30, 7, 2], &[false, false, false, false, false, true, true, false]);
        let r = rows(&[&a], 9, false, 0);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].0, vec![1, 5, 20, 7, 6, 30, 7, 2, 0]);
        // Label t is id t + 1 where that id is trained: 30 and its <|end|> 7.
        assert_eq!(r[0].1, vec![-100, -100, -100, -100, 30, 7, -100, -100, -100]);
    }

    #[test]
    fn packing_lays_whole_conversations_into_rows() {
        let a = conv(&[1, 6, 30, 7, 2], &[false, false, true, true, false]);
        let b = conv(&[1, 6, 31, 7, 2], &[false, false, true, true, false]);
        let c = conv(&[1, 6, 32, 33, 7, 2], &[false, false, true, true, true, false]);
        let packed = rows(&[&a, &b, &c], 10, true, 0);
        assert_eq!(packed.len(), 2, "a and b share a row; c does not fit after them");
        assert_eq!(packed[0].0, vec![1, 6, 30, 7, 2, 1, 6, 31, 7, 2]);
        assert_eq!(packed[0].1, vec![-100, 30, 7, -100, -100, -100, 31, 7, -100, -100]);
        assert_eq!(packed[1].0[..6], [1, 6, 32, 33, 7, 2]);
        let unpacked = rows(&[&a, &b, &c], 10, false, 0);
        assert_eq!(unpacked.len(), 3);
        // The trained labels are the same either way: packing changes the rows, not the loss's targets.
        let trained = |r: &[(Vec<i64>, Vec<i64>)]| {
            r.iter().flat_map(|(_, l)| l.iter().copied().filter(|&x| x != IGNORE_INDEX)).collect::<Vec<_>>()
        };
        assert_eq!(trained(&packed), trained(&unpacked));
    }

    #[test]
    fn epochs_repeat_in_fresh_orders() {
        let cs: Vec<Conversation> = (0..3).map(|i| conv(&[1, 10 + i, 2], &[false, true, false])).collect();
        let r = epoch_rows(&cs, 7, 3, false, 0, 11);
        assert_eq!(r.len(), 7);
        let firsts: Vec<i64> = r.iter().map(|(i, _)| i[1]).collect();
        let mut epoch: Vec<i64> = firsts[..3].to_vec();
        epoch.sort_unstable();
        assert_eq!(epoch, vec![10, 11, 12]);
        assert_eq!(epoch_rows(&cs, 7, 3, false, 0, 11), r);
    }
}
