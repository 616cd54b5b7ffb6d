//! The web workbench: `prov serve`, an HTTP server whose pages show what the CLI shows, from
//! the same library calls (runs and their stages from the store's index and run records,
//! lineage from `prov_manifest::LineageGraph`), rendered on the server from templates embedded
//! in the binary, with no script and no asset from anywhere else.
//!
//! Owns: the server's configuration and start ([`ServeConfig`], [`serve`]); what every
//! request passes before a page sees it ([`guard`]: the bind address's rule for tokens, the
//! token check, the bound on request bodies, digests as the only identifiers a URL carries);
//! the pages ([`pages`]) and the lineage drawing ([`lineage_svg`]). Does not own any pipeline
//! logic: a page reads records and renders them.
//!
//! Security model: loopback by default; any other address requires a token (generated and
//! printed at start, or given), checked on every request; objects are named by full digests
//! only, so no URL reaches a path of its own choosing; request bodies are bounded; an error
//! page says what failed, never how (no backtrace, no path). This slice serves no writes.

#![deny(missing_docs)]

pub mod guard;
pub mod lineage_svg;
pub mod pages;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::routing::get;

/// What `prov serve` was asked for.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The address to listen on; port 0 takes a free one.
    pub bind: SocketAddr,
    /// The token every request must carry; `None` serves loopback without one.
    pub token: Option<String>,
    /// The project root (where `lockfiles/` and `manifests/` are).
    pub project_root: PathBuf,
    /// The store directory (`.prov`).
    pub store_dir: PathBuf,
}

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A non-loopback address without a token.
    #[error("binding {0} (not loopback) needs a token")]
    TokenRequired(SocketAddr),
    /// The address could not be bound, or the server failed.
    #[error("serving on {addr}: {source}")]
    Io {
        /// The address.
        addr: SocketAddr,
        /// What failed.
        source: std::io::Error,
    },
}

/// What every handler shares: the configuration and the templates.
pub struct AppState {
    /// The configuration.
    pub config: ServeConfig,
    /// The page templates.
    pub templates: minijinja::Environment<'static>,
}

/// The router: every page, behind [`guard::check`].
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(pages::runs))
        .route("/runs/{manifest}", get(pages::run))
        .route("/lineage/{digest}", get(pages::lineage))
        .route("/diff", get(pages::diff))
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
    let io = |source| ServeError::Io { addr, source };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(io)?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(io)?;
        let bound = listener.local_addr().map_err(io)?;
        ready(bound, config.token.as_deref());
        let state = Arc::new(AppState { templates: pages::templates(), config });
        axum::serve(listener, router(state)).await.map_err(io)
    })
}
