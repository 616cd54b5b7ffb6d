//! Provenant's scorer against the `kenlm` Python module (KenLM's own query code, pinned in
//! lockfiles/requirements.txt), on ARPA files Provenant estimated from real text: `kenlm` must
//! load each file, and for every held-out sentence give the same `full_scores` (each word's
//! `log10` probability as the same single-precision float, the matched n-gram length and the
//! out-of-vocabulary flag) and the same `score`.
//!
//! Text: the main job's corpus (UDHR translations in 400+ languages and Debian fortunes),
//! lowercased and split at whitespace; the models are estimated from every fourth document
//! and scored on every fourth from the third on, which holds unseen words, unseen contexts
//! and whole unseen languages, plus edge cases (an empty sentence, the markers `<s>`, `</s>`
//! and `<unk>` as words, a word repeated past the order). Orders 2, 3 and 5. Without `.venv`
//! or the corpus the test fails under `CI=true` and is skipped elsewhere.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use prov_ngram::{Arpa, Model, Trainer};

mod common;
use serde_json::Value;

/// Python's side: the ARPA path is the first argument; one sentence per input line; per
/// sentence one JSON line `[score, [[prob, ngram_length, oov], ...]]`, floats as `repr`.
const SCRIPT: &str = r#"
import json, sys
import kenlm
model = kenlm.Model(sys.argv[1])
out = []
for s in sys.stdin.read().split("\n")[:-1]:
    out.append(json.dumps([model.score(s), [list(w) for w in model.full_scores(s)]]))
sys.stdout.write("\n".join(out) + "\n")
"#;

#[test]
fn scores_equal_kenlms_on_held_out_real_text() {
    let (Some(python), Some(train), Some(mut held_out)) =
        (prov_testkit::venv_python(), common::sentences(0, 4), common::sentences(2, 4))
    else {
        return;
    };
    held_out.extend(
        [
            "",
            "<s> die würde </s> des <unk> menschen",
            "la la la la la la la la la la",
            "zzzz-unseen-word die würde des menschen ist unantastbar",
        ]
        .map(String::from),
    );
    let dir = tempfile::tempdir().unwrap();
    for order in [2, 3, 5] {
        let mut t = Trainer::new(order).unwrap();
        for s in &train {
            t.add_sentence(s.split(' '));
        }
        let text = t.estimate(None).unwrap().write();
        let path = dir.path().join(format!("o{order}.arpa"));
        fs_err::write(&path, &text).unwrap();
        let model = Model::new(&Arpa::parse(&text).unwrap());

        let input: String = held_out.iter().flat_map(|s| [s.as_str(), "\n"]).collect();
        let out = prov_testkit::pipe(&python, &["-c", SCRIPT, path.to_str().unwrap()], input.as_bytes());
        let theirs: Vec<Value> =
            String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(theirs.len(), held_out.len());
        let (mut words, mut oov, mut longest) = (0, 0, 0);
        for (s, reference) in held_out.iter().zip(&theirs) {
            let ours = model.full_scores(s);
            let expected = reference[1].as_array().unwrap();
            assert_eq!(ours.len(), expected.len(), "order {order}: `{s}`");
            for (w, e) in ours.iter().zip(expected) {
                let prob = e[0].as_f64().unwrap() as f32;
                assert_eq!(w.log_prob.to_bits(), prob.to_bits(), "order {order}: `{s}`: {w:?} against {e}");
                assert_eq!(w.ngram_length as u64, e[1].as_u64().unwrap(), "order {order}: `{s}`");
                assert_eq!(w.oov, e[2].as_bool().unwrap(), "order {order}: `{s}`");
                words += 1;
                oov += usize::from(w.oov);
                longest = longest.max(w.ngram_length);
            }
            let score = reference[0].as_f64().unwrap() as f32;
            assert_eq!(model.score_sentence(s).to_bits(), score.to_bits(), "order {order}: `{s}`");
        }
        // The held-out text reaches the highest order and holds unseen words.
        assert_eq!(longest, order);
        assert!(oov > 1000 && words > 100_000, "{oov} unseen of {words} words");
    }
}
