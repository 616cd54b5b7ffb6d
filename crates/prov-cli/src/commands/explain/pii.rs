//! `prov explain pii`: redacts stdin in one PII mode and says what it replaced.

use prov_pii::{Mode, Redactor, StrictOptions};
use serde_json::json;

use crate::error::CommandError;
use crate::ui::Ui;

/// Redact the e-mail addresses, IP addresses and IBANs of stdin and say what was replaced
///
/// Reads UTF-8 text from stdin and writes the redacted text to stdout exactly, with no newline
/// added. Each replaced span goes to stderr, one per line: its type
/// (`email`, `ip` or `iban`) and its byte offsets in the input, as `TYPE START..END`. The PII
/// itself is never printed. With `--json`, stdout carries one `pii` message instead: `{"text":
/// REDACTED, "matches": [{"type", "start", "end"}]}`, and stderr nothing.
///
/// `--mode apertus` reproduces the released Apertus PII step: its Python `re` patterns, e-mail
/// addresses first, then IPv4 addresses, then IBANs in one space-grouped layout, each distinct
/// match replaced everywhere in the text, longest first, then in byte order. `--mode strict`
/// finds e-mail addresses, IPv4 and IPv6 addresses checked by parsing, and IBANs of every
/// country (compact or grouped, with the country's length and a valid checksum), and replaces
/// each where it is.
#[derive(Debug, clap::Args)]
pub(super) struct PiiArgs {
    /// The redaction to apply
    #[arg(long, value_enum)]
    mode: ModeArg,
    /// Keep private, loopback, link-local, documentation and other reserved IP addresses
    /// (strict mode only)
    #[arg(long)]
    keep_private_ips: bool,
}

/// `--mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ModeArg {
    /// The released Apertus step (Python `re` patterns, `str.replace` of distinct matches)
    Apertus,
    /// Validated e-mail, IPv4, IPv6 and IBAN detection, replaced in place
    Strict,
}

pub(super) fn cmd_explain_pii(ui: &mut Ui, args: &PiiArgs) -> Result<(), CommandError> {
    let mode = match args.mode {
        ModeArg::Apertus => Mode::Apertus,
        ModeArg::Strict => Mode::Strict,
    };
    if args.keep_private_ips && mode != Mode::Strict {
        return Err(CommandError::input("`--keep-private-ips` applies to `--mode strict` only"));
    }
    let text = super::stdin_text()?;
    let redaction = Redactor::new(mode, StrictOptions { keep_private_ips: args.keep_private_ips }).redact(&text);
    if ui.is_json() {
        let matches: Vec<_> =
            redaction.matches.iter().map(|m| json!({"type": m.kind, "start": m.start, "end": m.end})).collect();
        ui.json("pii", json!({"text": redaction.text, "matches": matches}))?;
        return Ok(());
    }
    // The redacted text is data that must arrive byte for byte, without the newline that
    // `Ui::line` adds.
    ui.raw(redaction.text.as_bytes())?;
    for m in &redaction.matches {
        ui.status(format!("{} {}..{}", m.kind, m.start, m.end));
    }
    Ok(())
}
