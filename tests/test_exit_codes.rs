//! Exit codes tell how a command ended, whatever it printed: a failing command stage whose
//! message mentions a broken pipe is a failure, and a reader that closes stdout early does
//! not turn a divergence into a success.

use std::process::Stdio;

use crate::common::{Project, Run};

/// Runs `prov` with stdout a pipe whose reading end is already closed, as in `prov … | head`
/// after `head` has exited.
fn with_stdout_closed(p: &Project, args: &[&str]) -> Run {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let output = p.command(args).stdout(writer).output().unwrap();
    Run { args: args.iter().map(|s| (*s).to_owned()).collect(), output }
}

const FAILS_WITH_BROKEN_PIPE: &str = "\
schema: 1
name: pipe
seed: 1
allow_commands: true
sources:
  udhr:
    path: data/quickstart/udhr-sample.jsonl
stages:
  reader:
    kind: external
    inputs: {docs: udhr}
    params:
      command: [sh, -c, \"echo 'BrokenPipeError: [Errno 32] Broken pipe' >&2; exit 1\"]
      outputs: {n: n.txt}
";

/// The message used to be searched for \"Broken pipe\", and exit 0 followed.
#[test]
fn a_failing_command_that_mentions_a_broken_pipe_fails_the_run() {
    let p = Project::with_recipes();
    p.write("recipes/pipe.yaml", FAILS_WITH_BROKEN_PIPE);
    let r = p.prov(&["run", "recipes/pipe.yaml"]);
    r.exit(1);
    assert!(r.stderr().contains("stage `reader` (external) failed"), "{}", r.describe());
    assert!(r.stderr().contains("Broken pipe"), "{}", r.describe());
}

const DIVERGES: &str = "\
schema: 1
name: flaky
seed: 1
allow_commands: true
sources:
  udhr:
    path: data/quickstart/udhr-sample.jsonl
stages:
  clock:
    kind: external
    inputs: {docs: udhr}
    params:
      command: [sh, -c, \"cat /proc/sys/kernel/random/uuid > id.txt\"]
      outputs: {id: id.txt}
";

#[test]
fn a_closed_stdout_keeps_the_exit_code_of_what_happened() {
    let p = Project::with_recipes();
    p.write("recipes/flaky.yaml", DIVERGES);
    with_stdout_closed(&p, &["run", "recipes/flaky.yaml"]).success();
    with_stdout_closed(&p, &["log"]).success();
    with_stdout_closed(&p, &["--json", "status"]).success();
    let r = with_stdout_closed(&p, &["replay", "lockfiles/flaky.lock"]);
    r.exit(3);
    assert!(r.stderr().contains("replay diverged at stage `clock`"), "{}", r.describe());
    with_stdout_closed(&p, &["--json", "replay", "lockfiles/flaky.lock"]).exit(3);
}

/// Arguments that make no sense are usage errors that say what is wrong: `--limit 0` (it
/// printed "no executions logged" in a store that had some), and a file given where a
/// command takes an object id (it said the file was "neither a file nor an object id").
#[test]
fn odd_arguments_say_what_is_wrong() {
    let p = Project::with_recipes();
    p.prov(&["run", "recipes/quickstart.yaml"]).success();
    let r = p.prov(&["log", "--limit", "0"]);
    r.exit(1);
    assert!(!r.stdout().contains("no executions logged"), "{}", r.describe());
    assert!(p.prov(&["log", "--limit", "1"]).stdout().contains("run"));
    let r = p.prov(&["export", "lockfiles/quickstart.lock", "--out", "hf"]);
    r.exit(1);
    assert!(
        r.stderr().contains("`lockfiles/quickstart.lock` is a file; this command takes an object id"),
        "{}",
        r.describe()
    );
    // A card plots 1 to 100 languages: 0 drew an empty plot.
    for n in ["0", "101"] {
        let r = p.prov(&["card", "--out", "card", "--top-languages", n, "lockfiles/quickstart.lock"]);
        r.exit(1);
        assert!(r.stderr().contains("1..=100"), "{}", r.describe());
    }
    // Thread counts are bounded as a stage's are: 100,000 started as many OS threads.
    for (args, env) in [(vec!["--threads", "0", "verify"], None), (vec!["--threads", "100000", "verify"], None)]
        .into_iter()
        .chain([(vec!["verify"], Some("100000")), (vec!["verify"], Some("4294967296"))])
    {
        let mut c = p.command(&args);
        if let Some(n) = env {
            c.env("PROV_THREADS", n);
        }
        let out = c.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?} {env:?}: {stderr}");
        assert!(stderr.contains("from 1 to 1024 threads"), "{args:?} {env:?}: {stderr}");
    }
}

/// Files named on the command line are read only when they are regular files: a FIFO hung
/// `prov lock`, `run` and `audit` until killed, and `/dev/zero` (or a link to it) as a policy
/// or recipe ate memory until allocation failed. Each is now refused at once (exit 1), naming
/// what the path is.
#[test]
fn paths_that_are_not_regular_files_are_refused_not_read() {
    let p = Project::with_recipes();
    p.prov(&["run", "recipes/quickstart.yaml"]).success();
    assert!(std::process::Command::new("mkfifo").arg(p.path("fifo.yaml")).status().unwrap().success());
    std::os::unix::fs::symlink("/dev/zero", p.path("zero.yaml")).unwrap();
    let lock = "lockfiles/quickstart.lock";
    for path in ["fifo.yaml", "zero.yaml", "/dev/zero"] {
        for args in [
            vec!["lock", path],
            vec!["run", path],
            vec!["audit", "--policy", path, lock],
            vec!["license", "queue", "--policy", path],
            vec!["verify-proof", "--unanchored", path],
            vec!["explain", "robots", "--robots", path, "--agent", "x", "--url", "/"],
        ] {
            let mut child = p.command(&args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
            let started = std::time::Instant::now();
            while child.try_wait().unwrap().is_none() {
                if started.elapsed() > std::time::Duration::from_secs(20) {
                    child.kill().unwrap();
                    panic!("prov {args:?} still running after 20 s");
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let out = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "prov {args:?}: {stderr}");
            assert!(stderr.contains("not a regular file"), "prov {args:?}: {stderr}");
        }
    }
}
