//! The `robots` and `robots-loss` claims: no kept document is disallowed for a listed agent
//! by the pinned robots.txt snapshot (each document decided again), and the share of words
//! the filter removed per language group.

use prov_dataset::LedgerDecision;
use prov_manifest::StageRecord;
use serde_json::Value;

use super::{
    AuditOptions, ClaimResult, Covers, Filter, RunContext, check_rules, choose_rows, each_chosen_doc, fail_if_many,
    fail_one_of_many, filters, percent, row_or_fail, share,
};
use crate::policy::LanguageGroup;

/// The opt-out default: rules that keep a document without a robots.txt that allows it.
pub const ROBOTS_DEFAULT_RULES: [&str; 3] = ["robots:no-robots", "robots:unparseable", "robots:no-url"];

/// The `robots` claim.
pub(super) fn robots(
    cx: &RunContext<'_>,
    stage: Option<&str>,
    agents: &[String],
    max_default: Option<f64>,
    options: &AuditOptions<'_>,
) -> ClaimResult {
    let mut result = ClaimResult::new(
        "robots",
        "no kept document is disallowed for a listed agent by the pinned robots.txt snapshot".into(),
    );
    for (s, f) in filters(cx, "robots", stage, Covers::TrainingData, &mut result) {
        let name = s.name.as_str();
        if let Some(snapshot) = s.inputs.get("snapshot") {
            result.evidence(format!("`{name}` robots.txt snapshot"), snapshot);
        }
        let listed: Vec<&str> = s
            .config
            .get("agents")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        result.evidence(format!("`{name}` agents asked"), listed.len());
        for a in agents {
            if !listed.contains(&a.as_str()) {
                result.fail(format!("`{name}` did not ask about agent `{a}`"));
            }
        }
        check_rules(
            name,
            &f.ledger,
            LedgerDecision::Kept,
            &["robots:allowed", "robots:no-robots", "robots:unparseable", "robots:no-url"],
            &mut result,
        );
        check_rules(
            name,
            &f.ledger,
            LedgerDecision::Removed,
            &["robots:disallowed", "robots:site-disallowed"],
            &mut result,
        );
        check_rules(name, &f.ledger, LedgerDecision::Modified, &[], &mut result);
        for row in f.ledger.rows(cx.store) {
            let Some(r) = row_or_fail(row, name, &mut result) else { break };
            if r.decision != LedgerDecision::Removed {
                continue;
            }
            let named = r
                .evidence
                .as_ref()
                .and_then(|e| e.get("agents"))
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
            if !named {
                result.fail(format!("`{name}`: `{}` is removed without a disallowed agent in its evidence", r.id));
                break;
            }
        }
        result.rechecked.push(format!(
            "`{name}`: every kept row's rule is a keeping one, every removed row names a disallowed agent"
        ));
        redecide_robots(cx, s, &f, options, &mut result);
        let kept = f.ledger.rules(Some(LedgerDecision::Kept));
        let kept_total: u64 = kept.values().sum();
        let removed: u64 = f.ledger.record.rows - kept_total;
        let by_default: u64 = ROBOTS_DEFAULT_RULES.iter().filter_map(|r| kept.get(*r)).sum();
        result.evidence(format!("`{name}` kept documents"), kept_total);
        result.evidence(format!("`{name}` removed documents"), removed);
        for rule in ROBOTS_DEFAULT_RULES {
            result.evidence(format!("`{name}` kept by `{rule}`"), kept.get(rule).copied().unwrap_or(0));
        }
        let default_share = share(by_default, kept_total);
        result.evidence(
            format!("`{name}` share of kept documents kept only by the opt-out default"),
            percent(default_share),
        );
        if let Some(max) = max_default
            && default_share > max
        {
            result.fail(format!(
                "`{name}`: {} of kept documents are kept only by the opt-out default, more than the claimed {}",
                percent(default_share),
                percent(max)
            ));
        }
    }
    result
}

/// Decides the stage's input documents again (all, or the sample) with the stage's matcher
/// from the pinned snapshot, and fails the claim for every ledger row whose rule differs: a
/// ledger or output edited to keep a disallowed document is caught even when it is
/// self-consistent.
fn redecide_robots(
    cx: &RunContext<'_>,
    s: &StageRecord,
    f: &Filter,
    options: &AuditOptions<'_>,
    result: &mut ClaimResult,
) {
    let name = s.name.as_str();
    let Some(snapshot) = s.inputs.get("snapshot") else {
        result.undecided(format!("`{name}` has no `snapshot` input to decide its documents again"));
        return;
    };
    let Some(rescan) = options.rescan else {
        result.undecided(format!("`{name}`: no robots matcher was supplied to decide its documents again"));
        return;
    };
    let decide = match rescan.robots_decider(cx.store, &s.config, snapshot) {
        Ok(d) => d,
        Err(e) => {
            result.fail(format!("`{name}`: {e}"));
            return;
        }
    };
    let Some(chosen) = choose_rows(cx, f, |_| true, options, name, result) else { return };
    let mut differ = 0u64;
    let checked = each_chosen_doc(cx, f, &f.input, &chosen, name, result, |i, d, rows, result| {
        let row = rows
            .binary_search_by(|r| r.id.as_bytes().cmp(d.id.as_bytes()))
            .map(|at| &rows[at])
            .map_err(|_| format!("input document `{}` has no row in ledger shard {i}", d.id))?;
        let rule = decide(d);
        if rule != row.rule {
            fail_one_of_many(result, &mut differ, || {
                format!(
                    "`{name}`: `{}` ({}) is `{}` in the ledger, but the snapshot gives `{rule}`",
                    d.id,
                    d.url.as_deref().unwrap_or("no URL"),
                    row.rule
                )
            });
        }
        Ok(())
    });
    fail_if_many(result, differ, || {
        format!("`{name}`: {differ} documents in all are decided otherwise by the snapshot")
    });
    result.rechecked.push(format!(
        "`{name}`: decided {checked} input documents again with the stage's matcher from the pinned snapshot `{}`, each rule compared with the ledger's",
        snapshot.short()
    ));
}

/// True when a document's `language` belongs to a group's code: equal, or the code followed
/// by `-` or `_`.
fn language_matches(language: &str, code: &str) -> bool {
    language.strip_prefix(code).is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '_']))
}

/// The `robots-loss` claim.
pub(super) fn robots_loss(
    cx: &RunContext<'_>,
    stage: Option<&str>,
    groups: &[LanguageGroup],
    tolerance: f64,
) -> ClaimResult {
    let claimed: Vec<String> = groups.iter().map(|g| format!("{} {}", g.name, percent(g.claimed))).collect();
    let mut result = ClaimResult::new(
        "robots-loss",
        format!(
            "the robots filter removes these shares of words per language group, within {}: {}",
            percent(tolerance),
            claimed.join(", ")
        ),
    );
    for (s, f) in filters(cx, "robots", stage, Covers::TrainingData, &mut result) {
        let name = s.name.as_str();
        // (total words, removed words) per group, in policy order.
        let mut measured = vec![(0u64, 0u64); groups.len()];
        for row in f.ledger.rows(cx.store) {
            let Some(r) = row_or_fail(row, name, &mut result) else { break };
            let language = r.language.as_deref().unwrap_or("");
            let listed = groups.iter().position(|g| g.languages.iter().any(|c| language_matches(language, c)));
            let Some(g) = listed.or_else(|| groups.iter().position(|g| g.languages.is_empty())) else { continue };
            measured[g].0 += r.words;
            if r.decision == LedgerDecision::Removed {
                measured[g].1 += r.words;
            }
        }
        for (g, (total, removed)) in groups.iter().zip(measured) {
            let got = share(removed, total);
            result.evidence(
                format!("`{name}` words removed, {} (claimed {})", g.name, percent(g.claimed)),
                format!("{removed} of {total} = {}", percent(got)),
            );
            if total == 0 {
                result.undecided(format!("`{name}`: no document of group `{}`", g.name));
            } else if (got - g.claimed).abs() > tolerance + 1e-12 {
                result.fail(format!(
                    "`{name}`: the filter removed {} of the words of group `{}`, not {} within {}",
                    percent(got),
                    g.name,
                    percent(g.claimed),
                    percent(tolerance)
                ));
            }
        }
        result.rechecked.push(format!(
            "`{name}`: words per language group summed from the ledger rows (words are the volume unit until a tokenizer is pinned)"
        ));
    }
    result
}
