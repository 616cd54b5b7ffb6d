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
//! the store's `consent/` directory, holding the recipe it came from.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use prov_manifest::{Lockfile, encode_value};
use prov_store::{Digest, Hasher};

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

/// Records that the user adopted `closure`, locked from the recipe `recipe` (for the reader
/// of the store; the check looks at the closure alone). Written atomically. Returns true when
/// the closure was not adopted before, so that the caller can tell the user what they just
/// agreed to run.
///
/// # Errors
///
/// When the record cannot be written.
pub fn adopt(store_root: &Path, closure: &Digest, recipe: &str) -> Result<bool, prov_store::StoreError> {
    let path = record_path(store_root, closure);
    if path.is_file() {
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        fs_err::create_dir_all(dir)?;
    }
    prov_store::write_atomically(&store_root.join("tmp"), &path, format!("{recipe}\n").as_bytes())?;
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

/// True when the user adopted `closure` in the store at `store_root`.
pub fn adopted(store_root: &Path, closure: &Digest) -> bool {
    record_path(store_root, closure).is_file()
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
        let dir = tempfile::tempdir().unwrap();
        let closure = Digest::of(b"closure");
        assert!(!adopted(dir.path(), &closure));
        assert!(adopt(dir.path(), &closure, "recipes/r.yaml").unwrap(), "adopted for the first time");
        assert!(adopted(dir.path(), &closure) && !adopted(dir.path(), &Digest::of(b"other")));
        assert!(!adopt(dir.path(), &closure, "recipes/r.yaml").unwrap(), "adopted before");
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
