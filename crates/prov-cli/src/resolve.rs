//! Turning what the user typed (a path, a run id, a hash prefix) into store objects.

use std::path::{Path, PathBuf};

use prov_manifest::{Lockfile, Record};
use prov_store::{Digest, Store};

use crate::context::registry;
use crate::error::CommandError;
use crate::ui::Ui;
use prov_textfix::shown::visible;

/// A lockfile and where it came from.
pub(crate) struct LoadedLockfile {
    pub lockfile: Lockfile,
    pub bytes: Vec<u8>,
    pub display: String,
}

/// The most a lockfile read from a path may hold: 64 MiB (sources are pinned by their trees'
/// digests, so a lockfile stays small whatever the data).
const MAX_LOCKFILE_BYTES: u64 = 64 << 20;

/// Reads a lockfile from a path, or from the store by run id (full or prefix).
pub(crate) fn load_lockfile(store: &Store, arg: &str) -> Result<LoadedLockfile, CommandError> {
    let path = Path::new(arg);
    let (bytes, display) = if path.is_file() {
        (prov_store::read_named_file(path, MAX_LOCKFILE_BYTES, "the lockfile")?, arg.to_owned())
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
        // Commands that take a file resolve it before asking here: this one takes an id.
        if let Ok(meta) = fs_err::metadata(arg) {
            let is = if meta.is_file() { "is a file" } else { "is not a regular file" };
            return Err(CommandError::input(format!("`{arg}` {is}; this command takes {article} {what} id"))
                .with_hint("give `blake3:<64 hex>`, or at least 6 hex digits of the id"));
        }
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

/// Refuses to run the commands of a lockfile unless the user adopted them: a lockfile's own
/// `allow_commands: true` is its author's word, and the author may be anyone who handed over
/// the file, with data and a recipe beside it. The commands are adopted when locking a recipe
/// in this store (`prov lock`, `prov run RECIPE`) recorded exactly this lockfile's command
/// closure ([`prov_exec::consent`]: the commands and everything they read), or for this one
/// execution by `--allow-commands`. `handed_inputs` says that earlier stages reuse outputs a
/// handed-over recording names (`prov replay --against DIR --from STAGE`): an adopted
/// command would then read bytes that nobody here made, so only `--allow-commands` runs it.
pub(crate) fn check_command_consent(
    loaded: &LoadedLockfile,
    store: &Store,
    allowed_by_user: bool,
    handed_inputs: bool,
) -> Result<(), CommandError> {
    // A lockfile that does not allow commands runs none: the executor refuses it, saying so.
    if !loaded.lockfile.allow_commands || allowed_by_user {
        return Ok(());
    }
    let registry = crate::context::registry();
    let Some(closure) = prov_exec::consent::command_closure(&loaded.lockfile, &registry) else {
        return Ok(());
    };
    if !handed_inputs && prov_exec::consent::adopted(store.root(), &closure) {
        return Ok(());
    }
    // Refused: name the first stage that runs a command, and the command.
    let (name, command) = prov_exec::consent::command_stages(&loaded.lockfile, &registry)
        .into_iter()
        .next()
        .map(|(name, command)| (name, if command.is_empty() { command } else { format!(" ({command})") }))
        .unwrap_or_default();
    if handed_inputs {
        return Err(CommandError::input(format!(
            "`{}` runs commands (stage `{name}`{command}), and with `--against` and `--from` the stages before \
             `--from` reuse the outputs that the handed-over recording names: the commands would read bytes \
             nobody here made",
            loaded.display
        ))
        .with_hint("replay without `--from`, or pass `--allow-commands` to run them on those bytes (in the sandbox)"));
    }
    Err(CommandError::input(format!(
        "`{}` runs commands (stage `{name}`{command}) that were not adopted in this store: no `prov lock` of a \
         recipe here locked these commands with what they read",
        loaded.display
    ))
    .with_hint(format!(
        "read its commands first; `prov lock {}` adopts them if that recipe is yours, and `--allow-commands` runs \
         them this once (in the sandbox, without network unless a stage asks for it)",
        visible(&loaded.lockfile.recipe.path)
    )))
}

/// The outcome of locking a recipe into its lockfile file (`prov lock`, `prov run RECIPE`).
pub(crate) struct LockOutcome {
    pub path: PathBuf,
    pub run_id: Digest,
    pub changed: bool,
    /// The stages whose commands this locking adopted for the first time, with their
    /// commands ([`prov_exec::consent::command_stages`]); empty when they were adopted before
    /// or there are none.
    pub adopted: Vec<(String, String)>,
}

impl LockOutcome {
    /// Tells the user which commands locking adopted: from now on `prov run` runs them in
    /// this store without `--allow-commands`. A recipe someone else wrote is locked the same
    /// way, so this is the moment to read them.
    pub(crate) fn report_adopted(&self, ui: &mut Ui) {
        for (stage, command) in &self.adopted {
            ui.status(format!("adopted the command of stage `{stage}` in this store: {command}"));
        }
    }
}

/// Locks `recipe` and writes the lockfile atomically. Locking a recipe is the user's act, so
/// the commands it locks to are adopted in the store at `store_root`
/// ([`check_command_consent`]).
pub(crate) fn lock_to_file(
    recipe: &Path,
    out: Option<&Path>,
    root: &Path,
    store_root: &Path,
) -> Result<(LockOutcome, prov_exec::Locked), CommandError> {
    let store_tmp = &store_root.join("tmp");
    let registry = registry();
    let locked = prov_exec::lock_recipe(&registry, recipe, root)?;
    let mut adopted = Vec::new();
    if let Some(closure) = prov_exec::consent::command_closure(&locked.lockfile, &registry)
        && prov_exec::consent::adopt(store_root, &closure, &locked.lockfile.recipe.path)?
    {
        adopted = prov_exec::consent::command_stages(&locked.lockfile, &registry);
    }
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
    Ok((LockOutcome { path, run_id, changed, adopted }, locked))
}

/// Shows a path relative to the current directory when it is below it.
pub(crate) fn display_path(path: &Path, cwd: &Path) -> String {
    path.strip_prefix(cwd).map_or_else(|_| path.display().to_string(), |p| p.display().to_string())
}
