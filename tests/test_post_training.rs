//! Post-training end to end on real parallel text (the quickstart's UDHR articles in English,
//! French and Spanish), small enough to run in a minute: translation pairs, SFT (packed, with
//! EuroLLM's cosine schedule), reference
//! completions sampled with pinned seeds, chrF rewards, QRPO and DPO, and the chrF of the
//! aligned model beside the SFT model's in the run summary. Every stage replays bit for bit,
//! the manifests pin the reference completions, the rewards and the reference checkpoint, and
//! bad preference data (an empty completion, a missing reward, a single completion, `n: 1`)
//! stops the run with the file, line and field named.

use serde_json::Value;

use crate::common::Project;

const RECIPE: &str = "\
schema: 1
name: post
seed: 5
sources:
  udhr: {path: data/post/docs.jsonl, license: MIT}
  held-out: {path: data/post/held-out.jsonl, license: MIT}
stages:
  shards: {kind: shard, inputs: {docs: udhr}, params: {shards: 2}}
  tokenizer: {kind: tokenizer, inputs: {docs: shards}, params: {vocab_size: 512}}
  tokens: {kind: tokenize, inputs: {docs: shards, tokenizer: tokenizer.tokenizer}, params: {seq_len: 64}}
  pretrain:
    kind: pretrain
    inputs: {tokens: tokens.tokens, order: tokens.order, tokenizer: tokenizer.tokenizer}
    params:
      steps: 20
      batch_size: 4
      checkpoint_every: 10
      lr: 0.003
      model: {hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2}
  pairs:
    kind: translation-pairs
    inputs: {docs: shards, held_out: held-out}
    params: {languages: {eng: English, fra: French, spa: Spanish}}
  sft: {kind: sft, inputs: {model: pretrain.model, examples: pairs.train}, params: {steps: 20, batch_size: 4, seq_len: 512, lr: 0.003, schedule: cosine, warmup_steps: 4, packing: true}}
  completions:
    kind: sample-completions
    inputs: {model: sft.model, examples: pairs.train}
    params: {n: 4, prompts: 3, max_new_tokens: 24}
  rewards: {kind: reward, inputs: {completions: completions.completions}}
  qrpo:
    kind: qrpo
    inputs: {model: sft.model, completions: completions.completions, rewards: rewards.rewards}
    params: {steps: 3, batch_size: 4}
  dpo:
    kind: dpo
    inputs: {model: sft.model, completions: completions.completions, rewards: rewards.rewards}
    params: {steps: 3, batch_size: 2}
  eval:
    kind: chrf-eval
    inputs: {model: qrpo.model, baseline: sft.model, examples: pairs.eval}
    params: {max_new_tokens: 24}
";

/// A project with the quickstart's articles in English, French and Spanish as
/// `recipes/data/post/` (article 30 held out, the others the corpus) and the recipe.
fn project() -> Project {
    let p = Project::with_recipes();
    write_parallel_udhr(&p);
    p.write("recipes/post.yaml", RECIPE);
    p
}

/// Writes the quickstart's articles in English, French and Spanish into `p`:
/// `recipes/data/post/held-out.jsonl` holds article 30, `recipes/data/post/docs.jsonl` the
/// others.
pub(crate) fn write_parallel_udhr(p: &Project) {
    let all = fs_err::read_to_string(p.path("recipes/data/quickstart/udhr-sample.jsonl")).unwrap();
    let (mut docs, mut held_out) = (String::new(), String::new());
    for line in all.lines() {
        let id = serde_json::from_str::<Value>(line).unwrap()["id"].as_str().unwrap().to_owned();
        if !["udhr-eng-", "udhr-fra-", "udhr-spa-"].iter().any(|l| id.starts_with(l)) {
            continue;
        }
        let target = if id.ends_with("-30") { &mut held_out } else { &mut docs };
        target.push_str(line);
        target.push('\n');
    }
    p.write("recipes/data/post/docs.jsonl", &docs);
    p.write("recipes/data/post/held-out.jsonl", &held_out);
}

fn stage<'v>(lines: &'v [Value], name: &str) -> &'v Value {
    &lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == name).unwrap_or_else(|| panic!("{name}"))["data"]
}

fn record(p: &Project, digest: &Value) -> Value {
    p.json(&["show", digest.as_str().unwrap()])[0]["data"]["record"].clone()
}

fn lines_of(p: &Project, digest: &Value) -> Vec<Value> {
    let bytes = fs_err::read(p.object_file(digest.as_str().unwrap())).unwrap();
    String::from_utf8(bytes).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn post_training_pins_its_data_reports_chrf_and_replays_bit_for_bit() {
    let p = project();
    let run = p.json(&["run", "recipes/post.yaml"]);
    let sft = stage(&run, "sft");
    let completions = stage(&run, "completions");
    let rewards = stage(&run, "rewards");
    let qrpo = stage(&run, "qrpo");

    // The aligned model's manifest pins what it was trained from: the SFT checkpoint (also the
    // reference policy), the sampled completions and their rewards.
    let q = record(&p, &qrpo["manifest"]);
    assert_eq!(q["inputs"]["model"], sft["outputs"]["model"], "{q}");
    assert_eq!(q["inputs"]["completions"], completions["outputs"]["completions"]);
    assert_eq!(q["inputs"]["rewards"], rewards["outputs"]["rewards"]);
    assert_eq!((q["determinism"].as_str(), q["stats"]["steps"].as_u64()), (Some("envelope"), Some(3)), "{q}");
    let s = record(&p, &sft["manifest"])["stats"].clone();
    assert!(s["examples"].as_u64().unwrap() > 100, "{s}");
    assert!(s["final_loss"].as_f64().unwrap() < s["first_loss"].as_f64().unwrap(), "{s}");
    // EuroLLM's SFT settings (§3.2): packed rows and a cosine schedule with warm-up, whose rates
    // (equal to transformers', crates/prov-train/tests/schedules_transformers.rs) the worker used.
    let cosine = prov_train::schedule::Cosine::new(0.003, 20, 4);
    let log = lines_of(&p, &sft["outputs"]["log"]);
    assert_eq!(log.len(), 20);
    for l in &log {
        let step = l["step"].as_u64().unwrap();
        assert_eq!(l["lr"].as_f64().map(f64::to_bits), Some(cosine.lr(step).to_bits()), "{l}");
    }

    // Three prompts, four completions each, every one rewarded by chrF against the reference.
    let sampled = lines_of(&p, &completions["outputs"]["completions"]);
    let scored = lines_of(&p, &rewards["outputs"]["rewards"]);
    assert_eq!((sampled.len(), scored.len()), (3, 3));
    for (c, r) in sampled.iter().zip(&scored) {
        assert_eq!(c["id"], r["id"]);
        assert_eq!(c["completions"].as_array().unwrap().len(), 4, "{c}");
        assert!(c["completions"].as_array().unwrap().iter().all(|x| !x["ids"].as_array().unwrap().is_empty()));
        let r = r["rewards"].as_array().unwrap();
        assert!(r.iter().all(|x| (0.0..=100.0).contains(&x.as_f64().unwrap())), "{r:?}");
    }
    let pairs = lines_of(&p, &stage(&run, "dpo")["outputs"]["pairs"]);
    for pair in &pairs {
        assert!(pair["chosen_reward"].as_f64() > pair["rejected_reward"].as_f64(), "{pair}");
    }

    // The run summary sets the aligned model's chrF beside the SFT model's.
    let evaluation = run.iter().find(|l| l["type"] == "evaluation").expect("an evaluation line");
    let e = &evaluation["data"];
    assert_eq!((e["stage"].as_str(), e["examples"].as_u64()), (Some("eval"), Some(6)), "{e}");
    assert_eq!(
        (e["model"]["checkpoint"].as_str(), e["baseline"]["checkpoint"].as_str()),
        (Some("qrpo.model"), Some("sft.model"))
    );
    let eval_stats = record(&p, &stage(&run, "eval")["manifest"])["stats"].clone();
    assert_eq!(e["model"]["score"], eval_stats["chrf"]);
    let human = p.prov(&["run", "recipes/post.yaml"]);
    assert!(
        human.stdout().contains("eval (chrf-eval): chrF of greedy translations of 6 held-out examples"),
        "{}",
        human.describe()
    );

    // Every stage, sampling and alignment included, replays to the recorded bytes.
    let replay = p.json(&["replay", "lockfiles/post.lock"]);
    let summary = replay.iter().find(|l| l["type"] == "run").unwrap();
    assert_eq!(summary["data"]["diverged"], false, "{summary}");
    let replayed = replay.iter().filter(|l| l["type"] == "stage" && l["data"]["status"] == "replayed").count();
    assert_eq!(replayed, 13);

    bad_preference_data_is_refused_naming_line_and_field(&p, &sampled, &scored);
}

/// Variants of the recipe (`extends`, so the trained stages are reused) whose `qrpo` reads
/// preference data from pinned files with one fault each.
fn bad_preference_data_is_refused_naming_line_and_field(p: &Project, sampled: &[Value], scored: &[Value]) {
    let jsonl = |values: &[Value]| values.iter().map(|v| v.to_string() + "\n").collect::<String>();
    let variant = |completions: &[Value], rewards: &[Value]| {
        p.write("recipes/data/post/completions.jsonl", &jsonl(completions));
        p.write("recipes/data/post/rewards.jsonl", &jsonl(rewards));
        p.write(
            "recipes/bad.yaml",
            "schema: 1\nname: bad\nextends: post.yaml\nsources:\n  given: {path: data/post/completions.jsonl}\n  \
             scores: {path: data/post/rewards.jsonl}\nstages:\n  bad-qrpo:\n    kind: qrpo\n    \
             inputs: {model: sft.model, completions: given, rewards: scores}\n    params: {steps: 1, batch_size: 2}\n",
        );
        p.prov(&["run", "recipes/bad.yaml"])
    };
    // The good files as sources: external preference data is pinned like any source.
    variant(sampled, scored).success();

    let mut empty = sampled.to_vec();
    empty[1]["completions"][2]["ids"] = Value::Array(vec![]);
    let r = variant(&empty, scored);
    r.exit(1);
    assert!(
        r.stderr().contains("input `completions`: prompt 1: `completions[2]` is empty (line 2)"),
        "{}",
        r.describe()
    );

    // A token id the model has no embedding for: a typed error, not a libtorch abort.
    let mut unknown = sampled.to_vec();
    unknown[2]["completions"][1]["ids"][0] = 70_000.into();
    let r = variant(&unknown, scored);
    r.exit(1);
    assert!(
        r.stderr().contains(
            "input `completions`: prompt 2: `completions[1].ids[0]` is 70000, outside the model's vocabulary of 512 ids (line 3)"
        ),
        "{}",
        r.describe()
    );

    let mut missing = scored.to_vec();
    missing[2]["rewards"][3] = Value::Null;
    let r = variant(sampled, &missing);
    r.exit(1);
    assert!(r.stderr().contains("input `rewards`: prompt 2: `rewards[3]` is missing (line 3)"), "{}", r.describe());

    let (mut one, mut one_reward) = (sampled.to_vec(), scored.to_vec());
    one[0]["completions"].as_array_mut().unwrap().truncate(1);
    one_reward[0]["rewards"].as_array_mut().unwrap().truncate(1);
    let r = variant(&one, &one_reward);
    r.exit(1);
    assert!(r.stderr().contains("a quantile needs at least 2"), "{}", r.describe());

    let r = variant(sampled, &scored[..2]);
    r.exit(1);
    assert!(r.stderr().contains("3 prompts have completions but 2 have rewards"), "{}", r.describe());

    p.write("recipes/bad.yaml", &RECIPE.replace("name: post", "name: bad").replace("n: 4,", "n: 1,"));
    let r = p.prov(&["lock", "recipes/bad.yaml"]);
    r.exit(1);
    assert!(r.stderr().contains("stages.completions.params.n: must be at least 2, got 1"), "{}", r.describe());
    assert!(r.stderr().contains("hint: quantile rewards and preference pairs"), "{}", r.describe());
}
