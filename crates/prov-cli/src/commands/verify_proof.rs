//! `prov verify-proof`: checks a document proof from its bytes alone.

use std::path::{Path, PathBuf};

use prov_audit::{Pins, Subject, verify};
use prov_store::Digest;
use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::render;
use crate::ui::Ui;

/// The most a proof file (or a `--run` file) may hold: 64 MiB. A proof is logarithmic in the
/// corpus; this only keeps a mistaken path from being read without end.
const MAX_PROOF_FILE_BYTES: u64 = 64 << 20;

/// Check a document proof without the corpus or the store
///
/// Reads a proof written by `prov prove` and checks every digest in it: the run record's
/// root, the stage records along the documents' path, each ledger record, and every row's
/// audit path to its shard root, which proves both inclusion and absence. Prints what the
/// proof shows: each filter stage's decision and rule, and whether the documents reached the
/// training data. Exits 0 when the proof is valid and 2 when any part of it fails, naming
/// the part. `--doc` or `--url` requires the proof to be about that document or URL, exactly:
/// ids and URLs are printed with invisible characters and line breaks escaped (`\u{200b}`),
/// but only the pin makes sure that the proof is about the one you mean.
///
/// A proof carries the records of its run, so it must be anchored to a run you trust:
/// `--run` (the run manifest's digest, or a file holding it, such as a committed
/// `manifests/<recipe>/RUN`) or `--root` (the run record's `root`, which pins the stages but
/// not the recipe name and run id the record states). Without either the command refuses
/// (exit 1), unless `--unanchored` asks for the proof's internal consistency only, which the
/// output then says.
#[derive(Debug, clap::Args)]
pub(crate) struct VerifyProofArgs {
    /// The proof file
    file: PathBuf,
    /// The run root the proof must lead to (`blake3:<64 hex>`)
    #[arg(long, value_name = "DIGEST")]
    root: Option<String>,
    /// The run manifest the proof must contain: its digest, or a file holding the digest or
    /// the run record itself
    #[arg(long, value_name = "DIGEST|FILE")]
    run: Option<String>,
    /// The stage the proof's chain must reach (the run's `tokenize` stage, say)
    #[arg(long, value_name = "STAGE")]
    until: Option<String>,
    /// Check the proof's internal consistency only, anchored to no run you trust
    #[arg(long, conflicts_with_all = ["root", "run"])]
    unanchored: bool,
    /// The document id the proof must be about, exactly
    #[arg(long, value_name = "ID", conflicts_with = "url")]
    doc: Option<String>,
    /// The URL the proof must be about, exactly as in the dataset
    #[arg(long, value_name = "URL")]
    url: Option<String>,
}

pub(crate) fn cmd_verify_proof(ui: &mut Ui, cx: &CommandContext, args: &VerifyProofArgs) -> Result<(), CommandError> {
    let path = cx.cwd.join(&args.file);
    let bytes = prov_store::read_named_file(&path, MAX_PROOF_FILE_BYTES, "the proof")
        .map_err(|e| CommandError::input(format!("reading the proof: {e}")))?;
    let root = args
        .root
        .as_deref()
        .map(|r| r.parse::<Digest>().map_err(|e| CommandError::input(format!("`--root`: {e}"))))
        .transpose()?;
    let run_manifest = args.run.as_deref().map(|r| run_pin(&cx.cwd, r)).transpose()?;
    let subject = match (&args.doc, &args.url) {
        (Some(id), _) => Some(Subject::Doc(id.clone())),
        (None, Some(url)) => Some(Subject::Url(url.clone())),
        (None, None) => None,
    };
    let pins = Pins { root, run_manifest, until: args.until.clone(), subject };
    if !pins.anchored() && !args.unanchored {
        return Err(CommandError::input(
            "the proof is not anchored: it carries its own run's records, which anyone can write",
        )
        .with_hint(
            "pin the run you trust with `--run <RUN file or digest>` (or `--root <digest>`); `--unanchored` checks \
             the proof's internal consistency only",
        ));
    }
    let verified = verify(&bytes, &pins)
        .map_err(|e| CommandError::integrity(format!("proof `{}` does not verify: {e}", args.file.display())))?;
    let anchor = match (run_manifest, root) {
        (Some(_), _) => "run manifest",
        (None, Some(_)) => "run root",
        (None, None) => "none",
    };
    ui.json(
        "proof",
        json!({
            "valid": pins.anchored(),
            "consistent": true,
            "anchored_by": anchor,
            "file": args.file.display().to_string(),
            "shows": verified,
        }),
    )?;
    for line in render::proof_summary(&verified, &pins) {
        ui.line(line)?;
    }
    Ok(())
}

/// Reads `--run`: a digest, or a file holding a digest (a `RUN` file) or a run record.
fn run_pin(cwd: &Path, arg: &str) -> Result<Digest, CommandError> {
    if let Ok(d) = arg.parse::<Digest>() {
        return Ok(d);
    }
    let bytes = prov_store::read_named_file(&cwd.join(arg), MAX_PROOF_FILE_BYTES, "`--run`").map_err(|e| {
        CommandError::input(format!("`--run`: neither a digest nor a readable file: {e}"))
            .with_hint("give `blake3:<64 hex>`, a RUN file, or the run manifest's JSON file")
    })?;
    let text = String::from_utf8_lossy(&bytes);
    Ok(text.trim().parse::<Digest>().unwrap_or_else(|_| Digest::of(&bytes)))
}
