//! `prov prove`: a proof of what a run's filters did with one document or URL.

use std::path::PathBuf;

use prov_audit::{Pins, ProveError, Subject, prove, verify};
use prov_store::Access;
use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::render;
use crate::resolve::load_lockfile;
use crate::ui::Ui;

/// Prove what a run's filter stages did with a document or URL
///
/// Builds a proof from the run's ledger Merkle trees that the document was kept, removed or
/// modified by each filter stage on its way to the training data, and by which rule, and
/// whether it reached the training data (the `docs` input of the run's `tokenize` stage). A
/// document that never entered a stage is proven absent from every shard of its ledger. The
/// proof is canonical JSON (format: the book's "Document proofs" chapter); `prov
/// verify-proof` checks it without the corpus or the store.
///
/// With `--url`, the run needs a `url-index` stage over the dataset that enters its first
/// filter: the URL's documents are found in that index, and a URL never seen is proven
/// absent from it.
#[derive(Debug, clap::Args)]
pub(crate) struct ProveArgs {
    /// Run id (full or a prefix of at least 6 hex digits) or lockfile path
    run: String,
    /// The document id
    #[arg(long, value_name = "ID", required_unless_present = "url", conflicts_with = "url")]
    doc: Option<String>,
    /// The URL, exactly as in the dataset's `url` column
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// Write the proof to FILE instead of stdout
    #[arg(long, short, value_name = "FILE")]
    out: Option<PathBuf>,
}

impl From<ProveError> for CommandError {
    fn from(e: ProveError) -> Self {
        let hint = match &e {
            ProveError::NoUrlIndex { dataset, .. } => Some(format!(
                "add a stage `kind: url-index` whose `docs` input is `{}` (the first filter's `docs`) and re-run, or prove by `--doc`",
                dataset.short()
            )),
            _ => None,
        };
        let err = if e.is_integrity_failure() {
            CommandError::integrity(e.to_string())
        } else {
            CommandError::input(e.to_string())
        };
        match hint {
            Some(h) => err.with_hint(h),
            None => err,
        }
    }
}

pub(crate) fn cmd_prove(ui: &mut Ui, cx: &CommandContext, args: &ProveArgs) -> Result<(), CommandError> {
    let subject = match (&args.doc, &args.url) {
        (Some(id), None) => Subject::Doc(id.clone()),
        (None, Some(url)) => Subject::Url(url.clone()),
        _ => return Err(CommandError::input("give exactly one of `--doc` and `--url`")),
    };
    let (store, _) = cx.open_store(Access::ReadOnly, true)?;
    let loaded = load_lockfile(&store, &args.run)?;
    let run_id = prov_manifest::run_id(&loaded.bytes);
    let Some(recorded) = prov_exec::load_recorded_run(&store, &run_id)? else {
        return Err(CommandError::input(format!("no completed run of `{}` in this store", loaded.display))
            .with_hint("run it with `prov run` first; a proof is built from a recorded run"));
    };
    let run_manifest = recorded.manifest;
    let proof = prove(&store, &recorded, &subject)?;
    let mut bytes = proof.to_bytes();
    // The proof is checked as a verifier would before it is handed out.
    let pins = Pins { run_manifest: Some(run_manifest), subject: Some(subject), ..Pins::default() };
    let verified = verify(&bytes, &pins)
        .map_err(|e| CommandError::integrity(format!("the proof just built does not verify: {e}")))?;
    bytes.push(b'\n');
    if let Some(out) = &args.out {
        cx.write_output(out, &bytes, "proof")?;
    }
    let value: serde_json::Value = serde_json::from_slice(&bytes).expect("a proof is JSON");
    ui.json(
        "proof",
        json!({ "file": args.out.as_ref().map(|o| o.display().to_string()), "proof": value, "shows": verified }),
    )?;
    if args.out.is_none() {
        ui.line(String::from_utf8(bytes.clone()).expect("JSON is UTF-8").trim_end())?;
    }
    for line in render::proof_summary(&verified, &pins) {
        ui.status(line);
    }
    if let Some(out) = &args.out {
        ui.status(format!("wrote {} ({} bytes)", out.display(), bytes.len()));
    }
    Ok(())
}
