//! Lockfiles: a recipe with every input pinned by hash, every default and seed explicit.
//!
//! A lockfile is a canonical record (`"kind":"lockfile"`); its BLAKE3 is the run id.

use std::collections::BTreeMap;

use prov_store::Digest;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::name::{Name, RelPath};
use crate::records::{Content, Determinism};

/// A pinned source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedSource {
    /// Source name (shares the namespace of stage names).
    pub name: Name,
    /// Path relative to the project root, `/`-separated, inside it: no component is empty,
    /// `.` or `..` (a lockfile that says otherwise does not decode).
    pub path: RelPath,
    /// The pinned bytes.
    pub content: Content,
    /// Declared license.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// Declared retrieval date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieved: Option<String>,
}

/// A reference to one output of a stage or source.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputRef {
    /// The producing stage or source.
    pub stage: Name,
    /// Its output name (`source` for sources).
    pub output: Name,
}

/// A stage with everything explicit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedStage {
    /// Stage name.
    pub name: Name,
    /// Stage kind.
    pub stage_kind: String,
    /// Implementation version of the kind at lock time.
    pub version: u32,
    /// Determinism class.
    pub determinism: Determinism,
    /// Canonical configuration with every default explicit.
    pub config: Value,
    /// Input name -> producing output.
    pub inputs: BTreeMap<String, InputRef>,
    /// Seed name -> seed.
    pub seeds: BTreeMap<String, u64>,
}

/// The recipe a lockfile was made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeRef {
    /// Recipe name.
    pub name: Name,
    /// Recipe path relative to the project root.
    pub path: String,
}

/// A lockfile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lockfile {
    /// Always [`crate::SCHEMA_VERSION`].
    pub schema: u32,
    /// The recipe.
    pub recipe: RecipeRef,
    /// Master seed.
    pub seed: u64,
    /// Whether `external` stages may run commands.
    pub allow_commands: bool,
    /// Sources sorted by name.
    pub sources: Vec<LockedSource>,
    /// Stages in plan order: topological, ties broken by name.
    pub stages: Vec<LockedStage>,
}

impl Lockfile {
    /// Returns the source with this name.
    pub fn source(&self, name: &Name) -> Option<&LockedSource> {
        self.sources.iter().find(|s| &s.name == name)
    }
    /// Returns the stage with this name.
    pub fn stage(&self, name: &Name) -> Option<&LockedStage> {
        self.stages.iter().find(|s| &s.name == name)
    }

    /// Checks what the executor relies on: sources sorted by name and unique, names unique
    /// across sources and stages, and every input referring to a source or an earlier stage
    /// (so that plan order is a topological order).
    pub fn validate(&self) -> Result<(), String> {
        for pair in self.sources.windows(2) {
            if pair[0].name >= pair[1].name {
                return Err(format!(
                    "sources must be sorted by name without duplicates: `{}` then `{}`",
                    pair[0].name, pair[1].name
                ));
            }
        }
        let mut seen: std::collections::BTreeSet<&Name> = self.sources.iter().map(|s| &s.name).collect();
        for stage in &self.stages {
            for (input, r) in &stage.inputs {
                // Input names become paths of external commands' inputs: names only.
                if let Err(e) = input.parse::<Name>() {
                    return Err(format!("stage `{}` input {e}", stage.name));
                }
                if !seen.contains(&r.stage) {
                    return Err(format!(
                        "stage `{}` input `{input}` refers to `{}`, which is not a source or an earlier stage",
                        stage.name, r.stage
                    ));
                }
            }
            if !seen.insert(&stage.name) {
                return Err(format!("`{}` is defined twice", stage.name));
            }
        }
        Ok(())
    }
}

/// Derives a seed from the master seed, the stage and the seed's name:
/// the first 8 bytes, little-endian, of
/// `BLAKE3("provenant/seed/v1" || 0x00 || master as u64 LE || stage || 0x00 || seed_name)`.
pub fn derive_seed(master: u64, stage: &str, seed_name: &str) -> u64 {
    let mut h = prov_store::Hasher::new();
    h.update(b"provenant/seed/v1\0");
    h.update(&master.to_le_bytes());
    h.update(stage.as_bytes());
    h.update(&[0]);
    h.update(seed_name.as_bytes());
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest.as_bytes()[..8]);
    u64::from_le_bytes(first)
}

/// Returns the run id of a lockfile's canonical bytes.
pub fn run_id(lockfile_bytes: &[u8]) -> Digest {
    Digest::of(lockfile_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_seeds_depend_on_every_part() {
        let s = derive_seed(1, "sample", "sample");
        assert_eq!(s, derive_seed(1, "sample", "sample"));
        assert_ne!(s, derive_seed(2, "sample", "sample"));
        assert_ne!(s, derive_seed(1, "sampl", "esample"));
        assert_ne!(s, derive_seed(1, "sample", "other"));
    }
}
