//! `prov lock`.

use std::path::{Path, PathBuf};

use prov_store::{Access, Digest};
use serde_json::json;

use crate::context::{CommandContext, registry};
use crate::error::CommandError;
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

/// The outcome of locking, shared with `prov run RECIPE`.
pub(crate) struct LockOutcome {
    pub path: PathBuf,
    pub run_id: Digest,
    pub changed: bool,
}

/// Locks `recipe` and writes the lockfile atomically.
pub(crate) fn lock_to_file(
    recipe: &Path,
    out: Option<&Path>,
    root: &Path,
    store_tmp: &Path,
) -> Result<(LockOutcome, prov_exec::Locked), CommandError> {
    let locked = prov_exec::lock_recipe(&registry(), recipe, root)?;
    let path = match out {
        Some(p) => prov_exec::absolute(p),
        None => crate::inside::project_dir(root, std::path::Path::new("lockfiles"))?
            .join(format!("{}.lock", locked.lockfile.recipe.name)),
    };
    let changed = fs_err::read(&path).map_or(true, |old| old != locked.bytes);
    if changed {
        if let Some(dir) = path.parent() {
            fs_err::create_dir_all(dir)?;
        }
        prov_store::write_atomically(store_tmp, &path, &locked.bytes)?;
    }
    let run_id = prov_manifest::run_id(&locked.bytes);
    Ok((LockOutcome { path, run_id, changed }, locked))
}

pub(crate) fn cmd_lock(ui: &mut Ui, cx: &CommandContext, args: &LockArgs) -> Result<(), CommandError> {
    let (store, root) = cx.open_store(Access::Shared, true)?;
    let (outcome, locked) = lock_to_file(&args.recipe, args.out.as_deref(), &root, &store.root().join("tmp"))?;
    let shown = display_path(&outcome.path, &cx.cwd);
    ui.json(
        "lock",
        json!({
            "lockfile": shown,
            "run_id": outcome.run_id.to_string(),
            "changed": outcome.changed,
            "sources": locked.lockfile.sources.len(),
            "stages": locked.lockfile.stages.len(),
        }),
    )?;
    let verb = if outcome.changed { "wrote" } else { "up to date:" };
    ui.line(format!("{verb} {shown}"))?;
    ui.line(format!("run id {}", outcome.run_id))?;
    Ok(())
}

/// Shows a path relative to the current directory when it is below it.
pub(crate) fn display_path(path: &Path, cwd: &Path) -> String {
    path.strip_prefix(cwd).map_or_else(|_| path.display().to_string(), |p| p.display().to_string())
}
