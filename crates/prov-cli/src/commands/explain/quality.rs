//! `prov explain quality`: scores stdin with a pinned quality scorer as the `quality` stage
//! does, says its tier and rule, and which n-grams raised and lowered the score most.

use std::collections::BTreeMap;
use std::path::PathBuf;

use prov_quality::model::Scorer;
use prov_quality::stage::{QualityConfig, Tier, assess};
use serde_json::json;

use crate::error::CommandError;
use crate::ui::Ui;

/// Score the text of stdin with a quality scorer and say its tier and which n-grams moved it
///
/// Reads one document's UTF-8 text from stdin and a scorer that a `quality-train` stage wrote
/// (its `model` output). Prints the score before and after clipping to 0–5, the tier for
/// `--cutoffs LOW,HIGH` (`quality:high` at or above HIGH, `quality:medium` from LOW, else
/// `quality:low`) and whether a `quality` stage keeping the `--keep` tiers keeps it; then the
/// `--top` n-grams that raised the score most and those that lowered it most. An n-gram's part
/// is its count, signed as its hash signs it, times its bucket's weight over the document's
/// feature norm: the parts
/// and the intercept add up to the score before clipping. With `--json`, one `quality`
/// message: `{"raw", "score", "tier", "rule", "decision", "evidence", "intercept", "raised":
/// [{"gram", "count", "part"}], "lowered": [...]}`, the rule, decision and evidence as in the
/// ledger.
#[derive(Debug, clap::Args)]
pub(super) struct QualityArgs {
    /// The scorer file
    #[arg(long, value_name = "FILE")]
    model: PathBuf,
    /// The stage's `cutoffs`: LOW,HIGH
    #[arg(long, value_name = "LOW,HIGH", default_value = "2,3", value_delimiter = ',')]
    cutoffs: Vec<f64>,
    /// The stage's `keep` (high, medium, low); default every tier
    #[arg(long, value_name = "TIER", value_delimiter = ',', value_parser = parse_tier)]
    keep: Vec<Tier>,
    /// How many n-grams to show each way
    #[arg(long, value_name = "N", default_value_t = 5)]
    top: usize,
}

fn parse_tier(text: &str) -> Result<Tier, String> {
    serde_json::from_value(json!(text)).map_err(|_| format!("`{text}` is not a tier: high, medium or low"))
}

pub(super) fn cmd_explain_quality(ui: &mut Ui, args: &QualityArgs) -> Result<(), CommandError> {
    let &[low, high] = args.cutoffs.as_slice() else {
        return Err(CommandError::input(format!(
            "`--cutoffs` takes two numbers, LOW,HIGH; got {}",
            args.cutoffs.len()
        )));
    };
    if !(low.is_finite() && high.is_finite() && (0.0..=high).contains(&low) && high <= 5.0) {
        return Err(CommandError::input(format!("`--cutoffs` needs 0 ≤ LOW ≤ HIGH ≤ 5, got {low},{high}")));
    }
    let shown = args.model.display();
    let file = prov_store::read_named_text(args.model.as_ref(), super::MAX_MODEL_FILE_BYTES, "the scorer")
        .map_err(|e| CommandError::input(format!("reading the scorer: {e}")))?;
    let scorer = Scorer::parse(&file).map_err(|e| {
        CommandError::input(format!("{shown}: {e}")).with_hint("give the `model` output of a quality-train stage")
    })?;
    let text = super::stdin_text()?;
    let keep = if args.keep.is_empty() { vec![Tier::High, Tier::Medium, Tier::Low] } else { args.keep.clone() };
    let config = QualityConfig { cutoffs: [low, high], keep };
    let verdict = assess(&scorer, &text, &config);
    let (raised, lowered) = parts(&scorer, &text, args.top);
    let decision = verdict.decision.as_str();
    if ui.is_json() {
        let list = |v: &[(String, i64, f64)]| {
            v.iter().map(|(g, c, p)| json!({ "gram": g, "count": c, "part": p })).collect::<Vec<_>>()
        };
        ui.json(
            "quality",
            json!({
                "raw": verdict.raw, "score": verdict.score, "tier": verdict.tier.name(), "rule": verdict.rule(),
                "decision": decision, "evidence": verdict.evidence(&config), "intercept": scorer.model.intercept,
                "raised": list(&raised), "lowered": list(&lowered),
            }),
        )?;
        return Ok(());
    }
    ui.line(format!(
        "{}: {decision}: score {:.4} (before clipping {:.4}), cut-offs {low} and {high}",
        verdict.rule(),
        verdict.score,
        verdict.raw
    ))?;
    ui.line(format!("intercept {:.4}", scorer.model.intercept))?;
    for (heading, list) in [("raised most by", &raised), ("lowered most by", &lowered)] {
        let shown: Vec<String> = list.iter().map(|(g, c, p)| format!("{g:?} ×{c} {p:+.4}")).collect();
        ui.line(format!("{heading}: {}", if shown.is_empty() { "nothing".to_owned() } else { shown.join(", ") }))?;
    }
    Ok(())
}

/// The `top` n-grams with the largest positive and negative parts: (n-gram, count, part), all
/// parts summing with the intercept to the score before clipping.
type Parts = Vec<(String, i64, f64)>;

fn parts(scorer: &Scorer, text: &str, top: usize) -> (Parts, Parts) {
    let features = &scorer.features;
    let mut counts: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
    features.for_each_gram(text, |g| *counts.entry(g.to_vec()).or_default() += 1);
    // The norm the features were divided by: that of the signed bucket counts.
    let raw_norm = prov_quality::features::l2_norm(&features.counts(text));
    let mut all: Parts = counts
        .into_iter()
        .map(|(g, c)| {
            let (b, sign) = features.bucket(&g);
            // Counts that cancel to 0 leave no features: the score is the intercept alone.
            let part =
                if raw_norm == 0.0 { 0.0 } else { sign * c as f64 * scorer.model.weights[b as usize] / raw_norm };
            (String::from_utf8_lossy(&g).into_owned(), c, part)
        })
        .collect();
    all.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    let raised: Parts = all.iter().filter(|p| p.2 > 0.0).take(top).cloned().collect();
    let lowered: Parts = all.iter().rev().filter(|p| p.2 < 0.0).take(top).cloned().collect();
    (raised, lowered)
}
