//! What `prov license queue | decide | diff` resolve before they call `prov_license::queue`:
//! the run (an argument or the store's latest), the policy (a file or the preset) and the
//! verdicts directory (at the top of the git work tree).

use std::path::Path;

use prov_license::Policy;
use prov_manifest::LoadedRun;
use prov_store::Store;

use crate::error::CommandError;
use crate::resolve::load_lockfile;

/// Returns the run named by `arg` (a run id, prefix or lockfile), or the store's latest
/// completed run.
pub(crate) fn load_run(store: &Store, arg: Option<&str>) -> Result<LoadedRun, CommandError> {
    let run_manifest = if let Some(arg) = arg {
        let loaded = load_lockfile(store, arg)?;
        let run_id = prov_manifest::run_id(&loaded.bytes);
        prov_exec::recorded_run(store, &run_id)?
            .ok_or_else(|| {
                CommandError::input(format!("no completed run of `{arg}` in this store"))
                    .with_hint("run it with `prov run` first; the review reads a recorded run")
            })?
            .0
    } else {
        store
            .index()
            .executions()?
            .into_iter()
            .find_map(|e| (e.mode == "run" && e.status == "ok").then_some(e.run_manifest).flatten())
            .ok_or_else(|| {
                CommandError::input("no completed run in this store")
                    .with_hint("run a recipe with a `license` stage first (`prov run RECIPE`)")
            })?
    };
    Ok(LoadedRun::load(store, run_manifest)?)
}

/// Returns a policy: the preset `permissive`, or a license policy file (YAML).
pub(crate) fn load_policy(cwd: &Path, arg: &str) -> Result<Policy, CommandError> {
    Ok(prov_review::read_policy(cwd, arg)?)
}
