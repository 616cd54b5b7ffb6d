//! Language identification end to end on real text: `langid-train` on the UDHR's translations
//! in the main job (478 language tags, every fifth document of each language held out), then
//! `langid` on the main job's Debian text, which the model never saw.
//!
//! There is no reference for the model itself (it is Provenant's own, trained here), so the
//! reference is a detector from PyPI on the same text: `lingua-language-detector` (pinned in
//! lockfiles/requirements.txt, its 75 languages). On the held-out UDHR documents of the
//! languages both know, and on every third Debian document, the test prints both accuracies side by
//! side and requires Provenant's to be at least Lingua's less two points; every ledger row's
//! detection must be what the model file the stage pinned gives when read back with the library
//! (so the ledger says what the pinned model says), and `prov explain langid` names a removed
//! document's rule and detection. Then the run replays bit for bit.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common::{Project, ledger_rows, main_job_data_fetched, repo_root, venv_python};

/// Lingua's side: JSON lines `{"id", "text"}` on stdin; per line, the ISO 639-1 code Lingua
/// detects (lowercase), or `none`.
const LINGUA: &str = r#"
import json, sys
from lingua import LanguageDetectorBuilder
detector = LanguageDetectorBuilder.from_all_languages().build()
out = []
for l in sys.stdin.read().split("\n"):
    if l:
        found = detector.detect_language_of(json.loads(l)["text"])
        out.append(found.iso_code_639_1.name.lower() if found else "none")
sys.stdout.write("\n".join(out) + "\n")
"#;

/// Lingua's languages as ISO 639-1 codes.
const LINGUA_LANGUAGES: &str =
    "from lingua import Language\nprint(' '.join(sorted(l.iso_code_639_1.name.lower() for l in Language.all())))";

fn primary(doc: &Value) -> String {
    prov_dataset::primary_language(doc["language"].as_str().unwrap_or("und"))
}

/// Lingua's detections of `docs`.
fn lingua(python: &std::path::Path, docs: &[&Value]) -> Vec<String> {
    let input: String = docs.iter().map(|d| serde_json::json!({ "text": d["text"] }).to_string() + "\n").collect();
    let out = prov_testkit::pipe(python, &["-c", LINGUA], input.as_bytes());
    String::from_utf8(out).unwrap().lines().map(str::to_owned).collect()
}

/// The main job's corpus file `name`, as JSON documents.
fn documents(name: &str) -> Vec<Value> {
    let path = repo_root().join("recipes/data/mini-apertus/corpus").join(name);
    fs_err::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn langid_trains_on_the_udhr_compares_with_lingua_and_replays() {
    if !main_job_data_fetched() {
        return;
    }
    let Some(python) = venv_python() else { return };
    let project = Project::new();
    for name in ["udhr.jsonl", "debian.jsonl"] {
        let corpus = repo_root().join("recipes/data/mini-apertus/corpus");
        project.write(&format!("recipes/data/{name}"), &fs_err::read_to_string(corpus.join(name)).unwrap());
    }
    project.write(
        "recipes/langid.yaml",
        concat!(
            "schema: 1\nname: langid\nseed: 1\nsources:\n  udhr:\n    path: data/udhr.jsonl\n",
            "  debian:\n    path: data/debian.jsonl\nstages:\n",
            "  udhr_shards:\n    kind: shard\n    inputs: {docs: udhr}\n    params: {shards: 3}\n",
            "  debian_shards:\n    kind: shard\n    inputs: {docs: debian}\n    params: {shards: 2}\n",
            "  identifier:\n    kind: langid-train\n    inputs: {docs: udhr_shards}\n    params: {hold_out: 5}\n",
            "  langid:\n    kind: langid\n    inputs: {docs: debian_shards, model: identifier}\n",
        ),
    );
    let run = project.json(&["run", "recipes/langid.yaml"]);
    let stage = |name: &str| run.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == name).unwrap().clone();
    let record = |name: &str| {
        project.json(&["show", stage(name)["data"]["manifest"].as_str().unwrap()])[0]["data"]["record"].clone()
    };
    let known: Vec<String> = String::from_utf8(prov_testkit::pipe(&python, &["-c", LINGUA_LANGUAGES], b""))
        .unwrap()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    held_out_against_lingua(&python, &record("identifier")["stats"]["held_out"], &known);

    let store = prov_store::Store::open(&project.path(".prov"), prov_store::Access::Shared, true).unwrap();
    let digest: prov_store::Digest = stage("identifier")["data"]["outputs"]["model"].as_str().unwrap().parse().unwrap();
    let model = prov_langid::Model::parse(std::str::from_utf8(&store.read(&digest).unwrap()).unwrap()).unwrap();
    let rows = ledger_rows(&project, stage("langid")["data"]["outputs"]["ledger"].as_str().unwrap());
    debian_against_lingua(&python, &model, &rows, &known);
    assert!(record("langid")["stats"]["languages"]["de"]["match"].as_u64().is_some_and(|m| m > 0));

    // `prov explain langid` names the ledger's rule and detection for a removed document.
    let removed = rows.iter().find(|r| r.rule == "langid:mismatch").unwrap();
    let doc = documents("debian.jsonl").into_iter().find(|d| d["id"] == removed.id.as_str()).unwrap();
    let model_file = project.write("model.langid", std::str::from_utf8(&store.read(&digest).unwrap()).unwrap());
    let args = ["--json", "explain", "langid", "--model", model_file.to_str().unwrap(), "--declared"];
    let args: Vec<&str> = args.into_iter().chain([doc["language"].as_str().unwrap()]).collect();
    let shown = project.prov_with_stdin(&args, doc["text"].as_str().unwrap());
    let message: Value = serde_json::from_str(shown.success().stdout().lines().next().unwrap()).unwrap();
    assert_eq!(message["data"]["rule"], "langid:mismatch");
    assert_eq!(message["data"]["decision"], "removed");
    let evidence = removed.evidence.as_ref().unwrap();
    assert_eq!(message["data"]["evidence"]["detected"], evidence["detected"]);
    assert_eq!(message["data"]["languages"][0]["language"], evidence["detected"]);

    project.prov(&["replay", "lockfiles/langid.lock"]).success();
}

/// The stage's held-out accuracy per language against Lingua's on the same documents (every
/// fifth UDHR document of each language, in file order, as the stage holds them out).
fn held_out_against_lingua(python: &std::path::Path, held: &Value, known: &[String]) {
    let udhr = documents("udhr.jsonl");
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    let held_docs: Vec<&Value> = udhr
        .iter()
        .filter(|d| {
            let language = primary(d);
            let count = seen.entry(language.clone()).or_default();
            *count += 1;
            language != "und" && count.is_multiple_of(5) && known.contains(&language)
        })
        .collect();
    let theirs = lingua(python, &held_docs);
    // Per language: documents, correct by Provenant, correct by Lingua.
    let mut table: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for (doc, detected) in held_docs.iter().zip(&theirs) {
        let row = table.entry(primary(doc)).or_default();
        row.0 += 1;
        row.2 += u64::from(*detected == primary(doc));
    }
    for (language, row) in &mut table {
        assert_eq!(
            held["languages"][language]["documents"].as_u64(),
            Some(row.0),
            "{language}: held-out counts differ"
        );
        row.1 = held["languages"][language]["correct"].as_u64().unwrap();
    }
    let (total, ours, theirs) = table.values().fold((0, 0, 0), |a, r| (a.0 + r.0, a.1 + r.1, a.2 + r.2));
    eprintln!("held-out UDHR, {} languages both know (language, documents, provenant, lingua):", table.len());
    for (language, (documents, o, t)) in &table {
        eprintln!("  {language} {documents} {o} {t}");
    }
    eprintln!(
        "  all {total} {ours} ({:.3}) {theirs} ({:.3}); over all 478 tags: {} of {} held out",
        ours as f64 / total as f64,
        theirs as f64 / total as f64,
        held["correct"],
        held["documents"]
    );
    assert!(total > 300, "too few held-out documents in shared languages: {total}");
    assert!(
        ours as f64 >= theirs as f64 - 0.02 * total as f64,
        "held out: provenant {ours}, lingua {theirs} of {total}"
    );
}

/// Every ledger row against the pinned model read back, and on every third Debian document of
/// a language Lingua knows, the matches against Lingua's.
fn debian_against_lingua(
    python: &std::path::Path,
    model: &prov_langid::Model,
    rows: &[prov_dataset::LedgerRow],
    known: &[String],
) {
    let debian = documents("debian.jsonl");
    let by_id: BTreeMap<&str, &prov_dataset::LedgerRow> = rows.iter().map(|r| (r.id.as_str(), r)).collect();
    assert_eq!(by_id.len(), debian.len());
    let mut rules: BTreeMap<String, u64> = BTreeMap::new();
    for doc in &debian {
        let row = by_id[doc["id"].as_str().unwrap()];
        *rules.entry(row.rule.clone()).or_default() += 1;
        let found = model.identify(doc["text"].as_str().unwrap());
        match &row.evidence {
            Some(e) if e.contains_key("detected") => {
                let found = found.unwrap();
                assert_eq!(e["detected"], found.language.as_str(), "{}", row.id);
                assert_eq!(e["score"].as_f64(), Some(found.score), "{}", row.id);
            }
            _ => assert!(found.is_none() || row.rule != "langid:no-words", "{}: {}", row.id, row.rule),
        }
    }
    assert!(rules.contains_key("langid:match") && rules.contains_key("langid:mismatch"), "{rules:?}");
    let shared: Vec<&Value> = debian.iter().filter(|d| known.contains(&primary(d))).step_by(3).collect();
    let theirs = lingua(python, &shared);
    let ours = shared.iter().filter(|d| by_id[d["id"].as_str().unwrap()].rule == "langid:match").count();
    let theirs = shared.iter().zip(&theirs).filter(|(d, t)| **t == primary(d)).count();
    let total = shared.len();
    eprintln!(
        "Debian text, {total} documents in languages both know: provenant {ours}, lingua {theirs}; rules {rules:?}"
    );
    assert!(ours as f64 >= theirs as f64 - 0.02 * total as f64, "debian: provenant {ours}, lingua {theirs} of {total}");
}
