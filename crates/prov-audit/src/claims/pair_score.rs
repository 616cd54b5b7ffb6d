//! The `pair-score` claim: the parallel data was filtered at the thresholds EuroLLM's report
//! states (Bicleaner 0.6 for Portuguese and 0.5 for other languages, CometKiwi-22 0.7), as
//! applied to the run's pinned pair scorer.
//!
//! What is checked: the stage ran with the claimed thresholds; every ledger row's decision
//! follows from its recorded scores and thresholds; and every kept pair of the output (or the
//! sample), rescored from the pinned model file, has the scores its row records and passes
//! both thresholds. The rescoring uses `prov-parallel`'s scorer on the pinned file: it shows
//! that the output is what that model and those thresholds decide, not a second
//! implementation of the scorer.

use std::collections::BTreeMap;

use prov_dataset::LedgerDecision;
use prov_parallel::pairs::Pair;
use prov_parallel::score_stage::ScoreConfig;
use prov_parallel::scorer::Model;
use serde_json::Value;

use super::{
    AuditOptions, ClaimResult, Covers, RunContext, check_rules, choose_rows, each_chosen_doc, fail_if_many,
    fail_one_of_many, filters, row_or_fail,
};

/// Whether a row's recorded scores and thresholds give its rule.
fn row_consistent(rule: &str, evidence: Option<&serde_json::Map<String, Value>>, config: &ScoreConfig) -> bool {
    let get = |k: &str| evidence.and_then(|e| e.get(k)).and_then(Value::as_f64);
    let (Some(c), Some(q), Some(bt), Some(ct)) =
        (get("classifier"), get("quality"), get("bicleaner_threshold"), get("cometkiwi_threshold"))
    else {
        return false;
    };
    let Some((source, target)) =
        evidence.and_then(|e| e.get("language_pair")).and_then(Value::as_str).and_then(|p| p.split_once('-'))
    else {
        return false;
    };
    let thresholds_recorded = bt.to_bits() == config.bicleaner_for(source, target).to_bits()
        && ct.to_bits() == config.cometkiwi_threshold.to_bits();
    let expected = if c < bt {
        "pair-score:bicleaner"
    } else if q < ct {
        "pair-score:cometkiwi"
    } else {
        "pair-score:kept"
    };
    thresholds_recorded && rule == expected
}

/// The `pair-score` claim.
pub(super) fn pair_score(
    cx: &RunContext<'_>,
    stage: Option<&str>,
    bicleaner: &BTreeMap<String, f64>,
    cometkiwi: f64,
    options: &AuditOptions<'_>,
) -> ClaimResult {
    let mut result = ClaimResult::new(
        "pair-score",
        format!(
            "sentence pairs were kept only at or above the classifier thresholds {bicleaner:?} (Bicleaner's, per language) and the quality threshold {cometkiwi} (CometKiwi's), by the run's pinned scorer"
        ),
    );
    for (s, f) in filters(cx, "pair-score", stage, Covers::StageOutput, &mut result) {
        let name = s.name.as_str();
        check_rules(name, &f.ledger, LedgerDecision::Kept, &["pair-score:kept"], &mut result);
        check_rules(
            name,
            &f.ledger,
            LedgerDecision::Removed,
            &["pair-score:bicleaner", "pair-score:cometkiwi"],
            &mut result,
        );
        check_rules(name, &f.ledger, LedgerDecision::Modified, &[], &mut result);
        for (rule, n) in f.ledger.rules(None) {
            result.evidence(format!("`{name}` pairs by `{rule}`"), n);
        }
        let config: ScoreConfig = match serde_json::from_value(s.config.clone()) {
            Ok(c) => c,
            Err(e) => {
                result.fail(format!("`{name}`: its config is not a pair-score config: {e}"));
                continue;
            }
        };
        result.evidence(format!("`{name}` config"), &s.config);
        let same = config.bicleaner_threshold.len() == bicleaner.len()
            && config
                .bicleaner_threshold
                .iter()
                .zip(bicleaner)
                .all(|((a, x), (b, y))| a == b && x.to_bits() == y.to_bits());
        if !same || config.cometkiwi_threshold.to_bits() != cometkiwi.to_bits() {
            result.fail(format!(
                "`{name}` ran with classifier thresholds {:?} and quality threshold {}, not the claimed ones",
                config.bicleaner_threshold, config.cometkiwi_threshold
            ));
        }
        let mut inconsistent = 0u64;
        for row in f.ledger.rows(cx.store) {
            let Some(r) = row_or_fail(row, name, &mut result) else { break };
            if !row_consistent(&r.rule, r.evidence.as_ref(), &config) {
                fail_one_of_many(&mut result, &mut inconsistent, || {
                    format!(
                        "`{name}`: row `{}` ({}) does not follow from its recorded scores and the stage's thresholds",
                        r.id, r.rule
                    )
                });
            }
        }
        fail_if_many(&mut result, inconsistent, || format!("`{name}`: {inconsistent} rows in all are inconsistent"));
        result
            .rechecked
            .push(format!("`{name}`: every row's rule against its recorded scores and the stage's thresholds"));
        rescore_kept(cx, s, &f, &config, options, &mut result);
    }
    result
}

/// Rescores the kept pairs (all, or the sample) with the pinned model file and fails the claim
/// for each whose scores differ from its row's or fall below a threshold.
fn rescore_kept(
    cx: &RunContext<'_>,
    s: &prov_manifest::StageRecord,
    f: &super::Filter,
    config: &ScoreConfig,
    options: &AuditOptions<'_>,
    result: &mut ClaimResult,
) {
    let name = s.name.as_str();
    let Some(model_digest) = s.inputs.get("model") else {
        result.undecided(format!("`{name}` has no `model` input"));
        return;
    };
    result.evidence(format!("`{name}` scorer"), model_digest);
    cx.require_trained(name, "model", model_digest, "pair-score-train", result);
    let model = match cx
        .store
        .read(model_digest)
        .map_err(|e| e.to_string())
        .and_then(|b| Model::parse(&b).map_err(|e| e.to_string()))
    {
        Ok(m) => m,
        Err(e) => {
            result.fail(format!("`{name}`: the pinned scorer `{model_digest}`: {e}"));
            return;
        }
    };
    let Some(chosen) = choose_rows(cx, f, |r| r.decision == LedgerDecision::Kept, options, name, result) else {
        return;
    };
    let mut wrong = 0u64;
    let checked = each_chosen_doc(cx, f, &f.output, &chosen, name, result, |_, d, rows, result| {
        let pair = Pair::of(d).map_err(|e| e.to_string())?;
        let pair_model = model
            .pair(&pair.source_language, &pair.target_language)
            .ok_or_else(|| format!("kept pair `{}`: the scorer has no model for its languages", d.id))?;
        let scores = pair_model.score(&pair.source, &pair.target);
        let row = rows.iter().find(|r| r.id == d.id);
        let recorded = |k: &str| row.and_then(|r| r.evidence.as_ref()).and_then(|e| e.get(k)).and_then(Value::as_f64);
        let same = recorded("classifier").map(f64::to_bits) == Some(scores.classifier.to_bits())
            && recorded("quality").map(f64::to_bits) == Some(scores.quality.to_bits());
        let passes = scores.classifier >= config.bicleaner_for(&pair.source_language, &pair.target_language)
            && scores.quality >= config.cometkiwi_threshold;
        if !same || !passes {
            fail_one_of_many(result, &mut wrong, || {
                format!(
                    "`{name}`: kept pair `{}` rescores to classifier {} and quality {} ({}), its row says {:?} and {:?}",
                    d.id,
                    scores.classifier,
                    scores.quality,
                    if passes { "passing" } else { "below a threshold" },
                    recorded("classifier"),
                    recorded("quality")
                )
            });
        }
        Ok(())
    });
    fail_if_many(result, wrong, || format!("`{name}`: {wrong} kept pairs in all do not rescore as recorded or pass"));
    result.rechecked.push(format!(
        "`{name}`: rescored {checked} kept pairs of the output `{}` with the pinned scorer `{}`",
        f.output.short(),
        model_digest.short()
    ));
}
