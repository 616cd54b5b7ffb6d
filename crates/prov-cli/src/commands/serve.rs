//! `prov serve`.

use std::net::SocketAddr;

use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::Ui;

/// Serve the web workbench: runs, their stages and lineage, as pages
///
/// Starts an HTTP server on the project's store, read-only, whose pages show what `prov log`,
/// `prov show` and `prov lineage` show: the runs, each run's stages, outputs and envelope, and
/// every object's lineage drawn as a clickable graph. Every asset is in the binary.
///
/// It binds loopback (127.0.0.1) by default. Binding any other address requires a token:
/// `--token`, or one generated and printed at start; every request must carry it
/// (`Authorization: Bearer`, or `?token=` once, which sets a cookie). The first line on
/// stdout is the address served (with `--json`, a `serve` message), once the socket is bound.
/// Runs until interrupted.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Address and port to listen on (port 0: any free port)
    #[arg(long, default_value = "127.0.0.1:8787", value_name = "ADDR:PORT")]
    bind: SocketAddr,
    /// The token requests must carry (generated when binding a non-loopback address without one)
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
}

pub(crate) fn cmd_serve(ui: &mut Ui, cx: &CommandContext, args: &ServeArgs) -> Result<(), CommandError> {
    let store_dir = cx.store_dir()?;
    // Opening it once checks it is a store before the socket is bound.
    let (_, project_root) = cx.open_store(prov_store::Access::ReadOnly, true)?;
    if let Some(t) = &args.token
        && (t.len() < 16 || !t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
    {
        return Err(CommandError::input("`--token` must be at least 16 letters, digits, `-` or `_`"));
    }
    let token = match (&args.token, args.bind.ip().is_loopback()) {
        (Some(t), _) => Some(t.clone()),
        (None, true) => None,
        (None, false) => Some(prov_serve::guard::new_token()?),
    };
    let config = prov_serve::ServeConfig { bind: args.bind, token, project_root, store_dir };
    let mut announced = Ok(());
    prov_serve::serve(config, |addr, token| {
        let url = format!("http://{addr}/");
        announced =
            ui.json("serve", json!({ "address": addr.to_string(), "url": url, "token": token })).and_then(|()| {
                ui.line(format!("serving {url}"))?;
                match token {
                    Some(t) => ui.line(format!("token: {t} (open {url}?token={t})")),
                    None => Ok(()),
                }
            });
    })
    .map_err(|e| CommandError::input(e.to_string()))?;
    announced.map_err(CommandError::from)
}
