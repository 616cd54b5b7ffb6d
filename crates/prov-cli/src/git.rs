//! Commits with git2: `prov run --commit` (the lockfile and the run's manifests) and `prov license
//! decide` (one reviewer verdict file).

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
    let (repo, workdir) = open_repo(root, "`--commit`").map_err(|e| {
        let hint = "run `git init` in the project root, or run without `--commit`";
        e.with_hint(hint)
    })?;
    let recipe = loaded.lockfile.recipe.name.to_string();
    let tmp = store.root().join("tmp");
    let lock_rel = format!("lockfiles/{recipe}.lock");
    let lock_path = crate::inside::project_dir(&workdir, Path::new("lockfiles"))?.join(format!("{recipe}.lock"));
    prov_store::write_atomically(&tmp, &lock_path, &loaded.bytes)?;

    let manifest_dir_rel = format!("manifests/{recipe}");
    // Checked before anything is deleted: `manifests` or `manifests/<recipe>` may be a link.
    let manifest_dir = crate::inside::project_dir(&workdir, Path::new(&manifest_dir_rel))?;
    fs_err::remove_dir_all(&manifest_dir)?;
    fs_err::create_dir(&manifest_dir)?;
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

    let run_id = prov_manifest::run_id(&loaded.bytes);
    let message =
        format!("prov run {recipe}: run {}\n\nrun id: {run_id}\nrun manifest: {run_manifest}\n", run_id.short());
    // Stale manifests of an earlier run of this recipe leave the tree.
    let oid = commit_paths(&repo, &workdir, &paths, Some(&manifest_dir_rel), &message)?;
    Ok(CommitOutcome { commit: oid.to_string(), files: paths.len() })
}

/// Returns the git repository enclosing `root` and its work tree, or an error saying what
/// `what` needs.
pub(crate) fn open_repo(root: &Path, what: &str) -> Result<(git2::Repository, std::path::PathBuf), CommandError> {
    let repo = git2::Repository::discover(root).map_err(|e| {
        CommandError::input(format!("{what} needs a git repository: {}", e.message()))
            .with_hint("run `git init` in the project root")
    })?;
    let workdir = repo
        .workdir()
        .ok_or_else(|| CommandError::input(format!("{what} needs a repository with a work tree")))?
        .to_path_buf();
    Ok((repo, workdir))
}

/// Returns `Name <email>` from git's configuration (repository, then global).
pub(crate) fn identity(repo: &git2::Repository) -> Result<String, CommandError> {
    let unset = |what: &str| {
        CommandError::input(format!("git has no {what} to record as the reviewer"))
            .with_hint("set `git config user.name \"Your Name\"` and `git config user.email you@example.org`")
    };
    let config = repo.config().map_err(|e| CommandError::input(format!("git: {}", e.message())))?;
    let name =
        config.get_string("user.name").ok().filter(|n| !n.trim().is_empty()).ok_or_else(|| unset("user.name"))?;
    let email =
        config.get_string("user.email").ok().filter(|n| !n.trim().is_empty()).ok_or_else(|| unset("user.email"))?;
    Ok(format!("{} <{}>", name.trim(), email.trim()))
}

/// Commits HEAD's tree plus exactly `paths` (relative to `workdir`, read from the work tree;
/// one no longer there is committed as removed),
/// whatever else the user staged, with `remove_dir` first removed from the tree; keeps the
/// work tree's index in step for these paths. Returns the commit's id.
pub(crate) fn commit_paths(
    repo: &git2::Repository,
    workdir: &Path,
    paths: &[String],
    remove_dir: Option<&str>,
    message: &str,
) -> Result<git2::Oid, CommandError> {
    let git_err = |e: git2::Error| CommandError::input(format!("git: {}", e.message()));
    let head_tree = repo.head().ok().and_then(|h| h.peel_to_tree().ok());
    let mut staging = git2::Index::new().map_err(git_err)?;
    if let Some(t) = &head_tree {
        staging.read_tree(t).map_err(git_err)?;
    }
    if let Some(d) = remove_dir {
        staging.remove_dir(Path::new(d), 0).map_err(git_err)?;
    }
    for p in paths {
        // A path that is gone from the work tree is committed as removed.
        if !workdir.join(p).exists() {
            let _ = staging.remove_path(Path::new(p));
            continue;
        }
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
    let tree_id = staging.write_tree_to(repo).map_err(git_err)?;
    let mut index = repo.index().map_err(git_err)?;
    if let Some(d) = remove_dir {
        index.remove_dir(Path::new(d), 0).map_err(git_err)?;
    }
    for p in paths {
        if workdir.join(p).exists() {
            index.add_path(Path::new(p)).map_err(git_err)?;
        } else {
            let _ = index.remove_path(Path::new(p));
        }
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
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents).map_err(git_err)
}
