//! The `heuristics` stage end to end on real text (the main job's Debian fortunes and UDHR
//! translations) and on documents written to hit each rule: every ledger row names the rule
//! and evidence that `prov_heuristics::assess` gives for that document (itself checked against
//! an independent Python implementation in `crates/prov-heuristics/tests/`), the dataset holds
//! exactly the kept and rewritten texts in input order, documents outside `languages` pass
//! untouched, `prov explain heuristics` names the same rule, and the run replays bit for bit.

use std::collections::BTreeMap;

use prov_heuristics::{Outcome, Thresholds, assess};
use serde_json::{Value, json};

use crate::common::{Project, ledger_rows, main_job_data_fetched, repo_root};

/// Documents written to hit each rule, in German, with one French document that the
/// stage's `languages` leave alone.
fn written() -> Vec<Value> {
    let long = "Die Würde des Menschen ist unantastbar. Sie zu achten und zu schützen ist Verpflichtung aller \
                staatlichen Gewalt. Das Deutsche Volk bekennt sich darum zu unverletzlichen und unveräußerlichen \
                Menschenrechten.";
    let doc = |id: &str, lang: &str, text: String| json!({ "id": id, "language": lang, "text": text });
    vec![
        doc("w-kept", "de", long.to_owned()),
        doc("w-short", "de", "Zu kurz.".to_owned()),
        doc("w-lorem", "de", format!("{long}\nLorem ipsum dolor sit amet.")),
        doc("w-js", "de-AT", format!("{long}\nBitte aktivieren Sie JavaScript.")),
        doc("w-curly", "de", format!("{long}\nfunction f() {{ return 1; }}")),
        doc("w-paragraphs", "de", format!("JETZT KAUFEN!!!\n{long}\n# # # Menü\n12 34 56 Ende")),
        doc("w-french", "fr", "Trop court, mais en français: { javascript }".to_owned()),
    ]
}

/// The documents of a dataset record, in order, as (id, text).
fn dataset_texts(p: &Project, dataset: &str) -> Vec<(String, String)> {
    let store = prov_store::Store::open(&p.path(".prov"), prov_store::Access::Shared, true).unwrap();
    let record = prov_manifest::get_typed::<prov_manifest::DatasetRecord>(&store, &dataset.parse().unwrap()).unwrap();
    let mut out = Vec::new();
    for s in &record.shards {
        for d in prov_dataset::shard_documents(&store, &s.digest).unwrap() {
            let d = d.unwrap();
            out.push((d.id, d.text));
        }
    }
    out
}

#[test]
fn heuristics_decide_each_document_as_the_rules_do_and_replay() {
    if !main_job_data_fetched() {
        return;
    }
    let p = Project::new();
    let corpus = repo_root().join("recipes/data/mini-apertus/corpus");
    let mut docs = written();
    // The Debian fortunes (German, Spanish, Italian, French) and every tenth UDHR article.
    for (name, step) in [("debian.jsonl", 1), ("udhr.jsonl", 10)] {
        let text = fs_err::read_to_string(corpus.join(name)).unwrap();
        docs.extend(text.lines().step_by(step).map(|l| serde_json::from_str::<Value>(l).unwrap()));
    }
    let lines: String = docs.iter().map(|d| d.to_string() + "\n").collect();
    p.write("recipes/data/docs.jsonl", &lines);
    p.write(
        "recipes/h.yaml",
        "schema: 1\nname: h\nseed: 1\nsources:\n  docs:\n    path: data/docs.jsonl\nstages:\n  shards:\n    kind: shard\n    inputs: {docs: docs}\n    params: {shards: 3}\n\
         \x20 heuristics:\n    kind: heuristics\n    inputs: {docs: shards}\n    params: {languages: [it, de, es, DE]}\n",
    );
    let run = p.json(&["run", "recipes/h.yaml"]);
    let stage = run.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == "heuristics").unwrap();
    let outputs = &stage["data"]["outputs"];
    let rows = ledger_rows(&p, outputs["ledger"].as_str().unwrap());
    let kept = dataset_texts(&p, outputs["dataset"].as_str().unwrap());

    let applies = ["de", "es", "it"];
    let t = Thresholds::default();
    let by_id: BTreeMap<&str, &prov_dataset::LedgerRow> = rows.iter().map(|r| (r.id.as_str(), r)).collect();
    assert_eq!(by_id.len(), docs.len(), "one row per document");
    let mut expected_kept = Vec::new();
    let mut rules: BTreeMap<String, usize> = BTreeMap::new();
    for d in &docs {
        let (id, text) = (d["id"].as_str().unwrap(), d["text"].as_str().unwrap());
        let lang = d["language"].as_str().unwrap_or("und");
        let row = by_id[id];
        *rules.entry(row.rule.clone()).or_default() += 1;
        let primary = lang.split('-').next().unwrap().to_ascii_lowercase();
        if !applies.contains(&primary.as_str()) {
            assert_eq!(row.rule, "heuristics:not-applied", "{id}");
            assert_eq!(row.evidence.as_ref().unwrap()["language"], primary.as_str(), "{id}");
            expected_kept.push((id.to_owned(), text.to_owned()));
            continue;
        }
        let outcome = assess(text, &t);
        let (rule, evidence) = outcome.ledger_entry();
        assert_eq!(row.rule, format!("heuristics:{rule}"), "{id}");
        assert_eq!(row.evidence, evidence, "{id}");
        assert_eq!(row.words, prov_dataset::word_count(text), "{id}: the input's word count");
        match outcome {
            Outcome::Paragraphs { text, too_short: false, .. } => expected_kept.push((id.to_owned(), text)),
            _ => assert_eq!(row.decision, prov_dataset::LedgerDecision::Removed, "{id}"),
        }
    }
    // The dataset is exactly the kept and rewritten documents, in input order.
    assert_eq!(kept, expected_kept);
    for rule in ["kept", "paragraphs", "too-short", "lorem-ipsum", "javascript", "curly-bracket", "not-applied"] {
        assert!(rules.contains_key(&format!("heuristics:{rule}")), "no `{rule}` row: {rules:?}");
    }
    // The written documents, as the report's rules decide them.
    let rule_of = |id: &str| by_id[id].rule.as_str();
    assert_eq!(
        ["w-kept", "w-short", "w-lorem", "w-js", "w-curly", "w-paragraphs", "w-french"].map(rule_of),
        [
            "heuristics:kept",
            "heuristics:too-short",
            "heuristics:lorem-ipsum",
            "heuristics:javascript",
            "heuristics:curly-bracket",
            "heuristics:paragraphs",
            "heuristics:not-applied"
        ]
    );
    assert_eq!(
        Value::Object(by_id["w-paragraphs"].evidence.clone().unwrap()),
        json!({ "paragraphs": 4, "removed": { "uppercase": [0], "symbol-ratio": [2], "non-alpha-words": [3] }, "chars": 207 })
    );

    // The statistics count the rows and the paragraphs.
    let shown = p.json(&["show", stage["data"]["manifest"].as_str().unwrap()]);
    let stats = &shown[0]["data"]["record"]["stats"];
    assert_eq!(stats["total"]["documents"], docs.len(), "{stats}");
    assert_eq!(stats["by_rule"]["heuristics:paragraphs"]["documents"], rules["heuristics:paragraphs"], "{stats}");
    assert!(stats["paragraphs"]["removed"]["uppercase"].as_u64().unwrap() >= 1, "{stats}");
    assert_eq!(shown[0]["data"]["record"]["config"]["languages"], json!(["de", "es", "it"]));

    // `prov explain heuristics` names the rule the ledger names.
    let text = docs.iter().find(|d| d["id"] == "w-paragraphs").unwrap()["text"].as_str().unwrap();
    let r = p.prov_with_stdin(&["explain", "heuristics"], text);
    r.success();
    assert!(r.stdout().contains("paragraph 0: uppercase: "), "{}", r.describe());
    assert!(
        r.stdout().ends_with("heuristics:paragraphs: modified: 3 of 4 paragraphs removed, 207 characters left\n"),
        "{}",
        r.describe()
    );

    p.prov(&["replay", "lockfiles/h.lock"]).success();
    the_heuristics_claim_holds_and_forgeries_fail(&p);
}

/// The `heuristics` claim holds on the honest run for its languages, fails for the report's
/// four (the run left French out), and fails on forgeries that every digest and root check
/// accepts: a too-short document and a document with a curly bracket put back as kept.
fn the_heuristics_claim_holds_and_forgeries_fail(p: &Project) {
    use crate::test_audit::{audit_forged, keep_row};
    use prov_audit::Outcome;
    let ours = "schema: 1\nname: h\nclaims:\n  - kind: heuristics\n    languages: [de, es, it]\n";
    p.write("ours.yaml", ours);
    p.prov(&["audit", "lockfiles/h.lock", "--policy", "ours.yaml"]).success();
    p.write("report.yaml", "schema: 1\nname: h\nclaims:\n  - kind: heuristics\n");
    let run = p.prov(&["audit", "lockfiles/h.lock", "--policy", "report.yaml"]);
    assert!(run.exit(4).stdout().contains("not the claimed [\"de\", \"es\", \"fr\", \"it\"]"), "{}", run.describe());

    let claim = |forged: &[prov_audit::ClaimResult]| forged.iter().find(|c| c.kind == "heuristics").unwrap().clone();
    // A German document the rules removed, put back as one they did not apply to.
    let forged =
        audit_forged(p, ("lockfiles/h.lock", ours), "heuristics", &prov_audit::StageRescan, |rows, out, input| {
            let german =
                |r: &prov_dataset::LedgerRow| r.rule == "heuristics:too-short" && r.language.as_deref() == Some("de");
            keep_row(rows, out, input, german, ("heuristics:not-applied", None));
        });
    let c = claim(&forged);
    assert_eq!(c.outcome, Outcome::Fails, "{c:#?}");
    assert!(c.reasons.iter().any(|r| r.contains("says the rules were not applied")), "{c:#?}");
    for (rule, says) in
        [("heuristics:too-short", "fewer than 200"), ("heuristics:curly-bracket", "contains a curly bracket")]
    {
        let forged =
            audit_forged(p, ("lockfiles/h.lock", ours), "heuristics", &prov_audit::StageRescan, |rows, out, input| {
                keep_row(rows, out, input, |r| r.rule == rule, ("heuristics:kept", None));
            });
        let c = claim(&forged);
        assert_eq!(c.outcome, Outcome::Fails, "{c:#?}");
        assert!(c.reasons.iter().any(|r| r.contains(says)), "{rule}: {c:#?}");
    }
}
