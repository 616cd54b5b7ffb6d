//! Test support for the workspace's tests, and nothing else (no crate depends on it outside
//! `[dev-dependencies]`): where the repository is, and the external things some tests need —
//! the project's Python (`.venv`, made by `scripts/setup`) and the shared real data
//! (`PROV_SHARED_DATA`) — with one rule for their absence. In CI (`CI=true`) a missing one
//! fails the test; anywhere else the test is skipped with a message that names what is missing.
//! And the synthetic corpus of any size that tests and benchmarks at scale read ([`synthetic`]).
//!
//! ```
//! if let Some(python) = prov_testkit::venv_python() {
//!     assert!(python.ends_with(".venv/bin/python"));
//! }
//! ```

#![deny(missing_docs)]
#![allow(clippy::print_stderr)] // Skipping a test says so on stderr, where the harness shows it.

use std::path::{Path, PathBuf};

pub mod synthetic;

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the repository root exists")
}

/// Returns `path` when it exists; otherwise fails under `CI=true`, or prints
/// `skipping: <what>` and returns `None`.
pub fn require(path: PathBuf, what: &str) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    let msg = format!("{} missing: {what}", path.display());
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{msg}");
    eprintln!("skipping: {msg}");
    None
}

/// The project's Python (with torch, transformers, pyarrow and the peers), from `scripts/setup`.
pub fn venv_python() -> Option<PathBuf> {
    require(repo_root().join(".venv/bin/python"), "run `scripts/setup`")
}

/// Runs `script` with `python -c`, writes `input` to its standard input and returns its
/// standard output. Its standard error passes through; a failure fails the test.
pub fn run_python(python: &Path, script: &str, input: &[u8]) -> Vec<u8> {
    pipe(python, &["-c", script], input)
}

/// Runs `program` with `args`, writes `input` to its standard input from a thread of its own
/// (so that a program that writes while it reads cannot deadlock on full pipes) and returns
/// its standard output. Its standard error passes through; a failure fails the test.
pub fn pipe(program: &Path, args: &[&str], input: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{} starts: {e}", program.display()));
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&input));
    let output = child.wait_with_output().expect("the program runs");
    feeder.join().expect("the feeder thread ends").expect("the program reads its input");
    assert!(output.status.success(), "{} failed: {}", program.display(), output.status);
    output.stdout
}

/// `rel` inside the shared real data: `PROV_SHARED_DATA`, or `../shared/data` beside the
/// repository when it is unset.
pub fn shared_data(rel: &str) -> Option<PathBuf> {
    let base = std::env::var_os("PROV_SHARED_DATA").map_or_else(|| repo_root().join("../shared/data"), PathBuf::from);
    require(base.join(rel), "real test data (set PROV_SHARED_DATA to the shared data directory)")
}
