//! The project's git repository, as Provenant writes into it: `prov run --commit` (a lockfile
//! and the run's manifests), `prov license decide` and the workbench's verdict form (one
//! reviewer verdict file and its signature).
//!
//! Owns: finding the repository that encloses a project ([`open_repo`]); the identity a
//! reviewer is recorded under ([`identity`]); the directories Provenant writes into, reached
//! lexically inside the work tree and never through a symbolic link ([`project_dir`]); and a
//! commit of exactly the paths Provenant wrote, leaving whatever else the user changed out of
//! it ([`commit_paths`]), made under the repository's commit lock ([`lock_commits`]) so that
//! two Provenant processes never build a commit on the same parent, or write the same files
//! at once. Does not own what is written: callers take the lock, then write the files, then
//! commit.

#![deny(missing_docs)]

use std::path::{Component, Path, PathBuf};

pub use git2::Repository;

/// Why a repository could not be used or written.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// No repository encloses the project.
    #[error("{what} needs a git repository: {message}")]
    NoRepository {
        /// What needed it (`--commit`, `prov license decide`).
        what: String,
        /// git's message.
        message: String,
    },
    /// A bare repository.
    #[error("{what} needs a repository with a work tree")]
    NoWorkTree {
        /// What needed it.
        what: String,
    },
    /// git's configuration names no reviewer.
    #[error("git has no {0} to record as the reviewer")]
    NoIdentity(&'static str),
    /// git has no identity to commit with.
    #[error("git has no identity to commit with: {0}")]
    NoCommitter(String),
    /// A directory to write into would be outside the work tree.
    #[error("`{rel}` is outside `{base}`: prov writes only inside the project")]
    Outside {
        /// The directory asked for.
        rel: PathBuf,
        /// The work tree.
        base: PathBuf,
    },
    /// A directory to write into is a symbolic link.
    #[error("`{dir}` is a symbolic link (to `{target}`): prov does not write through links out of the project")]
    Link {
        /// The link.
        dir: PathBuf,
        /// Where it points.
        target: String,
    },
    /// A directory to write into is a file.
    #[error("`{0}` is not a directory")]
    NotADirectory(PathBuf),
    /// A file could not be read or a directory made.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// git failed.
    #[error("git: {0}")]
    Git(String),
    /// git's own lock file of a ref or of the index is there: another git process is at work,
    /// or a killed one left it.
    #[error("git: {0}")]
    Locked(String),
    /// A file written for the commit was gone when it was committed.
    #[error("`{0}`, written for this commit, is gone: something else removed it before the commit")]
    Vanished(String),
}

impl GitError {
    /// What the user can do about it, when there is something.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            Self::NoRepository { .. } => Some("run `git init` in the project root"),
            Self::NoIdentity(_) => {
                Some("set `git config user.name \"Your Name\"` and `git config user.email you@example.org`")
            }
            Self::NoCommitter(_) => Some("set `git config user.name` and `git config user.email`"),
            Self::Link { .. } => Some("replace the link by a directory"),
            Self::Locked(_) => Some(
                "another git process may be at work; if none is, a killed one left the `.lock` file named above, \
                 which can then be removed",
            ),
            Self::Vanished(_) => Some("run the command again"),
            _ => None,
        }
    }
}

fn git_err(e: &git2::Error) -> GitError {
    match e.code() {
        git2::ErrorCode::Locked => GitError::Locked(e.message().to_owned()),
        _ => GitError::Git(e.message().to_owned()),
    }
}

/// The repository's commit lock, held from before the files of a commit are written until
/// the commit is made: see [`lock_commits`]. Released when dropped (or when the process
/// ends, however it ends).
#[derive(Debug)]
pub struct CommitLock {
    _file: std::fs::File,
}

/// Waits for the repository's commit lock and takes it: an exclusive lock (`flock`) on
/// `prov-commit.lock` in its git directory, which git never looks at.
///
/// Without it two processes committing at once (two `prov license decide`s, or `prov run
/// --commit` of two recipes) each built a tree on the HEAD they read, and the second commit
/// dropped the first one's files from the branch while both reported success; two `prov run
/// --commit`s of one recipe wrote the same run folder at once, and one committed it half
/// written. Commits are short, so a second committer waits rather than fails.
///
/// # Errors
///
/// [`GitError::Io`] when the lock file cannot be opened or locked.
pub fn lock_commits(repo: &git2::Repository) -> Result<CommitLock, GitError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = repo.path().join("prov-commit.lock");
    let with_path = |e: std::io::Error| std::io::Error::new(e.kind(), format!("`{}`: {e}", path.display()));
    // Not through a link, and without waiting: a FIFO put in its place made the open wait
    // forever (a FIFO opened to write without a reader is `ENXIO` with `O_NONBLOCK`).
    let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOFOLLOW;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .custom_flags(i32::try_from(flags.bits()).unwrap_or(0))
        .open(&path)
        .map_err(with_path)?;
    if !file.metadata().map_err(with_path)?.is_file() {
        return Err(with_path(std::io::Error::other("not a regular file")).into());
    }
    file.lock().map_err(with_path)?;
    Ok(CommitLock { _file: file })
}

/// What one commit changes: see [`commit_paths`].
#[derive(Debug, Clone, Copy)]
pub struct Change<'a> {
    /// Paths (relative to the work tree) the caller wrote for this commit, read from the work
    /// tree; each must still be there.
    pub written: &'a [String],
    /// Paths the caller removed (a stale signature, say), committed as removed.
    pub removed: &'a [String],
    /// A directory removed from the tree first (the stale records of an earlier run), before
    /// `written` puts back what is current.
    pub remove_dir: Option<&'a str>,
    /// The commit message.
    pub message: &'a str,
}

/// Returns the git repository enclosing `root` and its work tree; `what` names the command
/// that needs it, for the error.
///
/// # Errors
///
/// [`GitError::NoRepository`] and [`GitError::NoWorkTree`].
pub fn open_repo(root: &Path, what: &str) -> Result<(git2::Repository, PathBuf), GitError> {
    let repo = git2::Repository::discover(root)
        .map_err(|e| GitError::NoRepository { what: what.to_owned(), message: e.message().to_owned() })?;
    let workdir = repo.workdir().ok_or_else(|| GitError::NoWorkTree { what: what.to_owned() })?.to_path_buf();
    Ok((repo, workdir))
}

/// The top of the work tree of the repository enclosing `root`, or `root` when there is none:
/// where the reviewer verdicts directory lives by default.
pub fn work_tree_top(root: &Path) -> PathBuf {
    git2::Repository::discover(root)
        .ok()
        .and_then(|r| r.workdir().map(Path::to_path_buf))
        .unwrap_or_else(|| root.to_path_buf())
}

/// `dir` relative to `workdir` when it lies inside it, both taken lexically (made absolute
/// against the current directory, `.` and `..` resolved without following links), so that
/// `verdicts/../..` is outside however the directories are linked.
pub fn relative_inside(dir: &Path, workdir: &Path) -> Option<PathBuf> {
    let lexical = |p: &Path| {
        let cwd = if p.is_absolute() { PathBuf::new() } else { std::env::current_dir().ok()? };
        let mut out = PathBuf::new();
        for c in cwd.join(p).components() {
            match c {
                Component::ParentDir => {
                    out.pop();
                }
                Component::CurDir => {}
                other => out.push(other.as_os_str()),
            }
        }
        Some(out)
    };
    lexical(dir)?.strip_prefix(lexical(workdir)?).ok().map(Path::to_path_buf)
}

/// Checks that git can sign a commit with its configured identity (a name with `<` in it, say,
/// cannot), so that a caller can refuse before it writes anything.
///
/// # Errors
///
/// [`GitError::NoCommitter`].
pub fn check_committer(repo: &git2::Repository) -> Result<(), GitError> {
    repo.signature().map(drop).map_err(|e| GitError::NoCommitter(e.message().to_owned()))
}

/// Returns `Name <email>` from git's configuration (repository, then global).
///
/// # Errors
///
/// [`GitError::NoIdentity`] when `user.name` or `user.email` is unset or blank.
pub fn identity(repo: &git2::Repository) -> Result<String, GitError> {
    let config = repo.config().map_err(|e| git_err(&e))?;
    let get = |key: &'static str| {
        config.get_string(key).ok().filter(|v| !v.trim().is_empty()).ok_or(GitError::NoIdentity(key))
    };
    let (name, email) = (get("user.name")?, get("user.email")?);
    Ok(format!("{} <{}>", name.trim(), email.trim()))
}

/// Returns `base/rel` as a directory inside `base`, creating what is missing. `rel` is taken
/// lexically (`a/../b` is `b`) and must stay inside `base`; every component that exists must
/// be a directory, not a symbolic link: a committed link named `manifests` must not make
/// Provenant write, or delete, outside the repository.
///
/// # Errors
///
/// [`GitError::Outside`], [`GitError::Link`], [`GitError::NotADirectory`], or
/// [`GitError::Io`] when a directory cannot be made.
pub fn project_dir(base: &Path, rel: &Path) -> Result<PathBuf, GitError> {
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(p) => parts.push(p),
            Component::CurDir => {}
            Component::ParentDir if parts.pop().is_some() => {}
            _ => return Err(GitError::Outside { rel: rel.to_path_buf(), base: base.to_path_buf() }),
        }
    }
    let mut dir = base.to_path_buf();
    for part in parts {
        dir.push(part);
        match fs_err::symlink_metadata(&dir) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs_err::read_link(&dir).map(|t| t.display().to_string()).unwrap_or_default();
                return Err(GitError::Link { dir, target });
            }
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(GitError::NotADirectory(dir)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => fs_err::create_dir(&dir)?,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(dir)
}

/// Commits HEAD's tree with exactly `change` applied: `remove_dir` removed, then each
/// `written` path as the work tree holds it, each `removed` path gone. Whatever else the user
/// changed or staged stays out of the commit; the work tree's index is kept in step for these
/// paths. Returns the commit's id.
///
/// The tree is built on the commit HEAD names when this is called, and the commit is made on
/// that one parent: if HEAD moved meanwhile (a git command outside Provenant committed),
/// git refuses the commit instead of dropping what moved it. `_lock` is the caller's
/// [`CommitLock`], taken before it wrote the files.
///
/// # Errors
///
/// [`GitError::Vanished`] when a written path is gone; [`GitError::Git`] when git fails
/// (HEAD moved, say); [`GitError::Locked`] for git's own lock files; [`GitError::NoCommitter`]
/// without an identity; [`GitError::Io`] when a path cannot be read.
pub fn commit_paths(
    repo: &git2::Repository,
    _lock: &CommitLock,
    workdir: &Path,
    change: &Change<'_>,
) -> Result<git2::Oid, GitError> {
    // One read of HEAD: the tree built on, and the parent committed on.
    let parent = match repo.head() {
        Ok(h) => Some(h.peel_to_commit().map_err(|e| git_err(&e))?),
        Err(_) => None,
    };
    let mut staging = git2::Index::new().map_err(|e| git_err(&e))?;
    if let Some(c) = &parent {
        staging.read_tree(&c.tree().map_err(|e| git_err(&e))?).map_err(|e| git_err(&e))?;
    }
    if let Some(d) = change.remove_dir {
        staging.remove_dir(Path::new(d), 0).map_err(|e| git_err(&e))?;
    }
    for p in change.removed {
        let _ = staging.remove_path(Path::new(p));
    }
    for p in change.written {
        let bytes = match fs_err::read(workdir.join(p)) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(GitError::Vanished(p.clone())),
            Err(e) => return Err(e.into()),
        };
        let blob = repo.blob(&bytes).map_err(|e| git_err(&e))?;
        // The entry is built from the bytes alone: no timestamps or inode of this machine.
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
        staging.add(&entry).map_err(|e| git_err(&e))?;
    }
    let tree_id = staging.write_tree_to(repo).map_err(|e| git_err(&e))?;
    let tree = repo.find_tree(tree_id).map_err(|e| git_err(&e))?;
    let sig = repo.signature().map_err(|e| GitError::NoCommitter(e.message().to_owned()))?;
    // The work tree's index is written before the commit, so that an index git holds (its
    // `index.lock`) fails the command before HEAD moves; a commit that then fails puts the
    // index back as it was: left staged, the files went into the user's next `git commit`.
    let mut index = repo.index().map_err(|e| git_err(&e))?;
    let before: Vec<git2::IndexEntry> = index.iter().collect();
    if let Some(d) = change.remove_dir {
        index.remove_dir(Path::new(d), 0).map_err(|e| git_err(&e))?;
    }
    for p in change.removed {
        let _ = index.remove_path(Path::new(p));
    }
    for p in change.written {
        index.add_path(Path::new(p)).map_err(|e| git_err(&e))?;
    }
    index.write().map_err(|e| git_err(&e))?;
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, change.message, &tree, &parents).map_err(|e| {
        let restored = index.clear().and_then(|()| before.iter().try_for_each(|entry| index.add(entry)));
        // Best effort: the commit's own error is the one to report.
        let _ = restored.and_then(|()| index.write());
        git_err(&e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_dirs_stay_inside_and_never_follow_links() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        assert_eq!(project_dir(base, Path::new("a/./b/../c")).unwrap(), base.join("a/c"));
        assert!(base.join("a/c").is_dir());
        for outside in ["../x", "a/../../x", "/etc"] {
            assert!(matches!(project_dir(base, Path::new(outside)), Err(GitError::Outside { .. })), "{outside}");
        }
        std::os::unix::fs::symlink("/tmp", base.join("link")).unwrap();
        assert!(matches!(project_dir(base, Path::new("link/x")), Err(GitError::Link { .. })));
        assert_eq!(relative_inside(&base.join("v/x"), base), Some(PathBuf::from("v/x")));
        assert_eq!(relative_inside(&base.join("v/../../x"), base), None);
        fs_err::write(base.join("file"), "x").unwrap();
        assert!(matches!(project_dir(base, Path::new("file/x")), Err(GitError::NotADirectory(_))));
    }

    #[test]
    fn a_commit_holds_exactly_the_paths_given() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        let mut config = repo.config().unwrap();
        config.set_str("user.name", "Rita Reviewer").unwrap();
        config.set_str("user.email", "rita@example.org").unwrap();
        assert_eq!(identity(&repo).unwrap(), "Rita Reviewer <rita@example.org>");
        fs_err::write(dir.path().join("mine.json"), "{}").unwrap();
        fs_err::write(dir.path().join("theirs.txt"), "work in progress").unwrap();
        let lock = lock_commits(&repo).unwrap();
        let mine = ["mine.json".to_owned()];
        let change = Change { written: &mine, removed: &[], remove_dir: None, message: "one file" };
        let oid = commit_paths(&repo, &lock, dir.path(), &change).unwrap();
        let tree = repo.find_commit(oid).unwrap().tree().unwrap();
        let names: Vec<String> = tree.iter().map(|e| e.name().unwrap().to_owned()).collect();
        assert_eq!(names, ["mine.json"], "the user's other file stays out");
        // A written path that is gone is an error, not a removal: something else removed it.
        fs_err::remove_file(dir.path().join("mine.json")).unwrap();
        let err = commit_paths(&repo, &lock, dir.path(), &change).unwrap_err();
        assert!(matches!(&err, GitError::Vanished(p) if p == "mine.json"), "{err}");
        // A path said to be removed is committed as removed.
        let change = Change { written: &[], removed: &mine, remove_dir: None, message: "removed" };
        let oid = commit_paths(&repo, &lock, dir.path(), &change).unwrap();
        assert_eq!(repo.find_commit(oid).unwrap().tree().unwrap().len(), 0);
    }

    /// A second committer waits until the first has committed, so that it builds on the
    /// first one's commit: the lock is held across processes as across threads (a `flock` of
    /// two openings of the file).
    #[test]
    fn a_second_committer_waits_for_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        let first = lock_commits(&repo).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let path = dir.path().to_path_buf();
        let waiter = std::thread::spawn(move || {
            let repo = git2::Repository::open(&path).unwrap();
            let _second = lock_commits(&repo).unwrap();
            tx.send(()).unwrap();
        });
        assert!(rx.recv_timeout(std::time::Duration::from_millis(300)).is_err(), "the second took a held lock");
        drop(first);
        rx.recv_timeout(std::time::Duration::from_secs(10)).expect("the second gets the lock once it is free");
        waiter.join().unwrap();
    }

    /// git's own lock on the branch (left by a killed git) is named as such, with a hint.
    #[test]
    fn a_stale_branch_lock_is_named_with_a_hint() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        let mut config = repo.config().unwrap();
        config.set_str("user.name", "Rita Reviewer").unwrap();
        config.set_str("user.email", "rita@example.org").unwrap();
        fs_err::write(dir.path().join("a.json"), "{}").unwrap();
        let lock = lock_commits(&repo).unwrap();
        let a = ["a.json".to_owned()];
        let change = Change { written: &a, removed: &[], remove_dir: None, message: "a" };
        commit_paths(&repo, &lock, dir.path(), &change).unwrap();
        let head = repo.head().unwrap().name().unwrap().to_owned();
        fs_err::write(repo.path().join(format!("{head}.lock")), "").unwrap();
        fs_err::write(dir.path().join("a.json"), "{\"b\": 1}").unwrap();
        let staged = |repo: &git2::Repository| repo.index().unwrap().get_path(Path::new("a.json"), 0).unwrap().id;
        let before = staged(&repo);
        let err = commit_paths(&repo, &lock, dir.path(), &change).unwrap_err();
        assert!(matches!(err, GitError::Locked(_)), "{err}");
        assert!(err.hint().unwrap().contains("killed"));
        // A commit that failed staged nothing: the user's next `git commit` would take it.
        assert_eq!(staged(&git2::Repository::open(dir.path()).unwrap()), before);
    }

    /// The lock file is not opened through a link, nor waited on when it is a FIFO.
    #[test]
    fn the_commit_lock_is_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        let lock = repo.path().join("prov-commit.lock");
        assert!(std::process::Command::new("mkfifo").arg(&lock).status().unwrap().success());
        assert!(lock_commits(&repo).is_err(), "a FIFO is refused at once");
        fs_err::remove_file(&lock).unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&elsewhere, &lock).unwrap();
        assert!(lock_commits(&repo).is_err(), "a link is not followed");
        assert!(!elsewhere.exists());
    }
}
