//! `prov diff`.

use prov_manifest::{LockfileDiff, NamedChanges, RunOutputsDiff};
use prov_store::{Access, Digest, Store};
use serde_json::{Value, json};

use crate::context::CommandContext;
use crate::error::{CommandError, ExitCode};
use crate::render;
use crate::resolve::{LoadedLockfile, load_lockfile};
use crate::ui::Ui;

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

/// The comparison of two recorded runs, or why there is none.
enum OutputComparison {
    Compared(RunOutputsDiff),
    NotRecorded { which: Vec<&'static str> },
}

impl OutputComparison {
    fn differs(&self) -> bool {
        matches!(self, Self::Compared(d) if d.differs())
    }

    fn to_json(&self) -> Value {
        match self {
            Self::Compared(d) => d.to_json(),
            Self::NotRecorded { which } => json!({ "compared": false, "not_recorded": which }),
        }
    }
}

/// Reads the latest completed run of each lockfile and compares their outputs.
fn compare_outputs(store: &Store, a: &LoadedLockfile, b: &LoadedLockfile) -> Result<OutputComparison, CommandError> {
    let ra = prov_exec::load_recorded_run(store, &prov_manifest::run_id(&a.bytes))?;
    let rb = prov_exec::load_recorded_run(store, &prov_manifest::run_id(&b.bytes))?;
    match (ra, rb) {
        (Some(ra), Some(rb)) => Ok(OutputComparison::Compared(RunOutputsDiff::between(&ra, &rb))),
        (x, y) => {
            let which =
                [("a", x.is_none()), ("b", y.is_none())].into_iter().filter(|(_, m)| *m).map(|(w, _)| w).collect();
            Ok(OutputComparison::NotRecorded { which })
        }
    }
}

pub(crate) fn cmd_diff(ui: &mut Ui, cx: &CommandContext, args: &DiffArgs) -> Result<(), CommandError> {
    let (store, _) = cx.open_store(Access::ReadOnly, true)?;
    let a = load_lockfile(&store, &args.a)?;
    let b = load_lockfile(&store, &args.b)?;
    let (id_a, id_b) = (prov_manifest::run_id(&a.bytes), prov_manifest::run_id(&b.bytes));
    let lock_diff = LockfileDiff::between(&a.lockfile, &b.lockfile);
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
            ui.line(format!("  ~ {}", render::change(c)))?;
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
            ui.line(format!("      {}", render::change(c)))?;
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
        OutputComparison::Compared(d) => {
            ui.line(format!("outputs (run manifests {} and {})", d.a.short(), d.b.short()))?;
            for s in &d.stages {
                ui.line(format!("  ~ {}", s.name))?;
                for c in s.outputs.iter().chain(&s.stats) {
                    ui.line(format!("      {}", render::change(c)))?;
                }
            }
            let (equal, differing) = (d.equal, d.stages.len());
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
