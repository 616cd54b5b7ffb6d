//! `prov lock`.

use std::path::PathBuf;

use prov_store::Access;
use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::resolve::{display_path, lock_to_file};
use crate::ui::Ui;

/// Pin a recipe into a lockfile
///
/// Hashes every source (files, and directories as trees of their files), checks expected
/// hashes, makes every default and seed explicit, records each stage kind's implementation
/// version, orders the stages, and writes the canonical lockfile to
/// `lockfiles/<recipe name>.lock` under the project root. Its BLAKE3 is the run id.
#[derive(Debug, clap::Args)]
pub(crate) struct LockArgs {
    /// Recipe file (YAML)
    recipe: PathBuf,
    /// Where to write the lockfile (default: `lockfiles/<recipe name>.lock` in the project root)
    #[arg(long, value_name = "PATH")]
    out: Option<PathBuf>,
}

pub(crate) fn cmd_lock(ui: &mut Ui, cx: &CommandContext, args: &LockArgs) -> Result<(), CommandError> {
    let (store, root) = cx.open_store(Access::Shared, true)?;
    let (outcome, locked) = lock_to_file(&args.recipe, args.out.as_deref(), &root, store.root())?;
    let shown = display_path(&outcome.path, &cx.cwd);
    ui.json(
        "lock",
        json!({
            "lockfile": shown,
            "run_id": outcome.run_id.to_string(),
            "changed": outcome.changed,
            "sources": locked.lockfile.sources.len(),
            "stages": locked.lockfile.stages.len(),
            "adopted_commands": outcome.adopted.iter().map(|(stage, command)| json!({"stage": stage, "command": command})).collect::<Vec<_>>(),
        }),
    )?;
    outcome.report_adopted(ui);
    let verb = if outcome.changed { "wrote" } else { "up to date:" };
    ui.line(format!("{verb} {shown}"))?;
    ui.line(format!("run id {}", outcome.run_id))?;
    Ok(())
}
