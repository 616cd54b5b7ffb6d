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
        Self { integrity: e.is_integrity_failure(), message: e.to_string(), hint: hint.map(str::to_owned) }
    }
}

impl TaskFailure {
    /// A wrong argument, with no hint.
    pub fn input(message: impl Into<String>) -> Self {
        Self { integrity: false, message: message.into(), hint: None }
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
}

/// One scored sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoredSequence {
    /// `log p(token | previous tokens)` of every token after the first.
    pub log_probs: Vec<f64>,
    /// Each position's float32 logits, when asked for.
    pub logits: Option<Vec<Vec<f32>>>,
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
