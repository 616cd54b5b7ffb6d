//! How two lockfiles, and two recorded runs, differ: field by field, by JSON path.
//!
//! `prov diff` prints these; `prov status` names what changed in a stale lockfile with
//! [`LockfileDiff::summary`]. Everything is ordered (keys sorted, stages in plan order), so
//! the same two inputs always give the same differences.

use std::collections::{BTreeMap, BTreeSet};

use prov_store::Digest;
use serde_json::{Value, json};

use crate::loaded_run::LoadedRun;
use crate::lockfile::Lockfile;

/// One difference at a JSON path; `None` means absent on that side.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Where: `params.fraction`, `outputs.docs`, `["odd key"]`, `cmd[2]`.
    pub path: String,
    /// The value in the first, or `None` when absent there.
    pub old: Option<Value>,
    /// The value in the second, or `None` when absent there.
    pub new: Option<Value>,
}

impl Change {
    /// `{"path", "old", "new"}`.
    pub fn to_json(&self) -> Value {
        json!({ "path": self.path, "old": self.old, "new": self.new })
    }
}

/// The changes of one named entry (a source or a stage).
#[derive(Debug, Clone, PartialEq)]
pub struct NamedChanges {
    /// The source's or stage's name.
    pub name: String,
    /// Its changes, by path.
    pub changes: Vec<Change>,
}

impl NamedChanges {
    fn to_json(&self) -> Value {
        json!({ "name": self.name, "changes": self.changes.iter().map(Change::to_json).collect::<Vec<_>>() })
    }
}

/// How two lockfiles differ.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LockfileDiff {
    /// Recipe name and path, master seed, `allow_commands`.
    pub recipe: Vec<Change>,
    /// Sources only in the second.
    pub sources_added: Vec<String>,
    /// Sources only in the first.
    pub sources_removed: Vec<String>,
    /// Sources in both that differ.
    pub sources_changed: Vec<NamedChanges>,
    /// Stages only in the second, as `(name, kind)`.
    pub stages_added: Vec<(String, String)>,
    /// Stages only in the first, as `(name, kind)`.
    pub stages_removed: Vec<(String, String)>,
    /// Stages in both that differ.
    pub stages_changed: Vec<NamedChanges>,
}

impl LockfileDiff {
    /// Compares two lockfiles field by field: the recipe, then sources and stages by name.
    pub fn between(a: &Lockfile, b: &Lockfile) -> Self {
        let mut d = Self::default();
        let top = |l: &Lockfile| {
            json!({
                "recipe": { "name": l.recipe.name.as_str(), "path": l.recipe.path },
                "seed": l.seed,
                "allow_commands": l.allow_commands,
            })
        };
        diff_values("", Some(&top(a)), Some(&top(b)), &mut d.recipe);

        let sources = |l: &Lockfile| -> BTreeMap<String, Value> {
            l.sources.iter().map(|s| (s.name.to_string(), without_name(serde_json::to_value(s)))).collect()
        };
        let (sa, sb) = (sources(a), sources(b));
        d.sources_removed = sa.keys().filter(|k| !sb.contains_key(*k)).cloned().collect();
        d.sources_added = sb.keys().filter(|k| !sa.contains_key(*k)).cloned().collect();
        d.sources_changed = changed_entries(&sa, &sb);

        let stages = |l: &Lockfile| -> BTreeMap<String, Value> {
            l.stages.iter().map(|s| (s.name.to_string(), without_name(serde_json::to_value(s)))).collect()
        };
        let kind_of = |l: &Lockfile, name: &str| {
            l.stages.iter().find(|s| s.name.as_str() == name).map(|s| s.stage_kind.clone()).unwrap_or_default()
        };
        let (ta, tb) = (stages(a), stages(b));
        d.stages_removed = ta.keys().filter(|k| !tb.contains_key(*k)).map(|k| (k.clone(), kind_of(a, k))).collect();
        d.stages_added = tb.keys().filter(|k| !ta.contains_key(*k)).map(|k| (k.clone(), kind_of(b, k))).collect();
        d.stages_changed = changed_entries(&ta, &tb);
        d
    }

    /// True when the two lockfiles state the same (they may still differ in stage order).
    pub fn is_empty(&self) -> bool {
        self.recipe.is_empty()
            && self.sources_added.is_empty()
            && self.sources_removed.is_empty()
            && self.sources_changed.is_empty()
            && self.stages_added.is_empty()
            && self.stages_removed.is_empty()
            && self.stages_changed.is_empty()
    }

    /// Names what changed in a few words: ``source `udhr`, stage `half` ``.
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if !self.recipe.is_empty() {
            parts.push(self.recipe.iter().map(|c| c.path.clone()).collect::<Vec<_>>().join(", "));
        }
        for (what, names) in [
            ("source", self.sources_added.iter().chain(&self.sources_removed).cloned().collect::<Vec<_>>()),
            ("source", self.sources_changed.iter().map(|n| n.name.clone()).collect()),
            ("stage", self.stages_added.iter().chain(&self.stages_removed).map(|(n, _)| n.clone()).collect()),
            ("stage", self.stages_changed.iter().map(|n| n.name.clone()).collect()),
        ] {
            parts.extend(names.into_iter().map(|n| format!("{what} `{n}`")));
        }
        parts.join(", ")
    }

    /// `{"recipe", "sources": {added, removed, changed}, "stages": {…}}`.
    pub fn to_json(&self) -> Value {
        let named = |v: &[NamedChanges]| v.iter().map(NamedChanges::to_json).collect::<Vec<_>>();
        let stages =
            |v: &[(String, String)]| v.iter().map(|(n, k)| json!({ "name": n, "kind": k })).collect::<Vec<_>>();
        json!({
            "recipe": self.recipe.iter().map(Change::to_json).collect::<Vec<_>>(),
            "sources": {
                "added": self.sources_added,
                "removed": self.sources_removed,
                "changed": named(&self.sources_changed),
            },
            "stages": {
                "added": stages(&self.stages_added),
                "removed": stages(&self.stages_removed),
                "changed": named(&self.stages_changed),
            },
        })
    }
}

fn without_name(v: Result<Value, serde_json::Error>) -> Value {
    // Lockfile entries are plain data (names, digests, finite numbers): they always encode.
    let mut v = v.unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.remove("name");
    }
    v
}

fn changed_entries(a: &BTreeMap<String, Value>, b: &BTreeMap<String, Value>) -> Vec<NamedChanges> {
    a.iter()
        .filter_map(|(name, va)| {
            let vb = b.get(name)?;
            let mut changes = Vec::new();
            diff_values("", Some(va), Some(vb), &mut changes);
            (!changes.is_empty()).then(|| NamedChanges { name: name.clone(), changes })
        })
        .collect()
}

/// Appends every difference between two JSON values to `out`, by path (`a.b[2]`), in key
/// order. Objects are compared key by key and arrays of equal length element by element;
/// anything else that differs is one change.
pub fn diff_values(path: &str, a: Option<&Value>, b: Option<&Value>, out: &mut Vec<Change>) {
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                diff_values(&join_key(path, k), x.get(k), y.get(k), out);
            }
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff_values(&format!("{path}[{i}]"), Some(p), Some(q), out);
            }
        }
        _ if a == b => {}
        _ => out.push(Change { path: path.to_owned(), old: a.cloned(), new: b.cloned() }),
    }
}

fn join_key(path: &str, key: &str) -> String {
    let plain = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    match (path.is_empty(), plain) {
        (true, true) => key.to_owned(),
        (false, true) => format!("{path}.{key}"),
        (_, false) => format!("{path}[{}]", Value::String(key.to_owned())),
    }
}

/// How the recorded outputs of one stage differ between two runs.
#[derive(Debug, Clone, PartialEq)]
pub struct StageOutputChanges {
    /// The stage.
    pub name: String,
    /// Output digests that differ (`outputs.docs`).
    pub outputs: Vec<Change>,
    /// Statistics that differ (`stats.rows`).
    pub stats: Vec<Change>,
}

/// How the outputs of two recorded runs differ, stage by stage.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutputsDiff {
    /// The first run's run manifest.
    pub a: Digest,
    /// The second run's run manifest.
    pub b: Digest,
    /// Stages of both whose outputs or statistics differ, in the first run's plan order.
    pub stages: Vec<StageOutputChanges>,
    /// How many stages of both have equal outputs and statistics.
    pub equal: usize,
}

impl RunOutputsDiff {
    /// Compares the stages the two runs share by name, in the first run's plan order.
    pub fn between(a: &LoadedRun, b: &LoadedRun) -> Self {
        let mut stages = Vec::new();
        let mut equal = 0;
        for sa in a.stages() {
            let Some(sb) = b.stage(sa.name()) else { continue };
            let mut outputs = Vec::new();
            let mut stats = Vec::new();
            if sa.manifest != sb.manifest {
                let outs = |r: &crate::StageRecord| -> Value {
                    r.outputs.iter().map(|(k, o)| (k.clone(), json!(o.digest.to_string()))).collect()
                };
                diff_values("outputs", Some(&outs(&sa.record)), Some(&outs(&sb.record)), &mut outputs);
                let st =
                    |r: &crate::StageRecord| -> Value { r.stats.iter().map(|(k, v)| (k.clone(), v.clone())).collect() };
                diff_values("stats", Some(&st(&sa.record)), Some(&st(&sb.record)), &mut stats);
            }
            if outputs.is_empty() && stats.is_empty() {
                equal += 1;
            } else {
                stages.push(StageOutputChanges { name: sa.name().to_owned(), outputs, stats });
            }
        }
        Self { a: a.manifest, b: b.manifest, stages, equal }
    }

    /// True when a stage's outputs or statistics differ.
    pub fn differs(&self) -> bool {
        !self.stages.is_empty()
    }

    /// `{"compared": true, "a_run_manifest", "b_run_manifest", "equal_stages", "stages"}`.
    pub fn to_json(&self) -> Value {
        json!({
            "compared": true,
            "a_run_manifest": self.a.to_string(),
            "b_run_manifest": self.b.to_string(),
            "equal_stages": self.equal,
            "stages": self.stages.iter().map(|s| json!({
                "name": s.name,
                "outputs": s.outputs.iter().map(Change::to_json).collect::<Vec<_>>(),
                "stats": s.stats.iter().map(Change::to_json).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(out: &[Change]) -> Vec<String> {
        out.iter().map(|c| format!("{}: {:?} -> {:?}", c.path, c.old, c.new)).collect()
    }

    #[test]
    fn values_diff_by_path() {
        let a = json!({"params": {"fraction": 0.5, "keep": [1, 2]}, "name": "x", "odd key": 1});
        let b = json!({"params": {"fraction": 0.25, "keep": [1, 3]}, "extra": true, "odd key": 2});
        let mut out = Vec::new();
        diff_values("", Some(&a), Some(&b), &mut out);
        assert_eq!(
            paths(&out),
            [
                "extra: None -> Some(Bool(true))",
                "name: Some(String(\"x\")) -> None",
                "[\"odd key\"]: Some(Number(1)) -> Some(Number(2))",
                "params.fraction: Some(Number(0.5)) -> Some(Number(0.25))",
                "params.keep[1]: Some(Number(2)) -> Some(Number(3))",
            ]
        );
    }

    #[test]
    fn arrays_of_other_length_are_one_change() {
        let mut out = Vec::new();
        diff_values("cmd", Some(&json!(["a"])), Some(&json!(["a", "b"])), &mut out);
        assert_eq!(out, [Change { path: "cmd".into(), old: Some(json!(["a"])), new: Some(json!(["a", "b"])) }]);
    }
}
