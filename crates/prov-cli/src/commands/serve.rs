//! `prov serve`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::Ui;

/// Serve the web workbench: runs, lineage, document proofs and license review, as pages
///
/// Starts an HTTP server on the project's store whose pages show what `prov log`, `prov show`,
/// `prov lineage`, `prov diff`, `prov prove` and `prov license queue | diff` show: the runs,
/// each run's stages, outputs and envelope, every object's lineage drawn as a clickable graph,
/// two runs compared, a document's fate through every filter with a proof to download, and
/// the license review queue with its evidence. A reviewer allows or denies a subject with a
/// reason on the queue's page, and the verdict is written as `prov license decide` writes it
/// (a verdict manifest, the verdict file, its signature with `--key`, a git commit). Every
/// asset is in the binary.
///
/// It binds loopback (127.0.0.1) by default and then answers only to a loopback host name.
/// Binding any other address requires a token: `--token`, or one generated and printed at
/// start; every request must carry it (`Authorization: Bearer`, or `?token=` once, which sets
/// a cookie). A verdict form carries a per-server CSRF token and must come from the server's
/// own pages. `--read-only` serves no form and refuses every write. The first line on stdout
/// is the address served (with `--json`, a `serve` message), once the socket is bound. Runs
/// until interrupted.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Address and port to listen on (port 0: any free port)
    #[arg(long, default_value = "127.0.0.1:8787", value_name = "ADDR:PORT")]
    bind: SocketAddr,
    /// The token requests must carry (generated when binding a non-loopback address without one)
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
    /// Serve no page that writes: for publishing a run's evidence
    #[arg(long)]
    read_only: bool,
    /// A license policy file (YAML) or the preset `permissive` the review may use; repeat it
    /// to offer several (the first is the queue's, and the policy diff compares any two);
    /// default: `permissive`
    #[arg(long = "policy", value_name = "FILE")]
    policies: Vec<String>,
    /// An audit policy file (YAML) the audit pages offer, by its name; repeat it to offer
    /// several
    #[arg(long = "audit-policy", value_name = "FILE")]
    audit_policies: Vec<PathBuf>,
    /// The verdicts directory (default: `verdicts/` at the top of the git work tree)
    #[arg(long, value_name = "DIR")]
    verdicts: Option<PathBuf>,
    /// Sign the verdicts decided in the workbench with this private key (PEM or OpenSSH), as
    /// `prov license decide --key` does
    #[arg(long, value_name = "KEY")]
    key: Option<PathBuf>,
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
    let names: Vec<&str> =
        if args.policies.is_empty() { vec!["permissive"] } else { args.policies.iter().map(String::as_str).collect() };
    let policies = names.iter().map(|n| prov_review::read_policy(&cx.cwd, n)).collect::<Result<Vec<_>, _>>()?;
    let mut audit_policies = Vec::new();
    for file in &args.audit_policies {
        let (policy, digest) = super::audit::read_policy(cx, file)?;
        audit_policies.push(prov_serve::audit::LoadedAuditPolicy { policy, digest });
    }
    let key = args.key.as_ref().map(|k| prov_attest::SigningKey::read(&cx.cwd.join(k))).transpose()?;
    let config = prov_serve::ServeConfig {
        bind: args.bind,
        token,
        verdicts: prov_review::verdicts_dir(&project_root, args.verdicts.as_deref()),
        project_root,
        store_dir,
        read_only: args.read_only,
        audit_policies: Arc::new(audit_policies),
        limits: prov_serve::ConnectionLimits::default(),
        policies,
        key: key.map(Arc::new),
        clock: Arc::from(CommandContext::clock()),
    };
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
