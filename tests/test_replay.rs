//! `prov replay`: divergence is exit 3 and names the first divergent stage; envelope-class
//! stages refuse equality across envelopes; `--from` and `--until` bound the replay.

use crate::common::Project;

const NONDETERMINISTIC: &str = "\
schema: 1
name: flaky
seed: 1
allow_commands: true
sources:
  udhr:
    path: data/quickstart/udhr-sample.jsonl
stages:
  stable:
    kind: external
    inputs: {docs: udhr}
    params:
      command: [sh, -c, \"wc -l < inputs/docs > lines.txt\"]
      outputs: {lines: lines.txt}
  clock:
    kind: external
    inputs: {lines: stable}
    params:
      command: [sh, -c, \"cat /proc/sys/kernel/random/uuid > id.txt\"]
      outputs: {id: id.txt}
  after:
    kind: external
    inputs: {id: clock}
    params:
      command: [sh, -c, \"cp inputs/id copy.txt\"]
      outputs: {copy: copy.txt}
";

#[test]
fn a_nondeterministic_stage_is_named_as_the_first_divergence() {
    let p = Project::with_recipes();
    p.write("recipes/flaky.yaml", NONDETERMINISTIC);
    p.prov(&["run", "recipes/flaky.yaml"]).success();
    let r = p.prov(&["replay", "lockfiles/flaky.lock"]);
    r.exit(3);
    assert!(r.stderr().contains("replay diverged at stage `clock`, output `id`"), "{}", r.describe());
    assert!(r.stderr().contains("recorded: blake3:"), "{}", r.describe());
    let json = p.json(&["replay", "lockfiles/flaky.lock"]);
    let div = json.iter().find(|l| l["type"] == "divergence").unwrap();
    assert_eq!(div["data"]["stage"], "clock");
    // Stages after the first divergence are not claimed either way.
    assert!(!json.iter().any(|l| l["type"] == "stage" && l["data"]["name"] == "after"), "{json:?}");
    // Replaying only the stable stage is identical.
    p.prov(&["replay", "lockfiles/flaky.lock", "--until", "stable"]).success();
    // From the stage after the flaky one: inputs come from the recording, so it agrees.
    p.prov(&["replay", "lockfiles/flaky.lock", "--from", "after"]).success();
    let bad = p.prov(&["replay", "lockfiles/flaky.lock", "--from", "nope"]);
    bad.exit(1);
    assert!(bad.stderr().contains("no stage `nope`"), "{}", bad.describe());
}

#[test]
fn envelope_stages_refuse_equality_across_thread_counts() {
    let p = Project::with_recipes();
    p.write(
        "recipes/env.yaml",
        "schema: 1\nname: env\nseed: 1\nallow_commands: true\nsources:\n  udhr:\n    path: data/quickstart/udhr-sample.jsonl\n\
         stages:\n  count:\n    kind: external\n    inputs: {docs: udhr}\n    params:\n      command: [sh, -c, \"wc -l < inputs/docs > n.txt\"]\n      outputs: {n: n.txt}\n      determinism: envelope\n",
    );
    p.prov(&["--threads", "1", "run", "recipes/env.yaml"]).success();
    p.prov(&["--threads", "1", "replay", "lockfiles/env.lock"]).success();
    let r = p.prov(&["--threads", "2", "replay", "lockfiles/env.lock"]);
    r.exit(3);
    assert!(r.stderr().contains("stage `count` is of class `envelope`"), "{}", r.describe());
    assert!(r.stderr().contains("threads: recorded `1`, now `2`"), "{}", r.describe());
    // The same difference is a cache miss for `run`: the envelope is part of the key.
    let lines = p.json(&["--threads", "2", "run", "lockfiles/env.lock"]);
    let count = lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == "count").unwrap();
    assert_eq!(count["data"]["status"], "executed");
}

#[test]
fn replay_without_a_recording_says_what_to_do() {
    let p = Project::with_recipes();
    p.prov(&["lock", "recipes/quickstart.yaml"]).success();
    let r = p.prov(&["replay", "lockfiles/quickstart.lock"]);
    r.exit(1);
    assert!(r.stderr().contains("has no completed recording"), "{}", r.describe());
    assert!(r.stderr().contains("hint: run it with `prov run` first"), "{}", r.describe());
}
