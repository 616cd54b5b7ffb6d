//! A document's fate through a run's filters, and its proof (what `prov prove` builds and
//! `prov verify-proof` checks):
//!
//! - `/runs/<run manifest>/document?q=<id or URL>[&by=id|url]`: every filter stage on the
//!   chain to the training data, with the ledger row of each of the document's ids (decision,
//!   rule, shard, row, evidence), and whether it reached the training data;
//! - `/runs/<run manifest>/proof?q=…`: the same proof as a download.
//!
//! The page is made from the proof, checked as a verifier checks it, pinned to the run's
//! manifest: what it shows is what the downloaded file proves, and nothing else. A query
//! that starts `http://` or `https://` is read as a URL unless `by=id` says otherwise.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use minijinja::context;
use prov_audit::{Pins, ProveError, Subject, Verified, prove, verify};
use prov_manifest::LoadedRun;
use prov_store::Digest;
use serde::{Deserialize, Serialize};

use crate::AppState;
use crate::pages::{PageError, error_page, render, run_of, with_store};

/// The longest query accepted (an id or a URL), in bytes.
const MAX_QUERY: usize = 4096;

/// What the search form sends.
#[derive(Deserialize)]
pub struct DocumentQuery {
    q: Option<String>,
    by: Option<String>,
}

/// The subject a query names.
fn subject(q: &DocumentQuery) -> Result<Subject, PageError> {
    let bad = |m: &str| PageError(StatusCode::BAD_REQUEST, m.to_owned());
    let text =
        q.q.as_deref().map(str::trim).filter(|t| !t.is_empty()).ok_or_else(|| bad("give a document id or a URL"))?;
    if text.len() > MAX_QUERY || text.chars().any(char::is_control) {
        return Err(bad("a document id or URL is one line of at most 4096 bytes"));
    }
    let looks_like_url = text.starts_with("http://") || text.starts_with("https://");
    let as_url = match q.by.as_deref() {
        Some("id") => false,
        Some("url") => true,
        None | Some("") => looks_like_url,
        Some(_) => return Err(bad("`by` is `id` or `url`")),
    };
    Ok(if as_url { Subject::Url(text.to_owned()) } else { Subject::Doc(text.to_owned()) })
}

/// How many proofs are kept.
const KEPT: usize = 64;

/// The proofs made, by run manifest and subject: a recorded run's proof of a document does
/// not change, and building one reads and hashes the ledger shards on the document's path.
#[derive(Default)]
pub struct Proofs(Mutex<BTreeMap<ProofKey, Arc<Proven>>>);

/// A proof's bytes (with its final newline) and what checking them shows.
type Proven = (Vec<u8>, Verified);

/// A proof's run manifest, and its subject read as an `id` or a `url` with its text.
type ProofKey = (Digest, &'static str, String);

/// The proof of `subject` in the run, made once and kept ([`Proofs`]).
async fn proven(state: &Arc<AppState>, manifest: &str, subject: Subject) -> Result<Arc<Proven>, PageError> {
    let run = run_of(state, manifest).await?;
    let (by, text) = reading(&subject);
    let key = (run.manifest, by, text.to_owned());
    if let Some(kept) = state.proofs.0.lock().ok().and_then(|p| p.get(&key).cloned()) {
        return Ok(kept);
    }
    let made = Arc::new(build(state, run, subject).await?);
    if let Ok(mut kept) = state.proofs.0.lock() {
        if kept.len() >= KEPT {
            let first = kept.keys().next().cloned();
            if let Some(k) = first {
                kept.remove(&k);
            }
        }
        kept.insert(key, made.clone());
    }
    Ok(made)
}

/// Builds the proof of `subject` in `run`, and checks it pinned to the run's manifest.
async fn build(state: &Arc<AppState>, run: LoadedRun, subject: Subject) -> Result<Proven, PageError> {
    with_store(state, move |store| {
        let proof = prove(store, &run, &subject).map_err(|e| match e {
            ProveError::NoLedger { .. } | ProveError::NoUrlIndex { .. } | ProveError::BrokenChain { .. } => {
                PageError(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
            }
            other => {
                let integrity = other.is_integrity_failure();
                PageError::reading(other, integrity)
            }
        })?;
        let mut bytes = proof.to_bytes();
        let pins = Pins { run_manifest: Some(run.manifest), subject: Some(subject), ..Pins::default() };
        let verified = verify(&bytes, &pins).map_err(|e| PageError::internal(format!("a proof just built: {e}")))?;
        bytes.push(b'\n');
        Ok((bytes, verified))
    })
    .await
}

#[derive(Serialize)]
struct RowView {
    id: String,
    decision: String,
    rule: String,
    shard: usize,
    row: u64,
    evidence: Option<String>,
}

#[derive(Serialize)]
struct StageView {
    stage: String,
    kind: String,
    ledger: String,
    shards: usize,
    rows: Vec<RowView>,
}

/// How a subject was read (`id` or `url`), and its text.
fn reading(subject: &Subject) -> (&'static str, &str) {
    match subject {
        Subject::Doc(id) => ("id", id),
        Subject::Url(url) => ("url", url),
    }
}

/// `q` (and `by`) as a query string, percent-encoded.
fn query_string(subject: &Subject) -> String {
    let (by, text) = reading(subject);
    let mut out = String::from("q=");
    out.push_str(&crate::pages::percent_encode(text));
    out.push_str("&by=");
    out.push_str(by);
    out
}

/// `/runs/<run manifest>/document`: a document's fate.
pub async fn document(
    State(state): State<Arc<AppState>>,
    Path(manifest): Path<String>,
    Query(q): Query<DocumentQuery>,
) -> Response {
    let subject = match subject(&q) {
        Ok(s) => s,
        Err(e) => return error_page(&state, e),
    };
    let query = query_string(&subject);
    let (by, text) = reading(&subject);
    let text = text.to_owned();
    let proof = match proven(&state, &manifest, subject).await {
        Ok(x) => x,
        Err(e) => return error_page(&state, e),
    };
    let (bytes, v) = (&proof.0, &proof.1);
    let stages: Vec<StageView> = v
        .stages
        .iter()
        .map(|s| StageView {
            stage: s.stage.clone(),
            kind: s.stage_kind.clone(),
            ledger: s.ledger.to_string(),
            shards: s.shards,
            rows: s
                .rows
                .iter()
                .map(|r| RowView {
                    id: r.id.clone(),
                    decision: r.decision.clone(),
                    rule: r.rule.clone(),
                    shard: r.shard,
                    row: r.row,
                    evidence: r.evidence.as_ref().map(ToString::to_string),
                })
                .collect(),
        })
        .collect();
    let training = v.training.as_ref().map(|t| {
        context! {
            stage => t.stage, dataset_stage => t.dataset_stage,
            reached => match t.reached { Some(true) => "reached", Some(false) => "not-reached", None => "unknown" },
        }
    });
    render(
        &state,
        "document.html",
        context! {
            title => format!("Document {}", prov_textfix::shown::visible(&text)),
            text, by,
            manifest => v.run_manifest.to_string(),
            recipe => v.recipe.clone(),
            path => v.path.clone(),
            url_index => v.url_index.clone(),
            ids => v.ids.clone(),
            stages, training,
            target => v.target.0.clone(),
            proof_href => format!("/runs/{}/proof?{query}", v.run_manifest),
            proof_bytes => bytes.len(),
        },
    )
}

/// `/runs/<run manifest>/proof`: the proof as a file.
pub async fn proof(
    State(state): State<Arc<AppState>>,
    Path(manifest): Path<String>,
    Query(q): Query<DocumentQuery>,
) -> Response {
    let subject = match subject(&q) {
        Ok(s) => s,
        Err(e) => return error_page(&state, e),
    };
    let name: String = reading(&subject)
        .1
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' })
        .take(80)
        .collect();
    match proven(&state, &manifest, subject).await {
        Ok(proof) => {
            let file = format!("attachment; filename=\"{}-{name}.proof\"", &proof.1.run_manifest.to_hex()[..12]);
            (
                [(header::CONTENT_TYPE, "application/json".to_owned()), (header::CONTENT_DISPOSITION, file)],
                proof.0.clone(),
            )
                .into_response()
        }
        Err(e) => error_page(&state, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_an_id_unless_it_looks_like_a_url() {
        let q = |q: &str, by: Option<&str>| DocumentQuery { q: Some(q.into()), by: by.map(Into::into) };
        assert_eq!(subject(&q(" udhr-1 ", None)).ok(), Some(Subject::Doc("udhr-1".into())));
        assert_eq!(subject(&q("https://a.example/x", None)).ok(), Some(Subject::Url("https://a.example/x".into())));
        assert_eq!(
            subject(&q("https://a.example/x", Some("id"))).ok(),
            Some(Subject::Doc("https://a.example/x".into()))
        );
        assert!(subject(&q("", None)).is_err() && subject(&q("a\nb", None)).is_err());
        assert!(subject(&q("x", Some("path"))).is_err());
        assert_eq!(query_string(&Subject::Url("https://a.b/c d".into())), "q=https%3A%2F%2Fa.b%2Fc%20d&by=url");
    }
}
