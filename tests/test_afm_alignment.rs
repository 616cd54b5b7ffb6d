//! AFM's post-training (§4.3, Appendix E) end to end on real parallel text (the quickstart's
//! UDHR articles): graded preference data derived from sampled completions, a reward model
//! trained on them, MDLOO with that reward model, completions of two models scored by it and
//! best-of-N over them as SFT data; the run replays bit for bit.
//!
//! Every statement the stages make is checked from their output files by this test's own
//! arithmetic (the leave-one-out advantages of every MDLOO sample, the best-of-N winner of every
//! prompt), and each is attacked with well-formed input: a reward model exported as if it were
//! a language model, a language model given as MDLOO's reward model, preference pairs naming a
//! response the prompt does not have, completions whose ids are not their text's tokens,
//! candidates sampled for other examples, a reward model sampled from as a policy.

use serde_json::Value;

use crate::common::Project;
use crate::test_adapters::recipe_with_sources;

const TERMS: &str = "  unsafe: {path: data/post/unsafe.txt, license: CC0-1.0}\n";

const STAGES: &str = "  completions:
    kind: sample-completions
    inputs: {model: pretrain.model, examples: pairs.train}
    params: {n: 4, prompts: 8, max_new_tokens: 16}
    seeds: {prompts: 5}
  preferences:
    kind: preference-data
    inputs: {completions: completions.completions, unsafe_terms: unsafe}
    params: {level_margins: [4, 2, 1], recall_levels: [0.1, 0.15], precision_levels: [0.2, 0.25]}
  reward-model:
    kind: reward-model
    inputs: {model: pretrain.model, preferences: preferences.preferences}
    params: {steps: 10, batch_size: 4, lr: 0.003}
  mdloo:
    kind: mdloo
    inputs: {model: pretrain.model, reward_model: reward-model.model, examples: pairs.train}
    params: {iterations: 2, steps_per_iteration: 2, prompts: 2, k: 3, max_new_tokens: 12, lr: 0.001}
  mdloo-completions:
    kind: sample-completions
    inputs: {model: mdloo.model, examples: pairs.train}
    params: {n: 4, prompts: 8, max_new_tokens: 16}
    seeds: {prompts: 5}
  sft-scores:
    kind: reward-model-score
    inputs: {model: reward-model.model, completions: completions.completions}
  mdloo-scores:
    kind: reward-model-score
    inputs: {model: reward-model.model, completions: mdloo-completions.completions}
  best-of-n:
    kind: best-of-n
    inputs:
      model: reward-model.model
      examples: pairs.train
      sft-completions: completions.completions
      mdloo-completions: mdloo-completions.completions
    params: {sources: [sft, mdloo]}
";

/// The recipe of [`recipe_with_sources`] with a context of 256 positions: the translation
/// prompts must leave room for the completions in the model's window.
fn recipe(name: &str, sources: &str, stages: &str) -> String {
    let recipe = recipe_with_sources(name, sources, stages);
    assert!(recipe.contains("params: {seq_len: 64}"), "the base recipe's context changed");
    recipe.replace("params: {seq_len: 64}", "params: {seq_len: 256, epochs: 2}")
}

fn project() -> Project {
    let p = Project::with_recipes();
    crate::test_post_training::write_parallel_udhr(&p);
    // Words the tiny model's completions hold, so that harmlessness has more than one level.
    p.write("recipes/data/post/unsafe.txt", "de\nla\n");
    p.write("recipes/alignment.yaml", &recipe("alignment", TERMS, STAGES));
    p
}

fn outputs<'v>(lines: &'v [Value], name: &str) -> &'v Value {
    &lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == name).unwrap_or_else(|| panic!("{name}"))["data"]
        ["outputs"]
}

fn lines_of(p: &Project, run: &[Value], stage: &str, output: &str) -> Vec<Value> {
    let digest = outputs(run, stage)[output].as_str().unwrap();
    let text = fs_err::read_to_string(p.object_file(digest)).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn stats(p: &Project, run: &[Value], stage: &str) -> Value {
    let line = run.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == stage).unwrap();
    p.json(&["show", line["data"]["manifest"].as_str().unwrap()])[0]["data"]["record"]["stats"].clone()
}

#[test]
fn the_afm_post_training_stages_run_check_out_and_replay() {
    let p = project();
    let run = p.json(&["run", "recipes/alignment.yaml"]);
    assert!(!run.is_empty(), "the run failed: {}", p.prov(&["run", "recipes/alignment.yaml"]).describe());

    // Graded preference data: pairs at more than one level, the unsafe list heard.
    let preferences = stats(&p, &run, "preferences");
    let levels = preferences["levels"].as_object().unwrap();
    assert!(levels.values().filter(|v| v.as_u64().unwrap() > 0).count() >= 2, "{preferences}");
    assert!(preferences["grades"]["harmlessness"][2].as_u64().unwrap() < 32, "{preferences}");
    let reward_model = stats(&p, &run, "reward-model");
    assert!(reward_model["ranking_accuracy"].as_f64().is_some(), "{reward_model}");

    // MDLOO's samples: every advantage is the response's reward minus the mean of the others'.
    let samples = lines_of(&p, &run, "mdloo", "samples");
    assert_eq!(samples.len(), 4, "2 iterations of 2 prompts");
    for line in &samples {
        let responses = line["responses"].as_array().unwrap();
        assert_eq!(responses.len(), 3);
        let rewards: Vec<f64> = responses.iter().map(|r| r["reward"].as_f64().unwrap()).collect();
        for (i, r) in responses.iter().enumerate() {
            let others: f64 = rewards.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, v)| v).sum::<f64>();
            let want = rewards[i] - others / 2.0;
            let got = r["advantage"].as_f64().unwrap();
            assert!((got - want).abs() < 1e-12, "{line}");
        }
        let score = responses[0]["score"].as_f64().unwrap();
        assert!(score.is_finite() && (score - rewards[0]).abs() < 1e3, "{line}");
    }

    // Best-of-N: each prompt's answer is the highest reward of both sources, the first source's
    // on a tie, recomputed here from the completions and the `reward-model-score` files of the
    // same reward model (best-of-n scores by itself, with the same bits).
    let chosen = lines_of(&p, &run, "best-of-n", "examples");
    let sources = [
        ("sft", lines_of(&p, &run, "completions", "completions"), lines_of(&p, &run, "sft-scores", "rewards")),
        (
            "mdloo",
            lines_of(&p, &run, "mdloo-completions", "completions"),
            lines_of(&p, &run, "mdloo-scores", "rewards"),
        ),
    ];
    assert_eq!(chosen.len(), 8, "the same 8 prompts in both sources");
    // The tokenizer's special tokens, from its own file: a completion holding one before its
    // end is passed over.
    let tokenizer: Value = serde_json::from_str(
        &fs_err::read_to_string(p.object_file(outputs(&run, "tokenizer")["tokenizer"].as_str().unwrap())).unwrap(),
    )
    .unwrap();
    let added = tokenizer["added_tokens"].as_array().unwrap();
    let special: Vec<u64> = added.iter().filter(|t| t["special"] == true).map(|t| t["id"].as_u64().unwrap()).collect();
    let end = added.iter().find(|t| t["content"] == "<|end|>").unwrap()["id"].as_u64().unwrap();
    let mut passed_over = 0;
    for example in &chosen {
        let mut best: Option<(&str, usize, f64, String)> = None;
        for (name, completions, rewards) in &sources {
            let at = completions.iter().position(|c| c["id"] == example["id"]).unwrap();
            for (j, c) in completions[at]["completions"].as_array().unwrap().iter().enumerate() {
                let r = rewards[at]["rewards"][j].as_f64().unwrap();
                let text = c["text"].as_str().unwrap().to_owned();
                let ids: Vec<u64> = c["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
                let body = ids.strip_suffix(&[end]).unwrap_or(&ids);
                if text.is_empty() || body.iter().any(|id| special.contains(id)) {
                    passed_over += 1;
                    continue;
                }
                if best.as_ref().is_none_or(|b| r > b.2) {
                    best = Some((name, j, r, text));
                }
            }
        }
        let (source, completion, reward, text) = best.unwrap();
        assert_eq!(example["source"], source, "{example}");
        assert_eq!(example["completion"], completion, "{example}");
        assert_eq!(example["reward"].as_f64(), Some(reward));
        let messages = example["messages"].as_array().unwrap();
        assert_eq!(messages.last().unwrap()["role"], "assistant");
        assert_eq!(messages.last().unwrap()["content"], text.as_str());
    }

    assert_eq!(stats(&p, &run, "best-of-n")["completions_passed_over"], passed_over);

    // The whole run, sampling and the online loop included, replays bit for bit.
    p.prov(&["replay", "lockfiles/alignment.lock"]).success();
    forgeries_are_refused(&p, &run);
}

/// Each statement attacked with well-formed input, in the project of the recorded run (whose
/// stages the variants reuse from the cache).
fn forgeries_are_refused(p: &Project, run: &[Value]) {
    // A reward model is not a language model transformers could load.
    let rm = outputs(run, "reward-model")["model"].as_str().unwrap().to_owned();
    let r = p.prov(&["export", "--out", "hf", &rm]);
    r.exit(1);
    assert!(r.stderr().contains("reward model"), "{}", r.describe());

    // A language model given as MDLOO's reward model is refused, naming the input.
    let stages = STAGES.replace("reward_model: reward-model.model", "reward_model: pretrain.model");
    p.write("recipes/no-heads.yaml", &recipe("no-heads", TERMS, &stages));
    let r = p.prov(&["run", "recipes/no-heads.yaml"]);
    r.exit(1);
    assert!(r.stderr().contains("`reward_model`") && r.stderr().contains("not a reward model"), "{}", r.describe());

    // Preference pairs naming a response the prompt does not have: refused with the line.
    let mut forged = lines_of(p, run, "preferences", "preferences");
    let line = forged.iter().position(|l| !l["pairs"].as_array().unwrap().is_empty()).unwrap();
    forged[line]["pairs"][0]["chosen"] = serde_json::json!(4);
    let text: String = forged.iter().map(|l| l.to_string() + "\n").collect();
    p.write("recipes/data/post/forged-preferences.jsonl", &text);
    let sources = format!("{TERMS}  forged: {{path: data/post/forged-preferences.jsonl, license: MIT}}\n");
    let stages = "  reward-model:
    kind: reward-model
    inputs: {model: pretrain.model, preferences: forged}
    params: {steps: 2, batch_size: 4}
";
    p.write("recipes/forged.yaml", &recipe("forged", &sources, stages));
    let r = p.prov(&["run", "recipes/forged.yaml"]);
    r.exit(1);
    assert!(r.stderr().contains(&format!("line {}: `pairs[0]` names responses 4", line + 1)), "{}", r.describe());

    // Completions whose ids are not the tokens of their text (ids of another tokenizer, the
    // text kept): the reward model refuses to score them, naming the line.
    let mut forged = lines_of(p, run, "completions", "completions");
    let ids = forged[2]["completions"][1]["ids"].as_array().unwrap().len();
    forged[2]["completions"][1]["ids"] = serde_json::json!((0..ids).map(|i| 100 + i).collect::<Vec<_>>());
    let text: String = forged.iter().map(|l| l.to_string() + "\n").collect();
    p.write("recipes/data/post/forged-completions.jsonl", &text);
    let sources = format!("{TERMS}  forged: {{path: data/post/forged-completions.jsonl, license: MIT}}\n");
    let stages = STAGES.to_owned()
        + "  forged-scores:
    kind: reward-model-score
    inputs: {model: reward-model.model, completions: forged}
";
    p.write("recipes/foreign.yaml", &recipe("foreign", &sources, &stages));
    let r = p.prov(&["run", "recipes/foreign.yaml"]);
    r.exit(1);
    assert!(
        r.stderr().contains("line 3: `completions[1].ids` decode to") && r.stderr().contains("another tokenizer"),
        "{}",
        r.describe()
    );

    // Two prompts' ids swapped, ids and references kept: the reward would be for another
    // prompt's conversation than the one written out. Refused, naming the line.
    let mut swapped = lines_of(p, run, "completions", "completions");
    let first = swapped[0]["prompt_ids"].clone();
    swapped[0]["prompt_ids"] = swapped[1]["prompt_ids"].clone();
    swapped[1]["prompt_ids"] = first;
    let text: String = swapped.iter().map(|l| l.to_string() + "\n").collect();
    p.write("recipes/data/post/swapped.jsonl", &text);
    let sources = format!("{TERMS}  swapped: {{path: data/post/swapped.jsonl, license: MIT}}\n");
    let stages = STAGES.replace("      sft-completions: completions.completions\n", "      sft-completions: swapped\n");
    p.write("recipes/swapped.yaml", &recipe("swapped", &sources, &stages));
    let r = p.prov(&["run", "recipes/swapped.yaml"]);
    r.exit(1);
    assert!(r.stderr().contains("line 1: `prompt_ids` of"), "{}", r.describe());

    // Candidates sampled for other examples than the ones given (the held-out split's): refused.
    let stages = STAGES.replace(
        "      examples: pairs.train\n      sft-completions",
        "      examples: pairs.eval\n      sft-completions",
    );
    p.write("recipes/crossed.yaml", &recipe("crossed", TERMS, &stages));
    let r = p.prov(&["run", "recipes/crossed.yaml"]);
    r.exit(1);
    assert!(r.stderr().contains("is not in `examples`"), "{}", r.describe());

    // A directory of per-language lists for the harmlessness grade: refused (every language's
    // list against every response would flag ordinary words of the others).
    p.write("recipes/data/post/lists/en.txt", "damn\n");
    p.write("recipes/data/post/lists/nl.txt", "del\n");
    let sources = "  unsafe: {path: data/post/lists, license: CC0-1.0}\n";
    p.write("recipes/lists.yaml", &recipe("lists", sources, STAGES));
    let r = p.prov(&["run", "recipes/lists.yaml"]);
    r.exit(1);
    assert!(r.stderr().contains("`unsafe_terms`: is a directory of 2 lists"), "{}", r.describe());

    // A reward model where a language model is expected: refused, saying what it is.
    let stages = STAGES.replace(
        "inputs: {model: mdloo.model, examples: pairs.train}",
        "inputs: {model: reward-model.model, examples: pairs.train}",
    );
    p.write("recipes/rm-as-policy.yaml", &recipe("rm-as-policy", TERMS, &stages));
    let r = p.prov(&["run", "recipes/rm-as-policy.yaml"]);
    r.exit(1);
    assert!(r.stderr().contains("it is a reward model"), "{}", r.describe());
}
