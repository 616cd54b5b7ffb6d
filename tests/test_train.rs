//! Pretraining end to end on real text (the quickstart's 248 UDHR articles): the `pretrain`
//! stage trains a small Apertus-style model with Goldfish and `AdEMAMix`, the exported Hugging
//! Face folder loads in transformers' `ApertusForCausalLM` with the same logits as `prov eval`,
//! a run resumed from every checkpoint replays to the uninterrupted run's bytes, and sampling
//! repeats per seed.

use std::collections::BTreeMap;

use prov_store::{Access, Digest, Store};
use serde_json::{Value, json};

use crate::common::{Project, venv_python};

const RECIPE: &str = "schema: 1\nname: lm\nseed: 3\nsources:\n  udhr:\n    path: data/quickstart/udhr-sample.jsonl\n    license: MIT\n\
stages:\n  shards:\n    kind: shard\n    inputs: {docs: udhr}\n    params: {shards: 2}\n\
\x20 tokenizer:\n    kind: tokenizer\n    inputs: {docs: shards}\n    params: {vocab_size: 512}\n\
\x20 tokens:\n    kind: tokenize\n    inputs: {docs: shards, tokenizer: tokenizer.tokenizer}\n    params: {seq_len: 64}\n\
\x20 pretrain:\n    kind: pretrain\n    inputs: {tokens: tokens.tokens, order: tokens.order, tokenizer: tokenizer.tokenizer}\n\
\x20   params:\n      steps: 30\n      batch_size: 4\n      checkpoint_every: 10\n      lr: 0.003\n\
\x20     model: {hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2}\n";

fn stage<'v>(lines: &'v [Value], name: &str) -> &'v Value {
    lines
        .iter()
        .find(|l| l["type"] == "stage" && l["data"]["name"] == name)
        .unwrap_or_else(|| panic!("no stage {name}"))
}

fn open_store(p: &Project) -> Store {
    Store::open(&p.path(".prov"), Access::Shared, true).unwrap()
}

/// The checkpoint records of the `checkpoints` tree, by entry name.
fn checkpoints(p: &Project, tree: &str) -> BTreeMap<String, Digest> {
    let store = open_store(p);
    let t = prov_manifest::get_typed::<prov_manifest::TreeRecord>(&store, &tree.parse().unwrap()).unwrap();
    t.entries.iter().map(|e| (e.path.as_str().to_owned(), e.digest)).collect()
}

/// Trains the small model once and returns the project and the run's JSON lines.
pub(crate) fn trained() -> (Project, Vec<Value>) {
    let p = Project::with_recipes();
    p.write("recipes/lm.yaml", RECIPE);
    let lines = p.json(&["run", "recipes/lm.yaml"]);
    (p, lines)
}

#[test]
fn a_small_model_trains_exports_to_transformers_and_resumes_bit_for_bit() {
    let (p, lines) = trained();
    let pretrain = stage(&lines, "pretrain");
    let outputs = &pretrain["data"]["outputs"];
    let record = &p.json(&["show", pretrain["data"]["manifest"].as_str().unwrap()])[0]["data"]["record"];
    assert_eq!(record["determinism"], "envelope", "{record}");
    let stats = &record["stats"];
    assert_eq!(stats["steps"], 30, "{stats}");
    assert!(stats["final_loss"].as_f64().unwrap() < stats["first_loss"].as_f64().unwrap() - 0.5, "{stats}");
    // 15 of 64 labels per sample are past h - 1 = 49: about 2% of those are dropped.
    let dropped = stats["goldfish_dropped_fraction"].as_f64().unwrap();
    assert!(dropped > 0.0 && dropped < 0.02, "{stats}");

    // A checkpoint every 10 steps, the last one the model; each names its log and tokenizer.
    let tree = checkpoints(&p, outputs["checkpoints"].as_str().unwrap());
    assert_eq!(tree.keys().collect::<Vec<_>>(), ["step-000010.json", "step-000020.json", "step-000030.json"]);
    let model = outputs["model"].as_str().unwrap();
    assert_eq!(tree["step-000030.json"].to_string(), model);
    let shown = &p.json(&["show", model])[0]["data"]["record"];
    assert_eq!(shown["step"], 30);
    assert_eq!(shown["data_position"], 120);
    assert_eq!(shown["tensors"].as_object().unwrap().len(), 3 + 12 * 2, "{shown}");
    assert_eq!(shown["tokenizer"], stage(&lines, "tokenizer")["data"]["outputs"]["tokenizer"]);

    // Replays bit for bit, and from each checkpoint (the progress file a killed run leaves)
    // continues to the uninterrupted run's bytes.
    p.prov(&["replay", "lockfiles/lm.lock"]).success();
    let key: Digest = record["key"].as_str().unwrap().parse().unwrap();
    let progress = prov_train::pretrain::progress_path(&open_store(&p), &key);
    let digests: Vec<Digest> = tree.values().copied().collect();
    for k in 1..digests.len() {
        fs_err::create_dir_all(progress.parent().unwrap()).unwrap();
        fs_err::write(&progress, serde_json::to_vec(&digests[..k]).unwrap()).unwrap();
        let r = p.prov(&["replay", "lockfiles/lm.lock"]);
        assert!(r.output.status.success(), "resumed after checkpoint {k}: {}", r.describe());
        assert!(!progress.exists(), "a finished run removes its progress");
    }
    // The progress file is really used: a checkpoint that differs only in its recorded loss
    // is continued from, and the replay names the `checkpoints` output as changed.
    {
        let store = open_store(&p);
        let mut c = prov_manifest::get_typed::<prov_manifest::CheckpointRecord>(&store, &digests[0]).unwrap();
        c.loss = prov_manifest::Finite::new(1.0);
        let forged = prov_manifest::put_record(&store, &prov_manifest::Record::Checkpoint(c)).unwrap();
        fs_err::write(&progress, serde_json::to_vec(&[forged]).unwrap()).unwrap();
    }
    let r = p.prov(&["replay", "lockfiles/lm.lock"]);
    r.exit(3);
    assert!(r.stderr().contains("output `checkpoints`"), "{}", r.describe());

    // Sampling repeats per seed.
    let sample = |seed: &str| p.prov(&["sample", model, "--prompt-ids", "[0]", "--seed", seed, "--max-tokens", "20"]);
    let a = sample("1");
    a.success();
    assert_eq!(a.stdout(), sample("1").stdout());
    let ids: Vec<i64> = serde_json::from_str(a.stdout().trim()).unwrap();
    assert!(!ids.is_empty() && ids.iter().all(|&t| (0..512).contains(&t)), "{ids:?}");

    exported_logits_equal_transformers(&p, &lines, model, "ApertusForCausalLM");
}

/// EuroLLM's decoder (report §2.1: SwiGLU, GQA, pre-RMSNorm, RoPE, untied embeddings) as the
/// `llama` architecture: it trains, its checkpoints hold `LlamaForCausalLM`'s tensors, the
/// exported folder loads in transformers as `LlamaForCausalLM` with the logits and
/// log-probabilities of `prov eval`, and the run replays bit for bit.
#[test]
fn a_swiglu_model_trains_and_exports_to_transformers_llama() {
    let p = Project::with_recipes();
    let recipe = RECIPE
        .replace("model: {hidden_size: 64,", "model: {architecture: llama, hidden_size: 64,")
        .replace("steps: 30", "steps: 10")
        .replace("checkpoint_every: 10", "checkpoint_every: 5");
    p.write("recipes/lm.yaml", &recipe);
    let lines = p.json(&["run", "recipes/lm.yaml"]);
    let pretrain = stage(&lines, "pretrain");
    let record = &p.json(&["show", pretrain["data"]["manifest"].as_str().unwrap()])[0]["data"]["record"];
    assert_eq!(record["config"]["model"]["architecture"], "llama", "{record}");
    let stats = &record["stats"];
    assert!(stats["final_loss"].as_f64().unwrap() < stats["first_loss"].as_f64().unwrap(), "{stats}");
    let model = pretrain["data"]["outputs"]["model"].as_str().unwrap();
    let tensors = p.json(&["show", model])[0]["data"]["record"]["tensors"].clone();
    let names: Vec<&String> = tensors.as_object().unwrap().keys().collect();
    assert_eq!(names.len(), 3 + 9 * 2, "{names:?}");
    assert!(tensors.get("model.layers.1.mlp.gate_proj.weight").is_some(), "{names:?}");
    exported_logits_equal_transformers(&p, &lines, model, "LlamaForCausalLM");
    p.prov(&["replay", "lockfiles/lm.lock"]).success();
}

/// `prov export` writes a folder transformers loads as `class`, whose float32 logits and
/// log-probabilities on real tokens equal `prov eval`'s within 1e-4; its tokenizer knows the
/// special tokens and renders the chat template.
fn exported_logits_equal_transformers(p: &Project, lines: &[Value], model: &str, class: &str) {
    let out = p.path("hf");
    p.prov(&["export", model, "--out", out.to_str().unwrap()]).success();
    for f in ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    // The first sample of the token tree: BOS, then the first document's tokens.
    let store = open_store(p);
    let tokens: Digest = stage(lines, "tokens")["data"]["outputs"]["tokens"].as_str().unwrap().parse().unwrap();
    let data = prov_dataset::tokens::TokenData::open(&store, &tokens).unwrap();
    let ids: Vec<i64> = data.sample(0).unwrap().into_iter().map(i64::from).collect();
    drop(store);
    p.write("ids.jsonl", &format!("{}\n", serde_json::to_string(&ids).unwrap()));
    let eval = p.json(&["eval", model, "--ids", p.path("ids.jsonl").to_str().unwrap(), "--logits"]);
    let seq = &eval[0]["data"]["sequences"][0];
    assert_eq!(seq["tokens"], 64);
    let ours = &seq["logits"];
    let our_log_probs = &seq["log_probs"];

    let Some(python) = venv_python() else { return };
    let script = r"
import json, sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
torch.set_num_threads(1)
folder, ids = sys.argv[1], json.loads(sys.argv[2])
model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
tok = AutoTokenizer.from_pretrained(folder)
with torch.no_grad():
    logits = model(torch.tensor([ids[:-1]])).logits[0]
    log_probs = torch.log_softmax(logits, -1).gather(1, torch.tensor(ids[1:]).view(-1, 1)).view(-1)
chat = tok.apply_chat_template([{'role': 'user', 'content': 'Hallo'}, {'role': 'assistant', 'content': 'Bonjour'}],
                               tokenize=True, return_dict=True)['input_ids']
print(json.dumps({'class': type(model).__name__, 'logits': logits.tolist(), 'log_probs': log_probs.tolist(),
                  'bos': tok.bos_token_id, 'eos': tok.eos_token_id, 'chat': list(chat)}))
";
    let out_py = std::process::Command::new(python)
        .args(["-c", script, out.to_str().unwrap(), &serde_json::to_string(&ids).unwrap()])
        .output()
        .unwrap();
    assert!(out_py.status.success(), "{}", String::from_utf8_lossy(&out_py.stderr));
    let theirs: Value = serde_json::from_slice(&out_py.stdout).unwrap();
    assert_eq!(theirs["class"], class);
    assert_eq!((theirs["bos"].clone(), theirs["eos"].clone()), (json!(0), json!(1)));
    // The folder carries the chat template: <|bos|> <|user|> … <|end|> <|assistant|> … <|end|> <|eos|>.
    let chat: Vec<u64> = theirs["chat"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!((&chat[..2], &chat[chat.len() - 2..]), (&[0, 5][..], &[7, 1][..]), "{chat:?}");
    assert_eq!(chat.iter().filter(|&&id| id == 6).count(), 1, "{chat:?}");
    let (a, b) = (ours.as_array().unwrap(), theirs["logits"].as_array().unwrap());
    assert_eq!(a.len(), b.len());
    let mut largest = 0.0f64;
    for (ra, rb) in a.iter().zip(b) {
        for (x, y) in ra.as_array().unwrap().iter().zip(rb.as_array().unwrap()) {
            largest = largest.max((x.as_f64().unwrap() - y.as_f64().unwrap()).abs());
        }
    }
    eprintln!("{class}: largest |logit difference| prov eval vs transformers: {largest:e}");
    assert!(largest <= 1e-4, "largest logit difference {largest}");
    let (a, b) = (our_log_probs.as_array().unwrap(), theirs["log_probs"].as_array().unwrap());
    assert_eq!(a.len(), b.len());
    let largest = a.iter().zip(b).map(|(x, y)| (x.as_f64().unwrap() - y.as_f64().unwrap()).abs()).fold(0.0, f64::max);
    eprintln!("{class}: largest |log-probability difference|: {largest:e}");
    assert!(largest <= 1e-4, "largest log-probability difference {largest}");
}

#[test]
fn a_replay_in_another_envelope_or_from_a_damaged_store_names_the_step_and_tensor() {
    let (p, lines) = trained();
    // Which documents step 3 saw: samples 8..12 of the data order.
    let batch = p.json(&["explain", "batch", "lockfiles/lm.lock", "3"]);
    let data = &batch[0]["data"];
    assert_eq!((data["stage"].as_str(), data["batch_size"].as_u64()), (Some("pretrain"), Some(4)), "{data}");
    let store = open_store(&p);
    let order: Digest = stage(&lines, "tokens")["data"]["outputs"]["order"].as_str().unwrap().parse().unwrap();
    let order = prov_dataset::tokens::read_order(&store, &order).unwrap();
    drop(store);
    let samples: Vec<u64> = data["samples"].as_array().unwrap().iter().map(|s| s["sample"].as_u64().unwrap()).collect();
    assert_eq!(samples, order[8..12]);
    for s in data["samples"].as_array().unwrap() {
        let docs = s["documents"].as_array().unwrap();
        let covered: u64 = docs.iter().map(|d| d["to"].as_u64().unwrap() - d["from"].as_u64().unwrap()).sum();
        assert_eq!(covered, 65, "a sample is 64 + 1 tokens: {s}");
        assert!(docs.iter().all(|d| d["id"].as_str().unwrap().starts_with("udhr-")), "{s}");
    }
    p.prov(&["explain", "batch", "lockfiles/lm.lock", "31"]).exit(1);
    // The recording used the portable default (avx2). Under the `default` kernels the replay
    // is refused by default, and with --ignore-envelope it runs and says where it diverged.
    let refused = p.command(&["replay", "lockfiles/lm.lock"]).env("ATEN_CPU_CAPABILITY", "default").output().unwrap();
    assert_eq!(refused.status.code(), Some(3));
    let r = p
        .command(&["replay", "lockfiles/lm.lock", "--ignore-envelope"])
        .env("ATEN_CPU_CAPABILITY", "default")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("replay diverged at stage `pretrain`, output `checkpoints`"), "{stderr}");
    assert!(stderr.contains("first divergent checkpoint: step-000010.json (step 10)"), "{stderr}");
    assert!(stderr.contains("first divergent step: "), "{stderr}");
    assert!(stderr.contains("first divergent tensor: "), "{stderr}");
    assert!(stderr.contains("envelope ignored: aten_cpu_capability recorded `avx2`, now `default`"), "{stderr}");
    eprintln!("{stderr}");

    // A damaged checkpoint in the store: replay checks the recording before re-executing
    // (which would rewrite the object) and names the damaged object and tensor (exit 2).
    // eval refuses the checkpoint too.
    let model = stage(&lines, "pretrain")["data"]["outputs"]["model"].as_str().unwrap().to_owned();
    let weights = p.json(&["show", &model])[0]["data"]["record"]["weights"].as_str().unwrap().to_owned();
    let digest: Digest = weights.parse().unwrap();
    let path = open_store(&p).object_path(&digest);
    crate::common::flip_byte(&path, 5000);
    let r = p.prov(&["replay", "lockfiles/lm.lock"]);
    r.exit(2);
    assert!(r.stderr().contains("the recorded outputs of stage `pretrain` are damaged"), "{}", r.describe());
    assert!(r.stderr().contains(&digest.to_hex()[..12]), "{}", r.describe());
    assert!(
        r.stderr().contains("damaged checkpoint: step-000030.json (step 30), first damaged tensor: "),
        "{}",
        r.describe()
    );
    p.write("ids.jsonl", "[0, 5, 6, 7]\n");
    let r = p.prov(&["eval", &model, "--ids", "ids.jsonl"]);
    r.exit(2);
}

#[test]
fn a_run_killed_mid_training_resumes_to_the_uninterrupted_bytes() {
    // 120 steps with a checkpoint every 10: long enough to be killed mid-way.
    killed_and_resumed("lm", &RECIPE.replace("steps: 30", "steps: 120"), 2);
}

/// A phased run killed in its last phase (after checkpoints of every phase) resumes to the
/// uninterrupted bytes.
#[test]
fn a_phased_run_killed_in_its_last_phase_resumes_to_the_uninterrupted_bytes() {
    let recipe = PHASED
        .replace("{name: three, steps: 5,", "{name: three, steps: 90,")
        .replace("checkpoint_every: 10", "checkpoint_every: 5")
        .replace("params: {seq_len: 128}", "params: {seq_len: 128, epochs: 8}");
    // Checkpoint 7 is step 35, in phase three.
    killed_and_resumed("phased", &recipe, 7);
}

/// Runs `recipe` (named `name`) once whole, then again killed once `at_least` checkpoints are
/// saved, resumed with `prov run`: the outputs must be the whole run's.
fn killed_and_resumed(name: &str, recipe: &str, at_least: usize) {
    let file = format!("recipes/{name}.yaml");
    let lock = format!("lockfiles/{name}.lock");
    let reference = Project::with_recipes();
    reference.write(&file, recipe);
    let expected = stage(&reference.json(&["run", &file]), "pretrain")["data"]["outputs"].clone();

    let p = Project::with_recipes();
    p.write(&file, recipe);
    p.prov(&["lock", &file]).success();
    let progress_dir = p.path(".prov/progress");
    let mut child = p
        .command(&["run", &lock])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill as soon as enough checkpoints have been recorded in the progress file.
    let start = std::time::Instant::now();
    let mut killed_after = 0;
    while start.elapsed() < std::time::Duration::from_mins(2) {
        let saved: Vec<Digest> = fs_err::read_dir(&progress_dir)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| fs_err::read(e.unwrap().path()).ok())
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        if saved.len() >= at_least {
            killed_after = saved.len();
            break;
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(killed_after >= at_least, "the run ended before {at_least} checkpoints were seen");
    p.prov(&["verify"]).success();
    let resumed = stage(&p.json(&["run", &lock]), "pretrain")["data"]["outputs"].clone();
    assert_eq!(resumed, expected, "killed after {killed_after} checkpoints");
    assert!(fs_err::read_dir(&progress_dir).unwrap().next().is_none(), "the finished run removed its progress");
}

/// A phased recipe: two mixtures of two sources at 32 tokens, then a third source at 128
/// tokens with RoPE's base raised.
const PHASED: &str = "schema: 1\nname: phased\nseed: 5\nsources:\n  udhr:\n    path: data/quickstart/udhr-sample.jsonl\n    license: MIT\n\
stages:\n  shards:\n    kind: shard\n    inputs: {docs: udhr}\n    params: {shards: 2}\n\
\x20 tokenizer:\n    kind: tokenizer\n    inputs: {docs: shards}\n    params: {vocab_size: 512}\n\
\x20 web:\n    kind: tokenize\n    inputs: {docs: shards, tokenizer: tokenizer.tokenizer}\n    params: {seq_len: 32, epochs: 2}\n\
\x20 top:\n    kind: tokenize\n    inputs: {docs: shards, tokenizer: tokenizer.tokenizer}\n    params: {seq_len: 32}\n\
\x20 long:\n    kind: tokenize\n    inputs: {docs: shards, tokenizer: tokenizer.tokenizer}\n    params: {seq_len: 128}\n\
\x20 pretrain:\n    kind: pretrain\n\
\x20   inputs: {tokenizer: tokenizer.tokenizer, web-tokens: web.tokens, web-order: web.order, top-tokens: top.tokens,\n\
\x20            top-order: top.order, long-tokens: long.tokens, long-order: long.order}\n\
\x20   params:\n      batch_size: 4\n      checkpoint_every: 10\n      lr: 0.003\n      goldfish: null\n\
\x20     model: {architecture: llama, rope_theta: 10000, hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2,\n\
\x20             num_attention_heads: 4, num_key_value_heads: 2}\n\
\x20     phases:\n\
\x20       - {name: one, steps: 20, mixture: {web: 3, top: 1}}\n\
\x20       - {name: two, steps: 10, lr_end: 0.1, mixture: {web: 1, top: 1}}\n\
\x20       - {name: three, steps: 5, lr_end: 0, rope_theta: 1000000, mixture: {long: 1}}\n";

/// EuroLLM's three phases (report §2.2) on real text: a warm-up to the peak and a constant
/// rate on one mixture, an anneal to a tenth of the peak on another, then a decay to zero on
/// longer samples with RoPE's base raised from 10,000 to 1,000,000. The phases are pinned in the
/// lockfile with every default explicit; the log's rates are the phases' segments (which
/// `phases_megatron.rs` holds to Megatron-LM's scheduler); each checkpoint names the context
/// and base of its phase; `prov explain batch` names each step's phase and each sample's
/// source, with sources drawn in the mixture's proportions; and the run replays bit for bit.
#[test]
fn three_phases_change_mixture_rate_context_and_rope_base_and_replay() {
    let recipe = PHASED;
    let p = Project::with_recipes();
    p.write("recipes/phased.yaml", recipe);
    let lines = p.json(&["run", "recipes/phased.yaml"]);
    let pretrain = stage(&lines, "pretrain");
    let record = &p.json(&["show", pretrain["data"]["manifest"].as_str().unwrap()])[0]["data"]["record"];
    let config = &record["config"];
    assert_eq!(config["steps"], 35, "{config}");
    assert!(config.get("warmup_steps").is_none() && config.get("cooldown_steps").is_none(), "{config}");
    let phases = &config["phases"];
    assert_eq!(phases[0]["warmup_steps"], 2, "{phases}");
    assert_eq!((phases[1]["lr_start"].as_f64(), phases[2]["lr_start"].as_f64()), (Some(1.0), Some(0.1)), "{phases}");
    assert_eq!(phases[1]["rope_theta"].as_f64(), Some(10_000.0), "{phases}");

    // The log's rates are the segments': 0 then up to the peak, held, annealed, decayed.
    let store = open_store(&p);
    let log_digest: Digest = pretrain["data"]["outputs"]["log"].as_str().unwrap().parse().unwrap();
    let log = prov_train::loop_config::decode_log(&store.read(&log_digest).unwrap()).unwrap();
    let resolved: Vec<prov_train::phases::PhaseParams> = serde_json::from_value(phases.clone()).unwrap();
    let schedule = prov_train::schedule::Phased::new(prov_train::phases::rates(&resolved, 0.003));
    let rates: Vec<f64> = log.iter().map(|l| l.lr).collect();
    let expected: Vec<f64> = (1..=35).map(|s| schedule.lr(s)).collect();
    assert_eq!(rates, expected);
    let at = |i: usize| rates[i].to_bits();
    assert_eq!(
        (at(0), at(2), at(19), at(20)),
        (0.0f64.to_bits(), 0.003f64.to_bits(), 0.003f64.to_bits(), 0.003f64.to_bits())
    );
    assert!((rates[30] - 0.0003).abs() < 1e-15 && rates[34] < rates[33], "{rates:?}");
    // Phase three trains on samples of 128 tokens: four times the labels of a 32-token step.
    assert_eq!((log[19].tokens, log[34].tokens), (4 * 32, 4 * 128));

    // Each checkpoint's config.json is its phase's: the last has the new base and context.
    let trees = checkpoints(&p, pretrain["data"]["outputs"]["checkpoints"].as_str().unwrap());
    let config_of = |name: &str| -> Value {
        let c = prov_manifest::get_typed::<prov_manifest::CheckpointRecord>(&store, &trees[name]).unwrap();
        serde_json::from_slice(&store.read(&c.config).unwrap()).unwrap()
    };
    let (first, last) = (config_of("step-000020.json"), config_of("step-000035.json"));
    let context = |c: &Value| (c["rope_parameters"]["rope_theta"].as_f64(), c["max_position_embeddings"].as_u64());
    assert_eq!(context(&first), (Some(1e4), Some(32)), "{first}");
    assert_eq!(context(&last), (Some(1e6), Some(128)), "{last}");
    drop(store);

    // `prov explain batch` names the phase and each sample's source; phase one draws web and
    // top 3 to 1 (Megatron's blend keeps each within one sample of its share).
    let mut drawn: BTreeMap<String, u64> = BTreeMap::new();
    for step in 1..=20 {
        let out = p.json(&["explain", "batch", "lockfiles/phased.lock", &step.to_string()]);
        let batch = &out.iter().find(|l| l["type"] == "batch").unwrap()["data"];
        assert_eq!(batch["phase"]["name"], "one", "{batch}");
        for s in batch["samples"].as_array().unwrap() {
            *drawn.entry(s["source"].as_str().unwrap().to_owned()).or_default() += 1;
            assert!(!s["documents"].as_array().unwrap().is_empty(), "{s}");
        }
    }
    assert_eq!(drawn, BTreeMap::from([("top".to_owned(), 20), ("web".to_owned(), 60)]));
    let out = p.json(&["explain", "batch", "lockfiles/phased.lock", "33"]);
    let batch = &out.iter().find(|l| l["type"] == "batch").unwrap()["data"];
    assert_eq!((batch["phase"]["name"].as_str(), batch["phase"]["first_step"].as_u64()), (Some("three"), Some(31)));
    assert_eq!(batch["phase"]["rope_theta"].as_f64(), Some(1e6));
    assert_eq!(batch["phase"]["lr"].as_f64(), Some(rates[32]));
    assert!(batch["samples"].as_array().unwrap().iter().all(|s| s["source"] == "long"), "{batch}");
    let text = p.prov(&["explain", "batch", "lockfiles/phased.lock", "21"]);
    let text = text.success().stdout();
    assert!(text.contains("phase 2 `two` (steps 21 to 30): mixture top 1, web 1"), "{text}");

    p.prov(&["replay", "lockfiles/phased.lock"]).success();

    // The base is what the last phase trains with: the same run without the change has the
    // same bits through phase two and other losses from the first step of phase three.
    let same_base = recipe.replace(", rope_theta: 1000000", "").replace("name: phased", "name: same-base");
    p.write("recipes/same-base.yaml", &same_base);
    let other = stage(&p.json(&["run", "recipes/same-base.yaml"]), "pretrain")["data"]["outputs"]["log"].clone();
    let store = open_store(&p);
    let other =
        prov_train::loop_config::decode_log(&store.read(&other.as_str().unwrap().parse().unwrap()).unwrap()).unwrap();
    drop(store);
    assert_eq!(other[..30], log[..30]);
    assert!(other[30..].iter().zip(&log[30..]).all(|(a, b)| a.loss.to_bits() != b.loss.to_bits()), "{other:?}");

    // A phased run refuses WSD's settings and a `steps` its phases contradict, an input for a
    // source no phase names and a missing one, at lock time and naming the field or input.
    let batch = "      batch_size: 4\n";
    let bad = [
        (recipe.replace(batch, &format!("{batch}      warmup_steps: 3\n")), "warmup_steps"),
        (recipe.replace(batch, &format!("{batch}      steps: 30\n")), "add up to 35"),
        (
            recipe.replace("long-order: long.order}", "long-order: long.order, extra-tokens: web.tokens}"),
            "extra-tokens",
        ),
        (recipe.replace(", long-order: long.order}", "}"), "long-order"),
        (recipe.replace("{name: one, steps: 20,", "{name: one, steps: 2305843009213693952,"), "exceed"),
    ];
    for (bad, says) in bad {
        p.write("recipes/bad.yaml", &bad);
        let r = p.prov(&["lock", "recipes/bad.yaml"]);
        assert!(r.exit(1).stderr().contains(says), "{says}: {}", r.describe());
    }
    // A lockfile edited by hand so that a phase draws from a source it has no inputs for, or
    // leaves a source's inputs unused, is refused before anything runs.
    let locked = fs_err::read_to_string(p.path("lockfiles/phased.lock")).unwrap();
    assert!(locked.contains("\"mixture\":{\"long\":1}"), "{locked}");
    for (edit, says) in
        [("{\"longer\":1}", "needs input `longer-tokens`"), ("{\"web\":1}", "has no input `long-order`")]
    {
        p.write("lockfiles/edited.lock", &locked.replace("{\"long\":1}", edit));
        let r = p.prov(&["run", "lockfiles/edited.lock"]);
        assert!(r.exit(1).stderr().contains(says), "{says}: {}", r.describe());
    }
}
