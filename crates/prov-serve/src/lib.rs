//! The web workbench: `prov serve`, an HTTP server whose pages show what the CLI shows, from
//! the same library calls (runs and their stages from the store's index and run records,
//! lineage from `prov_manifest::LineageGraph`), rendered on the server from templates embedded
//! in the binary, with no script and no asset from anywhere else.
//!
//! Owns: the server's configuration and start ([`ServeConfig`], [`serve`]); what every
//! request passes before a page sees it ([`guard`]: the bind address's rule for tokens, the
//! token check, the `Host` a loopback server answers to, the bound on request bodies, the
//! CSRF check of a write, digests as the only identifiers a URL carries); the pages: runs,
//! stages, lineage and diffs ([`pages`]), a document's fate and its proof ([`documents`]),
//! the license review ([`review`]); and the lineage drawing ([`lineage_svg`]). Does not own
//! any pipeline logic: a page reads records, or calls the library a command calls, and
//! renders the result.
//!
//! Security model: loopback by default; any other address requires a token (generated and
//! printed at start, or given), checked on every request; objects are named by full digests
//! only, so no URL reaches a path of its own choosing; request bodies are bounded; an error
//! page says what failed, never how (no backtrace, no path). The one write, a reviewer's
//! verdict, needs the server's CSRF token from its form, a same-origin request and a server
//! not started `--read-only`; it is made by the library call `prov license decide` makes.

#![deny(missing_docs)]

pub mod audit;
pub mod card;
pub mod documents;
pub mod guard;
pub mod lineage_svg;
pub mod pages;
pub mod review;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

/// What `prov serve` was asked for.
#[derive(Clone)]
pub struct ServeConfig {
    /// The address to listen on; port 0 takes a free one.
    pub bind: SocketAddr,
    /// The token every request must carry; `None` serves loopback without one.
    pub token: Option<String>,
    /// The project root (where `lockfiles/` and `manifests/` are).
    pub project_root: PathBuf,
    /// The store directory (`.prov`).
    pub store_dir: PathBuf,
    /// Serve no page that writes (a run's evidence published for others to read).
    pub read_only: bool,
    /// The license policies a review may be made under, by their names; the first is the
    /// queue's. Never empty.
    pub policies: Vec<prov_license::Policy>,
    /// The reviewer verdicts directory (inside the git work tree, for a decision to commit).
    pub verdicts: PathBuf,
    /// The audit policies the audit pages offer, by their names.
    pub audit_policies: Arc<Vec<audit::LoadedAuditPolicy>>,
    /// The key that signs verdicts decided in the workbench, as `prov license decide --key`.
    pub key: Option<Arc<prov_attest::SigningKey>>,
    /// How many connections at once, and how long a client may take over its headers.
    pub limits: ConnectionLimits,
    /// Milliseconds since the epoch, for a verdict's `decided_at` (the CLI's clock, which a
    /// test may fix).
    pub clock: Arc<dyn Fn() -> i64 + Send + Sync>,
}

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A non-loopback address without a token.
    #[error("binding {0} (not loopback) needs a token")]
    TokenRequired(SocketAddr),
    /// Two license policies, or two audit policies, with one name: a page names a policy by
    /// its name.
    #[error("two policies are named `{0}`")]
    DuplicatePolicy(String),
    /// The address could not be bound, or the server failed.
    #[error("serving on {addr}: {source}")]
    Io {
        /// The address.
        addr: SocketAddr,
        /// What failed.
        source: std::io::Error,
    },
}

/// What every handler shares.
pub struct AppState {
    /// The configuration.
    pub config: ServeConfig,
    /// The page templates.
    pub templates: minijinja::Environment<'static>,
    /// The token every form that writes carries and every write must present
    /// ([`guard::check_form`]): random per server, so that a page of another site cannot
    /// know it.
    pub csrf: String,
    /// Held while a write is made: one verdict and its commit at a time.
    pub writing: tokio::sync::Mutex<()>,
    /// The store's lineage graph and the digest of the manifest list it was made from.
    pub lineage: std::sync::Mutex<Option<(blake3::Hash, Arc<prov_manifest::LineageGraph>)>>,
    /// Proofs made, by run manifest and subject (see [`documents`]).
    pub proofs: documents::Proofs,
    /// The review queues gathered (see [`review`]).
    pub queues: review::Queues,
    /// The runs read, by run manifest: a run manifest's records never change.
    pub runs: std::sync::Mutex<std::collections::BTreeMap<prov_store::Digest, Arc<prov_manifest::LoadedRun>>>,
    /// The lineage pages drawn, by object and the lineage graph's stamp.
    pub lineage_pages: std::sync::Mutex<std::collections::BTreeMap<prov_store::Digest, (blake3::Hash, Arc<String>)>>,
    /// The audits started, under way or done.
    pub audits: audit::Audits,
    /// The data cards made.
    pub cards: card::Cards,
}

/// The router: every page, behind [`guard::check`].
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(pages::runs))
        .route("/runs/{manifest}", get(pages::run))
        .route("/lineage/{digest}", get(pages::lineage))
        .route("/diff", get(pages::diff))
        .route("/runs/{manifest}/document", get(documents::document))
        .route("/runs/{manifest}/proof", get(documents::proof))
        .route("/runs/{manifest}/licenses", get(review::queue))
        .route("/runs/{manifest}/licenses/decide", post(review::decide))
        .route("/runs/{manifest}/licenses/diff", get(review::policy_diff))
        .route("/runs/{manifest}/audit", get(audit::policies))
        .route("/runs/{manifest}/audit/{policy}", get(audit::report))
        .route("/runs/{manifest}/card/", get(card::card))
        .route("/runs/{manifest}/card/{*file}", get(card::file))
        .route("/static/style.css", get(pages::style))
        .fallback(pages::not_found)
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard::check))
        .with_state(state)
}

/// Serves until the process ends. `ready` is called once the socket is bound, with the
/// address (the port filled in) and the token, before the first request is answered.
///
/// # Errors
///
/// [`ServeError::TokenRequired`] for a non-loopback address without a token, and
/// [`ServeError::Io`] when the address cannot be bound or the server fails.
pub fn serve(config: ServeConfig, ready: impl FnOnce(SocketAddr, Option<&str>)) -> Result<(), ServeError> {
    let addr = config.bind;
    if !addr.ip().is_loopback() && config.token.is_none() {
        return Err(ServeError::TokenRequired(addr));
    }
    if let Some(name) = duplicate(config.policies.iter().map(prov_license::Policy::name)) {
        return Err(ServeError::DuplicatePolicy(name));
    }
    if let Some(name) = duplicate(config.audit_policies.iter().map(|p| p.policy.name.as_str())) {
        return Err(ServeError::DuplicatePolicy(name));
    }
    let limits = config.limits;
    let io = |source| ServeError::Io { addr, source };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(io)?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(io)?;
        let bound = listener.local_addr().map_err(io)?;
        ready(bound, config.token.as_deref());
        let csrf = guard::new_token().map_err(io)?;
        let state = Arc::new(AppState {
            templates: pages::templates(),
            config,
            csrf,
            writing: tokio::sync::Mutex::default(),
            audits: audit::Audits::default(),
            lineage: std::sync::Mutex::default(),
            queues: std::sync::Mutex::default(),
            runs: std::sync::Mutex::default(),
            lineage_pages: std::sync::Mutex::default(),
            proofs: documents::Proofs::default(),
            cards: card::Cards::default(),
        });
        accept(listener, router(state), limits).await;
        Ok(())
    })
}

/// How many connections are served at once, and how long a client may take to send a
/// request's headers (also while a kept-alive connection waits for its next request): a
/// client that opens connections and sends nothing, or a header a byte at a time, holds a
/// slot for at most that long, and never more than `max_connections` of them.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections served at once; further ones wait in the listen queue.
    pub max_connections: usize,
    /// The time a client has to send a request's headers.
    pub header_timeout: std::time::Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self { max_connections: 256, header_timeout: std::time::Duration::from_secs(30) }
    }
}

/// Accepts connections while a slot is free and serves each with HTTP/1.1 under the header
/// timeout. (axum's own `serve` sets neither, so a silent client held a connection forever.)
async fn accept(listener: tokio::net::TcpListener, app: Router, limits: ConnectionLimits) {
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, or a connection reset before it was taken: wait a little.
                pages::log_error(&format!("accepting a connection: {e}"));
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(limits.header_timeout);
            // A connection that fails (reset, timed out) ends here; the server goes on.
            let _ = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service).await;
            drop(slot);
        });
    }
}

/// The first name two policies share.
fn duplicate<'a>(mut names: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut seen = std::collections::BTreeSet::new();
    names.find(|n| !seen.insert(*n)).map(str::to_owned)
}
