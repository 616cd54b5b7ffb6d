//! `prov verify`.

use std::fmt::Write as _;

use prov_exec::{Problem, check_store};
use prov_store::Access;
use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::{Ui, format_bytes};

/// Re-hash every object and check every manifest in the store
///
/// Streams every object through BLAKE3 on all threads (or `--threads`), decodes every
/// manifest, and exits 2 naming each object whose bytes no longer match its name, each
/// manifest that references it, and each run that depends on it.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyArgs {}

pub(crate) fn cmd_verify(ui: &mut Ui, cx: &CommandContext, _args: &VerifyArgs) -> Result<(), CommandError> {
    let (store, _) = cx.open_store(Access::ReadOnly, true)?;
    let threads = cx.threads()?;
    let check = check_store(&store, threads)?;
    ui.json(
        "verify",
        json!({
            "objects": check.objects,
            "bytes": check.bytes,
            "manifests": check.manifests,
            "damaged": check.damage.len(),
            "threads": threads,
        }),
    )?;
    for d in &check.damage {
        let problem = match &d.problem {
            Problem::Corrupt { actual } => json!({"kind": "corrupt", "actual": actual.to_string()}),
            Problem::Missing => json!({"kind": "missing"}),
            Problem::Invalid(e) => json!({"kind": "invalid", "error": e}),
        };
        ui.json(
            "damage",
            json!({
                "object": d.digest.to_string(),
                "problem": problem,
                "referrers": d.referrers.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "runs": d.runs.iter().map(|r| json!({
                    "run_id": r.run_id.to_string(),
                    "recipe": r.recipe,
                    "run_manifest": r.run_manifest.map(|m| m.to_string()),
                })).collect::<Vec<_>>(),
            }),
        )?;
    }
    for s in &check.stray {
        ui.warn(format!("stray file in the object directory: {}", s.display()));
    }
    ui.line(format!(
        "verified {} objects ({}), {} manifests, with {threads} threads",
        check.objects,
        format_bytes(check.bytes),
        check.manifests
    ))?;
    if check.is_clean() {
        ui.line("all objects match their digests")?;
        return Ok(());
    }
    let mut detail = String::new();
    for d in &check.damage {
        let what = match &d.problem {
            Problem::Corrupt { actual } => format!("corrupt (its bytes hash to {actual})"),
            Problem::Missing => "missing".to_owned(),
            Problem::Invalid(e) => format!("not a valid record: {e}"),
        };
        let _ = writeln!(detail, "  object {}: {what}", d.digest);
        for r in &d.referrers {
            let _ = writeln!(detail, "    referenced by manifest {r}");
        }
        let mut seen = std::collections::BTreeSet::new();
        for r in &d.runs {
            if seen.insert(r.run_id) {
                let _ = writeln!(detail, "    run {} ({}) depends on it", r.run_id, r.recipe);
            }
        }
    }
    Err(CommandError::integrity(format!("{} damaged objects in the store", check.damage.len()))
        .with_detail(detail.trim_end().to_owned())
        .with_hint("re-run the affected runs with `prov run` to rewrite objects they produce; sources must be re-imported from their origin"))
}
