//! `prov status`.

use std::collections::BTreeSet;
use std::path::Path;

use prov_manifest::{Lockfile, Record};
use prov_store::{Access, Digest, ExecutionRow, ObjectKind, Store};
use serde_json::{Value, json};

use crate::commands::diff::diff_lockfiles;
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
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {}

/// Whether a lockfile still matches its recipe.
enum LockState {
    UpToDate,
    /// What changed, in a few words.
    Stale(String),
    RecipeMissing,
    /// Locking failed.
    Error(String),
    /// The file is not a lockfile.
    Invalid(String),
}

impl LockState {
    fn name(&self) -> &'static str {
        match self {
            Self::UpToDate => "up_to_date",
            Self::Stale(_) => "stale",
            Self::RecipeMissing => "recipe_missing",
            Self::Error(_) => "error",
            Self::Invalid(_) => "invalid",
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::UpToDate => "up to date".to_owned(),
            Self::Stale(what) if what.is_empty() => "stale: recipe or sources changed since locking".to_owned(),
            Self::Stale(what) => format!("stale: recipe or sources changed since locking ({what})"),
            Self::RecipeMissing => "recipe missing: cannot re-lock".to_owned(),
            Self::Error(e) => format!("cannot re-lock: {e}"),
            Self::Invalid(e) => format!("invalid: {e}"),
        }
    }
}

/// The status of one lockfile.
struct LockfileStatus {
    path: String,
    run_id: Digest,
    lockfile: Option<Lockfile>,
    recipe_exists: bool,
    state: LockState,
    recorded: Option<Digest>,
    last: Option<ExecutionRow>,
}

pub(crate) fn cmd_status(ui: &mut Ui, cx: &CommandContext, _args: &StatusArgs) -> Result<(), CommandError> {
    let (store, root) = cx.open_store(Access::ReadOnly, true)?;
    let executions = store.index().executions()?;
    store_summary(ui, &store, &executions)?;

    let dir = root.join("lockfiles");
    let mut paths: Vec<_> = match fs_err::read_dir(&dir) {
        Ok(entries) => entries
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "lock") && p.is_file())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    paths.sort();
    if paths.is_empty() {
        ui.line("")?;
        ui.line(format!("no lockfiles in {}", dir.display()))?;
        return Ok(());
    }
    for path in &paths {
        let st = lockfile_status(&store, &root, path, &executions)?;
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

fn lockfile_status(
    store: &Store,
    root: &Path,
    path: &Path,
    executions: &[ExecutionRow],
) -> Result<LockfileStatus, CommandError> {
    let bytes = fs_err::read(path)?;
    let run_id = prov_manifest::run_id(&bytes);
    let shown = path.strip_prefix(root).unwrap_or(path).display().to_string();
    let last = executions.iter().find(|e| e.run_id == run_id).cloned();
    let recorded = prov_exec::recorded_run(store, &run_id)?.map(|(m, _)| m);
    let lockfile = match Record::from_bytes(&bytes) {
        Ok(Record::Lockfile(l)) => l,
        invalid => {
            let why = match invalid {
                Ok(other) => format!("a {} record, not a lockfile", other.kind_name()),
                Err(e) => e.to_string(),
            };
            let state = LockState::Invalid(why);
            return Ok(LockfileStatus {
                path: shown,
                run_id,
                lockfile: None,
                recipe_exists: false,
                state,
                recorded,
                last,
            });
        }
    };
    // A lockfile names its recipe; one written elsewhere may name a file outside the project,
    // which is not read (its lines would end up in error messages).
    let recipe = match lockfile.recipe.path.parse::<prov_manifest::RelPath>() {
        Ok(rel) => match prov_exec::confine_source(root, &rel) {
            Ok((path, false)) => Ok(Some(path)),
            Ok((_, true)) | Err(prov_exec::SourcePathError::Io { .. }) => Ok(None),
            Err(e) => Err(e.to_string().replacen("source", "recipe", 1)),
        },
        Err(e) => Err(format!("recipe path: {e}")),
    };
    let recipe_exists = matches!(recipe, Ok(Some(_)));
    let state = match recipe {
        Ok(Some(recipe)) => match prov_exec::lock_recipe(&registry(), &recipe, root) {
            Ok(fresh) if fresh.bytes == bytes => LockState::UpToDate,
            Ok(fresh) => LockState::Stale(diff_lockfiles(&lockfile, &fresh.lockfile).summary()),
            Err(e) => LockState::Error(e.message),
        },
        Ok(None) => LockState::RecipeMissing,
        Err(outside) => LockState::Error(outside),
    };
    Ok(LockfileStatus { path: shown, run_id, lockfile: Some(lockfile), recipe_exists, state, recorded, last })
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
