//! `prov explain heuristics`: applies EuroLLM's heuristic filter to stdin and says which rule
//! removes the document, or which paragraphs, with what each rule counted.

use prov_heuristics::{Measures, Outcome, ParagraphRule, Thresholds, assess};
use serde_json::{Value, json};

use crate::error::CommandError;
use crate::ui::Ui;

/// Apply EuroLLM's heuristic filter to stdin and say which rule removes it or its paragraphs
///
/// Reads one document's UTF-8 text from stdin and applies the rules of the `heuristics` stage
/// with the stage's `params` (`--params`, as JSON; the report's thresholds by default; the
/// stage's `languages` do not apply here). Prints, for each removed paragraph (numbered from
/// 0, a paragraph being a line), its rule and what the rule counted, then the decision as the
/// stage's ledger names it: `heuristics:kept`, `heuristics:paragraphs` (paragraphs removed),
/// `heuristics:too-short`, `heuristics:lorem-ipsum`, `heuristics:javascript` or
/// `heuristics:curly-bracket`. With `--json`, one `heuristics` message: `{"rule", "evidence",
/// "removed": [{"paragraph", "rule", "measures"}], "text"}`, the rule and evidence as in the
/// ledger and `text` what the stage writes (null for a removed document).
#[derive(Debug, clap::Args)]
pub(super) struct HeuristicsArgs {
    /// The stage's params as JSON, e.g. `{"min_chars": 100, "curly_brackets": false}`
    #[arg(long, value_name = "JSON", default_value = "{}")]
    params: String,
}

pub(super) fn cmd_explain_heuristics(ui: &mut Ui, args: &HeuristicsArgs) -> Result<(), CommandError> {
    let params: Value =
        serde_json::from_str(&args.params).map_err(|e| CommandError::input(format!("`--params` is not JSON: {e}")))?;
    let config = prov_heuristics::stage::resolve(&params).map_err(|e| {
        let at = if e.path.is_empty() { String::new() } else { format!("{}: ", e.path.join(".")) };
        let err = CommandError::input(format!("`--params` {at}{}", e.message));
        match e.hint {
            Some(h) => err.with_hint(h),
            None => err,
        }
    })?;
    let text = super::stdin_text()?;
    let t = &config.thresholds;
    let outcome = assess(&text, t);
    let (rule, evidence) = outcome.ledger_entry();
    // Each removed paragraph with its measures, in paragraph order.
    let mut removed: Vec<(usize, ParagraphRule, Measures)> = Vec::new();
    if let Outcome::Paragraphs { removed: by_rule, .. } = &outcome {
        let paragraphs: Vec<&str> = text.split('\n').collect();
        for (r, at) in by_rule {
            removed.extend(at.iter().map(|&i| (i, *r, Measures::of(paragraphs[i]))));
        }
        removed.sort_by_key(|(i, _, _)| *i);
    }
    let written = match &outcome {
        Outcome::Paragraphs { text, too_short: false, .. } => Some(text.clone()),
        _ => None,
    };
    if ui.is_json() {
        let removed: Vec<Value> =
            removed.iter().map(|(i, r, m)| json!({ "paragraph": i, "rule": r.name(), "measures": m })).collect();
        ui.json(
            "heuristics",
            json!({ "rule": format!("heuristics:{rule}"), "evidence": evidence, "removed": removed, "text": written }),
        )?;
        return Ok(());
    }
    for (i, r, m) in &removed {
        ui.line(format!("paragraph {i}: {}: {}", r.name(), counted(*r, m, t)))?;
    }
    let verdict = match &outcome {
        Outcome::Page(m) => format!("removed: `{}` in paragraph {}", m.matched, m.paragraph),
        Outcome::Paragraphs { paragraphs, chars, too_short: true, .. } => format!(
            "removed: {chars} characters left of {paragraphs} paragraphs ({} removed), fewer than {}",
            removed.len(),
            t.min_chars
        ),
        Outcome::Paragraphs { paragraphs, chars, .. } => {
            let verb = if removed.is_empty() { "kept" } else { "modified" };
            format!("{verb}: {} of {paragraphs} paragraphs removed, {chars} characters left", removed.len())
        }
    };
    ui.line(format!("heuristics:{rule}: {verdict}"))?;
    Ok(())
}

/// What a paragraph rule counted, against its threshold.
fn counted(rule: ParagraphRule, m: &Measures, t: &Thresholds) -> String {
    let ratio = |a: u64, b: u64| a as f64 / b as f64;
    match rule {
        ParagraphRule::Uppercase => format!(
            "{} of {} letters uppercase ({:.3} > {})",
            m.uppercase,
            m.letters,
            ratio(m.uppercase, m.letters),
            t.max_uppercase_fraction
        ),
        ParagraphRule::SymbolRatio => format!(
            "{} `#` and {} ellipses in {} words ({:.3} > {})",
            m.hashes,
            m.ellipses,
            m.words,
            ratio(m.hashes.max(m.ellipses), m.words),
            t.max_symbol_word_ratio
        ),
        ParagraphRule::NonAlphaWords => format!(
            "{} of {} words without a letter ({:.3} > {})",
            m.non_alpha_words,
            m.words,
            ratio(m.non_alpha_words, m.words),
            t.max_non_alpha_word_fraction
        ),
    }
}
