//! The AFM reference recipe, recipes/mini-afm.yaml, on its real data (the main job's corpus,
//! fetched by scripts/setup from npm and Debian, pinned by version and hash, and the
//! benchmark, profanity and math lists and the 19 code packages scripts/make-afm-data.py
//! derives from pinned packages): the committed lockfile is what the recipe locks to today,
//! every stage re-executed in an empty store gives exactly the outputs of the committed run
//! (`manifests/mini-afm/`), the run holds the AFM audit policy (`recipes/policies/afm.yaml`:
//! the decontamination rule, recounted; the code licenses, every package judged again; the
//! palettized model's bits per weight, re-derived from its weights; and replay), the graded
//! preference data equal an independent implementation, and `prov card` renders the filters.

use serde_json::Value;

use crate::common::{Project, main_job_data_fetched, repo_root};

fn stage<'a>(lines: &'a [Value], name: &str) -> &'a Value {
    lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == name).unwrap_or_else(|| panic!("stage {name}"))
}

fn record(p: &Project, lines: &[Value], name: &str) -> Value {
    let digest = &stage(lines, name)["data"]["manifest"];
    p.json(&["show", digest.as_str().expect("a digest")])[0]["data"]["record"].clone()
}

#[test]
fn mini_afm_runs_replays_bit_for_bit_and_holds_its_audit_policy() {
    if !main_job_data_fetched()
        || prov_testkit::require(
            repo_root().join("recipes/data/mini-afm/code/itoa-1.0.11/Cargo.toml"),
            "run `scripts/setup` (it runs scripts/make-afm-data.py)",
        )
        .is_none()
    {
        return;
    }
    let (p, lines) = crate::common::replay_reference_recipe("mini-afm", 35);

    // Each outcome of the decontamination rule occurs, and the profanity lists apply per
    // language.
    let decontaminate = record(&p, &lines, "decontaminate")["stats"].clone();
    for rule in ["clean", "common-usage", "contaminated"] {
        let n = decontaminate["by_rule"][format!("ngram-decontaminate:{rule}")]["documents"].as_u64();
        assert!(n.is_some_and(|n| n > 0), "{rule}: {decontaminate}");
    }
    let profanity = record(&p, &lines, "profanity")["stats"].clone();
    assert_eq!(profanity["terms"].as_object().unwrap().len(), 7, "{profanity}");
    let tokenizer = record(&p, &lines, "tokenizer")["stats"].clone();
    assert_eq!(tokenizer["vocab_size"], 4096, "{tokenizer}");
    let pretrain = record(&p, &lines, "pretrain");
    assert_eq!(pretrain["config"]["optimizer"]["kind"], "rmsprop-momentum");
    assert_eq!(pretrain["config"]["optimizer"]["mup_base_hidden_size"], 32);
    assert_eq!(pretrain["config"]["phases"].as_array().map(Vec::len), Some(2));
    let distill = record(&p, &lines, "distill");
    assert_eq!(distill["config"]["distillation"]["teacher_weight"], 0.9);
    let code = record(&p, &lines, "code")["stats"].clone();
    let allowed = code["packages"].as_object().unwrap().values().filter(|v| v["verdict"]["rule"] == "code:allowed");
    assert_eq!(allowed.count(), 9, "{code}");

    // Post-training (§4): the graded preference data equal an independent implementation of the
    // book's rules (PyPI sacrebleu for chrF), response by response and pair by pair; the
    // reward model ranks its training pairs better than chance; best-of-N answers every prompt.
    preference_data_equals_the_reference(&p, &lines);
    let reward_model = record(&p, &lines, "reward-model")["stats"].clone();
    assert!(reward_model["ranking_accuracy"].as_f64().is_some_and(|a| a > 0.5), "{reward_model}");
    best_of_n_scores_as_reward_model_score_does(&p, &lines);
    let best = record(&p, &lines, "best-of-n")["stats"].clone();
    assert_eq!(
        (best["examples"].as_u64(), best["prompts_not_in_every_source"].as_u64()),
        (Some(32), Some(0)),
        "{best}"
    );

    let r = p.prov(&["audit", "lockfiles/mini-afm.lock", "--policy", "recipes/policies/afm.yaml"]);
    let out = r.success().stdout();
    for claim in ["common-usage-decontamination", "code-licenses", "bits-per-weight"] {
        assert!(out.contains(&format!("{claim}: HOLDS")), "{claim}: {out}");
    }
    let palettize = record(&p, &lines, "palettize")["stats"].clone();
    assert!(palettize["bits_per_weight"].as_f64().is_some_and(|b| b <= 3.7), "{palettize}");

    p.prov(&["card", "lockfiles/mini-afm.lock", "--dataset", "decontaminate", "--out", "card"]).success();
    let card = fs_err::read_to_string(p.path("card/README.md")).unwrap();
    for filter in ["`profanity`", "`decontaminate`"] {
        assert!(card.contains(filter), "{filter} missing from the card");
    }
}

/// `tests/python/preference_data_reference.py` (written from the book's "Graded preference
/// data" alone, chrF from PyPI sacrebleu) on the run's completions and the profanity lists
/// gives the stage's output: every grade, level, pair and term count exactly, the measurements
/// within 1e-9.
fn preference_data_equals_the_reference(p: &Project, lines: &[Value]) {
    let Some(python) = crate::common::venv_python() else { return };
    let outputs = |name: &str, output: &str| {
        let digest = stage(lines, name)["data"]["outputs"][output].as_str().expect("a digest").to_owned();
        p.object_file(&digest)
    };
    let params = record(p, lines, "preferences")["config"].to_string();
    let script = repo_root().join("tests/python/preference_data_reference.py");
    let out = std::process::Command::new(python)
        .args([script.as_os_str(), outputs("completions", "completions").as_os_str()])
        .arg(repo_root().join("recipes/data/mini-afm/profanity/en.txt"))
        .arg(&params)
        .output()
        .expect("python runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let theirs: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let ours: Vec<Value> = fs_err::read_to_string(outputs("preferences", "preferences"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(ours.len(), theirs.len());
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!((&a["id"], &a["pairs"]), (&b["id"], &b["pairs"]));
        for (x, y) in a["responses"].as_array().unwrap().iter().zip(b["responses"].as_array().unwrap()) {
            assert_eq!((&x["grades"], &x["unsafe_terms"], &x["ids"]), (&y["grades"], &y["unsafe_terms"], &y["ids"]));
            for field in ["chrf", "precision", "recall", "length_ratio"] {
                let (u, v) = (x[field].as_f64().unwrap(), y[field].as_f64().unwrap());
                assert!((u - v).abs() < 1e-9, "{field} of a response to {}: {u} vs {v}", a["id"]);
            }
        }
    }
}

/// Each answer best-of-n keeps from the SFT model's completions carries the reward
/// `reward-model-score` gives that completion with the same reward model, to the bit.
fn best_of_n_scores_as_reward_model_score_does(p: &Project, lines: &[Value]) {
    let read = |name: &str, output: &str| -> Vec<Value> {
        let digest = stage(lines, name)["data"]["outputs"][output].as_str().expect("a digest").to_owned();
        let text = fs_err::read_to_string(p.object_file(&digest)).unwrap();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let (chosen, scores) = (read("best-of-n", "examples"), read("sft-scores", "rewards"));
    let from_sft: Vec<&Value> = chosen.iter().filter(|c| c["source"] == "sft").collect();
    assert!(!from_sft.is_empty());
    for c in from_sft {
        let line = scores.iter().find(|l| l["id"] == c["id"]).expect("the prompt is scored");
        assert_eq!(line["rewards"][c["completion"].as_u64().unwrap() as usize], c["reward"], "{c}");
    }
}
