//! What more than one command prints: an execution's report (`run`, `replay`, `audit --replay`),
//! what a proof shows (`prove`, `verify-proof`) and one difference of `diff` and `status`.
//! Commands print through these; none imports another command.

use prov_audit::{Pins, Subject, Verified};
use prov_exec::{RunReport, StageReport};
use prov_manifest::Change;
use prov_textfix::shown::visible;
use serde_json::{Value, json};

use crate::error::CommandError;
use crate::ui::{Ui, format_value, table};

/// Renders `path: old -> new` with digests shortened.
pub(crate) fn change(c: &Change) -> String {
    let show = |v: &Option<Value>| v.as_ref().map_or_else(|| "(absent)".to_owned(), format_value);
    format!("{}: {} -> {}", c.path, show(&c.old), show(&c.new))
}

/// Renders an execution's stages and summary, for `run` and `replay`.
pub(crate) fn execution_report(ui: &mut Ui, report: &RunReport, mode: &str) -> Result<(), CommandError> {
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
    let mut value = json!({
        "name": s.name.to_string(),
        "kind": s.stage_kind,
        "status": s.status.as_str(),
        "millis": s.millis,
        "manifest": s.manifest.to_string(),
        "key": s.record.key.to_string(),
        "outputs": s.record.outputs.iter().map(|(k, o)| (k.clone(), json!(o.digest.to_string()))).collect::<serde_json::Map<_, _>>(),
    });
    if let Some(t) = s.tasks {
        value["tasks"] = json!({ "total": t.total, "reused": t.reused });
    }
    value
}

/// Returns the human-readable lines of what a valid proof shows, saying what pins it.
pub(crate) fn proof_summary(v: &Verified, pins: &Pins) -> Vec<String> {
    let head = if pins.run_manifest.is_some() {
        format!("proof valid: {} in run {} ({})", v.subject.describe(), v.run_id, v.recipe)
    } else if pins.root.is_some() {
        // The root pins the stage records; the run record's recipe and lockfile are not in it.
        format!(
            "proof valid: {} in the run with root {} (its run record says run {} of `{}`, which `--root` does not \
             pin; `--run` does)",
            v.subject.describe(),
            v.run_root,
            v.run_id,
            v.recipe
        )
    } else {
        format!(
            "proof NOT ANCHORED: consistent, but tied to no run you trust; it shows {} in a run whose records it \
             carries itself (run {} of `{}`, as it says)",
            v.subject.describe(),
            v.run_id,
            v.recipe
        )
    };
    let mut lines = vec![
        head,
        format!("  run root      {}", v.run_root),
        format!("  run manifest  {}", v.run_manifest),
        format!("  path          {}", v.path.join(" -> ")),
    ];
    if let (Subject::Url(_), Some(index)) = (&v.subject, &v.url_index) {
        lines.push(match v.ids.as_slice() {
            [] => format!("  never seen: no document has this URL (URL index of stage `{index}`)"),
            ids => format!(
                "  documents with this URL (URL index of stage `{index}`): {}",
                ids.iter().map(|id| visible(id)).collect::<Vec<_>>().join(", ")
            ),
        });
    }
    for stage in &v.stages {
        let head = format!("  {} ({})", stage.stage, stage.stage_kind);
        if stage.rows.is_empty() && !v.ids.is_empty() {
            lines.push(format!("{head}: absent, not in the stage's input (no row in its {} shards)", stage.shards));
        }
        for r in &stage.rows {
            let who = if v.ids.len() > 1 { format!(" `{}`", visible(&r.id)) } else { String::new() };
            let rule = visible(&r.rule);
            lines.push(format!("{head}:{who} {} by `{rule}` (shard {}, row {})", r.decision, r.shard, r.row));
        }
    }
    if let Some(t) = &v.training {
        let verdict = match t.reached {
            Some(true) => "reached the training data",
            Some(false) => "did not reach the training data",
            None => "cannot say: the stage writes no ledger",
        };
        lines.push(format!("  training data (`{}`, the `docs` of `{}`): {verdict}", t.dataset_stage, t.stage));
    } else {
        let (stage, kind) = &v.target;
        lines.push(format!(
            "  training data: not shown: the proof ends at stage `{stage}` ({kind}), not at a `tokenize` stage, \
             and shows nothing of the stages after it"
        ));
    }
    lines
}
