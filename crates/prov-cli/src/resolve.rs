//! Turning what the user typed (a path, a run id, a hash prefix) into store objects.

use std::path::{Path, PathBuf};

use prov_manifest::{Lockfile, Record};
use prov_store::{Digest, Store};

use crate::context::registry;
use crate::error::CommandError;

/// A lockfile and where it came from.
pub(crate) struct LoadedLockfile {
    pub lockfile: Lockfile,
    pub bytes: Vec<u8>,
    pub display: String,
}

/// Reads a lockfile from a path, or from the store by run id (full or prefix).
pub(crate) fn load_lockfile(store: &Store, arg: &str) -> Result<LoadedLockfile, CommandError> {
    let path = Path::new(arg);
    let (bytes, display) = if path.is_file() {
        (fs_err::read(path)?, arg.to_owned())
    } else {
        let digest = resolve_run_id(store, arg)?;
        (store.read(&digest)?, digest.to_string())
    };
    match Record::from_bytes(&bytes) {
        Ok(Record::Lockfile(lockfile)) => Ok(LoadedLockfile { lockfile, bytes, display }),
        Ok(other) => Err(CommandError::input(format!("`{arg}` is a {} record, not a lockfile", other.kind_name()))),
        Err(e) => Err(CommandError::input(format!("`{arg}` is not a valid lockfile: {e}")).with_hint(
            "lockfiles are canonical JSON written by `prov lock`; re-lock the recipe rather than editing by hand",
        )),
    }
}

/// Resolves a run id given in full (`blake3:…`) or as a hex prefix of at least 6 digits.
pub(crate) fn resolve_run_id(store: &Store, arg: &str) -> Result<Digest, CommandError> {
    let runs: Vec<Digest> = {
        let mut v: Vec<Digest> = store.index().executions()?.into_iter().map(|e| e.run_id).collect();
        v.sort();
        v.dedup();
        v
    };
    resolve_among(arg, &runs, "run")
}

/// Resolves any object by full digest or hex prefix of at least 6 digits.
pub(crate) fn resolve_object(store: &Store, arg: &str) -> Result<Digest, CommandError> {
    if let Ok(d) = arg.parse::<Digest>() {
        return Ok(d);
    }
    resolve_among(arg, &store.list_objects()?, "object")
}

fn resolve_among(arg: &str, candidates: &[Digest], what: &str) -> Result<Digest, CommandError> {
    if let Ok(d) = arg.parse::<Digest>() {
        if candidates.contains(&d) {
            return Ok(d);
        }
        return Err(CommandError::input(format!("no {what} `{d}` in this store")));
    }
    let prefix = arg.strip_prefix("blake3:").unwrap_or(arg);
    if prefix.len() < 6 || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
        let article = if what.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
        return Err(CommandError::input(format!("`{arg}` is neither a file nor {article} {what} id"))
            .with_hint("give a path, `blake3:<64 hex>`, or at least 6 hex digits of the id"));
    }
    let prefix = prefix.to_ascii_lowercase();
    let matches: Vec<&Digest> = candidates.iter().filter(|d| d.to_hex().starts_with(&prefix)).collect();
    match matches.as_slice() {
        [one] => Ok(**one),
        [] => Err(CommandError::input(format!("no {what} id starts with `{prefix}`"))),
        many => Err(CommandError::input(format!("`{prefix}` is ambiguous: {} {what} ids start with it", many.len()))
            .with_hint("give more digits")),
    }
}

/// Refuses to run the commands of a lockfile this project did not write, unless the user says
/// so (`--allow-commands`): a lockfile's own `allow_commands: true` is its author's word, and
/// the author may be anyone who handed over the file. The commands are this project's when
/// `prov lock` of the recipe the lockfile names, in this project, gives the same
/// command-running stages (name, kind, config: the command itself), and that recipe is not
/// part of the data the lockfile pins (whoever handed over the data and the lockfile wrote
/// it); a source that changed since is another matter, which the run reports.
pub(crate) fn check_command_consent(
    loaded: &LoadedLockfile,
    root: &Path,
    allowed_by_user: bool,
) -> Result<(), CommandError> {
    // A lockfile that does not allow commands runs none: the executor refuses it, saying so.
    if !loaded.lockfile.allow_commands {
        return Ok(());
    }
    let registry = crate::context::registry();
    let Some(stage) =
        loaded.lockfile.stages.iter().find(|s| registry.get(&s.stage_kind).is_some_and(|k| k.runs_commands()))
    else {
        return Ok(());
    };
    if allowed_by_user {
        return Ok(());
    }
    let commands = |l: &prov_manifest::Lockfile| -> Vec<(String, String, Vec<u8>)> {
        l.stages
            .iter()
            .filter(|s| registry.get(&s.stage_kind).is_some_and(|k| k.runs_commands()))
            .map(|s| (s.name.to_string(), s.stage_kind.clone(), prov_manifest::encode_value(&s.config)))
            .collect()
    };
    let recipe = loaded
        .lockfile
        .recipe
        .path
        .parse::<prov_manifest::RelPath>()
        .ok()
        .and_then(|rel| prov_exec::confine_source(root, &rel).ok())
        .filter(|(_, is_dir)| !is_dir)
        .map(|(recipe, _)| recipe);
    let command = stage.config.get("command").map_or_else(String::new, |c| format!(" ({c})"));
    // A recipe that is part of the data the lockfile pins came with that data, from the
    // lockfile's author, as the lockfile did: it is not this project's word.
    if let Some(source) = recipe.as_ref().and_then(|r| pinned_source_holding(&loaded.lockfile, root, r)) {
        return Err(CommandError::input(format!(
            "`{}` runs commands (stage `{}`{command}) and names as its recipe `{}`, which lies in the data it pins \
             (source `{}`, `{}`): a recipe that comes with the data is not this project's",
            loaded.display, stage.name, loaded.lockfile.recipe.path, source.name, source.path
        ))
        .with_hint(CONSENT_HINT));
    }
    let ours = recipe
        .and_then(|recipe| prov_exec::lock_recipe(&registry, &recipe, root).ok())
        .is_some_and(|fresh| commands(&fresh.lockfile) == commands(&loaded.lockfile));
    if ours {
        return Ok(());
    }
    Err(CommandError::input(format!(
        "`{}` runs commands (stage `{}`{command}) and is not what this project's recipe `{}` locks to",
        loaded.display, stage.name, loaded.lockfile.recipe.path
    ))
    .with_hint(CONSENT_HINT))
}

/// What a refusal to run a lockfile's commands suggests.
const CONSENT_HINT: &str = "read its commands first; `--allow-commands` runs them (in the sandbox, without network unless a stage asks for it)";

/// The source of `lockfile` whose pinned file or directory holds `recipe` (a resolved path
/// in the project), if one does. Both are compared as resolved paths, so that a link to the
/// pinned directory or from it changes nothing.
fn pinned_source_holding<'l>(
    lockfile: &'l Lockfile,
    root: &Path,
    recipe: &Path,
) -> Option<&'l prov_manifest::LockedSource> {
    lockfile.sources.iter().find(|source| {
        prov_exec::confine_source(root, &source.path).is_ok_and(|(pinned, _)| recipe.starts_with(pinned))
    })
}

/// The outcome of locking a recipe into its lockfile file (`prov lock`, `prov run RECIPE`).
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
        None => prov_git::project_dir(root, std::path::Path::new("lockfiles"))?
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

/// Shows a path relative to the current directory when it is below it.
pub(crate) fn display_path(path: &Path, cwd: &Path) -> String {
    path.strip_prefix(cwd).map_or_else(|_| path.display().to_string(), |p| p.display().to_string())
}
