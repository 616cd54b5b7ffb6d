//! Benchmark: Provenant's n-gram scorer against KenLM's (the `kenlm` Python module, whose
//! scoring is KenLM's C++ query), and its estimator against KenLM's `lmplz`, side by side, one
//! core each.
//!
//! The model: a 5-gram model of the main job's corpus (UDHR translations and Debian fortunes,
//! about 1.3 million tokens after `CCNet` normalisation), estimated by both and checked equal
//! byte for byte. The scoring workload: every paragraph of the shared PII corpus (Debian
//! copyright files, changelogs and manual pages, 53 MB; `PROV_SHARED_DATA`), normalised,
//! scored as sentences with `<s>` and `</s>`. Each side times scoring only (the model loaded
//! first), best of 3; the sums of the scores must agree. The issue's target: scoring at least
//! as fast as KenLM per core. Estimation has no target; its ratio is printed for the record.
//!
//! Run with `cargo bench -p prov-ngram --bench ngram_vs_kenlm` after `scripts/setup`.

#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use prov_ngram::ccnet::normalize;
use prov_ngram::{Arpa, Model, Trainer};
use serde_json::Value;

const RUNS: usize = 3;

/// Python's side: the ARPA path and the run count as arguments, sentences on stdin; prints
/// the best scoring time and the sum of the scores.
const SCRIPT: &str = r#"
import sys, time, kenlm
model = kenlm.Model(sys.argv[1])
sentences = sys.stdin.read().split("\n")[:-1]
best, total = float("inf"), 0.0
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    total = 0.0
    for s in sentences:
        total += model.score(s)
    best = min(best, time.perf_counter() - start)
print(best, total)
"#;

fn paragraphs(path: &Path) -> Vec<String> {
    let file = fs_err::File::open(path).unwrap();
    let reader: Box<dyn std::io::Read> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::GzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let mut out = Vec::new();
    for line in std::io::BufReader::new(reader).lines() {
        let doc: Value = serde_json::from_str(&line.unwrap()).unwrap();
        out.extend(doc["text"].as_str().unwrap().split('\n').map(normalize));
    }
    out
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let shared = std::env::var_os("PROV_SHARED_DATA").map_or_else(|| root.join("../shared/data"), PathBuf::from);
    let (python, lmplz) = (root.join(".venv/bin/python"), root.join(".venv/bin/lmplz"));
    let corpus = root.join("recipes/data/mini-apertus/corpus");
    let pii = shared.join("pii/bench-corpus.jsonl.gz");
    for p in [&python, &lmplz, &corpus, &pii] {
        if !p.exists() {
            println!("skipping: {} missing (scripts/setup, PROV_SHARED_DATA)", p.display());
            return;
        }
    }
    let mut train: Vec<String> = paragraphs(&corpus.join("udhr.jsonl"));
    train.extend(paragraphs(&corpus.join("debian.jsonl")));
    let train: Vec<String> = train
        .into_iter()
        .map(|p| p.split(' ').filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" "))
        .filter(|p| !p.is_empty())
        .collect();
    let tokens: usize = train.iter().map(|s| s.split(' ').count()).sum();

    let start = Instant::now();
    let mut t = Trainer::new(5).unwrap();
    for s in &train {
        t.add_sentence(s.split(' '));
    }
    let text = t.estimate(None).unwrap().write();
    let ours_train = start.elapsed().as_secs_f64();
    let input: String = train.iter().flat_map(|s| [s.as_str(), "\n"]).collect();
    let tmp = std::env::temp_dir().display().to_string();
    let start = Instant::now();
    let theirs = prov_testkit::pipe(&lmplz, &["-o", "5", "-S", "1G", "-T", &tmp], input.as_bytes());
    let lmplz_train = start.elapsed().as_secs_f64();
    assert!(theirs == text.as_bytes(), "the estimates differ");
    println!("\nestimating a 5-gram model of {tokens} tokens, one core (lmplz uses its own threads)");
    println!("{:<34} {:>9.3} s", "prov-ngram", ours_train);
    println!(
        "{:<34} {:>9.3} s   (prov-ngram takes {:.1}x as long)",
        "KenLM lmplz",
        lmplz_train,
        ours_train / lmplz_train
    );

    let dir = tempfile::tempdir().unwrap();
    let arpa = dir.path().join("model.arpa");
    fs_err::write(&arpa, &text).unwrap();
    let model = Model::new(&Arpa::parse(&text).unwrap());
    let held_out = paragraphs(&pii);
    let words: usize = held_out.iter().map(|s| s.split_ascii_whitespace().count() + 1).sum();
    let (mut best, mut total) = (f64::INFINITY, 0f64);
    for _ in 0..RUNS {
        let start = Instant::now();
        total = held_out.iter().map(|s| f64::from(model.score_sentence(s))).sum();
        best = best.min(start.elapsed().as_secs_f64());
    }
    let input: String = held_out.iter().flat_map(|s| [s.as_str(), "\n"]).collect();
    let out = prov_testkit::pipe(&python, &["-c", SCRIPT, arpa.to_str().unwrap(), &RUNS.to_string()], input.as_bytes());
    let out = String::from_utf8(out).unwrap();
    let mut fields = out.split_whitespace();
    let kenlm: f64 = fields.next().unwrap().parse().unwrap();
    let kenlm_total: f64 = fields.next().unwrap().parse().unwrap();
    assert!(kenlm_total.to_bits() == total.to_bits(), "the scores differ: {total} against {kenlm_total}");
    println!(
        "\nscoring {} sentences ({words} words with </s>) of the PII corpus, one core, best of {RUNS}",
        held_out.len()
    );
    println!("{:<34} {:>9.3} s {:>10.2} M words/s", "prov-ngram", best, words as f64 / best / 1e6);
    println!(
        "{:<34} {:>9.3} s {:>10.2} M words/s",
        "kenlm (Python module, C++ query)",
        kenlm,
        words as f64 / kenlm / 1e6
    );
    let r = kenlm / best;
    println!("speed-up: {r:.2}x (target >= 1x kenlm per core: {})", if r >= 1.0 { "met" } else { "NOT met" });
}
