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

/// Runs the pinned `bifixer` executable of `python`'s environment as its users run it, on
/// sentence pairs `(id, source, target)` of languages `source` → `target` (a TSV of source,
/// target and id, in `dir`), with `--ignore_segmentation` (its sentence models come from no
/// registry) and `flags`; returns its output rows: source, target, id, hash, ranking.
pub fn bifixer(
    python: &Path,
    dir: &Path,
    langs: (&str, &str),
    pairs: &[(&str, &str, &str)],
    flags: &[&str],
) -> Vec<Vec<String>> {
    let bin = python.parent().expect("the environment's bin directory").join("bifixer");
    let input = dir.join(format!("{}-{}.tsv", langs.0, langs.1));
    let output = dir.join(format!("{}-{}.out", langs.0, langs.1));
    let tsv: String = pairs.iter().flat_map(|(id, s, t)| [*s, "\t", *t, "\t", *id, "\n"]).collect();
    fs_err::write(&input, tsv).expect("the pairs are written");
    let (input_arg, output_arg) = (input.to_str().expect("a UTF-8 path"), output.to_str().expect("a UTF-8 path"));
    let mut args =
        vec![input_arg, output_arg, langs.0, langs.1, "--scol", "1", "--tcol", "2", "--ignore_segmentation", "-q"];
    args.extend_from_slice(flags);
    pipe(&bin, &args, b"");
    fs_err::read_to_string(&output)
        .expect("bifixer writes its output")
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

/// Writes the Bifixer rules of `langs` to `out` with `scripts/bifixer-rules.py`, from the
/// package pinned in `python`'s environment.
pub fn bifixer_rules(python: &Path, out: &Path, langs: &[&str]) {
    let script = repo_root().join("scripts/bifixer-rules.py");
    let mut args = vec![script.to_str().expect("a UTF-8 path"), out.to_str().expect("a UTF-8 path")];
    args.extend_from_slice(langs);
    pipe(python, &args, b"");
}

/// `n` deterministic float32 values of varied magnitude and sign (`SplitMix64` from `seed`):
/// parameters and gradients for the optimizer reference tests, the same on every machine.
pub fn varied_f32(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            let unit = (z >> 40) as f32 / (1u64 << 24) as f32; // [0, 1)
            (unit - 0.5) * scale * (1.0 + (z & 7) as f32)
        })
        .collect()
}
