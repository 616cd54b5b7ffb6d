//! `prov run`.

use std::path::PathBuf;

use prov_store::Access;
use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::render;
use crate::resolve::{display_path, load_lockfile, lock_to_file};
use crate::ui::Ui;

/// Run a lockfile (or lock and run a recipe), reusing cached stages
///
/// Executes the stages in plan order. A stage whose key (kind, version, config, input
/// manifests, seeds and, for non-portable stages, the envelope) matches a cached one, and
/// whose cached objects verify, is not executed again. A manifest is recorded at every stage
/// boundary, so a run that was killed resumes where it stopped when run again. Prints the run
/// id and a table of stages.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// Lockfile, run id, or recipe (`.yaml`/`.yml`, locked first)
    target: String,
    /// Write the lockfile and the run's manifests under `lockfiles/` and `manifests/` of the
    /// enclosing git repository and commit them
    #[arg(long)]
    commit: bool,
    /// Run the commands of a lockfile whose commands were not adopted in this store by
    /// locking a recipe (a lockfile from elsewhere, or edited by hand); they run in the
    /// sandbox either way
    #[arg(long)]
    allow_commands: bool,
    #[command(flatten)]
    executor: crate::executor::ExecutorArgs,
}

pub(crate) fn cmd_run(ui: &mut Ui, cx: &CommandContext, args: &RunArgs) -> Result<(), CommandError> {
    let (store, root) = cx.open_store(Access::Shared, true)?;
    let is_recipe = std::path::Path::new(&args.target)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
    let loaded = if is_recipe {
        let (outcome, _) = lock_to_file(&PathBuf::from(&args.target), None, &root, store.root())?;
        let shown = display_path(&outcome.path, &cx.cwd);
        if outcome.changed {
            ui.status(format!("locked {} into {shown}", args.target));
        }
        outcome.report_adopted(ui);
        load_lockfile(&store, &shown)?
    } else {
        load_lockfile(&store, &args.target)?
    };
    crate::resolve::check_command_consent(&loaded, &store, args.allow_commands, false)?;
    let result = cx.with_exec_options(ui, &root, &loaded.display, &args.executor, |opts| {
        prov_exec::run(&store, &loaded.lockfile, &loaded.bytes, opts)
    });
    let report = result?;
    render::execution_report(ui, &report, "run")?;
    if args.commit {
        let manifest = report.run_manifest.expect("a completed run has a run manifest");
        let outcome = crate::git::commit_run(&store, &root, &loaded, &manifest)?;
        ui.json("commit", json!({ "commit": outcome.commit, "files": outcome.files }))?;
        ui.line(format!("committed {} files in {}", outcome.files, outcome.commit))?;
    }
    Ok(())
}
