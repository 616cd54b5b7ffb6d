//! The `decontamination` claim: no kept document shares an n-gram with the benchmark, by
//! the audit's own overlap check.

use prov_dataset::LedgerDecision;
use prov_manifest::StageRecord;
use prov_store::Digest;

use super::{
    AuditOptions, ClaimResult, Covers, Filter, RunContext, check_rules, choose_rows, each_chosen_doc, fail_if_many,
    fail_one_of_many, filters, stage_benchmark,
};

/// The `decontamination` claim.
pub(super) fn decontamination(
    cx: &RunContext<'_>,
    stage: Option<&str>,
    benchmark: Option<&Digest>,
    options: &AuditOptions<'_>,
) -> ClaimResult {
    let mut result = ClaimResult::new(
        "decontamination",
        "no kept document overlaps the pinned benchmark beyond the decontamination rule".into(),
    );
    for (s, f) in filters(cx, "decontaminate", stage, Covers::TrainingData, &mut result) {
        let name = s.name.as_str();
        let pinned = stage_benchmark(s, benchmark, &mut result);
        result.evidence(format!("`{name}` config"), &s.config);
        check_rules(name, &f.ledger, LedgerDecision::Kept, &["decontaminate:clean"], &mut result);
        check_rules(name, &f.ledger, LedgerDecision::Removed, &["decontaminate:contaminated"], &mut result);
        check_rules(name, &f.ledger, LedgerDecision::Modified, &[], &mut result);
        for (rule, n) in f.ledger.rules(None) {
            result.evidence(format!("`{name}` documents by `{rule}`"), n);
        }
        result
            .rechecked
            .push(format!("`{name}`: no kept row is flagged; every removed row is `decontaminate:contaminated`"));
        if let Some(b) = pinned {
            rescan_overlap(cx, s, &f, b, options, &mut result);
        }
    }
    result
}

/// Rescans the kept documents (all, or the sample) against the benchmark with the audit's own
/// n-gram check ([`crate::overlap`]) and fails the claim for every one that contaminates an
/// example.
fn rescan_overlap(
    cx: &RunContext<'_>,
    s: &StageRecord,
    f: &Filter,
    benchmark: &Digest,
    options: &AuditOptions<'_>,
    result: &mut ClaimResult,
) {
    let name = s.name.as_str();
    let bench = match crate::overlap::OverlapRule::from_config(&s.config)
        .and_then(|rule| crate::overlap::Benchmark::read(cx.store, benchmark, rule))
    {
        Ok(b) => b,
        Err(e) => {
            result.fail(format!("`{name}`: {e}"));
            return;
        }
    };
    let Some(chosen) = choose_rows(cx, f, |r| r.decision != LedgerDecision::Removed, options, name, result) else {
        return;
    };
    let mut found = 0u64;
    let checked = each_chosen_doc(cx, f, &f.output, &chosen, name, result, |_, d, _, result| {
        if let Some(o) = bench.contaminated(&d.text) {
            fail_one_of_many(result, &mut found, || {
                format!(
                    "`{name}`: kept document `{}` covers {:.4} of benchmark example `{}`, more than the rule allows",
                    d.id, o.coverage, o.example
                )
            });
        }
        Ok(())
    });
    fail_if_many(result, found, || format!("`{name}`: {found} kept documents in all overlap the benchmark"));
    result.rechecked.push(format!(
        "`{name}`: rescanned {checked} kept documents against the {} examples of the benchmark with the audit's own n-gram check (written from the stage's specification, not its code)",
        bench.len()
    ));
}
