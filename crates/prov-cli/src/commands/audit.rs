//! `prov audit`: evaluate a policy's claims against a recorded run.

use std::path::PathBuf;

use prov_audit::{AuditOptions, AuditPolicy, Outcome, Report, RunContext, evaluate};
use prov_exec::ReplayRange;
use prov_store::{Access, Digest};
use serde_json::json;

use crate::context::CommandContext;
use crate::error::{CommandError, ExitCode};
use crate::resolve::load_lockfile;
use crate::ui::Ui;

/// Evaluate the claims of a policy file against a recorded run and write a report
///
/// Each claim of the policy (robots, robots-loss, pii, toxicity, license, compound-license,
/// decontamination, replay) is evaluated from the run's stage records, ledgers, datasets and verdicts in the
/// store, and says `holds`, `fails` or `cannot-be-decided`, with the evidence (digests, counts)
/// and what was re-checked. Every ledger a claim reads is checked against its recorded Merkle
/// roots; a damaged or rewritten ledger, verdict or dataset shard makes its claim fail, naming
/// the object. Exits 0 when every claim holds and 4 otherwise (the report is written either
/// way).
/// The book's "Auditing a run" chapter describes each claim.
#[derive(Debug, clap::Args)]
pub(crate) struct AuditArgs {
    /// Run id (full or a prefix of at least 6 hex digits) or lockfile path
    run: String,
    /// The policy file (YAML) listing the claims
    #[arg(long, value_name = "FILE")]
    policy: PathBuf,
    /// Report format: text (default), markdown or html
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    format: Format,
    /// Write the report to FILE instead of stdout
    #[arg(long, short, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Rescan only N documents, chosen by a seeded hash of their ids, and state the
    /// confidence of the sample
    #[arg(long, value_name = "N")]
    sample: Option<usize>,
    /// The seed of `--sample`
    #[arg(long, value_name = "S", default_value_t = 0, requires = "sample")]
    seed: u64,
    /// Replay the run first (as `prov replay` does), so that the replay claim is decided
    /// from a fresh replay
    #[arg(long)]
    replay: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    Text,
    Markdown,
    Html,
}

/// Reads and parses an audit policy file (relative to the working directory), with the digest
/// of its bytes, which a report records: `prov audit` and `prov serve --audit-policy`.
pub(crate) fn read_policy(cx: &CommandContext, file: &std::path::Path) -> Result<(AuditPolicy, Digest), CommandError> {
    let bytes = prov_store::read_named_file(&cx.cwd.join(file), prov_store::MAX_DOCUMENT_BYTES, "the policy")
        .map_err(|e| CommandError::input(format!("reading the policy: {e}")))?;
    let text =
        std::str::from_utf8(&bytes).map_err(|_| CommandError::input(format!("{}: not UTF-8", file.display())))?;
    Ok((AuditPolicy::parse(file, text)?, Digest::of(&bytes)))
}

pub(crate) fn cmd_audit(ui: &mut Ui, cx: &CommandContext, args: &AuditArgs) -> Result<(), CommandError> {
    let (policy, policy_digest) = read_policy(cx, &args.policy)?;

    // An audit without `--replay` only reads: it works on a read-only copy of a store.
    let access = if args.replay { Access::Shared } else { Access::ReadOnly };
    let (store, root) = cx.open_store(access, true)?;
    let loaded = load_lockfile(&store, &args.run)?;
    if args.replay {
        crate::resolve::check_command_consent(&loaded, &store, false, false)?;
        let report =
            cx.with_exec_options(ui, &root, &loaded.display, &crate::executor::ExecutorArgs::default(), |opts| {
                prov_exec::replay(&store, &loaded.lockfile, &loaded.bytes, &ReplayRange::default(), opts)
            })?;
        match &report.divergence {
            None => ui.status(format!("replayed {} stages: every output equal to the recording", report.stages.len())),
            Some(d) => ui.status(format!("replay diverged at stage `{}`", d.stage())),
        }
    }
    let run_id = prov_manifest::run_id(&loaded.bytes);
    let Some(recorded) = prov_exec::load_recorded_run(&store, &run_id)? else {
        return Err(CommandError::input(format!("no completed run of `{}` in this store", loaded.display))
            .with_hint("run it with `prov run` first; an audit reads a recorded run"));
    };
    let (run_manifest, run) = (recorded.manifest, &recorded.record);
    let context = RunContext::new(&store, &recorded);
    let options = AuditOptions { sample: args.sample.map(|n| (n, args.seed)), rescan: Some(&prov_audit::StageRescan) };
    let report = Report {
        policy: policy.name.clone(),
        policy_digest,
        recipe: run.recipe.clone(),
        run_manifest,
        run_root: run.root,
        claims: evaluate(&context, &policy, &options),
    };

    for claim in &report.claims {
        ui.json("claim", serde_json::to_value(claim).expect("a claim result serialises"))?;
    }
    let (holds, fails, undecided) = report.counts();
    ui.json(
        "audit",
        json!({
            "policy": report.policy,
            "policy_digest": report.policy_digest.to_string(),
            "recipe": report.recipe,
            "run_manifest": report.run_manifest.to_string(),
            "run_root": report.run_root.to_string(),
            "holds": holds,
            "fails": fails,
            "cannot_be_decided": undecided,
            "file": args.out.as_ref().map(|o| o.display().to_string()),
        }),
    )?;
    let rendered = match args.format {
        Format::Text => report.to_text(),
        Format::Markdown => report.to_markdown(),
        Format::Html => report.to_html(),
    };
    if let Some(out) = &args.out {
        cx.write_output(out, rendered.as_bytes(), "report")?;
        ui.status(format!("wrote {}", out.display()));
    } else {
        ui.line(rendered.trim_end())?;
    }
    if report.all_hold() {
        return Ok(());
    }
    for c in report.claims.iter().filter(|c| c.outcome != Outcome::Holds) {
        ui.status(format!("error: claim `{}` {}: {}", c.kind, c.outcome.as_str(), c.reasons.join("; ")));
    }
    // The report and each claim's reasons are out already: exit 4 with nothing more to say.
    Err(CommandError::silent(ExitCode::ClaimNotHeld))
}
