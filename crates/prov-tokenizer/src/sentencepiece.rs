//! The AFM report's tokenizer (§3.1.6): BPE in the `SentencePiece` style, every digit split,
//! byte fallback for what the vocabulary lacks, written in `SentencePiece`'s model format so
//! that PyPI `sentencepiece` loads it, and as the `tokenizer.json` every other stage reads.
//!
//! - [`train`] learns the pieces from documents: the text is normalised as `SentencePiece` does
//!   with its `identity` rule (a `▁` prepended, each space written `▁`), split into words (a
//!   word starts at each `▁`; every ASCII digit and every other white-space character is a
//!   word of its own), and pairs of symbols are merged by count, most frequent first, ties to
//!   the pair of smaller ids. Characters outside `character_coverage` of the text are not
//!   pieces: they are encoded as their UTF-8 bytes (`<0xE2>` …).
//! - [`SentencePieceModel::to_model_bytes`] writes `SentencePiece`'s `ModelProto` (protocol
//!   buffers, the fields of `sentencepiece_model.proto`): the pieces with their scores and
//!   types, a `TrainerSpec` naming BPE with byte fallback and split digits, and a
//!   `NormalizerSpec` for the `identity` rule without whitespace removal.
//! - [`SentencePieceModel::to_tokenizer_json`] writes the same model as Hugging Face
//!   `tokenizers` BPE, as `transformers` converts a `SentencePiece` BPE model: the merges are
//!   every pair of pieces whose concatenation is a piece, ranked by that piece's score. That
//!   merges, at each step, the adjacent pair whose concatenation has the highest score (the
//!   leftmost on a tie), which is `SentencePiece`'s BPE encoding; a test encodes real
//!   multilingual text with both and requires the same ids.
//!
//! Ids: 0 `<unk>`, then the special tokens of [`crate::SPECIAL_TOKENS`] and
//! [`crate::chat::CHAT_TOKENS`] as control pieces (`SentencePiece` never produces them from
//! text), then the 256 byte pieces, then the characters by frequency, then the merged pieces
//! in the order they were learnt, each scored `-(its rank)`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// `SentencePiece`'s meta symbol for a space.
pub const SPACE: char = '\u{2581}';

/// The unknown piece, id 0.
pub const UNK: &str = "<unk>";

/// What [`train`] is told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SentencePieceConfig {
    /// Pieces in the vocabulary, the special, byte and character pieces included.
    #[serde(default = "default_vocab_size")]
    pub vocab_size: u32,
    /// A pair merges only if it occurs at least this often.
    #[serde(default = "default_min_frequency")]
    pub min_frequency: u64,
    /// The share of the text's characters that must be pieces; the rarest others are bytes.
    #[serde(default = "default_coverage")]
    pub character_coverage: f64,
    /// The longest piece, in characters (`SentencePiece`'s `max_sentencepiece_length`).
    #[serde(default = "default_max_piece_length")]
    pub max_piece_length: u32,
}

fn default_vocab_size() -> u32 {
    4096
}
fn default_min_frequency() -> u64 {
    2
}
fn default_coverage() -> f64 {
    0.9995
}
fn default_max_piece_length() -> u32 {
    16
}

/// A piece's type, with `SentencePiece`'s numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PieceType {
    /// A learnt piece or a character.
    Normal = 1,
    /// `<unk>`.
    Unknown = 2,
    /// A special token.
    Control = 3,
    /// `<0xNN>`.
    Byte = 6,
}

/// One vocabulary entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    /// Its text.
    pub piece: String,
    /// Its score: merged pieces `-(rank)`, everything else 0.
    pub score: f32,
    /// Its type.
    pub kind: PieceType,
}

/// A trained model: its pieces in id order, and what it was trained with.
#[derive(Debug, Clone, PartialEq)]
pub struct SentencePieceModel {
    /// The pieces, by id.
    pub pieces: Vec<Piece>,
    /// The configuration.
    pub config: SentencePieceConfig,
}

/// What a text is before it is split: `▁` prepended, each space `▁` (`SentencePiece`'s
/// `add_dummy_prefix` and `escape_whitespaces`, without `remove_extra_whitespaces`).
pub fn normalize(text: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    let mut out = String::with_capacity(text.len() + 3);
    out.push(SPACE);
    for c in text.chars() {
        out.push(if c == ' ' { SPACE } else { c });
    }
    out
}

/// Whether `c` is a word of its own: an ASCII digit (every digit split) or white space other
/// than `▁` (no piece crosses a line or a tab).
fn stands_alone(c: char) -> bool {
    c.is_ascii_digit() || (c.is_whitespace() && c != SPACE)
}

/// The words of a normalised text.
fn words(normalized: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in normalized.char_indices() {
        let end = i + c.len_utf8();
        if stands_alone(c) {
            if start < i {
                out.push(&normalized[start..i]);
            }
            out.push(&normalized[i..end]);
            start = end;
        } else if c == SPACE && start < i {
            out.push(&normalized[start..i]);
            start = i;
        }
    }
    if start < normalized.len() {
        out.push(&normalized[start..]);
    }
    out
}

/// The symbol of a character outside the alphabet: it never merges.
const RARE: u32 = u32::MAX;

/// The words with their counts, as symbol sequences, and the incremental pair counts.
struct Merger {
    words: Vec<(Vec<u32>, u64)>,
    pair_counts: HashMap<(u32, u32), u64>,
    pair_words: HashMap<(u32, u32), HashSet<usize>>,
    heap: BinaryHeap<(u64, Reverse<(u32, u32)>)>,
}

impl Merger {
    fn new(words: Vec<(Vec<u32>, u64)>) -> Self {
        let mut m = Self { words, pair_counts: HashMap::new(), pair_words: HashMap::new(), heap: BinaryHeap::new() };
        for w in 0..m.words.len() {
            m.count_word(w, true);
        }
        let mut pairs: Vec<((u32, u32), u64)> = m.pair_counts.iter().map(|(p, c)| (*p, *c)).collect();
        pairs.sort_unstable();
        m.heap.extend(pairs.into_iter().map(|(p, c)| (c, Reverse(p))));
        m
    }

    /// Adds (or removes) the pairs of word `w` to the counts.
    fn count_word(&mut self, w: usize, add: bool) {
        let (symbols, n) = &self.words[w];
        for pair in symbols.windows(2) {
            let pair = (pair[0], pair[1]);
            if pair.0 == RARE || pair.1 == RARE {
                continue;
            }
            let count = self.pair_counts.entry(pair).or_default();
            if add {
                *count += n;
                self.pair_words.entry(pair).or_default().insert(w);
            } else {
                *count -= n;
            }
        }
    }

    /// The most frequent pair that `allowed` accepts (ties to the smaller ids), with its count.
    fn best(&mut self, mut allowed: impl FnMut((u32, u32)) -> bool) -> Option<((u32, u32), u64)> {
        let mut refused = Vec::new();
        let found = loop {
            let Some((count, Reverse(pair))) = self.heap.pop() else { break None };
            if self.pair_counts.get(&pair) != Some(&count) || count == 0 {
                continue; // stale
            }
            if allowed(pair) {
                break Some((pair, count));
            }
            refused.push((count, Reverse(pair)));
        };
        self.heap.extend(refused);
        found
    }

    /// Replaces every occurrence of `pair` by `merged`, left to right, and updates the counts.
    fn merge(&mut self, pair: (u32, u32), merged: u32) {
        let mut affected: Vec<usize> = self.pair_words.remove(&pair).unwrap_or_default().into_iter().collect();
        affected.sort_unstable();
        let mut touched: HashSet<(u32, u32)> = HashSet::new();
        for w in affected {
            if !self.words[w].0.windows(2).any(|p| (p[0], p[1]) == pair) {
                continue;
            }
            self.count_word(w, false);
            let symbols = &self.words[w].0;
            let mut out = Vec::with_capacity(symbols.len());
            let mut i = 0;
            while i < symbols.len() {
                if i + 1 < symbols.len() && (symbols[i], symbols[i + 1]) == pair {
                    out.push(merged);
                    i += 2;
                } else {
                    out.push(symbols[i]);
                    i += 1;
                }
            }
            touched.extend(out.windows(2).map(|p| (p[0], p[1])));
            touched.extend(symbols.windows(2).map(|p| (p[0], p[1])));
            self.words[w].0 = out;
            self.count_word(w, true);
        }
        self.pair_counts.remove(&pair);
        let mut touched: Vec<(u32, u32)> = touched.into_iter().collect();
        touched.sort_unstable();
        for p in touched {
            if let Some(&c) = self.pair_counts.get(&p)
                && c > 0
            {
                self.heap.push((c, Reverse(p)));
            }
        }
    }
}

/// The control pieces after `<unk>`: the special and chat tokens, in their id order.
fn control_pieces() -> Vec<&'static str> {
    crate::SPECIAL_TOKENS.iter().chain(&crate::chat::CHAT_TOKENS).map(|(_, t)| *t).collect()
}

/// The byte piece of `b`, as `SentencePiece` names it.
pub fn byte_piece(b: u8) -> String {
    format!("<0x{b:02X}>")
}

/// Learns a model from `texts` (see the module documentation).
///
/// # Errors
///
/// A message when the vocabulary cannot hold the special, byte and character pieces.
pub fn train(config: &SentencePieceConfig, texts: impl Iterator<Item = String>) -> Result<SentencePieceModel, String> {
    let mut word_counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut char_counts: BTreeMap<char, u64> = BTreeMap::new();
    for text in texts {
        let normalized = normalize(&text);
        for c in normalized.chars() {
            *char_counts.entry(c).or_default() += 1;
        }
        for w in words(&normalized) {
            *word_counts.entry(w.to_owned()).or_default() += 1;
        }
    }
    if char_counts.is_empty() {
        return Err("the corpus holds no text: there is nothing to learn pieces from".into());
    }
    let mut pieces: Vec<Piece> = vec![Piece { piece: UNK.into(), score: 0.0, kind: PieceType::Unknown }];
    pieces.extend(control_pieces().into_iter().map(|p| Piece {
        piece: p.into(),
        score: 0.0,
        kind: PieceType::Control,
    }));
    pieces.extend((0..=255u8).map(|b| Piece { piece: byte_piece(b), score: 0.0, kind: PieceType::Byte }));
    // The alphabet: the most frequent characters until `character_coverage` of the text.
    let total: u64 = char_counts.values().sum();
    let mut by_count: Vec<(char, u64)> = char_counts.into_iter().collect();
    by_count.sort_by_key(|&(c, n)| (Reverse(n), c));
    let mut covered = 0u64;
    let mut alphabet: HashMap<char, u32> = HashMap::new();
    for (c, n) in by_count {
        if covered as f64 >= config.character_coverage * total as f64 {
            break;
        }
        covered += n;
        alphabet.insert(c, pieces.len() as u32);
        pieces.push(Piece { piece: c.to_string(), score: 0.0, kind: PieceType::Normal });
    }
    if pieces.len() > config.vocab_size as usize {
        return Err(format!(
            "the vocabulary of {} cannot hold the {} special, byte and character pieces; raise `vocab_size` or \
             lower `character_coverage`",
            config.vocab_size,
            pieces.len()
        ));
    }
    let symbols = |w: &str| w.chars().map(|c| alphabet.get(&c).copied().unwrap_or(RARE)).collect::<Vec<u32>>();
    let mut merger = Merger::new(word_counts.iter().map(|(w, n)| (symbols(w), *n)).collect());
    let mut index: HashMap<String, u32> = pieces.iter().enumerate().map(|(i, p)| (p.piece.clone(), i as u32)).collect();
    let mut lengths: Vec<u32> = pieces.iter().map(|p| p.piece.chars().count() as u32).collect();
    let mut rank = 0u32;
    while pieces.len() < config.vocab_size as usize {
        let max = config.max_piece_length;
        let Some((pair, count)) = merger.best(|(a, b)| lengths[a as usize] + lengths[b as usize] <= max) else {
            break;
        };
        if count < config.min_frequency {
            break;
        }
        let text = format!("{}{}", pieces[pair.0 as usize].piece, pieces[pair.1 as usize].piece);
        // A piece learnt before by another split is reused: a piece appears once.
        let piece_id = if let Some(&id) = index.get(&text) {
            id
        } else {
            rank += 1;
            let id = pieces.len() as u32;
            lengths.push(lengths[pair.0 as usize] + lengths[pair.1 as usize]);
            index.insert(text.clone(), id);
            pieces.push(Piece { piece: text, score: -(rank as f32), kind: PieceType::Normal });
            id
        };
        merger.merge(pair, piece_id);
    }
    Ok(SentencePieceModel { pieces, config: config.clone() })
}

/// Protocol-buffer encoding of the few field kinds `ModelProto` needs.
mod proto {
    pub(super) fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    pub(super) fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
        varint(out, (u64::from(field) << 3) | u64::from(wire));
    }
    /// An `int32`, `bool` or enum field (negative `int32`s take ten bytes, as the format says).
    pub(super) fn int(out: &mut Vec<u8>, field: u32, v: i64) {
        tag(out, field, 0);
        varint(out, v as u64);
    }
    pub(super) fn float(out: &mut Vec<u8>, field: u32, v: f32) {
        tag(out, field, 5);
        out.extend_from_slice(&v.to_le_bytes());
    }
    pub(super) fn bytes(out: &mut Vec<u8>, field: u32, v: &[u8]) {
        tag(out, field, 2);
        varint(out, v.len() as u64);
        out.extend_from_slice(v);
    }

    /// One field as read: its number and its value.
    pub(super) enum Field<'a> {
        Int(u64),
        Fixed32([u8; 4]),
        Bytes(&'a [u8]),
    }

    /// Reads the fields of a message, in order.
    pub(super) fn fields(mut data: &[u8]) -> Result<Vec<(u32, Field<'_>)>, String> {
        fn read_varint(data: &mut &[u8]) -> Result<u64, String> {
            let mut v = 0u64;
            for shift in (0..64).step_by(7) {
                let (&b, rest) = data.split_first().ok_or("a varint runs past the end")?;
                *data = rest;
                v |= u64::from(b & 0x7F) << shift;
                if b < 0x80 {
                    return Ok(v);
                }
            }
            Err("a varint is longer than ten bytes".into())
        }
        let mut out = Vec::new();
        while !data.is_empty() {
            let key = read_varint(&mut data)?;
            let field = u32::try_from(key >> 3).map_err(|_| "a field number is out of range")?;
            let value = match key & 7 {
                0 => Field::Int(read_varint(&mut data)?),
                5 => {
                    let (four, rest) = data.split_first_chunk::<4>().ok_or("a fixed32 runs past the end")?;
                    data = rest;
                    Field::Fixed32(*four)
                }
                2 => {
                    let len = usize::try_from(read_varint(&mut data)?).map_err(|_| "a length is out of range")?;
                    if len > data.len() {
                        return Err("a length runs past the end".into());
                    }
                    let (value, rest) = data.split_at(len);
                    data = rest;
                    Field::Bytes(value)
                }
                1 => {
                    let (_, rest) = data.split_first_chunk::<8>().ok_or("a fixed64 runs past the end")?;
                    data = rest;
                    Field::Int(0)
                }
                w => return Err(format!("wire type {w} is not one this model format uses")),
            };
            out.push((field, value));
        }
        Ok(out)
    }
}

impl SentencePieceModel {
    /// The model in `SentencePiece`'s `ModelProto` format.
    pub fn to_model_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for p in &self.pieces {
            let mut m = Vec::new();
            proto::bytes(&mut m, 1, p.piece.as_bytes());
            proto::float(&mut m, 2, p.score);
            proto::int(&mut m, 3, p.kind as i64);
            proto::bytes(&mut out, 1, &m);
        }
        let c = &self.config;
        let specials = control_pieces();
        let mut trainer = Vec::new();
        proto::int(&mut trainer, 3, 2); // model_type: BPE
        proto::int(&mut trainer, 4, i64::from(c.vocab_size));
        proto::float(&mut trainer, 10, c.character_coverage as f32);
        proto::int(&mut trainer, 20, i64::from(c.max_piece_length));
        proto::int(&mut trainer, 24, 0); // treat_whitespace_as_suffix
        proto::int(&mut trainer, 25, 1); // split_digits
        proto::int(&mut trainer, 35, 1); // byte_fallback
        proto::int(&mut trainer, 40, 0); // unk_id
        proto::int(&mut trainer, 41, 1); // bos_id
        proto::int(&mut trainer, 42, 2); // eos_id
        proto::int(&mut trainer, 43, 3); // pad_id
        proto::bytes(&mut trainer, 45, UNK.as_bytes());
        proto::bytes(&mut trainer, 46, specials[0].as_bytes());
        proto::bytes(&mut trainer, 47, specials[1].as_bytes());
        proto::bytes(&mut trainer, 48, specials[2].as_bytes());
        proto::bytes(&mut out, 2, &trainer);
        let mut normalizer = Vec::new();
        proto::bytes(&mut normalizer, 1, b"identity");
        proto::int(&mut normalizer, 3, 1); // add_dummy_prefix
        proto::int(&mut normalizer, 4, 0); // remove_extra_whitespaces
        proto::int(&mut normalizer, 5, 1); // escape_whitespaces
        proto::bytes(&mut out, 3, &normalizer);
        out
    }

    /// Reads a model [`Self::to_model_bytes`] wrote: the pieces, and the settings this module
    /// encodes as (BPE, byte fallback, the `identity` rule with a dummy prefix and escaped
    /// spaces, whitespace kept). A model with other settings would encode otherwise, so it is
    /// refused, naming the setting.
    ///
    /// # Errors
    ///
    /// A message naming what is not as written here.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let mut pieces = Vec::new();
        let mut config = SentencePieceConfig {
            vocab_size: 0,
            min_frequency: default_min_frequency(),
            character_coverage: 0.0,
            max_piece_length: default_max_piece_length(),
        };
        let mut checks: BTreeMap<(u32, u32), u64> = BTreeMap::new();
        for (field, value) in proto::fields(bytes)? {
            match (field, value) {
                (1, proto::Field::Bytes(m)) => pieces.push(piece_of(m)?),
                (2, proto::Field::Bytes(m)) => {
                    for (f, v) in proto::fields(m)? {
                        match (f, v) {
                            (4, proto::Field::Int(v)) => config.vocab_size = v as u32,
                            (10, proto::Field::Fixed32(b)) => {
                                config.character_coverage = f64::from(f32::from_le_bytes(b));
                            }
                            (20, proto::Field::Int(v)) => config.max_piece_length = v as u32,
                            (f, proto::Field::Int(v)) => {
                                checks.insert((2, f), v);
                            }
                            _ => {}
                        }
                    }
                }
                (3, proto::Field::Bytes(m)) => {
                    for (f, v) in proto::fields(m)? {
                        match (f, v) {
                            (1, proto::Field::Bytes(name)) if name != b"identity" => {
                                return Err(format!(
                                    "the normalization rule is `{}`, not `identity`",
                                    String::from_utf8_lossy(name)
                                ));
                            }
                            (2, proto::Field::Bytes(map)) if !map.is_empty() => {
                                return Err("the model has a precompiled normalization map".into());
                            }
                            (f, proto::Field::Int(v)) => {
                                checks.insert((3, f), v);
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        for ((message, field), want, what) in [
            ((2, 3), 2, "model_type BPE"),
            ((2, 35), 1, "byte_fallback"),
            ((2, 24), 0, "treat_whitespace_as_suffix off"),
            ((3, 3), 1, "add_dummy_prefix"),
            ((3, 4), 0, "remove_extra_whitespaces off"),
            ((3, 5), 1, "escape_whitespaces"),
        ] {
            if checks.get(&(message, field)) != Some(&want) {
                return Err(format!("the model does not set {what}, which this encoder assumes"));
            }
        }
        if pieces.first().is_none_or(|p: &Piece| p.kind != PieceType::Unknown) {
            return Err("piece 0 is not the unknown piece".into());
        }
        Ok(Self { pieces, config })
    }

    /// The model as Hugging Face `tokenizers` reads it (`tokenizer.json`, pretty-printed as
    /// `tokenizers` writes it), encoding as `SentencePiece` does (see the module
    /// documentation).
    ///
    /// # Errors
    ///
    /// A message when `tokenizers` refuses the model (a repeated piece).
    pub fn to_tokenizer_json(&self) -> Result<Vec<u8>, String> {
        let mut vocab = serde_json::Map::new();
        let mut ids: HashMap<&str, usize> = HashMap::new();
        for (i, p) in self.pieces.iter().enumerate() {
            if ids.insert(p.piece.as_str(), i).is_some() {
                return Err(format!("piece `{}` appears twice", p.piece));
            }
            vocab.insert(p.piece.clone(), json!(i));
        }
        // Every split of a piece into two pieces is a merge, ranked by the merged piece's
        // score (higher first), then its id, then the split point.
        let mut merges: Vec<(f32, usize, usize, &str, &str)> = Vec::new();
        for (i, p) in self.pieces.iter().enumerate() {
            if p.kind != PieceType::Normal {
                continue;
            }
            for (at, _) in p.piece.char_indices().skip(1) {
                let (left, right) = p.piece.split_at(at);
                if ids.contains_key(left) && ids.contains_key(right) {
                    merges.push((p.score, i, at, left, right));
                }
            }
        }
        merges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        let merges: Vec<Value> = merges.iter().map(|m| json!([m.3, m.4])).collect();
        let added: Vec<Value> = self
            .pieces
            .iter()
            .enumerate()
            .filter(|(_, p)| matches!(p.kind, PieceType::Control | PieceType::Unknown))
            .map(|(i, p)| {
                json!({"id": i, "content": p.piece, "single_word": false, "lstrip": false, "rstrip": false,
                       "normalized": false, "special": true})
            })
            .collect();
        let space = SPACE.to_string();
        let file = json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "Prepend", "prepend": space},
                {"type": "Replace", "pattern": {"String": " "}, "content": space},
            ]},
            "pre_tokenizer": null,
            "post_processor": null,
            "decoder": {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": space}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0},
            ]},
            "model": {"type": "BPE", "dropout": null, "unk_token": UNK, "continuing_subword_prefix": null,
                      "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
                      "vocab": vocab, "merges": merges},
        });
        let tokenizer = tokenizers::Tokenizer::from_bytes(serde_json::to_vec(&file).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        Ok(tokenizer.to_string(true).map_err(|e| e.to_string())?.into_bytes())
    }
}

/// The `sentencepiece` stage kind: trains the model on a dataset and pins it twice, as
/// `SentencePiece`'s `tokenizer.model` (output `model`) and as the `tokenizer.json` the
/// `tokenize` stage and the training stages read (output `tokenizer`).
pub struct SentencePieceStage;

/// The smallest vocabulary: `<unk>`, the special and chat tokens and the 256 bytes.
fn min_vocab() -> u32 {
    (1 + control_pieces().len() + 256) as u32
}

impl prov_exec::Stage for SentencePieceStage {
    fn kind(&self) -> &'static str {
        "sentencepiece"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "trains a SentencePiece-style BPE tokenizer (digits split, byte fallback; AFM) and writes tokenizer.model and \
         tokenizer.json"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, prov_exec::ConfigError> {
        use prov_exec::ConfigError;
        let c: SentencePieceConfig = prov_exec::parse_params(params)?;
        let min = min_vocab();
        if c.vocab_size <= min || c.vocab_size > 1 << 24 {
            return Err(ConfigError::at(
                &["vocab_size"],
                format!("must be above {min} and at most 16777216, got {}", c.vocab_size),
            )
            .with_hint(
                "the vocabulary holds <unk>, the 8 special and chat tokens and the 256 bytes before any character",
            ));
        }
        if c.min_frequency == 0 {
            return Err(ConfigError::at(&["min_frequency"], "must be at least 1"));
        }
        if !(c.character_coverage > 0.0 && c.character_coverage <= 1.0) {
            return Err(ConfigError::at(
                &["character_coverage"],
                format!("must be in (0, 1], got {}", c.character_coverage),
            )
            .with_hint("SentencePiece's default is 0.9995; 1 keeps every character"));
        }
        if c.max_piece_length < 2 {
            return Err(ConfigError::at(&["max_piece_length"], "must be at least 2 characters"));
        }
        Ok(serde_json::to_value(c).expect("numbers encode"))
    }
    fn determinism(&self, _config: &Value) -> prov_manifest::Determinism {
        prov_manifest::Determinism::Portable
    }
    fn inputs(&self) -> prov_exec::InputSpec {
        prov_exec::InputSpec::Named(vec![("docs", vec![prov_manifest::OutputType::Dataset])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, prov_manifest::OutputType)> {
        use prov_manifest::OutputType;
        vec![("model".into(), OutputType::File), ("tokenizer".into(), OutputType::File)]
    }
    fn run(&self, cx: &prov_exec::StageContext<'_>) -> Result<prov_exec::StageOutput, prov_exec::StageError> {
        use prov_manifest::{OutputRef, OutputType};
        let config: SentencePieceConfig = prov_exec::parse_params(cx.config).map_err(prov_exec::StageError::Config)?;
        let (trained, documents, characters) = crate::train_on_docs(cx, |texts| train(&config, texts))?;
        let model = trained.map_err(|e| crate::tokenizer_error("docs", e))?;
        let json = model.to_tokenizer_json().map_err(|e| crate::tokenizer_error("docs", e))?;
        let model_digest = cx.store.put_bytes(prov_store::ObjectKind::Blob, &model.to_model_bytes())?;
        let json_digest = cx.store.put_bytes(prov_store::ObjectKind::Blob, &json)?;
        let count = |kind: PieceType| model.pieces.iter().filter(|p| p.kind == kind).count();
        let learnt = model.pieces.iter().filter(|p| p.score < 0.0).count();
        let mut out = prov_exec::StageOutput::default();
        out.outputs.insert("model".into(), OutputRef { output_type: OutputType::File, digest: model_digest });
        out.outputs.insert("tokenizer".into(), OutputRef { output_type: OutputType::File, digest: json_digest });
        out.stats = BTreeMap::from([
            ("vocab_size".into(), json!(model.pieces.len())),
            ("learnt_pieces".into(), json!(learnt)),
            ("characters_in_vocabulary".into(), json!(count(PieceType::Normal) - learnt)),
            ("byte_pieces".into(), json!(count(PieceType::Byte))),
            ("documents".into(), json!(documents)),
            ("characters".into(), json!(characters)),
        ]);
        Ok(out)
    }
}

/// One `SentencePiece` message.
fn piece_of(m: &[u8]) -> Result<Piece, String> {
    let mut piece = Piece { piece: String::new(), score: 0.0, kind: PieceType::Normal };
    for (f, v) in proto::fields(m)? {
        match (f, v) {
            (1, proto::Field::Bytes(b)) => {
                piece.piece = String::from_utf8(b.to_vec()).map_err(|_| "a piece is not UTF-8")?;
            }
            (2, proto::Field::Fixed32(b)) => piece.score = f32::from_le_bytes(b),
            (3, proto::Field::Int(t)) => {
                piece.kind = match t {
                    1 => PieceType::Normal,
                    2 => PieceType::Unknown,
                    3 => PieceType::Control,
                    6 => PieceType::Byte,
                    other => return Err(format!("piece type {other} is not one this model format writes")),
                };
            }
            _ => {}
        }
    }
    Ok(piece)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vocab_size: u32) -> SentencePieceConfig {
        SentencePieceConfig {
            vocab_size,
            min_frequency: 2,
            character_coverage: 1.0,
            max_piece_length: default_max_piece_length(),
        }
    }

    #[test]
    fn words_start_at_spaces_and_digits_and_breaks_stand_alone() {
        let n = normalize("in 2024 the\tcat");
        assert_eq!(n, "▁in▁2024▁the\tcat");
        assert_eq!(words(&n), ["▁in", "▁", "2", "0", "2", "4", "▁the", "\t", "cat"]);
        assert_eq!(normalize(""), "");
    }

    #[test]
    fn training_merges_the_most_frequent_pairs_and_never_digits() {
        let texts = ["low lower lowest 123", "low low 1234 newer"].map(String::from);
        let model = train(&config(300), texts.clone().into_iter()).unwrap();
        let base = 1 + control_pieces().len() + 256;
        assert_eq!(model.pieces[0].piece, UNK);
        assert_eq!(model.pieces[base - 256].piece, "<0x00>");
        let merged: Vec<&str> = model.pieces.iter().filter(|p| p.score < 0.0).map(|p| p.piece.as_str()).collect();
        // ▁+l, l+o and o+w occur 5 times each; ties go to the smaller ids: ▁ is the most frequent
        // character, and the new ▁l has a larger id than o.
        assert_eq!(&merged[..3], ["▁l", "ow", "▁low"]);
        assert!(merged.iter().all(|p| !p.chars().any(|c| c.is_ascii_digit())), "{merged:?}");
        let scores: Vec<f32> = model.pieces.iter().filter(|p| p.score < 0.0).map(|p| p.score).collect();
        assert!(scores.windows(2).all(|w| w[0] > w[1]), "learnt pieces score by rank");
        // The same texts give the same model.
        assert_eq!(train(&config(300), texts.into_iter()).unwrap(), model);
    }

    #[test]
    fn rare_characters_are_left_to_bytes_and_the_vocabulary_must_hold_the_base() {
        let texts = || ["aaaa aaaa aaaa b"].map(String::from).into_iter();
        let c = SentencePieceConfig { character_coverage: 0.8, ..config(400) };
        let model = train(&c, texts()).unwrap();
        assert!(!model.pieces.iter().any(|p| p.piece == "b"), "b is the rarest 1/16");
        assert!(train(&config(100), texts()).unwrap_err().contains("cannot hold"));
        assert!(train(&config(400), ["", ""].map(String::from).into_iter()).unwrap_err().contains("no text"));
    }

    #[test]
    fn the_model_file_round_trips_and_refuses_other_settings() {
        let texts = ["the cat sat on the mat", "the cat ate"].map(String::from);
        let model = train(&config(300), texts.into_iter()).unwrap();
        let bytes = model.to_model_bytes();
        let back = SentencePieceModel::parse(&bytes).unwrap();
        assert_eq!(back.pieces, model.pieces);
        assert_eq!((back.config.vocab_size, back.config.max_piece_length), (300, 16));
        // A model normalising with NFKC encodes otherwise: refused.
        let mut other = bytes.clone();
        let at = other.windows(8).position(|w| w == b"identity").unwrap();
        other[at..at + 8].copy_from_slice(b"nmt_nfkc");
        assert!(SentencePieceModel::parse(&other).unwrap_err().contains("nmt_nfkc"));
        assert!(SentencePieceModel::parse(&bytes[..bytes.len() - 3]).is_err());
    }

    #[test]
    fn the_tokenizer_json_encodes_and_decodes() {
        let texts = ["the cat sat on the mat", "the cat ate 42 mats"].map(String::from);
        let model = train(&config(300), texts.into_iter()).unwrap();
        let json = model.to_tokenizer_json().unwrap();
        let tokenizer = tokenizers::Tokenizer::from_bytes(&json).unwrap();
        let text = "the cat ate 42 mats ☃";
        let encoding = tokenizer.encode(text, false).unwrap();
        let pieces: Vec<&str> = encoding.get_tokens().iter().map(String::as_str).collect();
        assert!(pieces.contains(&"▁the") && pieces.contains(&"4") && pieces.contains(&"<0xE2>"), "{pieces:?}");
        assert_eq!(tokenizer.decode(encoding.get_ids(), false).unwrap(), text);
    }
}
