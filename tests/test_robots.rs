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
    assert!(lock.contains(r#""config":{"agents":["GPTBot"],"keys":"rfc9309","mode":"site"}"#), "{lock}");
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

/// A site that writes `User Agent:` meant its opt-out. Read by RFC 9309 (the default) that is
/// no group: the document is kept and the file is listed, with its lines, under the stage's
/// `misspelled_keys`. With `keys: google-typos` in the recipe (recorded in the config, so the
/// stage key changes) the document is removed.
#[test]
fn misspelled_keys_are_reported_and_read_when_the_recipe_asks() {
    let p = project();
    let mut docs = fs_err::read_to_string(p.path("recipes/data/docs.jsonl")).unwrap();
    docs.push_str(r#"{"id":"g","text":"twelve","url":"https://typo.example/page","language":"en"}"#);
    docs.push('\n');
    p.write("recipes/data/docs.jsonl", &docs);
    p.write("recipes/data/robots/typo.example", "User Agent: GPTBot\nDisalow: /\n");
    let record = |p: &Project| {
        let lines = p.json(&["run", "recipes/robots.yaml"]);
        let stage = lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == "optout").unwrap();
        let key = stage["data"]["key"].as_str().unwrap().to_owned();
        (p.json(&["show", stage["data"]["manifest"].as_str().unwrap()])[0]["data"]["record"].clone(), key)
    };
    let (rfc, rfc_key) = record(&p);
    assert_eq!(rfc["stats"]["misspelled_keys"], serde_json::json!({"typo.example": [1, 2]}), "{}", rfc["stats"]);
    assert_eq!(rfc["stats"]["by_rule"]["robots:allowed"]["documents"], 3, "{}", rfc["stats"]);
    let explained = p.prov(&[
        "explain",
        "robots",
        "--robots",
        "recipes/data/robots/typo.example",
        "--agent",
        "GPTBot",
        "--url",
        "/page",
    ]);
    explained.success();
    assert!(explained.stderr().contains("misspells a key on line(s) 1, 2"), "{}", explained.describe());
    assert!(explained.stdout().contains("allowed"), "{}", explained.describe());

    p.write("recipes/robots.yaml", &format!("{RECIPE}    params:\n      keys: google-typos\n"));
    let (google, google_key) = record(&p);
    assert_ne!(rfc_key, google_key);
    assert_eq!(google["config"]["keys"], "google-typos");
    assert_eq!(google["stats"]["by_rule"]["robots:disallowed"]["documents"], 2, "{}", google["stats"]);
    let explained = p.prov(&[
        "explain",
        "robots",
        "--robots",
        "recipes/data/robots/typo.example",
        "--agent",
        "GPTBot",
        "--url",
        "/page",
        "--keys",
        "google-typos",
    ]);
    assert!(explained.stdout().contains("disallowed"), "{}", explained.describe());
}

/// The misspellings `keys: google-typos` reads, decided as Protego 0.7.0 (`PyPI`, pinned in
/// lockfiles/requirements.txt), which accepts the same spellings, decides them.
#[test]
fn google_typos_decide_as_protego_does() {
    let Some(python) = crate::common::venv_python() else { return };
    let p = Project::new();
    let bodies = [
        "User Agent: GPTBot\nDisallow: /private\n",
        "useragent: *\ndisalow: /a\nallow: /a/b\n",
        "USER AGENT: CCBot\nDissallow: /\n\nUser-agent: *\nDisallaw: /x\n",
        "User-agent: GPTBot\nDiasllow: /p\ndissalow: /q\n",
    ];
    let mut batch = String::new();
    for (i, body) in bodies.iter().enumerate() {
        p.write(&format!("robots/{i}.txt"), body);
        for agent in ["GPTBot", "CCBot", "OtherBot"] {
            for url in ["/", "/private/x", "/a/c", "/a/b/c", "/x", "/p", "/q/r"] {
                batch.push_str(
                    &serde_json::json!({"robots": format!("robots/{i}.txt"), "agent": agent, "url": url}).to_string(),
                );
                batch.push('\n');
            }
        }
    }
    let ours = p.prov_with_stdin(&["explain", "robots", "--batch", "--keys", "google-typos"], &batch);
    ours.success();
    let script = "import json, sys\nfrom protego import Protego\n\
                  for line in sys.stdin:\n\
                  \x20   q = json.loads(line)\n\
                  \x20   rp = Protego.parse(open(q['robots']).read())\n\
                  \x20   print(json.dumps(rp.can_fetch('https://h.example' + q['url'], q['agent'])))\n";
    let mut child = std::process::Command::new(python)
        .arg("-c")
        .arg(script)
        .current_dir(&p.root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), batch.as_bytes()).unwrap();
    let theirs = child.wait_with_output().unwrap();
    assert!(theirs.status.success());
    let theirs: Vec<bool> = String::from_utf8_lossy(&theirs.stdout).lines().map(|l| l == "true").collect();
    let ours: Vec<bool> = ours
        .stdout()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["allowed"].as_bool().unwrap())
        .collect();
    assert_eq!(ours.len(), 84);
    assert_eq!(ours, theirs);
    assert!(ours.iter().filter(|a| !**a).count() >= 10, "the misspelled rules do disallow");
}
