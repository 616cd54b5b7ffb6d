//! Provenant's modified Kneser-Ney estimate against KenLM's `lmplz` itself (built by
//! `scripts/build-lmplz` from the KenLM source that lockfiles/requirements.txt pins), on real
//! text: every line of a quarter of the main job's corpus (UDHR translations in 400+
//! languages and Debian fortunes, `recipes/data/mini-apertus/corpus/`), lowercased and split
//! at whitespace, about 330,000 tokens. The ARPA files must be equal byte for byte, for
//! orders 1 to 5: the same n-grams in the same order, every probability and back-off weight
//! the same single-precision float printed the same way.
//!
//! Also: a corpus too small for the closed-form discounts fails in both (exit status and
//! error) and, with KenLM's fallback discounts, gives the same file again. Without `.venv`'s
//! `lmplz` or the corpus the test fails under `CI=true` and is skipped elsewhere.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use prov_ngram::{Discounts, TrainError, Trainer};

mod common;

/// `lmplz -o ORDER` on `sentences`, with its extra arguments; its ARPA text, or its stderr.
fn lmplz(lmplz: &Path, order: usize, extra: &[&str], sentences: &[String]) -> Result<String, String> {
    let mut child = Command::new(lmplz)
        .args(["-o", &order.to_string(), "-S", "256M", "-T", &std::env::temp_dir().display().to_string()])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input: String = sentences.iter().flat_map(|s| [s.as_str(), "\n"]).collect();
    let feeder = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap().unwrap();
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn ours(order: usize, sentences: &[String], fallback: Option<Discounts>) -> Result<String, TrainError> {
    let mut t = Trainer::new(order).unwrap();
    for s in sentences {
        t.add_sentence(s.split(' '));
    }
    Ok(t.estimate(fallback)?.write())
}

#[test]
fn estimates_equal_lmplz_byte_for_byte_on_real_text() {
    let (Some(bin), Some(sentences)) = (
        prov_testkit::require(prov_testkit::repo_root().join(".venv/bin/lmplz"), "KenLM's lmplz: run `scripts/setup`"),
        common::sentences(0, 4),
    ) else {
        return;
    };
    let tokens: usize = sentences.iter().map(|s| s.split(' ').count()).sum();
    assert!(tokens > 250_000, "{tokens} tokens");
    for order in 1..=5 {
        let theirs = lmplz(&bin, order, &[], &sentences).unwrap_or_else(|e| panic!("lmplz -o {order}: {e}"));
        let mine = ours(order, &sentences, None).unwrap();
        if mine != theirs {
            let line = mine.lines().zip(theirs.lines()).position(|(a, b)| a != b);
            panic!("order {order}: the ARPA files differ first at line {line:?}");
        }
    }
}

#[test]
fn small_corpora_fail_alike_and_fall_back_alike() {
    let Some(bin) =
        prov_testkit::require(prov_testkit::repo_root().join(".venv/bin/lmplz"), "KenLM's lmplz: run `scripts/setup`")
    else {
        return;
    };
    // No unigram has an adjusted count of 3: the closed form of the discounts does not exist
    // from the first order on.
    let tiny: Vec<String> = ["the cat sat on the mat", "the dog sat on the log", "a cat and a dog", "the cat ate"]
        .map(String::from)
        .to_vec();
    let err = lmplz(&bin, 3, &[], &tiny).unwrap_err();
    assert!(err.contains("Could not calculate Kneser-Ney discounts for 1-grams with adjusted count 4"), "{err}");
    assert!(matches!(ours(3, &tiny, None), Err(TrainError::Discount { order: 1, .. })));
    let theirs = lmplz(&bin, 3, &["--discount_fallback"], &tiny).unwrap();
    assert_eq!(ours(3, &tiny, Some(Discounts([0.5, 1.0, 1.5]))).unwrap(), theirs);
}
