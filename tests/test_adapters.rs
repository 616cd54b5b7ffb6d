//! LoRA adapters (the AFM report, §5) end to end on real parallel text (the quickstart's UDHR
//! articles in English, French and Spanish): a base model pretrained with AFM's tokenizer and
//! optimizer, a rank-8 adapter trained on translation conversations on top of it, frozen, and
//! the adapter in the PEFT format.
//!
//! The reference is PyPI `peft` with `transformers`: `tests/python/peft_logprobs.py` loads the
//! exported base with `AutoModelForCausalLM` and the exported adapter with
//! `PeftModel.from_pretrained`, unmerged, and computes every token's log-probability, which
//! `prov eval --adapter` must equal within 1e-4.

use serde_json::Value;

use crate::common::{Project, repo_root, venv_python};

/// A recipe named `name`: the quickstart's parallel articles, AFM's tokenizer, a small model
/// pretrained with RMSProp with momentum (`pretrain`), translation conversations (`pairs`),
/// then `stages` (YAML stage entries, indented by two spaces).
pub(crate) fn recipe(name: &str, stages: &str) -> String {
    recipe_with_sources(name, "", stages)
}

/// [`recipe`] with more `sources` (YAML entries, indented by two spaces).
pub(crate) fn recipe_with_sources(name: &str, sources: &str, stages: &str) -> String {
    format!(
        "\
schema: 1
name: {name}
seed: 11
sources:
  udhr: {{path: data/post/docs.jsonl, license: MIT}}
  held-out: {{path: data/post/held-out.jsonl, license: MIT}}
{sources}stages:
  shards: {{kind: shard, inputs: {{docs: udhr}}, params: {{shards: 2}}}}
  tokenizer: {{kind: sentencepiece, inputs: {{docs: shards}}, params: {{vocab_size: 600}}}}
  tokens: {{kind: tokenize, inputs: {{docs: shards, tokenizer: tokenizer.tokenizer}}, params: {{seq_len: 64}}}}
  pretrain:
    kind: pretrain
    inputs: {{tokens: tokens.tokens, order: tokens.order, tokenizer: tokenizer.tokenizer}}
    params:
      steps: 20
      batch_size: 4
      checkpoint_every: 10
      lr: 0.01
      clip: 1.0
      goldfish: null
      optimizer: {{kind: rmsprop-momentum}}
      model: {{architecture: llama, hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2}}
  pairs:
    kind: translation-pairs
    inputs: {{docs: shards, held_out: held-out}}
    params: {{languages: {{eng: English, fra: French, spa: Spanish}}}}
{stages}"
    )
}

const ADAPTER: &str = "  adapter:
    kind: lora
    inputs: {model: pretrain.model, examples: pairs.train}
    params: {rank: 8, alpha: 16, steps: 12, batch_size: 4, seq_len: 256, lr: 0.01, packing: true}
";

/// The quickstart's articles in English, French and Spanish (article 30 held out) and the
/// recipe.
fn project() -> Project {
    let p = Project::with_recipes();
    crate::test_post_training::write_parallel_udhr(&p);
    p.write("recipes/adapters.yaml", &recipe("adapters", ADAPTER));
    p
}

fn stage<'v>(lines: &'v [Value], name: &str) -> &'v Value {
    lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == name).unwrap_or_else(|| panic!("{name}"))
}

/// Token sequences to score: spans of the tokenized corpus and a few arbitrary ids.
const IDS: &str = "[2, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50]\n[2, 300, 7, 599, 12, 100, 101, 5]\n";

/// The adapter trains on the frozen base, `prov eval --adapter` scores with it, and PEFT's own
/// loading of the exported base and adapter gives the same log-probabilities within 1e-4;
/// the run replays bit for bit; a tree that is not an adapter, or an adapter for another
/// shape, is refused.
#[test]
fn a_lora_adapter_trains_exports_to_peft_and_scores_as_peft_does() {
    let p = project();
    let run = p.json(&["run", "recipes/adapters.yaml"]);
    let lora = stage(&run, "adapter")["data"].clone();
    let record = p.json(&["show", lora["manifest"].as_str().unwrap()])[0]["data"]["record"].clone();
    let stats = &record["stats"];
    // Rank 8 on every projection of 2 layers: q, o (64 -> 64), k, v (64 -> 32), gate, up
    // (64 -> 128), down (128 -> 64); each adds rank * (in + out).
    let per_layer = 8 * ((64 + 64) * 2 + (64 + 32) * 2 + (64 + 128) * 3);
    assert_eq!(stats["adapter_parameters"], 2 * per_layer, "{stats}");
    assert_eq!((stats["rank"].as_u64(), stats["alpha"].as_f64()), (Some(8), Some(16.0)), "{stats}");
    assert!(stats["final_loss"].as_f64().unwrap() < stats["first_loss"].as_f64().unwrap(), "{stats}");
    let adapter_digest = lora["outputs"]["adapter"].as_str().unwrap().to_owned();
    let base = stage(&run, "pretrain")["data"]["outputs"]["model"].as_str().unwrap().to_owned();

    p.write("ids.jsonl", IDS);
    let scored = |extra: &[&str]| -> Vec<Vec<f64>> {
        let mut args = vec!["eval", "--ids", "ids.jsonl"];
        args.extend_from_slice(extra);
        args.push(&base);
        let out = p.json(&args);
        out[0]["data"]["sequences"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["log_probs"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect())
            .collect()
    };
    let plain = scored(&[]);
    let adapted = scored(&["--adapter", &adapter_digest]);
    assert_ne!(plain, adapted, "the adapter changes the model");

    p.prov(&["export", "--out", "hf", &base]).success();
    let r = p.prov(&["export", "--out", "peft", &adapter_digest]);
    let out = r.success().stdout();
    assert!(out.contains("adapter_config.json") && out.contains("adapter_model.safetensors"), "{out}");
    let config: Value =
        serde_json::from_str(&fs_err::read_to_string(p.path("peft/adapter_config.json")).unwrap()).unwrap();
    assert_eq!(
        (&config["peft_type"], &config["r"], &config["base_model_name_or_path"]),
        (&serde_json::json!("LORA"), &serde_json::json!(8), &serde_json::json!(base))
    );

    if let Some(python) = venv_python() {
        let ids: Vec<Vec<i64>> = IDS.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        p.write("ids.json", &serde_json::to_string(&ids).unwrap());
        let script = repo_root().join("tests/python/peft_logprobs.py");
        let reference = |adapter: Option<&str>| -> Vec<Vec<f64>> {
            let (hf, ids) = (p.path("hf"), p.path("ids.json"));
            let mut args =
                vec![script.to_str().unwrap(), "--base", hf.to_str().unwrap(), "--ids", ids.to_str().unwrap()];
            let dir = adapter.map(|a| p.path(a));
            if let Some(d) = &dir {
                args.extend(["--adapter", d.to_str().unwrap()]);
            }
            let out: Value = serde_json::from_slice(&prov_testkit::pipe(&python, &args, b"")).unwrap();
            serde_json::from_value(out["sequences"].clone()).unwrap()
        };
        for (ours, theirs, what) in [(&plain, reference(None), "base"), (&adapted, reference(Some("peft")), "adapter")]
        {
            for (a, b) in ours.iter().zip(&theirs) {
                assert_eq!(a.len(), b.len());
                let worst = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
                assert!(worst < 1e-4, "{what}: prov {a:?} vs peft {b:?} (worst {worst})");
                eprintln!("{what}: {} tokens, largest difference {worst:.2e}", a.len());
            }
        }
    }

    p.prov(&["replay", "lockfiles/adapters.lock"]).success();

    // A tree that is not an adapter (the tokenizer's? no: the pretrain checkpoints tree).
    let checkpoints = stage(&run, "pretrain")["data"]["outputs"]["checkpoints"].as_str().unwrap().to_owned();
    let r = p.prov(&["export", "--out", "x", &checkpoints]);
    assert!(r.exit(1).stderr().contains("not a LoRA adapter"), "{}", r.describe());
    let r = p.prov(&["eval", "--ids", "ids.jsonl", "--adapter", &checkpoints, &base]);
    assert!(r.exit(1).stderr().contains("adapter_config.json"), "{}", r.describe());

    // Adapters whose configuration the scorer would misread: refused before anything is
    // allocated or scored (a rank of 10^11 would ask for terabytes).
    let store = prov_store::Store::open(&p.path(".prov"), prov_store::Access::Shared, true).unwrap();
    let tree = prov_manifest::get_typed::<prov_manifest::TreeRecord>(&store, &adapter_digest.parse().unwrap()).unwrap();
    let config_entry = tree.entries.iter().find(|e| e.path.as_str() == "adapter_config.json").unwrap();
    let config: Value = serde_json::from_slice(&store.read(&config_entry.digest).unwrap()).unwrap();
    drop(store);
    for (key, value, message) in [
        ("r", serde_json::json!(100_000_000_000_u64), "not a rank-100000000000 LoRA matrix"),
        ("use_rslora", serde_json::json!(true), "`use_rslora` is true"),
        ("target_modules", serde_json::json!(["q_proj"]), "which `target_modules` does not list"),
    ] {
        let mut forged = config.clone();
        forged[key] = value;
        let digest = forged_adapter(&p, &tree, &forged);
        let r = p.prov(&["eval", "--ids", "ids.jsonl", "--adapter", &digest, &base]);
        assert!(r.exit(1).stderr().contains(message), "{key}: {}", r.describe());
    }
}

/// Stores a copy of adapter `tree` with `config` as its `adapter_config.json`; returns its digest.
fn forged_adapter(p: &Project, tree: &prov_manifest::TreeRecord, config: &Value) -> String {
    let store = prov_store::Store::open(&p.path(".prov"), prov_store::Access::Exclusive, true).unwrap();
    let mut entries = tree.entries.clone();
    let bytes = prov_manifest::encode_value(config);
    let entry = entries.iter_mut().find(|e| e.path.as_str() == "adapter_config.json").unwrap();
    entry.digest = store.put_bytes(prov_store::ObjectKind::Blob, &bytes).unwrap();
    entry.size = bytes.len() as u64;
    let record = prov_manifest::TreeRecord { schema: prov_manifest::SCHEMA_VERSION, entries };
    prov_manifest::put_record(&store, &prov_manifest::Record::Tree(record)).unwrap().to_string()
}
