//! Benchmark: the heuristic filter's rules against the same rules in Python
//! (`scripts/heuristics_reference.py`, which the tests check agree document by document),
//! side by side on one core each.
//!
//! Corpora: the shared PII bench corpus (9,099 real Debian copyright files, changelogs and
//! manual pages, 53 MB; `PROV_SHARED_DATA`), under the report's thresholds and with the
//! curly-bracket rule off (so that every paragraph of the manual pages meets the paragraph
//! rules), and the synthetic corpus of the scale benchmarks (`prov_testkit::synthetic`,
//! `HEURISTICS_BENCH_SYNTHETIC_MB`, default 50). Both sides time only the rules, not reading
//! JSON; Provenant best of 3, Python once (it takes a minute a corpus). The target:
//! at least 10x the Python implementation per core.
//!
//! Run with `cargo bench -p prov-heuristics --bench heuristics_vs_python` after `scripts/setup`.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use prov_heuristics::{Outcome, Thresholds, assess};
use serde_json::{Value, json};

const RUNS: usize = 3;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let shared = std::env::var_os("PROV_SHARED_DATA").map_or_else(|| root.join("../shared/data"), PathBuf::from);
    let corpus = shared.join("pii/bench-corpus.jsonl.gz");
    let python = root.join(".venv/bin/python");
    if !corpus.is_file() || !python.is_file() {
        println!("skipping: {} or {} missing (PROV_SHARED_DATA, scripts/setup)", corpus.display(), python.display());
        return;
    }
    let real = read_jsonl(&corpus);
    compare(&python, &root, "PII bench corpus, report thresholds", &real, &json!({}));
    compare(&python, &root, "PII bench corpus, curly brackets off", &real, &json!({ "curly_brackets": false }));

    let mb: u64 = std::env::var("HEURISTICS_BENCH_SYNTHETIC_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let dir = tempfile::tempdir().unwrap();
    let data = root.join("recipes/data/mini-apertus");
    let material = prov_testkit::synthetic::Material::load(&data.join("corpus"), &data.join("robots")).unwrap();
    prov_testkit::synthetic::write_corpus(&material, mb << 20, 7, dir.path()).unwrap();
    let synthetic = read_jsonl(&dir.path().join("corpus/part-00000.jsonl"));
    compare(&python, &root, &format!("synthetic corpus ({mb} MiB), report thresholds"), &synthetic, &json!({}));
}

/// `(id, text)` of each line of a JSON Lines file (gzip-compressed when its name ends in `.gz`).
fn read_jsonl(path: &Path) -> Vec<(String, String)> {
    let file = fs_err::File::open(path).unwrap();
    let reader: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::GzDecoder::new(file))
    } else {
        Box::new(file)
    };
    std::io::BufReader::new(reader)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(&l.unwrap()).unwrap();
            (v["id"].as_str().unwrap().to_owned(), v["text"].as_str().unwrap().to_owned())
        })
        .collect()
}

fn compare(python: &Path, root: &Path, what: &str, docs: &[(String, String)], params: &Value) {
    let t: Thresholds = serde_json::from_value(params.clone()).unwrap();
    let bytes: usize = docs.iter().map(|(_, text)| text.len()).sum();
    let mut best = f64::INFINITY;
    let mut removed = 0;
    for _ in 0..RUNS {
        let start = Instant::now();
        removed = docs
            .iter()
            .filter(|(_, text)| !matches!(assess(text, &t), Outcome::Paragraphs { too_short: false, .. }))
            .count();
        best = best.min(start.elapsed().as_secs_f64());
    }

    let input: String = docs.iter().map(|(id, text)| json!({ "id": id, "text": text }).to_string() + "\n").collect();
    let mut child = Command::new(python)
        .arg(root.join("scripts/heuristics_reference.py"))
        .args(["--bench", "--config", &params.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the venv's Python starts");
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap().unwrap();
    assert!(out.status.success(), "the Python side failed");
    let peer: Value = serde_json::from_str(String::from_utf8(out.stdout).unwrap().lines().last().unwrap()).unwrap();
    let python_s = peer["seconds"].as_f64().unwrap();

    let mbs = |s: f64| bytes as f64 / s / 1e6;
    println!("\nheuristics on the {what}: {} documents, {:.1} MB, one core", docs.len(), bytes as f64 / 1e6);
    println!("{:<34} {:>9.3} s {:>8.1} MB/s  ({removed} removed)", "prov-heuristics (best of 3)", best, mbs(best));
    println!("{:<34} {:>9.3} s {:>8.1} MB/s", "Python reference (regex module)", python_s, mbs(python_s));
    let r = python_s / best;
    println!("speed-up: {r:.1}x (target >= 10x per core: {})", if r >= 10.0 { "met" } else { "NOT met" });
}
