//! The license reviewer's whole cycle on real, messy license metadata: the Data Provenance
//! Initiative's data set summaries (shared data, `licenses/data-provenance-collection/`), one
//! document per data set, declaring the licenses the summary lists (joined by `AND`: they all
//! apply) and, from its "Derived from Datasets", the constituents the collection also
//! describes, each with its licenses. A run of the license filter; `prov license queue` lists
//! what the policy cannot judge or denies, and the real lineage conflicts (data sets that
//! re-license share-alike constituents); a reviewer decides two subjects with `prov license
//! decide`, each a verdict manifest and a git commit; the next run keeps what the reviewer
//! allowed; `prov audit` accepts the pinned verdicts, refuses a tampered one, and fails a
//! self-consistent forged ledger that cites the record's verdict for another record; `prov
//! license diff` names the decisions a share-alike policy would flip.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::common::{Project, flip_byte, shared_data};

const RECIPE: &str = "\
schema: 1
name: dpi-review
seed: 7
sources:
  collection: {path: data/dpi, license: Apache-2.0}
  reviewed: {path: ../verdicts}
stages:
  shards: {kind: shard, inputs: {docs: collection}, params: {shards: 2}}
  license: {kind: license, inputs: {docs: shards, verdicts: reviewed}, params: {policy: permissive}}
";

const POLICY: &str = "schema: 1\nname: reviewed\nclaims:\n  - kind: license\n    policy: permissive\n";

/// One data set of the collection: its id, its licenses and what it is derived from.
struct DataSet {
    id: String,
    name: String,
    text: String,
    licenses: Vec<String>,
    derived_from: Vec<String>,
}

/// Every data set of every summary file, in file and key order; the summaries that are not
/// JSON (one upstream) and the template are left out, as is a repeated identifier.
fn data_sets(dir: &std::path::Path) -> Vec<DataSet> {
    let mut files: Vec<_> = fs_err::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for file in files.iter().filter(|f| !f.file_name().unwrap().to_string_lossy().starts_with('_')) {
        let Ok(Value::Object(summary)) = serde_json::from_str::<Value>(&fs_err::read_to_string(file).unwrap()) else {
            continue;
        };
        for (key, d) in summary {
            let id = d["Unique Dataset Identifier"].as_str().unwrap_or(&key).to_owned();
            if !seen.insert(id.clone()) {
                continue;
            }
            let strings = |field: &str| -> Vec<String> {
                d[field]
                    .as_array()
                    .map_or_else(Vec::new, |a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
            };
            let mut licenses: Vec<String> = Vec::new();
            for l in d["Licenses"].as_array().into_iter().flatten() {
                if let Some(l) = l["License"].as_str().filter(|l| !licenses.iter().any(|x| x == l)) {
                    licenses.push(l.to_owned());
                }
            }
            let name = d["Dataset Name"].as_str().unwrap_or(&key).to_owned();
            out.push(DataSet {
                text: format!("{name}: {}", strings("Task Categories").join(", ")),
                id,
                name,
                licenses,
                derived_from: strings("Derived from Datasets"),
            });
        }
    }
    out
}

/// Writes the collection as JSON Lines beside its LICENSE file (from `dir`, the summaries'
/// directory); returns how many documents declare each string.
fn write_corpus(p: &Project, dir: &std::path::Path, sets: &[DataSet]) -> BTreeMap<String, u64> {
    let mut licenses_of: BTreeMap<&str, String> = BTreeMap::new();
    for s in sets.iter().filter(|s| !s.licenses.is_empty()) {
        licenses_of.insert(&s.name, s.licenses.join(" AND "));
        licenses_of.insert(&s.id, s.licenses.join(" AND "));
    }
    let mut counts = BTreeMap::new();
    let mut lines = String::new();
    for s in sets {
        let license = s.licenses.join(" AND ");
        *counts.entry(license.clone()).or_default() += 1;
        let mut doc = json!({"id": s.id, "text": s.text, "license": license});
        let lineage: Vec<Value> = s
            .derived_from
            .iter()
            .filter_map(|n| licenses_of.get(n.as_str()).map(|l| json!({"name": n, "license": l})))
            .collect();
        if !lineage.is_empty() {
            doc["derived_from"] = Value::Array(lineage);
        }
        lines.push_str(&doc.to_string());
        lines.push('\n');
    }
    p.write("recipes/data/dpi/collection.jsonl", &lines);
    // The collection's own license file, beside its data as on a data set hub.
    let license = dir.parent().unwrap().join("LICENSE");
    fs_err::copy(license, p.path("recipes/data/dpi/LICENSE")).unwrap();
    counts
}

/// The license stage's line of a `prov --json run`, and its manifest's statistics.
fn license_stage(p: &Project) -> (Value, Value) {
    let lines = p.json(&["run", "recipes/dpi-review.yaml"]);
    let stage = lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == "license").unwrap().clone();
    let shown = p.json(&["show", stage["data"]["manifest"].as_str().unwrap()]);
    (stage["data"].clone(), shown[0]["data"]["record"]["stats"].clone())
}

fn subjects(p: &Project, all: bool) -> BTreeMap<String, Value> {
    let args: &[&str] = if all { &["license", "queue", "--all"] } else { &["license", "queue"] };
    p.json(args)
        .into_iter()
        .filter(|l| l["type"] == "subject")
        .map(|l| (l["data"]["subject"].as_str().unwrap().to_owned(), l["data"].clone()))
        .collect()
}

#[test]
fn a_review_cycle_on_the_data_provenance_collection() {
    let Some(dir) = shared_data("licenses/data-provenance-collection/data_summaries") else { return };
    let sets = data_sets(&dir);
    assert!(sets.len() > 2_000, "{} data sets", sets.len());
    let p = Project::new();
    p.git_init("Rita Reviewer", "rita@example.org");
    let counts = write_corpus(&p, &dir, &sets);
    p.write("recipes/dpi-review.yaml", RECIPE);
    p.write("verdicts/README.md", "Reviewer verdicts, written by `prov license decide`.\n");
    p.write("policy.yaml", POLICY);

    let (first, stats) = license_stage(&p);
    let allowed = stats["by_rule"]["license:allowed"]["documents"].as_u64().unwrap();
    assert_eq!(stats["total"]["documents"], sets.len() as u64, "{stats}");
    // Several licenses that all apply read as one expression (the `compound` rule).
    let both = &stats["licenses"]["Apache License 2.0 AND CC BY 4.0"];
    assert_eq!((both["spdx"].as_str(), both["decision"].as_str()), (Some("Apache-2.0 AND CC-BY-4.0"), Some("kept")));

    // The queue: what the policy denies, what it cannot judge, and the lineage conflicts.
    let queue = subjects(&p, false);
    let nc = &queue["license:CC-BY-NC-4.0"];
    assert_eq!(nc["status"], "deny", "{nc}");
    assert_eq!(nc["declared"]["CC BY-NC 4.0"], counts["CC BY-NC 4.0"], "{nc}");
    assert!(nc["policy"]["reason"].as_str().unwrap().contains("non-commercial"), "{nc}");
    assert_eq!(queue["license:Unspecified"]["status"], "review");
    assert!(queue["license:Unspecified"]["reading"].as_str().unwrap().starts_with("unknown: not a license"));
    // Robust NLI's subsets declare OANC but are derived from SNLI, which is CC BY-SA 4.0.
    let relicensed = &queue["record:tsi-robust_nli-li_li"];
    assert_eq!(relicensed["status"], "deny", "OANC is not in the allow list either: {relicensed}");
    assert!(
        relicensed["constituents"].as_array().unwrap().iter().any(|c| c["license"] == "CC BY-SA 4.0"),
        "{relicensed}"
    );
    let conflict = relicensed["conflicts"][0].as_str().unwrap();
    assert!(conflict.contains("`snli`") && conflict.contains("share-alike"), "{conflict}");
    assert!(!queue.contains_key("license:MIT"), "allowed licenses are not queued");
    // The source's license file is read against the SPDX texts: the Apache License 2.0 that
    // the recipe declares (the shard stage passed over it: it is not a document).
    let source = &subjects(&p, true)["source:collection"];
    assert_eq!(source["license_files"][0]["path"], "LICENSE", "{source}");
    assert_eq!(source["license_files"][0]["matches"], json!(["Apache-2.0"]), "{source}");
    assert!(!source["conflicts"].to_string().contains("license file"), "{source}");
    let afl = &queue["license:AFL-3.0"];
    assert_eq!((afl["status"].as_str(), afl["policy"]["rule"].as_str()), (Some("deny"), Some("not-in-allow-list")));
    let afl_documents = afl["declared"]["Academic Free License v3.0"].as_u64().unwrap();
    let esnli = &queue["record:fc-cot-stream_esnli"];
    assert_eq!((esnli["license"].as_str(), esnli["status"].as_str()), (Some("CC BY-SA 4.0"), Some("deny")));

    // Two decisions: a license for every document declaring it, and one record.
    let decided = p.json(&[
        "license",
        "decide",
        "license:AFL-3.0",
        "--allow",
        "--reason",
        "AFL-3.0 is an OSI-approved permissive license",
    ]);
    let verdict = &decided[0]["data"];
    assert_eq!(verdict["reviewer"], "Rita Reviewer <rita@example.org>", "{verdict}");
    assert_eq!(verdict["file"], "verdicts/licenses/AFL-3.0.json");
    let decided = p.json(&[
        "license",
        "decide",
        "record:fc-cot-stream_esnli",
        "--allow",
        "--reason",
        "e-SNLI keeps SNLI's CC BY-SA 4.0; the corpus is released under it",
    ]);
    let record_verdict = decided[0]["data"]["verdict"].as_str().unwrap().to_owned();
    verdicts_stay_in_the_work_tree(&p);
    let log = p.git(&["log", "--format=%s", "--", "verdicts"]);
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        ["prov license decide: allow record:fc-cot-stream_esnli", "prov license decide: allow license:AFL-3.0"],
    );
    assert!(p.git(&["status", "--porcelain", "verdicts"]).lines().all(|l| l.contains("README")), "committed");
    let queue = subjects(&p, false);
    assert!(!queue.contains_key("license:AFL-3.0") && !queue.contains_key("record:fc-cot-stream_esnli"));
    let all = subjects(&p, true);
    assert_eq!(all["license:AFL-3.0"]["status"], "decided");
    assert_eq!(all["license:AFL-3.0"]["verdict"]["digest"], verdict["verdict"]);
    let shown = p.json(&["show", verdict["verdict"].as_str().unwrap()]);
    let record = &shown[0]["data"]["record"];
    assert_eq!((record["kind"].as_str(), record["decision"].as_str()), (Some("verdict"), Some("allow")), "{record}");
    assert_eq!(record["rule"], "manual");
    assert!(
        record["decided_at"].is_string() && record["rationale"].as_str().unwrap().contains("OSI-approved"),
        "{record}"
    );

    // The next run pins the verdicts (the directory is a source), re-runs the license stage and
    // keeps what the reviewer allowed.
    let (second, stats) = license_stage(&p);
    assert_ne!(second["manifest"], first["manifest"]);
    let by_reviewer = stats["by_rule"]["license:reviewer-allowed"]["documents"].as_u64().unwrap();
    assert_eq!(by_reviewer, afl_documents + 1, "{stats}");
    assert_eq!(stats["by_rule"]["license:allowed"]["documents"].as_u64().unwrap(), allowed, "{stats}");
    let audit = p.prov(&["audit", "lockfiles/dpi-review.lock", "--policy", "policy.yaml"]);
    audit.success();
    assert!(audit.stdout().contains("license: HOLDS"), "{}", audit.describe());
    a_record_verdict_cited_for_another_record_fails(&p, &record_verdict);

    // A pinned reviewer verdict changed in the store fails the claim, naming it.
    let pinned = p.json(&["show", second["outputs"]["verdicts"].as_str().unwrap()]);
    let entries = pinned[0]["data"]["record"]["entries"].as_array().unwrap().clone();
    let entry = entries.iter().find(|e| e["digest"] == verdict["verdict"]).expect("the reviewer's verdict is pinned");
    let digest = entry["digest"].as_str().unwrap();
    flip_byte(&p.object_file(digest), 60);
    let audit = p.prov(&["audit", "lockfiles/dpi-review.lock", "--policy", "policy.yaml"]);
    audit.exit(4);
    assert!(audit.stdout().contains("license: FAILS"), "{}", audit.describe());
    assert!(audit.stdout().contains(entry["path"].as_str().unwrap()), "{}", audit.describe());
}

/// A self-consistent forgery (every digest and root recomputed, as in `test_audit`): a
/// document the stage removed is kept under the reviewer verdict about record
/// `fc-cot-stream_esnli` alone, its row a copy of that record's own. The verdict is pinned,
/// allows, and is about the declared license, so only its record scope can catch it: the
/// claim fails, naming the verdict and the record.
fn a_record_verdict_cited_for_another_record_fails(p: &Project, record_verdict: &str) {
    use prov_dataset::LedgerDecision;
    let lockfile = ("lockfiles/dpi-review.lock", POLICY);
    let claims =
        crate::test_audit::audit_forged(p, lockfile, "license", &prov_audit::StageRescan, |rows, out, input| {
            let esnli =
                rows.iter().flatten().find(|r| r.id == "fc-cot-stream_esnli").expect("the record's row").clone();
            assert_eq!((esnli.rule.as_str(), esnli.decision), ("license:reviewer-allowed", LedgerDecision::Kept));
            assert_eq!(esnli.evidence.as_ref().and_then(|e| e.get("verdict")), Some(&json!(record_verdict)));
            let evidence = esnli.evidence.clone().map(Value::Object);
            let removed = |r: &prov_dataset::LedgerRow| r.decision == LedgerDecision::Removed;
            crate::test_audit::keep_row(rows, out, input, removed, ("license:reviewer-allowed", evidence));
        });
    let license = claims.iter().find(|c| c.kind == "license").expect("the license claim");
    assert_eq!(license.outcome, prov_audit::Outcome::Fails, "{license:#?}");
    let named = |r: &String| r.contains(record_verdict) && r.contains("in record `fc-cot-stream_esnli`");
    assert!(license.reasons.iter().any(named), "{license:#?}");
    // The same forgery with nothing edited holds: the failure is the forged row's.
    let untouched = crate::test_audit::audit_forged(p, lockfile, "license", &prov_audit::StageRescan, |_, _, _| {});
    let license = untouched.iter().find(|c| c.kind == "license").expect("the license claim");
    assert_eq!(license.outcome, prov_audit::Outcome::Holds, "{license:#?}");
}

#[test]
fn a_policy_diff_names_the_decisions_that_flip() {
    let Some(dir) = shared_data("licenses/data-provenance-collection/data_summaries") else { return };
    let p = Project::new();
    write_corpus(&p, &dir, &data_sets(&dir));
    p.write("recipes/dpi-review.yaml", RECIPE);
    p.write("verdicts/README.md", "Reviewer verdicts.\n");
    let share_alike = crate::common::repo_root().join("recipes/license-policies/share-alike.yaml");
    fs_err::copy(&share_alike, p.path("share-alike.yaml")).unwrap();
    p.prov(&["run", "recipes/dpi-review.yaml"]).success();
    let lines = p.json(&["license", "diff", "permissive", "share-alike.yaml"]);
    let flips: BTreeMap<String, Value> = lines
        .iter()
        .filter(|l| l["type"] == "license" && l["data"]["flips"] == true)
        .map(|l| (l["data"]["key"].as_str().unwrap().to_owned(), l["data"].clone()))
        .collect();
    let sa = flips.get("CC-BY-SA-4.0").unwrap_or_else(|| panic!("CC BY-SA 4.0 flips: {lines:?}"));
    assert_eq!((sa["a"]["status"].as_str(), sa["b"]["status"].as_str()), (Some("deny"), Some("allow")), "{sa}");
    assert_eq!(sa["a"]["rule"], "not-in-allow-list", "{sa}");
    assert!(!flips.contains_key("MIT"), "MIT is allowed by both");
    let human = p.prov(&["license", "diff", "permissive", "share-alike.yaml"]);
    human.success();
    assert!(human.stdout().contains("CC-BY-SA-4.0"), "{}", human.describe());

    // Declared MIT, the LICENSE file beside the data says otherwise: a conflict to review.
    p.write("recipes/dpi-review.yaml", &RECIPE.replace("license: Apache-2.0", "license: MIT"));
    p.prov(&["run", "recipes/dpi-review.yaml"]).success();
    let source = &subjects(&p, false)["source:collection"];
    let conflicts = source["conflicts"].to_string();
    assert!(
        conflicts.contains("license file `LICENSE` is the text of `Apache-2.0`")
            && conflicts.contains("the declared `MIT` does not name"),
        "{source}"
    );
    let human = p.prov(&["license", "queue"]);
    assert!(
        human.stdout().contains("license file LICENSE: the text of `Apache-2.0` (score 1.000)"),
        "{}",
        human.describe()
    );
}

/// A verdicts directory that climbs out of the work tree by `..` is refused (it passed a
/// textual prefix check); so is one reached through a link out of it.
fn verdicts_stay_in_the_work_tree(p: &Project) {
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), p.path("linked")).unwrap();
    for (dir, expected) in
        [("verdicts/../../escaped", "is outside the git work tree"), ("linked", "is a symbolic link")]
    {
        let r = p.prov(&["license", "decide", "license:AFL-3.0", "--deny", "--reason", "x", "--verdicts", dir]);
        r.exit(1);
        assert!(r.stderr().contains(expected), "{dir}: {}", r.describe());
    }
    assert!(!p.root.parent().unwrap().join("escaped").exists());
    assert!(fs_err::read_dir(elsewhere.path()).unwrap().next().is_none(), "nothing written through the link");
    fs_err::remove_file(p.path("linked")).unwrap();
}

/// Two `prov license decide`s at once, three rounds, each round flipping both decisions: the
/// branch holds both verdict files as the work tree does, and the verdict a later run reads
/// is the one git recorded. Before the commit lock, the second commit was built on the HEAD
/// both had read and dropped the other's verdict from the branch while both reported
/// "committed" (9 of 20 tries): a clone then decided its documents otherwise.
#[test]
fn concurrent_decisions_keep_each_others_verdicts() {
    let p = Project::new();
    p.git_init("Rita Reviewer", "rita@example.org");
    let docs: String = [("a", "CC BY-NC 4.0"), ("b", "AFL-3.0"), ("c", "MIT")]
        .iter()
        .map(|(id, license)| json!({"id": id, "text": format!("document {id}"), "license": license}).to_string() + "\n")
        .collect();
    p.write("recipes/data/dpi/docs.jsonl", &docs);
    p.write("verdicts/README.md", "Reviewer verdicts.\n");
    p.write("recipes/dpi-review.yaml", RECIPE);
    p.git(&["add", "."]);
    p.git(&["commit", "-q", "-m", "the project"]);
    p.prov(&["run", "recipes/dpi-review.yaml"]).success();
    let subjects: Vec<String> = subjects(&p, false).into_keys().filter(|s| s.starts_with("license:")).collect();
    assert_eq!(subjects, ["license:AFL-3.0", "license:CC-BY-NC-4.0"]);
    for round in 0..3 {
        let decision = if round % 2 == 0 { "--allow" } else { "--deny" };
        let reason = format!("round {round}");
        p.prov_at_once(
            &subjects.iter().map(|s| vec!["license", "decide", s, decision, "--reason", &reason]).collect::<Vec<_>>(),
        );
        for file in ["verdicts/licenses/AFL-3.0.json", "verdicts/licenses/CC-BY-NC-4.0.json"] {
            let committed = p.git(&["show", &format!("HEAD:{file}")]);
            assert_eq!(committed, fs_err::read_to_string(p.path(file)).unwrap(), "round {round}: {file}");
            assert!(committed.contains(&format!("round {round}")), "round {round}: {file}: {committed}");
        }
        assert!(p.git(&["status", "--porcelain", "verdicts"]).trim().is_empty(), "round {round}");
    }
}
