//! The quickstart end to end: init, lock, run, cached re-run, replay, lockfile identity.

use crate::common::{Project, flip_byte};

fn stage_statuses(lines: &[serde_json::Value]) -> Vec<(String, String)> {
    lines
        .iter()
        .filter(|l| l["type"] == "stage")
        .map(|l| (l["data"]["name"].as_str().unwrap().to_owned(), l["data"]["status"].as_str().unwrap().to_owned()))
        .collect()
}

#[test]
fn run_then_rerun_is_all_cached_and_replay_is_identical() {
    let p = Project::with_recipes();
    let first = p.json(&["run", "recipes/quickstart.yaml"]);
    let statuses = stage_statuses(&first);
    assert_eq!(
        statuses.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["udhr", "shards", "half", "checksums"],
        "sources first, then stages in plan order"
    );
    assert!(statuses.iter().all(|(_, s)| s == "executed"), "{statuses:?}");
    let run = first.iter().find(|l| l["type"] == "run").unwrap();
    let run_id = run["data"]["run_id"].as_str().unwrap().to_owned();

    // The run id is the BLAKE3 of the lockfile bytes: b3sum alone can check it.
    let lock_bytes = fs_err::read(p.path("lockfiles/quickstart.lock")).unwrap();
    assert_eq!(run_id, prov_store::Digest::of(&lock_bytes).to_string());

    let second = p.json(&["run", "lockfiles/quickstart.lock"]);
    assert!(stage_statuses(&second).iter().all(|(_, s)| s == "cached"), "{second:?}");
    let run2 = second.iter().find(|l| l["type"] == "run").unwrap();
    assert_eq!(run2["data"]["run_manifest"], run["data"]["run_manifest"], "same lockfile, same run manifest");
    assert_eq!(run2["data"]["executed"], 0);

    let replay = p.prov(&["replay", &run_id]);
    replay.success();
    assert!(replay.stdout().contains("replay identical: 4 stages re-executed"), "{}", replay.describe());
    // By lockfile path and by a short prefix too.
    p.prov(&["replay", "lockfiles/quickstart.lock"]).success();
    p.prov(&["replay", &run_id["blake3:".len().."blake3:".len() + 10]]).success();
}

#[test]
fn stage_manifests_are_byte_identical_across_stores() {
    // Two independent projects running the same lockfile produce the same run manifest: every
    // stage record is a pure function of its inputs in one envelope.
    let a = Project::with_recipes();
    let b = Project::with_recipes();
    let ra = a.json(&["run", "recipes/quickstart.yaml"]);
    let rb = b.json(&["--threads", "1", "run", "recipes/quickstart.yaml"]);
    let manifests = |r: &[serde_json::Value]| -> Vec<String> {
        r.iter().filter(|l| l["type"] == "stage").map(|l| l["data"]["outputs"].to_string()).collect()
    };
    assert_eq!(manifests(&ra), manifests(&rb), "portable stages give the same outputs with 1 and 2 threads");
}

#[test]
fn editing_the_lockfile_changes_the_run_id() {
    let p = Project::with_recipes();
    p.prov(&["run", "recipes/quickstart.yaml"]).success();
    let path = p.path("lockfiles/quickstart.lock");
    let text = fs_err::read_to_string(&path).unwrap();
    let before = prov_store::Digest::of(text.as_bytes());
    let edited = text.replace("\"fraction\":0.5", "\"fraction\":0.25");
    assert_ne!(edited, text);
    fs_err::write(&path, &edited).unwrap();
    // Edited by hand, the lockfile's commands read other data than the ones adopted when the
    // recipe was locked: refused unless the user says so.
    p.prov(&["run", "lockfiles/quickstart.lock"]).exit(1);
    let lines = p.json(&["run", "lockfiles/quickstart.lock", "--allow-commands"]);
    let run = lines.iter().find(|l| l["type"] == "run").unwrap();
    let after = run["data"]["run_id"].as_str().unwrap();
    assert_ne!(after, before.to_string());
    assert_eq!(after, prov_store::Digest::of(edited.as_bytes()).to_string());
    // Only the edited stage and what follows it ran again.
    let executed: Vec<String> = lines
        .iter()
        .filter(|l| l["type"] == "stage" && l["data"]["status"] == "executed")
        .map(|l| l["data"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(executed, ["half", "checksums"]);
}

#[test]
fn a_non_canonical_lockfile_is_refused_with_a_hint() {
    let p = Project::with_recipes();
    p.prov(&["lock", "recipes/quickstart.yaml"]).success();
    let path = p.path("lockfiles/quickstart.lock");
    let text = fs_err::read_to_string(&path).unwrap();
    fs_err::write(&path, text.replacen(',', ", ", 1)).unwrap();
    let r = p.prov(&["run", "lockfiles/quickstart.lock"]);
    r.exit(1);
    assert!(r.stderr().contains("not canonical JSON"), "{}", r.describe());
    assert!(r.stderr().contains("hint: lockfiles are canonical JSON written by `prov lock`"), "{}", r.describe());
}

#[test]
fn a_changed_source_is_an_integrity_failure_until_relocked() {
    let p = Project::with_recipes();
    p.prov(&["lock", "recipes/quickstart.yaml"]).success();
    let data = p.path("recipes/data/quickstart/udhr-sample.jsonl");
    flip_byte(&data, 100);
    let r = p.prov(&["run", "lockfiles/quickstart.lock"]);
    r.exit(2);
    assert!(r.stderr().contains("changed since it was locked"), "{}", r.describe());
    // Re-locking pins the new bytes.
    p.prov(&["run", "recipes/quickstart.yaml"]).success();
}

#[test]
fn the_shards_are_readable_by_pyarrow() {
    let Some(python) = crate::common::venv_python() else {
        return;
    };
    let p = Project::with_recipes();
    p.prov(&["run", "recipes/quickstart.yaml"]).success();
    let shards: Vec<String> = p
        .object_files()
        .into_iter()
        .filter(|f| fs_err::read(f).unwrap().starts_with(b"PAR1"))
        .map(|f| f.display().to_string())
        .collect();
    assert!(shards.len() >= 8, "4 shards and 4 sampled shards: {shards:?}");
    let script = "import sys, pyarrow.parquet as pq\n\
                  rows = 0\n\
                  for f in sys.argv[1:]:\n\
                  \x20   t = pq.read_table(f)\n\
                  \x20   assert t.column_names == ['id','text','url','date','language','metadata'], t.column_names\n\
                  \x20   rows += t.num_rows\n\
                  print(rows)\n";
    let out = std::process::Command::new(python).arg("-c").arg(script).args(&shards).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(rows > 248, "all 248 documents plus the sample: {rows}");
}

#[test]
fn commit_writes_lockfile_and_manifests_into_git() {
    let p = Project::with_recipes();
    let git = |args: &[&str]| p.git(args);
    p.git_init("Test Reviewer", "reviewer@example.org");
    // Something the user staged is not swept into prov's commit.
    p.write("notes.txt", "work in progress");
    git(&["add", "notes.txt"]);
    let r = p.prov(&["run", "recipes/quickstart.yaml", "--commit"]);
    r.success();
    assert!(!git(&["show", "--name-only", "--format=", "HEAD"]).contains("notes.txt"));
    assert!(git(&["diff", "--cached", "--name-only"]).contains("notes.txt"), "notes.txt stays staged");
    let log = git(&["log", "--format=%s%n%b"]);
    assert!(log.starts_with("prov run quickstart: run "), "{log}");
    let files = git(&["ls-files"]);
    assert!(files.contains("lockfiles/quickstart.lock"), "{files}");
    let manifests: Vec<&str> = files
        .lines()
        .filter(|f| {
            f.starts_with("manifests/quickstart/") && std::path::Path::new(f).extension().is_some_and(|e| e == "json")
        })
        .collect();
    assert!(manifests.len() >= 8, "{files}");
    for m in manifests {
        // Each committed manifest is named by the BLAKE3 of its bytes.
        let bytes = fs_err::read(p.path(m)).unwrap();
        let name = m.rsplit('/').next().unwrap().trim_end_matches(".json");
        assert_eq!(prov_store::Digest::of(&bytes).to_hex(), name);
    }
}

#[test]
fn the_committed_reference_run_is_reproduced() {
    // manifests/quickstart/ holds the reference run committed with `prov run --commit`. Stage
    // records carry the envelope of the machine that ran them, so they are compared by their
    // outputs; the lockfile and every output must come out byte for byte the same here.
    let repo = crate::common::repo_root();
    let p = Project::with_recipes();
    let lines = p.json(&["run", "recipes/quickstart.yaml"]);
    let committed_lock = fs_err::read(repo.join("lockfiles/quickstart.lock")).unwrap();
    assert_eq!(fs_err::read(p.path("lockfiles/quickstart.lock")).unwrap(), committed_lock);
    let mut committed = std::collections::BTreeMap::new();
    for entry in fs_err::read_dir(repo.join("manifests/quickstart")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let record: serde_json::Value = serde_json::from_slice(&fs_err::read(&path).unwrap()).unwrap();
            if record["kind"] == "stage" {
                committed.insert(record["name"].as_str().unwrap().to_owned(), record["outputs"].clone());
            }
        }
    }
    let stages: Vec<&serde_json::Value> = lines.iter().filter(|l| l["type"] == "stage").collect();
    assert_eq!(committed.len(), stages.len());
    for s in stages {
        let name = s["data"]["name"].as_str().unwrap();
        let committed_outputs: std::collections::BTreeMap<String, String> = committed[name]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v["digest"].as_str().unwrap().to_owned()))
            .collect();
        let fresh: std::collections::BTreeMap<String, String> = s["data"]["outputs"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
            .collect();
        assert_eq!(fresh, committed_outputs, "stage `{name}`: bump its version if its bytes changed on purpose");
    }
}
