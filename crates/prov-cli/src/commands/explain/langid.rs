//! `prov explain langid`: identifies the language of stdin with a pinned model as the `langid`
//! stage does, shows the most likely languages, and with a declared language the rule.

use std::path::PathBuf;

use prov_langid::Model;
use prov_langid::stage::{LangidConfig, OnMismatch, assess};
use serde_json::{Value, json};

use crate::error::CommandError;
use crate::ui::Ui;

/// Identify the language of stdin with a language model and say which langid rule decides
///
/// Reads one document's UTF-8 text from stdin and a model that a `langid-train` stage wrote
/// (its `model` output, exported or read with `prov show`). Prints the `--top` most likely
/// languages with their posterior probabilities and log-likelihoods and the number of grams
/// the model knows, then the rule of the `langid` stage for the text declared as `--declared`
/// (`langid:match`, `langid:mismatch`, `langid:uncertain` below `--min-score`,
/// `langid:undeclared`, `langid:unknown-language`, `langid:no-words`) and whether the stage
/// keeps it (a mismatch is removed unless `--keep-mismatch`). With `--json`, one `langid`
/// message: `{"grams", "languages": [{"language", "posterior", "log_likelihood"}], "rule",
/// "decision", "evidence"}`, the rule, decision and evidence as in the ledger.
#[derive(Debug, clap::Args)]
pub(super) struct LangidArgs {
    /// The model file
    #[arg(long, value_name = "FILE")]
    model: PathBuf,
    /// The document's declared language tag (`de-CH`); none means undeclared
    #[arg(long, value_name = "TAG")]
    declared: Option<String>,
    /// The stage's `min_score`
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    min_score: f64,
    /// The stage's `mismatch: keep`
    #[arg(long)]
    keep_mismatch: bool,
    /// How many languages to show
    #[arg(long, value_name = "N", default_value_t = 5)]
    top: usize,
}

pub(super) fn cmd_explain_langid(ui: &mut Ui, args: &LangidArgs) -> Result<(), CommandError> {
    if !(0.0..=1.0).contains(&args.min_score) {
        return Err(CommandError::input(format!("`--min-score` must be between 0 and 1, got {}", args.min_score)));
    }
    let shown = args.model.display();
    let text = prov_store::read_named_text(args.model.as_ref(), super::MAX_MODEL_FILE_BYTES, "the model")
        .map_err(|e| CommandError::input(format!("reading the model: {e}")))?;
    let model = Model::parse(&text).map_err(|e| {
        CommandError::input(format!("{shown}: {e}")).with_hint("give the `model` output of a langid-train stage")
    })?;
    let text = super::stdin_text()?;
    let mismatch = if args.keep_mismatch { OnMismatch::Keep } else { OnMismatch::Remove };
    let config = LangidConfig { mismatch, min_score: args.min_score };
    let verdict = assess(&model, args.declared.as_deref(), &text, &config);
    let ranking = model.ranked(&text);
    let top = &ranking.languages[..args.top.min(ranking.languages.len())];
    let decision = verdict.decision.as_str();
    if ui.is_json() {
        let languages: Vec<Value> = top
            .iter()
            .map(|r| json!({ "language": r.language, "posterior": r.posterior, "log_likelihood": r.log_likelihood }))
            .collect();
        ui.json(
            "langid",
            json!({
                "grams": ranking.grams,
                "languages": languages,
                "rule": verdict.rule,
                "decision": decision,
                "evidence": verdict.evidence(),
            }),
        )?;
        return Ok(());
    }
    for (i, r) in top.iter().enumerate() {
        ui.line(format!(
            "{}. {}: posterior {:.6}, log-likelihood {:.3}",
            i + 1,
            r.language,
            r.posterior,
            r.log_likelihood
        ))?;
    }
    ui.line(format!("{} grams the model knows", ranking.grams))?;
    let detected =
        verdict.identification.as_ref().map_or_else(|| "nothing".to_owned(), |id| format!("`{}`", id.language));
    ui.line(format!("{}: {decision}: declared `{}`, detected {detected}", verdict.rule, verdict.declared))?;
    Ok(())
}
