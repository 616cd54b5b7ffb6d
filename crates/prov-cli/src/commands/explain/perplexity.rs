//! `prov explain perplexity`: scores stdin with an n-gram model as the `perplexity` stage does
//! (`CCNet`'s `DocLM`) and shows each paragraph's part of the document's perplexity, and with
//! cut-offs its bucket.

use std::path::PathBuf;

use prov_ngram::ccnet::{ParagraphScore, doc_perplexity, paragraph_scores};
use prov_ngram::perplexity::Bucket;
use prov_ngram::{Arpa, Model};
use serde_json::{Value, json};

use crate::error::CommandError;
use crate::ui::Ui;

/// Score stdin with an n-gram model as the perplexity stage does and say which bucket it is in
///
/// Reads one document's UTF-8 text from stdin and an ARPA model (for example a file of an
/// `ngram-train` stage's `models` tree, exported or read with `prov show`). Each paragraph (a
/// line) is normalised as `CCNet` does and scored with an end of sentence; the document's
/// perplexity is `10^(-Σ log10 / Σ tokens)`, rounded to one decimal. Prints each paragraph's
/// log10 probability, tokens and normalised text, then the perplexity. With `--cutoffs
/// HEAD,TAIL` (a stage's `cutoffs` statistics for the document's language) it also prints the
/// bucket as the stage's ledger names it (`perplexity:head`, `perplexity:middle`,
/// `perplexity:tail`) and whether the stage's `keep` (`--keep`, default `head,middle`) keeps it.
/// An empty text has no perplexity (`perplexity:empty`). With `--json`, one `perplexity`
/// message: `{"perplexity", "log10", "tokens", "paragraphs": [{"paragraph", "normalized",
/// "log10", "tokens"}], "rule", "kept"}` (`rule` and `kept` null without `--cutoffs`).
#[derive(Debug, clap::Args)]
pub(super) struct PerplexityArgs {
    /// The n-gram model, an ARPA file
    #[arg(long, value_name = "FILE")]
    model: PathBuf,
    /// The language's head and tail cut-offs, e.g. `120.5,310`
    #[arg(long, value_name = "HEAD,TAIL", value_parser = parse_cutoffs)]
    cutoffs: Option<[f64; 2]>,
    /// The buckets kept, e.g. `head,middle`
    #[arg(long, value_name = "BUCKETS", value_delimiter = ',', default_value = "head,middle", value_parser = parse_bucket)]
    keep: Vec<Bucket>,
}

fn parse_cutoffs(text: &str) -> Result<[f64; 2], String> {
    let bad = || format!("`{text}` is not two cut-offs `HEAD,TAIL` with 0 <= HEAD <= TAIL");
    let (h, t) = text.split_once(',').ok_or_else(bad)?;
    let (h, t): (f64, f64) = (h.trim().parse().map_err(|_| bad())?, t.trim().parse().map_err(|_| bad())?);
    if !(h.is_finite() && t.is_finite() && h >= 0.0 && h <= t) {
        return Err(bad());
    }
    Ok([h, t])
}

fn parse_bucket(text: &str) -> Result<Bucket, String> {
    serde_json::from_value(Value::String(text.to_owned()))
        .map_err(|_| format!("`{text}` is not a bucket: `head`, `middle` or `tail`"))
}

pub(super) fn cmd_explain_perplexity(ui: &mut Ui, args: &PerplexityArgs) -> Result<(), CommandError> {
    let shown = args.model.display();
    let text = prov_store::read_named_text(args.model.as_ref(), super::MAX_MODEL_FILE_BYTES, "the model")
        .map_err(|e| CommandError::input(format!("reading the model: {e}")))?;
    let arpa = Arpa::parse(&text).map_err(|e| {
        CommandError::input(format!("{shown}: {e}")).with_hint("give an ARPA file, as `ngram-train` or lmplz write")
    })?;
    let model = Model::new(&arpa);
    let text = super::stdin_text()?;
    let paragraphs: Vec<ParagraphScore> =
        if text.is_empty() { Vec::new() } else { paragraph_scores(&model, &text).collect() };
    let scored = doc_perplexity(&model, &text);
    let bucket = scored.zip(args.cutoffs).map(|((pp, _, _), c)| Bucket::of(pp, c));
    let rule = match (&scored, bucket) {
        (None, _) => Some("perplexity:empty"),
        (_, Some(b)) => Some(b.rule()),
        _ => None,
    };
    let kept = match (&scored, bucket) {
        (None, _) => Some(true),
        (_, Some(b)) => Some(args.keep.contains(&b)),
        _ => None,
    };
    if ui.is_json() {
        let paragraphs: Vec<Value> = paragraphs
            .iter()
            .enumerate()
            .map(|(i, p)| json!({ "paragraph": i, "normalized": p.normalized, "log10": p.log10, "tokens": p.length }))
            .collect();
        let (pp, log10, tokens) = scored.map_or((None, None, None), |(pp, l, n)| (Some(pp), Some(l), Some(n)));
        ui.json(
            "perplexity",
            json!({ "perplexity": pp, "log10": log10, "tokens": tokens, "paragraphs": paragraphs, "rule": rule, "kept": kept }),
        )?;
        return Ok(());
    }
    for (i, p) in paragraphs.iter().enumerate() {
        ui.line(format!("paragraph {i}: log10 {} over {} tokens: {:?}", p.log10, p.length, p.normalized))?;
    }
    let Some((pp, log10, tokens)) = scored else {
        ui.line("perplexity:empty: kept: the text is empty, so it has no perplexity")?;
        return Ok(());
    };
    ui.line(format!("perplexity {pp} (log10 {log10} over {tokens} tokens)"))?;
    if let (Some(rule), Some(kept), Some([head, tail])) = (rule, kept, args.cutoffs) {
        let verdict = if kept { "kept" } else { "removed" };
        ui.line(format!("{rule}: {verdict} (cut-offs {head}, {tail})"))?;
    }
    Ok(())
}
