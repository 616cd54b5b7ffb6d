//! The `tokenizer` and `tokenize` stages end to end, on the quickstart's real multilingual
//! text (248 articles of the UDHR in eight languages): the trained `tokenizer.json` loads in
//! Python `tokenizers` and `transformers` and gives exactly the ids the token tree holds,
//! document by document; samples are the packed stream cut with one shared token; the order
//! is a fresh permutation per epoch; two stores and two thread counts give the same digests,
//! and the run replays bit for bit.

use std::collections::BTreeSet;

use prov_dataset::tokens::{TokenData, read_order};
use prov_store::{Access, Digest, Store};

use crate::common::{Project, repo_root, venv_python};

const SEQ_LEN: u64 = 64;
const EPOCHS: u64 = 2;

/// A document whose text spells the special tokens: they must be read as text.
const SPELLED: &str = "A document may contain <|eos|> or <|bos|> as plain text; they are not control tokens.";

fn recipe() -> String {
    format!(
        "schema: 1\nname: tok\nseed: 5\nsources:\n  udhr:\n    path: data/docs.jsonl\n    license: MIT\n\
         stages:\n  shards:\n    kind: shard\n    inputs: {{docs: udhr}}\n    params: {{shards: 3}}\n\
         \x20 tokenizer:\n    kind: tokenizer\n    inputs: {{docs: shards}}\n    params: {{vocab_size: 1024}}\n\
         \x20 tokens:\n    kind: tokenize\n    inputs: {{docs: shards, tokenizer: tokenizer.tokenizer}}\n    params: {{seq_len: {SEQ_LEN}, epochs: {EPOCHS}}}\n"
    )
}

/// One document that spells special tokens, then the quickstart's documents, as JSON Lines,
/// and their texts in dataset order.
fn docs() -> (String, Vec<String>) {
    let mut jsonl = serde_json::json!({"id": "spelled", "text": SPELLED, "language": "en"}).to_string();
    jsonl.push('\n');
    jsonl.push_str(&fs_err::read_to_string(repo_root().join("recipes/data/quickstart/udhr-sample.jsonl")).unwrap());
    let texts = jsonl
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["text"].as_str().unwrap().to_owned())
        .collect();
    (jsonl, texts)
}

fn project() -> Project {
    let p = Project::new();
    p.write("recipes/data/docs.jsonl", &docs().0);
    p.write("recipes/tok.yaml", &recipe());
    p
}

fn stage<'v>(lines: &'v [serde_json::Value], name: &str) -> &'v serde_json::Value {
    lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == name).unwrap_or_else(|| panic!("{lines:?}"))
}

fn digest(lines: &[serde_json::Value], name: &str, output: &str) -> Digest {
    stage(lines, name)["data"]["outputs"][output].as_str().unwrap().parse().unwrap()
}

fn stats(p: &Project, lines: &[serde_json::Value], name: &str) -> serde_json::Value {
    let shown = p.json(&["show", stage(lines, name)["data"]["manifest"].as_str().unwrap()]);
    shown[0]["data"]["record"].clone()
}

fn open_store(p: &Project) -> Store {
    Store::open(&p.path(".prov"), Access::Shared, true).unwrap()
}

/// Python's side: the tokenizer loaded by `tokenizers` and by `transformers`; every text
/// encoded without special tokens, special-token strings read as text.
const PYTHON: &str = r#"
import json, sys
from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast
req = json.load(sys.stdin)
path = req["tokenizer"]
tok = Tokenizer.from_file(path)
out = {
    "resaved": tok.to_str(pretty=True),
    "special": [tok.token_to_id(t) for t in ["<|bos|>", "<|eos|>", "<|pad|>"]],
    "vocab_size": tok.get_vocab_size(with_added_tokens=True),
}
tok.encode_special_tokens = True
out["ids"] = [tok.encode(t, add_special_tokens=False).ids for t in req["texts"]]
fast = PreTrainedTokenizerFast(tokenizer_file=path, bos_token="<|bos|>", eos_token="<|eos|>", pad_token="<|pad|>")
out["fast_special"] = [fast.bos_token_id, fast.eos_token_id, fast.pad_token_id]
out["sentence_ids"] = [tok.encode(t, add_special_tokens=False).ids for t in req["sentences"]]
out["fast_ids"] = [fast.encode(t, add_special_tokens=False) for t in req["sentences"]]
out["fast_decoded"] = [fast.decode(ids, clean_up_tokenization_spaces=False) for ids in out["fast_ids"]]
print(json.dumps(out))
"#;

fn python(tokenizer: &std::path::Path, texts: &[String], sentences: &[String]) -> Option<serde_json::Value> {
    let python = venv_python()?;
    let mut child = std::process::Command::new(python)
        .args(["-W", "ignore", "-c", PYTHON])
        .env("HF_HUB_OFFLINE", "1")
        .env("TRANSFORMERS_VERBOSITY", "error")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let request = serde_json::json!({"tokenizer": tokenizer, "texts": texts, "sentences": sentences});
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), request.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "python failed:\n{}", String::from_utf8_lossy(&out.stderr));
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn python_reads_the_tokenizer_and_agrees_on_every_token() {
    let p = project();
    let lines = p.json(&["run", "recipes/tok.yaml"]);
    let (_, texts) = docs();

    // The tokenizer: its stats, the special tokens at 0, 1, 2 and the chat tokens at 3 to 7.
    let record = stats(&p, &lines, "tokenizer");
    assert_eq!(record["determinism"], "portable", "{record}");
    assert_eq!(record["config"], serde_json::json!({"vocab_size": 1024, "min_frequency": 2}), "{record}");
    let s = &record["stats"];
    assert_eq!(s["vocab_size"], 1024, "{s}");
    assert_eq!(s["merges"], 1024 - 264, "every token beyond the 8 specials and the 256 bytes is a merge: {s}");
    assert_eq!(s["documents"], texts.len(), "{s}");
    let chars: usize = texts.iter().map(|t| t.chars().count()).sum();
    assert_eq!(s["characters"], chars, "{s}");
    let tokens =
        ["<|bos|>", "<|eos|>", "<|pad|>", "<|system|>", "<|developer|>", "<|user|>", "<|assistant|>", "<|end|>"];
    let ids: serde_json::Map<_, _> = tokens.iter().enumerate().map(|(i, t)| ((*t).to_owned(), i.into())).collect();
    assert_eq!(s["special_tokens"], serde_json::Value::Object(ids), "{s}");

    // The token data.
    let store = open_store(&p);
    let data = TokenData::open(&store, &digest(&lines, "tokens", "tokens")).unwrap();
    let meta = data.meta().clone();
    assert_eq!((meta.vocab_size, meta.seq_len, meta.documents), (1024, SEQ_LEN, texts.len() as u64));
    let special = meta.special_ids();
    assert_eq!((special["bos"], special["eos"], special["pad"]), (0, 1, 2));
    let s = &stats(&p, &lines, "tokens")["stats"];
    assert_eq!(s["samples"], meta.samples, "{s}");
    assert_eq!(s["tokens"], meta.tokens, "{s}");
    assert_eq!(s["tokens_dropped"], meta.tokens - (meta.samples * SEQ_LEN + 1), "{s}");
    assert!(meta.tokens - (meta.samples * SEQ_LEN + 1) < SEQ_LEN, "only a partial sample is dropped: {s}");

    // The packed stream, rebuilt from the samples: sample i is [i·L, i·L + L + 1).
    let mut stream: Vec<u32> = Vec::new();
    for i in 0..meta.samples {
        let sample = data.sample(i).unwrap();
        assert_eq!(sample.len() as u64, SEQ_LEN + 1);
        if i > 0 {
            assert_eq!(stream.pop(), Some(sample[0]), "consecutive samples share one token ({i})");
        }
        stream.extend(&sample);
    }
    assert!(data.sample(meta.samples).is_err(), "past the end is an error, not a panic");
    assert_eq!(stream.len() as u64, meta.samples * SEQ_LEN + 1);
    // The first document spells special tokens: as text, so its only BOS and EOS frame it.
    let first = &data.sample_documents(0).unwrap()[0];
    assert_eq!(first.0, "spelled");
    let framed = &stream[..usize::try_from(first.2).unwrap()];
    assert_eq!(framed.iter().filter(|&&t| t < 3).count(), 2, "{framed:?}");

    // The order: a permutation of the samples per epoch, each epoch its own.
    let order = read_order(&store, &digest(&lines, "tokens", "order")).unwrap();
    assert_eq!(order.len() as u64, EPOCHS * meta.samples);
    let all: BTreeSet<u64> = (0..meta.samples).collect();
    for epoch in order.chunks(meta.samples as usize) {
        assert_eq!(epoch.iter().copied().collect::<BTreeSet<u64>>(), all);
    }
    assert_ne!(order[..meta.samples as usize], order[meta.samples as usize..]);

    // Python: tokenizer.json loads, re-serialises to the same bytes, and encodes every
    // document (BOS + ids + EOS, in dataset order) to exactly the packed stream.
    let json = store.read(&digest(&lines, "tokenizer", "tokenizer")).unwrap();
    let file = p.write("tokenizer.json", std::str::from_utf8(&json).unwrap());
    let sentences: Vec<String> = texts
        .iter()
        .step_by(31)
        .map(|t| t.lines().find(|l| l.chars().count() > 40).unwrap_or(t).to_owned())
        .chain(["Ünïcödé, 人人生而自由, 😀 and a\ttab".to_owned(), SPELLED.to_owned()])
        .collect();
    let Some(py) = python(&file, &texts, &sentences) else { return };
    assert_eq!(
        py["resaved"].as_str().unwrap().as_bytes(),
        json,
        "Python re-serialises tokenizer.json to the same bytes"
    );
    assert_eq!(py["special"], serde_json::json!([0, 1, 2]));
    assert_eq!(py["vocab_size"], 1024);
    assert_eq!(py["fast_special"], serde_json::json!([0, 1, 2]));
    let ids: Vec<Vec<u32>> = serde_json::from_value(py["ids"].clone()).unwrap();
    let mut expected: Vec<u32> = Vec::new();
    let mut spans = Vec::new();
    for (text, ids) in texts.iter().zip(&ids) {
        assert!(!ids.is_empty() || text.is_empty());
        spans.push((expected.len() as u64, ids.len() as u64 + 2));
        expected.push(0);
        expected.extend(ids);
        expected.push(1);
    }
    assert_eq!(expected.len() as u64, meta.tokens, "Python's token count");
    assert_eq!(stream, expected[..stream.len()], "the packed stream is Python's tokens");
    assert_eq!(ids[0].iter().filter(|&&t| t < 3).count(), 0, "special tokens spelled in text are text");
    // Documents in a sample: the spans match Python's document lengths.
    for i in [0, meta.samples / 2, meta.samples - 1] {
        let (lo, hi) = (i * SEQ_LEN, i * SEQ_LEN + SEQ_LEN + 1);
        let want: Vec<u64> =
            spans.iter().enumerate().filter(|(_, (s, n))| s + n > lo && *s < hi).map(|(d, _)| d as u64).collect();
        let got = data.sample_documents(i).unwrap();
        assert_eq!(got.len(), want.len(), "sample {i}: {got:?}");
        for ((_, from, to), d) in got.iter().zip(&want) {
            let (start, n) = spans[*d as usize];
            assert_eq!((*from, *to), (lo.max(start) - start, hi.min(start + n) - start), "sample {i}, document {d}");
        }
    }
    // transformers: the ids of `tokenizers` for real sentences (the stream above holds the
    // Rust side's), and decoding gives the text back.
    let fast: Vec<Vec<u32>> = serde_json::from_value(py["fast_ids"].clone()).unwrap();
    let plain: Vec<Vec<u32>> = serde_json::from_value(py["sentence_ids"].clone()).unwrap();
    for (((sentence, fast), plain), decoded) in
        sentences.iter().zip(&fast).zip(&plain).zip(py["fast_decoded"].as_array().unwrap())
    {
        assert_eq!(decoded.as_str().unwrap(), sentence);
        if sentence != SPELLED {
            assert_eq!(fast, plain, "{sentence}");
        }
    }
}

#[test]
fn two_stores_and_two_thread_counts_give_the_same_bytes_and_replay() {
    let one = project();
    let two = project();
    let r1 = one.json(&["--threads", "1", "run", "recipes/tok.yaml"]);
    let r2 = two.json(&["--threads", "2", "run", "recipes/tok.yaml"]);
    for (name, output) in [("tokenizer", "tokenizer"), ("tokens", "tokens"), ("tokens", "order")] {
        assert_eq!(digest(&r1, name, output), digest(&r2, name, output), "{name}.{output}");
    }
    two.prov(&["replay", "lockfiles/tok.lock"]).success();
}

#[test]
fn bad_configs_name_their_field() {
    let p = project();
    let bad = recipe().replace("vocab_size: 1024", "vocab_size: 100");
    p.write("recipes/bad.yaml", &bad);
    let r = p.prov(&["lock", "recipes/bad.yaml"]);
    r.exit(1);
    assert!(r.stderr().contains("stages.tokenizer.params.vocab_size"), "{}", r.describe());
    let bad = recipe().replace("epochs: 2", "epochs: 0");
    p.write("recipes/bad.yaml", &bad);
    let r = p.prov(&["lock", "recipes/bad.yaml"]);
    r.exit(1);
    assert!(r.stderr().contains("stages.tokens.params.epochs"), "{}", r.describe());
    // More tokens per sample than the corpus holds: an error, not an empty dataset.
    let bad = recipe().replace(&format!("seq_len: {SEQ_LEN}"), "seq_len: 1000000");
    p.write("recipes/bad.yaml", &bad);
    let r = p.prov(&["run", "recipes/bad.yaml"]);
    assert_ne!(r.code(), 0, "{}", r.describe());
    assert!(!r.stderr().contains("panicked"), "{}", r.describe());
    assert!(r.stderr().contains("no sample"), "{}", r.describe());
}
