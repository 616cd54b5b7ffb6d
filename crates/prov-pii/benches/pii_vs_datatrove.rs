//! Benchmark: PII redaction against datatrove 0.10.1's `PIIFormatter`, side by side.
//!
//! Two corpora: the shared PII bench corpus (9,099 real Debian documents, 53 MB, dense with
//! e-mail addresses; found via `PROV_SHARED_DATA`), and the synthetic corpus of the scale
//! benchmarks (`prov_testkit::synthetic`, 200 MB by default, `PII_BENCH_SYNTHETIC_MB`). Both
//! sides run on one core, best of 3: the `apertus` and `strict` modes here, `PIIFormatter()`
//! with its defaults (e-mails and public IPs) in datatrove. The targets are at least 10x
//! datatrove per core, and 500 MB/s per core on the synthetic corpus.
//!
//! Run with `cargo bench -p prov-pii --bench pii_vs_datatrove` after `scripts/setup`.

#![allow(clippy::print_stdout, clippy::unwrap_used, missing_docs)]

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Instant;

use prov_pii::{Redactor, StrictOptions};

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
    compare(&python, &root, &corpus, false);
    let mb: u64 = std::env::var("PII_BENCH_SYNTHETIC_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();
    let data = root.join("recipes/data/mini-apertus");
    let material = prov_testkit::synthetic::Material::load(&data.join("corpus"), &data.join("robots")).unwrap();
    prov_testkit::synthetic::write_corpus(&material, mb << 20, 7, dir.path()).unwrap();
    compare(&python, &root, &dir.path().join("corpus/part-00000.jsonl"), true);
}

/// Both sides on one corpus (JSON Lines, gzip-compressed when its name ends in `.gz`); the
/// per-core target is checked on the synthetic one.
fn compare(python: &Path, root: &Path, corpus: &Path, synthetic: bool) {
    let file = fs_err::File::open(corpus).unwrap();
    let reader: Box<dyn std::io::Read> = if corpus.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::GzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let reader = std::io::BufReader::new(reader);
    let texts: Vec<String> = reader
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(&l.unwrap()).unwrap()["text"].as_str().unwrap().to_owned())
        .collect();
    let bytes: usize = texts.iter().map(String::len).sum();
    let time = |redactor: &Redactor| {
        let mut best = f64::INFINITY;
        let mut matches = 0;
        for _ in 0..RUNS {
            let t = Instant::now();
            matches = texts.iter().map(|text| redactor.redact(text).counts().total()).sum::<u64>();
            best = best.min(t.elapsed().as_secs_f64());
        }
        (best, matches)
    };
    let (apertus, apertus_matches) = time(&Redactor::apertus());
    let (strict, strict_matches) = time(&Redactor::strict(StrictOptions::default()));

    let out = std::process::Command::new(python)
        .arg(root.join("scripts/bench_pii_datatrove.py"))
        .arg(corpus)
        .arg(RUNS.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "datatrove side failed: {}", String::from_utf8_lossy(&out.stderr));
    let peer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let datatrove = peer["seconds"].as_f64().unwrap();

    let mbs = |s: f64| bytes as f64 / s / 1e6;
    println!(
        "\nPII on {}: {} documents, {:.1} MB, one core, best of {RUNS}",
        corpus.display(),
        texts.len(),
        bytes as f64 / 1e6
    );
    println!("{:<28} {:>9.3} s {:>8.1} MB/s  ({} matches)", "prov-pii apertus", apertus, mbs(apertus), apertus_matches);
    println!("{:<28} {:>9.3} s {:>8.1} MB/s  ({} matches)", "prov-pii strict", strict, mbs(strict), strict_matches);
    println!("{:<28} {:>9.3} s {:>8.1} MB/s", "datatrove 0.10.1 PIIFormatter", datatrove, mbs(datatrove));
    for (name, s) in [("apertus", apertus), ("strict", strict)] {
        let r = datatrove / s;
        println!("speed-up {name}: {r:.1}x (target >= 10x per core: {})", if r >= 10.0 { "met" } else { "NOT met" });
    }
    if synthetic {
        let met = if mbs(apertus) >= 500.0 { "met" } else { "NOT met" };
        println!("apertus per core: {:.0} MB/s (target >= 500 MB/s on the synthetic corpus: {met})", mbs(apertus));
    }
}
