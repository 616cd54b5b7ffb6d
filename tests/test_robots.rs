//! The `robots` stage end to end: every document gets a reason in the ledger, the counts are
//! in the stage's stats, and the stage replays bit for bit.

use crate::common::Project;

const RECIPE: &str = "\
schema: 1
name: robots
seed: 3
sources:
  docs:
    path: data/docs.jsonl
  snapshot:
    path: data/robots
    retrieved: \"2025-01-31\"
stages:
  shards:
    kind: shard
    inputs: {docs: docs}
    params: {shards: 2}
  optout:
    kind: robots
    inputs: {docs: shards, snapshot: snapshot}
";

fn project() -> Project {
    let p = Project::new();
    let docs = [
        r#"{"id":"a","text":"one two three","url":"https://open.example/x","language":"en"}"#,
        r#"{"id":"b","text":"vier fuenf","url":"https://closed.example/private/y","language":"de"}"#,
        r#"{"id":"c","text":"six","url":"https://closed.example/public","language":"en"}"#,
        r#"{"id":"d","text":"seven eight","url":"https://nobody.example/","language":"en"}"#,
        r#"{"id":"e","text":"nine","language":"en"}"#,
        r#"{"id":"f","text":"dix onze","url":"https://html.example/","language":"fr"}"#,
    ];
    p.write("recipes/data/docs.jsonl", &(docs.join("\n") + "\n"));
    p.write("recipes/data/robots/open.example", "User-agent: *\nAllow: /\n");
    p.write(
        "recipes/data/robots/closed.example",
        "# opt out\nUser-agent: GPTBot\nUser-agent: CCBot\nDisallow: /private\n",
    );
    p.write("recipes/data/robots/html.example/robots.txt", "<!DOCTYPE html><html><body>Not found</body></html>");
    p.write("recipes/robots.yaml", RECIPE);
    p
}

#[test]
fn every_document_has_a_reason_and_the_stage_replays() {
    let p = project();
    let lines = p.json(&["run", "recipes/robots.yaml"]);
    let stage = lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == "optout").unwrap();
    let shown = p.json(&["show", stage["data"]["manifest"].as_str().unwrap()]);
    let stats = &shown[0]["data"]["record"]["stats"];
    let by_rule = &stats["by_rule"];
    assert_eq!(by_rule["robots:allowed"]["documents"], 2, "{stats}");
    assert_eq!(by_rule["robots:disallowed"]["documents"], 1, "{stats}");
    assert_eq!(by_rule["robots:disallowed"]["words"], 2, "{stats}");
    assert_eq!(by_rule["robots:no-robots"]["documents"], 1, "{stats}");
    assert_eq!(by_rule["robots:no-url"]["documents"], 1, "{stats}");
    assert_eq!(by_rule["robots:unparseable"]["documents"], 1, "{stats}");
    assert_eq!(stats["total"]["documents"], 6, "nothing dropped silently: {stats}");
    assert_eq!(stats["removed_by_language"]["de"]["documents"], 1, "{stats}");

    let outputs = &stage["data"]["outputs"];
    let ledger = p.json(&["show", outputs["ledger"].as_str().unwrap()]);
    let record = &ledger[0]["data"]["record"];
    assert_eq!(record["kind"], "ledger");
    assert_eq!(record["rows"], 6);
    let kept = p.json(&["show", outputs["dataset"].as_str().unwrap()]);
    assert_eq!(kept[0]["data"]["record"]["rows"], 5);

    p.prov(&["replay", "lockfiles/robots.lock"]).success();
    p.prov(&["verify"]).success();
}

#[test]
fn site_mode_and_custom_agents_are_pinned_in_the_lockfile() {
    let p = project();
    p.write("recipes/robots.yaml", &format!("{RECIPE}    params:\n      mode: site\n      agents: [GPTBot]\n"));
    p.prov(&["lock", "recipes/robots.yaml"]).success();
    let lock = fs_err::read_to_string(p.path("lockfiles/robots.lock")).unwrap();
    assert!(lock.contains(r#""config":{"agents":["GPTBot"],"mode":"site"}"#), "{lock}");
    let lines = p.json(&["run", "lockfiles/robots.lock"]);
    let stage = lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == "optout").unwrap();
    let shown = p.json(&["show", stage["data"]["manifest"].as_str().unwrap()]);
    // closed.example only opts out of /private: in site mode its documents stay.
    let by_rule = &shown[0]["data"]["record"]["stats"]["by_rule"];
    assert!(by_rule.get("robots:site-disallowed").is_none(), "{by_rule}");
    assert_eq!(by_rule["robots:allowed"]["documents"], 3, "{by_rule}");
    // The default lock lists the 14 Apertus agents explicitly.
    p.write("recipes/robots.yaml", RECIPE);
    p.prov(&["lock", "recipes/robots.yaml"]).success();
    let lock = fs_err::read_to_string(p.path("lockfiles/robots.lock")).unwrap();
    assert!(lock.contains(r#""agents":["AI2Bot","Applebot-Extended","Bytespider","CCBot","CCBot/2.0""#), "{lock}");
}
