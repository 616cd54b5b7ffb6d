//! Running one stage as tasks through a [`Dispatcher`]: the coordinator's side of
//! [`crate::tasks`].

use prov_store::Digest;

use crate::boundary::adopt_closure;
use crate::error::ExecError;
use crate::stage::{MapResults, Stage, StageContext, StageError, StageOutput};
use crate::tasks::{Dispatcher, Task, TaskCounts, TaskDir, TaskResult, TaskSpec};
use crate::worker::{RemoteStageError, StageRequest};
use serde_json::Value;

/// A stage step that may panic, run so that a panic becomes [`ExecError::Internal`].
pub(crate) type Guard<'a> = &'a dyn Fn(&dyn Fn() -> Result<StageOutput, StageError>) -> Result<StageOutput, ExecError>;

/// Runs `kind` through `dispatcher`: writes the spec, dispatches the tasks that have no result
/// yet, reads every result in task order, runs the reduce step here (through `guarded`, which
/// turns a panic into an internal error), and verifies and indexes every object reachable from
/// the outputs before returning them.
pub(crate) fn run_dispatched(
    dispatcher: &dyn Dispatcher,
    name: &prov_manifest::Name,
    kind: &dyn Stage,
    cx: &StageContext<'_>,
    guarded: Guard<'_>,
) -> Result<(StageOutput, TaskCounts), ExecError> {
    let stage_error = |source| ExecError::Stage { stage: name.clone(), kind: kind.kind().to_owned(), source };
    let map_tasks = kind.map_tasks(cx).map_err(stage_error)?;
    let spec = TaskSpec { stage: StageRequest::of(cx, kind), map_tasks };
    let dir = TaskDir::of(cx.store.root(), cx.key);
    dir.write_spec(&spec)?;
    // A task whose result is there is not run again; one that failed, or left a file that
    // cannot be read, is (what it met may be gone: a node's envelope, a full disk).
    let mut pending = Vec::new();
    for task in spec.tasks() {
        match dir.read_result(task) {
            Ok(Some(TaskResult::Map { .. } | TaskResult::Whole { .. })) => {}
            Ok(None) => pending.push(task),
            Ok(Some(TaskResult::Failed { .. })) | Err(_) => {
                dir.remove_result(task)?;
                pending.push(task);
            }
        }
    }
    let counts = TaskCounts { total: spec.tasks().len(), reused: spec.tasks().len() - pending.len() };
    if !pending.is_empty() {
        dispatcher.dispatch(&dir, cx.name, &pending).map_err(|e| ExecError::Dispatch {
            stage: name.clone(),
            message: e.message,
            hint: e.hint,
        })?;
    }
    // Every task's state first, so that a failed task is reported before any reduce work;
    // the map results themselves are read again, one at a time, as the reduce step folds them.
    let mut whole = None;
    for task in spec.tasks() {
        let lost = || ExecError::TaskLost { stage: name.clone(), task: task.to_string(), logs: dir.logs() };
        match dir.read_result(task) {
            Ok(Some(TaskResult::Map { .. })) => {}
            Ok(Some(TaskResult::Whole { output, .. })) => whole = Some(output),
            Ok(Some(TaskResult::Failed { error: RemoteStageError::Panic { message }, .. })) => {
                return Err(ExecError::Internal {
                    stage: name.clone(),
                    kind: kind.kind().to_owned(),
                    message: format!("{task}: {message}"),
                });
            }
            Ok(Some(TaskResult::Failed { error, .. })) => return Err(stage_error(error.into_stage_error())),
            Ok(None) => return Err(lost()),
            Err(e) => {
                return Err(ExecError::Dispatch { stage: name.clone(), message: e.to_string(), hint: None });
            }
        }
    }
    let out = match (map_tasks, whole) {
        (Some(tasks), _) => guarded(&|| kind.reduce(cx, MapResults::new(tasks, map_results(&dir, tasks))))
            .inspect_err(|e| {
                match e {
                    // A file one task left that is not what it wrote: that task runs again.
                    ExecError::Stage { source: StageError::WorkFile { task, .. }, .. } => {
                        let _ = dir.remove_result(Task::Map(*task));
                    }
                    // A reduce step that read damaged bytes: the results naming them are dropped.
                    e if e.is_integrity_failure() => {
                        let _ = dir.remove();
                    }
                    // A result the reduce step cannot read (another build's, or edited) is dropped,
                    // so that the next run runs its task again.
                    ExecError::Stage { source: StageError::MapResult { task, .. }, .. } => {
                        let _ = dir.remove_result(Task::Map(*task));
                    }
                    _ => {}
                }
            })?,
        (None, Some(w)) => StageOutput { outputs: w.outputs, stats: w.stats },
        (None, None) => {
            return Err(ExecError::TaskLost { stage: name.clone(), task: Task::Whole.to_string(), logs: dir.logs() });
        }
    };
    // What the tasks say they wrote is checked, not trusted, before a stage record names it;
    // results that name damaged objects are dropped so that the next run computes them again.
    let roots: Vec<Digest> = out.outputs.values().map(|o| o.digest).collect();
    if let Err(e) = adopt_closure(cx.store, cx.pool, &roots) {
        dir.remove()?;
        return Err(stage_error(StageError::UnverifiedOutput(e.to_string())));
    }
    Ok((out, counts))
}

/// The map results in `dir`, read in task order as they are asked for. A result that is gone
/// or is not a map result (changed since the check above) is an error of its task.
fn map_results(dir: &TaskDir, tasks: usize) -> impl Iterator<Item = Result<Value, StageError>> + '_ {
    (0..tasks).map(move |i| match dir.read_result(Task::Map(i)) {
        Ok(Some(TaskResult::Map { value, .. })) => Ok(value),
        Ok(_) => {
            Err(StageError::MapResult { task: i, message: "the task's result is gone or is not a map result".into() })
        }
        Err(e) => Err(StageError::MapResult { task: i, message: e.to_string() }),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::{Arc, Mutex};

    use prov_dataset::{Document, ShardWriter, write_dataset};
    use prov_manifest::{Determinism, OutputRef, OutputType, ShardRef};
    use prov_store::Store;
    use serde_json::{Value, json};

    use super::*;
    use crate::run::{ExecOptions, Silent, run};
    use crate::stage::{ConfigError, InputSpec, MapResultText, Registry, map_result_text};
    use crate::tasks::run_task;

    /// A map step of a test stage.
    type MapFn = fn(&StageContext<'_>, &[usize]) -> Result<Vec<MapResultText>, StageError>;
    /// A reduce step of a test stage.
    type ReduceFn = fn(&StageContext<'_>, MapResults<'_>) -> Result<StageOutput, StageError>;

    /// A stage of kind `kind` with `tasks` map tasks, its steps given, and one dataset output.
    struct TestStage {
        kind: &'static str,
        tasks: usize,
        map: MapFn,
        reduce: ReduceFn,
    }

    impl Stage for TestStage {
        fn kind(&self) -> &'static str {
            self.kind
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
        fn map_tasks(&self, _cx: &StageContext<'_>) -> Result<Option<usize>, StageError> {
            Ok(Some(self.tasks))
        }
        fn map(&self, cx: &StageContext<'_>, tasks: &[usize]) -> Result<Vec<MapResultText>, StageError> {
            (self.map)(cx, tasks)
        }
        fn reduce(&self, cx: &StageContext<'_>, results: MapResults<'_>) -> Result<StageOutput, StageError> {
            (self.reduce)(cx, results)
        }
    }

    /// The stage's one output, `dataset`, and its statistics.
    fn output(digest: prov_store::Digest, stats: &[(&str, Value)]) -> StageOutput {
        let mut out = StageOutput::default();
        out.outputs.insert("dataset".into(), OutputRef { output_type: OutputType::Dataset, digest });
        out.stats.extend(stats.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
        out
    }

    /// Five map tasks, each writing a shard of two documents; the reduce step writes the
    /// dataset over them, in task order.
    fn sharded() -> TestStage {
        TestStage {
            kind: "sharded",
            tasks: 5,
            map: |cx, tasks| {
                tasks
                    .iter()
                    .map(|&t| {
                        let mut w = ShardWriter::new(cx.store)?;
                        for r in 0..2 {
                            w.push(Document::new(format!("{t}-{r}"), format!("text of task {t}, row {r}")))?;
                        }
                        map_result_text(t, &w.finish()?)
                    })
                    .collect()
            },
            reduce: |cx, results| {
                let shards: Vec<ShardRef> = results
                    .map(|r| {
                        let (task, v) = r?;
                        serde_json::from_value(v).map_err(|e| StageError::MapResult { task, message: e.to_string() })
                    })
                    .collect::<Result<_, _>>()?;
                Ok(output(write_dataset(cx.store, shards)?.0, &[("tasks", json!(5))]))
            },
        }
    }

    /// Three map tasks, each leaving a work file for the reduce step, which checks every file
    /// and counts their bytes.
    fn noted() -> TestStage {
        TestStage {
            kind: "noted",
            tasks: 3,
            map: |cx, tasks| {
                use std::io::Write as _;
                let work = cx.work_dir()?;
                tasks
                    .iter()
                    .map(|&t| {
                        let mut f = crate::WorkFile::create(&work, &format!("note-{t}"))?;
                        f.write_all("what task left ".repeat(t + 1).as_bytes())?;
                        map_result_text(t, &f.finish()?)
                    })
                    .collect()
            },
            reduce: |cx, results| {
                let work = cx.work_dir()?;
                let mut bytes = 0;
                for r in results {
                    let (task, v) = r?;
                    let note: crate::WorkFileRef = serde_json::from_value(v)
                        .map_err(|e| StageError::MapResult { task, message: e.to_string() })?;
                    bytes += fs_err::read(note.check_named(&work, task, &format!("note-{task}"))?)?.len();
                }
                Ok(output(write_dataset(cx.store, Vec::new())?.0, &[("bytes", json!(bytes))]))
            },
        }
    }

    type Tamper = Box<dyn Fn(&Store, &TaskDir, Task) + Sync>;

    /// Edits the stage's spec before its tasks run (a hand on the shared file system).
    type EditSpec = Box<dyn Fn(&mut TaskSpec) + Sync>;

    /// Runs tasks in this process, as a node would (`run_task`, the store opened detached),
    /// except those in `skip`; then lets the test tamper with what a task left.
    struct InProcess {
        registry: Registry,
        skip: BTreeSet<Task>,
        dispatched: Mutex<Vec<Task>>,
        tamper: Tamper,
        edit_spec: Option<EditSpec>,
    }

    impl Dispatcher for InProcess {
        fn dispatch(&self, dir: &TaskDir, _stage: &str, tasks: &[Task]) -> Result<(), crate::DispatchError> {
            if let Some(edit) = &self.edit_spec {
                let mut spec = dir.read_spec().unwrap();
                edit(&mut spec);
                fs_err::write(dir.spec_path(), serde_json::to_vec(&spec).unwrap()).unwrap();
            }
            let spec = dir.read_spec().map_err(|e| crate::DispatchError { message: e.to_string(), hint: None })?;
            let store = Store::open(&spec.stage.store, prov_store::Access::Detached, true).unwrap();
            for &task in tasks {
                self.dispatched.lock().unwrap().push(task);
                if self.skip.contains(&task) {
                    continue;
                }
                let result = run_task(&self.registry, &spec, task, &spec.stage.envelope, Path::new(""));
                dir.write_result(task, &result).unwrap();
                (self.tamper)(&store, dir, task);
            }
            Ok(())
        }
    }

    use std::path::Path;

    fn setup() -> (tempfile::TempDir, Store, Registry, crate::Locked) {
        setup_with(sharded(), "")
    }

    /// A project whose recipe has one stage, `s`, of `stage`'s kind, with `params` (a line of
    /// YAML, or nothing).
    fn setup_with(stage: TestStage, params: &str) -> (tempfile::TempDir, Store, Registry, crate::Locked) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let mut registry = Registry::with_builtins();
        let recipe = format!("schema: 1\nname: t\nseed: 1\nstages:\n  s:\n    kind: {}\n{params}", stage.kind);
        registry.register(Arc::new(stage));
        let path = dir.path().join("r.yaml");
        fs_err::write(&path, recipe).unwrap();
        let locked = crate::lock_recipe(&registry, &path, dir.path()).unwrap();
        (dir, store, registry, locked)
    }

    fn in_process(registry: &Registry, skip: &[Task], tamper: Tamper) -> InProcess {
        InProcess {
            registry: registry.clone(),
            skip: skip.iter().copied().collect(),
            dispatched: Mutex::new(Vec::new()),
            tamper,
            edit_spec: None,
        }
    }

    fn options<'a>(registry: &'a Registry, root: &'a Path, dispatcher: Option<&'a dyn Dispatcher>) -> ExecOptions<'a> {
        ExecOptions {
            registry,
            threads: 2,
            envelope: crate::capture_envelope(2, &crate::TorchFacts::default()),
            project_root: root,
            lockfile_display: "test",
            clock: &|| 0,
            observer: &Silent,
            worker: Path::new("prov-worker"),
            dispatcher,
        }
    }

    #[test]
    fn a_stage_run_as_tasks_records_what_a_local_run_records() {
        let (dir, store, registry, locked) = setup();
        let local = run(&store, &locked.lockfile, &locked.bytes, &options(&registry, dir.path(), None)).unwrap();
        let (dir2, store2, _, _) = setup();
        let tasks = in_process(&registry, &[], Box::new(|_, _, _| {}));
        let remote =
            run(&store2, &locked.lockfile, &locked.bytes, &options(&registry, dir2.path(), Some(&tasks))).unwrap();
        assert_eq!(remote.stages[0].record.outputs, local.stages[0].record.outputs);
        assert_eq!(remote.stages[0].record.stats, local.stages[0].record.stats);
        assert_eq!(remote.stages[0].tasks, Some(TaskCounts { total: 5, reused: 0 }));
        assert_eq!(local.stages[0].tasks, None);
        // The tasks' objects are in the index now (the tasks never opened it), and their
        // directory is gone.
        let dataset = remote.stages[0].record.outputs["dataset"].digest;
        assert_eq!(store2.index().object_kind(&dataset).unwrap().as_deref(), Some("manifest"));
        assert!(!TaskDir::of(store2.root(), remote.stages[0].record.key).path().exists());
        assert!(crate::check_store(&store2, 1).unwrap().is_clean());
    }

    /// A stage whose configuration names a GPU is refused under a dispatcher before anything is
    /// dispatched: its envelope's GPU facts would be the coordinator's, not the node's.
    #[test]
    fn a_cuda_stage_is_refused_as_tasks_before_anything_runs() {
        let (dir, store, registry, locked) = setup_with(sharded(), "    params: {device: cuda:0}\n");
        let tasks = in_process(&registry, &[], Box::new(|_, _, _| {}));
        let e =
            run(&store, &locked.lockfile, &locked.bytes, &options(&registry, dir.path(), Some(&tasks))).unwrap_err();
        assert!(
            matches!(&e, ExecError::Stage { source: StageError::Device { device, message }, .. }
                if device == "cuda:0" && message.contains("--executor slurm")),
            "{e:?}"
        );
        assert!(tasks.dispatched.lock().unwrap().is_empty());
    }

    /// A task's shard rewritten after the task reported it (a node writing other bytes under a
    /// digest): the coordinator hashes it before recording the stage, fails as an integrity
    /// failure, and drops the results so that the next run computes them again.
    #[test]
    fn bytes_a_task_left_that_are_not_their_digest_fail_the_stage_as_integrity() {
        let (dir, store, registry, locked) = setup();
        let forge: Tamper = Box::new(|store, dir, task| {
            if task == Task::Map(2) {
                let Some(TaskResult::Map { value, .. }) = dir.read_result(task).unwrap() else { panic!() };
                let shard: ShardRef = serde_json::from_value(value).unwrap();
                let path = store.object_path(&shard.digest);
                let mut perms = fs_err::metadata(&path).unwrap().permissions();
                #[allow(clippy::permissions_set_readonly_false)]
                perms.set_readonly(false);
                fs_err::set_permissions(&path, perms).unwrap();
                let mut bytes = fs_err::read(&path).unwrap();
                let at = bytes.len() / 2;
                bytes[at] ^= 1;
                fs_err::write(&path, bytes).unwrap();
            }
        });
        let tasks = in_process(&registry, &[], forge);
        let e =
            run(&store, &locked.lockfile, &locked.bytes, &options(&registry, dir.path(), Some(&tasks))).unwrap_err();
        assert!(e.is_integrity_failure(), "{e}");
        assert!(e.to_string().contains("stage `s`"), "{e}");
        let key = crate::tasks::TaskDir::all(store.root()).unwrap();
        assert!(key.is_empty(), "the results naming the damaged shard are dropped");
        // The next run computes every task again and records the stage.
        let honest = in_process(&registry, &[], Box::new(|_, _, _| {}));
        let report =
            run(&store, &locked.lockfile, &locked.bytes, &options(&registry, dir.path(), Some(&honest))).unwrap();
        assert_eq!(report.stages[0].tasks, Some(TaskCounts { total: 5, reused: 0 }));
    }

    /// Tasks that left no result fail the run naming the first of them; the next run
    /// dispatches only those, and a result left for another key, or a failure, is not used.
    #[test]
    fn a_stage_resumes_with_the_tasks_that_have_no_usable_result() {
        let (dir, store, registry, locked) = setup();
        let lossy = in_process(&registry, &[Task::Map(3), Task::Map(4)], Box::new(|_, _, _| {}));
        let e =
            run(&store, &locked.lockfile, &locked.bytes, &options(&registry, dir.path(), Some(&lossy))).unwrap_err();
        let ExecError::TaskLost { stage, task, .. } = &e else { panic!("{e}") };
        assert_eq!((stage.as_str(), task.as_str()), ("s", "map task 3"));
        // Task 1's result replaced by another stage's; task 2's by a failure.
        let in_flight = TaskDir::all(store.root()).unwrap();
        let tasks_dir = &in_flight[0];
        let other_key = TaskResult::Map { key: prov_store::Digest::of(b"another stage"), task: 1, value: Value::Null };
        fs_err::write(tasks_dir.result_path(Task::Map(1)), serde_json::to_vec(&other_key).unwrap()).unwrap();
        let failed = TaskResult::Failed {
            key: tasks_dir.key(),
            error: crate::worker::RemoteStageError::Other { message: "disk full".into(), integrity: false },
        };
        tasks_dir.write_result(Task::Map(2), &failed).unwrap();

        let honest = in_process(&registry, &[], Box::new(|_, _, _| {}));
        let report =
            run(&store, &locked.lockfile, &locked.bytes, &options(&registry, dir.path(), Some(&honest))).unwrap();
        assert_eq!(*honest.dispatched.lock().unwrap(), [Task::Map(1), Task::Map(2), Task::Map(3), Task::Map(4)]);
        assert_eq!(report.stages[0].tasks, Some(TaskCounts { total: 5, reused: 1 }));
        let (dir2, store2, _, _) = setup();
        let local = run(&store2, &locked.lockfile, &locked.bytes, &options(&registry, dir2.path(), None)).unwrap();
        assert_eq!(report.stages[0].record.outputs, local.stages[0].record.outputs);
    }

    /// A spec edited on the shared file system (another configuration under the same key, or
    /// another input) is refused by its tasks as an integrity failure: no task computes outputs
    /// that the coordinator would record under a key they are not of.
    #[test]
    fn a_task_refuses_a_spec_that_does_not_hash_to_its_key() {
        let edits: [EditSpec; 2] = [
            Box::new(|spec| spec.stage.config = json!({ "rows": 3 })),
            Box::new(|spec| {
                spec.stage.inputs.insert("docs".into(), (OutputType::Dataset, prov_store::Digest::of(b"other")));
            }),
        ];
        for edit in edits {
            let (dir, store, registry, locked) = setup();
            let mut tasks = in_process(&registry, &[], Box::new(|_, _, _| {}));
            tasks.edit_spec = Some(edit);
            let e = run(&store, &locked.lockfile, &locked.bytes, &options(&registry, dir.path(), Some(&tasks)))
                .unwrap_err();
            assert!(e.is_integrity_failure(), "{e}");
            assert!(e.to_string().contains("does not hash to the stage key it names"), "{e}");
        }
    }

    /// What the coordinator cannot check: a result that names whole, well-formed objects of
    /// the stage but not the task's work (task 3's shard given as task 4's) is recorded; the
    /// bytes are intact, only a recomputation can tell. A replay is that recomputation: it
    /// diverges at the stage, as the book says (Running on Slurm, "What the coordinator
    /// checks").
    #[test]
    fn a_consistent_forged_result_is_recorded_and_a_replay_finds_it() {
        let (dir, store, registry, locked) = setup();
        let swap: Tamper = Box::new(|_, dir, task| {
            if task == Task::Map(4) {
                let Some(TaskResult::Map { key, value, .. }) = dir.read_result(Task::Map(3)).unwrap() else { panic!() };
                dir.write_result(task, &TaskResult::Map { key, task: 4, value }).unwrap();
            }
        });
        let tasks = in_process(&registry, &[], swap);
        let opts = options(&registry, dir.path(), Some(&tasks));
        let forged = run(&store, &locked.lockfile, &locked.bytes, &opts).unwrap();
        let report = crate::run::replay(
            &store,
            &locked.lockfile,
            &locked.bytes,
            &crate::run::ReplayRange::default(),
            &options(&registry, dir.path(), None),
        )
        .unwrap();
        let Some(crate::run::Divergence::Output { stage, dataset: Some(d), .. }) = report.divergence else {
            panic!("the replay does not see the forgery: {:?}", report.divergence)
        };
        assert_eq!((stage.as_str(), d.shard), ("s", 4), "{forged:?}");
    }

    /// A work file changed after its task finished (a node, or a hand on the shared file
    /// system, with the task's result left as it was): the reduce step refuses it as an
    /// integrity failure, only that task's result is dropped, and the next run runs that one
    /// task again and records what a local run records. A local run leaves no work directory.
    #[test]
    fn a_work_file_that_is_not_what_its_task_wrote_reruns_that_task() {
        let (dir, store, registry, locked) = setup_with(noted(), "");
        let forge: Tamper = Box::new(|_, dir, task| {
            if task == Task::Map(1) {
                let note = dir.path().join("work/note-1");
                let mut bytes = fs_err::read(&note).unwrap();
                bytes[0] = b'W';
                fs_err::write(&note, bytes).unwrap();
            }
        });
        let tasks = in_process(&registry, &[], forge);
        let e =
            run(&store, &locked.lockfile, &locked.bytes, &options(&registry, dir.path(), Some(&tasks))).unwrap_err();
        assert!(e.is_integrity_failure(), "{e}");
        assert!(e.to_string().contains("work file `note-1` of map task 1"), "{e}");
        let in_flight = TaskDir::all(store.root()).unwrap();
        let results: Vec<bool> = (0..3).map(|t| in_flight[0].result_path(Task::Map(t)).exists()).collect();
        assert_eq!(results, [true, false, true], "only the task whose file changed is dropped");

        let honest = in_process(&registry, &[], Box::new(|_, _, _| {}));
        let report =
            run(&store, &locked.lockfile, &locked.bytes, &options(&registry, dir.path(), Some(&honest))).unwrap();
        assert_eq!(*honest.dispatched.lock().unwrap(), [Task::Map(1)]);
        assert_eq!(report.stages[0].tasks, Some(TaskCounts { total: 3, reused: 2 }));
        assert!(TaskDir::all(store.root()).unwrap().is_empty(), "the task directory, work files and all, is gone");

        let local_dir = tempfile::tempdir().unwrap();
        let local_store = Store::init(&local_dir.path().join(".prov")).unwrap();
        let local =
            run(&local_store, &locked.lockfile, &locked.bytes, &options(&registry, local_dir.path(), None)).unwrap();
        assert_eq!(local.stages[0].record.stats, report.stages[0].record.stats);
        assert_eq!(local.stages[0].record.stats["bytes"], json!(15 * 6));
        let tmp: Vec<_> = fs_err::read_dir(local_store.root().join("tmp")).unwrap().collect();
        assert!(tmp.is_empty(), "a local run's work directory is removed: {tmp:?}");
    }

    /// `prov gc` drops the tasks of a stage that was not recorded (their results name objects
    /// no record references, which it collects); the next run runs every task again.
    #[test]
    fn gc_drops_the_tasks_of_an_unrecorded_stage() {
        let (dir, store, registry, locked) = setup();
        let lossy = in_process(&registry, &[Task::Map(1)], Box::new(|_, _, _| {}));
        run(&store, &locked.lockfile, &locked.bytes, &options(&registry, dir.path(), Some(&lossy))).unwrap_err();
        assert_eq!(crate::gc(&store, true).unwrap().tasks_cleaned, 1, "a dry run counts them");
        assert_eq!(TaskDir::all(store.root()).unwrap().len(), 1, "and leaves them");
        let report = crate::gc(&store, false).unwrap();
        assert_eq!(report.tasks_cleaned, 1);
        assert!(TaskDir::all(store.root()).unwrap().is_empty());
        let honest = in_process(&registry, &[], Box::new(|_, _, _| {}));
        let rerun =
            run(&store, &locked.lockfile, &locked.bytes, &options(&registry, dir.path(), Some(&honest))).unwrap();
        assert_eq!(rerun.stages[0].tasks, Some(TaskCounts { total: 5, reused: 0 }));
    }
}
