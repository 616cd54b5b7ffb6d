//! `prov license diff`.

use std::path::PathBuf;

use prov_license::queue::gather;
use prov_store::Access;
use serde_json::json;

use super::resolve::{load_policy, load_run};
use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::{Ui, table};

/// Show which license decisions flip between two license policies
///
/// Evaluates every license of a run's `license` stages (the strings its documents declare and
/// the licenses its sources declare) under both policies and lists those whose state changes
/// between `allow`, `deny` and `review` (the policy cannot judge: unknown, ambiguous), with the
/// policy rule that fired on each side. A subject that a reviewer verdict decides keeps that
/// decision under either policy; it is marked, since the verdict was taken under another
/// policy's view. Both policies are license policy files (YAML) or the preset
/// `permissive`.
#[derive(Debug, clap::Args)]
pub(crate) struct DiffArgs {
    /// The current policy (file or `permissive`)
    policy_a: String,
    /// The proposed policy (file or `permissive`)
    policy_b: String,
    /// Run id or lockfile whose licenses are compared; default: the latest run
    #[arg(long, value_name = "RUN")]
    run: Option<String>,
    /// Also list the licenses that do not flip
    #[arg(long)]
    all: bool,
    /// The verdicts directory (default: `verdicts/` at the top of the git work tree)
    #[arg(long, value_name = "DIR")]
    verdicts: Option<PathBuf>,
}

pub(crate) fn cmd_license_diff(ui: &mut Ui, cx: &CommandContext, args: &DiffArgs) -> Result<(), CommandError> {
    let a = load_policy(&cx.cwd, &args.policy_a)?;
    let b = load_policy(&cx.cwd, &args.policy_b)?;
    let (store, root) = cx.open_store(Access::ReadOnly, true)?;
    let run = load_run(&store, args.run.as_deref())?;
    let review = gather(&store, &run, &a, &prov_review::verdicts_dir(&root, args.verdicts.as_deref()))?;
    let comparisons = prov_review::policy_diff(&review, &a, &b);
    let mut rows = Vec::new();
    let mut flips = 0;
    for prov_review::PolicyFlip { comparison: c, verdict } in &comparisons {
        let verdict = *verdict;
        if c.flips() {
            flips += 1;
        } else if !args.all {
            continue;
        }
        let side =
            |s: &prov_license::Side| json!({"status": s.status.as_str(), "rule": s.rule.as_str(), "reason": s.reason});
        ui.json(
            "license",
            json!({
                "license": c.license,
                "key": c.key,
                "flips": c.flips(),
                "a": side(&c.a),
                "b": side(&c.b),
                "verdict": verdict.map(|(d, decision)| json!({"digest": d.to_string(), "decision": decision})),
            }),
        )?;
        rows.push(vec![
            c.key.clone(),
            format!("{} ({})", c.a.status.as_str(), c.a.rule),
            format!("{} ({})", c.b.status.as_str(), c.b.rule),
            verdict.map_or_else(String::new, |(d, decision)| {
                format!(
                    "reviewer: {} ({})",
                    if decision == prov_license::Decision::Allow { "allow" } else { "deny" },
                    d.short()
                )
            }),
        ]);
    }
    let names = (format!("{} {}", a.name(), a.version()), format!("{} {}", b.name(), b.version()));
    ui.json(
        "diff",
        json!({
            "policy_a": names.0,
            "policy_b": names.1,
            "run_manifest": run.manifest.to_string(),
            "licenses": comparisons.len(),
            "flips": flips,
        }),
    )?;
    ui.line(format!("licenses of run {} (recipe `{}`): `{}` -> `{}`", run.manifest, run.recipe(), names.0, names.1))?;
    if !rows.is_empty() {
        ui.line(table(&["license", &names.0, &names.1, "verdict"], &rows))?;
    }
    ui.line(format!("{flips} of {} licenses flip", comparisons.len()))?;
    Ok(())
}
