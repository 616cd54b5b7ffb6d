//! Stage tasks that run in another process, on another machine of a cluster whose nodes share
//! the store's file system: how a stage is cut into tasks, what a task is told, what it leaves
//! behind, and the [`Dispatcher`] that runs tasks somewhere (`prov-slurm` is one).
//!
//! A stage with map tasks ([`crate::Stage::map_tasks`]) gives one task per map task; any other
//! stage is one task that runs it whole. Everything about a stage's tasks lives in one
//! directory of the store, named by the stage key:
//!
//! ```text
//! .prov/tasks/<stage key>/
//!   spec.json           what every task of the stage is told (TaskSpec), written by the coordinator
//!   results/map-00007.json, results/whole.json
//!                       one file per finished task (TaskResult), written by the task, by atomic rename
//!   work/               files map tasks leave for the reduce step (crate::WorkFile), named
//!                       with their digests in the results
//!   logs/               what the tasks printed (the dispatcher's business)
//!   jobs.jsonl          what the dispatcher submitted (its business too)
//! ```
//!
//! A task opens the store [`prov_store::Access::Detached`]: it writes objects, never the
//! `SQLite` index, which only the coordinating `prov` process opens (`SQLite`'s locks do not
//! hold on NFS or Lustre). The coordinator reads the results in task order, runs the reduce
//! step, hashes every object reachable from the stage's outputs and only then takes them into
//! the index and writes the stage record. A task whose result file exists is never run again
//! for the same key: a run that is killed, or whose tasks fail, resumes task by task. The
//! directory is removed once the stage record is written.

use std::path::{Path, PathBuf};

use prov_manifest::{Determinism, Envelope};
use prov_store::{Digest, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::stage::{Registry, StageError, map_checked, parse_map_result};
use crate::worker::{RemoteStageError, StageRequest, WireOutput};

/// The directory of the store that holds task directories.
pub const TASKS_DIR: &str = "tasks";

/// One task of a stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Task {
    /// Map task `i`.
    Map(usize),
    /// The whole stage (a stage without map tasks).
    Whole,
}

impl Task {
    /// The name of its result file.
    pub fn file_name(self) -> String {
        match self {
            Self::Map(i) => format!("map-{i:05}.json"),
            Self::Whole => "whole.json".to_owned(),
        }
    }
}

impl std::fmt::Display for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Map(i) => write!(f, "map task {i}"),
            Self::Whole => f.write_str("the stage's one task"),
        }
    }
}

/// How many tasks a stage had, and how many of them had a result from an earlier execution
/// (killed, or failed in other tasks) and were not run again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskCounts {
    /// Tasks in all.
    pub total: usize,
    /// Tasks whose result was there already.
    pub reused: usize,
}

/// What every task of a stage is told: the stage as the worker's request carries it, and
/// how many map tasks it has (`None`: one task runs it whole).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// The stage.
    pub stage: StageRequest,
    /// Its map tasks.
    pub map_tasks: Option<usize>,
}

impl TaskSpec {
    /// Every task of the stage, in order.
    pub fn tasks(&self) -> Vec<Task> {
        self.map_tasks.map_or_else(|| vec![Task::Whole], |n| (0..n).map(Task::Map).collect())
    }
}

/// What a finished task left: its result, or why it failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status", deny_unknown_fields)]
pub enum TaskResult {
    /// A map task's result, for the reduce step.
    Map {
        /// The stage key.
        key: Digest,
        /// The task.
        task: usize,
        /// What [`crate::Stage::map`] returned for it.
        value: Value,
    },
    /// A whole stage's outputs.
    Whole {
        /// The stage key.
        key: Digest,
        /// Outputs and statistics.
        output: WireOutput,
    },
    /// The task ran and failed: running it again would fail again.
    Failed {
        /// The stage key.
        key: Digest,
        /// The error.
        error: RemoteStageError,
    },
}

impl TaskResult {
    fn key(&self) -> Digest {
        match self {
            Self::Map { key, .. } | Self::Whole { key, .. } | Self::Failed { key, .. } => *key,
        }
    }
}

/// The directory of one stage's tasks.
#[derive(Debug, Clone)]
pub struct TaskDir {
    path: PathBuf,
    key: Digest,
}

impl TaskDir {
    /// The directory for stage key `key` in the store at `store_root` (not created).
    pub fn of(store_root: &Path, key: Digest) -> Self {
        Self { path: store_root.join(TASKS_DIR).join(key.to_hex()), key }
    }

    /// The task directory at `path` (`<store>/tasks/<stage key hex>`), when it is named like one.
    pub fn at(path: &Path) -> Option<Self> {
        let key = Digest::from_hex(path.file_name()?.to_str()?).ok()?;
        (path.parent()?.file_name()? == TASKS_DIR).then(|| Self { path: path.to_owned(), key })
    }

    /// Every task directory of the store, sorted by key.
    pub fn all(store_root: &Path) -> Result<Vec<Self>, StoreError> {
        let dir = store_root.join(TASKS_DIR);
        let mut out = Vec::new();
        let entries = match fs_err::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e.into()),
        };
        for entry in entries {
            let entry = entry?;
            if let Some(key) = entry.file_name().to_str().and_then(|n| Digest::from_hex(n).ok()) {
                out.push(Self { path: entry.path(), key });
            }
        }
        out.sort_by_key(|d| d.key);
        Ok(out)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The stage key.
    pub fn key(&self) -> Digest {
        self.key
    }

    /// Where the tasks' output goes (created by [`Self::write_spec`]).
    pub fn logs(&self) -> PathBuf {
        self.path.join("logs")
    }

    /// The stage's work directory when it runs as tasks ([`crate::StageContext::work_dir`]).
    pub fn work_path(&self) -> PathBuf {
        self.path.join("work")
    }

    /// The spec file.
    pub fn spec_path(&self) -> PathBuf {
        self.path.join("spec.json")
    }

    fn tmp(&self) -> PathBuf {
        self.path.join("tmp")
    }

    /// Where task `task` leaves its result.
    pub fn result_path(&self, task: Task) -> PathBuf {
        self.path.join("results").join(task.file_name())
    }

    /// Creates the directory and writes the spec (atomically; the same spec again is a no-op).
    pub fn write_spec(&self, spec: &TaskSpec) -> Result<(), StoreError> {
        for sub in ["results", "logs", "tmp"] {
            fs_err::create_dir_all(self.path.join(sub))?;
        }
        let bytes = serde_json::to_vec_pretty(spec).expect("a task spec encodes");
        if fs_err::read(self.spec_path()).is_ok_and(|b| b == bytes) {
            return Ok(());
        }
        prov_store::write_atomically(&self.tmp(), &self.spec_path(), &bytes)
    }

    /// Reads the spec.
    pub fn read_spec(&self) -> Result<TaskSpec, TaskFileError> {
        let path = self.spec_path();
        let bytes = fs_err::read(&path).map_err(|error| TaskFileError::Io { path: path.clone(), error })?;
        let spec: TaskSpec = serde_json::from_slice(&bytes)
            .map_err(|e| TaskFileError::Invalid { path: path.clone(), message: e.to_string() })?;
        if spec.stage.key != self.key {
            return Err(TaskFileError::Invalid {
                path,
                message: format!("it is the spec of stage key {}", spec.stage.key),
            });
        }
        Ok(spec)
    }

    /// Reads task `task`'s result: `None` when the task has not finished.
    ///
    /// # Errors
    ///
    /// When the file cannot be read, is not a result, or is the result of another key or task.
    pub fn read_result(&self, task: Task) -> Result<Option<TaskResult>, TaskFileError> {
        let path = self.result_path(task);
        let bytes = match fs_err::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(TaskFileError::Io { path, error }),
        };
        let result: TaskResult = serde_json::from_slice(&bytes)
            .map_err(|e| TaskFileError::Invalid { path: path.clone(), message: e.to_string() })?;
        let task_matches = match (&result, task) {
            (TaskResult::Map { task: t, .. }, Task::Map(i)) => *t == i,
            (TaskResult::Whole { .. }, Task::Whole) | (TaskResult::Failed { .. }, _) => true,
            _ => false,
        };
        if result.key() != self.key || !task_matches {
            return Err(TaskFileError::Invalid {
                path,
                message: format!("it is not the result of {task} of stage key {}", self.key),
            });
        }
        Ok(Some(result))
    }

    /// Writes task `task`'s result, atomically, into the directory as the coordinator made it.
    /// A directory that is gone (the stage recorded meanwhile, from another run of the task) is
    /// not made again: nobody would read the result, and it would linger.
    pub fn write_result(&self, task: Task, result: &TaskResult) -> Result<(), StoreError> {
        if !self.tmp().is_dir() || !self.path.join("results").is_dir() {
            return Err(StoreError::Io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("`{}` is gone: the stage was recorded without this task's result", self.path.display()),
            )));
        }
        let bytes = serde_json::to_vec(result).expect("a task result encodes");
        prov_store::write_atomically(&self.tmp(), &self.result_path(task), &bytes)
    }

    /// Takes the lock that one coordinator holds on a stage while it runs it as tasks, waiting
    /// for another that holds it (a second `prov run` of the same lockfile then finds the stage
    /// in the cache rather than running its tasks again). Released when the file is dropped.
    pub fn lock(store_root: &Path, key: Digest) -> Result<fs_err::File, StoreError> {
        let dir = store_root.join(TASKS_DIR);
        fs_err::create_dir_all(&dir)?;
        let file = fs_err::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(format!("{}.lock", key.to_hex())))?;
        file.file().lock()?;
        Ok(file)
    }

    /// Removes a result (one that failed, so that the task runs again).
    pub fn remove_result(&self, task: Task) -> Result<(), StoreError> {
        match fs_err::remove_file(self.result_path(task)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// Removes the directory, once the stage is recorded.
    pub fn remove(&self) -> Result<(), StoreError> {
        match fs_err::remove_dir_all(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }
}

/// Removes every task directory and stage lock of the store (`prov gc`, under the store's
/// exclusive lock: no coordinator runs, and a task still running on a node cannot take the
/// shared lock to write). Returns how many task directories there were.
pub fn remove_all(store_root: &Path) -> Result<usize, StoreError> {
    let dirs = TaskDir::all(store_root)?.len();
    match fs_err::remove_dir_all(store_root.join(TASKS_DIR)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(dirs),
    }
}

/// A task file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TaskFileError {
    /// It cannot be read.
    #[error("cannot read `{}`: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// It is not what it should be.
    #[error("`{}` is not a usable task file: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

/// Runs tasks somewhere else than in this process.
pub trait Dispatcher: Sync {
    /// Runs `tasks` of the stage whose directory is `dir` (its spec written) and returns when
    /// each of them has left a result file, or will not: the coordinator then reads the results
    /// and names any task that left none. A task that ended without a result (its machine lost,
    /// cancelled, killed) is run again as many times as the dispatcher is configured to.
    ///
    /// # Errors
    ///
    /// When the tasks cannot be submitted or watched (the scheduler's commands fail).
    fn dispatch(&self, dir: &TaskDir, stage: &str, tasks: &[Task]) -> Result<(), DispatchError>;

    /// The stage of key `key` is recorded: anything of it still queued may be dropped.
    fn finished(&self, _key: &Digest) {}
}

/// A dispatcher that could not run tasks.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct DispatchError {
    /// What failed.
    pub message: String,
    /// What to do.
    pub hint: Option<String>,
}

/// Runs one task of a spec in this process, as a task on a cluster node does (`prov task`):
/// opens the store detached, refuses to compute when this machine's envelope (`here`) differs
/// from the spec's on a field that the stage's class keys on, and returns the result to write.
/// A stage that runs libtorch starts the worker at `worker`, as the local executor does.
pub fn run_task(registry: &Registry, spec: &TaskSpec, task: Task, here: &Envelope, worker: &Path) -> TaskResult {
    let request = &spec.stage;
    let failed = |error: RemoteStageError| TaskResult::Failed { key: request.key, error };
    let other = |message: String| failed(RemoteStageError::Other { message, integrity: false });
    let kind = match request.kind_in(registry, "this prov") {
        Ok(k) => k,
        Err(e) => return failed(e),
    };
    // The spec is a file on a shared file system: one edited by hand (another configuration,
    // other inputs) no longer hashes to the key it claims, and its task refuses to compute
    // outputs the coordinator would record under that key.
    let determinism = kind.determinism(&request.config);
    let inputs: std::collections::BTreeMap<String, Digest> =
        request.inputs.iter().map(|(n, (_, d))| (n.clone(), *d)).collect();
    let key = crate::key::stage_key(
        &request.kind,
        request.version,
        &request.config,
        &inputs,
        &request.seeds,
        &crate::envelope::key_envelope(determinism, &request.envelope),
    );
    if key != request.key {
        return TaskResult::Failed {
            key: request.key,
            error: RemoteStageError::Other {
                message: format!(
                    "the task's spec does not hash to the stage key it names ({} claimed, {key} computed): it was edited",
                    request.key
                ),
                integrity: true,
            },
        };
    }
    if determinism != Determinism::Portable {
        let differences = request.envelope.differences(here);
        if let Some((field, recorded, now)) = differences.first() {
            return other(format!(
                "this node's envelope differs from the one the run keys on, in `{field}`: `{recorded}` there, `{now}` here; the nodes of a run must be alike"
            ));
        }
    }
    let ran = request.with_context(worker, |cx| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match task {
            Task::Map(i) => map_checked(&**kind, cx, &[i]).and_then(|results| {
                let value = match results.as_slice() {
                    [(task, text)] => parse_map_result(*task, text)?,
                    _ => return Err(StageError::MapResult { task: i, message: "not one result".into() }),
                };
                Ok(TaskResult::Map { key: request.key, task: i, value })
            }),
            Task::Whole => kind.run(cx).map(|out| TaskResult::Whole {
                key: request.key,
                output: WireOutput { outputs: out.outputs, stats: out.stats },
            }),
        }))
    });
    match ran {
        Ok(Ok(Ok(result))) => result,
        Ok(Ok(Err(e))) => failed(RemoteStageError::from(&e)),
        Ok(Err(payload)) => {
            failed(RemoteStageError::Panic { message: crate::boundary::panic_message(payload.as_ref()) })
        }
        Err(e) => failed(e),
    }
}
