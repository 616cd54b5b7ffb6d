//! Exit codes tell how a command ended, whatever it printed: a failing command stage whose
//! message mentions a broken pipe is a failure, and a reader that closes stdout early does
//! not turn a divergence into a success.

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
}
