//! kill -9 at random points of `prov run`: the store still verifies after every kill, and the
//! resumed run ends with exactly the hashes of an uninterrupted run.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::Project;

const RECIPE: &str = "\
schema: 1
name: big
seed: 7
allow_commands: true
sources:
  docs:
    path: data/big.jsonl
stages:
  shards:
    kind: shard
    inputs: {docs: docs}
    params: {shards: 8}
  half:
    kind: sample
    inputs: {docs: shards}
    params: {fraction: 0.5}
  top:
    kind: sample
    inputs: {docs: half}
    params: {rows: 5000}
  sums:
    kind: external
    inputs: {sample: top}
    params:
      command: [sh, -c, \"cd inputs/sample && sha256sum shard-*.parquet > ../../SUMS\"]
      outputs: {sums: SUMS}
";

/// A project with ~40k documents (the quickstart's UDHR articles, repeated with new ids).
fn big_project() -> Project {
    let p = Project::with_recipes();
    let base = fs_err::read_to_string(p.path("recipes/data/quickstart/udhr-sample.jsonl")).unwrap();
    let mut out = String::new();
    for copy in 0..160 {
        for line in base.lines() {
            let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
            let id = format!("{}-{copy:03}", v["id"].as_str().unwrap());
            v["id"] = serde_json::Value::String(id);
            out.push_str(&v.to_string());
            out.push('\n');
        }
    }
    p.write("recipes/data/big.jsonl", &out);
    p.write("recipes/big.yaml", RECIPE);
    p.prov(&["lock", "recipes/big.yaml"]).success();
    p
}

fn run_manifest(p: &Project) -> String {
    let lines = p.json(&["run", "lockfiles/big.lock"]);
    let run = lines.iter().find(|l| l["type"] == "run").expect("run summary");
    run["data"]["run_manifest"].as_str().unwrap().to_owned()
}

#[test]
fn killed_runs_leave_a_valid_store_and_resume_to_identical_hashes() {
    let reference = big_project();
    let start = Instant::now();
    let expected = run_manifest(&reference);
    let full = start.elapsed();

    let p = big_project();
    // A fixed-seed generator, so a failure can be reproduced.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let kills = 16;
    for i in 0..kills {
        let delay = Duration::from_micros(next() % (full.as_micros() as u64 + 1));
        let mut child =
            p.command(&["run", "lockfiles/big.lock"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        std::thread::sleep(delay);
        // SIGKILL: no destructor, no handler runs.
        let _ = child.kill();
        let _ = child.wait();
        let v = p.prov(&["verify"]);
        assert_eq!(v.code(), 0, "kill {i} after {delay:?} left a store that does not verify:\n{}", v.describe());
        if i % 4 == 3 {
            // Drop the partial progress so that later kills land in early stages again.
            p.prov(&["gc"]).success();
        }
    }
    assert_eq!(run_manifest(&p), expected, "the resumed run ends with the uninterrupted run's hashes");
    p.prov(&["verify"]).success();
    p.prov(&["replay", "lockfiles/big.lock"]).success();
}
