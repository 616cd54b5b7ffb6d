//! `prov license queue`.

use std::path::PathBuf;

use prov_license::queue::{Kind, ReviewSubject, gather, reading};
use prov_store::Access;
use prov_textfix::shown::visible;
use serde_json::json;

use super::resolve::{load_policy, load_run};
use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::Ui;

/// List the licenses, records and sources of a run that a reviewer still has to decide
///
/// Reads the run's `license` stages: every distinct license (declared strings grouped by
/// their SPDX reading), every record that declares a lineage (`derived_from` in its metadata:
/// the datasets it is derived from, each with its license) and the source upstream. A subject
/// is queued when the policy denies it or cannot judge it (`review`: unknown, ambiguous), or
/// when its lineage or its documents conflict with its declared license, and no reviewer
/// verdict decides it. Each comes with its evidence: the declared strings and how many
/// documents declare them, the SPDX reading and the rule that recognised it, the policy's rule
/// and reason, example record ids, the constituents and the compound check's findings, and for
/// a source directory its license files (`LICENSE`, `COPYING`, …) matched against the SPDX
/// license texts: a file whose text is a license the declaration does not name is a conflict.
/// Reviewer verdicts are those pinned in the run and those in the verdicts directory.
#[derive(Debug, clap::Args)]
pub(crate) struct QueueArgs {
    /// Run id (full or a prefix of at least 6 hex digits) or lockfile; default: the latest run
    run: Option<String>,
    /// License policy file (YAML), or the preset `permissive` (default)
    #[arg(long, value_name = "FILE")]
    policy: Option<String>,
    /// Also list the subjects that are allowed or already decided
    #[arg(long)]
    all: bool,
    /// The verdicts directory (default: `verdicts/` at the top of the git work tree)
    #[arg(long, value_name = "DIR")]
    verdicts: Option<PathBuf>,
}

pub(crate) fn cmd_license_queue(ui: &mut Ui, cx: &CommandContext, args: &QueueArgs) -> Result<(), CommandError> {
    let (store, root) = cx.open_store(Access::ReadOnly, true)?;
    let policy = load_policy(&cx.cwd, args.policy.as_deref().unwrap_or("permissive"))?;
    let run = load_run(&store, args.run.as_deref())?;
    let review = gather(&store, &run, &policy, &prov_review::verdicts_dir(&root, args.verdicts.as_deref()))?;
    ui.line(format!(
        "license review of run {} (recipe `{}`), policy `{}` {}",
        run.manifest,
        run.recipe(),
        policy.name(),
        policy.version()
    ))?;
    let mut queued = 0;
    for s in &review.subjects {
        if s.pending().is_some() {
            queued += 1;
        } else if !args.all {
            continue;
        }
        // "Unsigned" is said only where signatures are asked for or someone signs.
        let signed = s
            .verdict
            .as_ref()
            .and_then(|(d, _)| review.signed.get(d))
            .filter(|st| **st != prov_license::Signed::Unsigned || !policy.verdict_signers().is_empty());
        let mut data = s.to_json();
        if let (Some(v), Some(signed)) = (data.get_mut("verdict").filter(|v| !v.is_null()), signed) {
            v["signature"] = json!(signed.describe());
        }
        ui.json("subject", data)?;
        render(ui, s, signed)?;
    }
    for (path, why) in &review.refused {
        ui.json("refused_verdict", json!({"path": path, "why": why}))?;
        ui.line(format!(
            "\nrefused verdict {path}: {why}; the policy requires verdicts signed by {}",
            signer_names(&policy)
        ))?;
    }
    let decided = review.subjects.iter().filter(|s| s.verdict.is_some()).count();
    ui.json(
        "queue",
        json!({
            "run_manifest": run.manifest.to_string(),
            "recipe": run.recipe(),
            "policy": format!("{} {}", policy.name(), policy.version()),
            "subjects": review.subjects.len(),
            "queued": queued,
            "decided": decided,
        }),
    )?;
    ui.line(format!("\n{queued} of {} subjects to review, {decided} decided by a reviewer", review.subjects.len()))?;
    if queued > 0 {
        ui.line("decide with `prov license decide SUBJECT --allow|--deny --reason TEXT`")?;
    }
    Ok(())
}

fn render(ui: &mut Ui, s: &ReviewSubject, signed: Option<&prov_license::Signed>) -> Result<(), CommandError> {
    let state = s.pending().map_or("decided", prov_license::Status::as_str);
    let documents: u64 = s.declared.values().sum();
    // Declared strings come from the documents: a line break or an escape sequence in one
    // must not write a line of its own into the reviewer's queue.
    let id = s.id();
    ui.line(format!(
        "\n{state:<7} {}  ({} in stage `{}`, subject {})",
        visible(&id),
        count(documents),
        s.stage,
        s.digest
    ))?;
    let by = if s.kind == Kind::Source { "its documents declare" } else { "declared" };
    for (d, n) in &s.declared {
        ui.line(format!("  {by:<12} `{}` ({})", visible(d), count(*n)))?;
    }
    ui.line(format!("  reading      {}", reading(&s.license)))?;
    ui.line(format!(
        "  policy       {} by `{}`: {}",
        prov_license::status(&s.policy).as_str(),
        s.policy.rule,
        s.policy.reason
    ))?;
    if !s.records.is_empty() && s.kind != Kind::Record {
        ui.line(format!("  records      {}", s.records.join(", ")))?;
    }
    for (name, license) in &s.constituents {
        ui.line(format!("  derived from {}: `{}` ({})", visible(name), visible(license), reading(license)))?;
    }
    for (path, m) in &s.license_files {
        let what = if m.licenses.is_empty() {
            format!("matches no SPDX license text (nearest `{}`, score {:.3})", m.nearest.0, m.nearest.1)
        } else {
            format!("the text of `{}` (score {:.3})", m.licenses.join("` or `"), m.nearest.1)
        };
        ui.line(format!("  license file {}: {what}", visible(path)))?;
    }
    for c in &s.conflicts {
        ui.line(format!("  conflict     {}", visible(c)))?;
    }
    if let Some((d, v)) = &s.verdict {
        let decision = match v.decision {
            prov_license::Decision::Allow => "allow",
            prov_license::Decision::Deny => "deny",
        };
        ui.line(format!(
            "  verdict      {decision} by {} at {} ({d})",
            v.reviewer,
            v.decided_at.as_deref().unwrap_or("?")
        ))?;
        if let Some(signed) = signed {
            ui.line(format!("  signature    {}", signed.describe()))?;
        }
    }
    Ok(())
}

fn signer_names(policy: &prov_license::Policy) -> String {
    policy.verdict_signers().iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(" or ")
}

fn count(n: u64) -> String {
    crate::ui::count(usize::try_from(n).unwrap_or(usize::MAX), "document")
}
