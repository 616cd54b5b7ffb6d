//! The error of an execution: what `run`, `replay`, locking checks and staleness report.

use prov_manifest::{Name, StoredError};
use prov_store::{Digest, StoreError};

use crate::stage::StageError;

/// An error of an execution.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run record a replay compares with is not a run of the lockfile replayed: a forged
    /// or mismatched recording, found before anything runs.
    #[error("recording `{recording}` is not a run of this lockfile: stage `{stage}`: {message}")]
    RecordingNotOfLockfile {
        /// The run record.
        recording: Digest,
        /// The first stage where it departs from the lockfile.
        stage: Name,
        /// How.
        message: String,
    },
    /// A stage panicked: a bug of this build, caught at the stage boundary so that the
    /// execution is logged as failed and the store stays valid.
    #[error("internal error in stage `{stage}` ({kind}): {message}")]
    Internal {
        /// Stage name.
        stage: Name,
        /// Stage kind.
        kind: String,
        /// The panic's message.
        message: String,
    },
    /// The lockfile is not one `prov lock` would write with this build's stage kinds.
    #[error("stage `{stage}`, field `{field}`: {message}")]
    InvalidLockfile {
        /// Stage name.
        stage: Name,
        /// The field of the stage's lockfile entry (`config.bands`, `inputs.docs`, `seeds`).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A replay found the recording it compares against damaged, before re-executing
    /// (re-executing would rewrite the damaged objects and hide the damage).
    #[error("the recorded outputs of stage `{stage}` are damaged: {source}{}", located.iter().fold(String::new(), |acc, l| acc + "\n  " + l))]
    DamagedRecording {
        /// Stage name.
        stage: Name,
        /// What the store found.
        source: StoredError,
        /// Where, as the stage kind can tell (a checkpoint's damaged tensor).
        located: Vec<String>,
    },
    /// A record could not be read or written.
    #[error(transparent)]
    Stored(#[from] StoredError),
    /// A stage failed.
    #[error("stage `{stage}` ({kind}) failed: {source}")]
    Stage {
        /// Stage name.
        stage: Name,
        /// Stage kind.
        kind: String,
        /// The failure.
        source: StageError,
    },
    /// The lockfile names a stage kind this build does not have, or another version of it.
    #[error("stage `{stage}`: {message}")]
    Incompatible {
        /// Stage name.
        stage: Name,
        /// What differs.
        message: String,
    },
    /// The stage's tasks could not be run where the executor sends them (the scheduler's
    /// commands failed, a task failed more often than it may be run again).
    #[error("stage `{stage}`: {message}")]
    Dispatch {
        /// Stage name.
        stage: Name,
        /// What failed.
        message: String,
        /// What to do.
        hint: Option<String>,
    },
    /// A task of the stage ended without leaving a result.
    #[error("stage `{stage}`: {task} ended without a result; what it printed is in `{}`", logs.display())]
    TaskLost {
        /// Stage name.
        stage: Name,
        /// The task.
        task: String,
        /// Where its output is.
        logs: std::path::PathBuf,
    },
    /// Replay needs a completed recorded run.
    #[error("run `{0}` has no completed recording in this store")]
    NotRecorded(Digest),
    /// `--from` or `--until` names no stage of the plan.
    #[error("no stage `{0}` in this lockfile")]
    UnknownStage(String),
    /// `--until` names a stage before `--from`.
    #[error("`--until {until}` comes before `--from {from}` in plan order: nothing to replay")]
    EmptyRange {
        /// The `--from` stage.
        from: String,
        /// The `--until` stage.
        until: String,
    },
    /// A recorded manifest is not what it should be.
    #[error("recorded manifest `{digest}` is not a {expected} record")]
    WrongRecord {
        /// The manifest.
        digest: Digest,
        /// The expected kind.
        expected: &'static str,
    },
}

impl ExecError {
    /// Returns true when the failure is an integrity failure.
    pub fn is_integrity_failure(&self) -> bool {
        match self {
            Self::Store(e) => e.is_integrity_failure(),
            Self::Stored(e) => e.is_integrity_failure(),
            Self::DamagedRecording { .. } | Self::RecordingNotOfLockfile { .. } => true,
            Self::Stage { source, .. } => source.is_integrity_failure(),
            _ => false,
        }
    }
}
