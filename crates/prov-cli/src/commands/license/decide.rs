//! `prov license decide`.

use std::path::{Path, PathBuf};

use prov_license::queue::{Kind, find_subject, gather};
use prov_license::{Decision, Review, reviewer_verdict, verdict_path};
use prov_manifest::{Record, put_record};
use prov_store::Access;
use serde_json::json;

use super::resolve::{load_policy, load_run, verdicts_dir};
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
    let dir = verdicts_dir(&root, args.verdicts.as_deref());
    let review = gather(&store, &run, &policy, &dir)?;
    let subject = find_subject(&review, &args.subject)?;
    let (repo, workdir) = crate::git::open_repo(&root, "`prov license decide`")?;
    let reviewer = crate::git::identity(&repo)?;
    let decided_at = format_time(CommandContext::clock()()).replacen(' ', "T", 1);
    let decision = if args.allow { Decision::Allow } else { Decision::Deny };
    let verdict = reviewer_verdict(
        subject.digest,
        &Review {
            license: &subject.license,
            record: (subject.kind == Kind::Record).then_some(subject.name.as_str()),
            decision,
            policy: &policy,
            reviewer: &reviewer,
            reason: &args.reason,
            decided_at: &decided_at,
        },
    )
    .map_err(|e| CommandError::input(e.to_string()).with_hint("pass `--reason TEXT` saying why"))?;
    let record = Record::Verdict(verdict.clone());
    let digest = put_record(&store, &record)?;
    let bytes = store.read(&digest)?;

    // Compared lexically (`x/../..` leaves), then created without following a link out.
    let outside = || {
        CommandError::input(format!("the verdicts directory `{}` is outside the git work tree", dir.display()))
            .with_hint("pass a `--verdicts` directory inside the repository")
    };
    let rel_dir =
        prov_exec::absolute(&dir).strip_prefix(prov_exec::absolute(&workdir)).map_err(|_| outside())?.to_owned();
    let rel = rel_dir.join(verdict_path(&verdict));
    let parent = rel.parent().unwrap_or(Path::new(""));
    let file = crate::inside::project_dir(&workdir, parent)?.join(rel.file_name().unwrap_or_default());
    let rel = rel.to_string_lossy().replace('\\', "/");
    let replaced = fs_err::read(&file).ok().map(|b| prov_store::Digest::of(&b)).filter(|d| *d != digest);
    prov_store::write_atomically(&store.root().join("tmp"), &file, &bytes)?;
    let mut paths = vec![rel.clone()];
    if let Some(key) = &key {
        let signature = prov_attest::sign_verdict(&verdict_path(&verdict), &bytes, &verdict, key);
        let sig_rel = prov_attest::verdict_signature_path(&rel);
        let sig_file = file.with_file_name(prov_attest::verdict_signature_path(
            &file.file_name().unwrap_or_default().to_string_lossy(),
        ));
        prov_store::write_atomically(&store.root().join("tmp"), &sig_file, &signature)?;
        paths.push(sig_rel);
    } else {
        // A signature of an earlier verdict on this subject no longer signs this one.
        let stale = file.with_file_name(prov_attest::verdict_signature_path(
            &file.file_name().unwrap_or_default().to_string_lossy(),
        ));
        if stale.exists() {
            fs_err::remove_file(&stale)?;
            paths.push(prov_attest::verdict_signature_path(&rel));
        }
    }
    let word = if args.allow { "allow" } else { "deny" };
    let message = format!(
        "prov license decide: {word} {}\n\nsubject: {}\ndecision: {word}\nreviewer: {reviewer}\npolicy: {}\nverdict: {digest}\nfile: {rel}\n\n{}\n",
        subject.id(),
        subject.id(),
        verdict.policy_version,
        args.reason.trim()
    );
    let commit = crate::git::commit_paths(&repo, &workdir, &paths, None, &message)?;
    ui.json(
        "verdict",
        json!({
            "subject": subject.id(),
            "decision": word,
            "reviewer": reviewer,
            "decided_at": decided_at,
            "policy": verdict.policy_version,
            "verdict": digest.to_string(),
            "replaces": replaced.map(|d| d.to_string()),
            "file": rel,
            "commit": commit.to_string(),
            "signed_by": key.as_ref().map(|k| k.public().keyid()),
        }),
    )?;
    ui.line(format!("{word} {} by {reviewer} at {decided_at}", subject.id()))?;
    ui.line(format!("verdict {digest}"))?;
    if let Some(old) = replaced {
        ui.line(format!("replaces verdict {old}"))?;
    }
    if let Some(k) = &key {
        ui.line(format!("signed by {} key {}", k.public().algorithm().name(), k.public().keyid()))?;
    }
    ui.line(format!("wrote {} and committed in {commit}", paths.join(" and ")))?;
    Ok(())
}
