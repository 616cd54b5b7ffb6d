//! Which commands a user has adopted: a lockfile runs commands only when the user said so.
//!
//! A lockfile's `allow_commands: true` is its author's word, and the author may be anyone who
//! handed over the file, with the data it pins and a recipe beside it. So a file on disk is
//! no consent; an act of the user is. Locking a recipe (`prov lock`, or `prov run` of a
//! recipe) adopts the commands it locks to, and records them in the store; a lockfile runs
//! its commands when the store holds that record of exactly its commands, or when the user
//! passes `--allow-commands` for that one execution. Trust is recorded per store, as
//! direnv's `allow` or an editor's workspace trust record it per directory.
//!
//! What is adopted is the lockfile's *command closure* ([`command_closure`]): every stage
//! that runs commands, with everything it reads, transitively: the stages upstream with
//! their configs, and the sources with their paths and pinned bytes. So a lockfile that runs
//! the project's own command on another script (a source path changed) or on other bytes is
//! another closure, not adopted. The record is a file named by the closure's digest under
//! the store's `consent/` directory, holding the recipe it came from and a MAC: BLAKE3 keyed
//! with the user's consent key (32 random octets in `consent.key` of the user's state
//! directory, `PROV_STATE_DIR`, else `$XDG_STATE_HOME/provenant`, else
//! `~/.local/state/provenant`, made on first use, readable by the user only) over the closure
//! and the store's canonical path. A store is something a lockfile's author can hand over,
//! records included; a record whose MAC another key made, or that another store holds, is no
//! consent here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use prov_manifest::{Lockfile, encode_value};
use prov_store::{Digest, Hasher, StoreError};

use crate::Registry;

/// The directory of a store that holds the adopted closures.
const CONSENT_DIR: &str = "consent";

/// Returns the digest of `lockfile`'s command closure, or `None` when no stage of it runs
/// commands. The closure is the command-running stages and everything upstream of them,
/// each stage or source entry in canonical JSON, in name order, each with its length.
pub fn command_closure(lockfile: &Lockfile, registry: &Registry) -> Option<Digest> {
    let stages: BTreeMap<&str, _> = lockfile.stages.iter().map(|s| (s.name.as_str(), s)).collect();
    let sources: BTreeMap<&str, _> = lockfile.sources.iter().map(|s| (s.name.as_str(), s)).collect();
    let mut todo: Vec<&str> = lockfile
        .stages
        .iter()
        .filter(|s| registry.get(&s.stage_kind).is_some_and(|k| k.runs_commands()))
        .map(|s| s.name.as_str())
        .collect();
    if todo.is_empty() {
        return None;
    }
    let mut closure: BTreeSet<&str> = BTreeSet::new();
    while let Some(name) = todo.pop() {
        if !closure.insert(name) {
            continue;
        }
        if let Some(stage) = stages.get(name) {
            todo.extend(stage.inputs.values().map(|i| i.stage.as_str()));
        }
    }
    let mut hasher = Hasher::new();
    hasher.update(b"provenant command closure 1\n");
    for name in closure {
        let entry = match (stages.get(name), sources.get(name)) {
            (Some(stage), _) => serde_json::to_value(stage),
            (None, Some(source)) => serde_json::to_value(source),
            // An input naming nothing: the lockfile does not validate, and never runs.
            (None, None) => Ok(serde_json::Value::String(format!("missing {name}"))),
        };
        let bytes = entry.map(|v| encode_value(&v)).unwrap_or_default();
        hasher.update(&(bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Some(hasher.finalize())
}

/// The file that records the adoption of `closure` in the store at `store_root`.
fn record_path(store_root: &Path, closure: &Digest) -> PathBuf {
    store_root.join(CONSENT_DIR).join(closure.to_hex())
}

/// The file of the user's state directory that holds the consent key.
const KEY_FILE: &str = "consent.key";

/// The most of an adoption record that is read: a recipe path and a MAC.
const MAX_RECORD_BYTES: u64 = 8 << 10;

/// The user's state directory: `PROV_STATE_DIR`, else `$XDG_STATE_HOME/provenant`, else
/// `$HOME/.local/state/provenant`.
fn state_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("PROV_STATE_DIR")
        .or_else(|| var("XDG_STATE_HOME").map(|d| d.join("provenant")))
        .or_else(|| var("HOME").map(|h| h.join(".local/state/provenant")))
}

/// Reads the user's consent key from the state directory `dir`.
fn read_key(dir: &Path) -> Result<[u8; 32], StoreError> {
    let path = dir.join(KEY_FILE);
    let bytes = fs_err::read(&path)?;
    bytes.as_slice().try_into().map_err(|_| {
        StoreError::Io(std::io::Error::other(format!("{}: not a consent key (32 octets)", path.display())))
    })
}

/// Reads the user's consent key, making it on first use (32 octets of `/dev/urandom`, mode
/// 0600, created exclusively so that two processes agree on one key).
fn key_or_make(dir: &Path) -> Result<[u8; 32], StoreError> {
    use std::io::{Read as _, Write as _};
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = dir.join(KEY_FILE);
    if path.is_file() {
        return read_key(dir);
    }
    fs_err::create_dir_all(dir)?;
    let mut key = [0u8; 32];
    fs_err::File::open("/dev/urandom")?.read_exact(&mut key)?;
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path) {
        Ok(mut file) => {
            file.write_all(&key)?;
            file.sync_all()?;
            Ok(key)
        }
        // Another process made it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_key(dir),
        Err(e) => Err(StoreError::Io(e)),
    }
}

/// The MAC of an adoption: the user's key over the closure and the store's canonical path.
fn mac(key: &[u8; 32], store_root: &Path, closure: &Digest) -> String {
    let store = fs_err::canonicalize(store_root).unwrap_or_else(|_| store_root.to_owned());
    let mut hasher = blake3::Hasher::new_keyed(key);
    hasher.update(b"provenant consent 1\n");
    hasher.update(store.as_os_str().as_encoded_bytes());
    hasher.update(b"\n");
    hasher.update(closure.to_hex().as_bytes());
    hasher.finalize().to_hex().to_string()
}

/// Records that the user adopted `closure`, locked from the recipe `recipe` (for the reader
/// of the store), with its MAC. Written atomically. Returns true when the closure was not
/// adopted before, so that the caller can tell the user what they just agreed to run.
///
/// # Errors
///
/// When the record or the user's consent key cannot be written or read.
pub fn adopt(store_root: &Path, closure: &Digest, recipe: &str) -> Result<bool, StoreError> {
    let state = state_dir().ok_or_else(|| {
        StoreError::Io(std::io::Error::other(
            "no state directory for the consent key: set HOME, XDG_STATE_HOME or PROV_STATE_DIR",
        ))
    })?;
    adopt_in(&state, store_root, closure, recipe)
}

/// [`adopt`] with the consent key in the state directory `state`.
fn adopt_in(state: &Path, store_root: &Path, closure: &Digest, recipe: &str) -> Result<bool, StoreError> {
    if adopted_in(state, store_root, closure) {
        return Ok(false);
    }
    let key = key_or_make(state)?;
    let path = record_path(store_root, closure);
    if let Some(dir) = path.parent() {
        fs_err::create_dir_all(dir)?;
    }
    // The recipe goes on one line: a path with a line break cannot forge the MAC line.
    let recipe = recipe.replace(['\n', '\r'], " ");
    let record = format!("{recipe}\n{}\n", mac(&key, store_root, closure));
    prov_store::write_atomically(&store_root.join("tmp"), &path, record.as_bytes())?;
    Ok(true)
}

/// The stages of `lockfile` that run commands, in lockfile order, each with its command as
/// the lockfile writes it (its `command` parameter in JSON, empty when it has none): what a
/// user adopting or refusing the commands needs to read.
pub fn command_stages(lockfile: &Lockfile, registry: &Registry) -> Vec<(String, String)> {
    lockfile
        .stages
        .iter()
        .filter(|s| registry.get(&s.stage_kind).is_some_and(|k| k.runs_commands()))
        .map(|s| (s.name.to_string(), s.config.get("command").map_or_else(String::new, ToString::to_string)))
        .collect()
}

/// True when the user adopted `closure` in the store at `store_root`: its record is there
/// and holds the MAC that this user's key gives for this store and closure.
pub fn adopted(store_root: &Path, closure: &Digest) -> bool {
    state_dir().is_some_and(|state| adopted_in(&state, store_root, closure))
}

/// [`adopted`] with the consent key in the state directory `state`.
fn adopted_in(state: &Path, store_root: &Path, closure: &Digest) -> bool {
    use std::io::Read as _;
    // Looked at before it is opened, and read up to a record's size: a store handed over can
    // hold a FIFO (opening it waits for a writer) or a link to `/dev/zero` under the name.
    let path = record_path(store_root, closure);
    if !fs_err::metadata(&path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut text = String::new();
    let Ok(file) = fs_err::File::open(&path) else { return false };
    if file.take(MAX_RECORD_BYTES).read_to_string(&mut text).is_err() {
        return false;
    }
    let Ok(key) = read_key(state) else { return false };
    let expected = mac(&key, store_root, closure);
    // Compared as BLAKE3 hashes, in constant time.
    text.lines().nth(1).and_then(|line| blake3::Hash::from_hex(line).ok()) == blake3::Hash::from_hex(&expected).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn locked(recipe: &str) -> Lockfile {
        let dir = tempfile::tempdir().unwrap();
        fs_err::write(dir.path().join("script.sh"), "echo ok > out.txt\n").unwrap();
        fs_err::write(dir.path().join("other.sh"), "echo other > out.txt\n").unwrap();
        fs_err::write(dir.path().join("r.yaml"), recipe).unwrap();
        crate::lock_recipe(&Registry::with_builtins(), &dir.path().join("r.yaml"), dir.path()).unwrap().lockfile
    }

    const RECIPE: &str = "schema: 1\nname: r\nseed: 1\nallow_commands: true\nsources:\n  script:\n    path: script.sh\n\
                          stages:\n  cmd:\n    kind: external\n    inputs: {script: script}\n    params:\n      \
                          command: [sh, inputs/script]\n      outputs: {out: out.txt}\n";

    /// The same command on another script, or another command, is another closure; a
    /// lockfile without commands has none.
    #[test]
    fn a_closure_holds_the_commands_and_what_they_read() {
        let registry = Registry::with_builtins();
        let base = command_closure(&locked(RECIPE), &registry).unwrap();
        assert_eq!(command_closure(&locked(RECIPE), &registry), Some(base));
        let other_script = RECIPE.replace("path: script.sh", "path: other.sh");
        assert_ne!(command_closure(&locked(&other_script), &registry), Some(base));
        let other_command = RECIPE.replace("[sh, inputs/script]", "[sh, -c, 'echo x > out.txt']");
        assert_ne!(command_closure(&locked(&other_command), &registry), Some(base));
        let none = "schema: 1\nname: r\nseed: 1\nsources:\n  script:\n    path: script.sh\nstages: {}\n";
        assert_eq!(command_closure(&locked(none), &registry), None);
    }

    #[test]
    fn an_adopted_closure_is_recorded_in_the_store() {
        let (dir, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let closure = Digest::of(b"closure");
        assert!(!adopted_in(state.path(), dir.path(), &closure));
        assert!(adopt_in(state.path(), dir.path(), &closure, "recipes/r.yaml").unwrap(), "adopted for the first time");
        assert!(adopted_in(state.path(), dir.path(), &closure));
        assert!(!adopted_in(state.path(), dir.path(), &Digest::of(b"other")));
        assert!(!adopt_in(state.path(), dir.path(), &closure, "recipes/r.yaml").unwrap(), "adopted before");
        let key = fs_err::metadata(state.path().join(KEY_FILE)).unwrap();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&key.permissions()) & 0o777, 0o600);
    }

    /// A store handed over with its adoption records is no consent: another user's key made
    /// their MACs. Copied to another path, a store's records are not this store's either, and
    /// a record without its MAC (as written before the key) is none.
    #[test]
    fn adoptions_are_this_users_and_this_stores() {
        let (author, victim) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (store, closure) = (tempfile::tempdir().unwrap(), Digest::of(b"closure"));
        adopt_in(author.path(), store.path(), &closure, "recipes/r.yaml").unwrap();
        assert!(adopted_in(author.path(), store.path(), &closure));
        assert!(!adopted_in(victim.path(), store.path(), &closure), "the author's record");
        adopt_in(victim.path(), tempfile::tempdir().unwrap().path(), &closure, "r").unwrap();
        assert!(!adopted_in(victim.path(), store.path(), &closure), "the victim's key, the author's MAC");

        let copy = tempfile::tempdir().unwrap();
        fs_err::create_dir_all(copy.path().join(CONSENT_DIR)).unwrap();
        let record = record_path(store.path(), &closure);
        fs_err::copy(&record, record_path(copy.path(), &closure)).unwrap();
        assert!(!adopted_in(author.path(), copy.path(), &closure), "another store's record");

        fs_err::write(&record, "recipes/r.yaml\n").unwrap();
        assert!(!adopted_in(author.path(), store.path(), &closure), "no MAC");

        // A FIFO under the record's name is not waited on (a review found `prov lock` hanging).
        fs_err::remove_file(&record).unwrap();
        assert!(std::process::Command::new("mkfifo").arg(&record).status().unwrap().success());
        assert!(!adopted_in(author.path(), store.path(), &closure), "a FIFO");
    }

    #[test]
    fn command_stages_name_each_stage_and_its_command() {
        let registry = Registry::with_builtins();
        assert_eq!(
            command_stages(&locked(RECIPE), &registry),
            [("cmd".to_owned(), r#"["sh","inputs/script"]"#.to_owned())]
        );
    }
}
