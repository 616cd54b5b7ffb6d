//! The pages. Each handler reads what the matching CLI command reads (on a blocking thread:
//! the store is files and `SQLite`), builds a plain view model and renders a template; the
//! templates are embedded in the binary and escape every value (minijinja's HTML escaping).
//!
//! - `/`: the executions the store has logged, newest first (`prov log`), each with its run
//!   page when it completed;
//! - `/runs/<run manifest>`: a run's stages in plan order with kind, version, determinism
//!   class, outputs and statistics, and the envelope they ran in (`prov show`);
//! - `/lineage/<digest>`: what an object was made from and what was made from it, drawn as SVG
//!   on the server, every node a link to its own lineage (`prov lineage`);
//! - `/diff?a=<run manifest>&b=<run manifest>`: how two runs differ, their lockfiles field by
//!   field and their stages' outputs and statistics (`prov diff`).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use minijinja::{Environment, context};
use prov_manifest::{Change, LineageGraph, LoadedRun, Lockfile, LockfileDiff, OutputType, RunOutputsDiff, get_typed};
use prov_store::{Access, Store};
use serde::Serialize;
use serde_json::Value;

use crate::AppState;
use crate::guard::parse_digest;

/// The templates, from the crate's `templates/` directory, compiled into the binary.
pub fn templates() -> Environment<'static> {
    let mut env = Environment::new();
    // `urlencode` leaves `/` as it is; a name in a path segment needs it encoded.
    env.add_filter("segment", |text: String| percent_encode(&text));
    // Outside text (ids, URLs, declared licenses) with what would not show escaped, so that a
    // look-alike id or a right-to-left override cannot pass for something else on a page.
    env.add_filter("shown", |text: String| prov_textfix::shown::visible(&text).into_owned());
    for (name, source) in [
        ("base.html", include_str!("../templates/base.html")),
        ("runs.html", include_str!("../templates/runs.html")),
        ("run.html", include_str!("../templates/run.html")),
        ("lineage.html", include_str!("../templates/lineage.html")),
        ("error.html", include_str!("../templates/error.html")),
        ("diff.html", include_str!("../templates/diff.html")),
        ("document.html", include_str!("../templates/document.html")),
        ("licenses.html", include_str!("../templates/licenses.html")),
        ("decided.html", include_str!("../templates/decided.html")),
        ("policy_diff.html", include_str!("../templates/policy_diff.html")),
        ("audits.html", include_str!("../templates/audits.html")),
        ("audit_progress.html", include_str!("../templates/audit_progress.html")),
        ("audit.html", include_str!("../templates/audit.html")),
        ("card.html", include_str!("../templates/card.html")),
    ] {
        env.add_template(name, source).expect("the embedded templates parse");
    }
    env
}

/// A page that could not be made: the status and what the reader is told.
pub(crate) struct PageError(pub(crate) StatusCode, pub(crate) String);

impl PageError {
    pub(crate) fn internal(what: impl std::fmt::Display) -> Self {
        // The reader learns that it failed; the detail goes to the server's log only.
        log_error(&what);
        Self(StatusCode::INTERNAL_SERVER_ERROR, "the page could not be made; the server's log says why".into())
    }

    /// Stored bytes that do not match their digest (or records that contradict the run's):
    /// the reader is told that the store is damaged, and what does not match (digests, never
    /// a path), instead of a page made of bytes that are not what the run recorded or a bare
    /// "could not be made". `prov verify` names every such object and the runs it belongs to.
    pub(crate) fn damaged(what: impl std::fmt::Display) -> Self {
        log_error(&what);
        Self(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "the store is damaged, so nothing of this page is shown: {what}. \
                 `prov verify` checks every object of the store and names the runs a damaged one belongs to."
            ),
        )
    }

    /// An error of reading the store: [`PageError::damaged`] when it is an integrity
    /// failure, else [`PageError::internal`].
    pub(crate) fn reading(what: impl std::fmt::Display, integrity_failure: bool) -> Self {
        if integrity_failure { Self::damaged(what) } else { Self::internal(what) }
    }
}

/// Every byte of `text` but the unreserved ones (RFC 3986: letters, digits, `-_.~`) as `%XX`:
/// a value that fits in a path segment or a query parameter whatever it holds (`/`, `&`).
pub(crate) fn percent_encode(text: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Writes what failed to the server's standard error, its log.
pub(crate) fn log_error(what: &dyn std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "prov serve: {what}");
}

pub(crate) fn render(state: &AppState, template: &str, ctx: minijinja::Value) -> Response {
    match state.templates.get_template(template).and_then(|t| t.render(ctx)) {
        Ok(html) => Html(html).into_response(),
        Err(e) => error_page(state, PageError::internal(e)),
    }
}

pub(crate) fn error_page(state: &AppState, PageError(status, message): PageError) -> Response {
    let html = state
        .templates
        .get_template("error.html")
        .and_then(|t| t.render(context! { title => status.canonical_reason().unwrap_or("error"), message }))
        .unwrap_or_else(|_| "error".into());
    (status, Html(html)).into_response()
}

/// Runs `f` with the store opened read-only, on a blocking thread.
pub(crate) async fn with_store<T: Send + 'static>(
    state: &Arc<AppState>,
    f: impl FnOnce(&Store) -> Result<T, PageError> + Send + 'static,
) -> Result<T, PageError> {
    let dir = state.config.store_dir.clone();
    tokio::task::spawn_blocking(move || {
        let store = Store::open(&dir, Access::ReadOnly, true).map_err(PageError::internal)?;
        f(&store)
    })
    .await
    .map_err(PageError::internal)?
}

/// The run whose manifest is `digest`: 404 for an object that is not there or not a run.
pub(crate) fn load_run(store: &Store, digest: prov_store::Digest) -> Result<LoadedRun, PageError> {
    if !store.contains(&digest) {
        return Err(PageError(StatusCode::NOT_FOUND, "no such run manifest in this store".into()));
    }
    LoadedRun::load(store, digest).map_err(|e| match e {
        // Its bytes, or those of a record it names, are not what their digests say.
        prov_manifest::StoredError::Store(e) if e.is_integrity_failure() => PageError::damaged(e),
        _ => PageError(StatusCode::NOT_FOUND, "that object is not a run manifest".into()),
    })
}

/// An error of reading a stored record: the store is damaged, or the page failed.
fn stored_error(e: prov_manifest::StoredError) -> PageError {
    let integrity = e.is_integrity_failure();
    PageError::reading(e, integrity)
}

/// The run named by a URL's `manifest` segment.
pub(crate) async fn run_of(state: &Arc<AppState>, manifest: &str) -> Result<LoadedRun, PageError> {
    let Some(digest) = parse_digest(manifest) else {
        return Err(PageError(StatusCode::BAD_REQUEST, "a run is named by its manifest's full digest".into()));
    };
    if let Some(run) = state.runs.lock().ok().and_then(|r| r.get(&digest).cloned()) {
        return Ok((*run).clone());
    }
    let run = with_store(state, move |store| load_run(store, digest)).await?;
    if let Ok(mut runs) = state.runs.lock() {
        if runs.len() >= 32 {
            runs.clear();
        }
        runs.insert(digest, Arc::new(run.clone()));
    }
    Ok(run)
}

#[derive(Serialize, Clone)]
struct ExecutionView {
    mode: String,
    status: String,
    recipe: String,
    run_id: String,
    started: String,
    seconds: Option<f64>,
    manifest: Option<String>,
    detail: Option<String>,
}

#[derive(Serialize)]
struct CommittedView {
    recipe: String,
    manifest: String,
    in_store: bool,
    replay: Option<ExecutionView>,
}

/// The runs committed under `manifests/<recipe>/RUN` (by `prov run --commit`), in recipe order,
/// each with whether the store holds it and its latest replay there. Directory names come from
/// listing `manifests/`, never from a request.
fn committed_runs(root: &std::path::Path, store: &Store, executions: &[ExecutionView]) -> Vec<CommittedView> {
    prov_manifest::committed_runs(&root.join("manifests"))
        .into_iter()
        .map(|(recipe, manifest)| {
            let d = manifest.to_string();
            let replay =
                executions.iter().find(|e| e.mode == "replay" && e.manifest.as_deref() == Some(d.as_str())).cloned();
            CommittedView { recipe, manifest: d, in_store: store.contains(&manifest), replay }
        })
        .collect()
}

/// `/`: the executions of the store, and the runs committed in the project.
pub async fn runs(State(state): State<Arc<AppState>>) -> Response {
    let root = state.config.project_root.clone();
    let rows = with_store(&state, move |store| {
        let rows = store.index().executions().map_err(PageError::internal)?;
        let executions: Vec<ExecutionView> = rows
            .into_iter()
            .map(|r| ExecutionView {
                mode: r.mode,
                status: r.status,
                recipe: r.recipe,
                run_id: r.run_id.to_string(),
                started: prov_store::format_utc(r.started_ms),
                seconds: r.finished_ms.map(|f| (f - r.started_ms) as f64 / 1000.0),
                manifest: r.run_manifest.map(|d| d.to_string()),
                detail: r.detail,
            })
            .collect();
        let committed = committed_runs(&root, store, &executions);
        Ok((executions, committed))
    })
    .await;
    match rows {
        Ok((rows, committed)) => {
            render(&state, "runs.html", context! { title => "Runs", executions => rows, committed })
        }
        Err(e) => error_page(&state, e),
    }
}

#[derive(Serialize)]
struct OutputView {
    name: String,
    kind: String,
    digest: String,
}

#[derive(Serialize)]
struct StageView {
    name: String,
    kind: String,
    version: u32,
    class: String,
    manifest: String,
    outputs: Vec<OutputView>,
    stats: Vec<(String, String)>,
    time: Option<String>,
}

/// A statistic as one short line.
fn short(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Object(m) => format!("{{{} entries}}", m.len()),
        other => other.to_string(),
    };
    if text.chars().count() > 80 { format!("{}…", text.chars().take(80).collect::<String>()) } else { text }
}

/// `/runs/<run manifest>`: a run's stages.
pub async fn run(State(state): State<Arc<AppState>>, Path(manifest): Path<String>) -> Response {
    let run = match run_of(&state, &manifest).await {
        Ok(run) => run,
        Err(e) => return error_page(&state, e),
    };
    // How long each stage took in the latest execution that recorded this run.
    let digest = run.manifest;
    let timings = with_store(&state, move |store| {
        let index = store.index();
        let latest =
            index.executions().map_err(PageError::internal)?.into_iter().find(|e| e.run_manifest == Some(digest));
        let events = match latest {
            Some(e) => index.stage_events(e.id).map_err(PageError::internal)?,
            None => Vec::new(),
        };
        Ok(events.into_iter().map(|e| (e.stage, (e.status, e.millis))).collect::<BTreeMap<_, _>>())
    })
    .await
    .unwrap_or_default();
    let stages: Vec<StageView> = run
        .stages()
        .iter()
        .map(|s| StageView {
            time: timings.get(s.name()).map(|(status, ms)| {
                if *ms < 1000 {
                    format!("{ms} ms, {status}")
                } else {
                    format!("{:.1} s, {status}", *ms as f64 / 1000.0)
                }
            }),
            name: s.name().to_owned(),
            kind: s.kind().to_owned(),
            version: s.record.version,
            class: s.record.determinism.as_str().to_owned(),
            manifest: s.manifest.to_string(),
            outputs: s
                .record
                .outputs
                .iter()
                .map(|(name, o)| OutputView {
                    name: name.clone(),
                    kind: serde_json::to_value(o.output_type)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    digest: o.digest.to_string(),
                })
                .collect(),
            stats: s.record.stats.iter().map(|(k, v)| (k.clone(), short(v))).collect(),
        })
        .collect();
    let envelope = run.stages().first().map(|s| {
        let e = &s.record.envelope;
        context! { workbench => e.workbench_version, os => e.os, arch => e.arch, cpu => e.cpu_model, threads => e.threads, device => e.device, libtorch => e.libtorch }
    });
    render(
        &state,
        "run.html",
        context! {
            title => format!("Run of {}", run.recipe()),
            recipe => run.recipe(),
            manifest => run.manifest.to_string(),
            lockfile => run.record.lockfile.to_string(),
            root => run.record.root.to_string(),
            stages,
            envelope,
            has_ledger => run.stages().iter().any(|s| s.record.outputs.values().any(|o| o.output_type == OutputType::Ledger)),
            has_license => run.stages().iter().any(|s| s.kind() == "license"),
        },
    )
}

#[derive(Serialize)]
struct NodeView {
    digest: String,
    kind: String,
    name: Option<String>,
    role: &'static str,
}

/// The store's lineage graph, made again only when the store's manifests are not those it was
/// made from: reading every manifest is the page's cost, and a store only gains manifests when
/// something runs.
fn lineage_graph(state: &AppState, store: &Store) -> Result<(blake3::Hash, Arc<LineageGraph>), PageError> {
    let manifests = store.index().objects_of_kind("manifest").map_err(PageError::internal)?;
    let mut listed = blake3::Hasher::new();
    for d in &manifests {
        listed.update(d.to_string().as_bytes());
    }
    let stamp = listed.finalize();
    if let Ok(kept) = state.lineage.lock()
        && let Some((s, graph)) = kept.as_ref()
        && *s == stamp
    {
        return Ok((stamp, graph.clone()));
    }
    let graph = Arc::new(LineageGraph::of_store(store).map_err(stored_error)?);
    if let Ok(mut kept) = state.lineage.lock() {
        *kept = Some((stamp, graph.clone()));
    }
    Ok((stamp, graph))
}

/// `/lineage/<digest>`: an object's lineage as SVG.
pub async fn lineage(State(state): State<Arc<AppState>>, Path(target): Path<String>) -> Response {
    let Some(digest) = parse_digest(&target) else {
        return error_page(&state, PageError(StatusCode::BAD_REQUEST, "an object is named by its full digest".into()));
    };
    let shared = state.clone();
    let drawn = with_store(&state, move |store| {
        let (stamp, graph) = lineage_graph(&shared, store)?;
        // The page drawn for this object from this graph, when it was drawn before.
        if let Some(page) = shared.lineage_pages.lock().ok().and_then(|p| p.get(&digest).cloned())
            && page.0 == stamp
        {
            return Ok(Err(page.1));
        }
        if !graph.contains(&digest) && !store.contains(&digest) {
            return Err(PageError(StatusCode::NOT_FOUND, "no such object in this store".into()));
        }
        Ok(Ok((stamp, graph.lineage(store, digest, None).map_err(stored_error)?)))
    })
    .await;
    let (stamp, lineage) = match drawn {
        Ok(Ok(l)) => l,
        Ok(Err(page)) => return Html((*page).clone()).into_response(),
        Err(e) => return error_page(&state, e),
    };
    let svg = crate::lineage_svg::draw(&lineage);
    let nodes: Vec<NodeView> = lineage
        .nodes
        .iter()
        .map(|n| NodeView {
            digest: n.digest.to_string(),
            kind: n.kind.clone(),
            name: n.name.clone(),
            role: n.role.as_str(),
        })
        .collect();
    let ctx = context! { title => "Lineage", target => digest.to_string(), svg => minijinja::Value::from_safe_string(svg), nodes };
    match state.templates.get_template("lineage.html").and_then(|t| t.render(ctx)) {
        Ok(html) => {
            if let Ok(mut pages) = state.lineage_pages.lock() {
                if pages.len() >= 64 {
                    pages.clear();
                }
                pages.insert(digest, (stamp, Arc::new(html.clone())));
            }
            Html(html).into_response()
        }
        Err(e) => error_page(&state, PageError::internal(e)),
    }
}

#[derive(Serialize)]
struct ChangeView {
    at: String,
    path: String,
    old: String,
    new: String,
}

fn change_views(at: &str, changes: &[Change]) -> impl Iterator<Item = ChangeView> {
    let shown = |v: &Option<Value>| v.as_ref().map_or_else(|| "(absent)".to_owned(), short);
    changes.iter().map(move |c| ChangeView {
        at: at.to_owned(),
        path: c.path.clone(),
        old: shown(&c.old),
        new: shown(&c.new),
    })
}

/// The two runs a diff compares, as the form sends them.
#[derive(serde::Deserialize)]
pub struct DiffQuery {
    a: String,
    b: String,
}

/// `/diff?a=<run manifest>&b=<run manifest>`: two runs' differences.
pub async fn diff(State(state): State<Arc<AppState>>, Query(q): Query<DiffQuery>) -> Response {
    let (Some(a), Some(b)) = (parse_digest(&q.a), parse_digest(&q.b)) else {
        return error_page(
            &state,
            PageError(StatusCode::BAD_REQUEST, "runs are named by their manifests' full digests".into()),
        );
    };
    let loaded = with_store(&state, move |store| {
        let load = |d| {
            let run = load_run(store, d)?;
            let lockfile = get_typed::<Lockfile>(store, &run.record.lockfile).map_err(stored_error)?;
            Ok((run, lockfile))
        };
        Ok((load(a)?, load(b)?))
    })
    .await;
    let ((ra, la), (rb, lb)) = match loaded {
        Ok(x) => x,
        Err(e) => return error_page(&state, e),
    };
    let lockfile = LockfileDiff::between(&la, &lb);
    let mut config: Vec<ChangeView> = change_views("recipe", &lockfile.recipe).collect();
    for named in lockfile.sources_changed.iter().chain(&lockfile.stages_changed) {
        config.extend(change_views(&named.name, &named.changes));
    }
    let added: Vec<String> = lockfile
        .sources_added
        .iter()
        .cloned()
        .chain(lockfile.stages_added.iter().map(|(n, k)| format!("{n} ({k})")))
        .collect();
    let removed: Vec<String> = lockfile
        .sources_removed
        .iter()
        .cloned()
        .chain(lockfile.stages_removed.iter().map(|(n, k)| format!("{n} ({k})")))
        .collect();
    let outputs = RunOutputsDiff::between(&ra, &rb);
    let mut changed: Vec<ChangeView> = Vec::new();
    for stage in &outputs.stages {
        changed.extend(change_views(&stage.name, &stage.outputs));
        changed.extend(change_views(&stage.name, &stage.stats));
    }
    render(
        &state,
        "diff.html",
        context! {
            title => "Diff",
            a => a.to_string(), b => b.to_string(),
            recipe_a => ra.recipe(), recipe_b => rb.recipe(),
            config, added, removed, changed,
            differing => outputs.stages.len(), equal => outputs.equal,
        },
    )
}

/// `/static/style.css`.
pub async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], include_str!("../templates/style.css")).into_response()
}

/// Any other path.
pub async fn not_found(State(state): State<Arc<AppState>>) -> Response {
    error_page(&state, PageError(StatusCode::NOT_FOUND, "there is no such page".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_templates_parse() {
        let env = templates();
        assert!(env.get_template("run.html").is_ok());
    }
}
