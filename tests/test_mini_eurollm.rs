//! The EuroLLM reference recipe, recipes/mini-eurollm.yaml, on its real data (the main job's
//! corpus, fetched by scripts/setup from npm and Debian, pinned by version and hash, and the
//! labels and Bifixer rules scripts/make-eurollm-data.py derives from pinned material): the
//! committed lockfile is what the recipe locks to today, every stage re-executed in an empty
//! store gives exactly the outputs of the committed run (`manifests/mini-eurollm/`), the run
//! holds the EuroLLM audit policy (`recipes/policies/eurollm.yaml`: heuristics, parallel-data
//! thresholds, tiers by phase), and `prov card` renders the documents' tiers and filter funnel
//! and the sentence pairs' filters.

use serde_json::Value;

use crate::common::{Project, main_job_data_fetched, repo_root};

fn stage<'a>(lines: &'a [Value], name: &str) -> &'a Value {
    lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == name).unwrap_or_else(|| panic!("stage {name}"))
}

fn record(p: &Project, digest: &Value) -> Value {
    p.json(&["show", digest.as_str().expect("a digest")])[0]["data"]["record"].clone()
}

#[test]
fn mini_eurollm_runs_replays_bit_for_bit_and_holds_its_audit_policy() {
    if !main_job_data_fetched()
        || prov_testkit::require(
            repo_root().join("recipes/data/mini-eurollm/bifixer-rules.json"),
            "run `scripts/setup` (it runs scripts/make-eurollm-data.py)",
        )
        .is_none()
    {
        return;
    }
    let (p, lines) = crate::common::replay_reference_recipe("mini-eurollm", 27);

    // The three tiers feed the three phases, and none is empty.
    for tier in ["low", "medium", "high"] {
        let stats = record(&p, &stage(&lines, tier)["data"]["manifest"])["stats"].clone();
        let kept = stats["by_rule"][format!("quality:{tier}")]["documents"].as_u64().unwrap_or(0);
        assert!(kept > 20, "{tier}: {stats}");
    }
    let pretrain = record(&p, &stage(&lines, "pretrain")["data"]["manifest"]);
    assert_eq!(pretrain["config"]["phases"].as_array().unwrap().len(), 3);
    let pairs = record(&p, &stage(&lines, "pair-score")["data"]["manifest"])["stats"].clone();
    assert!(pairs["by_rule"]["pair-score:kept"]["documents"].as_u64().unwrap() > 300, "{pairs}");

    let r = p.prov(&["audit", "lockfiles/mini-eurollm.lock", "--policy", "recipes/policies/eurollm.yaml"]);
    assert!(r.success().stdout().contains("tiers-by-phase"), "{}", r.describe());

    // A card of the high tier: its filters, the funnel and the tiers; and of the pairs.
    p.prov(&["card", "lockfiles/mini-eurollm.lock", "--dataset", "high", "--out", "card-high"]).success();
    let card = fs_err::read_to_string(p.path("card-high/README.md")).unwrap();
    for section in ["## Compliance filters", "## Quality tiers", "plots/funnel.png"] {
        assert!(card.contains(section), "{section} missing from the high tier's card");
    }
    for filter in ["`langid`", "`heuristics`", "`dedup`", "`perplexity`", "`high`"] {
        assert!(card.contains(filter), "{filter} missing from the high tier's card");
    }
    p.prov(&["card", "lockfiles/mini-eurollm.lock", "--out", "card-pairs"]).success();
    let card = fs_err::read_to_string(p.path("card-pairs/README.md")).unwrap();
    assert!(card.contains("`bifixer`") && card.contains("`pair-score`"), "the pairs' card");
    let r = p.prov(&["card", "lockfiles/mini-eurollm.lock", "--dataset", "pretrain", "--out", "card-x"]);
    assert!(r.exit(1).stderr().contains("no stage `pretrain` with a `dataset` output"), "{}", r.describe());
}
