//! `prov gc`.

use prov_store::Access;
use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::{Ui, format_bytes};

/// Remove every object that no recorded run references
///
/// Roots are the lockfiles of all logged executions and the run manifests of completed ones;
/// everything they reach through manifests is kept, everything else is deleted, together
/// with partial writes left by killed processes. Takes the store's exclusive lock, so it
/// refuses to start while another prov process uses the store.
#[derive(Debug, clap::Args)]
pub(crate) struct GcArgs {
    /// Report what would be removed without removing it
    #[arg(long)]
    dry_run: bool,
}

pub(crate) fn cmd_gc(ui: &mut Ui, cx: &CommandContext, args: &GcArgs) -> Result<(), CommandError> {
    let (store, _) = cx.open_store(Access::Exclusive, false)?;
    let report = prov_exec::gc(&store, args.dry_run)?;
    ui.json(
        "gc",
        json!({
            "dry_run": args.dry_run,
            "kept": report.kept,
            "removed": report.removed,
            "freed_bytes": report.freed,
            "tmp_cleaned": report.tmp_cleaned,
            "tasks_cleaned": report.tasks_cleaned,
        }),
    )?;
    let verb = if args.dry_run { "would remove" } else { "removed" };
    ui.line(format!("{verb} {} objects ({}), kept {}", report.removed, format_bytes(report.freed), report.kept))?;
    if report.tasks_cleaned > 0 {
        let verb = if args.dry_run { "would drop" } else { "dropped" };
        ui.line(format!(
            "{verb} the tasks of {} stages run elsewhere and not recorded (the next run runs them again)",
            report.tasks_cleaned
        ))?;
    }
    Ok(())
}
