//! The `code-licenses` claim (AFM, §3.1.3): every code document a `code-packages` stage kept
//! is the unchanged text of a file of a package whose license the claimed policy allows.
//!
//! What it re-derives: every package of the pinned `packages` source is judged again under the
//! claimed policy (its metadata and license files read from the source tree in the store, by
//! `prov_code::judge`: the decision is a pure function of those bytes and the policy, and
//! `tests/python/code_license_reference.py` checks it independently), and every kept
//! document is matched to its file: the package must be allowed, the file must be a code file
//! of that package, and the document's text must be the file's bytes. What it reads from the
//! records: the stage's policy, which must be the claimed one (a stage under a looser policy
//! fails even where its packages happen to pass), and the ledger, whose kept rows must be
//! exactly the output's documents and carry `code:allowed`.

use std::collections::{BTreeMap, BTreeSet};

use prov_code::{CodePackagesConfig, PackageDir, judge, package_dirs};
use prov_dataset::LedgerDecision;
use prov_license::Policy;
use prov_license::detect::LicenseTexts;
use prov_manifest::{Content, Record, SourceRecord, StageRecord, TreeRecord, get_record, get_typed};
use prov_store::Digest;

use super::{ClaimResult, RunContext, check_ledger, dataset, fail_if_many, fail_one_of_many, no_stage, shard_docs};

/// A package as the audit judged it: allowed or not, and its files by path.
struct Judged {
    allowed: bool,
    dir: String,
    files: BTreeMap<String, Digest>,
    vendored: Vec<String>,
}

/// The `code-licenses` claim.
pub(super) fn code_licenses(cx: &RunContext<'_>, stage: Option<&str>, policy_name: &str) -> ClaimResult {
    let mut result = ClaimResult::new(
        "code-licenses",
        format!(
            "every kept code document is the unchanged text of a file of a package whose declared license and license files policy `{policy_name}` allows"
        ),
    );
    let Some(policy) = Policy::preset(policy_name) else {
        result.undecided(format!("unknown license policy `{policy_name}` (known: {})", Policy::PRESETS.join(", ")));
        return result;
    };
    result.evidence("license policy", format!("{} {}", policy.name(), policy.version()));
    let stages = cx.stages_of("code-packages", stage);
    if stages.is_empty() {
        no_stage(&mut result, "code-packages", stage);
    }
    let texts = match LicenseTexts::load() {
        Ok(t) => t,
        Err(e) => {
            result.undecided(e.to_string());
            return result;
        }
    };
    for s in stages {
        result.evidence(format!("stage `{}` (code-packages)", s.name()), s.manifest);
        check_stage(cx, &s.record, &policy, &texts, &mut result);
    }
    result
}

fn check_stage(cx: &RunContext<'_>, s: &StageRecord, policy: &Policy, texts: &LicenseTexts, result: &mut ClaimResult) {
    let name = s.name.as_str();
    let configured = s.config.get("policy").and_then(serde_json::Value::as_str).unwrap_or_default();
    if configured != policy.name() {
        result.fail(format!("`{name}` ran under policy `{configured}`, not the claimed `{}`", policy.name()));
    }
    // The config as the stage kind resolves it: a recorded config it would refuse or write
    // otherwise (an empty extension, an unsorted list) is not one a stage ran with.
    let resolved = prov_exec::Stage::resolve_config(&prov_code::CodePackagesStage, &s.config);
    let config: CodePackagesConfig = match resolved.map(|r| (r == s.config, serde_json::from_value(r))) {
        Ok((true, Ok(c))) => c,
        Ok((_, Err(e))) => {
            result.fail(format!("`{name}`'s config is not a code-packages config: {e}"));
            return;
        }
        Ok((false, _)) => {
            result.fail(format!("`{name}`'s config is not as the stage kind resolves it"));
            return;
        }
        Err(e) => {
            result.fail(format!("`{name}`'s config is refused by the stage kind: {e}"));
            return;
        }
    };
    let (Some(packages), Some(ledger), Some(out)) =
        (s.inputs.get("packages"), s.outputs.get("ledger"), s.outputs.get("dataset"))
    else {
        result.undecided(format!("`{name}` has no `packages` input, ledger or dataset output"));
        return;
    };
    let judged = match rejudge(cx, packages, policy, texts) {
        Ok(j) => j,
        Err(e) => {
            result.fail(format!("`{name}`'s packages `{}`: {e}", packages.short()));
            return;
        }
    };
    let allowed = judged.values().filter(|j| j.allowed).count();
    result.evidence(format!("`{name}` packages source ({} packages, {allowed} allowed)", judged.len()), packages);
    for (id, j) in judged.iter().filter(|(_, j)| !j.allowed) {
        result.evidence(format!("`{name}` excludes"), format!("{id} (`{}`)", j.dir));
    }
    result.rechecked.push(format!(
        "`{name}`: judged the {} packages of the pinned source again under policy `{} {}` from their metadata and license files",
        judged.len(),
        policy.name(),
        policy.version()
    ));
    let Some(kept_rows) = kept_rows(cx, name, &ledger.digest, result) else { return };
    let Some(found) = kept_documents(cx, name, &out.digest, &judged, &config, result) else { return };
    if found != kept_rows {
        let extra: Vec<&String> = found.symmetric_difference(&kept_rows).take(3).collect();
        result.fail(format!(
            "`{name}`: the output holds {} documents, the ledger keeps {} (differing: {extra:?})",
            found.len(),
            kept_rows.len()
        ));
    }
    result.rechecked.push(format!(
        "`{name}`: each of the {} kept documents against its package's verdict and its file's bytes in the pinned source",
        found.len()
    ));
}

/// The ids of the rows of the stage's ledger that pass a document, once the ledger is checked;
/// fails the claim for each that is not kept by `code:allowed`.
fn kept_rows(
    cx: &RunContext<'_>,
    name: &str,
    ledger_digest: &Digest,
    result: &mut ClaimResult,
) -> Option<BTreeSet<String>> {
    let ledger = match check_ledger(cx.store, ledger_digest) {
        Ok(l) => l,
        Err(e) => {
            result.fail(format!("`{name}`: {e}"));
            return None;
        }
    };
    result.evidence(format!("`{name}` ledger (Merkle root {})", ledger.record.merkle_root), ledger_digest);
    let mut kept = BTreeSet::new();
    let mut bad_rows = 0;
    for i in 0..ledger.shards.len() {
        let rows = match ledger.shard(cx.store, i) {
            Ok(r) => r,
            Err(e) => {
                result.fail(format!("`{name}`: {e}"));
                return None;
            }
        };
        for r in rows.into_iter().filter(|r| r.decision != LedgerDecision::Removed) {
            if r.rule != "code:allowed" || r.decision != LedgerDecision::Kept {
                fail_one_of_many(result, &mut bad_rows, || {
                    format!("`{name}`: `{}` {} by `{}`, not kept by `code:allowed`", r.id, r.decision.as_str(), r.rule)
                });
            }
            kept.insert(r.id);
        }
    }
    fail_if_many(result, bad_rows, || {
        format!("`{name}`: {bad_rows} rows pass documents by another rule than `code:allowed`")
    });
    Some(kept)
}

/// The ids of the stage's output documents; fails the claim for each that is not allowed code
/// ([`check_document`]).
fn kept_documents(
    cx: &RunContext<'_>,
    name: &str,
    out: &Digest,
    judged: &BTreeMap<String, Judged>,
    config: &CodePackagesConfig,
    result: &mut ClaimResult,
) -> Option<BTreeSet<String>> {
    let ds = match dataset(cx.store, out) {
        Ok(d) => d,
        Err(e) => {
            result.fail(format!("`{name}`: {e}"));
            return None;
        }
    };
    let mut found = BTreeSet::new();
    let mut problems = 0;
    for (i, shard) in ds.shards.iter().enumerate() {
        let docs = match shard_docs(cx.store, out, i, &shard.digest) {
            Ok(d) => d,
            Err(e) => {
                result.fail(format!("`{name}`: {e}"));
                return None;
            }
        };
        for doc in docs {
            let doc = match doc {
                Ok(d) => d,
                Err(e) => {
                    result.fail(format!("`{name}`: {e}"));
                    return None;
                }
            };
            if let Err(problem) = check_document(judged, config, &doc.id, &doc.text) {
                fail_one_of_many(result, &mut problems, || format!("`{name}`: {problem}"));
            }
            found.insert(doc.id);
        }
    }
    fail_if_many(result, problems, || format!("`{name}`: {problems} kept documents are not allowed code"));
    Some(found)
}

/// Why a kept document is not allowed code, if it is not.
fn check_document(
    judged: &BTreeMap<String, Judged>,
    config: &CodePackagesConfig,
    id: &str,
    text: &str,
) -> Result<(), String> {
    // Package ids hold `/` (`crates.io/itoa@1.0.11`, npm scopes): take the longest that
    // prefixes the document id.
    let Some((package, j)) = judged
        .iter()
        .filter(|(p, _)| id.strip_prefix(p.as_str()).is_some_and(|rest| rest.starts_with('/')))
        .max_by_key(|(p, _)| p.len())
    else {
        return Err(format!("`{id}` names no package of the source"));
    };
    let path = &id[package.len() + 1..];
    if !j.allowed {
        return Err(format!("`{id}` is code of `{package}`, which the policy does not allow"));
    }
    let Some(digest) = j.files.get(path) else {
        return Err(format!("`{id}`: `{package}` has no file `{path}`"));
    };
    if let Some(dir) = j.vendored.iter().find(|d| path.strip_prefix(d.as_str()).is_some_and(|r| r.starts_with('/'))) {
        return Err(format!("`{id}` is in `{dir}`, a package bundled inside `{package}`"));
    }
    if !config.is_code(path) {
        return Err(format!("`{id}`: `{path}` is not a code file under the stage's extensions"));
    }
    if Digest::of(text.as_bytes()) != *digest {
        return Err(format!("`{id}`: the text is not the bytes of `{path}` in `{package}`"));
    }
    Ok(())
}

/// Every package of the source tree, judged under `policy`, by package id.
fn rejudge(
    cx: &RunContext<'_>,
    packages: &Digest,
    policy: &Policy,
    texts: &LicenseTexts,
) -> Result<BTreeMap<String, Judged>, String> {
    let tree = match get_record(cx.store, packages).map_err(|e| e.to_string())? {
        Record::Source(SourceRecord { content: Content::Tree { digest, .. }, .. }) => {
            get_typed::<TreeRecord>(cx.store, &digest).map_err(|e| e.to_string())?
        }
        other => return Err(format!("a {} record, not a source directory", other.kind_name())),
    };
    let dirs: Vec<PackageDir> = package_dirs(&tree.entries)?;
    let mut out = BTreeMap::new();
    for dir in dirs {
        let read = |e: &prov_manifest::TreeEntry| cx.store.read(&e.digest).map_err(|err| err.to_string());
        let j = judge(&dir, &read, texts, policy)?;
        let id = j.metadata.package_id();
        let files = dir.files.iter().map(|f| (f.path.as_str().to_owned(), f.digest)).collect();
        let judged =
            Judged { allowed: j.verdict.rule == "code:allowed", dir: dir.dir.clone(), files, vendored: j.vendored };
        if out.insert(id.clone(), judged).is_some() {
            return Err(format!("two directories hold package `{id}`"));
        }
    }
    Ok(out)
}
