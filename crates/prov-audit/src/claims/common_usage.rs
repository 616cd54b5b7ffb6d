//! The `common-usage-decontamination` claim (AFM, §3.1.1 item 5): documents holding a
//! benchmark n-gram of the claimed lengths were removed unless the n-gram's count over the
//! corpus reached the claimed threshold.
//!
//! What it re-derives, by the audit's own implementation ([`crate::common_usage`]) and not the
//! stages' code: the counts (the whole counted corpus recounted, every n-gram's count compared
//! with the pinned counts file, so that a counts file inflated to spare documents fails), and
//! that no kept document (all, or the sample) holds a benchmark n-gram counted under the
//! threshold. What it reads from the records: the filter's threshold, the counting stage's
//! lengths and mode, that the counts were made by a `benchmark-ngrams` stage of this run over
//! the very corpus the filter filtered, against the same benchmark.

use std::collections::BTreeMap;

use prov_dataset::LedgerDecision;
use prov_manifest::StageRecord;
use prov_store::Digest;
use serde_json::Value;

use super::{
    AuditOptions, ClaimResult, Covers, Filter, RunContext, check_rules, choose_rows, dataset, each_chosen_doc,
    fail_if_many, fail_one_of_many, filters, shard_docs, stage_benchmark,
};
use crate::common_usage::{BenchmarkNgrams, Counting, count};

/// The rule a policy claims.
pub(super) struct ClaimedRule<'a> {
    pub(super) min_n: u32,
    pub(super) max_n: u32,
    pub(super) threshold: u64,
    pub(super) count: &'a str,
}

/// The `common-usage-decontamination` claim.
pub(super) fn common_usage(
    cx: &RunContext<'_>,
    stage: Option<&str>,
    benchmark: Option<&Digest>,
    rule: &ClaimedRule<'_>,
    options: &AuditOptions<'_>,
) -> ClaimResult {
    let mut result = ClaimResult::new(
        "common-usage-decontamination",
        format!(
            "documents holding a {}- to {}-gram of the benchmark were removed unless it occurs in at least {} {} of the corpus",
            rule.min_n, rule.max_n, rule.threshold, rule.count
        ),
    );
    let counting = match rule.count {
        "documents" => Counting::Documents,
        "occurrences" => Counting::Occurrences,
        other => {
            result.fail(format!("the policy's `count` is `{other}`, not `documents` or `occurrences`"));
            return result;
        }
    };
    for (s, f) in filters(cx, "ngram-decontaminate", stage, Covers::TrainingData, &mut result) {
        let name = s.name.as_str();
        result.evidence(format!("`{name}` config"), &s.config);
        check_rules(
            name,
            &f.ledger,
            LedgerDecision::Kept,
            &["ngram-decontaminate:clean", "ngram-decontaminate:common-usage"],
            &mut result,
        );
        check_rules(name, &f.ledger, LedgerDecision::Removed, &["ngram-decontaminate:contaminated"], &mut result);
        check_rules(name, &f.ledger, LedgerDecision::Modified, &[], &mut result);
        for (r, n) in f.ledger.rules(None) {
            result.evidence(format!("`{name}` documents by `{r}`"), n);
        }
        let threshold = s.config.get("threshold").and_then(Value::as_u64);
        match threshold {
            Some(t) if t >= rule.threshold => result.evidence(format!("`{name}` threshold"), t),
            Some(t) => result.fail(format!(
                "`{name}` spares n-grams counted {t} times or more, not only from {} on",
                rule.threshold
            )),
            None => result.fail(format!("`{name}`'s config has no whole-number `threshold`")),
        }
        let Some(bench_digest) = stage_benchmark(s, benchmark, &mut result) else { continue };
        let Some(counts) = verified_counts(cx, s, &f, bench_digest, rule, counting, &mut result) else { continue };
        if let Some(t) = threshold {
            rescan_kept(cx, s, &f, (&counts.0, &counts.1), t, options, &mut result);
        }
    }
    result
}

/// The counts the filter used, once every check of them holds: made by a `benchmark-ngrams`
/// stage of the run with the claimed lengths and mode, over the filter's own corpus and
/// benchmark, and equal, n-gram by n-gram, to the audit's recount. `None` (the claim failed
/// or is undecided) otherwise.
fn verified_counts(
    cx: &RunContext<'_>,
    s: &StageRecord,
    f: &Filter,
    bench_digest: &Digest,
    rule: &ClaimedRule<'_>,
    counting: Counting,
    result: &mut ClaimResult,
) -> Option<(BenchmarkNgrams, BTreeMap<String, u64>)> {
    let name = s.name.as_str();
    let Some(counts_digest) = s.inputs.get("counts") else {
        result.undecided(format!("`{name}` has no `counts` input"));
        return None;
    };
    cx.require_trained(name, "counts", counts_digest, "benchmark-ngrams", result);
    let producer = cx.producer(counts_digest).filter(|p| p.stage_kind == "benchmark-ngrams")?;
    let counter = producer.name.as_str();
    let config = |field: &str| producer.config.get(field).cloned().unwrap_or(Value::Null);
    let (min_n, max_n) = (config("min_n"), config("max_n"));
    if (min_n.as_u64(), max_n.as_u64()) != (Some(u64::from(rule.min_n)), Some(u64::from(rule.max_n))) {
        result.fail(format!(
            "`{counter}` counted {min_n}- to {max_n}-grams, not the claimed {}- to {}-grams",
            rule.min_n, rule.max_n
        ));
        return None;
    }
    if config("count") != rule.count {
        result.fail(format!("`{counter}` counted {}, not {}", config("count"), rule.count));
        return None;
    }
    if producer.inputs.get("docs") != Some(&f.input) {
        result
            .fail(format!("`{counter}` counted another corpus than the one `{name}` filtered (`{}`)", f.input.short()));
        return None;
    }
    if producer.inputs.get("benchmark") != Some(bench_digest) {
        result.fail(format!("`{counter}` counted the n-grams of another benchmark than `{name}` read"));
        return None;
    }
    let bench = match BenchmarkNgrams::read(cx.store, bench_digest, rule.min_n as usize, rule.max_n as usize) {
        Ok(b) => b,
        Err(e) => {
            result.fail(format!("`{name}`: {e}"));
            return None;
        }
    };
    let pinned = match pinned_counts(cx, counts_digest) {
        Ok(p) => p,
        Err(e) => {
            result.fail(format!("`{counter}`'s counts `{}`: {e}", counts_digest.short()));
            return None;
        }
    };
    let (documents, recounted) = match recount(cx, &bench, counting, &f.input) {
        Ok(x) => x,
        Err(e) => {
            result.fail(format!("`{name}`: {e}"));
            return None;
        }
    };
    compare_counts(counter, &pinned, (documents, &recounted), result);
    result.rechecked.push(format!(
        "`{counter}`: recounted the {} benchmark n-grams ({} examples) over the {documents} documents of the corpus with the audit's own n-gram search (written from the book's specification, not the stages' code): {} n-grams occur",
        rule.count,
        bench.examples(),
        recounted.len()
    ));
    Some((bench, recounted))
}

/// The pinned counts file's `documents` and `ngrams`.
fn pinned_counts(cx: &RunContext<'_>, digest: &Digest) -> Result<(u64, BTreeMap<String, u64>), String> {
    let bytes = cx.store.read(digest).map_err(|e| e.to_string())?;
    let file: Value = serde_json::from_slice(&bytes).map_err(|e| format!("not JSON: {e}"))?;
    if file.get("format") != Some(&Value::from("prov-benchmark-ngrams")) {
        return Err("not a `prov-benchmark-ngrams` file".into());
    }
    let documents = file.get("documents").and_then(Value::as_u64).ok_or("no whole-number `documents`")?;
    let mut ngrams = BTreeMap::new();
    for pair in file.get("ngrams").and_then(Value::as_array).ok_or("no `ngrams` list")? {
        let (Some(text), Some(n)) = (pair.get(0).and_then(Value::as_str), pair.get(1).and_then(Value::as_u64)) else {
            return Err(format!("`ngrams` holds {pair}, not a [text, count] pair"));
        };
        if ngrams.insert(text.to_owned(), n).is_some() {
            return Err(format!("n-gram `{text}` is listed twice"));
        }
    }
    Ok((documents, ngrams))
}

/// The audit's count over every document of `corpus`.
fn recount(
    cx: &RunContext<'_>,
    bench: &BenchmarkNgrams,
    counting: Counting,
    corpus: &Digest,
) -> Result<(u64, BTreeMap<String, u64>), String> {
    let ds = dataset(cx.store, corpus)?;
    let mut docs = Vec::new();
    for (i, shard) in ds.shards.iter().enumerate() {
        docs.push(shard_docs(cx.store, corpus, i, &shard.digest)?);
    }
    count(bench, counting, docs.into_iter().flatten())
}

/// Fails the claim for every n-gram whose pinned count is not the recount (named while few).
fn compare_counts(
    counter: &str,
    (pinned_documents, pinned): &(u64, BTreeMap<String, u64>),
    (documents, recounted): (u64, &BTreeMap<String, u64>),
    result: &mut ClaimResult,
) {
    if *pinned_documents != documents {
        result.fail(format!(
            "`{counter}`'s counts say {pinned_documents} documents were counted, the corpus has {documents}"
        ));
    }
    let mut wrong = 0u64;
    let mut keys: Vec<&String> = pinned.keys().chain(recounted.keys()).collect();
    keys.sort();
    keys.dedup();
    for text in keys {
        let (was, is) = (pinned.get(text).copied().unwrap_or(0), recounted.get(text).copied().unwrap_or(0));
        if was != is {
            fail_one_of_many(result, &mut wrong, || {
                format!("`{counter}` pinned a count of {was} for `{text}`; the corpus holds it {is} times")
            });
        }
    }
    fail_if_many(result, wrong, || format!("`{counter}`: {wrong} pinned counts in all differ from the recount"));
}

/// Rescans the kept documents (all, or the sample) and fails the claim for every one that
/// holds a benchmark n-gram counted under the threshold.
fn rescan_kept(
    cx: &RunContext<'_>,
    s: &StageRecord,
    f: &Filter,
    (bench, counts): (&BenchmarkNgrams, &BTreeMap<String, u64>),
    threshold: u64,
    options: &AuditOptions<'_>,
    result: &mut ClaimResult,
) {
    let name = s.name.as_str();
    let Some(chosen) = choose_rows(cx, f, |r| r.decision != LedgerDecision::Removed, options, name, result) else {
        return;
    };
    let mut found = 0u64;
    let checked = each_chosen_doc(cx, f, &f.output, &chosen, name, result, |_, d, _, result| {
        let rare =
            bench.held(&d.text).into_values().find(|(h, _)| counts.get(&h.text).copied().unwrap_or(0) < threshold);
        if let Some((h, _)) = rare {
            fail_one_of_many(result, &mut found, || {
                format!(
                    "`{name}`: kept document `{}` holds `{}` of benchmark example `{}`, counted {} times, under the threshold {threshold}",
                    d.id,
                    h.text,
                    bench.example(&h.text).unwrap_or("?"),
                    counts.get(&h.text).copied().unwrap_or(0)
                )
            });
        }
        Ok(())
    });
    fail_if_many(result, found, || format!("`{name}`: {found} kept documents in all hold a rare benchmark n-gram"));
    result.rechecked.push(format!(
        "`{name}`: rescanned {checked} kept documents for benchmark n-grams counted under {threshold}, with the audit's own search and recounted counts"
    ));
}
