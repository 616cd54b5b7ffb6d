//! Token data: documents tokenised and packed into training samples, and the seeded order in
//! which training visits them.
//!
//! # The token tree
//!
//! A tree record with these files:
//!
//! - `meta.json`: canonical JSON `{"documents", "samples", "samples_per_shard", "seq_len",
//!   "special": {"bos", "eos", "pad"}, "tokens", "vocab_size"}`.
//! - `documents.jsonl`: one canonical JSON object per document in stream order,
//!   `{"id", "start", "tokens"}`: where its tokens (BOS and EOS included) start in the packed
//!   stream and how many there are.
//! - `shard-NNNNN.bin` (`N` from 0, five digits): little-endian `u32` token ids. The packed
//!   stream is the concatenation of every document's tokens; sample `i` is the stream's tokens
//!   `[i·seq_len, i·seq_len + seq_len + 1)`, so consecutive samples share one boundary token
//!   (inputs are a sample's first `seq_len` ids, labels its last `seq_len`). Shard `k` holds
//!   samples `[k·S, (k+1)·S)` for `S = samples_per_shard`: the stream's tokens
//!   `[k·S·seq_len, (k+1)·S·seq_len + 1)` (the last shard fewer). Stream tokens after the last
//!   whole sample are dropped.
//!
//! # The order
//!
//! A file of little-endian `u64` sample indices, one epoch after another, each epoch a
//! permutation of `0..samples` drawn by [`permutation`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use prov_manifest::{Record, SCHEMA_VERSION, StoredError, TreeEntry, TreeRecord, encode_value, get_typed, put_record};
use prov_store::{Digest, ObjectKind, Store};
use serde::{Deserialize, Serialize};

use crate::DatasetError;

/// What `meta.json` says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenMeta {
    /// Tokens in the tokenizer's vocabulary.
    pub vocab_size: u32,
    /// Tokens a sample's inputs hold (a sample stores one more).
    pub seq_len: u64,
    /// Whole samples.
    pub samples: u64,
    /// Samples per shard file.
    pub samples_per_shard: u64,
    /// Documents tokenised.
    pub documents: u64,
    /// Tokens in the packed stream, the dropped tail included.
    pub tokens: u64,
    /// Special token ids by role: `bos`, `eos`, `pad`.
    pub special: BTreeMap<String, u32>,
}

impl TokenMeta {
    /// Special token ids by role.
    pub fn special_ids(&self) -> BTreeMap<&str, u32> {
        self.special.iter().map(|(k, v)| (k.as_str(), *v)).collect()
    }
}

/// One line of `documents.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentSpan {
    /// The document's id.
    pub id: String,
    /// Where its tokens start in the packed stream.
    pub start: u64,
    /// How many tokens it has, BOS and EOS included.
    pub tokens: u64,
}

fn token_error(message: impl Into<String>) -> DatasetError {
    DatasetError::Tokens(message.into())
}

fn entry(store: &Store, name: &str, bytes: &[u8]) -> Result<TreeEntry, DatasetError> {
    Ok(TreeEntry {
        path: name.parse().map_err(|e| token_error(format!("file name `{name}`: {e}")))?,
        digest: store.put_bytes(ObjectKind::Blob, bytes)?,
        size: bytes.len() as u64,
        executable: false,
    })
}

fn le_bytes(tokens: &[u32]) -> Vec<u8> {
    tokens.iter().flat_map(|t| t.to_le_bytes()).collect()
}

/// Packs documents' tokens into samples and writes shards as they fill, so that memory holds
/// one shard, not the corpus.
pub struct TokenWriter<'a> {
    store: &'a Store,
    seq_len: u64,
    samples_per_shard: u64,
    vocab_size: u32,
    special: BTreeMap<String, u32>,
    /// Stream tokens not yet in a shard, starting at stream position `buffer_start`.
    buffer: Vec<u32>,
    buffer_start: u64,
    shards: Vec<TreeEntry>,
    documents: Vec<u8>,
    document_count: u64,
    tokens: u64,
}

impl<'a> TokenWriter<'a> {
    /// A writer of samples of `seq_len + 1` tokens, `samples_per_shard` to a shard file.
    pub fn new(
        store: &'a Store,
        seq_len: u64,
        samples_per_shard: u64,
        vocab_size: u32,
        special: BTreeMap<String, u32>,
    ) -> Result<Self, DatasetError> {
        if seq_len == 0 || samples_per_shard == 0 {
            return Err(token_error("seq_len and samples_per_shard must be at least 1"));
        }
        Ok(Self {
            store,
            seq_len,
            samples_per_shard,
            vocab_size,
            special,
            buffer: Vec::new(),
            buffer_start: 0,
            shards: Vec::new(),
            documents: Vec::new(),
            document_count: 0,
            tokens: 0,
        })
    }

    /// Appends one document's tokens (BOS and EOS already in place).
    pub fn push(&mut self, id: &str, tokens: &[u32]) -> Result<(), DatasetError> {
        if let Some(t) = tokens.iter().find(|&&t| t >= self.vocab_size) {
            return Err(token_error(format!(
                "document `{id}`: token {t} is outside the vocabulary of {}",
                self.vocab_size
            )));
        }
        let span = DocumentSpan { id: id.to_owned(), start: self.tokens, tokens: tokens.len() as u64 };
        self.documents.extend(encode_value(&serde_json::to_value(&span).expect("a span encodes")));
        self.documents.push(b'\n');
        self.document_count += 1;
        self.tokens += tokens.len() as u64;
        self.buffer.extend_from_slice(tokens);
        let shard_tokens = (self.samples_per_shard * self.seq_len) as usize;
        while self.buffer.len() > shard_tokens {
            self.flush(shard_tokens)?;
        }
        Ok(())
    }

    /// Writes the shard of the buffer's first `len` tokens plus the boundary token.
    fn flush(&mut self, len: usize) -> Result<(), DatasetError> {
        let name = shard_name(self.shards.len() as u64);
        self.shards.push(entry(self.store, &name, &le_bytes(&self.buffer[..=len]))?);
        self.buffer.drain(..len);
        self.buffer_start += len as u64;
        Ok(())
    }

    /// Writes the last shard, `documents.jsonl` and `meta.json`; returns the tree's digest and
    /// the meta.
    pub fn finish(mut self) -> Result<(Digest, TokenMeta), DatasetError> {
        let whole = (self.buffer.len().saturating_sub(1) as u64) / self.seq_len;
        if whole > 0 {
            self.flush((whole * self.seq_len) as usize)?;
        }
        let samples = self.buffer_start / self.seq_len;
        if samples == 0 {
            return Err(token_error(format!("{} tokens make no sample of {} + 1 tokens", self.tokens, self.seq_len)));
        }
        let meta = TokenMeta {
            vocab_size: self.vocab_size,
            seq_len: self.seq_len,
            samples,
            samples_per_shard: self.samples_per_shard,
            documents: self.document_count,
            tokens: self.tokens,
            special: self.special.clone(),
        };
        let mut entries = vec![
            entry(self.store, "documents.jsonl", &self.documents)?,
            entry(self.store, "meta.json", &encode_value(&serde_json::to_value(&meta).expect("meta encodes")))?,
        ];
        entries.append(&mut self.shards);
        entries.sort_by(|a, b| a.path.as_str().cmp(b.path.as_str()));
        let digest = put_record(self.store, &Record::Tree(TreeRecord { schema: SCHEMA_VERSION, entries }))?;
        Ok((digest, meta))
    }
}

/// Token data read back from the store, shards loaded (verified) as samples need them.
///
/// [`TokenData::open`] reads `meta.json` and checks that the tree holds every shard the meta
/// implies. A shard is read and verified on first use and then kept in memory (4 bytes per
/// token), so a training run reads each shard once; `documents.jsonl` is read on the first
/// [`TokenData::sample_documents`] and kept too.
pub struct TokenData<'a> {
    store: &'a Store,
    digest: Digest,
    meta: TokenMeta,
    files: BTreeMap<String, Digest>,
    shards: Mutex<BTreeMap<u64, Arc<Vec<u32>>>>,
    spans: OnceLock<Vec<DocumentSpan>>,
}

impl<'a> TokenData<'a> {
    /// Opens the token tree `digest`.
    pub fn open(store: &'a Store, digest: &Digest) -> Result<Self, DatasetError> {
        let tree = match get_typed::<TreeRecord>(store, digest) {
            Err(e @ StoredError::WrongKind { .. }) => return Err(token_error(format!("not a token tree: {e}"))),
            tree => tree?,
        };
        let files: BTreeMap<String, Digest> =
            tree.entries.iter().map(|e| (e.path.as_str().to_owned(), e.digest)).collect();
        let meta_digest =
            files.get("meta.json").ok_or_else(|| token_error(format!("token tree {digest} has no meta.json")))?;
        let meta: TokenMeta = serde_json::from_slice(&store.read(meta_digest)?)
            .map_err(|e| token_error(format!("meta.json of {digest}: {e}")))?;
        let bad = |message: String| token_error(format!("meta.json of {digest}: {message}"));
        if meta.seq_len == 0 || meta.samples_per_shard == 0 {
            return Err(bad("seq_len and samples_per_shard must be positive".into()));
        }
        // Every sample's stream range must fit in u64 and usize (so do offsets within a shard).
        let covered = meta
            .samples
            .checked_mul(meta.seq_len)
            .and_then(|t| t.checked_add(1))
            .filter(|&t| t <= meta.tokens.max(1))
            .ok_or_else(|| {
                bad(format!(
                    "{} samples of {} + 1 tokens do not fit in {} tokens",
                    meta.samples, meta.seq_len, meta.tokens
                ))
            })?;
        if usize::try_from(covered).is_err() {
            return Err(bad("the samples are too large for this machine".into()));
        }
        for k in 0..meta.samples.div_ceil(meta.samples_per_shard) {
            let name = shard_name(k);
            if !files.contains_key(&name) {
                return Err(token_error(format!("token tree {digest} has no {name}")));
            }
        }
        if !files.contains_key("documents.jsonl") {
            return Err(token_error(format!("token tree {digest} has no documents.jsonl")));
        }
        Ok(Self { store, digest: *digest, meta, files, shards: Mutex::new(BTreeMap::new()), spans: OnceLock::new() })
    }

    /// The meta.
    pub fn meta(&self) -> &TokenMeta {
        &self.meta
    }

    fn shard(&self, k: u64) -> Result<Arc<Vec<u32>>, DatasetError> {
        if let Some(s) = self.shards.lock().expect("the shard cache is never poisoned").get(&k) {
            return Ok(Arc::clone(s));
        }
        let name = shard_name(k);
        let digest = self.files.get(&name).ok_or_else(|| token_error(format!("the token tree has no {name}")))?;
        let bytes = self.store.read(digest)?;
        if bytes.len() % 4 != 0 {
            return Err(token_error(format!("{name} is {} bytes, not a whole number of u32", bytes.len())));
        }
        let tokens: Arc<Vec<u32>> =
            Arc::new(bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect());
        self.shards.lock().expect("the shard cache is never poisoned").insert(k, Arc::clone(&tokens));
        Ok(tokens)
    }

    fn check_index(&self, index: u64) -> Result<(), DatasetError> {
        if index < self.meta.samples {
            Ok(())
        } else {
            Err(DatasetError::SampleOutOfRange { index, samples: self.meta.samples })
        }
    }

    /// The `seq_len + 1` token ids of sample `index`: the packed stream's tokens
    /// `[index·seq_len, index·seq_len + seq_len + 1)`.
    pub fn sample(&self, index: u64) -> Result<Vec<u32>, DatasetError> {
        self.check_index(index)?;
        let m = &self.meta;
        let shard = self.shard(index / m.samples_per_shard)?;
        // No overflow: below samples·seq_len + 1, which open checked fits in usize.
        let start = ((index % m.samples_per_shard) * m.seq_len) as usize;
        let end = start + m.seq_len as usize + 1;
        let sample = shard.get(start..end).ok_or_else(|| {
            token_error(format!("the shard of sample {index} holds {} tokens, the sample needs {end}", shard.len()))
        })?;
        if let Some(t) = sample.iter().find(|&&t| t >= m.vocab_size) {
            return Err(token_error(format!(
                "sample {index} holds token {t}, outside the vocabulary of {}",
                m.vocab_size
            )));
        }
        Ok(sample.to_vec())
    }

    /// Every document's span, read and checked once.
    fn spans(&self) -> Result<&[DocumentSpan], DatasetError> {
        if let Some(spans) = self.spans.get() {
            return Ok(spans);
        }
        let digest = self.files.get("documents.jsonl").expect("open checked that documents.jsonl is there");
        let mut spans = Vec::new();
        let mut next = 0u64;
        for (i, line) in self.store.read(digest)?.split(|&b| b == b'\n').filter(|l| !l.is_empty()).enumerate() {
            let span: DocumentSpan = serde_json::from_slice(line)
                .map_err(|e| token_error(format!("documents.jsonl of {} line {}: {e}", self.digest, i + 1)))?;
            if span.start != next {
                return Err(token_error(format!(
                    "documents.jsonl of {} line {}: document `{}` starts at {}, the previous one ends at {next}",
                    self.digest,
                    i + 1,
                    span.id,
                    span.start
                )));
            }
            next = span.start.checked_add(span.tokens).ok_or_else(|| token_error("a document span overflows"))?;
            spans.push(span);
        }
        if (spans.len() as u64, next) != (self.meta.documents, self.meta.tokens) {
            return Err(token_error(format!(
                "documents.jsonl of {} lists {} documents of {next} tokens, meta.json says {} of {}",
                self.digest,
                spans.len(),
                self.meta.documents,
                self.meta.tokens
            )));
        }
        // Another thread may have loaded them meanwhile: both read the same verified bytes.
        let _ = self.spans.set(spans);
        Ok(self.spans.get().expect("just set"))
    }

    /// The documents sample `index` covers, in stream order: each document's id and the
    /// range `[from, to)` of its tokens (0 is its BOS) that lie in the sample.
    pub fn sample_documents(&self, index: u64) -> Result<Vec<(String, u64, u64)>, DatasetError> {
        self.check_index(index)?;
        let m = &self.meta;
        let (lo, hi) = (index * m.seq_len, index * m.seq_len + m.seq_len + 1);
        let spans = self.spans()?;
        let first = spans.partition_point(|s| s.start + s.tokens <= lo);
        Ok(spans[first..]
            .iter()
            .take_while(|s| s.start < hi)
            .map(|s| (s.id.clone(), lo.max(s.start) - s.start, hi.min(s.start + s.tokens) - s.start))
            .collect())
    }
}

/// The name of shard `k`: `shard-NNNNN.bin`, `k` zero-padded to five digits.
fn shard_name(k: u64) -> String {
    format!("shard-{k:05}.bin")
}

/// A permutation of `0..n` by Fisher–Yates (for `i` from `n-1` down to 1, swap `i` with
/// `j = next_u64() mod (i + 1)`), driven by `SplitMix64` (Steele, Lea, Flood 2014: state += 0x9E3779B97F4A7C15;
/// z = state; z = (z ^ z>>30)·0xBF58476D1CE4E5B9; z = (z ^ z>>27)·0x94D049BB133111EB;
/// output z ^ z>>31, all wrapping). The modulo's bias is below 2^-40 for any realistic `n`
/// and, being fixed, changes nothing for replay.
pub fn permutation(n: u64, state: &mut u64) -> Vec<u64> {
    let mut rng = SplitMix64(*state);
    let mut v: Vec<u64> = (0..n).collect();
    for i in (1..n).rev() {
        let j = rng.next_u64() % (i + 1);
        v.swap(i as usize, j as usize);
    }
    *state = rng.0;
    v
}

/// `SplitMix64` (Steele, Lea and Flood 2014): the one fixed, documented generator behind every
/// seeded draw that is not libtorch's (data orders, sampling from a checkpoint, synthetic
/// benchmark data). The field is the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next output: `state += 0x9E3779B97F4A7C15`, then the mix above.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The top 53 bits as a float in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The data order for `epochs` epochs over `samples` samples from `seed`: one generator,
/// seeded with `seed`, draws each epoch's permutation in turn.
pub fn data_order(samples: u64, epochs: u64, seed: u64) -> Vec<u64> {
    let mut state = seed;
    (0..epochs).flat_map(|_| permutation(samples, &mut state)).collect()
}

/// The order's bytes: little-endian `u64`s.
pub fn encode_order(order: &[u64]) -> Vec<u8> {
    order.iter().flat_map(|i| i.to_le_bytes()).collect()
}

/// Reads the order file `digest`.
pub fn read_order(store: &Store, digest: &Digest) -> Result<Vec<u64>, DatasetError> {
    let bytes = store.read(digest)?;
    if bytes.len() % 8 != 0 {
        return Err(token_error(format!("order {digest} is {} bytes, not a whole number of u64", bytes.len())));
    }
    Ok(bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_is_the_published_sequence() {
        // The reference implementation's first outputs for seed 0.
        let mut r = SplitMix64(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }
    use serde_json::Value;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        (dir, store)
    }

    fn special() -> BTreeMap<String, u32> {
        BTreeMap::from([("bos".into(), 0), ("eos".into(), 1), ("pad".into(), 2)])
    }

    #[test]
    fn samples_are_the_stream_cut_with_one_shared_token() {
        let (_d, store) = store();
        let mut w = TokenWriter::new(&store, 4, 2, 100, special()).unwrap();
        // Stream: 0..=22 over three documents of 7, 9 and 7 tokens.
        let stream: Vec<u32> = (0..23).collect();
        w.push("a", &stream[..7]).unwrap();
        w.push("b", &stream[7..16]).unwrap();
        w.push("c", &stream[16..]).unwrap();
        let (digest, meta) = w.finish().unwrap();
        // (23 - 1) / 4 = 5 whole samples; tokens 21 and 22 are the dropped tail.
        assert_eq!((meta.samples, meta.tokens, meta.documents), (5, 23, 3));
        let data = TokenData::open(&store, &digest).unwrap();
        assert_eq!(data.meta(), &meta);
        for i in 0..5u64 {
            let s = (i * 4) as u32;
            assert_eq!(data.sample(i).unwrap(), (s..=s + 4).collect::<Vec<_>>(), "sample {i}");
        }
        assert!(data.sample(5).unwrap_err().to_string().contains("out of range"));
        // Sample 1 is stream [4, 9): the end of `a` (4..7) and the start of `b` (0..2).
        assert_eq!(data.sample_documents(1).unwrap(), vec![("a".to_owned(), 4, 7), ("b".to_owned(), 0, 2)]);
    }

    #[test]
    fn the_tree_is_the_same_bytes_for_the_same_tokens() {
        let (_d, store) = store();
        let write = |split: usize| {
            let mut w = TokenWriter::new(&store, 8, 3, 50, special()).unwrap();
            let stream: Vec<u32> = (0..200).map(|i| i % 50).collect();
            w.push("x", &stream[..split]).unwrap();
            w.push("y", &stream[split..]).unwrap();
            w.finish().unwrap().0
        };
        assert_eq!(write(100), write(100));
        // Document boundaries are part of the data (documents.jsonl).
        assert_ne!(write(100), write(101));
    }

    #[test]
    fn bad_tokens_and_tiny_data_are_errors() {
        let (_d, store) = store();
        let mut w = TokenWriter::new(&store, 4, 2, 10, special()).unwrap();
        assert!(w.push("a", &[0, 11]).unwrap_err().to_string().contains("token 11 is outside the vocabulary of 10"));
        let mut w = TokenWriter::new(&store, 4, 2, 10, special()).unwrap();
        w.push("a", &[0, 1, 2]).unwrap();
        assert!(w.finish().unwrap_err().to_string().contains("make no sample"));
        assert!(TokenWriter::new(&store, 0, 2, 10, special()).is_err());
    }

    #[test]
    fn orders_are_permutations_fixed_by_the_seed() {
        let order = data_order(1000, 3, 42);
        assert_eq!(order.len(), 3000);
        for epoch in order.chunks(1000) {
            let mut sorted = epoch.to_vec();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        }
        assert_ne!(order[..1000], order[1000..2000], "each epoch is shuffled anew");
        assert_eq!(order, data_order(1000, 3, 42));
        assert_ne!(order, data_order(1000, 3, 43));
        // Pinned (computed independently in Python from the documented algorithm): it must
        // never change under a recorded run.
        assert_eq!(data_order(5, 1, 0), vec![2, 3, 1, 4, 0]);
        // The generator carries over from one epoch to the next (also in the book).
        assert_eq!(data_order(5, 2, 0), vec![2, 3, 1, 4, 0, 1, 0, 3, 4, 2]);
        assert_eq!(data_order(10, 1, 42), vec![0, 9, 5, 8, 6, 4, 7, 2, 1, 3]);
        assert!(data_order(0, 3, 1).is_empty());
        assert_eq!(data_order(1, 2, 1), vec![0, 0]);
    }

    /// Documents of uneven lengths over several shards: every sample is its stream slice and
    /// names exactly the documents whose spans meet it, also across shard boundaries.
    #[test]
    fn samples_and_their_documents_match_the_stream_everywhere() {
        let (_d, store) = store();
        let (seq_len, per_shard) = (5u64, 3u64);
        let mut w = TokenWriter::new(&store, seq_len, per_shard, 1000, special()).unwrap();
        let (mut stream, mut spans) = (Vec::<u32>::new(), Vec::new());
        for d in 0..40u32 {
            let len = [2, 3, 9, 1, 14, 6, 5][d as usize % 7];
            let doc: Vec<u32> = (0..len).map(|t| (d * 17 + t) % 1000).collect();
            spans.push((format!("d{d}"), stream.len() as u64, u64::from(len)));
            stream.extend(&doc);
            w.push(&format!("d{d}"), &doc).unwrap();
        }
        let (digest, meta) = w.finish().unwrap();
        assert_eq!(meta.samples, (stream.len() as u64 - 1) / seq_len);
        let data = TokenData::open(&store, &digest).unwrap();
        for i in 0..meta.samples {
            let (lo, hi) = (i * seq_len, i * seq_len + seq_len + 1);
            assert_eq!(data.sample(i).unwrap(), stream[lo as usize..hi as usize], "sample {i}");
            let want: Vec<(String, u64, u64)> = spans
                .iter()
                .filter(|(_, s, n)| s + n > lo && *s < hi)
                .map(|(id, s, n)| (id.clone(), lo.max(*s) - s, hi.min(s + n) - s))
                .collect();
            assert_eq!(data.sample_documents(i).unwrap(), want, "sample {i}");
        }
        let past = meta.samples;
        for e in [data.sample(past).unwrap_err(), data.sample_documents(u64::MAX).unwrap_err()] {
            assert!(matches!(e, DatasetError::SampleOutOfRange { samples, .. } if samples == past), "{e}");
        }
    }

    /// A tree written by hand, so that its meta can lie.
    fn tree(store: &Store, meta: &Value, files: &[(&str, &[u8])]) -> Digest {
        let mut entries: Vec<TreeEntry> = files.iter().map(|(n, b)| entry(store, n, b).unwrap()).collect();
        entries.push(entry(store, "meta.json", &encode_value(meta)).unwrap());
        entries.sort_by(|a, b| a.path.as_str().cmp(b.path.as_str()));
        put_record(store, &Record::Tree(TreeRecord { schema: SCHEMA_VERSION, entries })).unwrap()
    }

    #[test]
    fn malformed_trees_are_errors_not_panics() {
        let (_d, store) = store();
        let meta = |samples: u64, seq_len: u64, tokens: u64| {
            serde_json::json!({"documents": 1, "samples": samples, "samples_per_shard": 2, "seq_len": seq_len,
                "special": {"bos": 0, "eos": 1, "pad": 2}, "tokens": tokens, "vocab_size": 10})
        };
        let docs = br#"{"id":"a","start":0,"tokens":9}"#.as_slice();
        let shard = le_bytes(&[0, 3, 4, 5, 6, 7, 8, 9, 1]);
        let err = |d: Digest| TokenData::open(&store, &d).err().map(|e| e.to_string()).unwrap_or_default();
        // Samples that overflow u64, or need more tokens than the stream has.
        let d = tree(
            &store,
            &meta(u64::MAX, u64::MAX, 9),
            &[("documents.jsonl", docs), ("shard-00000.bin", shard.as_slice())],
        );
        assert!(err(d).contains("do not fit"), "{}", err(d));
        let d = tree(&store, &meta(3, 4, 9), &[("documents.jsonl", docs), ("shard-00000.bin", shard.as_slice())]);
        assert!(err(d).contains("do not fit"), "{}", err(d));
        // A shard the meta implies is missing.
        let d = tree(&store, &meta(2, 4, 9), &[("documents.jsonl", docs)]);
        assert!(err(d).contains("no shard-00000.bin"), "{}", err(d));
        // A shard shorter than its samples, a token outside the vocabulary.
        let d = tree(&store, &meta(2, 4, 9), &[("documents.jsonl", docs), ("shard-00000.bin", &shard[..20])]);
        let data = TokenData::open(&store, &d).unwrap();
        assert!(data.sample(1).unwrap_err().to_string().contains("holds 5 tokens"));
        let bad = le_bytes(&[0, 3, 4, 5, 60, 7, 8, 9, 1]);
        let d = tree(&store, &meta(2, 4, 9), &[("documents.jsonl", docs), ("shard-00000.bin", bad.as_slice())]);
        let data = TokenData::open(&store, &d).unwrap();
        assert!(data.sample(1).unwrap_err().to_string().contains("token 60, outside the vocabulary of 10"));
        // Spans that do not follow each other, or disagree with the meta.
        let gap = b"{\"id\":\"a\",\"start\":0,\"tokens\":4}\n{\"id\":\"b\",\"start\":5,\"tokens\":4}\n".as_slice();
        let d = tree(&store, &meta(2, 4, 9), &[("documents.jsonl", gap), ("shard-00000.bin", shard.as_slice())]);
        let e = TokenData::open(&store, &d).unwrap().sample_documents(0).unwrap_err().to_string();
        assert!(e.contains("document `b` starts at 5, the previous one ends at 4"), "{e}");
        let short = br#"{"id":"a","start":0,"tokens":8}"#.as_slice();
        let d = tree(&store, &meta(2, 4, 9), &[("documents.jsonl", short), ("shard-00000.bin", shard.as_slice())]);
        let e = TokenData::open(&store, &d).unwrap().sample_documents(0).unwrap_err().to_string();
        assert!(e.contains("lists 1 documents of 8 tokens, meta.json says 1 of 9"), "{e}");
        // Not a tree at all.
        let blob = store.put_bytes(ObjectKind::Blob, b"{}").unwrap();
        assert!(TokenData::open(&store, &blob).is_err());
    }

    #[test]
    fn orders_round_trip_through_the_store() {
        let (_d, store) = store();
        let order = data_order(10, 2, 7);
        let digest = store.put_bytes(ObjectKind::Blob, &encode_order(&order)).unwrap();
        assert_eq!(read_order(&store, &digest).unwrap(), order);
        let bad = store.put_bytes(ObjectKind::Blob, b"12345").unwrap();
        assert!(read_order(&store, &bad).unwrap_err().to_string().contains("not a whole number of u64"));
    }
}
