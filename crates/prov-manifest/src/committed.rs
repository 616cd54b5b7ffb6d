//! Committed runs: the folder that `prov run --commit` writes for a recipe,
//! `manifests/<recipe>/`, so that a run can be checked out of git and replayed elsewhere.
//!
//! The folder holds every record the run manifest reaches, each in a file named by the 64 hex
//! digits of its digest and `.json` (so that `b3sum` checks the folder without Provenant), and
//! a file `RUN` holding the run manifest's digest and a newline. This module writes such a
//! folder ([`write_committed_run`]), imports one into a store checking every file against its
//! name ([`import_committed_run`], what `prov replay --against` does first), and lists the
//! committed runs of a project ([`committed_runs`], the workbench's runs page). Committing to
//! git is `prov-git`'s; which folder is safe to write is the caller's (`prov_git::project_dir`).

use std::path::{Path, PathBuf};

use prov_store::{Digest, Store, StoreError};

use crate::{Record, closure, looks_like_record, put_record};

/// The file of a committed run's folder that names its run manifest.
pub const RUN_FILE: &str = "RUN";

/// Why a committed run's folder cannot be written or imported.
#[derive(Debug, thiserror::Error)]
pub enum CommittedError {
    /// Reading or writing the folder (the message names the path).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The store.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Storing a record.
    #[error(transparent)]
    Stored(#[from] crate::StoredError),
    /// `RUN` holds something else than a digest.
    #[error("{}: not a digest: {message}", path.display())]
    NotADigest {
        /// The `RUN` file.
        path: PathBuf,
        /// Why its text is not a digest.
        message: String,
    },
    /// `RUN` names a record that is not among the folder's files.
    #[error("{}: names {run}, which is not among the manifests", path.display())]
    RunNotAmong {
        /// The `RUN` file.
        path: PathBuf,
        /// What it names.
        run: Digest,
    },
    /// A record file's bytes do not hash to the digest its name says.
    #[error("{}: its bytes hash to {actual}, not to its name", path.display())]
    NameMismatch {
        /// The file.
        path: PathBuf,
        /// The digest of its bytes.
        actual: Digest,
    },
    /// A record file hashes to its name but is not a canonical record.
    #[error("{}: {message}", path.display())]
    NotARecord {
        /// The file.
        path: PathBuf,
        /// Why it does not decode.
        message: String,
    },
    /// `RUN` names something other than a run record of the lockfile being replayed.
    #[error("{}: names {found}, not a run of lockfile {run_id}", path.display())]
    NotARunOf {
        /// The `RUN` file.
        path: PathBuf,
        /// What it names: a record kind, or a run of another lockfile.
        found: String,
        /// The lockfile's run id.
        run_id: Digest,
    },
    /// The run's closure holds a record no run reaches (another run, a replay, an attestation).
    #[error("{}: a {kind} record, which no run reaches: a committed run's folder holds none", path.display())]
    NotInARun {
        /// The file.
        path: PathBuf,
        /// Its record kind.
        kind: String,
    },
    /// A record the run reaches cannot be read from the store.
    #[error("cannot commit run: `{digest}`: {message}")]
    Unreachable {
        /// The record.
        digest: Digest,
        /// What reading it said.
        message: String,
    },
}

impl CommittedError {
    /// True when stored or committed bytes are not what their digests say (exit 2 in the CLI):
    /// a file that does not hash to its name or does not decode, or an unreadable record.
    pub fn is_integrity_failure(&self) -> bool {
        match self {
            Self::NameMismatch { .. } | Self::NotARecord { .. } | Self::Unreachable { .. } | Self::NotInARun { .. } => {
                true
            }
            Self::Store(e) => e.is_integrity_failure(),
            Self::Stored(e) => e.is_integrity_failure(),
            Self::Io(_) | Self::NotADigest { .. } | Self::RunNotAmong { .. } | Self::NotARunOf { .. } => false,
        }
    }
}

/// Writes the folder of the run `run_manifest` at `dir`, replacing what it held: every record
/// the run reaches (data objects are not records and stay in the store), then `RUN`. The
/// folder is written whole beside `dir` (`.<name>.new-<pid>`) and renamed into place, the old
/// one moved aside first (`.<name>.old-<pid>`) and removed after: a process killed while
/// writing leaves the old folder as it was, or, between the two renames, both folders beside
/// it, never a folder without `RUN` or with some records of each run. Leftovers of a killed
/// write are removed by the next, so two writers of one folder must not overlap: the caller
/// holds the repository's commit lock (`prov_git::lock_commits`) from before this call until
/// its commit, else one writer removed the other's folder while it was being written.
/// Returns the names of the files written, `RUN` last.
///
/// # Errors
///
/// [`CommittedError::Unreachable`] when a record the run reaches cannot be read (nothing is
/// written then); I/O and store errors.
pub fn write_committed_run(store: &Store, dir: &Path, run_manifest: &Digest) -> Result<Vec<String>, CommittedError> {
    let (reachable, problems) = closure(store, &[*run_manifest]);
    if let Some((digest, e)) = problems.into_iter().next() {
        return Err(CommittedError::Unreachable { digest, message: e.to_string() });
    }
    let tmp = store.root().join("tmp");
    let parent = dir.parent().unwrap_or(Path::new("."));
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    remove_leftovers(parent, &name)?;
    let pid = std::process::id();
    let staging = parent.join(format!(".{name}.new-{pid}"));
    fs_err::create_dir(&staging)?;
    let mut written = Vec::new();
    for d in &reachable {
        let bytes = store.read(d)?;
        if !looks_like_record(&bytes) {
            continue;
        }
        let file = format!("{}.json", d.to_hex());
        prov_store::write_atomically(&tmp, &staging.join(&file), &bytes)?;
        written.push(file);
    }
    prov_store::write_atomically(&tmp, &staging.join(RUN_FILE), format!("{run_manifest}\n").as_bytes())?;
    written.push(RUN_FILE.to_owned());
    // Records of an earlier run of the recipe leave with the folder.
    if fs_err::symlink_metadata(dir).is_ok() {
        let old = parent.join(format!(".{name}.old-{pid}"));
        fs_err::rename(dir, &old)?;
        fs_err::rename(&staging, dir)?;
        fs_err::remove_dir_all(&old)?;
    } else {
        fs_err::rename(&staging, dir)?;
    }
    Ok(written)
}

/// Removes what a killed [`write_committed_run`] of folder `name` left in `parent`.
fn remove_leftovers(parent: &Path, name: &str) -> std::io::Result<()> {
    let Ok(entries) = fs_err::read_dir(parent) else { return Ok(()) };
    for entry in entries.filter_map(Result::ok) {
        let file = entry.file_name().to_string_lossy().into_owned();
        let ours = [".new-", ".old-"].iter().any(|kind| {
            file.strip_prefix(&format!(".{name}{kind}")).is_some_and(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        });
        if ours && entry.file_type().is_ok_and(|t| t.is_dir()) {
            fs_err::remove_dir_all(entry.path())?;
        }
    }
    Ok(())
}

/// Reads the run manifest that `dir`'s `RUN` names.
///
/// # Errors
///
/// [`CommittedError::NotADigest`], or the I/O error of reading it.
pub fn read_run_file(dir: &Path) -> Result<Digest, CommittedError> {
    let path = dir.join(RUN_FILE);
    fs_err::read_to_string(&path)?
        .trim()
        .parse()
        .map_err(|e: prov_store::DigestParseError| CommittedError::NotADigest { path, message: e.to_string() })
}

/// Imports a committed run's folder into `store`: the records that the run manifest `RUN`
/// names reaches, each checked against the digest its file name says and decoded. Returns
/// that run manifest. Nothing is stored until the whole closure is checked:
///
/// - `RUN` must name a run record of the lockfile `run_id` ([`CommittedError::NotARunOf`]);
/// - the closure holds no other run record, and no replay or attestation record
///   ([`CommittedError::NotInARun`]): no run reaches those, and stored they would be evidence
///   (a replay record "identical" to the forged run, say) whatever the replay then finds.
///
/// Other files of the folder are not read: a folder handed over could hold a second run
/// record of the same lockfile, or replay records of it. `prov run --commit` writes the
/// closure and nothing else.
///
/// # Errors
///
/// [`CommittedError::NameMismatch`] and [`CommittedError::NotARecord`] for a reached file that
/// is not what its name says; [`CommittedError::NotADigest`] and
/// [`CommittedError::RunNotAmong`] for `RUN`; the two above; I/O and store errors.
pub fn import_committed_run(store: &Store, dir: &Path, run_id: &Digest) -> Result<Digest, CommittedError> {
    let run = read_run_file(dir)?;
    if !dir.join(format!("{}.json", run.to_hex())).is_file() {
        return Err(CommittedError::RunNotAmong { path: dir.join(RUN_FILE), run });
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec![run];
    let mut records = Vec::new();
    while let Some(digest) = todo.pop() {
        if !seen.insert(digest) {
            continue;
        }
        // Data objects (shards, blobs) are not in the folder: the records name them.
        let path = dir.join(format!("{}.json", digest.to_hex()));
        if !fs_err::metadata(&path).is_ok_and(|m| m.is_file()) {
            continue;
        }
        let bytes = fs_err::read(&path)?;
        let actual = Digest::of(&bytes);
        if actual != digest {
            return Err(CommittedError::NameMismatch { path, actual });
        }
        let record = Record::from_bytes(&bytes)
            .map_err(|e| CommittedError::NotARecord { path: path.clone(), message: e.to_string() })?;
        match &record {
            Record::Run(r) if digest == run && r.lockfile == *run_id => {}
            _ if digest == run => {
                let found = match &record {
                    Record::Run(r) => format!("a run of lockfile {}", r.lockfile),
                    other => format!("a {} record", other.kind_name()),
                };
                return Err(CommittedError::NotARunOf { path: dir.join(RUN_FILE), found, run_id: *run_id });
            }
            Record::Run(_) | Record::Replay(_) | Record::Attestation(_) => {
                return Err(CommittedError::NotInARun { path, kind: record.kind_name().to_owned() });
            }
            _ => {}
        }
        todo.extend(record.references());
        records.push(record);
    }
    for record in &records {
        put_record(store, record)?;
    }
    Ok(run)
}

/// The runs committed in a project's `manifests` folder: each sub-folder whose `RUN` names a
/// digest, as (folder name, run manifest), in name order. Folders without a readable `RUN`
/// are not committed runs and are left out.
pub fn committed_runs(manifests: &Path) -> Vec<(String, Digest)> {
    let Ok(dirs) = fs_err::read_dir(manifests) else { return Vec::new() };
    let mut out: Vec<(String, Digest)> = dirs
        .filter_map(Result::ok)
        // A hidden folder is a write in progress, or one a killed write left.
        .filter(|dir| !dir.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|dir| Some((dir.file_name().to_string_lossy().into_owned(), read_run_file(&dir.path()).ok()?)))
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RunRecord;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::init(&dir.path().join(".prov")).unwrap();
        (dir, s)
    }

    /// The lockfile digest of [`run_in`]'s run.
    fn lockfile() -> Digest {
        Digest::of(b"lockfile")
    }

    /// A run record of no stages, and the lockfile it names (a blob: not a record).
    fn run_in(store: &Store) -> Digest {
        let lockfile = store.put_bytes(prov_store::ObjectKind::Blob, b"lockfile").unwrap();
        put_record(store, &Record::Run(RunRecord::new("demo", lockfile, vec![]))).unwrap()
    }

    #[test]
    fn a_written_folder_imports_into_another_store_and_is_listed() {
        let (dir, from) = store();
        let run = run_in(&from);
        let folder = dir.path().join("manifests/demo");
        fs_err::create_dir_all(folder.parent().unwrap()).unwrap();
        // A file of an earlier run leaves.
        fs_err::create_dir(&folder).unwrap();
        fs_err::write(folder.join("stale.json"), "{}").unwrap();
        let written = write_committed_run(&from, &folder, &run).unwrap();
        assert_eq!(written, [format!("{}.json", run.to_hex()), RUN_FILE.to_owned()]);
        assert!(!folder.join("stale.json").exists());
        assert_eq!(committed_runs(&dir.path().join("manifests")), [("demo".to_owned(), run)]);

        let (_other_dir, to) = store();
        assert_eq!(import_committed_run(&to, &folder, &lockfile()).unwrap(), run);
        assert!(to.contains(&run));
    }

    /// A write killed part way leaves a hidden folder beside the committed one (here made by
    /// hand, as a kill between writing the records and `RUN` leaves it); it is no committed
    /// run, the committed folder is untouched, and the next write removes it.
    #[test]
    fn a_killed_write_leaves_the_folder_as_it_was() {
        let (dir, from) = store();
        let run = run_in(&from);
        let manifests = dir.path().join("manifests");
        let folder = manifests.join("demo");
        fs_err::create_dir_all(&manifests).unwrap();
        write_committed_run(&from, &folder, &run).unwrap();
        let before: Vec<_> = fs_err::read_dir(&folder).unwrap().map(|e| e.unwrap().file_name()).collect();
        let leftover = manifests.join(".demo.new-4242");
        fs_err::create_dir(&leftover).unwrap();
        fs_err::write(leftover.join(format!("{}.json", run.to_hex())), "half").unwrap();
        fs_err::write(leftover.join(RUN_FILE), format!("{run}\n")).unwrap();
        assert_eq!(committed_runs(&manifests), [("demo".to_owned(), run)]);
        let after: Vec<_> = fs_err::read_dir(&folder).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(before, after);
        write_committed_run(&from, &folder, &run).unwrap();
        assert!(!leftover.exists(), "the next write removes what a killed one left");
        let names: Vec<_> = fs_err::read_dir(&manifests).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["demo"]);
    }

    /// A folder handed over with a second run record of the same lockfile beside the one
    /// `RUN` names (forged stats, another source origin): only what `RUN` reaches is stored,
    /// so no later lookup of the lockfile's run can find the other.
    #[test]
    fn only_what_run_reaches_is_imported() {
        let (dir, from) = store();
        let run = run_in(&from);
        let folder = dir.path().join("demo");
        write_committed_run(&from, &folder, &run).unwrap();
        let planted = Record::Run(RunRecord::new("forged", lockfile(), vec![]));
        let planted_bytes = planted.to_bytes().unwrap();
        let planted_digest = Digest::of(&planted_bytes);
        fs_err::write(folder.join(format!("{}.json", planted_digest.to_hex())), &planted_bytes).unwrap();
        // And a file that is not what its name says, never read.
        fs_err::write(folder.join(format!("{}.json", Digest::of(b"x").to_hex())), b"y").unwrap();

        let (_d, to) = store();
        assert_eq!(import_committed_run(&to, &folder, &lockfile()).unwrap(), run);
        assert!(to.contains(&run) && !to.contains(&planted_digest));
    }

    /// `RUN` naming a replay record, or a run of another lockfile, is refused; a closure that
    /// reaches a replay record is refused; in each case nothing is stored (a review found a
    /// refused replay's import leaving a forged "identical" replay record as evidence).
    #[test]
    fn only_a_run_of_the_lockfile_and_what_runs_reach_are_imported() {
        let (dir, from) = store();
        let run = run_in(&from);
        let replay = Record::Replay(crate::ReplayRecord {
            schema: crate::SCHEMA_VERSION,
            lockfile: lockfile(),
            recording: run,
            envelope: crate::records::tests::envelope(),
            envelope_check: crate::EnvelopeCheck::Full,
            stages: vec![],
            divergence: None,
        });
        let replay_bytes = replay.to_bytes().unwrap();
        let replay_digest = Digest::of(&replay_bytes);
        let folder = dir.path().join("demo");
        write_committed_run(&from, &folder, &run).unwrap();
        fs_err::write(folder.join(format!("{}.json", replay_digest.to_hex())), &replay_bytes).unwrap();

        let (_d, to) = store();
        fs_err::write(folder.join(RUN_FILE), format!("{replay_digest}\n")).unwrap();
        let e = import_committed_run(&to, &folder, &lockfile()).unwrap_err();
        assert!(matches!(e, CommittedError::NotARunOf { .. }) && e.to_string().contains("a replay record"), "{e}");
        fs_err::write(folder.join(RUN_FILE), format!("{run}\n")).unwrap();
        let e = import_committed_run(&to, &folder, &Digest::of(b"another lockfile")).unwrap_err();
        assert!(matches!(e, CommittedError::NotARunOf { .. }) && e.to_string().contains("a run of lockfile"), "{e}");
        assert!(!to.contains(&run) && !to.contains(&replay_digest), "nothing stored");

        // A run whose stage list names the replay record: refused, nothing stored.
        let stages = vec![crate::RunStage { name: "s".parse().unwrap(), manifest: replay_digest }];
        let carrier = put_record(&from, &Record::Run(RunRecord::new("demo", lockfile(), stages))).unwrap();
        fs_err::write(folder.join(format!("{}.json", carrier.to_hex())), from.read(&carrier).unwrap()).unwrap();
        fs_err::write(folder.join(RUN_FILE), format!("{carrier}\n")).unwrap();
        let e = import_committed_run(&to, &folder, &lockfile()).unwrap_err();
        assert!(matches!(e, CommittedError::NotInARun { .. }) && e.is_integrity_failure(), "{e}");
        assert!(!to.contains(&carrier) && !to.contains(&replay_digest), "nothing stored");
    }

    #[test]
    fn a_file_that_is_not_what_its_name_says_or_a_run_that_is_not_there_is_refused() {
        let (dir, from) = store();
        let run = run_in(&from);
        let folder = dir.path().join("demo");
        write_committed_run(&from, &folder, &run).unwrap();
        let file = folder.join(format!("{}.json", run.to_hex()));
        let (_d, to) = store();

        // Edited by hand: the bytes no longer hash to the name.
        let original = fs_err::read(&file).unwrap();
        let edited = String::from_utf8(original.clone()).unwrap().replacen("demo", "dema", 1);
        fs_err::write(&file, &edited).unwrap();
        let e = import_committed_run(&to, &folder, &lockfile()).unwrap_err();
        assert!(matches!(e, CommittedError::NameMismatch { .. }) && e.is_integrity_failure(), "{e}");

        // Renamed to match, but then `RUN` names a record the folder lacks.
        fs_err::remove_file(&file).unwrap();
        fs_err::write(folder.join(format!("{}.json", Digest::of(edited.as_bytes()).to_hex())), &edited).unwrap();
        let e = import_committed_run(&to, &folder, &lockfile()).unwrap_err();
        assert!(matches!(e, CommittedError::RunNotAmong { .. }) && !e.is_integrity_failure(), "{e}");

        // Bytes that hash to their name but are not a record.
        let not_json = Digest::of(b"not json");
        fs_err::write(folder.join(format!("{}.json", not_json.to_hex())), b"not json").unwrap();
        fs_err::write(folder.join(RUN_FILE), format!("{not_json}\n")).unwrap();
        let e = import_committed_run(&to, &folder, &lockfile()).unwrap_err();
        assert!(matches!(e, CommittedError::NotARecord { .. }) && e.is_integrity_failure(), "{e}");

        fs_err::write(folder.join(RUN_FILE), "blake3:nope\n").unwrap();
        assert!(matches!(import_committed_run(&to, &folder, &lockfile()), Err(CommittedError::NotADigest { .. })));
        assert!(committed_runs(dir.path()).is_empty(), "a folder whose RUN names no digest is no committed run");
    }
}
