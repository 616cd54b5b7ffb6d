//! `prov run --commit`: the lockfile and the run's folder of records
//! (`prov_manifest::write_committed_run`), committed with `prov-git`.

use std::path::Path;

use prov_store::{Digest, Store};

use crate::error::CommandError;
use crate::resolve::LoadedLockfile;

pub(crate) struct CommitOutcome {
    pub commit: String,
    pub files: usize,
}

/// Writes `lockfiles/<recipe>.lock` and `manifests/<recipe>/` (the committed run's folder) in
/// the git repository enclosing `root`, and commits exactly those paths.
pub(crate) fn commit_run(
    store: &Store,
    root: &Path,
    loaded: &LoadedLockfile,
    run_manifest: &Digest,
) -> Result<CommitOutcome, CommandError> {
    let (repo, workdir) = prov_git::open_repo(root, "`--commit`").map_err(|e| {
        let hint = "run `git init` in the project root, or run without `--commit`";
        CommandError::from(e).with_hint(hint)
    })?;
    // Held until the commit is made: another `--commit` of this recipe would write the same
    // folder, and any other commit could be built on the same parent.
    let lock = prov_git::lock_commits(&repo)?;
    let recipe = loaded.lockfile.recipe.name.to_string();
    let tmp = store.root().join("tmp");
    let lock_rel = format!("lockfiles/{recipe}.lock");
    let lock_path = prov_git::project_dir(&workdir, Path::new("lockfiles"))?.join(format!("{recipe}.lock"));
    prov_store::write_atomically(&tmp, &lock_path, &loaded.bytes)?;

    let manifest_dir_rel = format!("manifests/{recipe}");
    // Checked before anything is deleted: `manifests` or `manifests/<recipe>` may be a link.
    let manifest_dir = prov_git::project_dir(&workdir, Path::new(&manifest_dir_rel))?;
    let written = prov_manifest::write_committed_run(store, &manifest_dir, run_manifest)?;
    let mut paths = vec![lock_rel];
    paths.extend(written.iter().map(|name| format!("{manifest_dir_rel}/{name}")));

    let run_id = prov_manifest::run_id(&loaded.bytes);
    let message =
        format!("prov run {recipe}: run {}\n\nrun id: {run_id}\nrun manifest: {run_manifest}\n", run_id.short());
    // Stale manifests of an earlier run of this recipe leave the tree.
    let change =
        prov_git::Change { written: &paths, removed: &[], remove_dir: Some(&manifest_dir_rel), message: &message };
    let oid = prov_git::commit_paths(&repo, &lock, &workdir, &change)?;
    Ok(CommitOutcome { commit: oid.to_string(), files: paths.len() })
}
