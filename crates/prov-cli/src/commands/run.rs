//! `prov run`.

use std::path::PathBuf;

use prov_exec::{ExecOptions, RunReport, StageReport};
use prov_store::Access;
use serde_json::{Value, json};

use crate::commands::lock::{display_path, lock_to_file};
use crate::context::{CommandContext, registry};
use crate::error::CommandError;
use crate::resolve::load_lockfile;
use crate::ui::{StageProgress, Ui, table};

/// Run a lockfile (or lock and run a recipe), reusing cached stages
///
/// Executes the stages in plan order. A stage whose key (kind, version, config, input
/// manifests, seeds and, for non-portable stages, the envelope) matches a cached one, and
/// whose cached objects verify, is not executed again. A manifest is recorded at every stage
/// boundary, so a run that was killed resumes where it stopped when run again. Prints the run
/// id and a table of stages.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// Lockfile, run id, or recipe (`.yaml`/`.yml`, locked first)
    target: String,
    /// Write the lockfile and the run's manifests under `lockfiles/` and `manifests/` of the
    /// enclosing git repository and commit them
    #[arg(long)]
    commit: bool,
    /// Run the commands of a lockfile this project's recipe does not lock to (a lockfile
    /// from elsewhere); they run in the sandbox either way
    #[arg(long)]
    allow_commands: bool,
}

pub(crate) fn cmd_run(ui: &mut Ui, cx: &CommandContext, args: &RunArgs) -> Result<(), CommandError> {
    let (store, root) = cx.open_store(Access::Shared, true)?;
    let is_recipe = std::path::Path::new(&args.target)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
    let loaded = if is_recipe {
        let (outcome, _) = lock_to_file(&PathBuf::from(&args.target), None, &root, &store.root().join("tmp"))?;
        let shown = display_path(&outcome.path, &cx.cwd);
        if outcome.changed {
            ui.status(format!("locked {} into {shown}", args.target));
        }
        load_lockfile(&store, &shown)?
    } else {
        load_lockfile(&store, &args.target)?
    };
    crate::resolve::check_command_consent(&loaded, &root, args.allow_commands || is_recipe)?;
    let result = with_exec_options(ui, cx, &root, &loaded.display, |opts| {
        prov_exec::run(&store, &loaded.lockfile, &loaded.bytes, opts)
    });
    let report = result?;
    render_report(ui, &report, "run")?;
    if args.commit {
        let manifest = report.run_manifest.expect("a completed run has a run manifest");
        let outcome = crate::git::commit_run(&store, &root, &loaded, &manifest)?;
        ui.json("commit", json!({ "commit": outcome.commit, "files": outcome.files }))?;
        ui.line(format!("committed {} files in {}", outcome.files, outcome.commit))?;
    }
    Ok(())
}

/// Builds the options of an execution (threads, envelope, clock, progress bar) and runs `f`
/// with them; shared by `run` and `replay`.
pub(crate) fn with_exec_options<T>(
    ui: &Ui,
    cx: &CommandContext,
    root: &std::path::Path,
    lockfile_display: &str,
    f: impl FnOnce(&ExecOptions<'_>) -> Result<T, prov_exec::ExecError>,
) -> Result<T, CommandError> {
    let threads = cx.threads()?;
    let registry = registry();
    let clock = CommandContext::clock();
    let progress = StageProgress::new(ui);
    let opts = ExecOptions {
        registry: &registry,
        threads,
        envelope: CommandContext::envelope(threads),
        project_root: root,
        lockfile_display,
        clock: &*clock,
        observer: &progress,
    };
    let result = f(&opts);
    progress.finish();
    Ok(result?)
}

/// Renders an execution's stages and summary, for `run` and `replay`.
pub(crate) fn render_report(ui: &mut Ui, report: &RunReport, mode: &str) -> Result<(), CommandError> {
    for s in &report.stages {
        ui.json("stage", stage_json(s))?;
    }
    let executed = report.stages.iter().filter(|s| s.status == prov_exec::StageStatus::Executed).count();
    ui.json(
        "run",
        json!({
            "mode": mode,
            "run_id": report.run_id.to_string(),
            "recipe": report.recipe,
            "run_manifest": report.run_manifest.map(|d| d.to_string()),
            "stages": report.stages.len(),
            "executed": executed,
            "diverged": report.divergence.is_some(),
            "replay_record": report.replay_record.map(|d| d.to_string()),
        }),
    )?;
    ui.line(format!("{mode} {} ({})", report.run_id, report.recipe))?;
    let rows: Vec<Vec<String>> = report
        .stages
        .iter()
        .map(|s| {
            let outputs: Vec<String> =
                s.record.outputs.iter().map(|(name, o)| format!("{name}={}", o.digest.short())).collect();
            vec![
                s.name.to_string(),
                s.stage_kind.clone(),
                s.status.as_str().to_owned(),
                format!("{:.2}s", s.millis as f64 / 1000.0),
                outputs.join(" "),
            ]
        })
        .collect();
    ui.line(table(&["stage", "kind", "status", "time", "outputs"], &rows))?;
    for s in &report.stages {
        render_filter_stats(ui, s)?;
    }
    for s in &report.stages {
        render_evaluation(ui, report, s)?;
    }
    if let Some(m) = report.run_manifest {
        ui.line(format!("run manifest {m}"))?;
    }
    if let Some(m) = report.replay_record {
        ui.line(format!("replay record {m}"))?;
    }
    Ok(())
}

/// Languages listed after a filter stage's rules, most words removed first.
const MAX_LANGUAGES_SHOWN: usize = 8;

/// Prints what a filter stage decided, per rule and per language, from its `by_rule` and
/// `removed_by_language` statistics (documents and words).
fn render_filter_stats(ui: &mut Ui, s: &StageReport) -> Result<(), CommandError> {
    let Some(serde_json::Value::Object(by_rule)) = s.record.stats.get("by_rule") else { return Ok(()) };
    let count = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or(0).to_string();
    let mut rows: Vec<Vec<String>> =
        by_rule.iter().map(|(rule, v)| vec![rule.clone(), count(v, "documents"), count(v, "words")]).collect();
    let mut more = 0;
    if let Some(serde_json::Value::Object(langs)) = s.record.stats.get("removed_by_language") {
        // The languages that lost the most words; the rest are in the stage manifest.
        let mut langs: Vec<(&String, &serde_json::Value)> = langs.iter().collect();
        langs.sort_by_key(|(l, v)| (std::cmp::Reverse(v["words"].as_u64().unwrap_or(0)), l.as_str()));
        more = langs.len().saturating_sub(MAX_LANGUAGES_SHOWN);
        rows.extend(
            langs
                .into_iter()
                .take(MAX_LANGUAGES_SHOWN)
                .map(|(l, v)| vec![format!("removed, language {l}"), count(v, "documents"), count(v, "words")]),
        );
    }
    ui.line(format!("\n{} ({}):", s.name, s.stage_kind))?;
    ui.line(table(&["rule", "documents", "words"], &rows))?;
    if more > 0 {
        ui.line(format!("… and {more} more languages: `prov show {}` lists them all", s.manifest))?;
    }
    Ok(())
}

/// Prints an evaluation stage's scores (`chrf-eval`: the model's corpus chrF beside its
/// baseline's), naming the stages whose checkpoints were compared; in `--json` mode one
/// `evaluation` line.
fn render_evaluation(ui: &mut Ui, report: &RunReport, s: &StageReport) -> Result<(), CommandError> {
    let stats = &s.record.stats;
    let (Some(model), Some(baseline)) =
        (stats.get("chrf").and_then(Value::as_f64), stats.get("baseline_chrf").and_then(Value::as_f64))
    else {
        return Ok(());
    };
    // The stage (and output) of this run that produced an input's checkpoint.
    let producer = |input: &str| -> String {
        let Some(digest) = s.record.inputs.get(input) else { return input.to_owned() };
        report
            .stages
            .iter()
            .find_map(|p| {
                p.record.outputs.iter().find(|(_, o)| o.digest == *digest).map(|(n, _)| format!("{}.{n}", p.name))
            })
            .unwrap_or_else(|| digest.short())
    };
    let (model_stage, baseline_stage) = (producer("model"), producer("baseline"));
    let examples = stats.get("examples").and_then(Value::as_u64).unwrap_or(0);
    ui.json(
        "evaluation",
        json!({
            "stage": s.name.to_string(),
            "metric": "chrF",
            "examples": examples,
            "model": {"checkpoint": model_stage, "score": model},
            "baseline": {"checkpoint": baseline_stage, "score": baseline},
            "difference": model - baseline,
        }),
    )?;
    ui.line(format!("\n{} ({}): chrF of greedy translations of {examples} held-out examples", s.name, s.stage_kind))?;
    let rows = vec![
        vec![model_stage, format!("{model:.2}"), String::new()],
        vec![baseline_stage, format!("{baseline:.2}"), "baseline".into()],
    ];
    ui.line(table(&["model", "chrF", ""], &rows))?;
    ui.line(format!("difference {:+.2} chrF points", model - baseline))?;
    Ok(())
}

fn stage_json(s: &StageReport) -> serde_json::Value {
    json!({
        "name": s.name.to_string(),
        "kind": s.stage_kind,
        "status": s.status.as_str(),
        "millis": s.millis,
        "manifest": s.manifest.to_string(),
        "key": s.record.key.to_string(),
        "outputs": s.record.outputs.iter().map(|(k, o)| (k.clone(), json!(o.digest.to_string()))).collect::<serde_json::Map<_, _>>(),
    })
}
