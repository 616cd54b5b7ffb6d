//! Running and replaying a lockfile.
//!
//! `run` executes each stage in plan order, reusing cached outputs when the stage key matches
//! and the cached objects verify, and records a stage manifest at every boundary. A run that
//! is killed resumes by running again: every finished stage is in the cache.
//!
//! `replay` re-executes ignoring the cache and compares every stage with the recorded run,
//! stopping at the first divergence.

use std::collections::BTreeMap;
use std::time::Instant;

use prov_dataset::{DatasetDifference, first_difference};
use prov_manifest::{
    Determinism, Envelope, EnvelopeCheck, EnvelopeDifference, LoadedRun, LoadedStage, LockedStage, Lockfile, Name,
    OutputRef, OutputType, Record, ReplayDifference, ReplayDivergence, ReplayRecord, ReplayStage, ReplayStatus,
    RunRecord, RunStage, SCHEMA_VERSION, StageRecord, StoredError, closure, get_record, get_typed, put_record,
};
use prov_store::{Digest, ObjectKind, Store, StoreError};
use rayon::prelude::*;
use serde_json::Value;

use crate::envelope::key_envelope;
use crate::error::ExecError;
use crate::key::stage_key;
use crate::stage::{Registry, StageContext, StageError, StageInput};

/// How a stage's outputs were obtained in one execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageStatus {
    /// Computed now.
    Executed,
    /// Taken from the cache (key matched, objects verified).
    Cached,
    /// Replay: taken from the recorded run (before `--from`).
    Reused,
    /// Replay: re-executed and identical to the recording.
    Replayed,
}

impl StageStatus {
    /// Returns the word used in tables and the index.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Executed => "executed",
            Self::Cached => "cached",
            Self::Reused => "reused",
            Self::Replayed => "replayed",
        }
    }
}

/// One stage of an execution.
#[derive(Debug, Clone)]
pub struct StageReport {
    /// Stage name.
    pub name: Name,
    /// Stage kind.
    pub stage_kind: String,
    /// How its outputs were obtained.
    pub status: StageStatus,
    /// Wall time in milliseconds (not part of any hashed record).
    pub millis: u64,
    /// The stage manifest.
    pub manifest: Digest,
    /// Executed as tasks elsewhere ([`ExecOptions::dispatcher`]): how many there were, and how
    /// many had a result from an earlier, interrupted execution and were not run again.
    pub tasks: Option<crate::tasks::TaskCounts>,
    /// The stage record.
    pub record: StageRecord,
}

/// The first place a replay differs from its recording.
#[derive(Debug, Clone)]
pub enum Divergence {
    /// An output's bytes differ.
    Output {
        /// Stage name.
        stage: Name,
        /// Output name.
        output: String,
        /// Recorded output.
        expected: Option<OutputRef>,
        /// Replayed output.
        actual: Option<OutputRef>,
        /// For datasets: the first differing shard, row and column.
        dataset: Option<DatasetDifference>,
        /// What the stage kind says about where the outputs differ.
        located: Option<crate::stage::Located>,
        /// Envelope fields that differed and were ignored (`ignore_envelope`).
        envelope: Vec<(String, String, String)>,
        /// The stage record the re-execution produced.
        manifest: Digest,
    },
    /// The outputs are equal but a statistic differs.
    Stats {
        /// Stage name.
        stage: Name,
        /// Statistic name.
        field: String,
        /// Recorded value.
        expected: Option<Value>,
        /// Replayed value.
        actual: Option<Value>,
        /// Envelope fields that differed and were ignored (`ignore_envelope`).
        envelope: Vec<(String, String, String)>,
        /// The stage record the re-execution produced.
        manifest: Digest,
    },
    /// A stage of class `envelope` ran in a different envelope: equality cannot be claimed.
    Envelope {
        /// Stage name.
        stage: Name,
        /// (field, recorded, current).
        differences: Vec<(String, String, String)>,
    },
}

impl Divergence {
    /// Returns the stage that diverged.
    pub fn stage(&self) -> &Name {
        match self {
            Self::Output { stage, .. } | Self::Stats { stage, .. } | Self::Envelope { stage, .. } => stage,
        }
    }

    /// The form a replay record keeps (without the dataset and stage-kind locations, which
    /// a reader derives again from the two stage records).
    fn to_record(&self) -> ReplayDivergence {
        let fields = |v: &[(String, String, String)]| EnvelopeDifference::from_triples(v.to_vec());
        match self {
            Self::Output { stage, output, expected, actual, envelope, manifest, .. } => ReplayDivergence::Output {
                stage: stage.clone(),
                output: output.clone(),
                recorded: *expected,
                replayed: *actual,
                manifest: *manifest,
                envelope_ignored: fields(envelope),
            },
            Self::Stats { stage, field, expected, actual, envelope, manifest } => ReplayDivergence::Stats {
                stage: stage.clone(),
                field: field.clone(),
                recorded: expected.clone(),
                replayed: actual.clone(),
                manifest: *manifest,
                envelope_ignored: fields(envelope),
            },
            Self::Envelope { stage, differences } => {
                ReplayDivergence::Envelope { stage: stage.clone(), differences: fields(differences) }
            }
        }
    }
}

/// The outcome of one execution.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The run id (digest of the lockfile).
    pub run_id: Digest,
    /// Recipe name.
    pub recipe: String,
    /// The run manifest, when every stage completed (run mode) or the recording (replay).
    pub run_manifest: Option<Digest>,
    /// Stages in plan order, as far as the execution went.
    pub stages: Vec<StageReport>,
    /// Replay only: the first divergence.
    pub divergence: Option<Divergence>,
    /// Replay only: the replay record written when the replay ended (identical or diverged).
    pub replay_record: Option<Digest>,
    /// Row id of the execution in the store's log.
    pub execution: i64,
}

/// Receives progress; the CLI draws it, tests ignore it.
pub trait Observer: Sync {
    /// A stage starts (index is 0-based in plan order).
    fn stage_started(&self, _index: usize, _total: usize, _name: &str, _kind: &str) {}
    /// A stage ended.
    fn stage_finished(&self, _report: &StageReport) {}
}

/// An observer that ignores everything.
pub struct Silent;
impl Observer for Silent {}

/// What an execution needs besides the store and the lockfile.
pub struct ExecOptions<'a> {
    /// Stage kinds.
    pub registry: &'a Registry,
    /// Worker threads (recorded in the envelope).
    pub threads: usize,
    /// The envelope this process runs in.
    pub envelope: Envelope,
    /// Base of relative source paths.
    pub project_root: &'a std::path::Path,
    /// How the user named the lockfile (display only).
    pub lockfile_display: &'a str,
    /// Milliseconds since the Unix epoch, for the execution log only.
    pub clock: &'a (dyn Fn() -> i64 + Sync),
    /// Progress.
    pub observer: &'a dyn Observer,
    /// The worker executable that runs libtorch stages ([`crate::worker`]).
    pub worker: &'a std::path::Path,
    /// Where stages run: `None` in this process; otherwise each stage but the sources runs as
    /// tasks the dispatcher runs elsewhere ([`crate::tasks`]), and this process coordinates.
    pub dispatcher: Option<&'a dyn crate::tasks::Dispatcher>,
}

/// One node of the plan: a source or a stage, with its lockfile entry.
struct Node {
    stage: LockedStage,
}

fn plan(lockfile: &Lockfile, registry: &Registry) -> Result<Vec<Node>, ExecError> {
    let source = registry.get("source").expect("the source stage kind is always registered");
    let mut nodes: Vec<Node> = lockfile
        .sources
        .iter()
        .map(|s| Node {
            stage: LockedStage {
                name: s.name.clone(),
                stage_kind: "source".into(),
                version: source.version(),
                determinism: Determinism::Portable,
                config: serde_json::to_value(s).expect("locked sources encode"),
                inputs: BTreeMap::new(),
                seeds: BTreeMap::new(),
            },
        })
        .collect();
    // A lockfile is read, not trusted: the checks `prov lock` made run again.
    crate::check::check_lockfile(registry, lockfile)?;
    nodes.extend(lockfile.stages.iter().map(|s| Node { stage: s.clone() }));
    Ok(nodes)
}

struct Executor<'a> {
    store: &'a Store,
    opts: &'a ExecOptions<'a>,
    lockfile: &'a Lockfile,
    pool: rayon::ThreadPool,
    outputs: BTreeMap<Name, BTreeMap<String, OutputRef>>,
    /// The task counts of the stage executed last, for its report.
    last_tasks: std::cell::Cell<Option<crate::tasks::TaskCounts>>,
    /// The facts of each CUDA device a stage asked for, asked of the worker once per run.
    cuda: std::cell::RefCell<BTreeMap<u32, Result<prov_manifest::CudaEnvelope, String>>>,
}

impl<'a> Executor<'a> {
    fn new(store: &'a Store, opts: &'a ExecOptions<'a>, lockfile: &'a Lockfile) -> Result<Self, ExecError> {
        Ok(Self {
            store,
            opts,
            lockfile,
            pool: new_pool(opts.threads)?,
            outputs: BTreeMap::new(),
            last_tasks: std::cell::Cell::new(None),
            cuda: std::cell::RefCell::new(BTreeMap::new()),
        })
    }

    /// Where `stage` runs as tasks: nowhere for a local execution, and never for a source,
    /// which the coordinator reads from the project (it is what the tasks read).
    fn dispatcher_for(&self, stage: &LockedStage) -> Option<&'a dyn crate::tasks::Dispatcher> {
        self.opts.dispatcher.filter(|_| stage.stage_kind != "source")
    }

    fn inputs_of(&self, stage: &LockedStage) -> Result<BTreeMap<String, StageInput>, ExecError> {
        stage
            .inputs
            .iter()
            .map(|(name, r)| {
                let out = self.outputs.get(&r.stage).and_then(|o| o.get(r.output.as_str())).ok_or_else(|| {
                    ExecError::Incompatible {
                        stage: stage.name.clone(),
                        message: format!(
                            "input `{name}` refers to `{}.{}`, which produced no such output",
                            r.stage, r.output
                        ),
                    }
                })?;
                Ok((name.clone(), StageInput { output_type: out.output_type, digest: out.digest }))
            })
            .collect()
    }

    /// The envelope `stage` computes in: this run's, on the device its configuration names. A
    /// CUDA stage's carries its GPU's facts, which the worker reads where it runs.
    fn envelope_of(&self, stage: &LockedStage) -> Result<Envelope, ExecError> {
        let kind = self.opts.registry.get(&stage.stage_kind).expect("planned kinds exist");
        let device = kind.device(&stage.config);
        let crate::ComputeDevice::Cuda(index) = device else {
            return Ok(self.opts.envelope.clone());
        };
        let refuse = |message: String| ExecError::Stage {
            stage: stage.name.clone(),
            kind: stage.stage_kind.clone(),
            source: StageError::Device { device: device.to_string(), message },
        };
        // The GPU facts would be this host's, not the node's that computes.
        if self.dispatcher_for(stage).is_some() {
            return Err(refuse(
                "CUDA stages do not run under `--executor slurm` yet; run this stage with `--executor local` on a GPU \
                 node"
                    .into(),
            ));
        }
        let facts = self
            .cuda
            .borrow_mut()
            .entry(index)
            .or_insert_with(|| crate::worker::cuda_facts(self.opts.worker, index))
            .clone()
            .map_err(refuse)?;
        Ok(Envelope { device: device.to_string(), cuda: Some(facts), ..self.opts.envelope.clone() })
    }

    /// The envelope `stage` computes in ([`Self::envelope_of`]) and its key.
    fn keyed(
        &self,
        stage: &LockedStage,
        inputs: &BTreeMap<String, StageInput>,
    ) -> Result<(Envelope, Digest), ExecError> {
        let envelope = self.envelope_of(stage)?;
        let digests: BTreeMap<String, Digest> = inputs.iter().map(|(k, v)| (k.clone(), v.digest)).collect();
        let key = stage_key(
            &stage.stage_kind,
            stage.version,
            &stage.config,
            &digests,
            &stage.seeds,
            &key_envelope(stage.determinism, &envelope),
        );
        Ok((envelope, key))
    }

    fn execute(
        &self,
        stage: &LockedStage,
        inputs: &BTreeMap<String, StageInput>,
        key: Digest,
        envelope: &Envelope,
    ) -> Result<(Digest, StageRecord), ExecError> {
        let kind = self.opts.registry.get(&stage.stage_kind).expect("planned kinds exist");
        let dispatcher = self.dispatcher_for(stage);
        // Run here, the work directory lives as long as this execution; run as tasks, it is
        // the task directory's, kept while the stage resumes and removed once it is recorded.
        let local_work = match dispatcher {
            Some(_) => None,
            None => Some(crate::Scratch::at(self.store.scratch_dir("work")?)),
        };
        let cx = StageContext {
            store: self.store,
            name: stage.name.as_str(),
            key,
            config: &stage.config,
            inputs,
            seeds: &stage.seeds,
            project_root: self.opts.project_root,
            pool: &self.pool,
            allow_commands: self.lockfile.allow_commands,
            worker: self.opts.worker,
            envelope,
            work: local_work.as_ref().map_or_else(
                || crate::tasks::TaskDir::of(self.store.root(), key).work_path(),
                |w| w.path().to_path_buf(),
            ),
            prepared: crate::Prepared::default(),
        };
        let fail = |source| ExecError::Stage { stage: stage.name.clone(), kind: stage.stage_kind.clone(), source };
        // The last resort for a bug (a libtorch call that panics on input nobody checked): the
        // stage fails with an internal error; what it wrote is in the store as whole objects.
        let guarded = |f: &dyn Fn() -> Result<crate::StageOutput, StageError>| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
                .map_err(|payload| ExecError::Internal {
                    stage: stage.name.clone(),
                    kind: stage.stage_kind.clone(),
                    message: crate::boundary::panic_message(payload.as_ref()),
                })?
                .map_err(fail)
        };
        let out = match dispatcher {
            Some(dispatcher) => {
                let (out, counts) =
                    crate::dispatch::run_dispatched(dispatcher, &stage.name, kind.as_ref(), &cx, &guarded)?;
                self.last_tasks.set(Some(counts));
                out
            }
            None => guarded(&|| kind.run(&cx))?,
        };
        check_outputs(self.store, &kind.outputs(&stage.config), &out.outputs).map_err(fail)?;
        let record = StageRecord {
            schema: SCHEMA_VERSION,
            name: stage.name.clone(),
            stage_kind: stage.stage_kind.clone(),
            version: stage.version,
            determinism: stage.determinism,
            key,
            config: stage.config.clone(),
            inputs: inputs.iter().map(|(k, v)| (k.clone(), v.digest)).collect(),
            seeds: stage.seeds.clone(),
            envelope: envelope.clone(),
            outputs: out.outputs,
            stats: out.stats,
        };
        let digest = put_record(self.store, &Record::Stage(record.clone()))?;
        if let Some(dispatcher) = self.opts.dispatcher {
            crate::tasks::TaskDir::of(self.store.root(), key).remove()?;
            dispatcher.finished(&key);
        }
        Ok((digest, record))
    }

    /// A cache hit may come from a stage of another name (the name is not in the key): the
    /// run records it under this stage's name, with the same outputs.
    fn relabel(&self, stage: &LockedStage, hit: (Digest, StageRecord)) -> Result<(Digest, StageRecord), ExecError> {
        if hit.1.name == stage.name {
            return Ok(hit);
        }
        let record = StageRecord { name: stage.name.clone(), ..hit.1 };
        Ok((put_record(self.store, &Record::Stage(record.clone()))?, record))
    }

    /// Records a stage boundary in the execution log, makes its outputs available downstream
    /// and tells the observer.
    fn finish_stage(
        &mut self,
        execution: i64,
        stage: &LockedStage,
        status: StageStatus,
        start: Instant,
        manifest: Digest,
        record: StageRecord,
    ) -> Result<StageReport, ExecError> {
        let millis = millis_since(start);
        let logged = i64::try_from(millis).unwrap_or(i64::MAX);
        self.store.index().record_stage_event(
            execution,
            stage.name.as_str(),
            status.as_str(),
            logged,
            Some(&manifest),
        )?;
        self.outputs.insert(stage.name.clone(), record.outputs.clone());
        let report = StageReport {
            name: stage.name.clone(),
            stage_kind: stage.stage_kind.clone(),
            status,
            millis,
            manifest,
            tasks: self.last_tasks.take(),
            record,
        };
        self.opts.observer.stage_finished(&report);
        Ok(report)
    }

    /// Returns the cached stage record for `key` if it and everything it reaches verify.
    /// Records are read (and hashed) to walk the closure; the other objects are re-hashed
    /// only when their file changed since they were last hashed in full
    /// ([`Store::verify_unless_unchanged`]), so that a cached re-run costs one `stat` per
    /// output object, not a read of the outputs.
    fn cached(&self, key: &Digest) -> Result<Option<(Digest, StageRecord)>, ExecError> {
        let Some(manifest) = self.store.index().cache_get(key)? else {
            return Ok(None);
        };
        let record = match get_record(self.store, &manifest) {
            Ok(Record::Stage(r)) if r.key == *key => r,
            _ => {
                self.store.index().cache_remove(key)?;
                return Ok(None);
            }
        };
        let roots: Vec<Digest> = record.outputs.values().map(|o| o.digest).collect();
        let (reachable, problems) = closure(self.store, &roots);
        let reachable: Vec<Digest> = reachable.into_iter().collect();
        if !problems.is_empty() || self.store.verify_unless_unchanged(&reachable, &self.pool).is_err() {
            self.store.index().cache_remove(key)?;
            return Ok(None);
        }
        Ok(Some((manifest, record)))
    }
}

/// Checks what a stage returned against what its kind declares for its configuration: the
/// same output names with the same types, and each record-typed output a record of that type
/// (a `checkpoint` output a checkpoint record, …). Its objects' bytes are checked where a
/// stage's word is not enough ([`crate::worker::run_in_worker`]).
fn check_outputs(
    store: &Store,
    declared: &[(String, OutputType)],
    returned: &BTreeMap<String, OutputRef>,
) -> Result<(), StageError> {
    let mismatch = |what: String| StageError::UnverifiedOutput(what);
    let declared_map: BTreeMap<&str, OutputType> = declared.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    let returned_map: BTreeMap<&str, OutputType> = returned.iter().map(|(n, o)| (n.as_str(), o.output_type)).collect();
    if declared_map != returned_map {
        let show = |m: &BTreeMap<&str, OutputType>| {
            m.iter().map(|(n, t)| format!("{n} ({})", crate::lock::type_name(*t))).collect::<Vec<_>>().join(", ")
        };
        return Err(mismatch(format!(
            "its kind declares {}, it returned {}",
            show(&declared_map),
            show(&returned_map)
        )));
    }
    for (name, output) in returned {
        // Every type but `file` names a record kind, by the same word.
        if output.output_type == OutputType::File {
            continue;
        }
        let expected = crate::lock::type_name(output.output_type);
        let found = match prov_manifest::get_record(store, &output.digest) {
            Ok(record) => record.kind_name().to_owned(),
            Err(e) => format!("not a record ({e})"),
        };
        if found != expected {
            return Err(mismatch(format!("output `{name}` ({}) is {found}, not a {expected} record", output.digest)));
        }
    }
    Ok(())
}

/// Verifies every object reachable from `roots`; returns the first failure.
pub fn verify_closure(store: &Store, pool: &rayon::ThreadPool, roots: &[Digest]) -> Result<(), StoredError> {
    verify_closure_as_far_as_stored(store, pool, roots, false)
}

/// Verifies every object reachable from `roots`; with `missing_allowed`, an object that is
/// not in the store is not a failure (a recording imported from committed manifests holds
/// the records, not the data), while one whose bytes do not match its digest still is.
fn verify_closure_as_far_as_stored(
    store: &Store,
    pool: &rayon::ThreadPool,
    roots: &[Digest],
    missing_allowed: bool,
) -> Result<(), StoredError> {
    let (reachable, problems) = closure(store, roots);
    let absent = |e: &StoredError| matches!(e, StoredError::Store(StoreError::NotFound(_)));
    if let Some((_, e)) = problems.into_iter().find(|(_, e)| !(missing_allowed && absent(e))) {
        return Err(e);
    }
    let reachable: Vec<Digest> = reachable.into_iter().filter(|d| !missing_allowed || store.contains(d)).collect();
    pool.install(|| reachable.par_iter().try_for_each(|d| store.verify(d).map(|_| ())))?;
    Ok(())
}

fn millis_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn new_pool(threads: usize) -> Result<rayon::ThreadPool, ExecError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()
        .map_err(|e| ExecError::Store(StoreError::Io(std::io::Error::other(e.to_string()))))
}

/// Stores the lockfile bytes (so the run id resolves to them) and returns the run id.
fn store_lockfile(store: &Store, lockfile: &Lockfile, bytes: &[u8]) -> Result<Digest, ExecError> {
    let digest = store.put_bytes(ObjectKind::Manifest, bytes)?;
    store.index().add_refs(&digest, &Record::Lockfile(lockfile.clone()).references())?;
    Ok(digest)
}

/// Runs a lockfile, reusing cached stages.
pub fn run(store: &Store, lockfile: &Lockfile, bytes: &[u8], opts: &ExecOptions<'_>) -> Result<RunReport, ExecError> {
    let run_id = store_lockfile(store, lockfile, bytes)?;
    let nodes = plan(lockfile, opts.registry)?;
    let recipe = lockfile.recipe.name.to_string();
    let execution = store.index().begin_execution(&run_id, "run", &recipe, opts.lockfile_display, (opts.clock)())?;
    let mut ex = Executor::new(store, opts, lockfile)?;
    let mut report = RunReport {
        run_id,
        recipe,
        run_manifest: None,
        stages: Vec::new(),
        divergence: None,
        replay_record: None,
        execution,
    };
    let result = (|| {
        for (i, node) in nodes.iter().enumerate() {
            let stage = &node.stage;
            opts.observer.stage_started(i, nodes.len(), stage.name.as_str(), &stage.stage_kind);
            let start = Instant::now();
            let inputs = ex.inputs_of(stage)?;
            let (envelope, key) = ex.keyed(stage, &inputs)?;
            // Run as tasks, a stage is one coordinator's at a time; the next finds it cached.
            let _stage_lock = match ex.dispatcher_for(stage) {
                Some(_) => Some(crate::tasks::TaskDir::lock(store.root(), key)?),
                None => None,
            };
            let (status, (manifest, record)) = if let Some(hit) = ex.cached(&key)? {
                (StageStatus::Cached, ex.relabel(stage, hit)?)
            } else {
                let done = ex.execute(stage, &inputs, key, &envelope)?;
                store.index().cache_put(&key, &done.0)?;
                (StageStatus::Executed, done)
            };
            report.stages.push(ex.finish_stage(execution, stage, status, start, manifest, record)?);
        }
        let stages = report.stages.iter().map(|s| RunStage { name: s.name.clone(), manifest: s.manifest }).collect();
        let run_record = RunRecord::new(&report.recipe, run_id, stages);
        Ok::<_, ExecError>(put_record(store, &Record::Run(run_record))?)
    })();
    match result {
        Ok(manifest) => {
            store.index().finish_execution(execution, "ok", Some(&manifest), None, (opts.clock)())?;
            report.run_manifest = Some(manifest);
            Ok(report)
        }
        Err(e) => {
            store.index().finish_execution(execution, "failed", None, Some(&e.to_string()), (opts.clock)())?;
            Err(e)
        }
    }
}

/// Returns the run manifest of a run id's recorded run, from the execution log, the first
/// of:
///
/// 1. the latest completed `run` of it;
/// 2. the recording of the latest identical `replay` of it that re-executed every stage (a
///    replay record in the store says so: no divergence, every stage of the recording
///    `replayed`), as `prov replay --against` leaves in a store that never ran the lockfile.
///    A replay `--until` or `--from` a stage, or one that diverged, vouches for no run.
///
/// A run record that no execution here vouches for (a folder handed over and replayed in part,
/// or refused; data whose bytes are a run record; the records of an index that was lost) is
/// not this store's recorded run: replaying the committed folder, or running the lockfile,
/// makes one.
pub fn recorded_run(store: &Store, run_id: &Digest) -> Result<Option<(Digest, RunRecord)>, ExecError> {
    let executions = store.index().executions()?;
    let of_this = |mode: &'static str| {
        executions.iter().filter(move |e| e.run_id == *run_id && e.mode == mode && e.status == "ok")
    };
    if let Some(m) = of_this("run").find_map(|e| e.run_manifest) {
        return Ok(Some((m, get_typed::<RunRecord>(store, &m)?)));
    }
    for m in of_this("replay").filter_map(|e| e.run_manifest) {
        let run = get_typed::<RunRecord>(store, &m)?;
        if run.lockfile == *run_id && reproduced_whole(store, &m, &run)? {
            return Ok(Some((m, run)));
        }
    }
    Ok(None)
}

/// True when a replay record in the store re-executed every stage of the run record `run`
/// (`manifest`) and reproduced each: no divergence, and the recording's stages, in order,
/// each `replayed`.
fn reproduced_whole(store: &Store, manifest: &Digest, run: &RunRecord) -> Result<bool, ExecError> {
    let whole = |r: &prov_manifest::ReplayRecord| {
        r.divergence.is_none()
            && r.stages.len() == run.stages.len()
            && r.stages
                .iter()
                .zip(&run.stages)
                .all(|(s, planned)| s.status == prov_manifest::ReplayStatus::Replayed && s.name == planned.name)
    };
    Ok(prov_manifest::replays_of(store, manifest)?.iter().any(|(_, r)| whole(r)))
}

/// [`recorded_run`] with its stage records read: the run as every reader of a recorded run
/// takes it.
///
/// # Errors
///
/// As [`recorded_run`], and when a stage record is missing, damaged or of the wrong kind.
pub fn load_recorded_run(store: &Store, run_id: &Digest) -> Result<Option<LoadedRun>, ExecError> {
    match recorded_run(store, run_id)? {
        Some((manifest, record)) => Ok(Some(LoadedRun::from_record(store, manifest, record)?)),
        None => Ok(None),
    }
}

/// Which stages a replay re-executes.
#[derive(Debug, Clone, Default)]
pub struct ReplayRange {
    /// First stage to re-execute (earlier ones reuse the recording).
    pub from: Option<String>,
    /// Last stage to re-execute (later ones are not looked at).
    pub until: Option<String>,
    /// Compare envelopes on the fields that decide results only
    /// ([`prov_manifest::Envelope::result_differences`]): for reproducing a run recorded on
    /// another machine.
    pub across_machines: bool,
    /// Re-execute `envelope` stages even when the envelope differs, and compare their
    /// outputs anyway, to see where a different envelope makes a run diverge.
    pub ignore_envelope: bool,
    /// Compare with this run record (a recording imported from committed manifests) rather
    /// than with the latest run of the lockfile in this store, whatever the store holds.
    pub recording: Option<Digest>,
}

/// Reads the stage records of a recorded run, by stage name, after checking that the run is
/// one of this lockfile: its stages are the plan's, in plan order, each record names the stage
/// it is listed under and is that stage as the lockfile states it (kind, version, class,
/// config, seeds). A recording imported from a folder someone else wrote could list a stage
/// twice, or stages the lockfile does not have, and be compared only in part.
fn stage_records(store: &Store, recorded: Digest, run: RunRecord, nodes: &[Node]) -> Result<LoadedRun, ExecError> {
    let not_of_lockfile = |stage: &Name, message: String| ExecError::RecordingNotOfLockfile {
        recording: recorded,
        stage: stage.clone(),
        message,
    };
    let listed: Vec<&Name> = run.stages.iter().map(|s| &s.name).collect();
    let planned: Vec<&Name> = nodes.iter().map(|n| &n.stage.name).collect();
    if listed != planned {
        let at = listed.iter().zip(&planned).position(|(a, b)| a != b).unwrap_or(listed.len().min(planned.len()));
        let stage = planned.get(at).or(listed.get(at)).copied().cloned().unwrap_or_else(|| run.stages[0].name.clone());
        return Err(not_of_lockfile(
            &stage,
            format!(
                "its stages are not the lockfile's plan: {} listed, {} planned, first difference at position {at}",
                listed.len(),
                planned.len()
            ),
        ));
    }
    let loaded = LoadedRun::from_record(store, recorded, run)?;
    for (s, node) in loaded.stages().iter().zip(nodes) {
        let r = &s.record;
        let planned = &node.stage;
        let same_config = prov_manifest::encode_value(&r.config) == prov_manifest::encode_value(&planned.config);
        let mismatch = [
            ("name", r.name == planned.name),
            ("stage_kind", r.stage_kind == planned.stage_kind),
            ("version", r.version == planned.version),
            ("determinism", r.determinism == planned.determinism),
            ("config", same_config),
            ("seeds", r.seeds == planned.seeds),
        ]
        .into_iter()
        .find(|(_, equal)| !equal);
        if let Some((field, _)) = mismatch {
            return Err(not_of_lockfile(
                &r.name,
                format!("its stage record `{}` differs from the lockfile in `{field}`", s.manifest),
            ));
        }
    }
    Ok(loaded)
}

/// A stage that is not `portable` cannot claim equality in another envelope.
fn envelope_divergence(
    stage: &LockedStage,
    expected: &StageRecord,
    envelope: &Envelope,
    across_machines: bool,
) -> Option<Divergence> {
    if stage.determinism == Determinism::Portable {
        return None;
    }
    let differences = if across_machines {
        expected.envelope.result_differences(envelope)
    } else {
        expected.envelope.differences(envelope)
    };
    let differences: Vec<(String, String, String)> =
        differences.into_iter().map(|(f, a, b)| (f.to_owned(), a, b)).collect();
    (!differences.is_empty()).then(|| Divergence::Envelope { stage: stage.name.clone(), differences })
}

/// Checks that `--from` and `--until` name planned stages, in that order.
fn check_range(nodes: &[Node], range: &ReplayRange) -> Result<(), ExecError> {
    let position = |name: &String| {
        nodes.iter().position(|n| n.stage.name.as_str() == name).ok_or_else(|| ExecError::UnknownStage(name.clone()))
    };
    let from = range.from.as_ref().map(position).transpose()?;
    let until = range.until.as_ref().map(position).transpose()?;
    if let (Some(f), Some(u)) = (from, until)
        && u < f
    {
        return Err(ExecError::EmptyRange {
            from: nodes[f].stage.name.to_string(),
            until: nodes[u].stage.name.to_string(),
        });
    }
    Ok(())
}

/// Checks a recorded stage's outputs before a replay re-executes it (re-executing would
/// rewrite damaged objects and hide the damage), naming what the stage kind can locate.
fn check_recording(
    store: &Store,
    pool: &rayon::ThreadPool,
    kind: &dyn crate::stage::Stage,
    expected: &StageRecord,
    imported: bool,
) -> Result<(), ExecError> {
    let recorded: Vec<Digest> = expected.outputs.values().map(|o| o.digest).collect();
    verify_closure_as_far_as_stored(store, pool, &recorded, imported).map_err(|source| {
        let located = expected
            .outputs
            .iter()
            .filter_map(|(name, o)| kind.locate_damage(store, name, o))
            .flat_map(|l| l.lines)
            .collect();
        ExecError::DamagedRecording { stage: expected.name.clone(), source, located }
    })
}

/// The run record a replay compares with: the one `range` names, else the latest completed
/// run of the lockfile in the store. Either way it must be a run of this lockfile.
fn recording_of(store: &Store, run_id: Digest, range: &ReplayRange) -> Result<(Digest, RunRecord), ExecError> {
    let (manifest, run) = match range.recording {
        Some(m) => (m, get_typed::<RunRecord>(store, &m)?),
        None => recorded_run(store, &run_id)?.ok_or(ExecError::NotRecorded(run_id))?,
    };
    if run.lockfile != run_id {
        return Err(ExecError::WrongRecord { digest: manifest, expected: "run of this lockfile" });
    }
    Ok((manifest, run))
}

/// Re-executes a recorded run ignoring the cache and compares every stage with the recording.
pub fn replay(
    store: &Store,
    lockfile: &Lockfile,
    bytes: &[u8],
    range: &ReplayRange,
    opts: &ExecOptions<'_>,
) -> Result<RunReport, ExecError> {
    let run_id = store_lockfile(store, lockfile, bytes)?;
    let nodes = plan(lockfile, opts.registry)?;
    check_range(&nodes, range)?;
    let (recorded_manifest, recorded) = recording_of(store, run_id, range)?;
    let recorded_stages = stage_records(store, recorded_manifest, recorded, &nodes)?;
    let recipe = lockfile.recipe.name.to_string();
    let execution = store.index().begin_execution(&run_id, "replay", &recipe, opts.lockfile_display, (opts.clock)())?;
    let mut ex = Executor::new(store, opts, lockfile)?;
    let mut report = RunReport {
        run_id,
        recipe,
        run_manifest: Some(recorded_manifest),
        stages: Vec::new(),
        divergence: None,
        replay_record: None,
        execution,
    };
    let result = (|| {
        let mut active = range.from.is_none();
        for (i, node) in nodes.iter().enumerate() {
            let stage = &node.stage;
            active |= range.from.as_deref() == Some(stage.name.as_str());
            let LoadedStage { manifest: expected_manifest, record: expected } =
                recorded_stages.stage(stage.name.as_str()).cloned().ok_or_else(|| ExecError::Incompatible {
                    stage: stage.name.clone(),
                    message: "the recorded run has no such stage".into(),
                })?;
            opts.observer.stage_started(i, nodes.len(), stage.name.as_str(), &stage.stage_kind);
            let start = Instant::now();
            let (status, manifest, record) = if active {
                let inputs = ex.inputs_of(stage)?;
                let (envelope, key) = ex.keyed(stage, &inputs)?;
                let mut envelope_differences = Vec::new();
                if let Some(d) = envelope_divergence(stage, &expected, &envelope, range.across_machines) {
                    match d {
                        Divergence::Envelope { differences, .. } if range.ignore_envelope => {
                            envelope_differences = differences;
                        }
                        d => {
                            report.divergence = Some(d);
                            return Ok(());
                        }
                    }
                }
                let kind = opts.registry.get(&stage.stage_kind).expect("planned kinds exist");
                // A recording imported from committed manifests has its records here but not
                // the data they name: what is here is checked, what is missing is no damage.
                let imported = range.recording.is_some() || range.across_machines;
                check_recording(store, &ex.pool, kind.as_ref(), &expected, imported)?;
                let (manifest, record) = ex.execute(stage, &inputs, key, &envelope)?;
                if let Some(mut d) = compare(store, kind.as_ref(), &stage.name, &expected, &record, manifest)? {
                    if let Divergence::Output { envelope, .. } | Divergence::Stats { envelope, .. } = &mut d {
                        *envelope = envelope_differences;
                    }
                    report.divergence = Some(d);
                    return Ok(());
                }
                (StageStatus::Replayed, manifest, record)
            } else {
                let roots: Vec<Digest> = expected.outputs.values().map(|o| o.digest).collect();
                verify_closure(store, &ex.pool, &roots)?;
                (StageStatus::Reused, expected_manifest, expected)
            };
            report.stages.push(ex.finish_stage(execution, stage, status, start, manifest, record)?);
            if range.until.as_deref() == Some(stage.name.as_str()) {
                break;
            }
        }
        Ok::<_, ExecError>(())
    })();
    // The outcome as a record, identical or diverged: the evidence an audit reads.
    let result = result.and_then(|()| {
        report.replay_record = Some(write_replay_record(store, recorded_manifest, &report, range, &opts.envelope)?);
        Ok(())
    });
    let now = (opts.clock)();
    match result {
        Ok(()) => {
            let (status, detail) = match &report.divergence {
                None => ("ok", None),
                Some(d) => ("diverged", Some(format!("first divergent stage: {}", d.stage()))),
            };
            store.index().finish_execution(execution, status, Some(&recorded_manifest), detail.as_deref(), now)?;
            Ok(report)
        }
        Err(e) => {
            store.index().finish_execution(execution, "failed", None, Some(&e.to_string()), now)?;
            Err(e)
        }
    }
}

/// Writes the replay record of a replay that ended (identical or diverged).
fn write_replay_record(
    store: &Store,
    recording: Digest,
    report: &RunReport,
    range: &ReplayRange,
    envelope: &Envelope,
) -> Result<Digest, StoredError> {
    let envelope_check = if range.ignore_envelope {
        EnvelopeCheck::Ignored
    } else if range.across_machines {
        EnvelopeCheck::ResultFields
    } else {
        EnvelopeCheck::Full
    };
    let stages = report
        .stages
        .iter()
        .map(|s| {
            let status = if s.status == StageStatus::Replayed { ReplayStatus::Replayed } else { ReplayStatus::Reused };
            ReplayStage { name: s.name.clone(), status, manifest: s.manifest }
        })
        .collect();
    let record = ReplayRecord {
        schema: SCHEMA_VERSION,
        lockfile: report.run_id,
        recording,
        envelope: envelope.clone(),
        envelope_check,
        stages,
        divergence: report.divergence.as_ref().map(Divergence::to_record),
    };
    put_record(store, &Record::Replay(record))
}

/// Compares a replayed stage with its recording ([`StageRecord::replay_difference`]); for a
/// differing output, says where: the first differing shard, row and column of a dataset, or
/// what the stage kind can tell.
fn compare(
    store: &Store,
    kind: &dyn crate::stage::Stage,
    stage: &Name,
    expected: &StageRecord,
    actual: &StageRecord,
    manifest: Digest,
) -> Result<Option<Divergence>, ExecError> {
    let Some(difference) = expected.replay_difference(actual) else { return Ok(None) };
    match difference {
        // The lockfile decides these fields and the recording is of the same lockfile; a
        // difference here is a fault of this build, not of the bytes.
        ReplayDifference::Stage { field } => Err(ExecError::Incompatible {
            stage: stage.clone(),
            message: format!("the re-executed stage record differs from the recording in `{field}`"),
        }),
        ReplayDifference::Stats { field, recorded, replayed } => Ok(Some(Divergence::Stats {
            stage: stage.clone(),
            field,
            expected: recorded,
            actual: replayed,
            envelope: Vec::new(),
            manifest,
        })),
        ReplayDifference::Output { output, recorded: e, replayed: a } => {
            let dataset = match (e, a) {
                // A recording imported from committed manifests may name a dataset whose
                // record it does not hold (a forged one): the digests are all there is.
                (Some(e), Some(a))
                    if e.output_type == OutputType::Dataset
                        && a.output_type == OutputType::Dataset
                        && store.contains(&e.digest) =>
                {
                    match (get_record(store, &e.digest)?, get_record(store, &a.digest)?) {
                        // A recording imported from committed manifests has no shards to compare.
                        (Record::Dataset(de), Record::Dataset(_))
                            if de.shards.iter().any(|s| !store.contains(&s.digest)) =>
                        {
                            None
                        }
                        (Record::Dataset(de), Record::Dataset(da)) => {
                            first_difference(store, &de, &da).map_err(|err| ExecError::Stage {
                                stage: stage.clone(),
                                kind: expected.stage_kind.clone(),
                                source: StageError::Dataset(err),
                            })?
                        }
                        _ => None,
                    }
                }
                _ => None,
            };
            let located = match (e, a, &dataset) {
                (Some(e), Some(a), None) => kind.locate_difference(store, &output, &e, &a),
                _ => None,
            };
            Ok(Some(Divergence::Output {
                stage: stage.clone(),
                output,
                expected: e,
                actual: a,
                dataset,
                located,
                envelope: Vec::new(),
                manifest,
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use prov_dataset::{Document, ShardWriter, write_dataset};
    use prov_manifest::{Determinism, OutputRef, OutputType, RecipeError};
    use serde_json::Value;

    use super::*;
    use crate::stage::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput};

    /// Writes two shards of three documents; from the second execution on, the language of
    /// row 1 of shard 1 changes: a stage that is not deterministic, on purpose.
    struct Drifting(AtomicU64);

    impl Stage for Drifting {
        fn kind(&self) -> &'static str {
            "drifting"
        }
        fn version(&self) -> u32 {
            1
        }
        fn summary(&self) -> &'static str {
            "test stage"
        }
        fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
            Ok(params.clone())
        }
        fn determinism(&self, _config: &Value) -> Determinism {
            Determinism::Portable
        }
        fn inputs(&self) -> InputSpec {
            InputSpec::Named(vec![])
        }
        fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
            vec![("dataset".into(), OutputType::Dataset)]
        }
        fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            let mut shards = Vec::new();
            for s in 0..2 {
                let mut w = ShardWriter::new(cx.store)?;
                for r in 0..3 {
                    let mut d = Document::new(format!("{s}-{r}"), format!("text {s} {r}"));
                    d.language = Some(if n > 0 && s == 1 && r == 1 { "fr" } else { "en" }.into());
                    w.push(d)?;
                }
                shards.push(w.finish()?);
            }
            let (digest, _) = write_dataset(cx.store, shards)?;
            let mut out = StageOutput::default();
            out.outputs.insert("dataset".into(), OutputRef { output_type: OutputType::Dataset, digest });
            Ok(out)
        }
    }

    /// A stage kind with a bug: it panics, as a libtorch call on unchecked input would.
    struct Panicking;

    impl Stage for Panicking {
        fn kind(&self) -> &'static str {
            "panicking"
        }
        fn version(&self) -> u32 {
            1
        }
        fn summary(&self) -> &'static str {
            "test stage"
        }
        fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
            Ok(params.clone())
        }
        fn determinism(&self, _config: &Value) -> Determinism {
            Determinism::Portable
        }
        fn inputs(&self) -> InputSpec {
            InputSpec::Named(vec![])
        }
        fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
            vec![("x".into(), OutputType::File)]
        }
        fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
            cx.store.put_bytes(ObjectKind::Blob, b"written before the bug")?;
            let ids = [1, 2, 3];
            let index = usize::try_from(cx.config["index"].as_u64().unwrap_or(0)).unwrap_or(usize::MAX);
            std::hint::black_box(ids[index]);
            Ok(StageOutput::default())
        }
    }

    fn setup(recipe: &str) -> Result<(tempfile::TempDir, Store, Registry, crate::Locked), RecipeError> {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::init(&dir.path().join(".prov")).expect("store");
        let mut registry = Registry::with_builtins();
        registry.register(Arc::new(Drifting(AtomicU64::new(0))));
        registry.register(Arc::new(Panicking));
        let path = dir.path().join("r.yaml");
        fs_err::write(&path, recipe).expect("recipe written");
        let locked = crate::lock_recipe(&registry, &path, dir.path())?;
        Ok((dir, store, registry, locked))
    }

    fn options<'a>(registry: &'a Registry, root: &'a std::path::Path) -> ExecOptions<'a> {
        ExecOptions {
            registry,
            threads: 2,
            envelope: crate::capture_envelope(2, &crate::TorchFacts::default()),
            project_root: root,
            lockfile_display: "test",
            clock: &|| 0,
            observer: &Silent,
            worker: std::path::Path::new("prov-worker"),
            dispatcher: None,
        }
    }

    #[test]
    fn replay_names_shard_row_and_column_of_a_dataset_divergence() {
        let (dir, store, registry, locked) =
            setup("schema: 1\nname: t\nseed: 1\nstages:\n  d:\n    kind: drifting\n").unwrap();
        let opts = options(&registry, dir.path());
        let first = run(&store, &locked.lockfile, &locked.bytes, &opts).unwrap();
        assert_eq!(first.stages[0].status, StageStatus::Executed);
        // A second run is served from the cache: the stage does not execute, so no drift.
        let second = run(&store, &locked.lockfile, &locked.bytes, &opts).unwrap();
        assert_eq!(second.stages[0].status, StageStatus::Cached);
        assert_eq!(second.run_manifest, first.run_manifest);

        let report = replay(&store, &locked.lockfile, &locked.bytes, &ReplayRange::default(), &opts).unwrap();
        // The replay record keeps the divergence, and names the stage record that shows it.
        let evidence =
            prov_manifest::get_typed::<prov_manifest::ReplayRecord>(&store, &report.replay_record.unwrap()).unwrap();
        assert_eq!((evidence.recording, evidence.lockfile), (first.run_manifest.unwrap(), first.run_id));
        assert!(evidence.stages.is_empty(), "{evidence:?}");
        let Some(ReplayDivergence::Output { stage, recorded, replayed, manifest, .. }) = evidence.divergence else {
            panic!("{evidence:?}")
        };
        assert_eq!(stage.as_str(), "d");
        assert_eq!(recorded, first.stages[0].record.outputs.get("dataset").copied());
        let divergent = prov_manifest::get_typed::<prov_manifest::StageRecord>(&store, &manifest).unwrap();
        assert_eq!(replayed, divergent.outputs.get("dataset").copied());
        assert_ne!(recorded, replayed);
        let Some(Divergence::Output { stage, output, dataset: Some(d), .. }) = report.divergence else {
            panic!("expected a dataset divergence, got {:?}", report.divergence);
        };
        assert_eq!((stage.as_str(), output.as_str()), ("d", "dataset"));
        assert_eq!((d.shard, d.row, d.global_row, d.column.as_deref()), (1, Some(1), Some(4), Some("language")));
        assert_eq!((d.expected.as_str(), d.actual.as_str()), ("\"en\"", "\"fr\""));
        let log = store.index().executions().unwrap();
        assert_eq!(log[0].mode, "replay");
        assert_eq!(log[0].status, "diverged");
    }

    /// A panic inside a stage is caught at the stage boundary: an internal error naming the
    /// stage, the execution logged as failed, the store intact and usable.
    /// A run record that no execution of the log vouches for is not a recorded run, one or
    /// several (a lost index, or records imported by a refused replay).
    #[test]
    fn without_the_log_no_run_record_is_the_recorded_run() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::init(&dir.path().join(".prov")).expect("store");
        let lockfile = store.put_bytes(prov_store::ObjectKind::Blob, b"lockfile").expect("put");
        put_record(&store, &Record::Run(RunRecord::new("one", lockfile, vec![]))).expect("put");
        assert!(recorded_run(&store, &lockfile).expect("no run").is_none());
    }

    #[test]
    fn a_panicking_stage_is_an_internal_error_and_leaves_the_store_valid() {
        let (dir, store, registry, locked) =
            setup("schema: 1\nname: t\nseed: 1\nstages:\n  bug:\n    kind: panicking\n    params: {index: 7}\n")
                .unwrap();
        let opts = options(&registry, dir.path());
        let e = run(&store, &locked.lockfile, &locked.bytes, &opts).unwrap_err();
        let ExecError::Internal { stage, kind, message } = &e else { panic!("{e:?}") };
        assert_eq!((stage.as_str(), kind.as_str()), ("bug", "panicking"));
        assert!(message.contains("index out of bounds"), "{message}");
        assert!(e.to_string().starts_with("internal error in stage `bug` (panicking)"), "{e}");
        let log = store.index().executions().unwrap();
        assert_eq!((log[0].mode.as_str(), log[0].status.as_str()), ("run", "failed"));
        assert!(crate::check_store(&store, 1).unwrap().is_clean());
        // The store and its index still work.
        let (_, _, _, good) = setup("schema: 1\nname: t\nseed: 1\nstages:\n  d:\n    kind: drifting\n").unwrap();
        run(&store, &good.lockfile, &good.bytes, &opts).unwrap();
    }

    #[test]
    fn stage_records_hold_no_clock_and_repeat_byte_for_byte() {
        let (dir, store, registry, locked) =
            setup("schema: 1\nname: t\nseed: 1\nsources:\n  f:\n    path: r.yaml\nstages: {}\n").unwrap();
        let mut opts = options(&registry, dir.path());
        let a = run(&store, &locked.lockfile, &locked.bytes, &opts).unwrap();
        opts.clock = &|| 1_000_000;
        let b = replay(&store, &locked.lockfile, &locked.bytes, &ReplayRange::default(), &opts).unwrap();
        assert!(b.divergence.is_none());
        assert_eq!(a.stages[0].manifest, b.stages[0].manifest, "a different clock gives the same stage record");
        // The replay record too: a replay leaves the same evidence whenever it runs.
        opts.clock = &|| 2_000_000;
        let c = replay(&store, &locked.lockfile, &locked.bytes, &ReplayRange::default(), &opts).unwrap();
        assert_eq!(b.replay_record, c.replay_record);
        let r = prov_manifest::get_typed::<prov_manifest::ReplayRecord>(&store, &b.replay_record.unwrap()).unwrap();
        assert_eq!(r.envelope_check, EnvelopeCheck::Full);
        assert_eq!(
            r.stages,
            vec![ReplayStage {
                name: "f".parse().unwrap(),
                status: ReplayStatus::Replayed,
                manifest: a.stages[0].manifest
            }]
        );
    }
}
