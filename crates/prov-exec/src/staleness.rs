//! Whether a project's lockfiles still match their recipes, and whether the store holds a
//! completed run of each: what `prov status` reports.
//!
//! A lockfile is up to date when locking its recipe again now gives the same bytes; when it
//! does not, [`prov_manifest::LockfileDiff`] names what changed. Re-locking hashes every
//! source again, so this takes as long as `prov lock`.

use std::path::{Path, PathBuf};

use prov_manifest::{Lockfile, LockfileDiff, Record, RelPath};
use prov_store::{Digest, ExecutionRow, Store, StoreError};

use crate::builtin::{SourcePathError, confine_source};
use crate::error::ExecError;
use crate::lock::lock_recipe;
use crate::run::recorded_run;
use crate::stage::Registry;

/// Whether a lockfile still matches its recipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockState {
    /// Locking the recipe again gives the same bytes.
    UpToDate,
    /// The recipe or its sources changed since locking; what changed, in a few words.
    Stale(String),
    /// The recipe the lockfile names is not there.
    RecipeMissing,
    /// Locking the recipe again failed, or the recipe path leaves the project.
    Error(String),
    /// The file is not a lockfile.
    Invalid(String),
}

impl LockState {
    /// `up_to_date`, `stale`, `recipe_missing`, `error` or `invalid`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::UpToDate => "up_to_date",
            Self::Stale(_) => "stale",
            Self::RecipeMissing => "recipe_missing",
            Self::Error(_) => "error",
            Self::Invalid(_) => "invalid",
        }
    }

    /// One line for a person.
    pub fn describe(&self) -> String {
        match self {
            Self::UpToDate => "up to date".to_owned(),
            Self::Stale(what) if what.is_empty() => "stale: recipe or sources changed since locking".to_owned(),
            Self::Stale(what) => format!("stale: recipe or sources changed since locking ({what})"),
            Self::RecipeMissing => "recipe missing: cannot re-lock".to_owned(),
            Self::Error(e) => format!("cannot re-lock: {e}"),
            Self::Invalid(e) => format!("invalid: {e}"),
        }
    }
}

/// The status of one lockfile of a project.
#[derive(Debug, Clone)]
pub struct LockfileStatus {
    /// The lockfile's path relative to the project root.
    pub path: String,
    /// The BLAKE3 of its bytes.
    pub run_id: Digest,
    /// The lockfile, when it is one.
    pub lockfile: Option<Lockfile>,
    /// Whether the recipe it names exists in the project.
    pub recipe_exists: bool,
    /// Whether it still matches its recipe.
    pub state: LockState,
    /// The run manifest of its latest completed run in the store.
    pub recorded: Option<Digest>,
    /// Its latest execution in the store's log.
    pub last: Option<ExecutionRow>,
}

/// The project's `lockfiles/*.lock`, sorted; none when the folder does not exist.
///
/// # Errors
///
/// When the folder cannot be read.
pub fn project_lockfiles(root: &Path) -> Result<Vec<PathBuf>, StoreError> {
    let dir = root.join("lockfiles");
    let mut paths: Vec<PathBuf> = match fs_err::read_dir(&dir) {
        Ok(entries) => entries
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "lock") && p.is_file())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    paths.sort();
    Ok(paths)
}

/// Reads the lockfile at `path`, locks its recipe again and compares, and finds its latest
/// run in `store` and its latest execution in `executions` (the store's log, newest first).
///
/// # Errors
///
/// When the lockfile cannot be read or the store fails; a lockfile that does not parse or a
/// recipe that does not lock is a [`LockState`], not an error.
pub fn lockfile_status(
    registry: &Registry,
    store: &Store,
    root: &Path,
    path: &Path,
    executions: &[ExecutionRow],
) -> Result<LockfileStatus, ExecError> {
    let bytes = fs_err::read(path).map_err(StoreError::from)?;
    let run_id = prov_manifest::run_id(&bytes);
    let shown = path.strip_prefix(root).unwrap_or(path).display().to_string();
    let last = executions.iter().find(|e| e.run_id == run_id).cloned();
    let recorded = recorded_run(store, &run_id)?.map(|(m, _)| m);
    let lockfile = match Record::from_bytes(&bytes) {
        Ok(Record::Lockfile(l)) => l,
        invalid => {
            let why = match invalid {
                Ok(other) => format!("a {} record, not a lockfile", other.kind_name()),
                Err(e) => e.to_string(),
            };
            return Ok(LockfileStatus {
                path: shown,
                run_id,
                lockfile: None,
                recipe_exists: false,
                state: LockState::Invalid(why),
                recorded,
                last,
            });
        }
    };
    // A lockfile names its recipe; one written elsewhere may name a file outside the project,
    // which is not read (its lines would end up in error messages).
    let recipe = match lockfile.recipe.path.parse::<RelPath>() {
        Ok(rel) => match confine_source(root, &rel) {
            Ok((path, false)) => Ok(Some(path)),
            Ok((_, true)) | Err(SourcePathError::Io { .. }) => Ok(None),
            Err(e) => Err(e.to_string().replacen("source", "recipe", 1)),
        },
        Err(e) => Err(format!("recipe path: {e}")),
    };
    let recipe_exists = matches!(recipe, Ok(Some(_)));
    let state = match recipe {
        Ok(Some(recipe)) => match lock_recipe(registry, &recipe, root) {
            Ok(fresh) if fresh.bytes == bytes => LockState::UpToDate,
            Ok(fresh) => LockState::Stale(LockfileDiff::between(&lockfile, &fresh.lockfile).summary()),
            Err(e) => LockState::Error(e.message),
        },
        Ok(None) => LockState::RecipeMissing,
        Err(outside) => LockState::Error(outside),
    };
    Ok(LockfileStatus { path: shown, run_id, lockfile: Some(lockfile), recipe_exists, state, recorded, last })
}
