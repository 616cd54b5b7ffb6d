//! The `pii` claim: redaction covered every non-exempt document, and rescans of the output
//! by the audit's own scanner and by the stage's matcher find no PII.

use std::collections::BTreeMap;

use prov_dataset::LedgerDecision;
use serde_json::Value;

use super::{AuditOptions, ClaimResult, Covers, RunContext, check_rules, choose_rows, each_chosen_doc, filters};

/// The `pii` claim.
pub(super) fn pii(cx: &RunContext<'_>, stage: Option<&str>, options: &AuditOptions<'_>) -> ClaimResult {
    let mut result = ClaimResult::new(
        "pii",
        "PII redaction covered every non-exempt document, and rescans of its output, by the audit's own scanner and by the stage's matcher, find no PII".into(),
    );
    for (s, f) in filters(cx, "pii", stage, Covers::TrainingData, &mut result) {
        let name = s.name.as_str();
        check_rules(name, &f.ledger, LedgerDecision::Kept, &["pii:none", "pii:exempt"], &mut result);
        check_rules(name, &f.ledger, LedgerDecision::Modified, &["pii:redacted"], &mut result);
        check_rules(name, &f.ledger, LedgerDecision::Removed, &[], &mut result);
        let by_rule = f.ledger.rules(None);
        for (rule, n) in &by_rule {
            result.evidence(format!("`{name}` documents by `{rule}`"), n);
        }
        if let Some(tags) = s.config.get("exempt_tags") {
            result.evidence(format!("`{name}` exempt tags"), tags);
        }
        let mode = s.config.get("mode").and_then(Value::as_str).unwrap_or("");
        let Some(kinds) = crate::pii_scan::kinds_for_mode(mode) else {
            result.undecided(format!("`{name}`: the audit's scanner does not know the PII mode `{mode}`"));
            continue;
        };
        let kind_names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        // The stage's own matcher as a second opinion, when the caller supplies it and it
        // knows the config.
        let stage_matcher = match options.rescan.map(|r| r.pii_matcher(&s.config)) {
            Some(Ok(m)) => Some(m),
            Some(Err(e)) => {
                result.undecided(format!("`{name}`: {e}"));
                None
            }
            None => {
                result.undecided(format!("`{name}`: no stage matcher was supplied for the second rescan"));
                None
            }
        };
        // The output's non-exempt documents: the ledger's passed rows, which `load_filter`
        // checked to be exactly the output's documents.
        let Some(chosen) = choose_rows(
            cx,
            &f,
            |r| r.decision != LedgerDecision::Removed && r.rule != "pii:exempt",
            options,
            name,
            &mut result,
        ) else {
            continue;
        };
        let (mut ours, mut theirs) = (BTreeMap::<&str, u64>::new(), 0u64);
        let mut first: Vec<String> = Vec::new();
        let scanned = each_chosen_doc(cx, &f, &f.output, &chosen, name, &mut result, |_, d, _, _| {
            let found = crate::pii_scan::scan(&d.text, kinds);
            for (kind, _) in &found {
                *ours.entry(kind.as_str()).or_default() += 1;
            }
            let matched = stage_matcher.as_ref().map_or(0, |m| m(&d.text));
            theirs += matched;
            if (!found.is_empty() || matched > 0) && first.len() < 3 {
                first.push(d.id.clone());
            }
            Ok(())
        });
        result.rechecked.push(format!(
            "`{name}`: rescanned {scanned} non-exempt documents of the output `{}` with the audit's own scanner ({}, written from the patterns, not the stage's code){}",
            f.output.short(),
            kind_names.join(", "),
            if stage_matcher.is_some() { " and with the stage's matcher in its mode" } else { "" }
        ));
        if mode == "strict" {
            result.rechecked.push(format!(
                "`{name}`: IP addresses and IBANs of mode `strict` are rescanned by the stage's matcher only"
            ));
        }
        let total: u64 = ours.values().sum();
        result.evidence(format!("`{name}` PII found by the audit's scanner"), total);
        for (kind, n) in &ours {
            result.evidence(format!("`{name}` PII found by the audit's scanner: {kind}"), n);
        }
        if stage_matcher.is_some() {
            result.evidence(format!("`{name}` PII matches of the stage's matcher"), theirs);
        }
        if total > 0 || theirs > 0 {
            result.fail(format!(
                "`{name}`: the rescan finds PII in the output ({total} by the audit's scanner, {theirs} by the stage's matcher), in {first:?}"
            ));
        }
    }
    result
}
