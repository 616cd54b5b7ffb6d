//! The license review (what `prov license queue | decide | diff` show and do):
//!
//! - `/runs/<run manifest>/licenses[?policy=NAME&all=1]`: the queue of the run's `license`
//!   stages under a policy the server was started with, each subject with its evidence
//!   (declared strings and their document counts, the SPDX reading and the rule that made it,
//!   the policy's rule and reason, example records, a record's lineage, a source's license
//!   files and the SPDX texts they match, the conflicts) and, unless the server is read-only,
//!   a form to allow or deny it with a reason;
//! - `POST /runs/<run manifest>/licenses/decide`: records the decision through
//!   [`prov_review::record_decision`], the call `prov license decide` makes: a verdict
//!   manifest, the verdict file, its signature when the server has a key, one git commit;
//! - `/runs/<run manifest>/licenses/diff?a=NAME&b=NAME`: the licenses whose decision flips
//!   between two of the server's policies.
//!
//! Policies are named by their `name`, never by a path: a page can choose only among the
//! policies `prov serve --policy` loaded.

use std::sync::Arc;

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use minijinja::context;
use prov_license::Policy;
use prov_license::queue::{Kind, ReviewError, ReviewSubject, find_subject, gather, reading};
use prov_review::{Decide, DecideError, decision_word};
use serde::{Deserialize, Serialize};

use crate::AppState;
use crate::guard::check_form;
use crate::pages::{PageError, error_page, render, run_of, with_store};

/// The longest reason accepted, in characters.
const MAX_REASON: usize = 4000;

/// The policy named `name`, or the server's first.
fn policy<'s>(state: &'s AppState, name: Option<&str>) -> Result<&'s Policy, PageError> {
    match name.filter(|n| !n.is_empty()) {
        None => Ok(&state.config.policies[0]),
        Some(n) => state.config.policies.iter().find(|p| p.name() == n).ok_or_else(|| {
            PageError(
                StatusCode::BAD_REQUEST,
                "no license policy of that name: the server's policies are listed on the queue's page".into(),
            )
        }),
    }
}

/// A review that could not be gathered: what the reader may fix is said (422), with every
/// absolute path of the project made relative to it (an error page names no path of the
/// server's); anything else goes to the log (500).
fn review_error(e: ReviewError, roots: &[std::path::PathBuf]) -> PageError {
    match e {
        ReviewError::Input { message, hint } => {
            let mut text = match hint {
                Some(h) => format!("{message} ({h})"),
                None => message,
            };
            for root in roots {
                let root = root.display().to_string();
                text = text.replace(&format!("{root}/"), "").replace(&root, ".");
            }
            PageError(StatusCode::UNPROCESSABLE_ENTITY, text)
        }
        other => {
            let integrity = other.is_integrity_failure();
            PageError::reading(other, integrity)
        }
    }
}

/// The directories an error message may name absolutely: the verdicts directory's parent (the
/// work tree) and the project.
fn roots(config: &crate::ServeConfig) -> Vec<std::path::PathBuf> {
    let mut out: Vec<std::path::PathBuf> = config.verdicts.parent().into_iter().map(Into::into).collect();
    out.push(config.project_root.clone());
    out
}

/// A run's review queue under a policy, as the page shows it.
pub struct Gathered {
    views: Vec<(bool, SubjectView)>,
    refused: Vec<(String, String)>,
}

/// The gathered queues, by run manifest, policy name and [`verdicts_stamp`].
pub type Queues = std::sync::Mutex<std::collections::BTreeMap<(prov_store::Digest, String, String), Arc<Gathered>>>;

/// What the verdicts directory holds, in short: every file's path, size and modification
/// time, hashed. A verdict written, replaced or removed changes it.
fn verdicts_stamp(dir: &std::path::Path) -> String {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = fs_err::read_dir(&d) else { continue };
        for e in entries.filter_map(Result::ok) {
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                todo.push(e.path());
            } else {
                let modified = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
                files.push(format!("{}\t{}\t{:?}", e.path().display(), meta.len(), modified));
            }
        }
    }
    files.sort();
    blake3::hash(files.join("\n").as_bytes()).to_hex().to_string()
}

/// What the queue page sends.
#[derive(Deserialize)]
pub struct QueueQuery {
    policy: Option<String>,
    all: Option<String>,
}

/// One subject of the queue as its page shows it.
#[derive(Serialize)]
pub struct SubjectView {
    id: String,
    kind: &'static str,
    state: &'static str,
    stage: String,
    digest: String,
    declared: Vec<(String, u64)>,
    by: &'static str,
    reading: String,
    policy_status: &'static str,
    policy_rule: String,
    policy_reason: String,
    records: Vec<String>,
    constituents: Vec<(String, String, String)>,
    license_files: Vec<(String, String)>,
    conflicts: Vec<String>,
    verdict: Option<VerdictView>,
}

#[derive(Serialize)]
struct VerdictView {
    decision: &'static str,
    reviewer: String,
    decided_at: String,
    digest: String,
    signature: Option<String>,
}

fn subject_view(s: &ReviewSubject, review: &prov_license::queue::Review, policy: &Policy) -> SubjectView {
    let kind = match s.kind {
        Kind::License => "license",
        Kind::Record => "record",
        Kind::Source => "source",
    };
    SubjectView {
        id: s.id(),
        kind,
        state: s.pending().map_or("decided", prov_license::Status::as_str),
        stage: s.stage.clone(),
        digest: s.digest.to_string(),
        declared: s.declared.iter().map(|(d, n)| (d.clone(), *n)).collect(),
        by: if s.kind == Kind::Source { "its documents declare" } else { "declared" },
        reading: reading(&s.license),
        policy_status: prov_license::status(&s.policy).as_str(),
        policy_rule: s.policy.rule.as_str().to_owned(),
        policy_reason: s.policy.reason.clone(),
        records: if s.kind == Kind::Record { Vec::new() } else { s.records.clone() },
        constituents: s.constituents.iter().map(|(n, l)| (n.clone(), l.clone(), reading(l))).collect(),
        license_files: s
            .license_files
            .iter()
            .map(|(path, m)| {
                let what = if m.licenses.is_empty() {
                    format!("matches no SPDX license text (nearest `{}`, score {:.3})", m.nearest.0, m.nearest.1)
                } else {
                    format!("the text of `{}` (score {:.3})", m.licenses.join("` or `"), m.nearest.1)
                };
                (path.clone(), what)
            })
            .collect(),
        conflicts: s.conflicts.clone(),
        verdict: s.verdict.as_ref().map(|(d, v)| VerdictView {
            decision: decision_word(v.decision),
            reviewer: v.reviewer.clone(),
            decided_at: v.decided_at.clone().unwrap_or_default(),
            digest: d.to_string(),
            // "Unsigned" is said only where signatures are asked for or someone signs.
            signature: review
                .signed
                .get(d)
                .filter(|st| **st != prov_license::Signed::Unsigned || !policy.verdict_signers().is_empty())
                .map(prov_license::Signed::describe),
        }),
    }
}

/// `/runs/<run manifest>/licenses`: the review queue.
pub async fn queue(
    State(state): State<Arc<AppState>>,
    Path(manifest): Path<String>,
    Query(q): Query<QueueQuery>,
) -> Response {
    let all = q.all.is_some_and(|a| a == "1");
    let policy = match policy(&state, q.policy.as_deref()) {
        Ok(p) => p.clone(),
        Err(e) => return error_page(&state, e),
    };
    let run = match run_of(&state, &manifest).await {
        Ok(r) => r,
        Err(e) => return error_page(&state, e),
    };
    let (verdicts, roots) = (state.config.verdicts.clone(), roots(&state.config));
    let (recipe, manifest) = (run.recipe().to_owned(), run.manifest.to_string());
    // A queue is gathered again only when the verdicts directory changed (a verdict decided
    // here or with `prov license decide`): gathering reads the run's license ledgers.
    let key = (run.manifest, policy.name().to_owned(), verdicts_stamp(&verdicts));
    let kept = state.queues.lock().ok().and_then(|q| q.get(&key).cloned());
    let gathered = if let Some(k) = kept {
        Ok(k)
    } else {
        let policy = policy.clone();
        with_store(&state, move |store| {
            let review = gather(store, &run, &policy, &verdicts).map_err(|e| review_error(e, &roots))?;
            let views: Vec<(bool, SubjectView)> =
                review.subjects.iter().map(|s| (s.pending().is_some(), subject_view(s, &review, &policy))).collect();
            Ok(Arc::new(Gathered { views, refused: review.refused }))
        })
        .await
    };
    let gathered = match gathered {
        Ok(x) => x,
        Err(e) => return error_page(&state, e),
    };
    if let Ok(mut queues) = state.queues.lock() {
        if queues.len() >= 16 && !queues.contains_key(&key) {
            queues.clear();
        }
        queues.insert(key, gathered.clone());
    }
    let (views, refused) = (&gathered.views, &gathered.refused);
    let total = views.len();
    let queued = views.iter().filter(|(p, _)| *p).count();
    let decided = views.iter().filter(|(_, v)| v.verdict.is_some()).count();
    let subjects: Vec<&SubjectView> = views.iter().filter(|(p, _)| *p || all).map(|(_, v)| v).collect();
    let policies: Vec<String> = state.config.policies.iter().map(|p| p.name().to_owned()).collect();
    render(
        &state,
        "licenses.html",
        context! {
            title => "License review",
            recipe, manifest, subjects, total, queued, decided, all, refused, policies,
            policy => policy.name(), policy_version => policy.version(),
            signers => policy.verdict_signers().iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
            read_only => state.config.read_only,
            signing_key => state.config.key.as_ref().map(|k| k.public().keyid()),
            csrf => state.csrf,
        },
    )
}

/// What a verdict form posts.
#[derive(Deserialize)]
pub struct DecideForm {
    csrf: String,
    subject: String,
    decision: String,
    reason: String,
    policy: String,
}

/// `POST /runs/<run manifest>/licenses/decide`: records a verdict and commits it.
pub async fn decide(
    State(state): State<Arc<AppState>>,
    Path(manifest): Path<String>,
    headers: HeaderMap,
    Form(form): Form<DecideForm>,
) -> Response {
    if let Err(refused) = check_form(&state, &headers, &form.csrf) {
        return refused;
    }
    let bad = |m: &str| PageError(StatusCode::BAD_REQUEST, m.to_owned());
    let decision = match form.decision.as_str() {
        "allow" => prov_license::Decision::Allow,
        "deny" => prov_license::Decision::Deny,
        _ => return error_page(&state, bad("a decision is `allow` or `deny`")),
    };
    if form.reason.chars().count() > MAX_REASON {
        return error_page(&state, bad("a reason is at most 4000 characters"));
    }
    let policy = match policy(&state, Some(&form.policy)) {
        Ok(p) => p.clone(),
        Err(e) => return error_page(&state, e),
    };
    let form_policy = policy.name().to_owned();
    let run = match run_of(&state, &manifest).await {
        Ok(r) => r,
        Err(e) => return error_page(&state, e),
    };
    // One verdict and its commit at a time: two commits from one HEAD would lose one.
    let _writing = state.writing.lock().await;
    let config = state.config.clone();
    let decided = tokio::task::spawn_blocking(move || {
        let store = prov_store::Store::open(&config.store_dir, prov_store::Access::Shared, true)
            .map_err(PageError::internal)?;
        let roots = roots(&config);
        let review = gather(&store, &run, &policy, &config.verdicts).map_err(|e| review_error(e, &roots))?;
        let subject = find_subject(&review, &form.subject).map_err(|e| review_error(e, &roots))?;
        let (repo, workdir) =
            prov_git::open_repo(&config.project_root, "the workbench's verdict form").map_err(|_| {
                bad("the project is not in a git repository, so a verdict cannot be committed: run `git init`")
            })?;
        let decided_at = prov_store::format_utc((config.clock)()).replacen(' ', "T", 1);
        let decide = Decide {
            decision,
            reason: &form.reason,
            policy: &policy,
            decided_at: &decided_at,
            key: config.key.as_deref(),
        };
        let decided = prov_review::record_decision(&store, &repo, &workdir, &config.verdicts, subject, &decide)
            .map_err(|e| match e {
                DecideError::Incomplete(e) => bad(&format!("{e}: say why in the reason field")),
                DecideError::Git(e @ (prov_git::GitError::NoIdentity(_) | prov_git::GitError::NoCommitter(_))) => {
                    bad(&format!("{e}: {}", e.hint().unwrap_or_default()))
                }
                other => PageError::internal(other),
            })?;
        Ok::<_, PageError>((subject.id(), decided, run.manifest, run.recipe().to_owned()))
    })
    .await
    .map_err(PageError::internal)
    .and_then(|r| r);
    let (subject, decided, run_manifest, recipe) = match decided {
        Ok(x) => x,
        Err(e) => return error_page(&state, e),
    };
    render(
        &state,
        "decided.html",
        context! {
            title => "Verdict recorded",
            subject, recipe,
            manifest => run_manifest.to_string(),
            decision => decision_word(decision),
            reviewer => decided.reviewer,
            decided_at => decided.verdict.decided_at,
            policy => decided.verdict.policy_version,
            policy_name => form_policy,
            verdict => decided.digest.to_string(),
            replaced => decided.replaced.map(|d| d.to_string()),
            file => decided.file,
            paths => decided.paths,
            commit => decided.commit,
            signed_by => decided.signed_by,
        },
    )
}

/// The two policies a diff compares.
#[derive(Deserialize)]
pub struct PolicyDiffQuery {
    a: String,
    b: String,
    all: Option<String>,
}

#[derive(Serialize)]
struct FlipView {
    license: String,
    key: String,
    flips: bool,
    a: (&'static str, String, String),
    b: (&'static str, String, String),
    verdict: Option<(&'static str, String)>,
}

/// `/runs/<run manifest>/licenses/diff?a=NAME&b=NAME`: which decisions a policy change flips.
pub async fn policy_diff(
    State(state): State<Arc<AppState>>,
    Path(manifest): Path<String>,
    Query(q): Query<PolicyDiffQuery>,
) -> Response {
    let all = q.all.is_some_and(|a| a == "1");
    let (a, b) = match (policy(&state, Some(&q.a)), policy(&state, Some(&q.b))) {
        (Ok(a), Ok(b)) => (a.clone(), b.clone()),
        (Err(e), _) | (_, Err(e)) => return error_page(&state, e),
    };
    let run = match run_of(&state, &manifest).await {
        Ok(r) => r,
        Err(e) => return error_page(&state, e),
    };
    let (recipe, manifest) = (run.recipe().to_owned(), run.manifest.to_string());
    let (verdicts, roots) = (state.config.verdicts.clone(), roots(&state.config));
    let names = (format!("{} {}", a.name(), a.version()), format!("{} {}", b.name(), b.version()));
    let compared = with_store(&state, move |store| {
        let review = gather(store, &run, &a, &verdicts).map_err(|e| review_error(e, &roots))?;
        Ok(prov_review::policy_diff(&review, &a, &b))
    })
    .await;
    let flips = match compared {
        Ok(f) => f,
        Err(e) => return error_page(&state, e),
    };
    let side = |s: &prov_license::Side| (s.status.as_str(), s.rule.as_str().to_owned(), s.reason.clone());
    let total = flips.len();
    let rows: Vec<FlipView> = flips
        .iter()
        .filter(|f| all || f.comparison.flips())
        .map(|f| FlipView {
            license: f.comparison.license.clone(),
            key: f.comparison.key.clone(),
            flips: f.comparison.flips(),
            a: side(&f.comparison.a),
            b: side(&f.comparison.b),
            verdict: f.verdict.map(|(d, decision)| (decision_word(decision), d.to_string())),
        })
        .collect();
    let flipping = flips.iter().filter(|f| f.comparison.flips()).count();
    render(
        &state,
        "policy_diff.html",
        context! {
            title => "Policy diff", recipe, manifest, rows, total, flipping, all,
            a => q.a, b => q.b, a_name => names.0, b_name => names.1,
        },
    )
}
