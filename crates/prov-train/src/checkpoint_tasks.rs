//! What `prov eval`, `prov sample` and `prov export` ask the worker to do with a checkpoint
//! (the worker's `eval`, `sample` and `export` verbs), and what it answers. The worker loads
//! the checkpoint with every tensor checked against its record; `prov` renders the answer.

use std::path::PathBuf;

use prov_store::Digest;
use serde::{Deserialize, Serialize};

use crate::checkpoint::CheckpointError;

/// Why a task failed, classed as the CLI's exit codes class it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskFailure {
    /// Bytes did not match their digest (exit 2); otherwise a wrong argument (exit 1).
    pub integrity: bool,
    /// A bug of the worker (it panicked): reported as an internal error.
    pub internal: bool,
    /// What went wrong.
    pub message: String,
    /// What to do.
    pub hint: Option<String>,
}

impl From<&CheckpointError> for TaskFailure {
    fn from(e: &CheckpointError) -> Self {
        let hint = match e {
            CheckpointError::NotACheckpoint { .. } => Some(
                "give the digest of a checkpoint record: a `pretrain` stage's `model` output, or an entry of its `checkpoints` tree",
            ),
            CheckpointError::TensorDigest { .. } => Some("run `prov verify`; replay the run that wrote the checkpoint"),
            _ => None,
        };
        Self {
            integrity: e.is_integrity_failure(),
            internal: false,
            message: e.to_string(),
            hint: hint.map(str::to_owned),
        }
    }
}

impl TaskFailure {
    /// A wrong argument, with no hint.
    pub fn input(message: impl Into<String>) -> Self {
        Self { integrity: false, internal: false, message: message.into(), hint: None }
    }

    /// A bug of the worker.
    pub fn internal(message: impl Into<String>) -> Self {
        Self { integrity: false, internal: true, message: message.into(), hint: None }
    }
}

/// Score token sequences under a checkpoint (`prov eval`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalRequest {
    /// The store directory.
    pub store: PathBuf,
    /// The checkpoint record.
    pub checkpoint: Digest,
    /// libtorch's intra-op threads.
    pub threads: usize,
    /// The sequences, each with where it came from (`FILE, line N`) for errors.
    pub sequences: Vec<(String, Vec<i64>)>,
    /// Also return each position's logits.
    pub logits: bool,
    /// A LoRA adapter (a `lora` stage's `adapter` tree) to attach to the checkpoint first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<Digest>,
}

/// One scored sequence. Numbers travel as their IEEE 754 bits, so that a diverged model's
/// NaN and infinities arrive as they were computed (JSON has no such numbers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoredSequence {
    /// `log p(token | previous tokens)` of every token after the first, as `f64` bits.
    pub log_prob_bits: Vec<u64>,
    /// Each position's float32 logits as `f32` bits, when asked for.
    pub logit_bits: Option<Vec<Vec<u32>>>,
}

impl ScoredSequence {
    /// Encodes the values.
    pub fn new(log_probs: &[f64], logits: Option<Vec<Vec<f32>>>) -> Self {
        Self {
            log_prob_bits: log_probs.iter().map(|v| v.to_bits()).collect(),
            logit_bits: logits.map(|rows| rows.iter().map(|r| r.iter().map(|v| v.to_bits()).collect()).collect()),
        }
    }

    /// The log-probabilities.
    pub fn log_probs(&self) -> Vec<f64> {
        self.log_prob_bits.iter().map(|&b| f64::from_bits(b)).collect()
    }

    /// The logits, when asked for.
    pub fn logits(&self) -> Option<Vec<Vec<f32>>> {
        self.logit_bits
            .as_ref()
            .map(|rows| rows.iter().map(|r| r.iter().map(|&b| f32::from_bits(b)).collect()).collect())
    }
}

/// The answer to an [`EvalRequest`]: the sequences scored in order, up to the first that
/// cannot be (a token outside the vocabulary), whose failure follows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalReply {
    /// Scored sequences, in request order.
    pub scored: Vec<ScoredSequence>,
    /// Why the next sequence could not be scored.
    pub stopped: Option<TaskFailure>,
}

/// Continue a prompt from a checkpoint (`prov sample`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleRequest {
    /// The store directory.
    pub store: PathBuf,
    /// The checkpoint record.
    pub checkpoint: Digest,
    /// libtorch's intra-op threads.
    pub threads: usize,
    /// The prompt's token ids.
    pub prompt: Vec<i64>,
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Softmax temperature (0: greedy).
    pub temperature: f64,
    /// The sampling seed.
    pub seed: u64,
}

/// Write a checkpoint as a Hugging Face model folder (`prov export`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportRequest {
    /// The store directory.
    pub store: PathBuf,
    /// The checkpoint record.
    pub checkpoint: Digest,
    /// The folder to write (absolute).
    pub out: PathBuf,
}

/// The files an export wrote, by name, with their BLAKE3 digests, in name order.
pub type ExportReply = Vec<(String, Digest)>;

/// Checks that every id of `ids` is in `0..vocab`; the error names `what` and the position.
pub fn check_ids(ids: &[i64], vocab: i64, what: &str) -> Result<(), TaskFailure> {
    match ids.iter().position(|&t| !(0..vocab).contains(&t)) {
        Some(i) => Err(TaskFailure::input(format!(
            "{what}: token {} at position {i} is outside the vocabulary (0..{vocab})",
            ids[i]
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A diverged model's NaN and infinities reach `prov eval` as computed: plain JSON numbers
    /// would have turned them into `null` and failed the reply.
    #[test]
    fn non_finite_scores_cross_the_boundary_bit_for_bit() {
        let log_probs = [f64::NAN, f64::NEG_INFINITY, -0.125, f64::from_bits(0x7ff8_0000_0000_0001)];
        let logits = vec![vec![f32::INFINITY, -0.0, f32::MIN_POSITIVE]];
        let sent = ScoredSequence::new(&log_probs, Some(logits.clone()));
        let wire = serde_json::to_string(&sent).unwrap();
        let back: ScoredSequence = serde_json::from_str(&wire).unwrap();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back.log_probs()), bits(&log_probs));
        let back_logits = back.logits().unwrap();
        assert_eq!(
            back_logits[0].iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            logits[0].iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }
}
