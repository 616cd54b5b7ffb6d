//! The `pii` stage end to end: markers in the output text, counts (never the PII) in the
//! ledger, exemptions by tag, and a bit-for-bit replay.

use crate::common::Project;

#[test]
fn pii_is_replaced_counted_and_replayed() {
    let p = Project::new();
    let docs = [
        r#"{"id":"a","text":"Write to jane.doe@example.org or ping 192.168.10.20.","language":"en"}"#,
        r#"{"id":"b","text":"IBAN DE89 3704 0044 0532 0130 00 for the transfer.","language":"de"}"#,
        r#"{"id":"c","text":"Nothing personal here.","language":"en"}"#,
        r#"{"id":"d","text":"fn main() { let ip = \"10.0.0.1\"; }","language":"en","tag":"code"}"#,
    ];
    p.write("recipes/data/docs.jsonl", &(docs.join("\n") + "\n"));
    p.write(
        "recipes/pii.yaml",
        "schema: 1\nname: pii\nseed: 1\nsources:\n  docs:\n    path: data/docs.jsonl\nstages:\n  shards:\n    kind: shard\n    inputs: {docs: docs}\n\
         \x20 redact:\n    kind: pii\n    inputs: {docs: shards}\n    params: {mode: apertus, exempt_tags: [code, math, code]}\n",
    );
    let lines = p.json(&["run", "recipes/pii.yaml"]);
    let stage = lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == "redact").unwrap();
    let shown = p.json(&["show", stage["data"]["manifest"].as_str().unwrap()]);
    let record = &shown[0]["data"]["record"];
    assert_eq!(record["config"]["exempt_tags"], serde_json::json!(["code", "math"]), "a set, sorted: {record}");
    let stats = &record["stats"];
    assert_eq!(stats["replaced"], serde_json::json!({"email": 1, "ip": 1, "iban": 1}), "{stats}");
    assert_eq!(stats["by_rule"]["pii:redacted"]["documents"], 2, "{stats}");
    assert_eq!(stats["by_rule"]["pii:none"]["documents"], 1, "{stats}");
    assert_eq!(stats["by_rule"]["pii:exempt"]["documents"], 1, "{stats}");

    // The output text carries the markers; the exempt document keeps its address.
    let dataset = stage["data"]["outputs"]["dataset"].as_str().unwrap();
    let Some(python) = crate::common::venv_python() else { return };
    let ds = p.json(&["show", dataset]);
    let shard =
        ds[0]["data"]["record"]["shards"][0]["digest"].as_str().unwrap().trim_start_matches("blake3:").to_owned();
    let path = p.path(&format!(".prov/objects/{}/{}", &shard[..2], &shard[2..]));
    let out = std::process::Command::new(python)
        .args(["-c", "import sys, pyarrow.parquet as pq; print('\\n'.join(pq.read_table(sys.argv[1]).column('text').to_pylist()))"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Write to <email-pii> or ping <ip-pii>."), "{text}");
    assert!(text.contains("IBAN <iban-pii> for the transfer."), "{text}");
    assert!(text.contains("\"10.0.0.1\""), "exempt by tag: {text}");
    assert!(!text.contains("jane.doe"), "{text}");
    p.prov(&["replay", "lockfiles/pii.lock"]).success();
}

#[test]
fn keep_private_ips_is_refused_in_apertus_mode() {
    let p = Project::new();
    p.write("recipes/data/docs.jsonl", "{\"id\":\"a\",\"text\":\"x\"}\n");
    p.write(
        "recipes/bad.yaml",
        "schema: 1\nname: bad\nseed: 1\nsources:\n  docs:\n    path: data/docs.jsonl\nstages:\n  shards:\n    kind: shard\n    inputs: {docs: docs}\n\
         \x20 redact:\n    kind: pii\n    inputs: {docs: shards}\n    params:\n      keep_private_ips: true\n",
    );
    let r = p.prov(&["lock", "recipes/bad.yaml"]);
    r.exit(1);
    assert!(
        r.stderr().contains("stages.redact.params.keep_private_ips: `keep_private_ips` applies to mode `strict` only"),
        "{}",
        r.describe()
    );
}
