//! `prov status`.

use std::collections::BTreeSet;

use prov_exec::{LockState, LockfileStatus};
use prov_store::{Access, Digest, ExecutionRow, ObjectKind, Store};
use serde_json::{Value, json};

use crate::context::{CommandContext, registry};
use crate::error::CommandError;
use crate::ui::{Ui, count, format_bytes, format_time};

/// Show the store and whether each lockfile of the project is up to date and recorded
///
/// Prints the store's path, how many objects it holds and their size, and how many runs it
/// has logged. Then, for every `lockfiles/*.lock` of the project root: its recipe and run id,
/// whether the recipe file still exists, whether locking the recipe again now gives the same
/// bytes (`up to date`) or not (`stale`: the recipe or its sources changed since locking),
/// and whether this store holds a completed run of it, with the last execution's status.
/// Re-locking hashes every source again, so it takes as long as `prov lock`.
///
/// A stage run as tasks elsewhere (`--executor slurm`) that has not been recorded yet, because
/// its run is in progress or failed, is listed with its tasks: how many have a result, its
/// Slurm jobs and the tasks queued or running now (from `squeue`), and each task that ended
/// without a result, with the state and reason Slurm gave.
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {}

pub(crate) fn cmd_status(ui: &mut Ui, cx: &CommandContext, _args: &StatusArgs) -> Result<(), CommandError> {
    let (store, root) = cx.open_store(Access::ReadOnly, true)?;
    let executions = store.index().executions()?;
    store_summary(ui, &store, &executions)?;
    stage_tasks(ui, store.root())?;

    let paths = prov_exec::project_lockfiles(&root)?;
    if paths.is_empty() {
        ui.line("")?;
        ui.line(format!("no lockfiles in {}", root.join("lockfiles").display()))?;
        return Ok(());
    }
    for path in &paths {
        let st = prov_exec::lockfile_status(&registry(), &store, &root, path, &executions)?;
        render(ui, &st)?;
    }
    Ok(())
}

fn store_summary(ui: &mut Ui, store: &Store, executions: &[ExecutionRow]) -> Result<(), CommandError> {
    let objects = store.list_objects()?;
    let mut bytes = 0u64;
    for d in &objects {
        bytes += fs_err::metadata(store.object_path(d))?.len();
    }
    let mut kinds: Vec<(&str, usize)> = Vec::new();
    for kind in [ObjectKind::Manifest, ObjectKind::Shard, ObjectKind::Blob] {
        kinds.push((kind.as_str(), store.index().objects_of_kind(kind.as_str())?.len()));
    }
    let indexed: usize = kinds.iter().map(|(_, n)| n).sum();
    let runs: BTreeSet<Digest> = executions.iter().map(|e| e.run_id).collect();
    let completed: BTreeSet<Digest> =
        executions.iter().filter(|e| e.mode == "run" && e.status == "ok").map(|e| e.run_id).collect();
    ui.json(
        "status",
        json!({
            "store": store.root().display().to_string(),
            "objects": objects.len(),
            "bytes": bytes,
            "kinds": kinds.iter().map(|(k, n)| ((*k).to_owned(), json!(n))).collect::<serde_json::Map<_, _>>(),
            "unindexed": objects.len().saturating_sub(indexed),
            "runs": runs.len(),
            "completed_runs": completed.len(),
            "executions": executions.len(),
        }),
    )?;
    ui.line(format!("store {}", store.root().display()))?;
    let mut by_kind: Vec<String> = kinds.iter().map(|(k, n)| count(*n, k)).collect();
    if objects.len() > indexed {
        by_kind.push(format!("{} not indexed", objects.len() - indexed));
    }
    ui.line(format!("  objects  {} ({}): {}", objects.len(), format_bytes(bytes), by_kind.join(", ")))?;
    ui.line(format!(
        "  runs     {}, {} with a completed run, {} logged",
        count(runs.len(), "run id"),
        completed.len(),
        count(executions.len(), "execution")
    ))?;
    Ok(())
}

fn render(ui: &mut Ui, st: &LockfileStatus) -> Result<(), CommandError> {
    let last_json = st.last.as_ref().map(|e| {
        json!({
            "mode": e.mode,
            "status": e.status,
            "started": format_time(e.started_ms),
            "started_ms": e.started_ms,
            "detail": e.detail,
        })
    });
    let (stale_detail, error) = match &st.state {
        LockState::Stale(what) => (Some(what.clone()), None),
        LockState::Error(e) | LockState::Invalid(e) => (None, Some(e.clone())),
        _ => (None, None),
    };
    ui.json(
        "lockfile",
        json!({
            "path": st.path,
            "recipe": st.lockfile.as_ref().map(|l| l.recipe.name.as_str()),
            "recipe_path": st.lockfile.as_ref().map(|l| l.recipe.path.as_str()),
            "run_id": st.run_id.to_string(),
            "recipe_exists": st.recipe_exists,
            "lock": st.state.name(),
            "stale": stale_detail,
            "error": error,
            "recorded": st.recorded.is_some(),
            "run_manifest": st.recorded.map(|d| d.to_string()),
            "last_execution": last_json.unwrap_or(Value::Null),
        }),
    )?;

    ui.line("")?;
    let recipe_name = st.lockfile.as_ref().map_or("?", |l| l.recipe.name.as_str());
    ui.line(format!("{} ({recipe_name}, run {})", st.path, st.run_id.short()))?;
    if let Some(l) = &st.lockfile {
        let exists = if st.recipe_exists { "" } else { " (missing)" };
        ui.line(format!("  recipe    {}{exists}", l.recipe.path))?;
    }
    ui.line(format!("  lock      {}", st.state.describe()))?;
    let recorded = match (&st.recorded, &st.last) {
        (Some(m), _) => format!("yes, run manifest {}", m.short()),
        (None, Some(_)) => "no completed run".to_owned(),
        (None, None) => "never run in this store".to_owned(),
    };
    ui.line(format!("  recorded  {recorded}"))?;
    if let Some(e) = &st.last {
        ui.line(format!("  last      {} {} ({})", e.mode, e.status, format_time(e.started_ms)))?;
    }
    let hint = match (&st.state, &st.recorded, &st.lockfile) {
        (LockState::Stale(_), _, Some(l)) => {
            let default = format!("lockfiles/{}.lock", l.recipe.name);
            let out = if st.path == default { String::new() } else { format!(" --out {}", st.path) };
            Some(format!("run `prov lock {}{out}` in the project root to update it", l.recipe.path))
        }
        (LockState::UpToDate, None, _) => Some(format!("run `prov run {}` in the project root to record it", st.path)),
        _ => None,
    };
    if let Some(h) = hint {
        ui.line(format!("  ({h})"))?;
    }
    Ok(())
}

/// The stages whose tasks are in flight or were left by a failed run.
fn stage_tasks(ui: &mut Ui, store_root: &std::path::Path) -> Result<(), CommandError> {
    let stages = prov_slurm::stage_jobs(store_root).map_err(|e| crate::executor::slurm_error(&e))?;
    for st in stages {
        let stage = st.stage.clone().unwrap_or_else(|| "?".to_owned());
        let running = st.queued.values().filter(|q| q.state == "RUNNING").count();
        let pending = st.queued.values().filter(|q| q.state == "PENDING").count();
        let failures: Vec<Value> = st
            .failures
            .iter()
            .map(|f| json!({ "task": f.task, "job": f.job, "state": f.state, "reason": f.reason, "node": f.node, "retried": f.retried }))
            .collect();
        ui.json(
            "tasks",
            json!({
                "stage": stage,
                "key": st.dir.key().to_string(),
                "dir": st.dir.path().display().to_string(),
                "tasks": st.tasks,
                "done": st.done,
                "failed": st.failed,
                "jobs": st.submissions.iter().map(|s| s.job.clone()).collect::<Vec<_>>(),
                "queue_known": st.queue_known,
                "running": running,
                "pending": pending,
                "lost": failures,
            }),
        )?;
        ui.line("")?;
        ui.line(format!("stage `{stage}` as tasks (key {})", st.dir.key().short()))?;
        ui.line(format!("  tasks     {} of {} done, {} failed", st.done, st.tasks, st.failed))?;
        if !st.submissions.is_empty() {
            let jobs: Vec<String> = st.submissions.iter().map(|s| s.job.clone()).collect();
            ui.line(format!("  jobs      {}", jobs.join(", ")))?;
        }
        if st.queue_known {
            ui.line(format!("  queue     {running} running, {pending} pending"))?;
        } else {
            ui.line("  queue     unknown (squeue did not answer)")?;
        }
        for f in &st.failures {
            let ended = f.state.as_deref().unwrap_or("state unknown");
            let reason = f.reason.as_deref().map(|r| format!(", {r}")).unwrap_or_default();
            let node = f.node.as_deref().map(|n| format!(" on {n}")).unwrap_or_default();
            let then = if f.retried { "submitted again" } else { "not submitted again" };
            ui.line(format!("  lost      {} (job {}, {ended}{reason}{node}): {then}", f.task, f.job))?;
        }
        ui.line(format!("  output    {}", st.dir.logs().display()))?;
    }
    Ok(())
}
