//! The `Stage` trait that every stage kind implements, and the registry of kinds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use prov_manifest::{Determinism, OutputRef, OutputType, RecordKind, StoredError, get_typed};
use prov_store::{Digest, Store};
use serde_json::Value;

/// A configuration error, located by a path inside the stage's `params`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    /// Path inside `params` (empty for the whole block).
    pub path: Vec<String>,
    /// What is wrong.
    pub message: String,
    /// What to do.
    pub hint: Option<String>,
}

/// The most libtorch threads a stage may pin. Threads are part of a stage's configuration
/// (its bits depend on them), so a lockfile's author chooses them; libtorch starts that many
/// OS threads per pool, and a lockfile asking for 2^32 would exhaust the machine's.
pub const MAX_THREADS: u64 = 1024;

/// Checks a stage's `threads` parameter: from 1 to [`MAX_THREADS`].
///
/// # Errors
///
/// A [`ConfigError`] at `threads` saying which bound it breaks.
pub fn check_threads(threads: u64) -> Result<(), ConfigError> {
    match threads {
        0 => Err(ConfigError::at(&["threads"], "must be at least 1")),
        n if n > MAX_THREADS => Err(ConfigError::at(&["threads"], format!("must be at most {MAX_THREADS}, got {n}"))),
        _ => Ok(()),
    }
}

impl ConfigError {
    /// Builds an error at a path inside `params`.
    pub fn at(path: &[&str], message: impl Into<String>) -> Self {
        Self { path: path.iter().map(|s| (*s).to_owned()).collect(), message: message.into(), hint: None }
    }

    /// Adds a hint.
    #[must_use]
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// Reads `params` (or a resolved config) into a typed struct, naming the field at fault and,
/// for a misspelt field, the one probably meant.
pub fn parse_params<T: serde::de::DeserializeOwned>(params: &Value) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(params).map_err(|e| {
        let message = e.inner().to_string();
        let hint = prov_manifest::did_you_mean(&message).map(|s| format!("did you mean `{s}`?"));
        let mut path: Vec<String> = e
            .path()
            .iter()
            .filter_map(|seg| match seg {
                serde_path_to_error::Segment::Map { key } => Some(key.clone()),
                serde_path_to_error::Segment::Seq { index } => Some(index.to_string()),
                _ => None,
            })
            .collect();
        if let Some(field) = message.strip_prefix("unknown field `").and_then(|r| r.split('`').next())
            && path.last().map(String::as_str) != Some(field)
        {
            path.push(field.to_owned());
        }
        ConfigError { path, message, hint }
    })
}

/// An error while a stage runs.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// A store operation failed.
    #[error(transparent)]
    Store(#[from] prov_store::StoreError),
    /// A record could not be read or written.
    #[error(transparent)]
    Stored(#[from] prov_manifest::StoredError),
    /// Dataset bytes could not be read or written.
    #[error(transparent)]
    Dataset(#[from] prov_dataset::DatasetError),
    /// A file operation failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A pinned source no longer has the pinned bytes.
    #[error("source `{path}` changed since it was locked: pinned `{expected}`, found `{actual}`")]
    SourceChanged {
        /// The source path.
        path: String,
        /// The pinned digest.
        expected: Digest,
        /// What is there now.
        actual: Digest,
    },
    /// An input has the wrong type for this stage.
    #[error("input `{input}`: {message}")]
    Input {
        /// Input name.
        input: String,
        /// What is wrong.
        message: String,
    },
    /// The configuration in the lockfile is not what this stage kind expects.
    #[error("invalid config: {0}")]
    Config(#[from] ConfigError),
    /// The sandbox a command must run in cannot start; the command did not run.
    #[error("the command sandbox cannot start: {0}")]
    Sandbox(String),
    /// An external command failed.
    #[error("command `{command}` {status}{}", if stderr.is_empty() { String::new() } else { format!("; its stderr ends with:\n{stderr}") })]
    Command {
        /// The command line.
        command: String,
        /// How it ended.
        status: String,
        /// The end of its standard error.
        stderr: String,
    },
    /// The worker that runs libtorch stages could not be started, or ended without a reply.
    #[error("{0}")]
    Worker(String),
    /// The device the stage's configuration names cannot compute here (no GPU, no driver, a
    /// libtorch without CUDA), or cannot under this executor.
    #[error("device {device}: {message}")]
    Device {
        /// The device asked for (`cuda:0`).
        device: String,
        /// Why it cannot be used.
        message: String,
    },
    /// A map task's result is not what the stage's reduce step reads (a result file written
    /// by another build, or edited).
    #[error("map task {task}: {message}")]
    MapResult {
        /// The task's index.
        task: usize,
        /// What is wrong.
        message: String,
    },
    /// A file a map task left for the reduce step ([`crate::WorkFile`]) is not what the task's
    /// result says it wrote: damaged, replaced or gone. An integrity failure of that task.
    #[error("work file `{name}` of map task {task}: {message}")]
    WorkFile {
        /// The task's index.
        task: usize,
        /// The file's name in the work directory.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// The outputs a stage returned are not what its kind declares (names, types), or name
    /// objects that are not in the store with the bytes of their digests, or that are not the
    /// records their types say: an integrity failure, whatever the stage (or worker) says.
    #[error("the stage's outputs do not check: {0}")]
    UnverifiedOutput(String),
    /// The worker reported an error that has no variant here (a store's, a record's, a
    /// dataset's), by its message.
    #[error("{message}")]
    Remote {
        /// What went wrong.
        message: String,
        /// Whether bytes did not match their digest.
        integrity: bool,
    },
}

impl StageError {
    /// A record read for input `input` (or reached from it) that is of the wrong kind is an
    /// error of that input, named; any other error reading it stays what it is.
    pub fn of_input(input: &str, e: StoredError) -> Self {
        match e {
            StoredError::WrongKind { .. } => Self::Input { input: input.to_owned(), message: e.to_string() },
            other => Self::Stored(other),
        }
    }
}

impl StageError {
    /// Returns true when the failure is an integrity failure (bytes not matching a digest).
    pub fn is_integrity_failure(&self) -> bool {
        match self {
            Self::Store(e) => e.is_integrity_failure(),
            Self::Stored(e) => e.is_integrity_failure(),
            Self::Dataset(e) => e.is_integrity_failure(),
            Self::SourceChanged { .. } | Self::UnverifiedOutput(_) | Self::WorkFile { .. } => true,
            Self::Remote { integrity, .. } => *integrity,
            _ => false,
        }
    }
}

/// One input handed to a stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageInput {
    /// What it is.
    pub output_type: OutputType,
    /// Its digest.
    pub digest: Digest,
}

/// Everything a stage may use while it runs. Stages read nothing else: no environment
/// variables, no clock, no current directory.
pub struct StageContext<'a> {
    /// The store.
    pub store: &'a Store,
    /// Stage name.
    pub name: &'a str,
    /// The stage key: the digest of everything the outputs may depend on (a stage that keeps
    /// resumable progress between attempts names it by this key).
    pub key: Digest,
    /// The resolved configuration.
    pub config: &'a Value,
    /// Inputs by name.
    pub inputs: &'a BTreeMap<String, StageInput>,
    /// Seeds by name.
    pub seeds: &'a BTreeMap<String, u64>,
    /// Project root: the base of relative source paths.
    pub project_root: &'a Path,
    /// Thread pool sized to the envelope's thread count.
    pub pool: &'a rayon::ThreadPool,
    /// Whether the lockfile allows external commands.
    pub allow_commands: bool,
    /// The worker executable, for kinds whose computation runs there ([`crate::worker`]).
    pub worker: &'a Path,
    /// The envelope the stage record will carry; a kind whose computation runs in the worker
    /// hands its libtorch facts to the worker, which refuses to compute under others.
    pub envelope: &'a prov_manifest::Envelope,
    /// The directory a stage's map tasks and its reduce step share ([`Self::work_dir`]).
    pub work: PathBuf,
    /// What the stage's map calls in this process prepare once ([`Self::prepared`]).
    pub prepared: Prepared,
}

/// Values a stage derives from its inputs and configuration alone, made at the first
/// [`Stage::map`] call of a run in this process and shared by the later ones: `robots` parses
/// its snapshot once, not once per batch. A local run ([`Stage::run`]'s default) drops them
/// after its last batch, before the reduce step finishes.
///
/// Kept per process and per stage execution, never on disk: whatever is kept here must be
/// what a fresh process would make from the same inputs, so that a map task gives the same
/// result in a batch of its own, on a cluster node, as in a local run's later batch.
#[derive(Default)]
pub struct Prepared {
    values: std::sync::Mutex<BTreeMap<std::any::TypeId, Arc<dyn std::any::Any + Send + Sync>>>,
}

impl Prepared {
    /// Drops every value (the stage will make no further map call here).
    pub fn clear(&self) {
        self.values.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
    }
}

impl StageContext<'_> {
    /// The stage's value of type `T`, made by `make` on the first call in this process and
    /// shared afterwards (see [`Prepared`]). A failed `make` keeps nothing, so the next call
    /// tries again. `make` runs without a lock held, so it may itself ask for another
    /// prepared value; two calls at once may both make the value, and the first one kept is
    /// the one both get (the map calls of a local run come one after the other).
    ///
    /// # Errors
    ///
    /// `make`'s.
    pub fn prepared<T: std::any::Any + Send + Sync>(
        &self,
        make: impl FnOnce() -> Result<T, StageError>,
    ) -> Result<Arc<T>, StageError> {
        let values = || self.prepared.values.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let id = std::any::TypeId::of::<T>();
        let kept = values().get(&id).cloned();
        let value = if let Some(v) = kept {
            v
        } else {
            let fresh: Arc<dyn std::any::Any + Send + Sync> = Arc::new(make()?);
            Arc::clone(values().entry(id).or_insert(fresh))
        };
        Ok(value.downcast::<T>().expect("kept under its own type id"))
    }

    /// Returns the input with this name.
    pub fn input(&self, name: &str) -> Result<StageInput, StageError> {
        self.inputs
            .get(name)
            .copied()
            .ok_or_else(|| StageError::Input { input: name.to_owned(), message: "missing".into() })
    }

    /// Reads the record input `name` names, which must be of kind `T` (a `docs` input's
    /// dataset record, a `model` input's checkpoint record).
    ///
    /// # Errors
    ///
    /// [`StageError::Input`] naming the input when the record is of another kind; the store's
    /// errors otherwise.
    pub fn input_record<T: RecordKind>(&self, name: &str) -> Result<T, StageError> {
        let input = self.input(name)?;
        get_typed(self.store, &input.digest).map_err(|e| StageError::of_input(name, e))
    }

    /// Returns the bytes of a file input: another stage's `file` output, or a source that is
    /// one file (its content). A source directory, or any other record, is an error naming the
    /// input. Reads are verified against the digest, as every store read is.
    pub fn read_file_input(&self, name: &str) -> Result<Vec<u8>, StageError> {
        let input = self.input(name)?;
        if input.output_type != OutputType::Source {
            return Ok(self.store.read(&input.digest)?);
        }
        let bad = |message: String| StageError::Input { input: name.to_owned(), message };
        match prov_manifest::get_record(self.store, &input.digest)? {
            prov_manifest::Record::Source(s) => match s.content {
                prov_manifest::Content::File { digest, .. } => Ok(self.store.read(&digest)?),
                prov_manifest::Content::Tree { .. } => {
                    Err(bad(format!("source `{}` is a directory; this input takes one file", s.name)))
                }
            },
            other => Err(bad(format!("a {} record, not a source", other.kind_name()))),
        }
    }

    /// Returns a file input ([`StageContext::read_file_input`]) as text: UTF-8, or an error
    /// naming the input and the first byte that is not.
    pub fn read_text_input(&self, name: &str) -> Result<String, StageError> {
        String::from_utf8(self.read_file_input(name)?).map_err(|e| StageError::Input {
            input: name.to_owned(),
            message: format!("not UTF-8 (at byte {})", e.utf8_error().valid_up_to()),
        })
    }

    /// Returns the seed with this name.
    pub fn seed(&self, name: &str) -> Result<u64, StageError> {
        self.seeds.get(name).copied().ok_or_else(|| {
            StageError::Config(ConfigError::at(&[], format!("the lockfile has no seed `{name}` for this stage")))
        })
    }

    /// Returns a fresh scratch directory inside the store's `tmp/`.
    pub fn scratch_dir(&self) -> Result<PathBuf, StageError> {
        Ok(self.store.scratch_dir(self.name)?)
    }

    /// Returns a fresh scratch directory that is removed when the guard is dropped.
    pub fn scratch(&self) -> Result<Scratch, StageError> {
        Ok(Scratch::at(self.scratch_dir()?))
    }

    /// Returns (creating it) the directory that the stage's map tasks and its reduce step
    /// share, for what a map task leaves the reduce step that is not an output: files written
    /// with [`crate::WorkFile`] and named, with their digests, in the task's result.
    ///
    /// It is on the store's file system, which the nodes of a cluster share. Run as tasks, it
    /// is the stage's task directory's `work/` (named by the stage key, kept while the stage
    /// resumes task by task, removed with the task directory once the stage is recorded); run
    /// in one process, a fresh directory of the store's `tmp/`, removed when the stage ends.
    pub fn work_dir(&self) -> Result<PathBuf, StageError> {
        fs_err::create_dir_all(&self.work)?;
        Ok(self.work.clone())
    }
}

/// A stage's scratch directory, removed when dropped, whether the stage ends or fails (and
/// by `prov gc` after a crash): where stages keep state that would otherwise grow in memory.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    /// Takes charge of an existing directory.
    pub fn at(dir: PathBuf) -> Self {
        Self(dir)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs_err::remove_dir_all(&self.0);
    }
}

/// Where two versions of an output differ, as a stage can tell.
#[derive(Debug, Clone, PartialEq)]
pub struct Located {
    /// Lines for people, most important first.
    pub lines: Vec<String>,
    /// The same, for machines.
    pub data: Value,
}

/// What a stage produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StageOutput {
    /// Outputs by name.
    pub outputs: BTreeMap<String, OutputRef>,
    /// Deterministic statistics.
    pub stats: BTreeMap<String, Value>,
}

/// How many map tasks a local run ([`Stage::run`]'s default) runs before it hands their
/// results to the reduce step: enough that every thread stays busy between hand-overs; few
/// enough that the results held stay bounded. (What a stage sets up for its map calls,
/// `robots` its parsed snapshot, `decontaminate` its benchmark index, is made once per run
/// here: [`StageContext::prepared`].) A batch holds its results as JSON text
/// ([`MapResultText`]): a filter's result counts its removed documents per language, about
/// 150 languages for a 16 MiB shard of a corpus of 500, which is a few KB as text but was an
/// estimated 20 to 45 KB as a parsed JSON value, tens of MB for a full batch (what `robots` grew by from 1 to 20 GiB, see the
/// book's Benchmarks). Smaller batches were no cure while set-up was per call: with 64,
/// `robots` parsed its snapshot 20 times at 1,280 shards and its heap rose from 95 to 128-147
/// MiB.
pub const MAP_BATCH: usize = 1024;

/// A map task's result as its JSON text. [`Stage::map`] returns results in this form so that
/// a batch of them costs the bytes of their text, not those of parsed values (a JSON map
/// entry parsed costs several times its text); [`MapResults`] parses each as the reduce step
/// asks for it.
pub type MapResultText = Box<serde_json::value::RawValue>;

/// Encodes task `task`'s result as a [`Stage::map`] returns it.
///
/// # Errors
///
/// [`StageError::MapResult`] when `result` does not encode as JSON (a map with keys that are
/// not strings).
pub fn map_result_text(task: usize, result: &impl serde::Serialize) -> Result<MapResultText, StageError> {
    serde_json::value::to_raw_value(result).map_err(|e| StageError::MapResult { task, message: e.to_string() })
}

/// Runs `stage`'s map tasks `tasks` and pairs each with its result. The one place `map` is
/// called, locally and in a cluster task, so that a map step returning another number of
/// results than tasks fails at the first task instead of shifting every later result onto
/// the wrong task.
pub(crate) fn map_checked<S: Stage + ?Sized>(
    stage: &S,
    cx: &StageContext<'_>,
    tasks: &[usize],
) -> Result<Vec<(usize, MapResultText)>, StageError> {
    let texts = stage.map(cx, tasks)?;
    if texts.len() != tasks.len() {
        return Err(StageError::MapResult {
            task: tasks.first().copied().unwrap_or_default(),
            message: format!("the batch of {} tasks from here returned {} results", tasks.len(), texts.len()),
        });
    }
    Ok(tasks.iter().copied().zip(texts).collect())
}

/// Parses task `task`'s result, as the reduce step reads it.
pub(crate) fn parse_map_result(task: usize, text: &serde_json::value::RawValue) -> Result<Value, StageError> {
    serde_json::from_str(text.get()).map_err(|e| StageError::MapResult { task, message: e.to_string() })
}

/// The results of a stage's map tasks as the reduce step reads them: `(task, result)` in task
/// order, read (from this process's batches or from the task directory of a cluster run) one
/// at a time. A result that cannot be had ends the stream with an error.
pub struct MapResults<'a> {
    tasks: usize,
    next: usize,
    results: Box<dyn Iterator<Item = Result<Value, StageError>> + 'a>,
}

impl<'a> MapResults<'a> {
    /// The results of `tasks` map tasks, `results` yielding them in task order.
    pub fn new(tasks: usize, results: impl Iterator<Item = Result<Value, StageError>> + 'a) -> Self {
        Self { tasks, next: 0, results: Box::new(results) }
    }

    /// Results already in memory, in task order.
    pub fn of(results: Vec<Value>) -> Self {
        Self::new(results.len(), results.into_iter().map(Ok))
    }

    /// How many map tasks the stage has.
    pub fn tasks(&self) -> usize {
        self.tasks
    }
}

impl Iterator for MapResults<'_> {
    type Item = Result<(usize, Value), StageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.tasks {
            return None;
        }
        let task = self.next;
        match self.results.next() {
            Some(Ok(v)) => {
                self.next += 1;
                Some(Ok((task, v)))
            }
            Some(Err(e)) => {
                self.next = self.tasks;
                Some(Err(e))
            }
            // Fewer results than tasks: the reduce step must not write a stage from part of it.
            None => {
                self.next = self.tasks;
                Some(Err(StageError::MapResult { task, message: "no result for this task".into() }))
            }
        }
    }
}

/// Which inputs a stage kind takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputSpec {
    /// Exactly these names, each accepting these types.
    Named(Vec<(&'static str, Vec<OutputType>)>),
    /// Any names, any types.
    Any,
    /// Exactly these names, which follow from the stage's configuration (see
    /// [`Stage::inputs_for`]), each accepting these types.
    Configured(Vec<(String, Vec<OutputType>)>),
}

impl InputSpec {
    /// The declared names and the types each takes; `None` for [`InputSpec::Any`].
    pub fn declared(&self) -> Option<Vec<(&str, &[OutputType])>> {
        match self {
            Self::Named(list) => Some(list.iter().map(|(n, t)| (*n, t.as_slice())).collect()),
            Self::Configured(list) => Some(list.iter().map(|(n, t)| (n.as_str(), t.as_slice())).collect()),
            Self::Any => None,
        }
    }
}

/// A kind of stage: its schema, its version and how it runs.
pub trait Stage: Send + Sync {
    /// The kind's name in recipes (`shard`).
    fn kind(&self) -> &'static str;

    /// Implementation version: bump it whenever the same inputs and config could produce
    /// different bytes, so that cached outputs of the old version are not reused.
    fn version(&self) -> u32;

    /// One line for `prov doctor` and the book.
    fn summary(&self) -> &'static str;

    /// Checks `params` and returns the configuration with every default explicit.
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError>;

    /// The determinism class for a resolved configuration.
    fn determinism(&self, config: &Value) -> Determinism;

    /// The device a resolved configuration computes on: its `device` field, which the kinds
    /// that run libtorch on a GPU take (and `resolve_config` makes explicit); the CPU for
    /// every other kind.
    fn device(&self, config: &Value) -> crate::ComputeDevice {
        config.get("device").and_then(Value::as_str).and_then(|s| s.parse().ok()).unwrap_or_default()
    }

    /// The inputs it takes.
    fn inputs(&self) -> InputSpec;

    /// The inputs a resolved configuration takes: [`Stage::inputs`] unless the kind's input
    /// names follow from its configuration (`pretrain`'s phase sources). Locking and checking
    /// a lockfile use this one.
    fn inputs_for(&self, _config: &Value) -> InputSpec {
        self.inputs()
    }

    /// Names among [`InputSpec::Named`] that a recipe may leave out (the `license` stage's
    /// reviewer `verdicts`). A stage reads them with `cx.inputs.get(name)`.
    fn optional_inputs(&self) -> &'static [&'static str] {
        &[]
    }

    /// Declared outputs for a resolved configuration.
    fn outputs(&self, config: &Value) -> Vec<(String, OutputType)>;

    /// Names of the seeds it uses.
    fn seed_names(&self) -> &'static [&'static str] {
        &[]
    }

    /// Whether it runs commands (requires `allow_commands: true`).
    fn runs_commands(&self) -> bool {
        false
    }

    /// For a stage whose work splits into independent map tasks (one per input shard) and a
    /// reduce step that combines their results: how many map tasks this run has. `None` (the
    /// default): the stage runs whole, in one [`Stage::run`].
    ///
    /// A map task reads only its share of the inputs and writes only objects; its result is
    /// JSON that names them. An executor may run the tasks in this process (the default
    /// [`Stage::run`]) or each on another machine of a cluster, at any time and more than once:
    /// the result of task `i` must depend on nothing but the stage's inputs, configuration,
    /// seeds and `i`.
    fn map_tasks(&self, _cx: &StageContext<'_>) -> Result<Option<usize>, StageError> {
        Ok(None)
    }

    /// Runs map tasks `tasks` (each below [`Stage::map_tasks`]) on `cx.pool` and returns
    /// their results, as JSON text ([`map_result_text`]), in the order of `tasks`.
    fn map(&self, _cx: &StageContext<'_>, _tasks: &[usize]) -> Result<Vec<MapResultText>, StageError> {
        Err(StageError::Worker(format!("stage kind `{}` has no map tasks", self.kind())))
    }

    /// Combines the results of every map task, which arrive in task order as a stream, into
    /// the stage's outputs. A reduce step folds each result as it comes and lets it go: the
    /// stream holds a bounded number of results at a time however many tasks the stage has.
    fn reduce(&self, _cx: &StageContext<'_>, _results: MapResults<'_>) -> Result<StageOutput, StageError> {
        Err(StageError::Worker(format!("stage kind `{}` has no reduce step", self.kind())))
    }

    /// Runs the stage. The default runs the map tasks here, [`MAP_BATCH`] at a time in
    /// parallel, and hands each batch's results to the reduce step as they are ready; a stage
    /// without map tasks implements it.
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let Some(tasks) = self.map_tasks(cx)? else {
            return Err(StageError::Worker(format!("stage kind `{}` has neither map tasks nor a run", self.kind())));
        };
        let batches = (0..tasks).step_by(MAP_BATCH).flat_map(move |start| {
            let batch: Vec<usize> = (start..tasks.min(start + MAP_BATCH)).collect();
            let results: Vec<Result<(usize, MapResultText), StageError>> = match map_checked(self, cx, &batch) {
                Ok(pairs) => pairs.into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            };
            if start + MAP_BATCH >= tasks {
                // The last batch: nothing will read the prepared values again.
                cx.prepared.clear();
            }
            // Parsed one at a time, as the reduce step takes them.
            results.into_iter().map(|r| r.and_then(|(task, text)| parse_map_result(task, &text)))
        });
        self.reduce(cx, MapResults::new(tasks, batches))
    }

    /// Says where two versions of output `output` differ, for a replay's divergence report
    /// (a training stage names the first step and tensor). `None`: nothing finer than the
    /// digests (the default), or the objects needed are not in this store.
    fn locate_difference(
        &self,
        _store: &Store,
        _output: &str,
        _expected: &OutputRef,
        _actual: &OutputRef,
    ) -> Option<Located> {
        None
    }

    /// Says what is damaged in a recorded output whose objects no longer match their digests
    /// (a checkpoint's tensors against the digests its record lists). `None` by default.
    fn locate_damage(&self, _store: &Store, _output: &str, _recorded: &OutputRef) -> Option<Located> {
        None
    }
}

/// The stage kinds a run may use, by name.
#[derive(Clone, Default)]
pub struct Registry {
    kinds: BTreeMap<&'static str, Arc<dyn Stage>>,
}

impl Registry {
    /// Returns an empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a kind, replacing one of the same name.
    pub fn register(&mut self, stage: Arc<dyn Stage>) {
        self.kinds.insert(stage.kind(), stage);
    }

    /// Returns a kind by name.
    pub fn get(&self, kind: &str) -> Option<&Arc<dyn Stage>> {
        self.kinds.get(kind)
    }

    /// Returns every kind, sorted by name.
    pub fn kinds(&self) -> impl Iterator<Item = &Arc<dyn Stage>> {
        self.kinds.values()
    }

    /// Returns the kind names, sorted.
    pub fn names(&self) -> Vec<&'static str> {
        self.kinds.keys().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;

    /// A map-reduce kind that logs when each task is mapped and each result reduced, and when
    /// the value its map calls share is made and dropped.
    struct Logged {
        tasks: usize,
        /// A task whose result the map step leaves out, as a faulty stage kind might.
        lose: Option<usize>,
        log: Arc<Mutex<Vec<String>>>,
    }

    /// The value [`Logged`]'s map calls share ([`StageContext::prepared`]); logs its drop.
    struct Shared(Arc<Mutex<Vec<String>>>);

    impl Drop for Shared {
        fn drop(&mut self) {
            self.0.lock().unwrap().push("dropped".into());
        }
    }

    impl Stage for Logged {
        fn kind(&self) -> &'static str {
            "logged"
        }
        fn version(&self) -> u32 {
            1
        }
        fn summary(&self) -> &'static str {
            "test"
        }
        fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
            Ok(params.clone())
        }
        fn determinism(&self, _config: &Value) -> Determinism {
            Determinism::Portable
        }
        fn inputs(&self) -> InputSpec {
            InputSpec::Any
        }
        fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
            Vec::new()
        }
        fn map_tasks(&self, _cx: &StageContext<'_>) -> Result<Option<usize>, StageError> {
            Ok(Some(self.tasks))
        }
        fn map(&self, cx: &StageContext<'_>, tasks: &[usize]) -> Result<Vec<MapResultText>, StageError> {
            let _shared = cx.prepared(|| {
                self.log.lock().unwrap().push("prepared".into());
                Ok(Shared(Arc::clone(&self.log)))
            })?;
            self.log.lock().unwrap().extend(tasks.iter().map(|t| format!("map {t}")));
            tasks.iter().filter(|&&t| Some(t) != self.lose).map(|&t| map_result_text(t, &(t * 10))).collect()
        }
        fn reduce(&self, _cx: &StageContext<'_>, results: MapResults<'_>) -> Result<StageOutput, StageError> {
            let mut sum = 0;
            for r in results {
                let (task, v) = r?;
                assert_eq!(v, json!(task * 10), "results arrive in task order");
                self.log.lock().unwrap().push(format!("reduce {task}"));
                sum += v.as_u64().unwrap();
            }
            let mut out = StageOutput::default();
            out.stats.insert("sum".into(), json!(sum));
            Ok(out)
        }
    }

    fn run_logged(tasks: usize, lose: Option<usize>) -> (Vec<String>, Result<Value, StageError>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let stage = Logged { tasks, lose, log: Arc::new(Mutex::new(Vec::new())) };
        let bench = crate::testing::TestBench::new(2);
        let (config, inputs) = (Value::Null, BTreeMap::new());
        let out = stage.run(&bench.context(&store, dir.path(), "logged", &config, &inputs));
        let log = stage.log.lock().unwrap().clone();
        (log, out.map(|o| o.stats["sum"].clone()))
    }

    /// What a local run's map calls prepare is made once, at the first batch, shared by the
    /// later ones, and dropped after the last batch is mapped, before its results are folded.
    /// Threads are from 1 to `MAX_THREADS`: a lockfile asking for 2^32 libtorch threads is
    /// refused at its `threads` (an adversarial review's `threads: 300` started 600 OS
    /// threads on 2 cores).
    #[test]
    fn threads_are_bounded() {
        assert!(check_threads(1).is_ok() && check_threads(MAX_THREADS).is_ok());
        for (n, said) in
            [(0, "must be at least 1"), (MAX_THREADS + 1, "must be at most 1024"), (u64::from(u32::MAX), "at most")]
        {
            let e = check_threads(n).unwrap_err();
            assert!(e.to_string().contains(said) && e.path == ["threads"], "{n}: {e}");
        }
    }

    #[test]
    fn a_local_run_prepares_once_and_drops_it_after_the_last_batch() {
        let tasks = 2 * MAP_BATCH + 3;
        let (log, sum) = run_logged(tasks, None);
        sum.unwrap();
        let at = |line: &str| log.iter().position(|l| l == line).unwrap_or_else(|| panic!("{line} missing"));
        assert_eq!(log.iter().filter(|l| *l == "prepared").count(), 1, "{log:?}");
        assert_eq!(log.iter().filter(|l| *l == "dropped").count(), 1, "{log:?}");
        assert!(at("prepared") < at("map 0"));
        assert!(at(&format!("map {}", tasks - 1)) < at("dropped"));
        assert!(at("dropped") < at(&format!("reduce {}", 2 * MAP_BATCH)), "{log:?}");
    }

    /// A value that could not be made is not kept: the next call makes it; one that was made
    /// is returned as it is, without calling `make`.
    #[test]
    fn a_failed_preparation_is_tried_again_and_a_made_one_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let bench = crate::testing::TestBench::new(1);
        let (config, inputs) = (Value::Null, BTreeMap::new());
        let cx = bench.context(&store, dir.path(), "prepared", &config, &inputs);
        let failed = cx.prepared::<u32>(|| Err(StageError::Worker("not yet".into())));
        assert!(matches!(failed, Err(StageError::Worker(m)) if m == "not yet"));
        assert_eq!(*cx.prepared(|| Ok(7u32)).unwrap(), 7);
        assert_eq!(*cx.prepared::<u32>(|| panic!("made twice")).unwrap(), 7);
        // Another type is another value, and may be asked for while one is being made.
        let nested = cx.prepared(|| Ok(cx.prepared(|| Ok(String::from("other")))?.len())).unwrap();
        assert_eq!(*nested, 5);
        assert_eq!(*cx.prepared::<String>(|| panic!("made twice")).unwrap(), "other");
        cx.prepared.clear();
        assert_eq!(*cx.prepared(|| Ok(8u32)).unwrap(), 8);
    }

    /// A local run hands results to the reduce step batch by batch: the first result is
    /// folded before the second batch is mapped, so what is held does not grow with the
    /// number of tasks; every task is mapped once and reduced once, in order.
    #[test]
    fn a_local_run_reduces_each_batch_before_mapping_the_next() {
        let tasks = 2 * MAP_BATCH + 3;
        let (log, sum) = run_logged(tasks, None);
        assert_eq!(sum.unwrap(), json!((0..tasks).map(|t| t * 10).sum::<usize>()));
        let at = |line: String| log.iter().position(|l| *l == line).unwrap_or_else(|| panic!("{line} missing"));
        assert!(at("reduce 0".into()) < at(format!("map {MAP_BATCH}")), "{log:?}");
        assert!(at(format!("reduce {}", 2 * MAP_BATCH - 1)) < at(format!("map {}", 2 * MAP_BATCH)), "{log:?}");
        for t in 0..tasks {
            assert_eq!(log.iter().filter(|l| **l == format!("map {t}")).count(), 1);
            assert_eq!(log.iter().filter(|l| **l == format!("reduce {t}")).count(), 1);
        }
        let reduced: Vec<&String> = log.iter().filter(|l| l.starts_with("reduce")).collect();
        assert!(reduced.windows(2).all(|w| {
            let n = |s: &str| s[7..].parse::<usize>().unwrap();
            n(w[0]) + 1 == n(w[1])
        }));
        // No tasks: the reduce step runs once, on nothing.
        let (log, sum) = run_logged(0, None);
        assert_eq!((log, sum.unwrap()), (Vec::new(), json!(0)));
    }

    /// A map step that returns fewer results than it was given tasks fails the stage at the
    /// first task of that batch: the results that follow are never taken for the tasks before
    /// them (task 4's result for task 3's, and so on), and nothing of the batch is reduced.
    #[test]
    fn a_batch_short_of_a_result_fails_the_stage_instead_of_shifting_the_rest() {
        let (log, sum) = run_logged(MAP_BATCH + 2, Some(MAP_BATCH + 1));
        assert!(matches!(sum, Err(StageError::MapResult { task, .. }) if task == MAP_BATCH), "{sum:?}");
        assert!(log.iter().any(|l| *l == format!("reduce {}", MAP_BATCH - 1)));
        assert!(!log.iter().any(|l| *l == format!("reduce {MAP_BATCH}")));
    }

    /// A stream with fewer results than tasks ends with an error naming the first task
    /// without one, never quietly short; an error ends it.
    #[test]
    fn a_short_stream_is_an_error_of_its_first_missing_task() {
        let mut short = MapResults::new(3, vec![Ok(json!(1))].into_iter());
        assert_eq!(short.next().unwrap().unwrap(), (0, json!(1)));
        assert!(matches!(short.next(), Some(Err(StageError::MapResult { task: 1, .. }))));
        assert!(short.next().is_none());
        let mut failed = MapResults::new(3, vec![Err(StageError::Worker("lost".into())), Ok(json!(2))].into_iter());
        assert!(matches!(failed.next(), Some(Err(StageError::Worker(_)))));
        assert!(failed.next().is_none());
        assert_eq!(MapResults::of(vec![json!(5), json!(6)]).map(|r| r.unwrap().0).collect::<Vec<_>>(), vec![0, 1]);
    }
}
