//! The `heuristics` claim: EuroLLM's heuristic filter ran with the claimed thresholds on the
//! claimed languages, and a rescan of its output by the audit's own check finds nothing the
//! rules remove.

use prov_dataset::LedgerDecision;
use prov_heuristics::{HeuristicsConfig, Thresholds};

use super::{
    AuditOptions, ClaimResult, Covers, RunContext, check_rules, choose_rows, each_chosen_doc, fail_if_many,
    fail_one_of_many, filters,
};

/// The `heuristics` claim.
pub(super) fn heuristics(
    cx: &RunContext<'_>,
    stage: Option<&str>,
    languages: &[String],
    thresholds: &Thresholds,
    options: &AuditOptions<'_>,
) -> ClaimResult {
    let mut result = ClaimResult::new(
        "heuristics",
        format!(
            "the heuristic filter ran on {languages:?} with the claimed thresholds, and its output holds nothing its rules remove"
        ),
    );
    let mut claimed: Vec<String> = languages.iter().map(|l| l.to_lowercase()).collect();
    claimed.sort();
    claimed.dedup();
    for (s, f) in filters(cx, "heuristics", stage, Covers::TrainingData, &mut result) {
        let name = s.name.as_str();
        check_rules(name, &f.ledger, LedgerDecision::Kept, &["heuristics:kept", "heuristics:not-applied"], &mut result);
        check_rules(name, &f.ledger, LedgerDecision::Modified, &["heuristics:paragraphs"], &mut result);
        check_rules(
            name,
            &f.ledger,
            LedgerDecision::Removed,
            &["heuristics:too-short", "heuristics:lorem-ipsum", "heuristics:javascript", "heuristics:curly-bracket"],
            &mut result,
        );
        for (rule, n) in f.ledger.rules(None) {
            result.evidence(format!("`{name}` documents by `{rule}`"), n);
        }
        result.evidence(format!("`{name}` config"), &s.config);
        let config: HeuristicsConfig = match serde_json::from_value(s.config.clone()) {
            Ok(c) => c,
            Err(e) => {
                result.fail(format!("`{name}`: its config is not a heuristics config: {e}"));
                continue;
            }
        };
        if config.languages != claimed {
            result.fail(format!("`{name}` applied the rules to {:?}, not the claimed {claimed:?}", config.languages));
        }
        if config.thresholds != *thresholds {
            result
                .fail(format!("`{name}` ran with thresholds {:?}, not the claimed {thresholds:?}", config.thresholds));
        }
        not_applied_only_where_allowed(cx, name, &f, &config, &mut result);
        rescan(cx, name, &f, &config, options, &mut result);
    }
    result
}

/// Fails the claim for every row that says the rules were not applied to a document whose
/// language they apply to: such a row would keep the document out of the rescan.
fn not_applied_only_where_allowed(
    cx: &RunContext<'_>,
    name: &str,
    f: &super::Filter,
    config: &HeuristicsConfig,
    result: &mut ClaimResult,
) {
    let mut wrong = 0u64;
    for row in f.ledger.rows(cx.store) {
        let Some(r) = super::row_or_fail(row, name, result) else { break };
        if r.rule == "heuristics:not-applied" && config.applies_to(r.language.as_deref()) {
            fail_one_of_many(result, &mut wrong, || {
                format!(
                    "`{name}`: row `{}` says the rules were not applied, but its language {:?} is one they apply to",
                    r.id, r.language
                )
            });
        }
    }
    fail_if_many(result, wrong, || format!("`{name}`: {wrong} rows in all skip documents the rules apply to"));
    result
        .rechecked
        .push(format!("`{name}`: every `heuristics:not-applied` row's language is outside the stage's languages"));
}

/// Rescans the output's documents the rules applied to (all, or the sample) with the audit's
/// own check, under the stage's thresholds.
fn rescan(
    cx: &RunContext<'_>,
    name: &str,
    f: &super::Filter,
    config: &HeuristicsConfig,
    options: &AuditOptions<'_>,
    result: &mut ClaimResult,
) {
    let applied =
        |r: &prov_dataset::LedgerRow| r.decision != LedgerDecision::Removed && r.rule != "heuristics:not-applied";
    let Some(chosen) = choose_rows(cx, f, applied, options, name, result) else { return };
    let mut found = 0u64;
    let checked = each_chosen_doc(cx, f, &f.output, &chosen, name, result, |_, d, _, result| {
        if let Some(why) = crate::heuristics_scan::violation(&d.text, &config.thresholds) {
            fail_one_of_many(result, &mut found, || format!("`{name}`: kept document `{}` {why}", d.id));
        }
        Ok(())
    });
    fail_if_many(result, found, || format!("`{name}`: {found} kept documents in all break the rules"));
    result.rechecked.push(format!(
        "`{name}`: rescanned {checked} kept documents of the output `{}` with the audit's own check of the rules (written from the book's definitions, not the stage's code)",
        f.output.short()
    ));
}
