//! The `toxicity` claim: each language lost the claimed share of its scored documents, at
//! the threshold the stage recorded.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{ClaimResult, Covers, RunContext, filters, percent, row_or_fail, share};

/// A statistic as a float, when it is a number.
fn number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// The `toxicity` claim.
pub(super) fn toxicity(cx: &RunContext<'_>, stage: Option<&str>, removed_share: f64, tolerance: f64) -> ClaimResult {
    let mut result = ClaimResult::new(
        "toxicity",
        format!(
            "per language, the removed toxicity share is {} within {}, at the recorded thresholds",
            percent(removed_share),
            percent(tolerance)
        ),
    );
    for (s, f) in filters(cx, "toxicity", stage, Covers::TrainingData, &mut result) {
        let name = s.name.as_str();
        if let Some(q) = number(s.stats.get("quantile")) {
            result.evidence(format!("`{name}` quantile applied"), q);
        }
        let Some(Value::Object(thresholds)) = s.stats.get("thresholds") else {
            result.undecided(format!("`{name}` recorded no `thresholds` statistic"));
            continue;
        };
        let mut scored: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        let mut bad_rows = 0u64;
        for row in f.ledger.rows(cx.store) {
            let Some(r) = row_or_fail(row, name, &mut result) else { break };
            let ev = r.evidence.as_ref();
            let Some(lang) = ev.and_then(|e| e.get("language")).and_then(Value::as_str) else { continue };
            if !matches!(r.rule.as_str(), "toxicity:toxic" | "toxicity:kept") {
                continue;
            }
            let recorded = thresholds.get(lang).and_then(|t| number(t.get("threshold")));
            let (score, threshold) =
                (number(ev.and_then(|e| e.get("score"))), number(ev.and_then(|e| e.get("threshold"))));
            let consistent = match (score, threshold, recorded) {
                (Some(sc), Some(t), Some(rt)) if t.to_bits() == rt.to_bits() => {
                    (sc >= t) == (r.rule == "toxicity:toxic")
                }
                _ => false,
            };
            if !consistent {
                bad_rows += 1;
            }
            let e = scored.entry(thresholds.get_key_value(lang).map_or("", |(k, _)| k.as_str())).or_insert((0, 0));
            e.0 += 1;
            if r.rule == "toxicity:toxic" {
                e.1 += 1;
            }
        }
        if bad_rows > 0 {
            result.fail(format!(
                "`{name}`: {bad_rows} scored rows disagree with their language's recorded threshold (score at or above it must be removed)"
            ));
        }
        result.rechecked.push(format!("`{name}`: every scored row's score against its language's recorded threshold"));
        for (lang, t) in thresholds {
            let Some(threshold) = number(t.get("threshold")) else { continue };
            let (n, removed) = scored.get(lang.as_str()).copied().unwrap_or((0, 0));
            let stats = (t.get("scored").and_then(Value::as_u64), t.get("removed").and_then(Value::as_u64));
            if stats != (Some(n), Some(removed)) {
                result.fail(format!(
                    "`{name}` `{lang}`: the ledger has {n} scored and {removed} removed, the statistics say {:?} and {:?}",
                    stats.0, stats.1
                ));
            }
            let got = share(removed, n);
            result.evidence(
                format!("`{name}` `{lang}` removed (threshold {threshold})"),
                format!("{removed} of {n} = {}", percent(got)),
            );
            if (got - removed_share).abs() > tolerance + 1e-12 {
                result.fail(format!(
                    "`{name}` `{lang}`: removed {} of scored documents, not {} within {}",
                    percent(got),
                    percent(removed_share),
                    percent(tolerance)
                ));
            }
        }
    }
    result
}
