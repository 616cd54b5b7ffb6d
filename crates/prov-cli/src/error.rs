//! Classifying errors once, at the CLI boundary, into the exit codes of the CLI contract.

use std::fmt::Write as _;

use prov_exec::ExecError;
use prov_manifest::{RecipeError, StoredError};
use prov_store::StoreError;

/// Exit codes (the book's CLI reference, "Exit codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExitCode {
    /// 1: usage or input error.
    Input = 1,
    /// 2: a stored object or manifest does not match its hash.
    Integrity = 2,
    /// 3: replay divergence.
    Divergence = 3,
    /// 4: an audit claim does not hold (fails or cannot be decided).
    ClaimNotHeld = 4,
}

/// An error to report, with its exit code and an optional hint.
#[derive(Debug)]
pub(crate) struct CommandError {
    pub code: ExitCode,
    pub message: String,
    /// Extra lines printed after the message (a source snippet, a list).
    pub detail: Option<String>,
    pub hint: Option<String>,
}

impl CommandError {
    pub fn input(message: impl Into<String>) -> Self {
        Self { code: ExitCode::Input, message: message.into(), detail: None, hint: None }
    }
    pub fn integrity(message: impl Into<String>) -> Self {
        Self { code: ExitCode::Integrity, message: message.into(), detail: None, hint: None }
    }
    pub fn divergence(message: impl Into<String>) -> Self {
        Self { code: ExitCode::Divergence, message: message.into(), detail: None, hint: None }
    }
    /// A bug of `prov` (a caught panic), with where it happened and what to do.
    pub fn internal(message: impl Into<String>) -> Self {
        let mut message = message.into();
        if let Some((location, payload)) = last_panic() {
            if let Some(p) = payload.filter(|p| !message.contains(p.as_str())) {
                message = format!("{message}: {p}");
            }
            if let Some(l) = location {
                message = format!("{message} (at {l})");
            }
        }
        Self::input(message).with_hint(
            "this is a bug in prov, not in your input: please report it with `prov --version` and the command; \
             the store holds only whole objects (`prov verify` checks it)",
        )
    }
    /// An exit with `code` and nothing printed (`prov diff --exit-code` when runs differ).
    pub fn silent(code: ExitCode) -> Self {
        Self { code, message: String::new(), detail: None, hint: None }
    }
    #[must_use]
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
    /// The same error, its message prefixed with what it is about (a file's name).
    #[must_use]
    pub fn prefixed(mut self, what: &str) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }
    #[must_use]
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }
}

impl From<StoreError> for CommandError {
    fn from(e: StoreError) -> Self {
        let hint = match &e {
            StoreError::NotAStore(_) => Some("run `prov init` in the project root, or pass `--store DIR`"),
            StoreError::Busy(_) => Some("wait for the other prov process (a run or gc) to finish"),
            StoreError::Corrupt(_) => {
                Some("run `prov verify` to list every damaged object and the runs that depend on it")
            }
            _ => None,
        };
        let code = if e.is_integrity_failure() { ExitCode::Integrity } else { ExitCode::Input };
        Self { code, message: e.to_string(), detail: None, hint: hint.map(str::to_owned) }
    }
}

impl From<StoredError> for CommandError {
    fn from(e: StoredError) -> Self {
        match e {
            StoredError::Store(s) => s.into(),
            other => Self::integrity(other.to_string()),
        }
    }
}

/// The last panic's location and message, kept by the panic hook for [`CommandError::internal`].
static LAST_PANIC: std::sync::Mutex<Option<(Option<String>, Option<String>)>> = std::sync::Mutex::new(None);

pub(crate) fn record_panic(location: Option<String>, payload: Option<String>) {
    if let Ok(mut last) = LAST_PANIC.lock() {
        *last = Some((location, payload));
    }
}

fn last_panic() -> Option<(Option<String>, Option<String>)> {
    LAST_PANIC.lock().ok().and_then(|mut last| last.take())
}

impl From<ExecError> for CommandError {
    fn from(e: ExecError) -> Self {
        if let ExecError::Internal { .. } = &e {
            return Self::internal(e.to_string());
        }
        let integrity = e.is_integrity_failure();
        let hint = match &e {
            ExecError::NotRecorded(_) => {
                Some("run it with `prov run` first; replay compares against a recording".to_owned())
            }
            ExecError::Incompatible { .. } => Some("re-lock the recipe with `prov lock`".to_owned()),
            ExecError::InvalidLockfile { .. } => Some(
                "a lockfile is what `prov lock` writes: re-lock the recipe rather than editing the lockfile".to_owned(),
            ),
            ExecError::Stage { source: prov_exec::StageError::SourceChanged { .. }, .. } => {
                Some("re-lock the recipe if the new bytes are intended".to_owned())
            }
            ExecError::Stage { source: prov_exec::StageError::Worker(_), .. } => Some(
                "the worker (`prov-worker` beside `prov`, or PROV_WORKER) runs every libtorch stage; what it said \
                 is above; `prov doctor` checks that it starts and links the recorded libtorch"
                    .to_owned(),
            ),
            ExecError::Stage { source: prov_exec::StageError::Device { .. }, .. } => Some(
                "the stage's `device` parameter names where it computes: run it on a machine with that GPU, or \
                 set `device: cpu` in the recipe and lock it again (another device is another stage key)"
                    .to_owned(),
            ),
            ExecError::Stage { source: prov_exec::StageError::Sandbox(_), .. } => Some(
                "install bubblewrap (`scripts/setup` does; Debian package `bubblewrap`) and allow unprivileged user \
                 namespaces, or run as root"
                    .to_owned(),
            ),
            ExecError::Dispatch { hint, .. } => hint.clone(),
            ExecError::TaskLost { .. } => Some(
                "`prov run` again resumes with the tasks that have no result; `prov status` shows why they ended"
                    .to_owned(),
            ),
            ExecError::Stage { source: prov_exec::StageError::MapResult { .. }, .. } => {
                Some("the result was dropped: `prov run` again runs its task again".to_owned())
            }
            _ => None,
        };
        let code = if integrity { ExitCode::Integrity } else { ExitCode::Input };
        Self { code, message: e.to_string(), detail: None, hint }
    }
}

impl From<prov_attest::AttestError> for CommandError {
    fn from(e: prov_attest::AttestError) -> Self {
        let code = if e.is_integrity_failure() { ExitCode::Integrity } else { ExitCode::Input };
        Self { code, message: e.to_string(), detail: None, hint: e.hint().map(str::to_owned) }
    }
}

impl From<prov_attest::KeyError> for CommandError {
    fn from(e: prov_attest::KeyError) -> Self {
        prov_attest::AttestError::from(e).into()
    }
}

impl From<prov_attest::EnvelopeError> for CommandError {
    fn from(e: prov_attest::EnvelopeError) -> Self {
        prov_attest::AttestError::from(e).into()
    }
}

impl From<prov_attest::ProvenanceError> for CommandError {
    fn from(e: prov_attest::ProvenanceError) -> Self {
        prov_attest::AttestError::from(e).into()
    }
}

impl From<RecipeError> for CommandError {
    fn from(e: RecipeError) -> Self {
        let mut detail = String::new();
        let _ = writeln!(detail, "  --> {}:{}:{}", e.file.display(), e.line, e.column);
        if let Some(line) = &e.source_line {
            let num = e.line.to_string();
            let pad = " ".repeat(num.len());
            let _ = writeln!(detail, "{pad} |");
            let _ = writeln!(detail, "{num} | {line}");
            let _ = write!(detail, "{pad} | {}^", " ".repeat(e.column.saturating_sub(1)));
        }
        let message = match &e.field {
            Some(f) => format!("{}:{}:{}: {f}: {}", e.file.display(), e.line, e.column, e.message),
            None => format!("{}:{}:{}: {}", e.file.display(), e.line, e.column, e.message),
        };
        Self { code: ExitCode::Input, message, detail: Some(detail), hint: e.hint }
    }
}

impl From<prov_license::queue::ReviewError> for CommandError {
    fn from(e: prov_license::queue::ReviewError) -> Self {
        use prov_license::queue::ReviewError;
        match e {
            ReviewError::Input { message, hint } => {
                let error = Self::input(message);
                match hint {
                    Some(h) => error.with_hint(h),
                    None => error,
                }
            }
            ReviewError::Integrity(message) => Self::integrity(message),
            ReviewError::Store(e) => e.into(),
            ReviewError::Stored(e) => e.into(),
            ReviewError::Io(e) => e.into(),
        }
    }
}

impl From<prov_manifest::CommittedError> for CommandError {
    fn from(e: prov_manifest::CommittedError) -> Self {
        use prov_manifest::CommittedError;
        match e {
            CommittedError::Io(e) => e.into(),
            CommittedError::Store(e) => e.into(),
            CommittedError::Stored(e) => e.into(),
            e @ CommittedError::NotADigest { .. } => {
                Self::input(e.to_string()).with_hint("give the folder `prov run --commit` wrote: manifests/<recipe>/")
            }
            e @ CommittedError::RunNotAmong { .. } => Self::input(e.to_string()),
            e @ CommittedError::NotARunOf { .. } => Self::input(e.to_string())
                .with_hint("give the manifests folder that `prov run --commit` wrote with this lockfile"),
            e @ (CommittedError::NameMismatch { .. }
            | CommittedError::NotARecord { .. }
            | CommittedError::NotInARun { .. }
            | CommittedError::Unreachable { .. }) => Self::integrity(e.to_string()),
        }
    }
}

impl From<prov_git::GitError> for CommandError {
    fn from(e: prov_git::GitError) -> Self {
        let hint = e.hint();
        let error = match e {
            prov_git::GitError::Io(e) => e.into(),
            other => Self::input(other.to_string()),
        };
        match hint {
            Some(h) => error.with_hint(h),
            None => error,
        }
    }
}

impl From<prov_review::DecideError> for CommandError {
    fn from(e: prov_review::DecideError) -> Self {
        use prov_review::DecideError;
        match e {
            DecideError::Incomplete(e) => Self::input(e.to_string()).with_hint("pass `--reason TEXT` saying why"),
            DecideError::Outside(_) => {
                Self::input(e.to_string()).with_hint("pass a `--verdicts` directory inside the repository")
            }
            DecideError::Git(e) => e.into(),
            DecideError::Store(e) => e.into(),
            DecideError::Stored(e) => e.into(),
            DecideError::Io(e) => e.into(),
        }
    }
}

impl From<prov_review::PolicyError> for CommandError {
    fn from(e: prov_review::PolicyError) -> Self {
        match e {
            prov_review::PolicyError::Read(_) => {
                Self::input(e.to_string()).with_hint("give a license policy file (YAML) or the preset `permissive`")
            }
            prov_review::PolicyError::Parse(e) => e.into(),
        }
    }
}

impl From<std::io::Error> for CommandError {
    fn from(e: std::io::Error) -> Self {
        Self::input(e.to_string())
    }
}

impl From<prov_manifest::DecodeError> for CommandError {
    fn from(e: prov_manifest::DecodeError) -> Self {
        Self::input(e.to_string())
    }
}

impl From<prov_exec::GcError> for CommandError {
    fn from(e: prov_exec::GcError) -> Self {
        match e {
            prov_exec::GcError::Store(s) => s.into(),
            other @ (prov_exec::GcError::Damaged { .. } | prov_exec::GcError::MissingRoot { .. }) => {
                Self::integrity(other.to_string())
                    .with_hint("run `prov verify` and repair the damage first; nothing was removed")
            }
        }
    }
}
