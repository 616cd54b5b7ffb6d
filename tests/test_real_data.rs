//! Real data from ../shared/data (found through `PROV_SHARED_DATA)`: 9,099 Debian documents,
//! gzipped JSON Lines, sharded, sampled and replayed.

use crate::common::{Project, shared_data};

#[test]
fn the_pii_bench_corpus_shards_and_replays_bit_for_bit() {
    let Some(corpus) = shared_data("pii/bench-corpus.jsonl.gz") else {
        return;
    };
    let p = Project::new();
    fs_err::create_dir_all(p.path("recipes/data")).unwrap();
    fs_err::copy(&corpus, p.path("recipes/data/bench-corpus.jsonl.gz")).unwrap();
    p.write(
        "recipes/debian.yaml",
        "schema: 1\nname: debian\nseed: 11\nsources:\n  corpus:\n    path: data/bench-corpus.jsonl.gz\n    license: GPL-2.0-or-later\n\
         stages:\n  shards:\n    kind: shard\n    inputs: {docs: corpus}\n    params: {shards: 6}\n  sample:\n    kind: sample\n    inputs: {docs: shards}\n    params: {rows: 1000}\n\
         \x20 pii:\n    kind: pii\n    inputs: {docs: shards}\n    params: {mode: apertus}\n",
    );
    let lines = p.json(&["run", "recipes/debian.yaml"]);
    let stage = |name: &str| lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == name).unwrap().clone();
    assert_eq!(stage("shards")["data"]["status"], "executed");
    let shown = p.json(&["show", stage("shards")["data"]["manifest"].as_str().unwrap()]);
    let record = &shown[0]["data"]["record"];
    assert_eq!(record["stats"]["documents"], 9099, "{record}");
    assert_eq!(record["stats"]["shards"], 6);
    let sample = p.json(&["show", stage("sample")["data"]["manifest"].as_str().unwrap()]);
    assert_eq!(sample[0]["data"]["record"]["stats"]["documents_out"], 1000);
    // The PII stage on the whole corpus: the span count the Python side-by-side test agrees on.
    let pii = p.json(&["show", stage("pii")["data"]["manifest"].as_str().unwrap()]);
    let pii_stats = &pii[0]["data"]["record"]["stats"];
    let replaced = &pii_stats["replaced"];
    let total =
        replaced["email"].as_u64().unwrap() + replaced["ip"].as_u64().unwrap() + replaced["iban"].as_u64().unwrap();
    assert_eq!(total, 50_381, "{pii_stats}");
    let modified = pii_stats["by_rule"]["pii:redacted"]["documents"].as_u64().unwrap();
    let untouched = pii_stats["by_rule"]["pii:none"]["documents"].as_u64().unwrap();
    assert_eq!(modified + untouched, 9099, "{pii_stats}");
    p.prov(&["replay", "lockfiles/debian.lock"]).success();
    p.prov(&["--threads", "1", "replay", "lockfiles/debian.lock"]).success();
}
