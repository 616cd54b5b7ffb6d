//! `prov replay`: divergence is exit 3 and names the first divergent stage; envelope-class
//! stages refuse equality across envelopes; `--from` and `--until` bound the replay.

use crate::common::{Project, recommit, repo_root, rewrite_run_stages};

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

/// A copy of the committed quickstart whose `half` stage claims another dataset: the stage
/// record rewritten and renamed to its new digest, the run record and its root recomputed,
/// `RUN` updated. Every file hashes to its name; only the claim is false.
fn forged_quickstart(p: &Project) -> prov_store::Digest {
    let forged_output = prov_store::Digest::of(b"a dataset the quickstart never made");
    recommit(&repo_root().join("manifests/quickstart"), &p.path("forged"), |s| {
        if s.name.as_str() == "half" {
            s.outputs.get_mut("dataset").unwrap().digest = forged_output;
        }
    });
    forged_output
}

/// Adopts the quickstart's commands in `p`'s store by locking its recipe, which writes the
/// committed lockfile byte for byte: the replays below use the committed one.
fn committed_quickstart_lock(p: &Project) {
    p.prov(&["lock", "recipes/quickstart.yaml"]).success();
    let committed = fs_err::read(repo_root().join("lockfiles/quickstart.lock")).unwrap();
    assert_eq!(fs_err::read(p.path("lockfiles/quickstart.lock")).unwrap(), committed);
}

/// `--against DIR` compares with DIR's run and nothing else: a forged DIR is a divergence
/// (exit 3) naming the stage, the output and both digests, whether or not the store already
/// holds an honest run of the lockfile (which used to be compared instead, and matched).
#[test]
fn against_a_forged_manifest_folder_is_a_divergence_whatever_the_store_holds() {
    for store_holds_a_run in [true, false] {
        let p = Project::with_recipes();
        committed_quickstart_lock(&p);
        if store_holds_a_run {
            p.prov(&["run", "lockfiles/quickstart.lock"]).success();
        }
        let forged = forged_quickstart(&p);
        let r = p.prov(&["replay", "lockfiles/quickstart.lock", "--against", "forged"]);
        r.exit(3);
        let err = r.stderr();
        assert!(err.contains("replay diverged at stage `half`, output `dataset`"), "{}", r.describe());
        assert!(err.contains(&format!("recorded: {forged}")), "{}", r.describe());
        let lines = p.json(&["replay", "lockfiles/quickstart.lock", "--against", "forged"]);
        let div = &lines.iter().find(|l| l["type"] == "divergence").expect("a divergence")["data"];
        assert_eq!(
            (div["stage"].as_str(), div["expected"].as_str()),
            (Some("half"), Some(forged.to_string().as_str()))
        );
        let committed = committed_output("half", "dataset");
        assert_eq!(div["actual"], committed, "the replay made what the quickstart makes");
        // The committed folder, beside it, replays identical.
        let r = p.prov(&[
            "replay",
            "lockfiles/quickstart.lock",
            "--against",
            &repo_root().join("manifests/quickstart").display().to_string(),
        ]);
        r.success();
    }
}

/// The digest of an output of the committed quickstart run.
fn committed_output(stage: &str, output: &str) -> String {
    for entry in fs_err::read_dir(repo_root().join("manifests/quickstart")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let record: serde_json::Value = serde_json::from_slice(&fs_err::read(&path).unwrap()).unwrap();
            if record["kind"] == "stage" && record["name"] == stage {
                return record["outputs"][output]["digest"].as_str().unwrap().to_owned();
            }
        }
    }
    panic!("no stage {stage}")
}

/// With `--against` and `--from`, the stages before `--from` reuse the outputs that the
/// handed-over recording names, so an adopted command would read bytes nobody here made: a
/// third adversarial review ran a payload that way, planted as `half`'s output in a
/// re-hashed folder. Such a replay needs `--allow-commands`; without `--from`, every stage
/// re-executes and a forged output is only a divergence.
#[test]
fn against_with_from_runs_commands_only_when_the_user_says_so() {
    let p = Project::with_recipes();
    committed_quickstart_lock(&p);
    let committed = repo_root().join("manifests/quickstart").display().to_string();
    let r = p.prov(&["replay", "lockfiles/quickstart.lock", "--against", &committed, "--from", "checksums"]);
    r.exit(1);
    assert!(r.stderr().contains("reuse the outputs that the handed-over recording names"), "{}", r.describe());
    assert!(r.stderr().contains("hint: replay without `--from`, or pass `--allow-commands`"), "{}", r.describe());
    let r = p.prov(&[
        "replay",
        "lockfiles/quickstart.lock",
        "--against",
        &committed,
        "--from",
        "checksums",
        "--allow-commands",
    ]);
    assert!(!r.stderr().contains("handed-over recording"), "{}", r.describe());
    p.prov(&["replay", "lockfiles/quickstart.lock", "--against", &committed]).success();
}

/// A handed-over folder holds, beside the committed run, a second run record of the same
/// lockfile whose `half` stage claims other statistics (every file hashes to its name, `RUN`
/// still names the honest run). The replay against the folder is identical, and it used to
/// leave the forged record in the store, where `prov status`, `prov show`, `prov card` and
/// `prov audit` took it as the lockfile's run (an adversarial review found it). Only what
/// `RUN` reaches is imported now.
#[test]
fn a_second_run_record_in_a_handed_over_folder_is_not_taken_as_the_run() {
    let p = Project::with_recipes();
    committed_quickstart_lock(&p);
    let committed = repo_root().join("manifests/quickstart");
    let planted = recommit(&committed, &p.path("planted"), |s| {
        if s.name.as_str() == "half" {
            s.stats.insert("documents_out".into(), serde_json::json!(248));
        }
    });
    fs_err::create_dir_all(p.path("handed")).unwrap();
    for dir in [committed.clone(), p.path("planted")] {
        for entry in fs_err::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                fs_err::copy(&path, p.path("handed").join(path.file_name().unwrap())).unwrap();
            }
        }
    }
    fs_err::copy(committed.join("RUN"), p.path("handed/RUN")).unwrap();
    let honest = fs_err::read_to_string(committed.join("RUN")).unwrap().trim().to_owned();
    assert_ne!(honest, planted.to_string());

    p.prov(&["replay", "lockfiles/quickstart.lock", "--against", "handed"]).success();
    let shown = p.prov(&["show", "lockfiles/quickstart.lock"]);
    shown.success();
    assert!(shown.stdout().contains(&honest) && !shown.stdout().contains(&planted.to_string()), "{}", shown.describe());
    let status = p.prov(&["status"]);
    assert!(status.stdout().contains(&honest["blake3:".len()..][..12]), "{}", status.describe());
    // The planted record never entered the store.
    p.prov(&["show", &planted.to_string()]).exit(1);
}

/// Whether `prov status` says `lockfile` has a recorded run, and which.
fn status_of(p: &Project, lockfile: &str) -> (bool, Option<String>) {
    let lines = p.json(&["status"]);
    let st = lines.iter().find(|l| l["type"] == "lockfile" && l["data"]["path"] == lockfile).expect("listed");
    (st["data"]["recorded"] == true, st["data"]["run_manifest"].as_str().map(str::to_owned))
}

/// The run record, stage records and an identical replay record of a run elsewhere, shipped
/// as the files of a data source (a review of the day's fixes did this): they enter the store
/// as blobs, whose bytes are those records, and are no run or replay of this store. The
/// lockfile they belong to is not "recorded", and its replay claim does not hold.
#[test]
fn records_shipped_as_data_are_not_evidence() {
    let author = Project::with_recipes();
    committed_quickstart_lock(&author);
    let run = author.json(&["run", "lockfiles/quickstart.lock"]);
    let replay = author.json(&["replay", "lockfiles/quickstart.lock"]);
    let mut shipped: Vec<String> = run
        .iter()
        .filter_map(|l| match l["type"].as_str() {
            Some("stage") => l["data"]["manifest"].as_str().map(str::to_owned),
            Some("run") => l["data"]["run_manifest"].as_str().map(str::to_owned),
            _ => None,
        })
        .collect();
    let replay_record = replay.iter().find_map(|l| l["data"]["replay_record"].as_str()).expect("a replay record");
    shipped.push(replay_record.to_owned());
    assert!(shipped.len() > 3, "{shipped:?}");

    let p = Project::with_recipes();
    committed_quickstart_lock(&p);
    for (i, digest) in shipped.iter().enumerate() {
        p.write(&format!("recipes/data/planted/{i}.dat"), &fs_err::read_to_string(author.object_file(digest)).unwrap());
    }
    p.write(
        "recipes/carrier.yaml",
        "schema: 1\nname: carrier\nseed: 1\nsources:\n  planted: {path: data/planted}\nstages: {}\n",
    );
    p.prov(&["run", "recipes/carrier.yaml"]).success();
    assert!(p.object_file(&shipped[0]).exists(), "the records' bytes are in the store, as data");
    assert_eq!(status_of(&p, "lockfiles/quickstart.lock"), (false, None));
    p.write("replay.yaml", "schema: 1\nname: replayed\nclaims:\n  - kind: replay\n");
    let r = p.prov(&["audit", "lockfiles/quickstart.lock", "--policy", "replay.yaml"]);
    assert_ne!(r.code(), 0, "{}", r.describe());
    assert!(!r.stdout().contains("replay: HOLDS"), "{}", r.describe());
}

/// A replay against a handed-over folder that re-executed only some stages (`--until`), or
/// that diverged, vouches for no run: the folder's run record, imported for the comparison,
/// is not the lockfile's recorded run. A whole identical replay makes it so.
#[test]
fn only_a_whole_identical_replay_makes_a_folder_the_recorded_run() {
    let p = Project::with_recipes();
    committed_quickstart_lock(&p);
    let committed = repo_root().join("manifests/quickstart");
    let committed_arg = committed.display().to_string();
    p.prov(&["replay", "lockfiles/quickstart.lock", "--against", &committed_arg, "--until", "shards"]).success();
    assert_eq!(status_of(&p, "lockfiles/quickstart.lock"), (false, None), "a partial replay");
    // A forged folder diverges: its run record is in the store, and is not the run either.
    forged_quickstart(&p);
    p.prov(&["replay", "lockfiles/quickstart.lock", "--against", "forged"]).exit(3);
    assert_eq!(status_of(&p, "lockfiles/quickstart.lock"), (false, None), "a diverged replay");
    p.prov(&["replay", "lockfiles/quickstart.lock", "--against", &committed_arg]).success();
    let honest = fs_err::read_to_string(committed.join("RUN")).unwrap().trim().to_owned();
    assert_eq!(status_of(&p, "lockfiles/quickstart.lock"), (true, Some(honest)), "a whole identical replay");
}

/// A folder whose `RUN` names a replay record ("identical", of the committed run) instead of
/// a run: refused before anything of the folder is stored. The refused import used to leave
/// the run and the replay record in the store as evidence, and a store that never ran the
/// lockfile reported it recorded, its replay claim holding (a review of the day's fixes).
#[test]
fn a_folder_whose_run_is_not_a_run_stores_nothing() {
    use prov_manifest::{Record, ReplayRecord, ReplayStage, ReplayStatus};
    let p = Project::with_recipes();
    committed_quickstart_lock(&p);
    let committed = repo_root().join("manifests/quickstart");
    fs_err::create_dir_all(p.path("handed")).unwrap();
    let mut run = None;
    for entry in fs_err::read_dir(&committed).unwrap() {
        let path = entry.unwrap().path();
        fs_err::copy(&path, p.path("handed").join(path.file_name().unwrap())).unwrap();
        if path.extension().is_some_and(|e| e == "json")
            && let Ok(Record::Run(r)) = Record::from_bytes(&fs_err::read(&path).unwrap())
        {
            run = Some((prov_store::Digest::of(&fs_err::read(&path).unwrap()), r));
        }
    }
    let (recording, run) = run.expect("the committed run record");
    let stage = fs_err::read(committed.join(format!("{}.json", run.stages[0].manifest.to_hex()))).unwrap();
    let Ok(Record::Stage(stage)) = Record::from_bytes(&stage) else { panic!("a stage record") };
    let replay = Record::Replay(ReplayRecord {
        schema: prov_manifest::SCHEMA_VERSION,
        lockfile: run.lockfile,
        recording,
        envelope: stage.envelope,
        envelope_check: prov_manifest::EnvelopeCheck::Full,
        stages: run
            .stages
            .iter()
            .map(|s| ReplayStage { name: s.name.clone(), status: ReplayStatus::Replayed, manifest: s.manifest })
            .collect(),
        divergence: None,
    });
    let bytes = replay.to_bytes().unwrap();
    let digest = prov_store::Digest::of(&bytes);
    p.write(&format!("handed/{}.json", digest.to_hex()), std::str::from_utf8(&bytes).unwrap());
    p.write("handed/RUN", &format!("{digest}\n"));

    let r = p.prov(&["replay", "lockfiles/quickstart.lock", "--against", "handed"]);
    r.exit(1);
    assert!(r.stderr().contains("names a replay record, not a run of lockfile"), "{}", r.describe());
    assert!(!p.object_file(&digest.to_string()).exists() && !p.object_file(&recording.to_string()).exists());
    assert_eq!(status_of(&p, "lockfiles/quickstart.lock"), (false, None));
    p.write("replay.yaml", "schema: 1\nname: replayed\nclaims:\n  - kind: replay\n");
    let r = p.prov(&["audit", "lockfiles/quickstart.lock", "--policy", "replay.yaml"]);
    assert!(r.code() != 0 && !r.stdout().contains("replay: HOLDS"), "{}", r.describe());
}

/// A folder whose `RUN` names a run of another lockfile is refused before anything runs.
#[test]
fn against_a_folder_of_another_lockfile_is_refused() {
    let p = Project::with_recipes();
    p.prov(&["lock", "recipes/quickstart.yaml"]).success();
    let mut lock = fs_err::read_to_string(p.path("lockfiles/quickstart.lock")).unwrap();
    lock = lock.replacen("\"fraction\":0.5", "\"fraction\":0.25", 1);
    p.write("lockfiles/other.lock", &lock);
    // Edited by hand, its commands are not adopted: the user says so for this replay.
    let r = p.prov(&[
        "replay",
        "lockfiles/other.lock",
        "--allow-commands",
        "--against",
        &repo_root().join("manifests/quickstart").display().to_string(),
    ]);
    r.exit(1);
    assert!(r.stderr().contains("names a run of lockfile"), "{}", r.describe());
}

/// With `--against`, the store's copies of the recorded outputs are still checked before a
/// stage re-executes: a damaged shard of an earlier local run is exit 2, not rewritten
/// in silence.
#[test]
fn against_keeps_checking_what_the_store_holds() {
    let p = Project::with_recipes();
    committed_quickstart_lock(&p);
    p.prov(&["run", "lockfiles/quickstart.lock"]).success();
    let dataset = committed_output("half", "dataset");
    let shown = p.json(&["show", &dataset]);
    let shard = shown[0]["data"]["record"]["shards"][0]["digest"].as_str().unwrap().to_owned();
    crate::common::flip_byte(&p.object_file(&shard), 100);
    let committed = repo_root().join("manifests/quickstart").display().to_string();
    let r = p.prov(&["replay", "lockfiles/quickstart.lock", "--against", &committed]);
    r.exit(2);
    assert!(r.stderr().contains("the recorded outputs of stage `half` are damaged"), "{}", r.describe());
}

/// A folder whose run record is not a run of the lockfile is refused before anything runs
/// (exit 2): a stage listed twice (the second copy was compared, the first was not), an extra
/// stage the lockfile does not have, a stage record whose config was rewritten. Each folder
/// hashes correctly everywhere.
#[test]
fn against_a_folder_that_is_not_a_run_of_the_lockfile_is_refused() {
    let p = Project::with_recipes();
    committed_quickstart_lock(&p);
    let committed = repo_root().join("manifests/quickstart");
    let cases: [(&str, &str); 3] = [
        ("twice", "is listed twice"),
        ("extra", "its stages are not the lockfile's plan"),
        ("config", "differs from the lockfile in `config`"),
    ];
    for (name, expected) in cases {
        let dir = p.path(name);
        recommit(&committed, &dir, |s| {
            if name == "config" && s.name.as_str() == "half" {
                s.config = serde_json::json!({"fraction": 0.25});
            }
        });
        match name {
            "twice" => {
                rewrite_run_stages(&dir, |stages| {
                    let half = stages.iter().find(|s| s.name.as_str() == "half").unwrap().clone();
                    stages.insert(2, half);
                });
            }
            "extra" => {
                rewrite_run_stages(&dir, |stages| {
                    let mut extra = stages[2].clone();
                    extra.name = "extra".parse().unwrap();
                    stages.push(extra);
                });
            }
            _ => {}
        }
        let r = p.prov(&["replay", "lockfiles/quickstart.lock", "--against", name]);
        r.exit(2);
        assert!(r.stderr().contains(expected), "{name}: {}", r.describe());
    }
}
