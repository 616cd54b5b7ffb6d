//! Tokenizers: the `tokenizer` stage trains a byte-level BPE tokenizer with Hugging Face
//! `tokenizers` on a prepared corpus and writes its `tokenizer.json`; the `sentencepiece`
//! stage trains AFM's SentencePiece-style BPE and writes it both in `SentencePiece`'s model
//! format and as `tokenizer.json` ([`sentencepiece`]); the `tokenize` stage
//! turns documents into packed training samples ([`prov_dataset::tokens`]) and draws the
//! seeded data order.
//!
//! Both are `portable`: BPE training counts pairs in parallel but sums them, picks each merge
//! by count with ties broken by the pair's ids, and serialises the vocabulary in id order, so
//! the same corpus gives the same `tokenizer.json` bytes on any machine and thread count (a
//! test trains with one and with two threads).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use prov_dataset::shard_documents;
use prov_dataset::tokens::{TokenWriter, data_order, encode_order};
use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{DatasetRecord, Determinism, OutputRef, OutputType};
use prov_store::{ObjectKind, Store};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer, TokenizerBuilder};

pub mod chat;
pub mod sentencepiece;

/// The special tokens that frame documents, in id order from 0, and their roles. The chat
/// tokens ([`chat::CHAT_TOKENS`]) follow them.
pub const SPECIAL_TOKENS: [(&str, &str); 3] = [("bos", "<|bos|>"), ("eos", "<|eos|>"), ("pad", "<|pad|>")];

/// The smallest vocabulary: the special and chat tokens, the 256 byte symbols and one merge.
pub const MIN_VOCAB: u32 = 265;

/// The `tokenizer` stage's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenizerConfig {
    /// Tokens in the vocabulary, special tokens and the byte alphabet included.
    #[serde(default = "default_vocab")]
    pub vocab_size: u32,
    /// A pair merges only if it occurs at least this often.
    #[serde(default = "default_min_frequency")]
    pub min_frequency: u64,
}

fn default_vocab() -> u32 {
    4096
}
fn default_min_frequency() -> u64 {
    2
}

/// Reads the documents of a dataset input, shard by shard, in dataset order.
pub(crate) fn tokenizer_error(input: &str, e: impl std::fmt::Display) -> StageError {
    StageError::Input { input: input.into(), message: format!("tokenizers: {e}") }
}

/// Trains the byte-level BPE tokenizer on `texts`, in their order, and returns
/// `tokenizer.json`'s bytes.
pub fn train_tokenizer<I>(config: &TokenizerConfig, texts: I) -> Result<Vec<u8>, String>
where
    I: Iterator<Item = String> + Send,
{
    let special: Vec<AddedToken> =
        SPECIAL_TOKENS.iter().chain(&chat::CHAT_TOKENS).map(|(_, t)| AddedToken::from(*t, true)).collect();
    let mut trainer = BpeTrainerBuilder::new()
        .vocab_size(config.vocab_size as usize)
        .min_frequency(config.min_frequency)
        .show_progress(false)
        .special_tokens(special)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .build();
    let mut tokenizer = TokenizerBuilder::new()
        .with_model(BPE::default())
        .with_normalizer(None::<tokenizers::NormalizerWrapper>)
        .with_pre_tokenizer(Some(ByteLevel::new(false, true, true)))
        .with_post_processor(Some(ByteLevel::new(false, true, true)))
        .with_decoder(Some(ByteLevelDecoder::default()))
        .build()
        .map_err(|e| e.to_string())?;
    tokenizer.train(&mut trainer, texts).map_err(|e| e.to_string())?;
    // The pretty form, byte for byte what Python's `Tokenizer.to_str(pretty=True)` writes for
    // the same tokenizer: the file round-trips through Hugging Face's own reader unchanged.
    let bytes = tokenizer.to_string(true).map_err(|e| e.to_string())?.into_bytes();
    Ok(bytes)
}

/// Runs `train` on the texts of input `docs`, streamed shard by shard in dataset order, on the
/// stage's pool, and returns what it returns with the documents and characters it read. What
/// a trainer holds is its own counts, not the text. A shard that cannot be read ends the stream
/// and fails the stage: a tokenizer trained on part of the input is never kept.
pub(crate) fn train_on_docs<T: Send>(
    cx: &StageContext<'_>,
    train: impl FnOnce(Box<dyn Iterator<Item = String> + Send + '_>) -> T + Send,
) -> Result<(T, u64, u64), StageError> {
    let ds = cx.input_record::<DatasetRecord>("docs")?;
    let failed: Mutex<Option<StageError>> = Mutex::new(None);
    let (documents, characters) = (AtomicU64::new(0), AtomicU64::new(0));
    let texts = ds
        .shards
        .iter()
        .flat_map(|shard| -> Box<dyn Iterator<Item = Result<String, StageError>> + Send + '_> {
            match shard_documents(cx.store, &shard.digest) {
                Ok(docs) => Box::new(docs.map(|d| d.map(|d| d.text).map_err(StageError::from))),
                Err(e) => Box::new(std::iter::once(Err(e.into()))),
            }
        })
        .map_while(|text| match text {
            Ok(text) => {
                documents.fetch_add(1, Ordering::Relaxed);
                characters.fetch_add(text.chars().count() as u64, Ordering::Relaxed);
                Some(text)
            }
            Err(e) => {
                *failed.lock().expect("no thread panics holding it") = Some(e);
                None
            }
        });
    let trained = cx.pool.install(|| train(Box::new(texts)));
    if let Some(e) = failed.into_inner().expect("no thread panicked holding it") {
        return Err(e);
    }
    Ok((trained, documents.into_inner(), characters.into_inner()))
}

/// The `tokenizer` stage kind.
pub struct TokenizerStage;

impl Stage for TokenizerStage {
    fn kind(&self) -> &'static str {
        "tokenizer"
    }
    fn version(&self) -> u32 {
        // 2: the chat tokens (ids 3 to 7) join the vocabulary.
        2
    }
    fn summary(&self) -> &'static str {
        "trains a byte-level BPE tokenizer (Hugging Face tokenizers) and writes tokenizer.json"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let c: TokenizerConfig = parse_params(params)?;
        if c.vocab_size < MIN_VOCAB || c.vocab_size > 1 << 24 {
            return Err(ConfigError::at(
                &["vocab_size"],
                format!("must be between {MIN_VOCAB} and 16777216, got {}", c.vocab_size),
            )
            .with_hint("the vocabulary holds 3 special and 5 chat tokens and the 256 byte symbols before any merge"));
        }
        if c.min_frequency == 0 {
            return Err(ConfigError::at(&["min_frequency"], "must be at least 1"));
        }
        Ok(serde_json::to_value(c).expect("integers encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("docs", vec![OutputType::Dataset])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("tokenizer".into(), OutputType::File)]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: TokenizerConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let (trained, documents, characters) = train_on_docs(cx, |texts| train_tokenizer(&config, texts))?;
        let bytes = trained.map_err(|e| tokenizer_error("docs", e))?;
        let tokenizer = Tokenizer::from_bytes(&bytes).map_err(|e| tokenizer_error("docs", e))?;
        let digest = cx.store.put_bytes(ObjectKind::Blob, &bytes)?;
        let parsed: Value = serde_json::from_slice(&bytes).map_err(|e| tokenizer_error("docs", e))?;
        let merges = parsed["model"]["merges"].as_array().map_or(0, Vec::len);
        let special: serde_json::Map<String, Value> = SPECIAL_TOKENS
            .iter()
            .chain(&chat::CHAT_TOKENS)
            .filter_map(|(_, t)| tokenizer.token_to_id(t).map(|id| ((*t).to_owned(), json!(id))))
            .collect();
        let mut out = StageOutput::default();
        out.outputs.insert("tokenizer".into(), OutputRef { output_type: OutputType::File, digest });
        out.stats = BTreeMap::from([
            ("vocab_size".into(), json!(tokenizer.get_vocab_size(true))),
            ("merges".into(), json!(merges)),
            ("special_tokens".into(), Value::Object(special)),
            ("documents".into(), json!(documents)),
            ("characters".into(), json!(characters)),
        ]);
        Ok(out)
    }
}

/// The `tokenize` stage's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenizeConfig {
    /// Tokens of a sample's inputs (a sample stores one more).
    #[serde(default = "default_seq_len")]
    pub seq_len: u64,
    /// Passes over the samples in the data order, each a fresh permutation.
    #[serde(default = "default_epochs")]
    pub epochs: u64,
    /// Samples per token shard file.
    #[serde(default = "default_samples_per_shard")]
    pub samples_per_shard: u64,
}

fn default_seq_len() -> u64 {
    128
}
fn default_epochs() -> u64 {
    1
}
fn default_samples_per_shard() -> u64 {
    1024
}

/// Reads a stored `tokenizer.json`.
pub fn load_tokenizer(store: &Store, digest: &prov_store::Digest) -> Result<Tokenizer, StageError> {
    Tokenizer::from_bytes(store.read(digest)?).map_err(|e| tokenizer_error("tokenizer", e))
}

/// The ids of the special tokens, by role, in `tokenizer`.
pub fn special_ids(tokenizer: &Tokenizer) -> Result<BTreeMap<String, u32>, StageError> {
    SPECIAL_TOKENS
        .iter()
        .map(|(role, token)| {
            tokenizer
                .token_to_id(token)
                .map(|id| ((*role).to_owned(), id))
                .ok_or_else(|| tokenizer_error("tokenizer", format!("the tokenizer has no `{token}` token")))
        })
        .collect()
}

/// The kind name of the `tokenize` stage; its `docs` input is a run's training data.
pub const TOKENIZE_KIND: &str = "tokenize";

/// The `tokenize` stage kind.
pub struct TokenizeStage;

impl Stage for TokenizeStage {
    fn kind(&self) -> &'static str {
        TOKENIZE_KIND
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "tokenises documents with BOS/EOS, packs them into samples and draws the seeded data order"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let c: TokenizeConfig = parse_params(params)?;
        for (field, v, max) in [
            ("seq_len", c.seq_len, 1 << 20),
            ("epochs", c.epochs, 1 << 16),
            ("samples_per_shard", c.samples_per_shard, 1 << 24),
        ] {
            if v == 0 || v > max {
                return Err(ConfigError::at(&[field], format!("must be between 1 and {max}, got {v}")));
            }
        }
        Ok(serde_json::to_value(c).expect("integers encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("docs", vec![OutputType::Dataset]), ("tokenizer", vec![OutputType::File])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("tokens".into(), OutputType::Tree), ("order".into(), OutputType::File)]
    }
    fn seed_names(&self) -> &'static [&'static str] {
        &["order"]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: TokenizeConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let mut tokenizer = load_tokenizer(cx.store, &cx.input("tokenizer")?.digest)?;
        // A document that spells `<|eos|>` means the characters, not the control token: only
        // the BOS and EOS added below frame a document.
        tokenizer.set_encode_special_tokens(true);
        let special = special_ids(&tokenizer)?;
        let vocab = u32::try_from(tokenizer.get_vocab_size(true))
            .map_err(|_| tokenizer_error("tokenizer", "vocabulary too large"))?;
        let ds = cx.input_record::<DatasetRecord>("docs")?;
        let mut writer = TokenWriter::new(cx.store, config.seq_len, config.samples_per_shard, vocab, special.clone())?;
        let (bos, eos) = (special["bos"], special["eos"]);
        for shard in &ds.shards {
            let docs: Vec<prov_dataset::Document> =
                shard_documents(cx.store, &shard.digest)?.collect::<Result<_, _>>()?;
            let texts: Vec<&str> = docs.iter().map(|d| d.text.as_str()).collect();
            // encode_batch keeps input order; the pool only changes who computes what.
            let encodings =
                cx.pool.install(|| tokenizer.encode_batch(texts, false)).map_err(|e| tokenizer_error("docs", e))?;
            for (doc, encoding) in docs.iter().zip(encodings) {
                let mut ids = Vec::with_capacity(encoding.get_ids().len() + 2);
                ids.push(bos);
                ids.extend_from_slice(encoding.get_ids());
                ids.push(eos);
                writer.push(&doc.id, &ids)?;
            }
        }
        let (tokens, meta) = writer.finish()?;
        let order = data_order(meta.samples, config.epochs, cx.seed("order")?);
        let order_digest = cx.store.put_bytes(ObjectKind::Blob, &encode_order(&order))?;
        let mut out = StageOutput::default();
        out.outputs.insert("tokens".into(), OutputRef { output_type: OutputType::Tree, digest: tokens });
        out.outputs.insert("order".into(), OutputRef { output_type: OutputType::File, digest: order_digest });
        out.stats = BTreeMap::from([
            ("documents".into(), json!(meta.documents)),
            ("tokens".into(), json!(meta.tokens)),
            ("samples".into(), json!(meta.samples)),
            ("tokens_dropped".into(), json!(meta.tokens - meta.samples * meta.seq_len - 1)),
            ("order_length".into(), json!(order.len())),
            ("vocab_size".into(), json!(vocab)),
        ]);
        Ok(out)
    }
}

/// Registers `tokenizer`, `sentencepiece` and `tokenize`.
pub fn register(registry: &mut prov_exec::Registry) {
    registry.register(std::sync::Arc::new(TokenizerStage));
    registry.register(std::sync::Arc::new(sentencepiece::SentencePieceStage));
    registry.register(std::sync::Arc::new(TokenizeStage));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Vec<String> {
        let base = [
            "Alle Menschen sind frei und gleich an Würde und Rechten geboren.",
            "All human beings are born free and equal in dignity and rights.",
            "Tous les êtres humains naissent libres et égaux en dignité et en droits.",
            "人人生而自由，在尊严和权利上一律平等。",
        ];
        (0..200).map(|i| format!("{} ({i})", base[i % base.len()])).collect()
    }

    fn train_with(threads: usize) -> Vec<u8> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let config = TokenizerConfig { vocab_size: 400, min_frequency: 2 };
        pool.install(|| train_tokenizer(&config, corpus().into_iter())).unwrap()
    }

    /// The stage streams its input into the trainer: it writes the bytes of training on all
    /// the text at once, and a shard that cannot be read fails the stage instead of giving a
    /// tokenizer of the shards before it.
    #[test]
    fn the_stage_streams_its_input_and_a_lost_shard_fails_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let texts = corpus();
        let mut shards = Vec::new();
        for (s, part) in texts.chunks(70).enumerate() {
            let mut w = prov_dataset::ShardWriter::new(&store).unwrap();
            for (i, t) in part.iter().enumerate() {
                w.push(prov_dataset::Document::new(format!("{s}-{i}"), t.clone())).unwrap();
            }
            shards.push(w.finish().unwrap());
        }
        let (dataset, _) = prov_dataset::write_dataset(&store, shards.clone()).unwrap();
        let inputs = BTreeMap::from([(
            "docs".to_owned(),
            prov_exec::StageInput { output_type: OutputType::Dataset, digest: dataset },
        )]);
        let config = json!({"vocab_size": 400, "min_frequency": 2});
        let bench = prov_exec::testing::TestBench::new(2);
        let cx = bench.context(&store, dir.path(), "tokenizer", &config, &inputs);
        let out = TokenizerStage.run(&cx).unwrap();
        assert_eq!(store.read(&out.outputs["tokenizer"].digest).unwrap(), train_with(2));
        assert_eq!(out.stats["documents"], json!(200));
        let chars: usize = texts.iter().map(|t| t.chars().count()).sum();
        assert_eq!(out.stats["characters"], json!(chars));

        store.remove_objects(&[shards[1].digest]).unwrap();
        let e = TokenizerStage.run(&cx).expect_err("a lost shard fails the stage");
        assert!(e.to_string().contains(&shards[1].digest.to_string()), "{e}");
    }

    #[test]
    fn training_gives_the_same_bytes_on_one_and_two_threads() {
        let one = train_with(1);
        assert_eq!(one, train_with(2));
        assert_eq!(one, train_with(1));
        let tokenizer = Tokenizer::from_bytes(&one).unwrap();
        assert_eq!(tokenizer.get_vocab_size(true), 400);
        let ids = special_ids(&tokenizer).unwrap();
        assert_eq!(ids, BTreeMap::from([("bos".into(), 0), ("eos".into(), 1), ("pad".into(), 2)]));
    }

    #[test]
    fn text_round_trips_byte_for_byte() {
        let tokenizer = Tokenizer::from_bytes(train_with(1)).unwrap();
        for text in ["Würde und Rechten", "人人生而自由 😀 never seen", "  two  spaces\nand a line"] {
            let enc = tokenizer.encode(text, false).unwrap();
            assert_eq!(tokenizer.decode(enc.get_ids(), false).unwrap(), text);
        }
    }

    #[test]
    fn configs_are_checked_with_their_field() {
        let e = TokenizerStage.resolve_config(&json!({"vocab_size": 100})).unwrap_err();
        assert_eq!(e.path, ["vocab_size"]);
        assert!(e.message.contains("between 265 and"), "{e}");
        let e = TokenizeStage.resolve_config(&json!({"seq_len": 0})).unwrap_err();
        assert_eq!(e.path, ["seq_len"]);
        assert!(TokenizeStage.resolve_config(&json!({"seq_len": 64, "epochs": 2})).is_ok());
    }
}
