//! `prov diff`.

use std::collections::{BTreeMap, BTreeSet};

use prov_manifest::{Lockfile, Record, RunRecord, StageRecord, get_record};
use prov_store::{Access, Digest, Store};
use serde_json::{Value, json};

use crate::context::CommandContext;
use crate::error::{CommandError, ExitCode};
use crate::resolve::{LoadedLockfile, load_lockfile};
use crate::ui::{Ui, format_value};

/// Compare two runs: their lockfiles and, when both are recorded, their outputs
///
/// A and B are run ids (or prefixes of at least 6 hex digits) or lockfile paths. Reports the
/// recipe, the sources added, removed or changed (content, size, license), the stages added
/// or removed, and for stages in both every change of kind, version, determinism class,
/// configuration (by JSON path, e.g. `config.fraction: 0.5 -> 0.25`), inputs and seeds. When
/// this store holds a completed run of both, it then lists each stage whose output digests
/// or statistics differ.
///
/// Exits 0 whether or not they differ, like `git diff`; with `--exit-code`, exits 1 when
/// they differ.
#[derive(Debug, clap::Args)]
pub(crate) struct DiffArgs {
    /// First run: run id, prefix or lockfile path
    a: String,
    /// Second run: run id, prefix or lockfile path
    b: String,
    /// Exit 1 when the runs differ, 0 when they are the same
    #[arg(long)]
    exit_code: bool,
}

/// One difference at a JSON path; `None` means absent on that side.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Change {
    pub path: String,
    pub old: Option<Value>,
    pub new: Option<Value>,
}

impl Change {
    fn to_json(&self) -> Value {
        json!({ "path": self.path, "old": self.old, "new": self.new })
    }

    /// Renders `path: old -> new` with digests shortened.
    pub fn render(&self) -> String {
        let show = |v: &Option<Value>| v.as_ref().map_or_else(|| "(absent)".to_owned(), format_value);
        format!("{}: {} -> {}", self.path, show(&self.old), show(&self.new))
    }
}

/// The changes of one named entry (a source or a stage).
#[derive(Debug, Clone)]
pub(crate) struct NamedChanges {
    pub name: String,
    pub changes: Vec<Change>,
}

/// How two lockfiles differ.
#[derive(Debug, Clone, Default)]
pub(crate) struct LockfileDiff {
    /// Recipe name and path, master seed, `allow_commands`.
    pub recipe: Vec<Change>,
    pub sources_added: Vec<String>,
    pub sources_removed: Vec<String>,
    pub sources_changed: Vec<NamedChanges>,
    /// Stages as `(name, kind)`.
    pub stages_added: Vec<(String, String)>,
    pub stages_removed: Vec<(String, String)>,
    pub stages_changed: Vec<NamedChanges>,
}

impl LockfileDiff {
    pub fn is_empty(&self) -> bool {
        self.recipe.is_empty()
            && self.sources_added.is_empty()
            && self.sources_removed.is_empty()
            && self.sources_changed.is_empty()
            && self.stages_added.is_empty()
            && self.stages_removed.is_empty()
            && self.stages_changed.is_empty()
    }

    /// Names what changed in a few words: `source udhr, stage half`.
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

    fn to_json(&self) -> Value {
        let named = |v: &[NamedChanges]| {
            v.iter()
                .map(
                    |n| json!({ "name": n.name, "changes": n.changes.iter().map(Change::to_json).collect::<Vec<_>>() }),
                )
                .collect::<Vec<_>>()
        };
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

/// Compares two lockfiles field by field.
pub(crate) fn diff_lockfiles(a: &Lockfile, b: &Lockfile) -> LockfileDiff {
    let mut d = LockfileDiff::default();
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

fn without_name(v: Result<Value, serde_json::Error>) -> Value {
    let mut v = v.expect("lockfile entries are plain JSON");
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
pub(crate) fn diff_values(path: &str, a: Option<&Value>, b: Option<&Value>, out: &mut Vec<Change>) {
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

/// How the recorded outputs of one stage differ.
struct StageOutputs {
    name: String,
    outputs: Vec<Change>,
    stats: Vec<Change>,
}

/// The comparison of two recorded runs, or why there is none.
enum OutputComparison {
    Compared { a: Digest, b: Digest, stages: Vec<StageOutputs>, equal: usize },
    NotRecorded { which: Vec<&'static str> },
}

impl OutputComparison {
    fn differs(&self) -> bool {
        matches!(self, Self::Compared { stages, .. } if !stages.is_empty())
    }

    fn to_json(&self) -> Value {
        match self {
            Self::Compared { a, b, stages, equal } => json!({
                "compared": true,
                "a_run_manifest": a.to_string(),
                "b_run_manifest": b.to_string(),
                "equal_stages": equal,
                "stages": stages.iter().map(|s| json!({
                    "name": s.name,
                    "outputs": s.outputs.iter().map(Change::to_json).collect::<Vec<_>>(),
                    "stats": s.stats.iter().map(Change::to_json).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            }),
            Self::NotRecorded { which } => json!({ "compared": false, "not_recorded": which }),
        }
    }
}

fn stage_records(store: &Store, run: &RunRecord) -> Result<BTreeMap<String, (Digest, StageRecord)>, CommandError> {
    let mut out = BTreeMap::new();
    for s in &run.stages {
        match get_record(store, &s.manifest)? {
            Record::Stage(r) => {
                out.insert(s.name.to_string(), (s.manifest, r));
            }
            other => {
                return Err(CommandError::integrity(format!(
                    "run stage `{}` names manifest `{}`, which is a {} record, not a stage record",
                    s.name,
                    s.manifest,
                    other.kind_name()
                )));
            }
        }
    }
    Ok(out)
}

fn compare_outputs(store: &Store, a: &LoadedLockfile, b: &LoadedLockfile) -> Result<OutputComparison, CommandError> {
    let ra = prov_exec::recorded_run(store, &prov_manifest::run_id(&a.bytes))?;
    let rb = prov_exec::recorded_run(store, &prov_manifest::run_id(&b.bytes))?;
    let ((ma, ra), (mb, rb)) = match (ra, rb) {
        (Some(x), Some(y)) => (x, y),
        (x, y) => {
            let mut which = Vec::new();
            if x.is_none() {
                which.push("a");
            }
            if y.is_none() {
                which.push("b");
            }
            return Ok(OutputComparison::NotRecorded { which });
        }
    };
    let (sa, sb) = (stage_records(store, &ra)?, stage_records(store, &rb)?);
    let mut stages = Vec::new();
    let mut equal = 0;
    // In plan order of run a.
    for name in ra.stages.iter().map(|s| s.name.to_string()) {
        let (Some((da, a)), Some((db, b))) = (sa.get(&name), sb.get(&name)) else {
            continue;
        };
        let mut outputs = Vec::new();
        let mut stats = Vec::new();
        if da != db {
            let outs = |r: &StageRecord| -> Value {
                r.outputs.iter().map(|(k, o)| (k.clone(), json!(o.digest.to_string()))).collect()
            };
            diff_values("outputs", Some(&outs(a)), Some(&outs(b)), &mut outputs);
            let st = |r: &StageRecord| -> Value { r.stats.iter().map(|(k, v)| (k.clone(), v.clone())).collect() };
            diff_values("stats", Some(&st(a)), Some(&st(b)), &mut stats);
        }
        if outputs.is_empty() && stats.is_empty() {
            equal += 1;
        } else {
            stages.push(StageOutputs { name, outputs, stats });
        }
    }
    Ok(OutputComparison::Compared { a: ma, b: mb, stages, equal })
}

pub(crate) fn cmd_diff(ui: &mut Ui, cx: &CommandContext, args: &DiffArgs) -> Result<(), CommandError> {
    let (store, _) = cx.open_store(Access::ReadOnly, true)?;
    let a = load_lockfile(&store, &args.a)?;
    let b = load_lockfile(&store, &args.b)?;
    let (id_a, id_b) = (prov_manifest::run_id(&a.bytes), prov_manifest::run_id(&b.bytes));
    let lock_diff = diff_lockfiles(&a.lockfile, &b.lockfile);
    let outputs = compare_outputs(&store, &a, &b)?;
    let differ = id_a != id_b || outputs.differs();

    let side = |l: &LoadedLockfile, id: &Digest| json!({ "arg": l.display, "run_id": id.to_string(), "recipe": l.lockfile.recipe.name.as_str() });
    let mut data = lock_diff.to_json();
    data["a"] = side(&a, &id_a);
    data["b"] = side(&b, &id_b);
    data["differ"] = json!(differ);
    data["outputs"] = outputs.to_json();
    ui.json("diff", data)?;

    ui.line(format!("a: {} (run {}, recipe {})", a.display, id_a.short(), a.lockfile.recipe.name))?;
    ui.line(format!("b: {} (run {}, recipe {})", b.display, id_b.short(), b.lockfile.recipe.name))?;
    if id_a == id_b {
        ui.line("same lockfile: no differences")?;
    } else if lock_diff.is_empty() {
        // Canonical bytes differ only where the typed view does not look (stage order).
        ui.line("the lockfiles differ in stage order only")?;
    }
    render_lockfile_diff(ui, &lock_diff)?;
    if id_a != id_b {
        render_outputs(ui, &outputs, &a, &b)?;
    }
    if differ && args.exit_code {
        return Err(CommandError::silent(ExitCode::Input));
    }
    Ok(())
}

fn render_lockfile_diff(ui: &mut Ui, d: &LockfileDiff) -> Result<(), CommandError> {
    if !d.recipe.is_empty() {
        ui.line("recipe")?;
        for c in &d.recipe {
            ui.line(format!("  ~ {}", c.render()))?;
        }
    }
    let any_sources = !(d.sources_added.is_empty() && d.sources_removed.is_empty() && d.sources_changed.is_empty());
    if any_sources {
        ui.line("sources")?;
        for n in &d.sources_added {
            ui.line(format!("  + {n}"))?;
        }
        for n in &d.sources_removed {
            ui.line(format!("  - {n}"))?;
        }
        render_named(ui, &d.sources_changed)?;
    }
    let any_stages = !(d.stages_added.is_empty() && d.stages_removed.is_empty() && d.stages_changed.is_empty());
    if any_stages {
        ui.line("stages")?;
        for (n, k) in &d.stages_added {
            ui.line(format!("  + {n} ({k})"))?;
        }
        for (n, k) in &d.stages_removed {
            ui.line(format!("  - {n} ({k})"))?;
        }
        render_named(ui, &d.stages_changed)?;
    }
    Ok(())
}

fn render_named(ui: &mut Ui, entries: &[NamedChanges]) -> Result<(), CommandError> {
    for n in entries {
        ui.line(format!("  ~ {}", n.name))?;
        for c in &n.changes {
            ui.line(format!("      {}", c.render()))?;
        }
    }
    Ok(())
}

fn render_outputs(
    ui: &mut Ui,
    outputs: &OutputComparison,
    a: &LoadedLockfile,
    b: &LoadedLockfile,
) -> Result<(), CommandError> {
    match outputs {
        OutputComparison::Compared { a: ma, b: mb, stages, equal } => {
            ui.line(format!("outputs (run manifests {} and {})", ma.short(), mb.short()))?;
            for s in stages {
                ui.line(format!("  ~ {}", s.name))?;
                for c in s.outputs.iter().chain(&s.stats) {
                    ui.line(format!("      {}", c.render()))?;
                }
            }
            let differing = stages.len();
            ui.line(format!("  {equal} stages in both runs with equal outputs, {differing} with different ones"))?;
        }
        OutputComparison::NotRecorded { which } => {
            let names: Vec<&str> =
                which.iter().map(|w| if *w == "a" { a.display.as_str() } else { b.display.as_str() }).collect();
            ui.line(format!(
                "outputs not compared: no completed run of {} in this store (run it with `prov run`)",
                names.join(" and ")
            ))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_diff_by_path() {
        let a = json!({"params": {"fraction": 0.5, "keep": [1, 2]}, "name": "x", "odd key": 1});
        let b = json!({"params": {"fraction": 0.25, "keep": [1, 3]}, "extra": true, "odd key": 2});
        let mut out = Vec::new();
        diff_values("", Some(&a), Some(&b), &mut out);
        let lines: Vec<String> = out.iter().map(Change::render).collect();
        assert_eq!(
            lines,
            [
                "extra: (absent) -> true",
                "name: \"x\" -> (absent)",
                "[\"odd key\"]: 1 -> 2",
                "params.fraction: 0.5 -> 0.25",
                "params.keep[1]: 2 -> 3",
            ]
        );
    }

    #[test]
    fn arrays_of_other_length_are_one_change() {
        let mut out = Vec::new();
        diff_values("cmd", Some(&json!(["a"])), Some(&json!(["a", "b"])), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].render(), "cmd: [\"a\"] -> [\"a\",\"b\"]");
    }
}
