//! `prov log`.

use prov_store::{Access, ExecutionRow, StageEventRow};
use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::{Ui, format_duration, format_time, table};

/// Show the executions logged in this store, newest first
///
/// Lists every `prov run` and `prov replay` this store has seen: when it started, the mode,
/// the status (`ok`, `failed`, `diverged`, or `running` for one that is still going or was
/// killed), the run id, the recipe, the lockfile as it was given and how long it took. For a
/// failed or diverged execution the reason follows on the next line. With `--stages`, each
/// execution's stage boundaries are listed too: whether the stage was executed, taken from
/// the cache, reused or replayed, its time and its stage manifest.
#[derive(Debug, clap::Args)]
pub(crate) struct LogArgs {
    /// Show at most this many executions, at least 1 (default: all)
    #[arg(long, short = 'n', value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    limit: Option<u64>,
    /// Also list each execution's stages
    #[arg(long)]
    stages: bool,
}

/// One logged execution, with its stage events when asked for.
struct Entry {
    row: ExecutionRow,
    stages: Option<Vec<StageEventRow>>,
}

pub(crate) fn cmd_log(ui: &mut Ui, cx: &CommandContext, args: &LogArgs) -> Result<(), CommandError> {
    let (store, _) = cx.open_store(Access::ReadOnly, true)?;
    let mut rows = store.index().executions()?;
    if let Some(n) = args.limit {
        rows.truncate(usize::try_from(n).unwrap_or(usize::MAX));
    }
    let entries = rows
        .into_iter()
        .map(|row| {
            let stages = if args.stages { Some(store.index().stage_events(row.id)?) } else { None };
            Ok(Entry { row, stages })
        })
        .collect::<Result<Vec<_>, prov_store::StoreError>>()?;
    for e in &entries {
        ui.json("log", entry_json(e))?;
    }
    if entries.is_empty() {
        ui.line("no executions logged in this store")?;
        return Ok(());
    }
    render_human(ui, &entries)
}

fn entry_json(e: &Entry) -> serde_json::Value {
    let r = &e.row;
    let mut data = json!({
        "id": r.id,
        "mode": r.mode,
        "status": r.status,
        "run_id": r.run_id.to_string(),
        "recipe": r.recipe,
        "lockfile": r.lockfile_path,
        "started": format_time(r.started_ms),
        "started_ms": r.started_ms,
        "finished_ms": r.finished_ms,
        "duration_ms": r.finished_ms.map(|f| f - r.started_ms),
        "run_manifest": r.run_manifest.map(|d| d.to_string()),
        "detail": r.detail,
    });
    if let Some(stages) = &e.stages {
        data["stages"] = stages
            .iter()
            .map(|s| {
                json!({
                    "name": s.stage,
                    "status": s.status,
                    "millis": s.millis,
                    "manifest": s.manifest.map(|d| d.to_string()),
                })
            })
            .collect();
    }
    data
}

fn render_human(ui: &mut Ui, entries: &[Entry]) -> Result<(), CommandError> {
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            let r = &e.row;
            vec![
                format_time(r.started_ms),
                r.mode.clone(),
                r.status.clone(),
                r.run_id.short(),
                r.recipe.clone(),
                r.lockfile_path.clone(),
                r.finished_ms.map_or_else(|| "-".to_owned(), |f| format_duration(f - r.started_ms)),
            ]
        })
        .collect();
    let rendered = table(&["started", "mode", "status", "run", "recipe", "lockfile", "time"], &rows);
    let mut lines = rendered.lines();
    if let Some(header) = lines.next() {
        ui.line(header)?;
    }
    for (e, line) in entries.iter().zip(lines) {
        ui.line(line)?;
        if let (Some(detail), "failed" | "diverged") = (&e.row.detail, e.row.status.as_str()) {
            for d in detail.lines() {
                ui.line(format!("    {d}"))?;
            }
        }
        if let Some(stages) = &e.stages {
            if stages.is_empty() {
                ui.line("    (no stage finished)")?;
                continue;
            }
            let rows: Vec<Vec<String>> = stages
                .iter()
                .map(|s| {
                    vec![
                        s.stage.clone(),
                        s.status.clone(),
                        format_duration(s.millis),
                        s.manifest.map_or_else(|| "-".to_owned(), |d| d.short()),
                    ]
                })
                .collect();
            for l in table(&["stage", "status", "time", "manifest"], &rows).lines() {
                ui.line(format!("    {l}"))?;
            }
        }
    }
    Ok(())
}
