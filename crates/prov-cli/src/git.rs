//! `prov run --commit`: the lockfile and the run's manifests, committed with git2.

use std::path::Path;

use prov_manifest::{closure, looks_like_record};
use prov_store::{Digest, Store};

use crate::error::CommandError;
use crate::resolve::LoadedLockfile;

pub(crate) struct CommitOutcome {
    pub commit: String,
    pub files: usize,
}

/// Writes `lockfiles/<recipe>.lock` and `manifests/<recipe>/` (every record the run reaches,
/// each named `<64 hex>.json` so that `b3sum` checks it, plus `RUN` naming the run manifest)
/// in the git repository enclosing `root`, and commits exactly those paths.
pub(crate) fn commit_run(
    store: &Store,
    root: &Path,
    loaded: &LoadedLockfile,
    run_manifest: &Digest,
) -> Result<CommitOutcome, CommandError> {
    let git_err = |e: git2::Error| CommandError::input(format!("git: {}", e.message()));
    let repo = git2::Repository::discover(root).map_err(|e| {
        CommandError::input(format!("`--commit` needs a git repository: {}", e.message()))
            .with_hint("run `git init` in the project root, or run without `--commit`")
    })?;
    let workdir = repo
        .workdir()
        .ok_or_else(|| CommandError::input("`--commit` needs a repository with a work tree"))?
        .to_path_buf();
    let recipe = loaded.lockfile.recipe.name.to_string();
    let tmp = store.root().join("tmp");
    let lock_rel = format!("lockfiles/{recipe}.lock");
    let lock_path = workdir.join(&lock_rel);
    fs_err::create_dir_all(workdir.join("lockfiles"))?;
    prov_store::write_atomically(&tmp, &lock_path, &loaded.bytes)?;

    let manifest_dir_rel = format!("manifests/{recipe}");
    let manifest_dir = workdir.join(&manifest_dir_rel);
    if manifest_dir.exists() {
        fs_err::remove_dir_all(&manifest_dir)?;
    }
    fs_err::create_dir_all(&manifest_dir)?;
    let (reachable, problems) = closure(store, &[*run_manifest]);
    if let Some((d, e)) = problems.into_iter().next() {
        return Err(CommandError::integrity(format!("cannot commit run: `{d}`: {e}")));
    }
    let mut paths = vec![lock_rel];
    for d in &reachable {
        let bytes = store.read(d)?;
        if !looks_like_record(&bytes) {
            continue;
        }
        let rel = format!("{manifest_dir_rel}/{}.json", d.to_hex());
        prov_store::write_atomically(&tmp, &workdir.join(&rel), &bytes)?;
        paths.push(rel);
    }
    let run_rel = format!("{manifest_dir_rel}/RUN");
    prov_store::write_atomically(&tmp, &workdir.join(&run_rel), format!("{run_manifest}\n").as_bytes())?;
    paths.push(run_rel);

    // The commit holds HEAD's tree plus exactly these paths, whatever else the user staged.
    let head_tree = repo.head().ok().and_then(|h| h.peel_to_tree().ok());
    let mut staging = git2::Index::new().map_err(git_err)?;
    if let Some(t) = &head_tree {
        staging.read_tree(t).map_err(git_err)?;
    }
    // Stale manifests of an earlier run of this recipe leave the tree.
    staging.remove_dir(Path::new(&manifest_dir_rel), 0).map_err(git_err)?;
    for p in &paths {
        let bytes = fs_err::read(workdir.join(p))?;
        let blob = repo.blob(&bytes).map_err(git_err)?;
        let entry = git2::IndexEntry {
            ctime: git2::IndexTime::new(0, 0),
            mtime: git2::IndexTime::new(0, 0),
            dev: 0,
            ino: 0,
            mode: 0o100_644,
            uid: 0,
            gid: 0,
            file_size: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
            id: blob,
            flags: 0,
            flags_extended: 0,
            path: p.as_bytes().to_vec(),
        };
        staging.add(&entry).map_err(git_err)?;
    }
    let tree_id = staging.write_tree_to(&repo).map_err(git_err)?;
    // Keep the work tree's index in step for these paths; other staged changes stay staged.
    let mut index = repo.index().map_err(git_err)?;
    index.remove_dir(Path::new(&manifest_dir_rel), 0).map_err(git_err)?;
    for p in &paths {
        index.add_path(Path::new(p)).map_err(git_err)?;
    }
    index.write().map_err(git_err)?;
    let tree = repo.find_tree(tree_id).map_err(git_err)?;
    let sig = repo.signature().map_err(|e| {
        CommandError::input(format!("git has no identity to commit with: {}", e.message()))
            .with_hint("set `git config user.name` and `git config user.email`")
    })?;
    let parent = match repo.head() {
        Ok(h) => Some(h.peel_to_commit().map_err(git_err)?),
        Err(_) => None,
    };
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    let run_id = prov_manifest::run_id(&loaded.bytes);
    let message =
        format!("prov run {recipe}: run {}\n\nrun id: {run_id}\nrun manifest: {run_manifest}\n", run_id.short());
    let oid = repo.commit(Some("HEAD"), &sig, &sig, &message, &tree, &parents).map_err(git_err)?;
    Ok(CommitOutcome { commit: oid.to_string(), files: paths.len() })
}
