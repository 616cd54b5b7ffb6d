//! The `license` stage end to end: documents keep or lose their place by their declared
//! license, each with its SPDX reading in the ledger, and the verdicts per distinct string
//! are in the stage's stats and, as verdict records, in its `verdicts` output.

use crate::common::Project;

#[test]
fn only_permissively_licensed_documents_are_kept() {
    let p = Project::new();
    let docs = [
        r#"{"id":"a","text":"one","license":"MIT/Apache-2.0"}"#,
        r#"{"id":"b","text":"two words","license":"CC BY-NC 4.0"}"#,
        r#"{"id":"c","text":"three","license":"GPL-2+"}"#,
        r#"{"id":"d","text":"four","license":"Apache License 2.0"}"#,
        r#"{"id":"e","text":"five","license":"Unspecified"}"#,
        r#"{"id":"f","text":"six"}"#,
        r#"{"id":"g","text":"seven","license":"MIT/Apache-2.0"}"#,
    ];
    p.write("recipes/data/docs.jsonl", &(docs.join("\n") + "\n"));
    p.write(
        "recipes/lic.yaml",
        "schema: 1\nname: lic\nseed: 1\nsources:\n  docs:\n    path: data/docs.jsonl\nstages:\n  shards:\n    kind: shard\n    inputs: {docs: docs}\n    params: {shards: 2}\n\
         \x20 permissive:\n    kind: license\n    inputs: {docs: shards}\n",
    );
    p.prov(&["lock", "recipes/lic.yaml"]).success();
    let lock = fs_err::read_to_string(p.path("lockfiles/lic.lock")).unwrap();
    assert!(lock.contains(r#""config":{"field":"license","missing":"deny","policy":"permissive"}"#), "{lock}");
    let lines = p.json(&["run", "lockfiles/lic.lock"]);
    let stage = lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == "permissive").unwrap();
    let shown = p.json(&["show", stage["data"]["manifest"].as_str().unwrap()]);
    let stats = &shown[0]["data"]["record"]["stats"];
    assert_eq!(stats["by_rule"]["license:allowed"]["documents"], 3, "{stats}");
    assert_eq!(stats["by_rule"]["license:denied"]["documents"], 3, "{stats}");
    assert_eq!(stats["by_rule"]["license:missing"]["documents"], 1, "{stats}");
    let verdicts = &stats["licenses"];
    assert_eq!(verdicts["MIT/Apache-2.0"]["spdx"], "MIT OR Apache-2.0", "{verdicts}");
    assert_eq!(verdicts["MIT/Apache-2.0"]["documents"], 2);
    assert_eq!(verdicts["GPL-2+"]["decision"], "removed");
    assert!(verdicts["Unspecified"]["unknown"].as_str().unwrap().contains("not a license"), "{verdicts}");
    let kept = p.json(&["show", stage["data"]["outputs"]["dataset"].as_str().unwrap()]);
    assert_eq!(kept[0]["data"]["record"]["rows"], 3);

    // One verdict record per distinct string, the files of the `verdicts` tree.
    let tree = p.json(&["show", stage["data"]["outputs"]["verdicts"].as_str().unwrap()]);
    let entries = tree[0]["data"]["record"]["entries"].as_array().unwrap().clone();
    let files: Vec<&str> = entries.iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert_eq!(
        files,
        [
            "Apache%20License%202.0.json",
            "CC%20BY-NC%204.0.json",
            "GPL-2+.json",
            "MIT%2FApache-2.0.json",
            "Unspecified.json"
        ]
    );
    let verdict = p.json(&["show", verdicts["CC BY-NC 4.0"]["verdict"].as_str().unwrap()]);
    let v = &verdict[0]["data"]["record"];
    assert_eq!([&v["kind"], &v["decision"], &v["reviewer"]], ["verdict", "deny", "policy"], "{v}");
    assert_eq!(v["subject"], shown[0]["data"]["record"]["inputs"]["docs"], "{v}");
    let rationale = v["rationale"].as_str().unwrap();
    assert!(rationale.starts_with("1 document declares `CC BY-NC 4.0`; normalised to `CC-BY-NC-4.0`"), "{v}");
    assert!(v.get("decided_at").is_none(), "{v}");
    p.prov(&["replay", "lockfiles/lic.lock"]).success();
}
