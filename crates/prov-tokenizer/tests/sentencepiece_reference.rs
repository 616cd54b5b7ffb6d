//! The AFM-style tokenizer against PyPI `sentencepiece` 0.2.3, the reference implementation:
//! a model trained by Provenant on the main job's real multilingual corpus (the UDHR in 478
//! languages, Debian's German, French, Italian and Spanish manual pages and fortunes) is
//! written in `SentencePiece`'s model format; `sentencepiece` loads it, has the same pieces at
//! the same ids, and encodes every document of the corpus to the same ids as the
//! `tokenizer.json` that Provenant's `tokenize` stage encodes with. Characters outside the
//! coverage (rare scripts) take the byte-fallback path on both sides, and both decode every
//! document back to its text.

#![allow(clippy::unwrap_used, clippy::print_stderr, missing_docs)]

use prov_tokenizer::sentencepiece::{PieceType, SentencePieceConfig, train};
use serde_json::Value;

const REFERENCE: &str = r#"
import json, sys
import sentencepiece as spm
case = json.load(sys.stdin)
sp = spm.SentencePieceProcessor(model_file=case["model"])
texts = [json.loads(line)["text"] for path in case["corpus"] for line in open(path, encoding="utf-8") if line.strip()]
texts += case["extra"]
ids = [sp.encode(t, out_type=int) for t in texts]
json.dump({
    "pieces": [sp.id_to_piece(i) for i in range(sp.get_piece_size())],
    "unk": sp.unk_id(), "bos": sp.bos_id(), "eos": sp.eos_id(), "pad": sp.pad_id(),
    "ids": ids,
    "decoded_equal": sum(sp.decode(i) == t for i, t in zip(ids, texts[:len(texts) - len(case["extra"])])),
    "extra_decoded": [sp.decode(i) for i in ids[len(texts) - len(case["extra"]):]],
}, sys.stdout)
"#;

#[test]
fn sentencepiece_loads_the_model_and_encodes_the_corpus_to_the_same_ids() {
    let Some(python) = prov_testkit::venv_python() else { return };
    let corpus_dir = prov_testkit::repo_root().join("recipes/data/mini-apertus/corpus");
    let Some(corpus_dir) = prov_testkit::require(corpus_dir, "run `scripts/setup` (it runs scripts/fetch-main-data)")
    else {
        return;
    };
    let files: Vec<std::path::PathBuf> = ["debian.jsonl", "udhr.jsonl"].iter().map(|f| corpus_dir.join(f)).collect();
    let texts: Vec<String> = files
        .iter()
        .flat_map(|f| fs_err::read_to_string(f).unwrap().lines().map(str::to_owned).collect::<Vec<_>>())
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<Value>(&l).unwrap()["text"].as_str().unwrap().to_owned())
        .collect();
    let config =
        SentencePieceConfig { vocab_size: 4096, min_frequency: 2, character_coverage: 0.9995, max_piece_length: 16 };
    let model = train(&config, texts.iter().cloned()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let model_path = dir.path().join("tokenizer.model");
    fs_err::write(&model_path, model.to_model_bytes()).unwrap();
    let mut tokenizer = tokenizers::Tokenizer::from_bytes(model.to_tokenizer_json().unwrap()).unwrap();
    // As `tokenize` and the chat template encode: text that spells a special token is text.
    tokenizer.set_encode_special_tokens(true);
    // Text that spells the control pieces, the unknown piece and byte pieces, and odd spacing.
    let extra: Vec<String> = [
        "<unk> a<|bos|>b <|eos|><|pad|>",
        "<0x41> <0xE2>\u{2581}▁ ▁x",
        "  two  spaces , and\ttabs\n\nlines  ",
        "digits 1234567890 ٣٤٥ ①",
        "emoji 🦀🦀 and ☃ and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    ]
    .map(String::from)
    .to_vec();
    let corpus = texts.len();
    let texts: Vec<String> = texts.into_iter().chain(extra.iter().cloned()).collect();
    let case = serde_json::json!({"model": model_path, "corpus": files, "extra": extra});
    let reference: Value =
        serde_json::from_slice(&prov_testkit::run_python(&python, REFERENCE, case.to_string().as_bytes())).unwrap();

    let pieces: Vec<&str> = reference["pieces"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    let ours: Vec<&str> = model.pieces.iter().map(|p| p.piece.as_str()).collect();
    assert_eq!(pieces, ours, "sentencepiece reads the pieces at their ids");
    assert_eq!(
        [&reference["unk"], &reference["bos"], &reference["eos"], &reference["pad"]],
        [0, 1, 2, 3].map(Value::from).each_ref()
    );
    let ids = reference["ids"].as_array().unwrap();
    assert_eq!(ids.len(), texts.len());
    let (mut tokens, mut bytes) = (0usize, 0usize);
    for (i, (text, want)) in texts.iter().zip(ids).enumerate() {
        let encoding = tokenizer.encode(text.as_str(), false).unwrap();
        let got: Vec<u64> = encoding.get_ids().iter().map(|&id| u64::from(id)).collect();
        let want: Vec<u64> = want.as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        assert_eq!(got, want, "document {i}: {:?}", &text[..text.len().min(200)]);
        let decoded = tokenizer.decode(encoding.get_ids(), false).unwrap();
        match i.checked_sub(corpus) {
            // A `▁` of the text itself decodes as a space, in SentencePiece as here.
            Some(e) => {
                assert_eq!(decoded, reference["extra_decoded"][e], "extra text {e} decodes as sentencepiece does");
            }
            None => assert_eq!(decoded, *text, "document {i} decodes"),
        }
        tokens += got.len();
        bytes += got.iter().filter(|&&id| model.pieces[id as usize].kind == PieceType::Byte).count();
    }
    assert_eq!(reference["decoded_equal"], corpus, "sentencepiece decodes every document back");
    // The corpus takes both paths: learnt pieces, and bytes for the rarest characters.
    assert!(bytes > 0 && bytes * 100 < tokens, "{bytes} byte pieces of {tokens}");
    eprintln!("{} documents, {tokens} tokens, {bytes} byte pieces, all equal", texts.len());
}
