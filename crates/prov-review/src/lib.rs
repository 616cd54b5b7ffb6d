//! The license reviewer's side of Provenant, shared by `prov license decide | diff` and the
//! workbench's review pages, so that a verdict decided on a page is written exactly as the
//! command writes it.
//!
//! Owns: where reviewer verdicts live ([`verdicts_dir`]); reading the license policy a review
//! is made under ([`read_policy`]); recording a decision ([`record_decision`]: the verdict
//! manifest into the store, its canonical JSON into the verdicts directory, its signature
//! beside it when a key is given, and one git commit of exactly those files); and comparing
//! two policies over a run's review ([`policy_diff`]).
//!
//! Does not own what a license means or what a policy decides (`prov-license`: the queue is
//! [`prov_license::queue::gather`]), nor how a commit is made (`prov-git`), nor signatures
//! (`prov-attest`).

#![deny(missing_docs)]

use std::path::{Path, PathBuf};

use prov_attest::SigningKey;
use prov_license::queue::{Kind, Review, ReviewSubject};
use prov_license::{Comparison, Decision, Policy, reviewer_verdict, verdict_path};
use prov_manifest::{Record, VerdictRecord, put_record};
use prov_store::{Digest, Store};

/// Where reviewer verdicts live: `flag` (relative to the top of the git work tree enclosing
/// the project), or `verdicts/` there; the project root stands in for a project outside git.
pub fn verdicts_dir(root: &Path, flag: Option<&Path>) -> PathBuf {
    let top = prov_git::work_tree_top(root);
    match flag {
        Some(f) if f.is_absolute() => f.to_path_buf(),
        Some(f) => top.join(f),
        None => top.join("verdicts"),
    }
}

/// Why a license policy could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("reading the license policy: {0}")]
    Read(#[from] std::io::Error),
    /// The file is not a license policy (with its file, line and field).
    #[error(transparent)]
    Parse(#[from] prov_manifest::RecipeError),
}

/// The preset `permissive`, or the license policy file `arg` (YAML, relative to `base`).
///
/// # Errors
///
/// [`PolicyError`] when the file cannot be read or is not a policy.
pub fn read_policy(base: &Path, arg: &str) -> Result<Policy, PolicyError> {
    if arg == "permissive" {
        return Ok(Policy::permissive());
    }
    let text = prov_store::read_named_text(&base.join(arg), prov_store::MAX_DOCUMENT_BYTES, "the license policy")?;
    Ok(prov_license::parse_policy(Path::new(arg), &text)?)
}

/// A reviewer's decision on one subject of the queue.
pub struct Decide<'a> {
    /// Allow or deny.
    pub decision: Decision,
    /// Why, in the reviewer's words.
    pub reason: &'a str,
    /// The policy the review was made under.
    pub policy: &'a Policy,
    /// When, as `YYYY-MM-DDTHH:MM:SSZ` (data in the verdict: a human decision).
    pub decided_at: &'a str,
    /// The key that signs the verdict, if any.
    pub key: Option<&'a SigningKey>,
}

/// What [`record_decision`] wrote.
#[derive(Debug, Clone)]
pub struct Decided {
    /// The verdict.
    pub verdict: VerdictRecord,
    /// Its manifest's digest.
    pub digest: Digest,
    /// The reviewer, `Name <email>` from git's configuration.
    pub reviewer: String,
    /// The earlier verdict on the same subject that this one replaces.
    pub replaced: Option<Digest>,
    /// The verdict file, relative to the work tree.
    pub file: String,
    /// Every path of the commit (the verdict file, and its signature or a stale one removed).
    pub paths: Vec<String>,
    /// The commit's id.
    pub commit: String,
    /// The key id that signed it.
    pub signed_by: Option<String>,
}

/// Why a decision could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    /// The decision itself is incomplete (no reason, no reviewer).
    #[error(transparent)]
    Incomplete(#[from] prov_license::ReviewError),
    /// The verdicts directory is outside the work tree.
    #[error("the verdicts directory `{0}` is outside the git work tree")]
    Outside(PathBuf),
    /// The repository (identity, links, the commit).
    #[error(transparent)]
    Git(#[from] prov_git::GitError),
    /// The store.
    #[error(transparent)]
    Store(#[from] prov_store::StoreError),
    /// The verdict manifest.
    #[error(transparent)]
    Stored(#[from] prov_manifest::StoredError),
    /// A file.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Records a reviewer's decision on `subject`: the verdict (reviewer from git's
/// configuration, the policy's name and version, the time, the reason and the policy's own
/// decision) as a manifest in `store`; its canonical JSON as `<verdicts>/licenses/<key>.json`
/// or `<verdicts>/records/<id>.json`, replacing an earlier verdict on the same subject; with
/// a key, an in-toto statement about that file in a DSSE envelope beside it (`.sig`), and
/// without one, a stale signature of an earlier verdict removed; then one commit of exactly
/// those paths, its message naming the subject and the decision.
///
/// `verdicts` must lie inside `workdir` (compared lexically: `x/../..` leaves), and no
/// directory on the way may be a symbolic link.
///
/// # Errors
///
/// [`DecideError`]: no reason, no git identity, a directory outside the work tree or through
/// a link, the store, a file or the commit.
pub fn record_decision(
    store: &Store,
    repo: &prov_git::Repository,
    workdir: &Path,
    verdicts: &Path,
    subject: &ReviewSubject,
    decide: &Decide<'_>,
) -> Result<Decided, DecideError> {
    let reviewer = prov_git::identity(repo)?;
    prov_git::check_committer(repo)?;
    let verdict = reviewer_verdict(
        subject.digest,
        &prov_license::Review {
            license: &subject.license,
            record: (subject.kind == Kind::Record).then_some(subject.name.as_str()),
            decision: decide.decision,
            policy: decide.policy,
            reviewer: &reviewer,
            reason: decide.reason,
            decided_at: decide.decided_at,
        },
    )?;
    let rel_dir = prov_git::relative_inside(verdicts, workdir).ok_or_else(|| DecideError::Outside(verdicts.into()))?;
    let digest = put_record(store, &Record::Verdict(verdict.clone()))?;
    let bytes = store.read(&digest)?;

    let rel = rel_dir.join(verdict_path(&verdict));
    let parent = rel.parent().unwrap_or(Path::new(""));
    let name = rel.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let file = prov_git::project_dir(workdir, parent)?.join(&name);
    let rel = rel.to_string_lossy().replace('\\', "/");
    let signature_file = file.with_file_name(prov_attest::verdict_signature_path(&name));
    // Held until the commit is made, so that another decision's commit cannot be built on
    // the same parent (and drop this one's file from the branch), nor write this file.
    let lock = prov_git::lock_commits(repo)?;
    // What the directory held, to put back if the commit fails: a verdict left written but
    // not committed would still decide the next run.
    let before = Before { file: fs_err::read(&file).ok(), signature: fs_err::read(&signature_file).ok() };
    let replaced = before.file.as_deref().map(Digest::of).filter(|d| *d != digest);
    let tmp = store.root().join("tmp");
    prov_store::write_atomically(&tmp, &file, &bytes)?;
    let mut paths = vec![rel.clone()];
    let mut removed = Vec::new();
    if let Some(key) = decide.key {
        let signature = prov_attest::sign_verdict(&verdict_path(&verdict), &bytes, &verdict, key);
        prov_store::write_atomically(&tmp, &signature_file, &signature)?;
        paths.push(prov_attest::verdict_signature_path(&rel));
    } else if signature_file.exists() {
        // A signature of an earlier verdict on this subject no longer signs this one.
        fs_err::remove_file(&signature_file)?;
        removed.push(prov_attest::verdict_signature_path(&rel));
    }
    let word = decision_word(decide.decision);
    let message = format!(
        "prov license decide: {word} {id}\n\nsubject: {id}\ndecision: {word}\nreviewer: {reviewer}\npolicy: {}\nverdict: {digest}\nfile: {rel}\n\n{}\n",
        verdict.policy_version,
        decide.reason.trim(),
        id = subject.id(),
    );
    let change = prov_git::Change { written: &paths, removed: &removed, remove_dir: None, message: &message };
    let commit = match prov_git::commit_paths(repo, &lock, workdir, &change) {
        Ok(c) => c,
        Err(e) => {
            before.restore(&tmp, &file, &signature_file)?;
            return Err(e.into());
        }
    };
    Ok(Decided {
        verdict,
        digest,
        reviewer,
        replaced,
        file: rel,
        paths: paths.into_iter().chain(removed).collect(),
        commit: commit.to_string(),
        signed_by: decide.key.map(|k| k.public().keyid()),
    })
}

/// A verdict file and its signature as they were before a decision.
struct Before {
    file: Option<Vec<u8>>,
    signature: Option<Vec<u8>>,
}

impl Before {
    /// Puts both back as they were (written again, or removed when they were not there).
    fn restore(&self, tmp: &Path, file: &Path, signature: &Path) -> std::io::Result<()> {
        for (path, bytes) in [(file, &self.file), (signature, &self.signature)] {
            match bytes {
                Some(b) => prov_store::write_atomically(tmp, path, b).map_err(std::io::Error::other)?,
                None if path.exists() => fs_err::remove_file(path)?,
                None => {}
            }
        }
        Ok(())
    }
}

/// `allow` or `deny`.
pub fn decision_word(d: Decision) -> &'static str {
    match d {
        Decision::Allow => "allow",
        Decision::Deny => "deny",
    }
}

/// One license compared under two policies, and the reviewer verdict that decides it under
/// either.
#[derive(Debug, Clone)]
pub struct PolicyFlip {
    /// Both policies' views.
    pub comparison: Comparison,
    /// The reviewer verdict on the license, whatever the policy: its digest and decision.
    pub verdict: Option<(Digest, Decision)>,
}

/// Every license of `review` (the strings its documents declare and the licenses its sources
/// declare, in queue order, each key once) under policies `a` and `b`.
pub fn policy_diff(review: &Review, a: &Policy, b: &Policy) -> Vec<PolicyFlip> {
    let licenses = review.subjects.iter().filter(|s| s.kind != Kind::Record).flat_map(|s| match s.kind {
        Kind::Source => vec![s.license.as_str()],
        _ => s.declared.keys().map(String::as_str).collect(),
    });
    prov_license::diff(a, b, licenses)
        .into_iter()
        .map(|comparison| {
            let verdict = review.verdicts.for_license(&comparison.key).map(|r| (r.id, r.verdict.decision));
            PolicyFlip { comparison, verdict }
        })
        .collect()
}
