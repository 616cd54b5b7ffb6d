//! The process boundary to libtorch: stage kinds whose computation links libtorch run in the
//! worker executable, `prov-worker`, so that `prov` itself never loads libtorch (whose static
//! initialisers cost every command half a second).
//!
//! Such a kind is registered in `prov` as its specification (configuration, inputs, outputs,
//! determinism class, version: everything a lockfile and a stage key need) and its
//! [`Stage::run`] calls [`run_in_worker`]. The worker registers the same specification with
//! its computation attached ([`StageRun`], [`Registry::attach_runs`]) and serves one request:
//!
//! ```text
//! prov-worker stage < request.json > reply.json
//! ```
//!
//! The request ([`StageRequest`]) carries what [`StageContext`] holds, by value: the store
//! directory, the stage's name, key, resolved configuration, inputs, seeds, thread count and
//! the libtorch facts the parent's envelope records. The worker opens the same store (shared
//! access, as any second `prov` process would), checks that it is the libtorch and `ATen`
//! capability the envelope claims, runs the stage, and answers with its [`StageOutput`] or a
//! [`RemoteStageError`]. Objects it wrote are in the store by atomic rename; a worker that is
//! killed leaves whole objects and its resumable progress, never a stage record (only the
//! parent writes records and the log).
//!
//! The same transport ([`call`]) serves the worker's other verbs (evaluating, sampling and
//! exporting a checkpoint), whose requests belong to the crates that own them.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use prov_manifest::{OutputRef, OutputType};
use prov_store::Digest;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::stage::{ConfigError, Registry, Stage, StageContext, StageError, StageInput, StageOutput};
use crate::{InputSpec, Located};

/// The worker executable's file name; `prov` looks for it beside itself.
pub const WORKER_NAME: &str = "prov-worker";

/// The variable through which `prov` tells the worker its process id, so that the worker can
/// have the kernel end it when `prov` dies, and end at once if `prov` is already gone.
pub const PARENT_ENV: &str = "PROV_WORKER_PARENT";

/// The computation of a stage kind, attached to its specification in the process that can run
/// it (the worker, for kinds that link libtorch).
pub trait StageRun: Send + Sync {
    /// The kind it computes.
    fn kind(&self) -> &'static str;
    /// Runs the stage, as [`Stage::run`].
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError>;
}

/// A kind's specification with its computation attached: what the worker's registry holds.
struct Attached {
    spec: Arc<dyn Stage>,
    run: Arc<dyn StageRun>,
}

impl Stage for Attached {
    fn kind(&self) -> &'static str {
        self.spec.kind()
    }
    fn version(&self) -> u32 {
        self.spec.version()
    }
    fn summary(&self) -> &'static str {
        self.spec.summary()
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        self.spec.resolve_config(params)
    }
    fn determinism(&self, config: &Value) -> prov_manifest::Determinism {
        self.spec.determinism(config)
    }
    fn inputs(&self) -> InputSpec {
        self.spec.inputs()
    }
    fn inputs_for(&self, config: &Value) -> InputSpec {
        self.spec.inputs_for(config)
    }
    fn optional_inputs(&self) -> &'static [&'static str] {
        self.spec.optional_inputs()
    }
    fn outputs(&self, config: &Value) -> Vec<(String, OutputType)> {
        self.spec.outputs(config)
    }
    fn seed_names(&self) -> &'static [&'static str] {
        self.spec.seed_names()
    }
    fn runs_commands(&self) -> bool {
        self.spec.runs_commands()
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        self.run.run(cx)
    }
    fn locate_difference(
        &self,
        store: &prov_store::Store,
        output: &str,
        expected: &OutputRef,
        actual: &OutputRef,
    ) -> Option<Located> {
        self.spec.locate_difference(store, output, expected, actual)
    }
    fn locate_damage(&self, store: &prov_store::Store, output: &str, recorded: &OutputRef) -> Option<Located> {
        self.spec.locate_damage(store, output, recorded)
    }
}

impl Registry {
    /// Attaches computations to the kinds registered here, so that they run in this process.
    ///
    /// # Panics
    ///
    /// When a computation names a kind that is not registered: a build error of the worker.
    pub fn attach_runs(&mut self, runs: impl IntoIterator<Item = Arc<dyn StageRun>>) {
        for run in runs {
            let spec = self.get(run.kind()).unwrap_or_else(|| panic!("no kind `{}` to attach a run to", run.kind()));
            let attached = Attached { spec: Arc::clone(spec), run };
            self.register(Arc::new(attached));
        }
    }
}

/// What a worker says of the libtorch it runs (`prov-worker facts`, for `prov doctor`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TorchClaim {
    /// The libtorch version.
    pub libtorch: Option<String>,
    /// The `ATen` CPU capability.
    pub aten_cpu_capability: Option<String>,
}

/// One stage to run in the worker: a [`StageContext`] by value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageRequest {
    /// The store directory.
    pub store: PathBuf,
    /// The project root.
    pub project_root: PathBuf,
    /// Stage name.
    pub stage: String,
    /// Stage kind.
    pub kind: String,
    /// The kind's version in `prov`: a worker whose kind has another version is from another
    /// build and refuses.
    pub version: u32,
    /// Stage key.
    pub key: Digest,
    /// Resolved configuration.
    pub config: Value,
    /// Inputs by name.
    pub inputs: BTreeMap<String, (OutputType, Digest)>,
    /// Seeds by name.
    pub seeds: BTreeMap<String, u64>,
    /// The envelope's thread count.
    pub threads: usize,
    /// Whether the lockfile allows commands.
    pub allow_commands: bool,
    /// The envelope the stage record will carry: the worker refuses to compute under another
    /// libtorch or `ATen` capability than it records.
    pub envelope: prov_manifest::Envelope,
    /// The stage's work directory ([`StageContext::work_dir`]): the requester's, so that the
    /// process that runs the stage, or one of its tasks, shares it.
    pub work: PathBuf,
}

/// A stage error that crosses the process boundary: the variants a user acts on keep their
/// shape (the CLI renders them alike on both sides); the rest keep their message and whether
/// they are an integrity failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum RemoteStageError {
    /// [`StageError::Input`].
    Input {
        /// Input name.
        input: String,
        /// What is wrong.
        message: String,
    },
    /// [`StageError::Config`].
    Config {
        /// Path inside `params`.
        path: Vec<String>,
        /// What is wrong.
        message: String,
        /// What to do.
        hint: Option<String>,
    },
    /// [`StageError::SourceChanged`].
    SourceChanged {
        /// The source path.
        path: String,
        /// The pinned digest.
        expected: Digest,
        /// What is there now.
        actual: Digest,
    },
    /// [`StageError::Command`].
    Command {
        /// The command line.
        command: String,
        /// How it ended.
        status: String,
        /// The end of its standard error.
        stderr: String,
    },
    /// [`StageError::Sandbox`].
    Sandbox {
        /// Why the sandbox cannot start.
        message: String,
    },
    /// Any other error: the store's, a record's, a dataset's, a file's.
    Other {
        /// Its message.
        message: String,
        /// Whether bytes did not match their digest.
        integrity: bool,
    },
    /// The stage panicked: a bug.
    Panic {
        /// The panic's message and place.
        message: String,
    },
}

impl From<&StageError> for RemoteStageError {
    fn from(e: &StageError) -> Self {
        match e {
            StageError::Input { input, message } => Self::Input { input: input.clone(), message: message.clone() },
            StageError::Config(c) => {
                Self::Config { path: c.path.clone(), message: c.message.clone(), hint: c.hint.clone() }
            }
            StageError::SourceChanged { path, expected, actual } => {
                Self::SourceChanged { path: path.clone(), expected: *expected, actual: *actual }
            }
            StageError::Command { command, status, stderr } => {
                Self::Command { command: command.clone(), status: status.clone(), stderr: stderr.clone() }
            }
            StageError::Sandbox(message) => Self::Sandbox { message: message.clone() },
            StageError::Remote { message, integrity } => {
                Self::Other { message: message.clone(), integrity: *integrity }
            }
            other => Self::Other { message: other.to_string(), integrity: other.is_integrity_failure() },
        }
    }
}

impl RemoteStageError {
    /// The error as the parent reports it; a panic is resumed as a panic, so that the executor
    /// treats it as it treats its own.
    pub fn into_stage_error(self) -> StageError {
        match self {
            Self::Input { input, message } => StageError::Input { input, message },
            Self::Config { path, message, hint } => StageError::Config(ConfigError { path, message, hint }),
            Self::SourceChanged { path, expected, actual } => StageError::SourceChanged { path, expected, actual },
            Self::Command { command, status, stderr } => StageError::Command { command, status, stderr },
            Self::Sandbox { message } => StageError::Sandbox(message),
            Self::Other { message, integrity } => StageError::Remote { message, integrity },
            // `resume_unwind` carries the message to the executor's `catch_unwind` without
            // running this process's panic hook, which would report a place in `prov`.
            Self::Panic { message } => std::panic::resume_unwind(Box::new(message)),
        }
    }
}

/// What a worker verb answers on standard output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply<T, E> {
    /// The result.
    Ok(T),
    /// The failure.
    Err(E),
}

/// The reply to a [`StageRequest`].
pub type StageReply = Reply<WireOutput, RemoteStageError>;

/// [`StageOutput`] on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireOutput {
    /// Outputs by name.
    pub outputs: BTreeMap<String, OutputRef>,
    /// Statistics by name.
    pub stats: BTreeMap<String, Value>,
}

/// Why the worker could not be used at all (as opposed to a failure it reported).
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The executable is not where it should be.
    #[error("the worker executable `{0}` is missing")]
    Missing(PathBuf),
    /// It could not be started or talked to.
    #[error("the worker `{path}`: {source}")]
    Io {
        /// The executable.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// It ended without a reply (killed, out of memory, crashed); what it wrote to standard
    /// error is above the message.
    #[error("the worker `{path}` ended without a reply ({status})")]
    NoReply {
        /// The executable.
        path: PathBuf,
        /// How it ended.
        status: String,
    },
}

/// Returns `prov-worker` beside the running executable, where `cargo build` and an install
/// put it (the CLI lets `PROV_WORKER` name another).
pub fn beside_this_executable() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from(WORKER_NAME));
    exe.parent().unwrap_or_else(|| Path::new(".")).join(WORKER_NAME)
}

/// Starts the worker `worker` with `verb`, writes `request` to its standard input and reads its
/// reply. Its standard error is this process's, as it goes (libtorch's warnings, and what a
/// dying worker says, reach the user as they would have in-process).
///
/// # Errors
///
/// [`WorkerError`] when the worker cannot be started or ends without a parseable reply.
pub fn call<Req: Serialize, T: serde::de::DeserializeOwned, E: serde::de::DeserializeOwned>(
    worker: &Path,
    verb: &str,
    request: &Req,
) -> Result<Reply<T, E>, WorkerError> {
    let path = worker.to_path_buf();
    if !path.is_file() {
        return Err(WorkerError::Missing(path));
    }
    let body = serde_json::to_vec(request).expect("requests encode");
    let io = |source| WorkerError::Io { path: path.clone(), source };
    let mut child = Command::new(&path)
        .arg(verb)
        .env(PARENT_ENV, std::process::id().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(io)?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    // The request goes in from its own thread while this one drains the worker's output, so
    // that neither side can block on a full pipe. A worker that dies before reading it breaks
    // the pipe; its exit says why.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let out = child.wait_with_output().map_err(io)?;
    let _ = writer.join();
    let reply = out.stdout.split(|&b| b == b'\n').rev().find(|l| !l.is_empty()).unwrap_or_default();
    match serde_json::from_slice(reply) {
        Ok(r) if out.status.success() => Ok(r),
        _ => Err(WorkerError::NoReply { path, status: describe_exit(out.status) }),
    }
}

/// How a process ended, in words: its exit code, or the signal that killed it.
fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "ended".to_owned(),
    }
}

/// Asks the worker which libtorch it links and which `ATen` capability it would run (for
/// `prov doctor`).
///
/// # Errors
///
/// [`WorkerError`] when the worker cannot be started or does not answer.
pub fn facts(worker: &Path) -> Result<TorchClaim, WorkerError> {
    match call::<_, TorchClaim, String>(worker, "facts", &())? {
        Reply::Ok(facts) => Ok(facts),
        Reply::Err(message) => {
            Err(WorkerError::Io { path: worker.to_path_buf(), source: std::io::Error::other(message) })
        }
    }
}

/// Asks the worker for the envelope facts of CUDA device `index`: it loads libtorch's CUDA
/// library, checks the device exists, and reads the GPU, driver, library versions and
/// deterministic settings (`prov_torch::cuda::facts`).
///
/// # Errors
///
/// The worker's sentence (no such device, no driver, a libtorch without CUDA), or why it
/// could not be asked.
pub fn cuda_facts(worker: &Path, index: u32) -> Result<prov_manifest::CudaEnvelope, String> {
    match call::<_, prov_manifest::CudaEnvelope, String>(worker, "cuda-facts", &index) {
        Ok(Reply::Ok(facts)) => Ok(facts),
        Ok(Reply::Err(message)) => Err(message),
        Err(e) => Err(e.to_string()),
    }
}

/// Runs the stage `cx` describes in the worker; the [`Stage::run`] of every kind whose
/// computation links libtorch.
///
/// # Errors
///
/// The stage's own error, as the worker reported it; [`StageError::Worker`] when the worker
/// could not be started or died without a reply.
///
/// # Panics
///
/// Resumes a panic the stage had in the worker, for the executor to report as a bug.
pub fn run_in_worker(cx: &StageContext<'_>, kind: &dyn Stage) -> Result<StageOutput, StageError> {
    let request = StageRequest::of(cx, kind);
    match call::<_, WireOutput, RemoteStageError>(cx.worker, "stage", &request) {
        Ok(Reply::Ok(out)) => {
            // What the worker says it wrote is checked, not trusted: every object reachable
            // from its outputs is in the store with the bytes of its digest, before a stage
            // record names them and the index takes them.
            let roots: Vec<Digest> = out.outputs.values().map(|o| o.digest).collect();
            crate::boundary::adopt_closure(cx.store, cx.pool, &roots)
                .map_err(|e| StageError::UnverifiedOutput(e.to_string()))?;
            Ok(StageOutput { outputs: out.outputs, stats: out.stats })
        }
        Ok(Reply::Err(e)) => Err(e.into_stage_error()),
        Err(e) => Err(StageError::Worker(e.to_string())),
    }
}

/// Serves one [`StageRequest`] with `registry` (whose kinds have their runs attached): the
/// worker's `stage` verb. `check_torch` says why this process cannot compute under the
/// request's envelope, if it cannot.
pub fn serve_stage(
    registry: &Registry,
    request: &StageRequest,
    check_torch: impl FnOnce(&prov_manifest::Envelope) -> Result<(), String>,
) -> StageReply {
    let other = |message: String| Reply::Err(RemoteStageError::Other { message, integrity: false });
    if let Err(message) = check_torch(&request.envelope) {
        return other(message);
    }
    let kind = match request.kind_in(registry, "this worker") {
        Ok(k) => k,
        Err(e) => return Reply::Err(e),
    };
    // A stage in the worker runs here; it never starts another worker (an empty path is never
    // a file, so `call` refuses it).
    let ran = request
        .with_context(Path::new(""), |cx| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| kind.run(cx))));
    match ran {
        Ok(Ok(Ok(out))) => Reply::Ok(WireOutput { outputs: out.outputs, stats: out.stats }),
        Ok(Ok(Err(e))) => Reply::Err(RemoteStageError::from(&e)),
        Ok(Err(payload)) => {
            Reply::Err(RemoteStageError::Panic { message: crate::boundary::panic_message(payload.as_ref()) })
        }
        Err(e) => Reply::Err(e),
    }
}

impl StageRequest {
    /// The request for the stage `cx` runs, of kind `kind`.
    pub(crate) fn of(cx: &StageContext<'_>, kind: &dyn Stage) -> Self {
        Self {
            store: cx.store.root().to_path_buf(),
            project_root: cx.project_root.to_path_buf(),
            stage: cx.name.to_owned(),
            kind: kind.kind().to_owned(),
            version: kind.version(),
            key: cx.key,
            config: cx.config.clone(),
            inputs: cx.inputs.iter().map(|(n, i)| (n.clone(), (i.output_type, i.digest))).collect(),
            seeds: cx.seeds.clone(),
            threads: cx.pool.current_num_threads(),
            allow_commands: cx.allow_commands,
            envelope: cx.envelope.clone(),
            work: cx.work.clone(),
        }
    }

    /// The request's kind in `registry`, which must have it at the request's version (`who`
    /// names the process that looks, for the message).
    pub(crate) fn kind_in<'r>(
        &self,
        registry: &'r Registry,
        who: &str,
    ) -> Result<&'r Arc<dyn Stage>, RemoteStageError> {
        let other = |message: String| RemoteStageError::Other { message, integrity: false };
        let kind = registry.get(&self.kind).ok_or_else(|| other(format!("{who} has no stage kind `{}`", self.kind)))?;
        if kind.version() != self.version {
            return Err(other(format!(
                "{who}'s `{}` is version {}, the requester's is version {}: they are from different builds",
                self.kind,
                kind.version(),
                self.version
            )));
        }
        Ok(kind)
    }

    /// Runs `f` with the request's context, in a process that is not the coordinator: the
    /// store opened detached (only the coordinator opens the index; it takes what was written
    /// here once it has verified it), a pool of the request's thread count, and `worker` as
    /// the worker executable.
    pub(crate) fn with_context<T>(
        &self,
        worker: &Path,
        f: impl FnOnce(&StageContext<'_>) -> T,
    ) -> Result<T, RemoteStageError> {
        let store = prov_store::Store::open(&self.store, prov_store::Access::Detached, true)
            .map_err(|e| RemoteStageError::from(&StageError::Store(e)))?;
        let pool = rayon::ThreadPoolBuilder::new().num_threads(self.threads.max(1)).build().map_err(|e| {
            RemoteStageError::Other { message: format!("cannot start {} threads: {e}", self.threads), integrity: false }
        })?;
        let inputs: BTreeMap<String, StageInput> = self
            .inputs
            .iter()
            .map(|(n, (output_type, digest))| (n.clone(), StageInput { output_type: *output_type, digest: *digest }))
            .collect();
        let cx = StageContext {
            store: &store,
            name: &self.stage,
            key: self.key,
            config: &self.config,
            inputs: &inputs,
            seeds: &self.seeds,
            project_root: &self.project_root,
            pool: &pool,
            allow_commands: self.allow_commands,
            worker,
            envelope: &self.envelope,
            work: self.work.clone(),
            prepared: crate::Prepared::default(),
        };
        Ok(f(&cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(e: &StageError) -> StageError {
        let wire = serde_json::to_string(&RemoteStageError::from(e)).unwrap();
        serde_json::from_str::<RemoteStageError>(&wire).unwrap().into_stage_error()
    }

    #[test]
    fn errors_keep_their_shape_and_integrity_across_the_boundary() {
        let input = StageError::Input { input: "model".into(), message: "not a checkpoint".into() };
        assert!(matches!(round_trip(&input), StageError::Input { input, .. } if input == "model"));
        let config = StageError::Config(ConfigError::at(&["steps"], "must be at least 1").with_hint("raise it"));
        let StageError::Config(c) = round_trip(&config) else { panic!() };
        assert_eq!((c.path, c.hint.as_deref()), (vec!["steps".to_owned()], Some("raise it")));
        // A store error that is an integrity failure stays one, with its message.
        let missing = StageError::Store(prov_store::StoreError::Corrupt(prov_store::Mismatch {
            expected: Digest::of(b"x"),
            actual: Digest::of(b"y"),
        }));
        assert!(missing.is_integrity_failure());
        let back = round_trip(&missing);
        assert!(back.is_integrity_failure());
        assert_eq!(back.to_string(), missing.to_string());
        let io = StageError::Io(std::io::Error::other("disk full"));
        assert!(!round_trip(&io).is_integrity_failure());
    }

    #[test]
    fn a_panic_in_the_worker_is_resumed_as_a_panic() {
        let e = RemoteStageError::Panic { message: "index out of bounds".into() };
        let payload = std::panic::catch_unwind(|| e.into_stage_error()).unwrap_err();
        assert_eq!(crate::boundary::panic_message(payload.as_ref()), "index out of bounds");
    }
}
