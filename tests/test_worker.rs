//! The process boundary to libtorch: `prov` itself never loads libtorch; the stages that
//! compute with it run in `prov-worker`, and `prov` trusts nothing the worker says without
//! checking it. Each test puts a worker in `PROV_WORKER` that misbehaves in one way (runs
//! under another `ATen` capability than the envelope records, is killed, answers garbage,
//! claims outputs it never wrote, is missing) and shows that the stage fails and no record
//! names its outputs; the real worker then completes the same run.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{PROV, Project};

const WORKER: &str = env!("CARGO_BIN_EXE_prov-worker");

/// Two training steps of a tiny model on the quickstart's text: the cheapest run that starts
/// the worker.
const RECIPE: &str = "schema: 1\nname: tiny\nseed: 5\nsources:\n  udhr:\n    path: data/quickstart/udhr-sample.jsonl\n    license: MIT\n\
stages:\n  shards:\n    kind: shard\n    inputs: {docs: udhr}\n    params: {shards: 1}\n\
\x20 tokenizer:\n    kind: tokenizer\n    inputs: {docs: shards}\n    params: {vocab_size: 300}\n\
\x20 tokens:\n    kind: tokenize\n    inputs: {docs: shards, tokenizer: tokenizer.tokenizer}\n    params: {seq_len: 16}\n\
\x20 pretrain:\n    kind: pretrain\n    inputs: {tokens: tokens.tokens, order: tokens.order, tokenizer: tokenizer.tokenizer}\n\
\x20   params:\n      steps: 2\n      batch_size: 2\n      checkpoint_every: 1\n\
\x20     model: {hidden_size: 16, intermediate_size: 32, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1}\n";

fn project() -> Project {
    let p = Project::with_recipes();
    p.write("recipes/tiny.yaml", RECIPE);
    p.prov(&["lock", "recipes/tiny.yaml"]).success();
    p
}

/// An executable shell script standing in for the worker.
fn fake_worker(p: &Project, body: &str) -> PathBuf {
    let path = p.write("fake-worker.sh", &format!("#!/bin/sh\nREAL='{WORKER}'\n{body}\n"));
    let mut perms = fs_err::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    fs_err::set_permissions(&path, perms).unwrap();
    path
}

/// `prov run` of the tiny lockfile with `worker` as the worker.
fn run_with(p: &Project, worker: &Path) -> std::process::Output {
    p.command(&["--json", "run", "lockfiles/tiny.lock"]).env("PROV_WORKER", worker).output().unwrap()
}

/// The `pretrain` stage's status in a `--json` run's output, if it reported one.
fn pretrain_status(stdout: &[u8]) -> Option<String> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["type"] == "stage" && l["data"]["name"] == "pretrain")
        .and_then(|l| l["data"]["status"].as_str().map(str::to_owned))
}

/// After a failed attempt, no stage record of kind `pretrain` is in the store, and the real
/// worker completes the run.
fn nothing_recorded_then_the_real_worker_completes(p: &Project) {
    no_pretrain_record(p);
    let out = run_with(p, Path::new(WORKER));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(pretrain_status(&out.stdout).as_deref(), Some("executed"));
}

/// No stage record of kind `pretrain` is in the store.
fn no_pretrain_record(p: &Project) {
    let pretrain_records: Vec<PathBuf> = p
        .object_files()
        .into_iter()
        .filter(|f| {
            matches!(prov_manifest::Record::from_bytes(&fs_err::read(f).unwrap()),
                Ok(prov_manifest::Record::Stage(s)) if s.stage_kind == "pretrain")
        })
        .collect();
    assert!(pretrain_records.is_empty(), "a pretrain stage record was written: {pretrain_records:?}");
}

/// The `pretrain` stage's device as the lockfile names it.
fn locked_device(p: &Project) -> Value {
    let lock: Value = serde_json::from_str(&fs_err::read_to_string(p.path("lockfiles/tiny.lock")).unwrap()).unwrap();
    let stages = lock["stages"].as_array().unwrap();
    stages.iter().find(|s| s["name"] == "pretrain").unwrap()["config"]["device"].clone()
}

/// The device is the recipe's, and the lockfile always names it (`cpu` when the recipe says
/// nothing). A GPU this machine lacks is refused before anything computes, naming the device;
/// and a worker that claims a GPU to `prov` (forged but well-formed facts) cannot make the
/// stage compute, because the worker that runs the stage reads the facts again itself. A
/// device that is not one is refused at lock time, naming the field.
#[test]
fn the_device_is_locked_and_a_gpu_this_machine_lacks_is_refused() {
    let p = project();
    assert_eq!(locked_device(&p), "cpu");
    if Path::new("/dev/nvidia0").exists() {
        eprintln!("this machine has an NVIDIA GPU: scripts/gpu-check runs the CUDA path");
        return;
    }
    let on_gpu = RECIPE.replace("      steps: 2\n", "      steps: 2\n      device: cuda:0\n");
    assert_ne!(on_gpu, RECIPE);
    p.write("recipes/tiny.yaml", &on_gpu);
    p.prov(&["lock", "recipes/tiny.yaml"]).success();
    assert_eq!(locked_device(&p), "cuda:0");
    let out = run_with(&p, Path::new(WORKER));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("device cuda:0") && stderr.contains("0 CUDA device(s)"), "{stderr}");
    assert!(stderr.contains("set `device: cpu`"), "no hint: {stderr}");
    no_pretrain_record(&p);

    let forged = fake_worker(
        &p,
        "if [ \"$1\" = cuda-facts ]; then\n  cat >/dev/null\n  echo '{\"ok\":{\"gpu_model\":\"NVIDIA H100 80GB HBM3\",\
         \"driver\":\"580.65.06\",\"cuda_runtime\":\"13.0\",\"cudnn\":\"9.20.0\",\"cublas\":\"13.1.1\",\
         \"deterministic\":\"on\"}}'\n  exit 0\nfi\nexec \"$REAL\" \"$@\"",
    );
    let out = run_with(&p, &forged);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("0 CUDA device(s)"), "the stage's own worker did not check: {stderr}");
    no_pretrain_record(&p);

    p.write("recipes/tiny.yaml", &RECIPE.replace("      steps: 2\n", "      steps: 2\n      device: gpu\n"));
    let lock = p.prov(&["lock", "recipes/tiny.yaml"]);
    lock.exit(1);
    assert!(lock.stderr().contains("device") && lock.stderr().contains("`cpu` or `cuda:N`"), "{}", lock.describe());
}

/// The libraries the dynamic loader would load for `binary` (glibc's `ldd` mechanism).
fn loaded_libraries(binary: &str) -> String {
    let out = Command::new(binary).arg("--version").env("LD_TRACE_LOADED_OBJECTS", "1").output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn prov_loads_no_libtorch_and_the_worker_does() {
    let prov = loaded_libraries(PROV);
    assert!(!prov.contains("libtorch") && !prov.contains("libc10"), "prov loads libtorch:\n{prov}");
    // The check can fail: the worker's list names libtorch.
    let worker = loaded_libraries(WORKER);
    assert!(worker.contains("libtorch_cpu") && worker.contains("libc10"), "{worker}");
}

#[test]
fn a_worker_under_another_aten_capability_than_the_envelope_records_is_refused() {
    let p = project();
    // Whatever capability prov pinned, the fake worker runs under another.
    let other = fake_worker(
        &p,
        "if [ \"$ATEN_CPU_CAPABILITY\" = default ]; then ATEN_CPU_CAPABILITY=avx2; else ATEN_CPU_CAPABILITY=default; fi\n\
         export ATEN_CPU_CAPABILITY\nexec \"$REAL\" \"$@\"",
    );
    let out = run_with(&p, &other);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the worker runs ATen capability") && stderr.contains("the envelope records"), "{stderr}");
    nothing_recorded_then_the_real_worker_completes(&p);
}

/// MKL and oneDNN read their variables inside the worker: a worker whose environment says
/// another MKL branch, or another oneDNN instruction set, than the envelope records computes
/// nothing.
#[test]
fn a_worker_under_another_mkl_branch_or_onednn_isa_than_the_envelope_records_is_refused() {
    let p = project();
    for (name, message) in [("MKL_CBWR", "MKL_CBWR=SSE4_2"), ("ONEDNN_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA=SSE4_2")] {
        let other = fake_worker(&p, &format!("export {name}=SSE4_2\nexec \"$REAL\" \"$@\""));
        let out = run_with(&p, &other);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(&format!("the worker runs with {message}")), "{stderr}");
    }
    nothing_recorded_then_the_real_worker_completes(&p);
}

#[test]
fn a_killed_worker_fails_the_stage_and_leaves_no_record() {
    let p = project();
    let killed = fake_worker(&p, "kill -9 $$");
    let out = run_with(&p, &killed);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("ended without a reply (killed by signal 9)"), "{stderr}");
    assert!(stderr.contains("prov doctor"), "the hint names the check: {stderr}");
    nothing_recorded_then_the_real_worker_completes(&p);
}

#[test]
fn a_worker_that_answers_garbage_gives_no_reply() {
    let p = project();
    let garbage = fake_worker(&p, "cat >/dev/null\necho 'not a reply'\necho 'it broke' >&2");
    let out = run_with(&p, &garbage);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("ended without a reply (exit code 0)") && stderr.contains("it broke"), "{stderr}");
    nothing_recorded_then_the_real_worker_completes(&p);
}

#[test]
fn outputs_a_worker_claims_but_never_wrote_are_an_integrity_failure() {
    let p = project();
    // A well-formed reply naming objects that are not in the store.
    let forged = format!(
        "{{\"ok\":{{\"outputs\":{{\"model\":{{\"type\":\"checkpoint\",\"digest\":\"blake3:{a}\"}},\
         \"checkpoints\":{{\"type\":\"tree\",\"digest\":\"blake3:{a}\"}},\"log\":{{\"type\":\"file\",\"digest\":\"blake3:{a}\"}}}},\
         \"stats\":{{}}}}}}",
        a = "ab".repeat(32)
    );
    let liar = fake_worker(&p, &format!("cat >/dev/null\necho '{forged}'"));
    let out = run_with(&p, &liar);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&"ab".repeat(32)), "the error names the missing object: {stderr}");
    nothing_recorded_then_the_real_worker_completes(&p);
}

#[test]
fn an_existing_object_a_worker_names_as_an_output_of_another_type_is_an_integrity_failure() {
    let p = project();
    // The stages before `pretrain`, run on their own, leave real objects in the store.
    let before = RECIPE.split("  pretrain:").next().unwrap().replace("name: tiny", "name: before");
    p.write("recipes/before.yaml", &before);
    let tokenizer = p
        .json(&["run", "recipes/before.yaml"])
        .iter()
        .find(|l| l["type"] == "stage" && l["data"]["name"] == "tokenizer")
        .and_then(|l| l["data"]["outputs"]["tokenizer"].as_str().map(str::to_owned))
        .expect("the tokenizer stage ran");
    // The tokenizer's `tokenizer.json`, well-formed and in the store, named as every output:
    // the bytes check, the types do not.
    let forged = format!(
        "{{\"ok\":{{\"outputs\":{{\"model\":{{\"type\":\"checkpoint\",\"digest\":\"{t}\"}},\
         \"checkpoints\":{{\"type\":\"tree\",\"digest\":\"{t}\"}},\"log\":{{\"type\":\"file\",\"digest\":\"{t}\"}}}},\
         \"stats\":{{}}}}}}",
        t = &tokenizer
    );
    let liar = fake_worker(&p, &format!("cat >/dev/null\necho '{forged}'"));
    let out = run_with(&p, &liar);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("output `checkpoints`") && stderr.contains("not a tree record"), "{stderr}");
    nothing_recorded_then_the_real_worker_completes(&p);
}

/// The process ids of `parent`'s children, from `/proc`.
fn children_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in fs_err::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = fs_err::read_to_string(entry.path().join("stat")) else { continue };
        // `pid (comm) state ppid …`; the command name may hold spaces, so split after `)`.
        let parent_of_pid =
            stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        if parent_of_pid == Some(parent) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn a_worker_whose_prov_is_killed_stops_too() {
    let p = Project::with_recipes();
    // Long enough that the worker is still training when `prov` is killed.
    let long = RECIPE
        .replace("steps: 2\n", "steps: 100000\n")
        .replace("checkpoint_every: 1", "checkpoint_every: 100000")
        .replace("params: {seq_len: 16}", "params: {seq_len: 16, epochs: 400}");
    p.write("recipes/tiny.yaml", &long);
    p.prov(&["lock", "recipes/tiny.yaml"]).success();
    let mut prov = p
        .command(&["run", "lockfiles/tiny.lock"])
        .env("PROV_WORKER", WORKER)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_mins(1);
    let worker = loop {
        if let Some(&w) = children_of(prov.id()).first() {
            break w;
        }
        assert!(std::time::Instant::now() < deadline, "prov started no worker");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    prov.kill().unwrap();
    prov.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while Path::new(&format!("/proc/{worker}")).exists() {
        // A zombie has ended; only its parent's reaping is left (init reaps orphans).
        let state = fs_err::read_to_string(format!("/proc/{worker}/stat")).unwrap_or_default();
        if state.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the worker {worker} still runs after prov was killed");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_missing_worker_is_an_error_with_a_hint() {
    let p = project();
    let out = run_with(&p, &p.path("no-such-worker"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no-such-worker` is missing") && stderr.contains("hint:"), "{stderr}");
    // Commands that need no libtorch do not need the worker.
    let status = p.command(&["status"]).env("PROV_WORKER", p.path("no-such-worker")).output().unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
}
