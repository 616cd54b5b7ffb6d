//! Quality tiers end to end on real text (EuroLLM's EuroFilter step, §2.3, with the stand-in
//! scorer): `quality-train` fits the scorer to labelled UDHR articles of the quickstart (40
//! languages) and reports its held-out error; three `quality` stages keep the high, medium and
//! low tiers. The pinned model file is applied independently: Python reads it with plain
//! `float()`, computes the features with scikit-learn's `HashingVectorizer` and the scores with
//! `NumPy`, which must equal every ledger row's score and tier. The three tiers partition the
//! corpus, and the run replays bit for bit.
//!
//! The labels here are made by a rule the test states (from the share of a text's letters
//! that are vowels): what counts is that the scorer learns a real signal from text, not the
//! rule.

use std::collections::BTreeMap;
use std::path::Path;

use prov_dataset::LedgerDecision;
use serde_json::Value;

use crate::common::{Project, ledger_rows, venv_python};

/// Python's side: argv[1] the model file; stdin JSON `{"texts", "cutoffs"}`; out, per text,
/// `[score, tier]`.
const APPLY: &str = r#"
import json, sys
import numpy as np
from sklearn.feature_extraction.text import HashingVectorizer
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
assert lines[0] == "prov-quality 1" and lines[-1] == ""
field = lambda i, name: lines[i].split(" ")[1] if lines[i].split(" ")[0] == name else sys.exit(f"line {i + 1}")
f, lo, hi = int(field(1, "n_features")), int(field(2, "min_n")), int(field(3, "max_n"))
intercept = float(field(4, "intercept"))
weights = np.array([float(x) for x in lines[5:-1]])
assert len(weights) == f
job = json.load(sys.stdin)
X = HashingVectorizer(analyzer="char_wb", ngram_range=(lo, hi), n_features=f, alternate_sign=True, norm="l2").transform(job["texts"])
scores = np.clip(intercept + X @ weights, 0.0, 5.0)
low, high = job["cutoffs"]
tiers = ["high" if s >= high else "medium" if s >= low else "low" for s in scores]
print(json.dumps([[float(s), t] for s, t in zip(scores, tiers)]))
"#;

/// The labels' rule: ten times the share of a text's letters that are the five Latin vowels,
/// at most 5 (2.8 to 5 on the sample, spread 0.43).
fn vowel_share(text: &str) -> f64 {
    let letters = text.chars().filter(|c| c.is_alphabetic()).count().max(1) as f64;
    let vowels = text.chars().filter(|c| "aeiouAEIOU".contains(*c)).count() as f64;
    (10.0 * vowels / letters).min(5.0)
}

/// Each document's tier and score, as the ledgers of the three `quality` stages record them;
/// checks that every ledger records every document alike and that the tiers partition them.
fn tiers(p: &Project, stage: &dyn Fn(&str) -> Value) -> BTreeMap<String, (String, f64)> {
    let mut tier_of: BTreeMap<String, (String, f64)> = BTreeMap::new();
    let mut kept = 0;
    for (name, tier) in [("top", "high"), ("middle", "medium"), ("bottom", "low")] {
        let rows = ledger_rows(p, stage(name)["outputs"]["ledger"].as_str().unwrap());
        assert_eq!(rows.len(), 248);
        for r in &rows {
            let evidence = r.evidence.as_ref().unwrap();
            let here = (evidence["tier"].as_str().unwrap().to_owned(), evidence["score"].as_f64().unwrap());
            assert_eq!(r.rule, format!("quality:{}", here.0));
            assert_eq!(r.decision == LedgerDecision::Kept, here.0 == tier, "{r:?}");
            kept += usize::from(here.0 == tier);
            let before = tier_of.insert(r.id.clone(), here.clone());
            assert!(before.is_none_or(|b| b == here), "{}: the stages disagree", r.id);
        }
        let dataset = &p.json(&["show", stage(name)["outputs"]["dataset"].as_str().unwrap()])[0]["data"]["record"];
        let kept_rows = rows.iter().filter(|r| r.decision == LedgerDecision::Kept).count();
        assert_eq!(dataset["rows"].as_u64(), Some(kept_rows as u64));
    }
    assert_eq!(kept, 248, "the tiers partition the corpus");
    for t in ["high", "medium", "low"] {
        assert!(tier_of.values().any(|(x, _)| x == t), "tier {t} is used");
    }
    tier_of
}

/// The pinned file, applied by scikit-learn and `NumPy`, gives every ledger score and tier.
fn scikit_learn_agrees(model: &Path, texts: &BTreeMap<String, String>, tier_of: &BTreeMap<String, (String, f64)>) {
    let Some(python) = venv_python() else { return };
    let job = serde_json::json!({"texts": texts.values().collect::<Vec<_>>(), "cutoffs": [3.9, 4.4]});
    let out = prov_testkit::pipe(&python, &["-c", APPLY, model.to_str().unwrap()], job.to_string().as_bytes());
    let theirs: Vec<(f64, String)> = serde_json::from_slice(&out).unwrap();
    let mut largest = 0.0f64;
    for (id, (score, tier)) in texts.keys().zip(&theirs) {
        let (our_tier, our_score) = &tier_of[id];
        largest = largest.max((our_score - score).abs());
        if (score - 3.9).abs() > 1e-9 && (score - 4.4).abs() > 1e-9 {
            assert_eq!(our_tier, tier, "{id}");
        }
    }
    eprintln!("quality: largest |score difference| against scikit-learn and NumPy: {largest:e}");
    assert!(largest < 1e-12, "{largest}");
}

/// `prov explain quality` gives a removed document's ledger score and tier, and its n-gram
/// parts add up, with the intercept, to the score before clipping.
fn explain_agrees(
    p: &Project,
    model: &Path,
    texts: &BTreeMap<String, String>,
    tier_of: &BTreeMap<String, (String, f64)>,
) {
    let (id, (tier, score)) = tier_of.iter().find(|(_, (t, _))| t == "low").unwrap();
    let args = ["--json", "explain", "quality", "--model", model.to_str().unwrap(), "--cutoffs", "3.9,4.4"];
    let out = p.prov_with_stdin(&[&args[..], &["--keep", "high", "--top", "100000"]].concat(), &texts[id]);
    let said: Value = serde_json::from_str(out.success().stdout().trim()).unwrap();
    let said = &said["data"];
    assert_eq!((said["rule"].as_str(), said["decision"].as_str()), (Some("quality:low"), Some("removed")), "{said}");
    assert_eq!((said["tier"].as_str(), said["score"].as_f64()), (Some(tier.as_str()), Some(*score)), "{said}");
    let parts: f64 = ["raised", "lowered"]
        .iter()
        .flat_map(|k| said[*k].as_array().unwrap().iter().map(|p| p["part"].as_f64().unwrap()))
        .sum();
    let sum = parts + said["intercept"].as_f64().unwrap();
    assert!((sum - said["raw"].as_f64().unwrap()).abs() < 1e-9, "{sum} vs {said}");
}

fn recipe() -> String {
    let tier = |keep: &str| {
        format!(
            "    kind: quality\n    inputs: {{docs: shards, model: scorer.model}}\n    params: {{cutoffs: [3.9, 4.4], keep: [{keep}]}}\n"
        )
    };
    format!(
        "schema: 1\nname: tiers\nseed: 1\nsources:\n  udhr:\n    path: data/quickstart/udhr-sample.jsonl\n    license: MIT\n\
         \x20 labels:\n    path: data/labels.jsonl\n    license: MIT\n\
         stages:\n  shards:\n    kind: shard\n    inputs: {{docs: udhr}}\n    params: {{shards: 3}}\n\
         \x20 scorer:\n    kind: quality-train\n    inputs: {{docs: shards, labels: labels}}\n    params: {{n_features: 512, hold_out: 5}}\n\
         \x20 top:\n{}  middle:\n{}  bottom:\n{}",
        tier("high"),
        tier("medium"),
        tier("low")
    )
}

#[test]
fn quality_tiers_are_fitted_pinned_applied_independently_and_replayed() {
    let p = Project::with_recipes();
    let sample = fs_err::read_to_string(p.path("recipes/data/quickstart/udhr-sample.jsonl")).unwrap();
    let texts: BTreeMap<String, String> = sample
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|d| (d["id"].as_str().unwrap().to_owned(), d["text"].as_str().unwrap().to_owned()))
        .collect();
    let mut labels = String::new();
    for (id, t) in &texts {
        labels.push_str(&serde_json::json!({"id": id, "score": vowel_share(t)}).to_string());
        labels.push('\n');
    }
    p.write("recipes/data/labels.jsonl", &labels);
    p.write("recipes/tiers.yaml", &recipe());
    let lines = p.json(&["run", "recipes/tiers.yaml"]);
    let stage =
        |name: &str| lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == name).unwrap()["data"].clone();

    // The scorer learned: its held-out error is under half the labels' spread.
    let stats = p.json(&["show", stage("scorer")["manifest"].as_str().unwrap()])[0]["data"]["record"]["stats"].clone();
    assert_eq!((stats["labels"].as_u64(), stats["unmatched_labels"].as_u64()), (Some(248), Some(0)), "{stats}");
    assert_eq!((stats["trained"].as_u64(), stats["held_out"]["documents"].as_u64()), (Some(199), Some(49)), "{stats}");
    let scores: Vec<f64> = texts.values().map(|t| vowel_share(t)).collect();
    let mean = scores.iter().sum::<f64>() / scores.len() as f64;
    let spread = (scores.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / scores.len() as f64).sqrt();
    let held_rmse = stats["held_out"]["rmse"].as_f64().unwrap();
    eprintln!("quality-train: held-out RMSE {held_rmse:.3} against the labels' spread {spread:.3}");
    assert!(held_rmse < spread / 2.0, "{stats}");

    let tier_of = tiers(&p, &stage);
    let store = prov_store::Store::open(&p.path(".prov"), prov_store::Access::Shared, true).unwrap();
    let digest = stage("scorer")["outputs"]["model"].as_str().unwrap().parse().unwrap();
    let model = p.write("scorer-model.txt", std::str::from_utf8(&store.read(&digest).unwrap()).unwrap());
    drop(store);
    scikit_learn_agrees(&model, &texts, &tier_of);
    explain_agrees(&p, &model, &texts, &tier_of);
    card_shows_the_tiers(&p, &lines, &tier_of);
    p.prov(&["replay", "lockfiles/tiers.lock"]).success();
}

/// `prov card` has the tiers per language, adding up to the ledgers' counts, and what the
/// `quality` stage the output went through kept.
fn card_shows_the_tiers(p: &Project, lines: &[Value], tier_of: &BTreeMap<String, (String, f64)>) {
    let run = lines.iter().find(|l| l["type"] == "run").unwrap()["data"]["run_manifest"].as_str().unwrap().to_owned();
    p.prov(&["card", &run, "--format", "hf", "--out", "card"]).success();
    let card = fs_err::read_to_string(p.path("card/README.md")).unwrap();
    let section = &card[card.find("## Quality tiers").expect("a tiers section")..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let count = |t: &str| tier_of.values().filter(|(x, _)| x == t).count();
    // The card describes the run's output, the last tier's dataset in plan order: only the
    // stage it went through is listed, though its ledger (and so the table) tiers every
    // document.
    let listed: Vec<(&str, &str)> = [("top", "high"), ("middle", "medium"), ("bottom", "low")]
        .into_iter()
        .filter(|(stage, _)| section.contains(&format!("| `{stage}` |")))
        .collect();
    assert_eq!(listed.len(), 1, "{section}");
    let (stage, tier) = listed[0];
    let row = format!("| `{stage}` | 3.9, 4.4 | {tier} | {} |", count(tier));
    assert!(section.contains(&row), "{row}\n{section}");
    // The language rows and the "other languages" row add up to the tiers' totals.
    let mut sums = [0usize; 3];
    for row in section.lines().filter(|l| l.starts_with("| `") || l.contains(" other languages |")) {
        let cells: Vec<&str> = row.split(" | ").collect();
        if cells.len() == 5 && !row.contains("3.9, 4.4") {
            for (k, sum) in sums.iter_mut().enumerate() {
                *sum += cells[k + 1].replace(',', "").parse::<usize>().unwrap();
            }
        }
    }
    assert_eq!(sums, [count("high"), count("medium"), count("low")], "{section}");
}

/// A label names one document: a corpus where a labelled id occurs twice is refused, naming
/// the id, rather than fitted under a label given for one of them.
#[test]
fn a_labelled_id_that_occurs_twice_is_refused() {
    let p = Project::new();
    p.write(
        "recipes/data/docs.jsonl",
        "{\"id\": \"x\", \"text\": \"eins zwei drei\"}\n{\"id\": \"y\", \"text\": \"one two three\"}\n{\"id\": \"x\", \"text\": \"un deux trois\"}\n",
    );
    p.write("recipes/data/labels.jsonl", "{\"id\": \"x\", \"score\": 4}\n{\"id\": \"y\", \"score\": 1}\n");
    p.write(
        "recipes/dup.yaml",
        "schema: 1\nname: dup\nseed: 1\nsources:\n  docs:\n    path: data/docs.jsonl\n    license: MIT\n\
         \x20 labels:\n    path: data/labels.jsonl\n    license: MIT\n\
         stages:\n  shards:\n    kind: shard\n    inputs: {docs: docs}\n    params: {shards: 2}\n\
         \x20 scorer:\n    kind: quality-train\n    inputs: {docs: shards, labels: labels}\n    params: {n_features: 16, hold_out: 0}\n",
    );
    let r = p.prov(&["run", "recipes/dup.yaml"]);
    assert!(r.exit(1).stderr().contains("document id `x` is labelled and occurs twice"), "{}", r.describe());
}

/// The tiers feeding EuroLLM's phases, audited: the quality tiers of the quickstart's UDHR are
/// tokenised and drawn by a three-phase `pretrain` (low and medium, then medium and high, then
/// high only, with longer samples), and the `tiers-by-phase` claim follows each phase's
/// sources back to their `quality` stages and scores their kept documents again. It holds as
/// claimed; it fails when the claim reserves the second phase for the high tier, and when the
/// high tier's output is forged to hold a low-tier document (every digest and root
/// recomputed: the tokens the phase drew then come from no stage of the run).
#[test]
fn phases_draw_from_their_tiers_and_the_claim_checks_it() {
    use crate::test_audit::{audit_forged, keep_row};
    use prov_audit::Outcome;
    let p = Project::with_recipes();
    let sample = fs_err::read_to_string(p.path("recipes/data/quickstart/udhr-sample.jsonl")).unwrap();
    let labels: String = sample
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|d| {
            serde_json::json!({"id": d["id"], "score": vowel_share(d["text"].as_str().unwrap())}).to_string() + "\n"
        })
        .collect();
    p.write("recipes/data/labels.jsonl", &labels);
    let tokens = |name: &str, tier: &str, seq_len: u32| {
        format!(
            "  {name}:\n    kind: tokenize\n    inputs: {{docs: {tier}.dataset, tokenizer: tokenizer.tokenizer}}\n    params: {{seq_len: {seq_len}}}\n"
        )
    };
    let recipe = recipe().replace("name: tiers", "name: phased-tiers")
        + "  tokenizer:\n    kind: tokenizer\n    inputs: {docs: shards}\n    params: {vocab_size: 512}\n"
        + &tokens("low", "bottom", 32)
        + &tokens("mid", "middle", 32)
        + &tokens("high", "top", 32)
        + &tokens("long", "top", 64)
        + "  pretrain:\n    kind: pretrain\n\
           \x20   inputs: {tokenizer: tokenizer.tokenizer, low-tokens: low.tokens, low-order: low.order, mid-tokens: mid.tokens,\n\
           \x20            mid-order: mid.order, high-tokens: high.tokens, high-order: high.order, long-tokens: long.tokens,\n\
           \x20            long-order: long.order}\n\
           \x20   params:\n      batch_size: 2\n      lr: 0.003\n      goldfish: null\n\
           \x20     model: {architecture: llama, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1,\n\
           \x20             num_attention_heads: 2, num_key_value_heads: 1}\n\
           \x20     phases:\n\
           \x20       - {name: one, steps: 6, mixture: {low: 1, mid: 1}}\n\
           \x20       - {name: two, steps: 4, lr_end: 0.1, mixture: {mid: 1, high: 1}}\n\
           \x20       - {name: three, steps: 3, lr_end: 0, rope_theta: 1000000, mixture: {long: 1}}\n";
    p.write("recipes/phased-tiers.yaml", &recipe);
    p.prov(&["run", "recipes/phased-tiers.yaml"]).success();
    let policy =
        |phases: &str| format!("schema: 1\nname: tiers\nclaims:\n  - kind: tiers-by-phase\n    phases: {phases}\n");
    let honest = policy("[[low, medium], [medium, high], [high]]\n    cutoffs: [3.9, 4.4]");
    p.write("honest.yaml", &honest);
    p.prov(&["audit", "lockfiles/phased-tiers.lock", "--policy", "honest.yaml"]).success();

    p.write("strict.yaml", &policy("[[low, medium], [high], [high]]"));
    let run = p.prov(&["audit", "lockfiles/phased-tiers.lock", "--policy", "strict.yaml"]);
    let said = run.exit(4).stdout();
    assert!(said.contains("phase 2 `two`: source `mid` comes from `middle`, which keeps tier `medium`"), "{said}");
    // Tiers drawn at other cut-offs than the claimed ones.
    p.write("cutoffs.yaml", &policy("[[low, medium], [medium, high], [high]]\n    cutoffs: [0, 0]"));
    let run = p.prov(&["audit", "lockfiles/phased-tiers.lock", "--policy", "cutoffs.yaml"]);
    let said = run.exit(4).stdout();
    assert!(said.contains("whose cut-offs Some([3.9, 4.4]) are not the claimed [0.0, 0.0]"), "{said}");

    let forged = audit_forged(
        &p,
        ("lockfiles/phased-tiers.lock", &honest),
        "top",
        &prov_audit::StageRescan,
        |rows, out, input| {
            let evidence = serde_json::json!({"tier": "high"});
            keep_row(rows, out, input, |r| r.rule == "quality:low", ("quality:high", Some(evidence)));
        },
    );
    let c = forged.iter().find(|c| c.kind == "tiers-by-phase").unwrap();
    assert_eq!(c.outcome, Outcome::Fails, "{c:#?}");
    assert!(c.reasons.iter().any(|r| r.contains("written by no stage of the run")), "{c:#?}");
}
