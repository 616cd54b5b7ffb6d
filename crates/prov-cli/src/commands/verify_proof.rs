//! `prov verify-proof`: checks a document proof from its bytes alone.

use std::path::{Path, PathBuf};

use prov_audit::{Pins, Subject, Verified, verify};
use prov_store::Digest;
use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::Ui;

/// Check a document proof without the corpus or the store
///
/// Reads a proof written by `prov prove` and checks every digest in it: the run record's
/// root, the stage records along the documents' path, each ledger record, and every row's
/// audit path to its shard root, which proves both inclusion and absence. Prints what the
/// proof shows: each filter stage's decision and rule, and whether the documents reached the
/// training data. Exits 0 when the proof is valid and 2 when any part of it fails, naming
/// the part.
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
}

pub(crate) fn cmd_verify_proof(ui: &mut Ui, cx: &CommandContext, args: &VerifyProofArgs) -> Result<(), CommandError> {
    let path = cx.cwd.join(&args.file);
    let bytes = fs_err::read(&path).map_err(|e| CommandError::input(format!("reading the proof: {e}")))?;
    let root = args
        .root
        .as_deref()
        .map(|r| r.parse::<Digest>().map_err(|e| CommandError::input(format!("`--root`: {e}"))))
        .transpose()?;
    let run_manifest = args.run.as_deref().map(|r| run_pin(&cx.cwd, r)).transpose()?;
    let pins = Pins { root, run_manifest, until: args.until.clone() };
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
    for line in summary(&verified, &pins) {
        ui.line(line)?;
    }
    Ok(())
}

/// Reads `--run`: a digest, or a file holding a digest (a `RUN` file) or a run record.
fn run_pin(cwd: &Path, arg: &str) -> Result<Digest, CommandError> {
    if let Ok(d) = arg.parse::<Digest>() {
        return Ok(d);
    }
    let bytes = fs_err::read(cwd.join(arg)).map_err(|e| {
        CommandError::input(format!("`--run`: neither a digest nor a readable file: {e}"))
            .with_hint("give `blake3:<64 hex>`, a RUN file, or the run manifest's JSON file")
    })?;
    let text = String::from_utf8_lossy(&bytes);
    Ok(text.trim().parse::<Digest>().unwrap_or_else(|_| Digest::of(&bytes)))
}

/// Returns the human-readable lines of what a valid proof shows, saying what pins it.
pub(crate) fn summary(v: &Verified, pins: &Pins) -> Vec<String> {
    let head = if pins.run_manifest.is_some() {
        format!("proof valid: {} in run {} ({})", v.subject.describe(), v.run_id, v.recipe)
    } else if pins.root.is_some() {
        // The root pins the stage records; the run record's recipe and lockfile are not in it.
        format!(
            "proof valid: {} in the run with root {} (its run record says run {} of `{}`, which `--root` does not \
             pin; `--run` does)",
            v.subject.describe(),
            v.run_root,
            v.run_id,
            v.recipe
        )
    } else {
        format!(
            "proof NOT ANCHORED: consistent, but tied to no run you trust; it shows {} in a run whose records it \
             carries itself (run {} of `{}`, as it says)",
            v.subject.describe(),
            v.run_id,
            v.recipe
        )
    };
    let mut lines = vec![
        head,
        format!("  run root      {}", v.run_root),
        format!("  run manifest  {}", v.run_manifest),
        format!("  path          {}", v.path.join(" -> ")),
    ];
    if let (Subject::Url(_), Some(index)) = (&v.subject, &v.url_index) {
        lines.push(match v.ids.as_slice() {
            [] => format!("  never seen: no document has this URL (URL index of stage `{index}`)"),
            ids => format!("  documents with this URL (URL index of stage `{index}`): {}", ids.join(", ")),
        });
    }
    for stage in &v.stages {
        let head = format!("  {} ({})", stage.stage, stage.stage_kind);
        if stage.rows.is_empty() && !v.ids.is_empty() {
            lines.push(format!("{head}: absent, not in the stage's input (no row in its {} shards)", stage.shards));
        }
        for r in &stage.rows {
            let who = if v.ids.len() > 1 { format!(" `{}`", r.id) } else { String::new() };
            lines.push(format!("{head}:{who} {} by `{}` (shard {}, row {})", r.decision, r.rule, r.shard, r.row));
        }
    }
    if let Some(t) = &v.training {
        let verdict = match t.reached {
            Some(true) => "reached the training data",
            Some(false) => "did not reach the training data",
            None => "cannot say: the stage writes no ledger",
        };
        lines.push(format!("  training data (`{}`, the `docs` of `{}`): {verdict}", t.dataset_stage, t.stage));
    } else {
        let (stage, kind) = &v.target;
        lines.push(format!(
            "  training data: not shown: the proof ends at stage `{stage}` ({kind}), not at a `tokenize` stage, \
             and shows nothing of the stages after it"
        ));
    }
    lines
}
