//! Audits (what `prov audit` evaluates and reports):
//!
//! - `/runs/<run manifest>/audit`: the audit policies the server was started with
//!   (`--audit-policy`), each a link;
//! - `/runs/<run manifest>/audit/<policy name>`: the report: each claim's outcome, statement,
//!   reasons, evidence (every digest a link to its lineage) and what was re-checked. The first
//!   request starts the audit in the background and answers at once with its progress (claim
//!   k of n, and which), a page that reloads itself each second until the report is there;
//!   every other page is served meanwhile. One audit runs at a time; a report is kept for the
//!   server's life, keyed by the run manifest and the policy file's digest, since neither
//!   changes what a recorded run's audit says.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use minijinja::context;
use prov_audit::{AuditOptions, AuditPolicy, Report, RunContext, evaluate_claim};
use prov_manifest::LoadedRun;
use prov_store::{Access, Digest, Store};
use serde::Serialize;

use crate::AppState;
use crate::pages::{PageError, error_page, render, run_of};

/// An audit policy the server offers, read at start.
pub struct LoadedAuditPolicy {
    /// The policy, parsed (with the public keys it names).
    pub policy: AuditPolicy,
    /// BLAKE3 of the policy file's bytes, as the report records it.
    pub digest: Digest,
}

/// An audit under way or done.
pub struct AuditJob {
    total: usize,
    done: AtomicUsize,
    current: Mutex<String>,
    result: OnceLock<Result<Report, String>>,
}

/// The audits of this server, by run manifest and policy digest.
pub struct Audits {
    jobs: Mutex<BTreeMap<(Digest, Digest), Arc<AuditJob>>>,
    one_at_a_time: tokio::sync::Semaphore,
}

impl Default for Audits {
    /// No audit yet; one may run at a time.
    fn default() -> Self {
        Self { jobs: Mutex::default(), one_at_a_time: tokio::sync::Semaphore::new(1) }
    }
}

/// The index of the server's audit policy named `name`.
fn policy_named(state: &AppState, name: &str) -> Result<usize, PageError> {
    state.config.audit_policies.iter().position(|p| p.policy.name == name).ok_or_else(|| {
        PageError(
            StatusCode::NOT_FOUND,
            "no audit policy of that name: the server's policies are listed on the run's audit page".into(),
        )
    })
}

/// `/runs/<run manifest>/audit`: the policies to audit the run with.
pub async fn policies(State(state): State<Arc<AppState>>, Path(manifest): Path<String>) -> Response {
    let run = match run_of(&state, &manifest).await {
        Ok(r) => r,
        Err(e) => return error_page(&state, e),
    };
    let names: Vec<(String, usize)> =
        state.config.audit_policies.iter().map(|p| (p.policy.name.clone(), p.policy.claims.len())).collect();
    render(
        &state,
        "audits.html",
        context! { title => "Audit", recipe => run.recipe(), manifest => run.manifest.to_string(), policies => names },
    )
}

/// Runs the audit of `run` under `policy`, claim by claim, counting them in `job`.
fn audit(
    store_dir: &std::path::Path,
    run: &LoadedRun,
    policy: &LoadedAuditPolicy,
    job: &AuditJob,
) -> Result<Report, String> {
    let store = Store::open(store_dir, Access::ReadOnly, true).map_err(|e| {
        crate::pages::log_error(&e);
        "the store could not be opened; the server's log says why".to_owned()
    })?;
    let context = RunContext::new(&store, run);
    let options = AuditOptions { sample: None, rescan: Some(&prov_audit::StageRescan) };
    let mut claims = Vec::new();
    for claim in &policy.policy.claims {
        if let Ok(mut c) = job.current.lock() {
            claim.kind().clone_into(&mut *c);
        }
        claims.push(evaluate_claim(&context, &policy.policy, claim, &options));
        job.done.fetch_add(1, Ordering::Relaxed);
    }
    Ok(Report {
        policy: policy.policy.name.clone(),
        policy_digest: policy.digest,
        recipe: run.record.recipe.clone(),
        run_manifest: run.manifest,
        run_root: run.record.root,
        claims,
    })
}

/// A text in pieces, each full digest in it a link to its lineage.
fn linked(text: &str) -> Linked {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("blake3:") {
        let candidate = &rest[at..];
        let end = "blake3:".len() + 64;
        // `get`: the 71st byte may fall inside a character of the text (data can be anything).
        if let Some(digest) = candidate.get(..end).filter(|d| crate::guard::parse_digest(d).is_some()) {
            if at > 0 {
                out.push((rest[..at].to_owned(), None));
            }
            out.push((digest.to_owned(), Some(format!("/lineage/{digest}"))));
            rest = &candidate[end..];
        } else {
            out.push((rest[..at + "blake3:".len()].to_owned(), None));
            rest = &candidate["blake3:".len()..];
        }
    }
    if !rest.is_empty() {
        out.push((rest.to_owned(), None));
    }
    out
}

/// A text in pieces, each with the link it is, if any.
type Linked = Vec<(String, Option<String>)>;

#[derive(Serialize)]
struct ClaimView {
    kind: String,
    outcome: &'static str,
    statement: String,
    reasons: Vec<Linked>,
    evidence: Vec<(String, Linked)>,
    rechecked: Vec<String>,
}

/// `/runs/<run manifest>/audit/<policy name>`: the report, or the audit's progress.
pub async fn report(State(state): State<Arc<AppState>>, Path((manifest, name)): Path<(String, String)>) -> Response {
    let policy_index = match policy_named(&state, &name) {
        Ok(i) => i,
        Err(e) => return error_page(&state, e),
    };
    let run = match run_of(&state, &manifest).await {
        Ok(r) => r,
        Err(e) => return error_page(&state, e),
    };
    let policy = &state.config.audit_policies[policy_index];
    let key = (run.manifest, policy.digest);
    let (job, start) = {
        let Ok(mut jobs) = state.audits.jobs.lock() else {
            return error_page(&state, PageError::internal("the audits' table is poisoned"));
        };
        if let Some(j) = jobs.get(&key) {
            (j.clone(), false)
        } else {
            let j = Arc::new(AuditJob {
                total: policy.policy.claims.len(),
                done: AtomicUsize::new(0),
                current: Mutex::new(String::new()),
                result: OnceLock::new(),
            });
            jobs.insert(key, j.clone());
            (j, true)
        }
    };
    if start {
        let (state2, job2, run2) = (state.clone(), job.clone(), run.clone());
        tokio::spawn(async move {
            let _turn = state2.audits.one_at_a_time.acquire().await;
            let (inner, state3) = (job2.clone(), state2.clone());
            let done = tokio::task::spawn_blocking(move || {
                let policy = &state3.config.audit_policies[policy_index];
                audit(&state3.config.store_dir, &run2, policy, &inner)
            })
            .await;
            let outcome = done.unwrap_or_else(|e| {
                crate::pages::log_error(&format!("the audit stopped: {e}"));
                Err("the audit stopped; the server's log says why".to_owned())
            });
            let _ = job2.result.set(outcome);
        });
    }
    let (recipe, manifest) = (run.recipe().to_owned(), run.manifest.to_string());
    match job.result.get() {
        None => {
            let current = job.current.lock().map(|c| c.clone()).unwrap_or_default();
            render(
                &state,
                "audit_progress.html",
                context! {
                    title => "Auditing", recipe, manifest, policy => name,
                    done => job.done.load(Ordering::Relaxed), total => job.total, current,
                },
            )
        }
        Some(Err(why)) => error_page(&state, PageError(StatusCode::INTERNAL_SERVER_ERROR, why.clone())),
        Some(Ok(report)) => {
            let claims: Vec<ClaimView> = report
                .claims
                .iter()
                .map(|c| ClaimView {
                    kind: c.kind.clone(),
                    outcome: c.outcome.as_str(),
                    statement: c.statement.clone(),
                    reasons: c.reasons.iter().map(|r| linked(r)).collect(),
                    evidence: c.evidence.iter().map(|e| (e.name.clone(), linked(&e.value))).collect(),
                    rechecked: c.rechecked.clone(),
                })
                .collect();
            let (holds, fails, undecided) = report.counts();
            render(
                &state,
                "audit.html",
                context! {
                    title => format!("Audit: {}", report.policy), recipe, manifest,
                    policy => report.policy, policy_digest => report.policy_digest.to_string(),
                    run_root => report.run_root.to_string(), claims, holds, fails, undecided,
                    all_hold => report.all_hold(),
                },
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_digests_in_a_text_become_links_and_nothing_else_does() {
        let d = format!("blake3:{}", "ab".repeat(32));
        // A text that is not a digest where one could end: no character is cut.
        let odd = format!("blake3:a{}", "é".repeat(40));
        assert_eq!(linked(&odd), [("blake3:".to_owned(), None), (odd["blake3:".len()..].to_owned(), None)]);
        let pieces = linked(&format!("ledger {d} row 3; blake3:abc and {d}"));
        let links: Vec<_> = pieces.iter().filter_map(|(_, l)| l.clone()).collect();
        assert_eq!(links, [format!("/lineage/{d}"), format!("/lineage/{d}")]);
        let text: String = pieces.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(text, format!("ledger {d} row 3; blake3:abc and {d}"));
    }
}
