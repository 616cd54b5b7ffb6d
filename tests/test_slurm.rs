//! `--executor slurm` on a real two-node Slurm cluster: Debian's `slurm-wlm` and `munge`,
//! started by the test itself on this machine (`scripts/slurm-up`, nodes `n1` and `n2`, its
//! own ports and directory) and stopped at the end (`scripts/slurm-down`, by pid files). Needs
//! root (slurmd starts jobs as their users); without it the test fails in CI and is skipped
//! elsewhere.
//!
//! One test, because the cluster is started once: the main job's data stages run as Slurm
//! jobs and give the committed run's outputs; a task cancelled with `scancel` fails the run,
//! the tasks that finished are kept and the next `prov run` submits only the cancelled one;
//! a node set DOWN while it runs a task has that task run again, and the outputs equal a
//! local run's; `prov verify` passes after each.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{Project, copy_dir, repo_root};

/// A cluster started by `scripts/slurm-up` in a directory of its own, stopped when dropped.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
}

impl Cluster {
    fn up(dir: &Path) -> Self {
        // Not the default port, so that a developer's cluster may run beside it.
        let out = Command::new(repo_root().join("scripts/slurm-up"))
            .arg(dir)
            .env("PROV_SLURM_PORT", "26817")
            .output()
            .expect("scripts/slurm-up starts");
        let cluster = Self { dir: dir.to_owned(), conf: dir.join("slurm.conf") };
        assert!(
            out.status.success(),
            "scripts/slurm-up failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        cluster
    }

    fn run(&self, program: &str, args: &[&str]) -> String {
        let out = Command::new(program).args(args).env("SLURM_CONF", &self.conf).output().expect("a Slurm command");
        assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `(job id, state, node)` of every job in the queue, array elements one per line.
    fn queue(&self) -> Vec<(String, String, String)> {
        self.run("squeue", &["-h", "-r", "-o", "%i|%T|%N"])
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split('|').collect();
                (f.len() == 3).then(|| (f[0].to_owned(), f[1].to_owned(), f[2].to_owned()))
            })
            .collect()
    }

    fn wait_until_idle(&self) {
        let start = Instant::now();
        while !self.queue().is_empty() {
            assert!(start.elapsed() < Duration::from_mins(5), "jobs still queued: {:?}", self.queue());
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn prov(&self, p: &Project, args: &[&str]) -> Command {
        let mut c = p.command(args);
        c.env("SLURM_CONF", &self.conf);
        c
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(repo_root().join("scripts/slurm-down")).arg(&self.dir).status();
    }
}

/// Whether this process may start a cluster: root, on Linux.
fn may_start_a_cluster() -> bool {
    let uid = fs_err::read_to_string("/proc/self/status").ok().and_then(|s| {
        s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1).unwrap_or("").to_owned())
    });
    if uid.as_deref() == Some("0") {
        return true;
    }
    let msg = "the Slurm test starts slurmd, which needs root";
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{msg}");
    eprintln!("skipping: {msg}");
    false
}

/// The run record's stages of a committed manifests folder, by name: (outputs, stats).
fn committed_stages(dir: &Path) -> std::collections::BTreeMap<String, (Value, Value)> {
    let read = |digest: &str| -> Value {
        let hex = digest.strip_prefix("blake3:").unwrap();
        serde_json::from_slice(&fs_err::read(dir.join(format!("{hex}.json"))).unwrap()).unwrap()
    };
    let run = read(fs_err::read_to_string(dir.join("RUN")).unwrap().trim());
    run["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let record = read(s["manifest"].as_str().unwrap());
            (s["name"].as_str().unwrap().to_owned(), (record["outputs"].clone(), record["stats"].clone()))
        })
        .collect()
}

/// The stage lines of a `--json` run.
fn stage_lines(stdout: &str) -> Vec<Value> {
    stdout.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|l| l["type"] == "stage").collect()
}

fn record(p: &Project, digest: &Value) -> Value {
    p.json(&["show", digest.as_str().unwrap()])[0]["data"]["record"].clone()
}

#[test]
fn stages_run_as_slurm_jobs_survive_lost_tasks_and_give_the_local_outputs() {
    if !crate::common::main_job_data_fetched() {
        return;
    }
    if !may_start_a_cluster() {
        return;
    }
    let p = Project::new();
    let cluster = Cluster::up(&p.root.parent().unwrap().join("slurm"));
    copy_dir(&repo_root().join("recipes"), &p.path("recipes"));
    // The project's Slurm options: look at the queue often, for a quick test.
    p.write("slurm.yaml", "poll_seconds: 0.2\n");
    let start = Instant::now();
    main_job_data_stages_give_the_committed_outputs(&p, &cluster);
    eprintln!("main job's data stages: {:?}", start.elapsed());
    a_cancelled_task_is_resumed_by_the_next_run(&p, &cluster);
    eprintln!("a cancelled task: {:?}", start.elapsed());
    a_lost_node_has_its_tasks_run_again(&p, &cluster);
    eprintln!("a lost node: {:?}", start.elapsed());
}

/// The main job up to `decontaminate` (every data stage, the toxicity classifier's training
/// among them, as one job with the run's two threads): each stage's outputs and statistics
/// are the committed run's.
fn main_job_data_stages_give_the_committed_outputs(p: &Project, cluster: &Cluster) {
    let recipe: serde_yaml::Value =
        serde_yaml::from_str(&fs_err::read_to_string(p.path("recipes/mini-apertus.yaml")).unwrap()).unwrap();
    let mut data_only = recipe.clone();
    data_only["name"] = "mini-apertus-data".into();
    let stages = data_only["stages"].as_mapping_mut().unwrap();
    let keep = [
        "shards",
        "urls",
        "robots",
        "pii",
        "toxicity-labels",
        "toxicity-classifier",
        "toxicity",
        "license",
        "dedup",
        "decontaminate",
    ];
    stages.retain(|k, _| keep.contains(&k.as_str().unwrap()));
    p.write("recipes/mini-apertus-data.yaml", &serde_yaml::to_string(&data_only).unwrap());

    let out = cluster
        .prov(p, &["--json", "--threads", "2", "run", "recipes/mini-apertus-data.yaml", "--executor", "slurm"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let committed = committed_stages(&repo_root().join("manifests/mini-apertus"));
    let lines = stage_lines(&stdout);
    assert_eq!(lines.len(), keep.len() + 4, "every source and stage ran: {stdout}");
    for name in keep {
        let line = lines.iter().find(|l| l["data"]["name"] == name).unwrap();
        assert_eq!(line["data"]["status"], "executed", "{line}");
        let rec = record(p, &line["data"]["manifest"]);
        let (outputs, stats) = &committed[name];
        assert_eq!(&rec["outputs"], outputs, "stage {name}: outputs differ from the committed run's");
        assert_eq!(&rec["stats"], stats, "stage {name}: statistics differ from the committed run's");
    }
    // Everything the tasks wrote is in the index now, and nothing is left of the tasks.
    p.prov(&["verify"]).success();
    // A local replay of the run recorded on Slurm reproduces it.
    let replay = p.prov(&["replay", "lockfiles/mini-apertus-data.lock", "--until", "robots"]);
    replay.success();
    assert!(replay.stdout().contains("replay identical"), "{}", replay.describe());
    let left: Vec<PathBuf> =
        fs_err::read_dir(p.path(".prov/tasks")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    assert!(left.is_empty(), "task directories are removed once their stage is recorded: {left:?}");
}

/// A recipe over a synthetic corpus cut into `shards` shards (70: more map tasks than the
/// cluster's `MaxArraySize`, 64, so that every stage is two arrays).
fn synthetic_recipe(p: &Project, name: &str, mode: &str, shards: usize) -> String {
    if !p.path("synthetic/corpus").is_dir() {
        let material = prov_testkit::synthetic::Material::load(
            &repo_root().join("recipes/data/mini-apertus/corpus"),
            &repo_root().join("recipes/data/mini-apertus/robots"),
        )
        .unwrap();
        prov_testkit::synthetic::write_corpus(&material, 12 << 20, 7, &p.path("synthetic")).unwrap();
        copy_dir(&repo_root().join("recipes/data/mini-apertus/robots"), &p.path("synthetic/robots"));
    }
    let path = format!("recipes/{name}.yaml");
    p.write(
        &path,
        &format!(
            "schema: 1\nname: {name}\nseed: 7\nsources:\n  corpus: {{path: ../synthetic/corpus, license: MIT}}\n  \
             robots-snapshot: {{path: ../synthetic/robots, license: BSD-3-Clause}}\nstages:\n  shards:\n    kind: shard\n    \
             inputs: {{docs: corpus}}\n    params: {{shards: {shards}}}\n  robots:\n    kind: robots\n    inputs: {{docs: shards, \
             snapshot: robots-snapshot}}\n  pii:\n    kind: pii\n    inputs: {{docs: robots.dataset}}\n    params: {{mode: {mode}}}\n"
        ),
    );
    path
}

/// The task directory of the stage whose tasks are in flight (there is one at a time).
fn task_dir(p: &Project) -> PathBuf {
    let dirs: Vec<PathBuf> =
        fs_err::read_dir(p.path(".prov/tasks")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// With no retries, a cancelled map task fails the run with a message that names it; the
/// tasks that finished keep their results, `prov status` shows the failure, and the next
/// `prov run` submits the cancelled task alone, then completes.
fn a_cancelled_task_is_resumed_by_the_next_run(p: &Project, cluster: &Cluster) {
    let recipe = synthetic_recipe(p, "synthetic-strict", "strict", 70);
    // Two tasks at a time: the array's last elements wait long enough to be cancelled.
    let child = cluster
        .prov(p, &["--threads", "1", "run", &recipe, "--executor", "slurm", "--retries", "0", "--throttle", "2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Cancel a pending element of the first array of `robots` (its job has 64 elements).
    let start = Instant::now();
    let cancelled = loop {
        assert!(start.elapsed() < Duration::from_mins(4), "no pending array element to cancel");
        let pending: Vec<String> = cluster
            .queue()
            .into_iter()
            .filter(|(id, state, _)| state == "PENDING" && id.ends_with("_60"))
            .map(|(id, _, _)| id)
            .collect();
        if let Some(id) = pending.first() {
            cluster.run("scancel", &[id]);
            break id.clone();
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("map task 60 ended without a result"), "{stderr}");
    assert!(stderr.contains(&format!("job {cancelled}")), "{stderr}");
    cluster.wait_until_idle();

    let dir = task_dir(p);
    let results = || fs_err::read_dir(dir.join("results")).unwrap().count();
    assert_eq!(results(), 69, "every other task finished and kept its result");
    let status = p.prov(&["status"]);
    status.success();
    assert!(status.stdout().contains("robots") && status.stdout().contains("69 of 70"), "{}", status.describe());
    assert!(status.stdout().contains("map task 60"), "{}", status.describe());

    let out = cluster.prov(p, &["--json", "--threads", "1", "run", &recipe, "--executor", "slurm"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // `shards` was recorded by the failed run; `robots` resumed with the one task that had no
    // result; `pii` ran whole.
    let lines = stage_lines(&stdout);
    let tasks = |name: &str| lines.iter().find(|l| l["data"]["name"] == name).unwrap()["data"].clone();
    assert_eq!(tasks("shards")["status"], "cached");
    assert_eq!(tasks("robots")["tasks"], serde_json::json!({ "total": 70, "reused": 69 }), "{stdout}");
    assert_eq!(tasks("pii")["tasks"], serde_json::json!({ "total": 70, "reused": 0 }), "{stdout}");
    p.prov(&["verify"]).success();
    local_run_gives_the_same_outputs(p, &recipe, &stdout);
}

/// A node set DOWN while it runs a task: Slurm ends the task (`NODE_FAIL`) and requeues it
/// (prov submits with `--requeue`), the run completes, and its outputs are a local run's. The
/// task is a command stage that takes seconds, run on `n2` while `n1` is drained, so that the
/// node is lost while the task runs, not after it.
fn a_lost_node_has_its_tasks_run_again(p: &Project, cluster: &Cluster) {
    let recipe = synthetic_recipe(p, "synthetic-checksums", "apertus", 4);
    let text = fs_err::read_to_string(p.path(&recipe)).unwrap().replace(
        "stages:\n",
        "allow_commands: true\nstages:\n  checksums:\n    kind: external\n    inputs: {docs: pii.dataset}\n    params:\n      \
         command: [sh, -c, \"sleep 4 && cd inputs/docs && sha256sum shard-*.parquet > ../../SHA256SUMS\"]\n      \
         outputs: {sums: SHA256SUMS}\n",
    );
    p.write(&recipe, &text);
    // Every task of this run starts on n2.
    cluster.run("scontrol", &["update", "nodename=n1", "state=drain", "reason=prov-test"]);
    let child = cluster
        .prov(p, &["--json", "--threads", "1", "run", &recipe, "--executor", "slurm"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let lost = loop {
        assert!(start.elapsed() < Duration::from_mins(4), "the command stage never ran");
        let running = cluster.queue().into_iter().find(|(_, state, _)| state == "RUNNING");
        if let (Some("checksums"), Some((id, _, node))) = (task_dir_stage(p).as_deref(), running) {
            assert_eq!(node, "n2", "n1 is drained");
            cluster.run("scontrol", &["update", "nodename=n1", "state=resume"]);
            cluster.run("scontrol", &["update", "nodename=n2", "state=down", "reason=prov-test"]);
            break id;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    // Slurm may have returned the node to service already (ReturnToService=2): then resuming
    // it is refused, and there is nothing to do.
    let _ = Command::new("scontrol")
        .args(["update", "nodename=n2", "state=resume"])
        .env("SLURM_CONF", &cluster.conf)
        .output();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let jobcomp = fs_err::read_to_string(cluster.dir.join("log/jobcomp.log")).unwrap();
    assert!(
        jobcomp.lines().any(|l| l.starts_with(&format!("JobId={lost} "))
            && l.contains("JobState=NODE_FAIL")
            && l.contains("NodeList=n2")),
        "job {lost} did not end with NODE_FAIL on n2:\n{jobcomp}"
    );
    p.prov(&["verify"]).success();
    local_run_gives_the_same_outputs(p, &recipe, &stdout);
}

/// The stage of the task directory in flight, from its spec.
fn task_dir_stage(p: &Project) -> Option<String> {
    let dir =
        fs_err::read_dir(p.path(".prov/tasks")).ok()?.filter_map(Result::ok).map(|e| e.path()).find(|p| p.is_dir())?;
    let spec: Value = serde_json::from_slice(&fs_err::read(dir.join("spec.json")).ok()?).ok()?;
    spec["stage"]["stage"].as_str().map(str::to_owned)
}

/// The same recipe run locally in a store of its own gives the same stage records' outputs as
/// the Slurm run printed in `slurm_stdout`.
fn local_run_gives_the_same_outputs(p: &Project, recipe: &str, slurm_stdout: &str) {
    let local = Project::new();
    copy_dir(&p.path("recipes"), &local.path("recipes"));
    copy_dir(&p.path("synthetic"), &local.path("synthetic"));
    let lines = local.json(&["run", recipe]);
    let slurm_table = stage_outputs(slurm_stdout);
    assert!(!slurm_table.is_empty(), "{slurm_stdout}");
    let local_table: Vec<(String, Value)> = lines
        .iter()
        .filter(|l| l["type"] == "stage")
        .map(|l| (l["data"]["name"].as_str().unwrap().to_owned(), l["data"]["outputs"].clone()))
        .collect();
    assert_eq!(slurm_table, local_table);
}

fn stage_outputs(stdout: &str) -> Vec<(String, Value)> {
    stage_lines(stdout)
        .iter()
        .map(|l| (l["data"]["name"].as_str().unwrap().to_owned(), l["data"]["outputs"].clone()))
        .collect()
}
