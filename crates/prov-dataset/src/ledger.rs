//! Ledgers: one row per document with the decision a filter took, the rule that decided and
//! the evidence, in Parquet shards sorted by document id, summarised by Merkle roots.
//!
//! A row's leaf is the BLAKE3 of its canonical JSON object
//! `{"decision","evidence"?,"id","language"?,"rule","words"}` (absent optional fields are
//! omitted; `evidence` is itself a JSON object, embedded, not a string). Leaves of a shard are
//! ordered by id (byte order), ids unique within a shard; the shard root is
//! [`prov_store::merkle_root`] over them. The ledger record ([`prov_manifest::LedgerRecord`])
//! holds the Merkle root over the shards' leaves (file, rows, bytes and root of each) and
//! its parts record lists the shards.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use arrow_array::{Array, ArrayRef, RecordBatch, StringArray, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use prov_manifest::{Ledger, LedgerShardRef, Record, ShardRef, encode_value, put_record};
use prov_store::{Digest, ObjectKind, Store, merkle_root};
use serde_json::Value;

use crate::DatasetError;
use crate::shard::writer_properties;

/// What a filter did with a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LedgerDecision {
    /// Passed through unchanged.
    Kept,
    /// Dropped from the output.
    Removed,
    /// Passed through with changed text (e.g. PII redacted).
    Modified,
}

impl LedgerDecision {
    /// Returns the name written in ledgers.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kept => "kept",
            Self::Removed => "removed",
            Self::Modified => "modified",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "kept" => Some(Self::Kept),
            "removed" => Some(Self::Removed),
            "modified" => Some(Self::Modified),
            _ => None,
        }
    }
}

/// One document's entry in a ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerRow {
    /// Document id.
    pub id: String,
    /// What happened to it.
    pub decision: LedgerDecision,
    /// The reason code that decided (`robots:disallowed`, …).
    pub rule: String,
    /// Evidence as a JSON object (never the sensitive content itself).
    pub evidence: Option<serde_json::Map<String, Value>>,
    /// The document's language, for per-language statistics.
    pub language: Option<String>,
    /// Whitespace-separated words of the document's text, for volume statistics.
    pub words: u64,
}

/// A ledger row's evidence from a JSON value: its object, or none for anything else (stages
/// build evidence with `json!({...})`).
pub fn evidence(v: Value) -> Option<serde_json::Map<String, Value>> {
    if let Value::Object(m) = v { Some(m) } else { None }
}

impl LedgerRow {
    /// The row a filter writes for `doc`: its id, language and word count, with the decision,
    /// the rule that made it and the evidence.
    pub fn of_document(
        doc: &crate::Document,
        decision: LedgerDecision,
        rule: &str,
        evidence: Option<serde_json::Map<String, Value>>,
    ) -> Self {
        Self {
            id: doc.id.clone(),
            decision,
            rule: rule.to_owned(),
            evidence,
            language: doc.language.clone(),
            words: crate::word_count(&doc.text),
        }
    }

    /// Returns the row's canonical JSON, the bytes its leaf hashes.
    pub fn canonical(&self) -> Vec<u8> {
        let mut obj = serde_json::Map::new();
        obj.insert("id".into(), Value::String(self.id.clone()));
        obj.insert("decision".into(), Value::String(self.decision.as_str().into()));
        obj.insert("rule".into(), Value::String(self.rule.clone()));
        if let Some(e) = &self.evidence {
            obj.insert("evidence".into(), Value::Object(e.clone()));
        }
        if let Some(l) = &self.language {
            obj.insert("language".into(), Value::String(l.clone()));
        }
        obj.insert("words".into(), Value::from(self.words));
        encode_value(&Value::Object(obj))
    }

    /// Returns the row's leaf digest (before the Merkle leaf prefix).
    pub fn leaf(&self) -> Digest {
        Digest::of(&self.canonical())
    }
}

/// Counts whitespace-separated words, the volume unit of ledgers until a tokenizer is pinned:
/// the count of `text.split_whitespace()`, white space being Unicode's `White_Space`
/// (`char::is_whitespace`).
///
/// Every filter stage counts the words of every document for its ledger, and the plain count
/// decoded every character: it was 13% of the `robots` stage. This one works on blocks of 64
/// octets with a bit per octet, set for the octets of white-space characters: a word starts
/// where a clear bit follows a set one (or starts the text). Continuation octets take their
/// character's bit, so only lead octets can start a word. In ASCII the white space is tab,
/// LF, VT, FF, CR and space, found by comparisons the compiler vectorises; outside ASCII every
/// white-space character starts with the octet C2, E1, E2 or E3, so only characters starting
/// with one of those are decoded, and every other octet belongs to a character that is not
/// white space. A white-space character that crosses into the next block sets its bits
/// there.
pub fn word_count(text: &str) -> u64 {
    let bytes = text.as_bytes();
    let mut words = 0u64;
    // Whether the last octet of the previous block was white space (the start counts as one).
    let mut after_space = true;
    // Bits of the next block set by a white-space character that started in this one.
    let mut spill = 0u64;
    let mut at = 0;
    while at < bytes.len() {
        let mut block = [b' '; 64];
        let n = (bytes.len() - at).min(64);
        block[..n].copy_from_slice(&bytes[at..at + n]);
        let (ascii, mut leads) = space_and_leads(&block);
        let mut space = ascii | spill;
        spill = 0;
        while leads != 0 {
            let k = leads.trailing_zeros() as usize;
            leads &= leads - 1;
            // A lead octet starts a character, so `at + k` is a character boundary.
            let c = text.get(at + k..).and_then(|t| t.chars().next()).unwrap_or('x');
            if c.is_whitespace() {
                let bits = ((1u128 << c.len_utf8()) - 1) << k;
                space |= bits as u64;
                spill |= (bits >> 64) as u64;
            }
        }
        // Padding past the text is white space, which starts no word.
        let before = (space << 1) | u64::from(after_space);
        words += u64::from((!space & before).count_ones());
        after_space = space >> 63 == 1;
        at += 64;
    }
    words
}

/// One bit per octet of a block (bit `k` for octet `k`): the ASCII characters of Unicode's
/// `White_Space` (tab, LF, VT, FF, CR and space; VT too, unlike `u8::is_ascii_whitespace`),
/// and the octets C2, E1, E2 and E3, with which every other white-space character starts.
/// Computed 16 octets at a time with vector compares (`wide`: SSE2 on x86-64, NEON on
/// `AArch64`, plain code elsewhere).
fn space_and_leads(block: &[u8; 64]) -> (u64, u64) {
    use wide::u8x16;
    let splat = u8x16::splat;
    let (mut space, mut leads) = (0u64, 0u64);
    for (k, lane) in block.chunks_exact(16).enumerate() {
        let mut octets = [0u8; 16];
        octets.copy_from_slice(lane);
        let v = u8x16::new(octets);
        // `x` is at most `n` where `min(x, n) == x`: unsigned compares from what SSE2 has.
        let at_most = |x: u8x16, n: u8| x.min(splat(n)).simd_eq(x);
        let controls = at_most(v - splat(b'\t'), b'\r' - b'\t');
        let s = controls | v.simd_eq(splat(b' '));
        let l = at_most(v - splat(0xE1), 2) | v.simd_eq(splat(0xC2));
        space |= u64::from(s.to_bitmask()) << (16 * k);
        leads |= u64::from(l.to_bitmask()) << (16 * k);
    }
    (space, leads)
}

/// Returns the Arrow schema of a ledger shard.
pub fn ledger_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Utf8, false),
                Field::new("decision", DataType::Utf8, false),
                Field::new("rule", DataType::Utf8, false),
                Field::new("evidence", DataType::Utf8, true),
                Field::new("language", DataType::Utf8, true),
                Field::new("words", DataType::UInt64, false),
            ]))
        })
        .clone()
}

/// A written ledger shard: its reference and its Merkle root.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerShard {
    /// The Parquet object.
    pub shard: ShardRef,
    /// Merkle root over its rows' leaves in id order.
    pub root: Digest,
    /// Rows per rule.
    pub rules: BTreeMap<String, u64>,
}

/// Sorts rows by id, writes them as one ledger shard and returns it. Duplicate ids within a
/// shard are an error: a proof must name one row.
pub fn write_ledger_shard(store: &Store, mut rows: Vec<LedgerRow>) -> Result<LedgerShard, DatasetError> {
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    if let Some(pair) = rows.windows(2).find(|w| w[0].id == w[1].id) {
        return Err(DatasetError::DuplicateId(pair[0].id.clone()));
    }
    let leaves: Vec<Digest> = rows.iter().map(LedgerRow::leaf).collect();
    let mut rules = BTreeMap::new();
    for r in &rows {
        *rules.entry(r.rule.clone()).or_insert(0) += 1;
    }
    let sink = store.writer(ObjectKind::Shard)?;
    let mut writer = ArrowWriter::try_new(sink, ledger_schema(), Some(writer_properties()))?;
    for chunk in rows.chunks(4096) {
        writer.write(&to_batch(chunk)?)?;
    }
    let sink = writer.into_inner()?;
    let bytes = sink.size();
    let digest = sink.finish()?;
    Ok(LedgerShard { shard: ShardRef { digest, rows: rows.len() as u64, bytes }, root: merkle_root(&leaves), rules })
}

fn to_batch(rows: &[LedgerRow]) -> Result<RecordBatch, DatasetError> {
    let text = |f: &dyn Fn(&LedgerRow) -> Option<String>| -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<StringArray>())
    };
    let evidence = |r: &LedgerRow| {
        r.evidence.as_ref().map(|e| String::from_utf8(encode_value(&Value::Object(e.clone()))).expect("JSON is UTF-8"))
    };
    Ok(RecordBatch::try_new(
        ledger_schema(),
        vec![
            text(&|r| Some(r.id.clone())),
            text(&|r| Some(r.decision.as_str().to_owned())),
            text(&|r| Some(r.rule.clone())),
            text(&evidence),
            text(&|r| r.language.clone()),
            Arc::new(rows.iter().map(|r| r.words).collect::<UInt64Array>()),
        ],
    )?)
}

/// Stores the ledger for shards written with [`write_ledger_shard`]: its id directory
/// ([`crate::directory`], built on disk in a scratch directory of the store), its parts
/// record and its ledger record. Returns the ledger record's digest and the ledger.
pub fn write_ledger(store: &Store, shards: Vec<LedgerShard>) -> Result<(Digest, Ledger), DatasetError> {
    write_ledger_chunked(store, shards, crate::chunked::CHUNK_ENTRIES)
}

/// [`write_ledger`] with directory chunks of `chunk_entries` entries (a power of two): tests
/// use small chunks to prove across chunk boundaries.
pub fn write_ledger_chunked(
    store: &Store,
    shards: Vec<LedgerShard>,
    chunk_entries: u64,
) -> Result<(Digest, Ledger), DatasetError> {
    let scratch = store.scratch_dir("ledger-directory")?;
    let ids = shards.iter().map(|s| read_ledger_ids(store, &s.shard.digest));
    let directory = crate::directory::build_directory(store, &scratch, ids, chunk_entries, true);
    let _ = fs_err::remove_dir_all(&scratch);
    let directory = directory?;
    let mut rules = BTreeMap::new();
    for s in &shards {
        for (rule, n) in &s.rules {
            *rules.entry(rule.clone()).or_insert(0) += n;
        }
    }
    let shards: Vec<LedgerShardRef> = shards
        .into_iter()
        .map(|s| LedgerShardRef { digest: s.shard.digest, rows: s.shard.rows, bytes: s.shard.bytes, root: s.root })
        .collect();
    let parts = put_record(store, &Record::LedgerParts(Ledger::parts_record(&shards, &directory)))?;
    let ledger = Ledger::assemble(shards, directory, rules, parts);
    let digest = put_record(store, &Record::Ledger(ledger.record.clone()))?;
    Ok((digest, ledger))
}

/// Reads a stored ledger with its parts, checked against each other ([`prov_manifest::load_ledger`]).
pub fn read_ledger(store: &Store, digest: &Digest) -> Result<Ledger, DatasetError> {
    prov_manifest::load_ledger(store, digest).map_err(DatasetError::from)
}

/// Reads the ids of a stored ledger shard, verified, in the shard's order (by id), without
/// its other columns.
pub fn read_ledger_ids(store: &Store, digest: &Digest) -> Result<Vec<String>, DatasetError> {
    store.verify(digest)?;
    let file = fs_err::File::open(store.object_path(digest))?;
    let what = || format!("ledger shard `{digest}`");
    let mut reader = crate::guard_parquet(what, || {
        let builder = ParquetRecordBatchReaderBuilder::try_new(file.into_parts().0)?;
        if builder.schema().fields() != ledger_schema().fields() {
            return Ok(None);
        }
        let ids = parquet::arrow::ProjectionMask::roots(builder.parquet_schema(), [0]);
        builder.with_projection(ids).build().map(Some)
    })??
    .ok_or_else(|| DatasetError::Schema { digest: *digest, message: "not a ledger shard".into() })?;
    let mut ids = Vec::new();
    while let Some(batch) = crate::guard_parquet(what, || reader.next())? {
        let batch = batch?;
        let column = batch
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| DatasetError::Schema { digest: *digest, message: "the id column is not text".into() })?;
        ids.extend((0..batch.num_rows()).map(|r| column.value(r).to_owned()));
    }
    Ok(ids)
}

/// Reads a stored ledger shard, verified, in id order.
pub fn read_ledger_shard(store: &Store, digest: &Digest) -> Result<Vec<LedgerRow>, DatasetError> {
    store.verify(digest)?;
    let file = fs_err::File::open(store.object_path(digest))?;
    let reader = crate::guard_parquet(
        || format!("ledger shard `{digest}`"),
        || ParquetRecordBatchReaderBuilder::try_new(file.into_parts().0)?.build(),
    )??;
    let bad = |message: String| DatasetError::Schema { digest: *digest, message };
    let mut rows = Vec::new();
    let mut reader = reader;
    while let Some(batch) = crate::guard_parquet(|| format!("ledger shard `{digest}`"), || reader.next())? {
        let batch = batch?;
        if batch.schema().fields() != ledger_schema().fields() {
            return Err(bad("not a ledger shard".into()));
        }
        let s = |i: usize| batch.column(i).as_any().downcast_ref::<StringArray>().expect("schema checked: Utf8");
        let words = batch.column(5).as_any().downcast_ref::<UInt64Array>().expect("schema checked: UInt64");
        for r in 0..batch.num_rows() {
            let decision =
                LedgerDecision::parse(s(1).value(r)).ok_or_else(|| bad(format!("decision `{}`", s(1).value(r))))?;
            let evidence = if s(3).is_valid(r) {
                match serde_json::from_str::<Value>(s(3).value(r)) {
                    Ok(Value::Object(m)) => Some(m),
                    _ => return Err(bad(format!("evidence of `{}` is not a JSON object", s(0).value(r)))),
                }
            } else {
                None
            };
            rows.push(LedgerRow {
                id: s(0).value(r).to_owned(),
                decision,
                rule: s(2).value(r).to_owned(),
                evidence,
                language: s(4).is_valid(r).then(|| s(4).value(r).to_owned()),
                words: words.value(r),
            });
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every character of Unicode's `White_Space`, some characters that share a leading
    /// octet with them but are not white space (U+00A9, U+1681, U+200B, U+2030, U+3001), and
    /// other text, ASCII and not.
    const PIECES: &[&str] = &[
        " ", "\t", "\n", "\u{0B}", "\u{0C}", "\r", "\u{85}", "\u{A0}", "\u{1680}", "\u{2000}", "\u{2005}", "\u{200A}",
        "\u{2028}", "\u{2029}", "\u{202F}", "\u{205F}", "\u{3000}", "\u{A9}", "\u{1681}", "\u{200B}", "\u{2030}",
        "\u{3001}", "a", "word", "é", "дом", "ツ", "😀", "x1", "\u{1C}", "\u{7F}",
    ];

    proptest::proptest! {
        /// The count is `split_whitespace`'s (the standard library is the reference), on text
        /// built from every white-space character and its neighbours, in runs long and short
        /// enough to cross the 32-octet ASCII blocks at every offset.
        #[test]
        fn word_count_is_the_count_of_split_whitespace(
            picks in proptest::collection::vec((0..PIECES.len(), 1..40usize), 0..40),
        ) {
            let text: String = picks.iter().map(|&(p, n)| PIECES[p].repeat(if PIECES[p].len() == 1 { n } else { 1 })).collect();
            proptest::prop_assert_eq!(word_count(&text), text.split_whitespace().count() as u64, "{:?}", text);
        }
    }

    #[test]
    #[allow(clippy::print_stderr)]
    fn word_count_reads_real_text_as_split_whitespace_does() {
        // Real multilingual text of the main job (UDHR translations), all of it.
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recipes/data/mini-apertus/udhr.jsonl");
        let Ok(corpus) = fs_err::read_to_string(&path) else {
            assert!(
                !std::env::var("CI").is_ok_and(|v| v == "true"),
                "{} is missing; run scripts/setup",
                path.display()
            );
            eprintln!("skipping: {} is missing; run scripts/setup", path.display());
            return;
        };
        for line in corpus.lines() {
            let doc: serde_json::Value = serde_json::from_str(line).unwrap();
            let text = doc["text"].as_str().unwrap();
            assert_eq!(word_count(text), text.split_whitespace().count() as u64, "{}", doc["id"]);
        }
    }

    fn row(id: &str, decision: LedgerDecision, rule: &str) -> LedgerRow {
        let mut evidence = serde_json::Map::new();
        evidence.insert("agents".into(), serde_json::json!(["GPTBot"]));
        LedgerRow {
            id: id.into(),
            decision,
            rule: rule.into(),
            evidence: (decision == LedgerDecision::Removed).then_some(evidence),
            language: Some("en".into()),
            words: 3,
        }
    }

    #[test]
    fn ledgers_round_trip_sorted_with_verifiable_roots() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let rows = vec![
            row("b", LedgerDecision::Kept, "robots:allowed"),
            row("a", LedgerDecision::Removed, "robots:disallowed"),
            row("c", LedgerDecision::Kept, "robots:no-robots"),
        ];
        let shard = write_ledger_shard(&store, rows.clone()).unwrap();
        let back = read_ledger_shard(&store, &shard.shard.digest).unwrap();
        assert_eq!(back.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
        let leaves: Vec<Digest> = back.iter().map(LedgerRow::leaf).collect();
        assert_eq!(merkle_root(&leaves), shard.root, "the root can be recomputed from the stored rows");
        // Input order does not matter; content does.
        let mut reversed = rows.clone();
        reversed.reverse();
        assert_eq!(write_ledger_shard(&store, reversed).unwrap(), shard);
        let (digest, ledger) = write_ledger(&store, vec![shard.clone()]).unwrap();
        assert_eq!(ledger.record.rules["robots:allowed"], 1);
        let leaf = format!(
            r#"{{"bytes":{},"digest":"{}","root":"{}","rows":3,"shard":0}}"#,
            shard.shard.bytes, shard.shard.digest, shard.root
        );
        assert_eq!(ledger.record.merkle_root, merkle_root(&[Digest::of(leaf.as_bytes())]));
        assert_eq!(read_ledger(&store, &digest).unwrap(), ledger, "read back with its parts");
        let text = String::from_utf8(back[0].canonical()).unwrap();
        assert_eq!(
            text,
            r#"{"decision":"removed","evidence":{"agents":["GPTBot"]},"id":"a","language":"en","rule":"robots:disallowed","words":3}"#
        );
    }

    #[test]
    fn duplicate_ids_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let rows = vec![row("a", LedgerDecision::Kept, "x"), row("a", LedgerDecision::Kept, "x")];
        assert!(write_ledger_shard(&store, rows).unwrap_err().to_string().contains("appears twice"));
    }
}
