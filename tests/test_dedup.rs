//! The `dedup` stage end to end: exact and near duplicates removed keep-first across shards,
//! counted per rule, replayed bit for bit, and a kept set that depends neither on the thread
//! count nor on the number of shards.

use crate::common::Project;

const PARAGRAPH: &str = "The committee met on Tuesday to review the annual budget of the regional library network. \
    Members discussed the cost of new shelving, the digitisation of rare manuscripts, longer opening hours during \
    the examination period and a proposal to share catalogues with the university. After a long debate the chair \
    asked for a written report before the next meeting in the spring.";

/// Eight documents: `a` unique, `b` unique, `c` an exact duplicate of `a` (case and spacing
/// differ), `e` unique, then (in the second of two shards) `d` a near duplicate of `a` (one
/// word changed), `f` an exact duplicate of `b`, `g` and `h` unique.
fn docs() -> String {
    let doc = |id: &str, text: &str| serde_json::json!({"id": id, "text": text, "language": "en"}).to_string();
    let lines = [
        doc("a", PARAGRAPH),
        doc("b", "Rain is expected over the northern hills tonight, with strong winds along the coast."),
        doc("c", &PARAGRAPH.to_uppercase().replace(". ", ".\n\n  ")),
        doc("e", "A recipe for bread: flour, water, salt and yeast, kneaded and left to rise overnight."),
        doc("d", &PARAGRAPH.replace("Tuesday", "Wednesday")),
        doc("f", "rain IS expected over the northern hills tonight,   with strong winds along the coast."),
        doc("g", "The train to the airport leaves every twenty minutes from the second platform."),
        doc("h", "Chess players study openings, middle games and endings, and review their lost games."),
    ];
    lines.join("\n") + "\n"
}

fn recipe(shards: u32) -> String {
    format!(
        "schema: 1\nname: dedup\nseed: 1\nsources:\n  docs:\n    path: data/docs.jsonl\nstages:\n  shards:\n    kind: shard\n    inputs: {{docs: docs}}\n    params: {{shards: {shards}}}\n\
         \x20 dedup:\n    kind: dedup\n    inputs: {{docs: shards}}\n\
         \x20 merged:\n    kind: shard\n    inputs: {{docs: dedup.dataset}}\n    params: {{shards: 1}}\n"
    )
}

fn project(shards: u32) -> Project {
    let p = Project::new();
    p.write("recipes/data/docs.jsonl", &docs());
    p.write("recipes/dedup.yaml", &recipe(shards));
    p
}

fn stage<'v>(lines: &'v [serde_json::Value], name: &str) -> &'v serde_json::Value {
    lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == name).unwrap_or_else(|| panic!("{lines:?}"))
}

fn output(lines: &[serde_json::Value], name: &str) -> String {
    stage(lines, name)["data"]["outputs"]["dataset"].as_str().unwrap().to_owned()
}

#[test]
fn duplicates_are_removed_counted_and_replayed() {
    let p = project(2);
    let lines = p.json(&["run", "recipes/dedup.yaml"]);
    let shown = p.json(&["show", stage(&lines, "dedup")["data"]["manifest"].as_str().unwrap()]);
    let record = &shown[0]["data"]["record"];
    assert_eq!(record["config"]["permutations"], 112, "every default explicit: {record}");
    assert_eq!(record["config"]["verify_jaccard"], 0.8, "{record}");
    let stats = &record["stats"];
    assert_eq!(stats["by_rule"]["dedup:unique"]["documents"], 5, "{stats}");
    assert_eq!(stats["by_rule"]["dedup:exact"]["documents"], 2, "{stats}");
    assert_eq!(stats["by_rule"]["dedup:near"]["documents"], 1, "{stats}");
    assert_eq!(stats["removed_by_language"]["en"]["documents"], 3, "{stats}");
    assert_eq!(stats["total"]["documents"], 8, "{stats}");
    // The table is printed at the end of a human-readable run too.
    let text = p.prov(&["run", "recipes/dedup.yaml"]);
    assert!(text.success().stdout().contains("dedup:near"), "{}", text.describe());
    p.prov(&["replay", "lockfiles/dedup.lock"]).success();
}

#[test]
fn threads_and_shards_do_not_change_the_kept_set() {
    let one = project(2);
    let two = project(2);
    let three = project(3);
    let r1 = one.json(&["--threads", "1", "run", "recipes/dedup.yaml"]);
    let r2 = two.json(&["--threads", "2", "run", "recipes/dedup.yaml"]);
    let r3 = three.json(&["--threads", "2", "run", "recipes/dedup.yaml"]);
    assert_eq!(output(&r1, "dedup"), output(&r2, "dedup"), "same bytes with 1 and 2 threads");
    assert_eq!(
        stage(&r1, "dedup")["data"]["outputs"]["ledger"],
        stage(&r2, "dedup")["data"]["outputs"]["ledger"],
        "same ledger with 1 and 2 threads"
    );
    // Two and three input shards: once merged into one shard, the same documents in the same order.
    assert_eq!(output(&r1, "merged"), output(&r3, "merged"), "same kept set with 2 and 3 shards");
}
