//! The `decontaminate` stage end to end: three UDHR articles held out as a benchmark, the
//! whole UDHR sample as training documents; exactly the three benchmark documents are
//! removed, counted per rule and per benchmark example, and the run replays bit for bit.

use crate::common::Project;

/// Lines (0-based) of `udhr-sample.jsonl` used as the benchmark: German article 1, English
/// article 4, French article 8.
const HELD_OUT: [usize; 3] = [1, 35, 70];

fn recipe(shards: u32) -> String {
    format!(
        "schema: 1\nname: decon\nseed: 1\nsources:\n  udhr:\n    path: data/quickstart/udhr-sample.jsonl\n  bench:\n    path: data/bench.jsonl\nstages:\n  shards:\n    kind: shard\n    inputs: {{docs: udhr}}\n    params: {{shards: {shards}}}\n\
         \x20 decon:\n    kind: decontaminate\n    inputs: {{docs: shards, benchmark: bench}}\n"
    )
}

fn project(shards: u32) -> (Project, Vec<String>) {
    let p = Project::with_recipes();
    let all = fs_err::read_to_string(p.path("recipes/data/quickstart/udhr-sample.jsonl")).unwrap();
    let lines: Vec<&str> = all.lines().collect();
    let bench: Vec<&str> = HELD_OUT.iter().map(|&i| lines[i]).collect();
    let ids = bench
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_str().unwrap().to_owned())
        .collect();
    p.write("recipes/data/bench.jsonl", &(bench.join("\n") + "\n"));
    p.write("recipes/decon.yaml", &recipe(shards));
    (p, ids)
}

fn stage<'v>(lines: &'v [serde_json::Value], name: &str) -> &'v serde_json::Value {
    lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == name).unwrap_or_else(|| panic!("{lines:?}"))
}

#[test]
fn held_out_articles_are_removed_counted_and_replayed() {
    let (p, ids) = project(3);
    let lines = p.json(&["run", "recipes/decon.yaml"]);
    let shown = p.json(&["show", stage(&lines, "decon")["data"]["manifest"].as_str().unwrap()]);
    let record = &shown[0]["data"]["record"];
    assert_eq!(
        record["config"],
        serde_json::json!({"ngram": 8, "min_overlap": 5, "max_coverage": 0.5}),
        "every default explicit: {record}"
    );
    let stats = &record["stats"];
    assert_eq!(stats["by_rule"]["decontaminate:contaminated"]["documents"], 3, "{stats}");
    assert_eq!(stats["by_rule"]["decontaminate:clean"]["documents"], 245, "{stats}");
    assert_eq!(stats["total"]["documents"], 248, "{stats}");
    assert_eq!(stats["benchmark_examples"], 3, "{stats}");
    assert_eq!(stats["benchmark_too_short"], 0, "{stats}");
    // Each held-out example removes exactly one document: itself (no translation is identical).
    let expected: serde_json::Map<String, serde_json::Value> = ids.iter().map(|id| (id.clone(), 1.into())).collect();
    assert_eq!(stats["removed_by_benchmark"], serde_json::Value::Object(expected), "{stats}");
    assert_eq!(stats["removed_by_language"]["en"]["documents"], 1, "{stats}");
    assert_eq!(stats["removed_by_language"]["fr"]["documents"], 1, "{stats}");
    assert_eq!(stats["removed_by_language"]["de-1996"]["documents"], 1, "{stats}");
    // The human-readable run prints the rules too.
    let text = p.prov(&["run", "recipes/decon.yaml"]);
    assert!(text.success().stdout().contains("decontaminate:contaminated"), "{}", text.describe());
    p.prov(&["replay", "lockfiles/decon.lock"]).success();
}

#[test]
fn threads_do_not_change_the_output() {
    let (one, _) = project(3);
    let (two, _) = project(3);
    let r1 = one.json(&["--threads", "1", "run", "recipes/decon.yaml"]);
    let r2 = two.json(&["--threads", "4", "run", "recipes/decon.yaml"]);
    assert_eq!(stage(&r1, "decon")["data"]["outputs"], stage(&r2, "decon")["data"]["outputs"]);
}

#[test]
fn a_benchmark_that_is_not_json_lines_is_refused() {
    let (p, _) = project(1);
    p.write("recipes/data/bench.txt", "not a benchmark\n");
    p.write("recipes/decon.yaml", &recipe(1).replace("data/bench.jsonl", "data/bench.txt"));
    let run = p.prov(&["run", "recipes/decon.yaml"]);
    assert_ne!(run.code(), 0, "{}", run.describe());
    assert!(run.stderr().contains("bench.txt"), "{}", run.describe());
}
