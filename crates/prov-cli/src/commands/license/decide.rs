//! `prov license decide`.

use std::path::PathBuf;

use prov_license::Decision;
use prov_license::queue::{find_subject, gather};
use prov_store::Access;
use serde_json::json;

use super::resolve::{load_policy, load_run};
use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::{Ui, format_time};

/// Record a reviewer's verdict on a license, a record or a source, and commit it
///
/// SUBJECT is one of the subjects `prov license queue` lists: `license:KEY` (every document
/// declaring a license with that SPDX reading, in any spelling), `record:ID` (one record, such
/// as one Data Provenance Initiative data set, while it declares that license) or
/// `source:NAME` (the license a source declares), or a bare license string, record id or
/// source name when it names exactly one of them.
///
/// The verdict records the reviewer (`user.name <user.email>` from git's configuration), the
/// policy's name and version, the time (`decided_at`, as data: a human decision, not a run
/// output), the reason and the policy's own decision. It is written as a manifest into the
/// store and as canonical JSON into the verdicts directory (`verdicts/licenses/<key>.json` or
/// `verdicts/records/<id>.json`, replacing an earlier verdict on the same subject), then that
/// one file is committed with git, with a message naming the subject and the decision. The
/// next run of a recipe whose `license` stage takes the directory as its `verdicts` input uses
/// it. With `--key`, the verdict is also signed (an in-toto statement about the verdict file, in
/// a DSSE envelope) into `<file>.sig`, committed in the same commit.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("decision").required(true).args(["allow", "deny"])))]
pub(crate) struct DecideArgs {
    /// `license:KEY`, `record:ID`, `source:NAME`, or a bare string naming one of them
    subject: String,
    /// Allow the subject
    #[arg(long)]
    allow: bool,
    /// Deny the subject
    #[arg(long)]
    deny: bool,
    /// Why, in the reviewer's words (recorded in the verdict and the commit message)
    #[arg(long, value_name = "TEXT")]
    reason: String,
    /// Run id or lockfile whose license stages list the subject; default: the latest run
    #[arg(long, value_name = "RUN")]
    run: Option<String>,
    /// License policy file (YAML), or the preset `permissive` (default)
    #[arg(long, value_name = "FILE")]
    policy: Option<String>,
    /// The verdicts directory (default: `verdicts/` at the top of the git work tree)
    #[arg(long, value_name = "DIR")]
    verdicts: Option<PathBuf>,
    /// Sign the verdict with this private key (PEM or OpenSSH), into `<verdict file>.sig`
    /// beside it, committed with it: a license policy's `signed_verdicts` makes the queue
    /// refuse unsigned verdicts, and the audit's `verdict_signers` checks those a run used
    #[arg(long, value_name = "KEY")]
    key: Option<PathBuf>,
}

pub(crate) fn cmd_license_decide(ui: &mut Ui, cx: &CommandContext, args: &DecideArgs) -> Result<(), CommandError> {
    let key = args.key.as_ref().map(|k| prov_attest::SigningKey::read(&cx.cwd.join(k))).transpose()?;
    let (store, root) = cx.open_store(Access::Shared, true)?;
    let policy = load_policy(&cx.cwd, args.policy.as_deref().unwrap_or("permissive"))?;
    let run = load_run(&store, args.run.as_deref())?;
    let dir = prov_review::verdicts_dir(&root, args.verdicts.as_deref());
    let review = gather(&store, &run, &policy, &dir)?;
    let subject = find_subject(&review, &args.subject)?;
    let (repo, workdir) = prov_git::open_repo(&root, "`prov license decide`")?;
    let decided_at = format_time(CommandContext::clock()()).replacen(' ', "T", 1);
    let decision = if args.allow { Decision::Allow } else { Decision::Deny };
    let decided = prov_review::record_decision(
        &store,
        &repo,
        &workdir,
        &dir,
        subject,
        &prov_review::Decide {
            decision,
            reason: &args.reason,
            policy: &policy,
            decided_at: &decided_at,
            key: key.as_ref(),
        },
    )?;
    let word = prov_review::decision_word(decision);
    ui.json(
        "verdict",
        json!({
            "subject": subject.id(),
            "decision": word,
            "reviewer": decided.reviewer,
            "decided_at": decided_at,
            "policy": decided.verdict.policy_version,
            "verdict": decided.digest.to_string(),
            "replaces": decided.replaced.map(|d| d.to_string()),
            "file": decided.file,
            "commit": decided.commit,
            "signed_by": decided.signed_by,
        }),
    )?;
    ui.line(format!("{word} {} by {} at {decided_at}", subject.id(), decided.reviewer))?;
    ui.line(format!("verdict {}", decided.digest))?;
    if let Some(old) = decided.replaced {
        ui.line(format!("replaces verdict {old}"))?;
    }
    if let Some(k) = &key {
        ui.line(format!("signed by {} key {}", k.public().algorithm().name(), k.public().keyid()))?;
    }
    ui.line(format!("wrote {} and committed in {}", decided.paths.join(" and "), decided.commit))?;
    Ok(())
}
