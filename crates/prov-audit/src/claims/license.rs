//! The `license` and `compound-license` claims: every kept document's license is allowed by
//! the stage's verdicts and by the policy or a pinned reviewer verdict, and no source
//! re-licenses its documents.

use std::collections::BTreeMap;

use prov_dataset::LedgerDecision;
use prov_manifest::{Record, StageRecord, get_record};
use prov_store::Digest;
use serde_json::Value;

use super::{ClaimResult, Covers, Filter, RunContext, check_rules, filters, row_or_fail};

/// Reads a tree of verdict records (`what` names it in reasons: `verdicts`, `reviewer
/// verdicts`): each `.json` entry with its record. A tree or record that cannot be read fails
/// the claim and is named; `None` when the tree itself cannot be read.
fn read_verdict_tree(
    cx: &RunContext<'_>,
    name: &str,
    what: &str,
    tree: Digest,
    result: &mut ClaimResult,
) -> Option<Vec<(prov_manifest::TreeEntry, prov_manifest::VerdictRecord)>> {
    let entries = match get_record(cx.store, &tree) {
        Ok(Record::Tree(t)) => t.entries,
        Ok(other) => {
            result.fail(format!("`{name}`: {what} `{tree}` is a {} record", other.kind_name()));
            return None;
        }
        Err(e) => {
            result.fail(format!("`{name}`: {what} `{tree}`: {e}"));
            return None;
        }
    };
    let mut out = Vec::new();
    for e in entries {
        if std::path::Path::new(e.path.as_str()).extension().is_none_or(|x| x != "json") {
            continue;
        }
        match get_record(cx.store, &e.digest) {
            Ok(Record::Verdict(v)) => out.push((e, v)),
            Ok(other) => {
                result.fail(format!("`{name}`: {what} `{}` ({}) is a {} record", e.path, e.digest, other.kind_name()));
            }
            Err(err) => result.fail(format!("`{name}`: {what} `{}`: {err}", e.path)),
        }
    }
    Some(out)
}

/// Reads the reviewer verdicts pinned in a `license` stage's optional `verdicts` input (a
/// source directory or a tree), by digest. A verdict that cannot be read fails the claim and is
/// named; a stage without the input has none.
fn pinned_reviewer_verdicts(
    cx: &RunContext<'_>,
    s: &StageRecord,
    signers: &[(String, prov_attest::PublicKey)],
    result: &mut ClaimResult,
) -> BTreeMap<Digest, (prov_manifest::VerdictRecord, prov_license::Signed)> {
    let Some(input) = s.inputs.get("verdicts") else { return BTreeMap::new() };
    let name = s.name.as_str();
    let tree = match get_record(cx.store, input) {
        Ok(Record::Source(src)) => src.content.digest(),
        Ok(Record::Tree(_)) => *input,
        Ok(other) => {
            result.fail(format!("`{name}`: its `verdicts` input `{input}` is a {} record", other.kind_name()));
            return BTreeMap::new();
        }
        Err(e) => {
            result.fail(format!("`{name}`: its `verdicts` input `{input}`: {e}"));
            return BTreeMap::new();
        }
    };
    result.evidence(format!("`{name}` reviewer verdicts (pinned input)"), tree);
    let entries = read_verdict_tree(cx, name, "reviewer verdict", tree, result).unwrap_or_default();
    // The signature files beside the verdicts (`<path>.sig`), from the same pinned tree.
    let signatures: BTreeMap<String, Digest> = match get_record(cx.store, &tree) {
        Ok(Record::Tree(t)) => t.entries.into_iter().map(|e| (e.path.as_str().to_owned(), e.digest)).collect(),
        _ => BTreeMap::new(),
    };
    let mut out = BTreeMap::new();
    for (e, v) in entries {
        let sig_path = prov_attest::verdict_signature_path(e.path.as_str());
        let signature = match signatures.get(&sig_path).map(|d| cx.store.read(d)) {
            None => None,
            Some(Ok(bytes)) => Some(bytes),
            Some(Err(err)) => {
                result.fail(format!("`{name}`: signature `{sig_path}` cannot be read: {err}"));
                continue;
            }
        };
        let reviewed = prov_license::Reviewed { id: e.digest, path: e.path.as_str().to_owned(), verdict: v, signature };
        let signed = reviewed.signed(signers);
        out.insert(e.digest, (reviewed.verdict, signed));
    }
    out
}

/// Says who decided, for evidence: `allow by reviewer Ada <a@b> at 2026-…`.
fn reviewed_by(v: &prov_manifest::VerdictRecord) -> String {
    format!(
        "{} by reviewer {} at {}",
        decision_name(v.decision),
        v.reviewer,
        v.decided_at.as_deref().unwrap_or("an unrecorded time")
    )
}

/// Reads the verdict records of a `license` stage's `verdicts` output, by digest; failures fail
/// the claim.
fn output_verdicts(
    cx: &RunContext<'_>,
    s: &StageRecord,
    f: &Filter,
    result: &mut ClaimResult,
) -> Option<BTreeMap<Digest, prov_manifest::VerdictRecord>> {
    let name = s.name.as_str();
    let Some(tree) = s.outputs.get("verdicts") else {
        result.undecided(format!("`{name}` recorded no verdicts (license stage before version 3)"));
        return None;
    };
    result.evidence(format!("`{name}` verdicts"), tree.digest);
    let mut verdicts = BTreeMap::new();
    for (entry, v) in read_verdict_tree(cx, name, "verdict", tree.digest, result)? {
        if v.reviewer == "policy" && v.subject != f.input {
            result.fail(format!(
                "`{name}`: verdict `{}` ({}) is about `{}`, not the stage's input",
                entry.path, entry.digest, v.subject
            ));
        }
        verdicts.insert(entry.digest, v);
    }
    Some(verdicts)
}

/// The ids of the documents one reviewer verdict kept, as much as the check needs: a verdict
/// about one record must have kept that record's documents only, so it is enough to know the
/// id when they all share one, and that they do not otherwise. Nothing here grows with the
/// number of documents.
#[derive(Debug, Default)]
enum KeptIds {
    /// None yet.
    #[default]
    None,
    /// Every document so far has this id.
    One(String),
    /// At least two ids differ.
    Several,
}

impl KeptIds {
    fn add(&mut self, id: &str) {
        *self = match std::mem::take(self) {
            Self::None => Self::One(id.to_owned()),
            Self::One(one) if one == id => Self::One(one),
            Self::One(_) | Self::Several => Self::Several,
        };
    }

    /// True when every id is `record`.
    fn all_are(&self, record: &str) -> bool {
        match self {
            Self::None => true,
            Self::One(one) => one == record,
            Self::Several => false,
        }
    }
}

/// Checks the documents a reviewer verdict kept, grouped by `(declared, verdict)`: each
/// verdict must be pinned in the stage's input, allow, and be about them.
fn check_reviewer_kept(
    name: &str,
    kept: &BTreeMap<(String, String), (u64, KeptIds)>,
    pinned: &BTreeMap<Digest, (prov_manifest::VerdictRecord, prov_license::Signed)>,
    signers: &[(String, prov_attest::PublicKey)],
    result: &mut ClaimResult,
) {
    for ((declared, v), (n, ids)) in kept {
        let key = prov_license::license_key(declared);
        let found = v.parse::<Digest>().ok().and_then(|d| pinned.get(&d).map(|r| (d, r)));
        let Some((d, (record, signed))) = found else {
            result.fail(format!(
                "`{name}`: {n} kept documents declaring `{declared}` name reviewer verdict `{v}`, which is not among the verdicts pinned in the stage's `verdicts` input"
            ));
            continue;
        };
        result.evidence(
            format!("`{name}` `{declared}` ({n} kept documents)"),
            format!("{} ({d}), {}", reviewed_by(record), signed.describe()),
        );
        if !signers.is_empty() && !matches!(signed, prov_license::Signed::By(_)) {
            result.fail(format!(
                "`{name}`: {n} documents declaring `{declared}` are kept by verdict `{d}`, which is {}; the policy requires verdicts signed by {}",
                signed.describe(),
                signers.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(" or ")
            ));
        }
        if record.decision != prov_license::Decision::Allow || record.rule != prov_license::MANUAL_RULE {
            result.fail(format!(
                "`{name}`: {n} documents declaring `{declared}` are kept by verdict `{d}`, which is `{}` by rule `{}`",
                decision_name(record.decision),
                record.rule
            ));
        }
        if record.spdx != key || record.record.as_ref().is_some_and(|r| !ids.all_are(r)) {
            result.fail(format!(
                "`{name}`: verdict `{d}` is about `{}`{}, not the kept documents declaring `{declared}`",
                record.spdx,
                record.record.as_ref().map(|r| format!(" in record `{r}`")).unwrap_or_default()
            ));
        }
    }
}

/// The `license` claim.
pub(super) fn license(
    cx: &RunContext<'_>,
    stage: Option<&str>,
    policy_name: &str,
    signers: &[(String, prov_attest::PublicKey)],
) -> ClaimResult {
    let mut result = ClaimResult::new(
        "license",
        format!(
            "every kept document's license is allowed by the stage's verdicts, and by policy `{policy_name}` or a pinned reviewer verdict"
        ),
    );
    let Some(policy) = prov_license::Policy::preset(policy_name) else {
        result.undecided(format!(
            "unknown license policy `{policy_name}` (known: {})",
            prov_license::Policy::PRESETS.join(", ")
        ));
        return result;
    };
    result.evidence("license policy", format!("{} {}", policy.name(), policy.version()));
    for (s, f) in filters(cx, "license", stage, Covers::TrainingData, &mut result) {
        let name = s.name.as_str();
        check_rules(
            name,
            &f.ledger,
            LedgerDecision::Kept,
            &["license:allowed", "license:reviewer-allowed"],
            &mut result,
        );
        let pinned = pinned_reviewer_verdicts(cx, s, signers, &mut result);
        let Some(verdicts) = output_verdicts(cx, s, &f, &mut result) else { continue };
        let licenses = s.stats.get("licenses").and_then(Value::as_object);
        // Kept by the policy: per declared string. Kept by a reviewer: per string and verdict.
        let mut by_policy: BTreeMap<String, u64> = BTreeMap::new();
        let mut by_reviewer: BTreeMap<(String, String), (u64, KeptIds)> = BTreeMap::new();
        for row in f.ledger.rows(cx.store) {
            let Some(r) = row_or_fail(row, name, &mut result) else { break };
            if r.decision != LedgerDecision::Kept {
                continue;
            }
            let field = |k: &str| r.evidence.as_ref().and_then(|e| e.get(k)).and_then(Value::as_str).unwrap_or("");
            if r.rule == "license:reviewer-allowed" {
                let e = by_reviewer.entry((field("declared").to_owned(), field("verdict").to_owned())).or_default();
                e.0 += 1;
                e.1.add(&r.id);
            } else {
                *by_policy.entry(field("declared").to_owned()).or_default() += 1;
            }
        }
        for (declared, n) in &by_policy {
            let verdict = licenses
                .and_then(|l| l.get(declared))
                .and_then(|l| l.get("verdict"))
                .and_then(Value::as_str)
                .and_then(|v| v.parse::<Digest>().ok());
            match verdict.and_then(|v| verdicts.get(&v).map(|r| (v, r))) {
                Some((v, record)) => {
                    result.evidence(
                        format!("`{name}` `{declared}` ({n} kept documents)"),
                        format!("{} by {v}", decision_name(record.decision)),
                    );
                    if record.decision != prov_license::Decision::Allow {
                        result.fail(format!(
                            "`{name}`: {n} documents declaring `{declared}` are kept, but its verdict `{v}` is `{}`",
                            decision_name(record.decision)
                        ));
                    }
                }
                None => result.fail(format!(
                    "`{name}`: {n} kept documents declare `{declared}`, which no verdict of the stage decides"
                )),
            }
            let d = prov_license::evaluate(&policy, &prov_license::normalize(declared));
            if d.decision != prov_license::Decision::Allow {
                result.fail(format!(
                    "`{name}`: {n} kept documents declare `{declared}`, which policy `{policy_name}` denies: {}",
                    d.reason
                ));
            }
        }
        check_reviewer_kept(name, &by_reviewer, &pinned, signers, &mut result);
        result.rechecked.push(format!(
            "`{name}`: each kept license string re-normalised and re-evaluated against policy `{policy_name}`, or matched to a reviewer verdict pinned in the stage's input, and every verdict record read"
        ));
    }
    result
}

/// The `compound-license` claim.
pub(super) fn compound_license(cx: &RunContext<'_>, stage: Option<&str>) -> ClaimResult {
    let mut result = ClaimResult::new(
        "compound-license",
        "no source re-licenses its documents: its declared license is compatible with each of theirs".into(),
    );
    for (s, f) in filters(cx, "license", stage, Covers::TrainingData, &mut result) {
        let name = s.name.as_str();
        let Some((digest, source)) = cx.run.upstream_source(cx.store, s.name.as_str()) else {
            result.undecided(format!("`{name}`: no `source` stage at the start of its `docs` chain"));
            continue;
        };
        let Some(declared) = source.license.as_deref() else {
            result.undecided(format!("`{name}`: source `{}` declares no license", source.name));
            continue;
        };
        result.evidence(format!("source `{}` ({declared})", source.name), digest);
        // A reviewer's verdict about a license (pinned in the stage's input) decides what the
        // check cannot: an unclassifiable constituent, or the mixture itself.
        let pinned = pinned_reviewer_verdicts(cx, s, &[], &mut result);
        let reviewed = |license: &str| {
            let key = prov_license::license_key(license);
            pinned.iter().find(|(_, (v, _))| v.record.is_none() && v.spdx == key).map(|(d, (v, _))| (*d, v))
        };
        let mut strings = BTreeMap::new();
        for row in f.ledger.rows(cx.store) {
            let Some(r) = row_or_fail(row, name, &mut result) else { break };
            if let Some(d) = r.evidence.as_ref().and_then(|e| e.get("declared")).and_then(Value::as_str) {
                *strings.entry(d.to_owned()).or_insert(0u64) += 1;
            }
        }
        for (d, n) in &strings {
            result.evidence(format!("`{name}` documents declaring `{d}`"), n);
        }
        let mut checked: Vec<&str> = Vec::new();
        for d in strings.keys() {
            let unclassified = prov_license::classify(&prov_license::normalize(d)).is_err();
            match reviewed(d) {
                Some((v, record)) if unclassified => result.evidence(
                    format!("`{name}` `{d}`: no tabulated terms; decided by reviewer verdict"),
                    format!("{} ({v}): {}", reviewed_by(record), record.rationale),
                ),
                _ => checked.push(d),
            }
        }
        let constituents: Vec<prov_license::Normalized> = checked.iter().map(|d| prov_license::normalize(d)).collect();
        for c in prov_license::check_compound(&prov_license::normalize(declared), &constituents) {
            let what = match c.constituent.and_then(|i| checked.get(i)) {
                Some(d) => format!("`{name}`: source `{}` and documents declaring `{d}`: {c}", source.name),
                None => format!("`{name}`: source `{}`: {c}", source.name),
            };
            match c.kind {
                prov_license::ConflictKind::UnclassifiedMixture(_) => match reviewed(declared) {
                    Some((v, record)) => result.evidence(
                        format!("`{name}`: source `{}`: no tabulated terms; decided by reviewer verdict", source.name),
                        format!("{} ({v}): {}", reviewed_by(record), record.rationale),
                    ),
                    None => result.undecided(what),
                },
                prov_license::ConflictKind::UnclassifiedConstituent(_) => result.undecided(what),
                _ => result.fail(what),
            }
        }
        result.rechecked.push(format!(
            "`{name}`: the source's declared license against each of the {} license strings its documents declare (prov-license's compound check; {} decided by a reviewer verdict)",
            strings.len(),
            strings.len() - checked.len()
        ));
    }
    result
}

fn decision_name(d: prov_license::Decision) -> &'static str {
    match d {
        prov_license::Decision::Allow => "allow",
        prov_license::Decision::Deny => "deny",
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use prov_manifest::{Decision, SCHEMA_VERSION, VerdictRecord};
    use prov_store::Digest;

    use super::{ClaimResult, KeptIds, check_reviewer_kept};
    use crate::claims::Outcome;

    /// The audit's judgement of documents kept by one pinned reviewer verdict that allows
    /// `Custom-Research-1.0` for record `r1` alone, when the kept documents have `ids`.
    fn judged(ids: &[&str], scope: Option<&str>) -> ClaimResult {
        let subject = Digest::of(b"a source manifest");
        let verdict = VerdictRecord {
            schema: SCHEMA_VERSION,
            subject,
            spdx: prov_license::license_key("Custom-Research-1.0"),
            record: scope.map(str::to_owned),
            decision: Decision::Allow,
            policy_version: "1".into(),
            rule: prov_license::MANUAL_RULE.into(),
            reviewer: "reviewer@example.org".into(),
            rationale: "read the terms".into(),
            decided_at: Some("2026-11-27T00:00:00Z".into()),
        };
        let d = Digest::of(b"the verdict's bytes");
        let pinned = BTreeMap::from([(d, (verdict, prov_license::Signed::Unsigned))]);
        let mut kept_ids = KeptIds::default();
        for id in ids {
            kept_ids.add(id);
        }
        let kept = BTreeMap::from([(("Custom-Research-1.0".to_owned(), d.to_string()), (ids.len() as u64, kept_ids))]);
        let mut result = ClaimResult::new("license", "a claim".into());
        check_reviewer_kept("license", &kept, &pinned, &[], &mut result);
        result
    }

    /// A verdict about one record, cited by a ledger (a forged one: the stage never applies
    /// it elsewhere) for the documents of another record, or of that record and another,
    /// makes the claim fail, naming the record; cited for that record's documents alone, or
    /// unscoped, it holds.
    #[test]
    fn a_verdict_about_one_record_does_not_cover_another_records_documents() {
        for ids in [&["r2"][..], &["r2", "r2"], &["r1", "r2"], &["r2", "r1", "r1"]] {
            let result = judged(ids, Some("r1"));
            assert_eq!(result.outcome, Outcome::Fails, "{ids:?}");
            assert!(result.reasons.iter().any(|r| r.contains("in record `r1`")), "{:?}", result.reasons);
        }
        for ids in [&["r1"][..], &["r1", "r1"]] {
            assert_eq!(judged(ids, Some("r1")).outcome, Outcome::Holds, "{ids:?}");
        }
        assert_eq!(judged(&["r1", "r2"], None).outcome, Outcome::Holds, "an unscoped verdict covers every record");
    }

    /// A verdict about one record passes only when every document it kept has that id: one
    /// other id among thousands is enough to fail, as with the whole list of ids.
    #[test]
    fn kept_ids_say_whether_all_are_one_record() {
        let mut ids = KeptIds::default();
        assert!(ids.all_are("r"), "no documents: nothing against it");
        for _ in 0..1000 {
            ids.add("r");
        }
        assert!(ids.all_are("r"));
        assert!(!ids.all_are("s"));
        ids.add("s");
        ids.add("r");
        assert!(!ids.all_are("r") && !ids.all_are("s"));
        assert!(matches!(ids, KeptIds::Several));
    }
}
