//! The `tiers-by-phase` claim: each phase of a phased `pretrain` stage drew only from the
//! quality tiers claimed for it (EuroLLM keeps its highest-quality data for the last phases).
//!
//! For every source a phase's mixture draws from, the claim follows the digests upstream: the
//! pretrain stage's `S-tokens` input to the `tokenize` stage that wrote it, that stage's `docs`
//! to the stage that wrote them, and on through single-dataset stages to the nearest
//! `quality` stage. That stage must keep only claimed tiers, its ledger must tier every kept
//! document as claimed, and every kept document of its output (or the sample), scored again
//! from the stage's pinned scorer file, must fall in a claimed tier. The scoring uses
//! `prov-quality`'s scorer on that file: it shows that the data is what the pinned model and
//! the cut-offs put in those tiers, not a second implementation of the scorer.

use prov_dataset::LedgerDecision;
use prov_manifest::StageRecord;
use prov_store::Digest;
use serde_json::Value;

use super::{
    AuditOptions, ClaimResult, RunContext, check_rules, choose_rows, each_chosen_doc, fail_if_many, fail_one_of_many,
    load_filter, no_stage,
};

/// The nearest `quality` stage upstream of dataset `digest`, through filters with one `docs`
/// input; or why there is none.
fn quality_upstream<'r>(cx: &'r RunContext<'_>, mut digest: Digest) -> Result<&'r StageRecord, String> {
    // A run's stages form no cycle, but a forged record can say otherwise: the walk visits
    // each stage at most once.
    let mut visited = std::collections::BTreeSet::new();
    loop {
        if !visited.insert(digest) {
            return Err(format!("dataset `{}` is upstream of itself", digest.short()));
        }
        let Some(stage) = cx.producer(&digest) else {
            return Err(format!("dataset `{}` was written by no stage of the run", digest.short()));
        };
        if stage.stage_kind == "quality" {
            return Ok(stage);
        }
        // Only through filters (a ledger accounts for every document they pass): a stage that
        // could add documents after the tiers were drawn ends the walk.
        match stage.inputs.get("docs") {
            Some(d) if stage.inputs.len() == 1 && stage.outputs.contains_key("ledger") => digest = *d,
            _ => {
                return Err(format!(
                    "it reaches `{}` ({}) without passing a `quality` stage",
                    stage.name.as_str(),
                    stage.stage_kind
                ));
            }
        }
    }
}

/// The `tiers-by-phase` claim.
pub(super) fn tiers_by_phase(
    cx: &RunContext<'_>,
    stage: Option<&str>,
    phases: &[Vec<String>],
    cutoffs: Option<&[f64; 2]>,
    options: &AuditOptions<'_>,
) -> ClaimResult {
    let mut result = ClaimResult::new(
        "tiers-by-phase",
        format!("each training phase drew only from its claimed quality tiers: {phases:?}"),
    );
    if let Some(t) = phases.iter().flatten().find(|t| !["high", "medium", "low"].contains(&t.as_str())) {
        result.fail(format!("the claim names tier `{t}`; the tiers are high, medium and low"));
        return result;
    }
    let stages = cx.stages_of(super::PRETRAIN_KIND, stage);
    if stages.is_empty() {
        no_stage(&mut result, super::PRETRAIN_KIND, stage);
    }
    for s in stages {
        let name = s.name();
        let Some(recorded) = s.record.config.get("phases").and_then(Value::as_array) else {
            result.fail(format!("`{name}` is not phased: its config has no `phases`"));
            continue;
        };
        if recorded.len() != phases.len() {
            result.fail(format!("`{name}` has {} phases, the claim names {}", recorded.len(), phases.len()));
            continue;
        }
        for (i, (phase, tiers)) in recorded.iter().zip(phases).enumerate() {
            let label = format!("`{name}` phase {} `{}`", i + 1, phase["name"].as_str().unwrap_or(""));
            let Some(mixture) = phase.get("mixture").and_then(Value::as_object) else {
                result.fail(format!("{label} has no mixture"));
                continue;
            };
            for (source, weight) in mixture {
                if weight.as_f64().is_some_and(|w| w <= 0.0) {
                    continue;
                }
                check_source(cx, &s.record, &label, (source, tiers, cutoffs), options, &mut result);
            }
        }
    }
    result
}

/// Checks that source `source` of a phase comes from a `quality` stage keeping only `tiers`.
fn check_source(
    cx: &RunContext<'_>,
    pretrain: &StageRecord,
    label: &str,
    (source, tiers, cutoffs): (&str, &[String], Option<&[f64; 2]>),
    options: &AuditOptions<'_>,
    result: &mut ClaimResult,
) {
    let Some(tokens) = pretrain.inputs.get(&format!("{source}-tokens")) else {
        result.fail(format!("{label}: no `{source}-tokens` input"));
        return;
    };
    let docs = match cx.producer(tokens) {
        Some(t) if t.stage_kind == "tokenize" => t.inputs.get("docs").copied(),
        _ => None,
    };
    let Some(docs) = docs else {
        result.fail(format!("{label}: source `{source}`'s tokens were not written by a `tokenize` stage of the run"));
        return;
    };
    let quality = match quality_upstream(cx, docs) {
        Ok(q) => q,
        Err(why) => {
            result.fail(format!("{label}: source `{source}`: {why}"));
            return;
        }
    };
    let qname = quality.name.as_str();
    let keep: Vec<String> =
        quality.config.get("keep").and_then(|k| serde_json::from_value(k.clone()).ok()).unwrap_or_default();
    result.evidence(format!("{label} source `{source}`"), format!("from `{qname}`, keeping {keep:?}"));
    if let Some(claimed) = cutoffs {
        let used: Option<[f64; 2]> = quality.config.get("cutoffs").and_then(|c| serde_json::from_value(c.clone()).ok());
        if used.is_none_or(|u| u[0].to_bits() != claimed[0].to_bits() || u[1].to_bits() != claimed[1].to_bits()) {
            result.fail(format!("{label}: source `{source}` comes from `{qname}`, whose cut-offs {used:?} are not the claimed {claimed:?}"));
        }
    }
    if let Some(t) = keep.iter().find(|t| !tiers.contains(t)) {
        result.fail(format!(
            "{label}: source `{source}` comes from `{qname}`, which keeps tier `{t}`, not one of {tiers:?}"
        ));
    }
    rescore(cx, quality, label, tiers, options, result);
}

/// Scores the kept documents of a `quality` stage's output again from its pinned scorer and
/// checks their tiers and their rows.
fn rescore(
    cx: &RunContext<'_>,
    quality: &StageRecord,
    label: &str,
    tiers: &[String],
    options: &AuditOptions<'_>,
    result: &mut ClaimResult,
) {
    let qname = quality.name.as_str();
    let Some(stage) = cx.run.stage(qname) else { return };
    let Some(f) = load_filter(cx, &stage.manifest, &stage.record, result) else { return };
    // A quality stage keeps or removes; a row of another kind is not one it writes.
    let rules = ["quality:high", "quality:medium", "quality:low"];
    check_rules(qname, &f.ledger, LedgerDecision::Kept, &rules, result);
    check_rules(qname, &f.ledger, LedgerDecision::Removed, &rules, result);
    check_rules(qname, &f.ledger, LedgerDecision::Modified, &[], result);
    let config: prov_quality::stage::QualityConfig = match serde_json::from_value(quality.config.clone()) {
        Ok(c) => c,
        Err(e) => {
            result.fail(format!("`{qname}`: its config is not a quality config: {e}"));
            return;
        }
    };
    if let Some(model) = quality.inputs.get("model") {
        cx.require_trained(qname, "model", model, "quality-train", result);
    }
    let scorer = quality
        .inputs
        .get("model")
        .ok_or_else(|| "no `model` input".to_owned())
        .and_then(|d| cx.store.read(d).map_err(|e| e.to_string()))
        .and_then(|b| String::from_utf8(b).map_err(|e| e.to_string()))
        .and_then(|t| prov_quality::model::Scorer::parse(&t).map_err(|e| e.to_string()));
    let scorer = match scorer {
        Ok(s) => s,
        Err(e) => {
            result.fail(format!("`{qname}`: the pinned scorer: {e}"));
            return;
        }
    };
    let Some(chosen) = choose_rows(cx, &f, |r| r.decision == LedgerDecision::Kept, options, qname, result) else {
        return;
    };
    let mut wrong = 0u64;
    let checked = each_chosen_doc(cx, &f, &f.output, &chosen, qname, result, |_, d, rows, result| {
        let verdict = prov_quality::stage::assess(&scorer, &d.text, &config);
        let tier = verdict.tier.name();
        let row_tier = rows
            .iter()
            .find(|r| r.id == d.id)
            .and_then(|r| r.evidence.as_ref())
            .and_then(|e| e.get("tier"))
            .and_then(Value::as_str);
        if !tiers.iter().any(|t| t == tier) || row_tier != Some(tier) {
            fail_one_of_many(result, &mut wrong, || {
                format!(
                    "{label}: `{qname}` kept `{}`, which scores {:.4} (tier `{tier}`), its row says {row_tier:?}",
                    d.id, verdict.score
                )
            });
        }
        Ok(())
    });
    fail_if_many(result, wrong, || {
        format!("{label}: {wrong} kept documents of `{qname}` in all are outside the claimed tiers")
    });
    result.rechecked.push(format!(
        "{label}: scored {checked} kept documents of `{qname}`'s output `{}` again with its pinned scorer",
        f.output.short()
    ));
}
