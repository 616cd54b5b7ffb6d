//! `dedup`: removes exact duplicates (on normalised text) and near duplicates (`MinHash` LSH),
//! keeping the first document of each group, with a ledger row for every document.
//!
//! | rule | decision | when |
//! | --- | --- | --- |
//! | `dedup:unique` | kept | no earlier document is an exact or near duplicate |
//! | `dedup:exact` | removed | an earlier document has the same normalised text (evidence: `duplicate_of`) |
//! | `dedup:near` | removed | an earlier kept document shares an LSH bucket and passes verification (evidence: `duplicate_of`, `band` (0-based), `jaccard_estimate`) |
//!
//! # Order: keep-first
//!
//! Documents are visited in dataset order: shard index, then row within the shard. The
//! `shard` stage keeps input order across shards (shard `i` holds a contiguous range), so
//! the kept set depends neither on the thread count nor on the number of shards.
//!
//! # Normalisation and exact duplicates
//!
//! The normalised text is the Unicode lowercase of the text (`str::to_lowercase`), with every
//! run of Unicode white space collapsed to one ASCII space and leading and trailing white
//! space removed. The exact key is BLAKE3 of the normalised text's UTF-8 bytes. The first
//! document with a key is its reference: later documents with the same key are removed as
//! `dedup:exact`, `duplicate_of` the first one (which may itself have been removed as a near
//! duplicate; its own ledger row then names the kept document). Empty documents normalise
//! to the empty string, so all but the first empty document are exact duplicates.
//!
//! With `key: {metadata: F}` the exact key is BLAKE3 of the string value of the document's
//! metadata field `F`, as written (no normalisation), and near duplicates are not looked for:
//! how sentence pairs are deduplicated on the hash `bifixer` marks them with (`F` is
//! `bifixer_hash`). A document without a string `F` fails the stage, naming it.
//!
//! # Near duplicates: `MinHash` LSH
//!
//! Shingles are the word `shingle`-grams of the normalised text (a text with fewer words
//! than `shingle` has a single shingle, all its words; an empty text has none and never
//! takes part in near dedup). A shingle hashes to the first 8 bytes (little endian) of
//! BLAKE3 of its words joined by single spaces, reduced modulo the Mersenne prime
//! `p = 2^61 - 1`. Permutation `i` is `h_i(x) = (a_i·x + b_i) mod p`, where `a_i` and `b_i`
//! come from BLAKE3 of `"prov-dedup-minhash" || seed (u64 LE) || i (u32 LE)`: `a_i` from
//! bytes 0..8 (mapped into `1..p`), `b_i` from bytes 8..16 (mapped into `0..p`). The seed
//! is the stage's seed `minhash`. Every hash is fixed by the bytes, not by the platform
//! (no `std::hash::Hasher`, no `RandomState`).
//!
//! The signature (`permutations` minima) is cut into `bands` bands of `rows` values; a band's
//! bucket is the first 8 bytes of BLAKE3 of its values (u64 LE). Two documents with Jaccard
//! similarity `s` share at least one bucket with probability `1 - (1 - s^rows)^bands`, an
//! S-curve whose threshold is about `(1/bands)^(1/rows)`. With the defaults (112
//! permutations, 14 bands × 8 rows, 5-word shingles: the `FineWeb` settings) the threshold
//! is about 0.72 and the probability is 0.05 at `s = 0.5`, 0.56 at `s = 0.7`, 0.92 at
//! `s = 0.8` and 0.9996 at `s = 0.9`.
//!
//! A document sharing a bucket with an earlier *kept* document is a candidate; candidates
//! are verified: the fraction of equal signature values (an estimate of the Jaccard
//! similarity) must be at least `verify_jaccard` (default 0.8; 0 accepts every candidate).
//! Candidates are tried in band order, then in dataset order within a bucket; the first
//! that passes decides. A document whose candidates all fail is kept as `dedup:unique`
//! (the stats count these as `unverified_candidates`).
//!
//! # Phases, and memory that does not grow with the corpus
//!
//! 1. One map task per shard, each shard streamed: the task writes the shard's ids and
//!    signatures, and its exact keys and band buckets each as one sorted run, to the stage's
//!    work directory ([`StageContext::work_dir`]), and names the five files with their sizes
//!    and digests in its result. Run on Slurm, these are the array tasks, on any node.
//! 2. The reduce step, where the stage is recorded: it checks every task's files against its
//!    result (a file that is not what its task wrote fails the stage as that task's
//!    integrity failure, and on Slurm the task runs again on the next run), then merges the
//!    runs: the first document of each exact key is the reference of the later ones; the
//!    members of every bucket with two or more go to one file, and each later member learns
//!    where its earlier ones are. Then the keep-first decisions, in dataset order, reading
//!    candidates' bucket members and signatures from the work files. The only state that
//!    grows is one bit per document: kept or not.
//! 3. Still in the reduce step, shard-parallel on its threads: each shard is read again, its
//!    kept documents and its ledger written.
//!
//! Memory is therefore a shard's records per thread in phase 1 (about 300 bytes a document
//! with the defaults), the sorts' buffers in phase 2, and a shard's ledger rows per thread in
//! phase 3; disk is about 1.2 KB a document with the defaults (signature, buckets, key), in
//! the work and scratch directories, removed when the stage ends. The decisions are those of
//! the in-memory rule above (a test compares them with it on random corpora).
//!
//! # Known limit
//!
//! A bucket shared by very many kept documents (boilerplate) makes its candidates be tried
//! one by one: time, not memory, grows with it.

use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use prov_dataset::{LedgerDecision, LedgerRow, ShardWriter, shard_documents};
use prov_exec::{
    ConfigError, InputSpec, MapResultText, MapResults, Stage, StageContext, StageError, StageOutput, WorkFile,
    WorkFileRef, parse_params,
};
use prov_extsort::{ExternalSort, Sorted, write_run_to};
use prov_manifest::{DatasetRecord, Determinism, OutputType};
use prov_store::{Digest, Hasher};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// What a document's exact key is made from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DedupKey {
    /// The normalised text (the default).
    #[default]
    Text,
    /// The value of this metadata field, a string taken exactly as written: a key another
    /// stage computed, such as the pair hash `bifixer` writes (`bifixer_hash`).
    Metadata(String),
}

impl DedupKey {
    fn is_text(&self) -> bool {
        *self == Self::Text
    }
}

/// The resolved configuration of a `dedup` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DedupConfig {
    /// Remove exact duplicates of the normalised text.
    #[serde(default = "yes")]
    pub exact: bool,
    /// Remove near duplicates found by `MinHash` LSH.
    #[serde(default = "yes")]
    pub near: bool,
    /// Words per shingle.
    #[serde(default = "default_shingle")]
    pub shingle: u32,
    /// `MinHash` permutations: the signature length; must equal `bands × rows`.
    #[serde(default = "default_permutations")]
    pub permutations: u32,
    /// LSH bands.
    #[serde(default = "default_bands")]
    pub bands: u32,
    /// Signature values per band.
    #[serde(default = "default_rows")]
    pub rows: u32,
    /// The least estimated Jaccard similarity for a candidate pair to count (0 to 1).
    #[serde(default = "default_verify_jaccard")]
    pub verify_jaccard: f64,
    /// What the exact key is made from (near duplicates always come from the text).
    #[serde(default, skip_serializing_if = "DedupKey::is_text")]
    pub key: DedupKey,
}

fn yes() -> bool {
    true
}
fn default_shingle() -> u32 {
    5
}
fn default_permutations() -> u32 {
    112
}
fn default_bands() -> u32 {
    14
}
fn default_rows() -> u32 {
    8
}
fn default_verify_jaccard() -> f64 {
    0.8
}

/// The largest signature this stage accepts (memory per document grows with it).
const MAX_PERMUTATIONS: u32 = 4096;

/// Returns the normalised text: Unicode lowercase, white-space runs collapsed to one space,
/// trimmed.
pub fn normalise(text: &str) -> String {
    let lower = text.to_lowercase();
    let mut out = String::with_capacity(lower.len());
    for w in lower.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

/// The Mersenne prime `2^61 - 1`.
const P61: u64 = (1 << 61) - 1;

/// `(a·x + b) mod p` for `a, x, b < p`.
fn mul_add_mod(a: u64, x: u64, b: u64) -> u64 {
    let prod = u128::from(a) * u128::from(x);
    let mut r = ((prod as u64) & P61) + ((prod >> 61) as u64);
    if r >= P61 {
        r -= P61;
    }
    r += b;
    if r >= P61 {
        r -= P61;
    }
    r
}

fn first_u64(d: &Digest, at: usize) -> u64 {
    u64::from_le_bytes(d.as_bytes()[at..at + 8].try_into().expect("a digest has 32 bytes"))
}

/// The `MinHash` permutations of a seed: `(a_i, b_i)` pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinHasher {
    params: Vec<(u64, u64)>,
    shingle: usize,
}

impl MinHasher {
    /// Derives `permutations` hash functions from a seed.
    pub fn new(seed: u64, permutations: u32, shingle: u32) -> Self {
        let params = (0..permutations)
            .map(|i| {
                let mut h = Hasher::new();
                h.update(b"prov-dedup-minhash").update(&seed.to_le_bytes()).update(&i.to_le_bytes());
                let d = h.finalize();
                (1 + first_u64(&d, 0) % (P61 - 1), first_u64(&d, 8) % P61)
            })
            .collect();
        Self { params, shingle: shingle.max(1) as usize }
    }

    /// The signature of a normalised text; empty when it has no words.
    pub fn signature(&self, normalised: &str) -> Vec<u64> {
        let words: Vec<&str> = normalised.split(' ').filter(|w| !w.is_empty()).collect();
        if words.is_empty() {
            return Vec::new();
        }
        let mut sig = vec![u64::MAX; self.params.len()];
        for gram in words.windows(self.shingle.min(words.len())) {
            let mut h = Hasher::new();
            for (i, w) in gram.iter().enumerate() {
                if i > 0 {
                    h.update(b" ");
                }
                h.update(w.as_bytes());
            }
            let x = first_u64(&h.finalize(), 0) % P61;
            for (s, &(a, b)) in sig.iter_mut().zip(&self.params) {
                *s = (*s).min(mul_add_mod(a, x, b));
            }
        }
        sig
    }
}

/// The bucket hash of each band of a signature (`rows` values per band).
pub fn band_hashes(signature: &[u64], rows: u32) -> Vec<u64> {
    signature
        .chunks(rows.max(1) as usize)
        .map(|band| {
            let mut h = Hasher::new();
            for v in band {
                h.update(&v.to_le_bytes());
            }
            first_u64(&h.finalize(), 0)
        })
        .collect()
}

/// The fraction of equal values of two signatures: an estimate of the Jaccard similarity.
pub fn estimated_jaccard(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() || a.len() != b.len() {
        return 0.0;
    }
    a.iter().zip(b).filter(|(x, y)| x == y).count() as f64 / a.len() as f64
}

/// A document's place in dataset order: its shard in the high 32 bits, its row in the low.
fn position(shard: usize, row: usize) -> Result<u64, StageError> {
    match (u32::try_from(shard), u32::try_from(row)) {
        (Ok(s), Ok(r)) => Ok(u64::from(s) << 32 | u64::from(r)),
        _ => Err(StageError::Input {
            input: "docs".into(),
            message: format!("shard {shard} row {row} is past 2^32 shards or rows per shard"),
        }),
    }
}

fn shard_of(pos: u64) -> usize {
    (pos >> 32) as usize
}

fn row_of(pos: u64) -> usize {
    (pos & 0xffff_ffff) as usize
}

/// A document's exact key and position: sorted, the first of each key is its reference.
const EXACT_W: usize = 40;
/// A document's band, bucket and position: sorted, a bucket's members are adjacent and in
/// dataset order.
const BUCKET_W: usize = 20;
/// A later document with an earlier one's exact key: its position and the reference's.
const EXACT_DUP_W: usize = 16;
/// A document with earlier members in one of its buckets: its position, the band, where the
/// bucket's members start in `members.bin`, and how many of them come before it.
const LOOKUP_W: usize = 24;
/// A decision: kind (0 kept, 1 exact, 2 near), band (u32), reference position (u64) and
/// Jaccard estimate (f64 bits), little endian.
const VERDICT_W: usize = 21;

/// Bucket members are read in blocks of this many, so that a bucket of any size costs
/// bounded memory (smaller under test, so that tests cross block boundaries).
#[cfg(not(test))]
const BLOCK: u64 = 4096;
#[cfg(test)]
const BLOCK: u64 = 64;

/// What one external sort may buffer before it spills a run: well below what the shard
/// phases hold (a shard's documents being read and written per thread, about 100 MiB in all
/// on 16 MiB shards), so that the sequential phase 2, whose buffers fill only on large
/// corpora (an estimated 6 M bucket lookups of 24 bytes at 20 GiB), never sets the stage's
/// peak. At 64 MiB, grown by doubling, they are the likely cause (not yet confirmed by a
/// measurement) of the 32 MiB the stage grew by from 1 to 20 GiB.
const SORT_BUDGET: usize = 32 << 20;

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b.try_into().expect("four bytes"))
}
fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b.try_into().expect("eight bytes"))
}
fn le64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().expect("eight bytes"))
}

/// The stage's files. Map task `S` (phase 1 of shard `S`) leaves its files in the work
/// directory, shared with the reduce step wherever the task ran ([`StageContext::work_dir`]);
/// the reduce step's own files are in its scratch directory (removed when dropped).
///
/// | file | where | holds |
/// | --- | --- | --- |
/// | `ids-S.bin`, `ends-S.bin` | work | shard `S`'s document ids, and where each ends (u64 LE) |
/// | `sig-S.bin` | work | shard `S`'s signatures, `permutations` u64 LE per row (zeros for an empty text) |
/// | `exact-S.bin`, `buckets-S.bin` | work | shard `S`'s exact keys and band buckets, each one sorted run |
/// | `members.bin` | scratch | the positions (u64 LE) of the members of every bucket with two or more |
/// | `verdict-S.bin` | scratch | shard `S`'s decisions, [`VERDICT_W`] bytes per row |
/// | `*-run-*.bin`, `*-pass*-*.bin` | scratch | runs and merge passes of the external sorts |
struct Scratch {
    dir: prov_exec::Scratch,
    work: PathBuf,
    permutations: usize,
}

/// The name of shard `shard`'s file `name`.
fn file_name(name: &str, shard: usize) -> String {
    format!("{name}-{shard:06}.bin")
}

impl Scratch {
    fn path(&self, name: &str, shard: usize) -> PathBuf {
        self.dir.path().join(file_name(name, shard))
    }
    fn work_path(&self, name: &str, shard: usize) -> PathBuf {
        self.work.join(file_name(name, shard))
    }
}

/// Random reads of map tasks' files (in the work directory) by shard, with a few kept open.
struct Files<'a> {
    scratch: &'a Scratch,
    name: &'static str,
    open: Vec<(usize, fs_err::File)>,
}

impl<'a> Files<'a> {
    const KEEP_OPEN: usize = 16;

    fn new(scratch: &'a Scratch, name: &'static str) -> Self {
        Self { scratch, name, open: Vec::new() }
    }

    fn read_at(&mut self, shard: usize, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        use fs_err::os::unix::fs::FileExt;
        let i = if let Some(i) = self.open.iter().position(|(s, _)| *s == shard) {
            i
        } else {
            if self.open.len() == Self::KEEP_OPEN {
                self.open.remove(0);
            }
            self.open.push((shard, fs_err::File::open(self.scratch.work_path(self.name, shard))?));
            self.open.len() - 1
        };
        self.open[i].1.read_exact_at(buf, offset)
    }
}

/// A document's id, read back from the scratch files.
fn read_id(ends: &mut Files<'_>, ids: &mut Files<'_>, pos: u64) -> std::io::Result<String> {
    let (shard, row) = (shard_of(pos), row_of(pos) as u64);
    let mut b = [0u8; 16];
    let start = if row == 0 {
        ends.read_at(shard, 0, &mut b[8..])?;
        0
    } else {
        ends.read_at(shard, (row - 1) * 8, &mut b)?;
        le64(&b[..8])
    };
    let end = le64(&b[8..]);
    let mut id = vec![0u8; (end - start) as usize];
    ids.read_at(shard, start, &mut id)?;
    String::from_utf8(id).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// What map task `S` (phase 1 of shard `S`) leaves for the reduce step: the shard's number
/// of documents and its five work files ([`Scratch`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sketched {
    rows: usize,
    ids: WorkFileRef,
    ends: WorkFileRef,
    sig: WorkFileRef,
    exact: WorkFileRef,
    buckets: WorkFileRef,
}

impl Sketched {
    /// The files, each checked to be what task `task` wrote under the name the reduce step
    /// reads: the paths of its exact and bucket runs.
    fn check(&self, work: &Path, task: usize) -> Result<(PathBuf, PathBuf), StageError> {
        self.ids.check_named(work, task, &file_name("ids", task))?;
        self.ends.check_named(work, task, &file_name("ends", task))?;
        self.sig.check_named(work, task, &file_name("sig", task))?;
        Ok((
            self.exact.check_named(work, task, &file_name("exact", task))?,
            self.buckets.check_named(work, task, &file_name("buckets", task))?,
        ))
    }
}

/// The string value of metadata field `field` of `doc`: its exact key under `key: {metadata}`.
fn metadata_key(doc: &prov_dataset::Document, field: &str) -> Result<String, StageError> {
    let value = doc.metadata.as_deref().and_then(|m| serde_json::from_str::<Value>(m).ok());
    match value.as_ref().and_then(|v| v.get(field)) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(StageError::Input {
            input: "docs".into(),
            message: format!("document `{}` has no string metadata field `{field}` to deduplicate on", doc.id),
        }),
    }
}

/// Phase 1 for one shard (a map task): writes its ids, signatures, and its exact keys and
/// buckets each as one sorted run, to the work directory `work`.
fn sketch_shard(
    work: &Path,
    shard: usize,
    docs: impl Iterator<Item = Result<(String, String), StageError>>,
    config: &DedupConfig,
    hasher: &MinHasher,
) -> Result<Sketched, StageError> {
    let permutations = config.permutations as usize;
    let mut ids = WorkFile::create(work, &file_name("ids", shard))?;
    let mut ends = WorkFile::create(work, &file_name("ends", shard))?;
    let mut sigs = WorkFile::create(work, &file_name("sig", shard))?;
    let (mut exact_records, mut bucket_records) = (Vec::new(), Vec::new());
    let (mut rows, mut id_bytes) = (0, 0u64);
    for doc in docs {
        let (id, text) = doc?;
        let pos = position(shard, rows)?;
        rows += 1;
        ids.write_all(id.as_bytes())?;
        id_bytes += id.len() as u64;
        ends.write_all(&id_bytes.to_le_bytes())?;
        // A metadata key is taken as written; only the text is normalised.
        let norm = if config.key.is_text() { normalise(&text) } else { text };
        if config.exact {
            let mut r = [0u8; EXACT_W];
            r[..32].copy_from_slice(Digest::of(norm.as_bytes()).as_bytes());
            r[32..].copy_from_slice(&pos.to_be_bytes());
            exact_records.push(r);
        }
        if config.near {
            let sig = hasher.signature(&norm);
            for (band, h) in band_hashes(&sig, config.rows).into_iter().enumerate() {
                let mut r = [0u8; BUCKET_W];
                r[..4].copy_from_slice(&(band as u32).to_be_bytes());
                r[4..12].copy_from_slice(&h.to_be_bytes());
                r[12..].copy_from_slice(&pos.to_be_bytes());
                bucket_records.push(r);
            }
            if sig.is_empty() {
                sigs.write_all(&vec![0u8; permutations * 8])?;
            }
            for v in sig {
                sigs.write_all(&v.to_le_bytes())?;
            }
        }
    }
    let mut exact = WorkFile::create(work, &file_name("exact", shard))?;
    write_run_to(&mut exact_records, &mut exact)?;
    let mut buckets = WorkFile::create(work, &file_name("buckets", shard))?;
    write_run_to(&mut bucket_records, &mut buckets)?;
    Ok(Sketched {
        rows,
        ids: ids.finish()?,
        ends: ends.finish()?,
        sig: sigs.finish()?,
        exact: exact.finish()?,
        buckets: buckets.finish()?,
    })
}

/// Phase 2a: every document whose exact key an earlier document has, with that document
/// (the first with the key), sorted by position.
fn exact_duplicates(
    scratch: &Scratch,
    exact: ExternalSort<[u8; EXACT_W]>,
) -> Result<Sorted<[u8; EXACT_DUP_W]>, StageError> {
    let dups = ExternalSort::<[u8; EXACT_DUP_W]>::new(scratch.dir.path(), "exact-dup", SORT_BUDGET);
    let mut out = dups.pusher();
    let mut first: Option<([u8; 32], u64)> = None;
    for r in exact.finish()? {
        let r = r?;
        let pos = be64(&r[32..]);
        match &first {
            Some((key, reference)) if key[..] == r[..32] => {
                let mut d = [0u8; EXACT_DUP_W];
                d[..8].copy_from_slice(&pos.to_be_bytes());
                d[8..].copy_from_slice(&reference.to_be_bytes());
                out.push(d)?;
            }
            _ => first = Some((r[..32].try_into().expect("32 bytes"), pos)),
        }
    }
    out.finish()?;
    Ok(dups.finish()?)
}

/// Phase 2b: writes the members of every bucket that has two or more to `members.bin`, and
/// returns, sorted by position then band, where each later member finds its earlier ones.
/// Streams: a bucket of any size costs no memory.
fn bucket_lookups(
    scratch: &Scratch,
    buckets: ExternalSort<[u8; BUCKET_W]>,
) -> Result<Sorted<[u8; LOOKUP_W]>, StageError> {
    let lookups = ExternalSort::<[u8; LOOKUP_W]>::new(scratch.dir.path(), "lookup", SORT_BUDGET);
    let mut out = lookups.pusher();
    let mut members = BufWriter::new(fs_err::File::create(scratch.dir.path().join("members.bin"))?);
    let mut written = 0u64;
    // The current bucket: its band and hash, its first member, where its members start in
    // `members.bin` once it has a second, and how many it has.
    let mut current: Option<([u8; 12], u64, Option<u64>, u32)> = None;
    for r in buckets.finish()? {
        let r = r?;
        let pos = be64(&r[12..]);
        match &mut current {
            Some((bucket, first, start, count)) if bucket[..] == r[..12] => {
                let start = if let Some(s) = start {
                    *s
                } else {
                    members.write_all(&first.to_le_bytes())?;
                    *start = Some(written);
                    written += 1;
                    written - 1
                };
                members.write_all(&pos.to_le_bytes())?;
                written += 1;
                let mut l = [0u8; LOOKUP_W];
                l[..8].copy_from_slice(&pos.to_be_bytes());
                l[8..12].copy_from_slice(&r[..4]);
                l[12..20].copy_from_slice(&start.to_be_bytes());
                l[20..].copy_from_slice(&count.to_be_bytes());
                out.push(l)?;
                *count += 1;
            }
            _ => current = Some((r[..12].try_into().expect("12 bytes"), pos, None, 1)),
        }
    }
    members.into_inner().map_err(std::io::IntoInnerError::into_error)?;
    out.finish()?;
    Ok(lookups.finish()?)
}

/// One bit per document: kept so far.
struct KeptBits {
    first_of_shard: Vec<u64>,
    bits: Vec<u64>,
}

impl KeptBits {
    fn new(rows: &[usize]) -> Self {
        let mut first_of_shard = Vec::with_capacity(rows.len());
        let mut total = 0u64;
        for &r in rows {
            first_of_shard.push(total);
            total += r as u64;
        }
        Self { first_of_shard, bits: vec![0; total.div_ceil(64) as usize] }
    }
    fn index(&self, pos: u64) -> usize {
        (self.first_of_shard[shard_of(pos)] + row_of(pos) as u64) as usize
    }
    fn set(&mut self, pos: u64) {
        let i = self.index(pos);
        self.bits[i / 64] |= 1 << (i % 64);
    }
    fn get(&self, pos: u64) -> bool {
        let i = self.index(pos);
        self.bits[i / 64] >> (i % 64) & 1 == 1
    }
}

/// Phase 2c: the keep-first decisions, in dataset order, written to `verdict-S.bin`. Holds one
/// bit per document; candidates' signatures and bucket members are read from disk. Returns
/// the number of documents kept although they had candidates that failed verification.
fn decide(
    scratch: &Scratch,
    rows: &[usize],
    exact_dups: Sorted<[u8; EXACT_DUP_W]>,
    lookups: Sorted<[u8; LOOKUP_W]>,
    config: &DedupConfig,
) -> Result<u64, StageError> {
    use fs_err::os::unix::fs::FileExt;
    let mut exact_dups = exact_dups.peekable();
    let mut lookups = lookups.peekable();
    let members = fs_err::File::open(scratch.dir.path().join("members.bin"))?;
    let mut sigs = Files::new(scratch, "sig");
    let sig_bytes = scratch.permutations * 8;
    let read_sig = |sigs: &mut Files<'_>, pos: u64| -> std::io::Result<Vec<u64>> {
        let mut b = vec![0u8; sig_bytes];
        sigs.read_at(shard_of(pos), row_of(pos) as u64 * sig_bytes as u64, &mut b)?;
        Ok(b.chunks_exact(8).map(le64).collect())
    };
    let mut kept = KeptBits::new(rows);
    let mut unverified = 0;
    let mut block = vec![0u8; BLOCK as usize * 8];
    for (shard, &n) in rows.iter().enumerate() {
        let mut out = BufWriter::new(fs_err::File::create(scratch.path("verdict", shard))?);
        for row in 0..n {
            let pos = position(shard, row)?;
            let mut verdict = [0u8; VERDICT_W];
            let exact_ref = match exact_dups.next_if(|d| d.as_ref().map_or(true, |d| be64(&d[..8]) == pos)) {
                Some(d) => Some(be64(&d?[8..])),
                None => None,
            };
            let mut mine = Vec::new();
            while let Some(l) = lookups.next_if(|l| l.as_ref().map_or(true, |l| be64(&l[..8]) == pos)) {
                mine.push(l?);
            }
            if let Some(reference) = exact_ref {
                verdict[0] = 1;
                verdict[5..13].copy_from_slice(&reference.to_le_bytes());
                out.write_all(&verdict)?;
                continue;
            }
            let mut near = None;
            let mut had_candidates = false;
            if !mine.is_empty() {
                let sig = read_sig(&mut sigs, pos)?;
                let mut tried = std::collections::HashSet::new();
                'bands: for l in &mine {
                    let (band, start, earlier) = (be32(&l[8..12]), be64(&l[12..20]), u64::from(be32(&l[20..])));
                    let mut done = 0;
                    while done < earlier {
                        let take = (earlier - done).min(BLOCK);
                        let buf = &mut block[..take as usize * 8];
                        members.read_exact_at(buf, (start + done) * 8)?;
                        done += take;
                        for c in buf.chunks_exact(8).map(le64) {
                            if !kept.get(c) || !tried.insert(c) {
                                continue;
                            }
                            had_candidates = true;
                            let j = estimated_jaccard(&sig, &read_sig(&mut sigs, c)?);
                            if j >= config.verify_jaccard {
                                near = Some((c, band, j));
                                break 'bands;
                            }
                        }
                    }
                }
            }
            if let Some((c, band, j)) = near {
                verdict[0] = 2;
                verdict[1..5].copy_from_slice(&band.to_le_bytes());
                verdict[5..13].copy_from_slice(&c.to_le_bytes());
                verdict[13..].copy_from_slice(&j.to_le_bytes());
            } else {
                if had_candidates {
                    unverified += 1;
                }
                kept.set(pos);
            }
            out.write_all(&verdict)?;
        }
        out.into_inner().map_err(std::io::IntoInnerError::into_error)?;
    }
    if exact_dups.next().is_some() || lookups.next().is_some() {
        return Err(StageError::Input {
            input: "docs".into(),
            message: "the dedup scratch files name documents past the dataset's end".into(),
        });
    }
    Ok(unverified)
}

/// A decision of phase 2, as phase 3 writes it to the ledger.
#[derive(Debug, Clone, PartialEq)]
struct Verdict {
    decision: LedgerDecision,
    rule: &'static str,
    evidence: Option<Map<String, Value>>,
}

/// Reads shard `shard`'s decisions back, with the ids of the documents they name.
struct Verdicts<'a> {
    file: BufReader<fs_err::File>,
    ends: Files<'a>,
    ids: Files<'a>,
}

impl<'a> Verdicts<'a> {
    fn open(scratch: &'a Scratch, shard: usize) -> Result<Self, StageError> {
        Ok(Self {
            file: BufReader::new(fs_err::File::open(scratch.path("verdict", shard))?),
            ends: Files::new(scratch, "ends"),
            ids: Files::new(scratch, "ids"),
        })
    }

    fn next(&mut self) -> Result<Option<Verdict>, StageError> {
        let mut r = [0u8; VERDICT_W];
        match self.file.read_exact(&mut r) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        let reference = le64(&r[5..13]);
        Ok(Some(match r[0] {
            0 => Verdict { decision: LedgerDecision::Kept, rule: "dedup:unique", evidence: None },
            1 => Verdict {
                decision: LedgerDecision::Removed,
                rule: "dedup:exact",
                evidence: prov_dataset::evidence(
                    json!({ "duplicate_of": read_id(&mut self.ends, &mut self.ids, reference)? }),
                ),
            },
            _ => Verdict {
                decision: LedgerDecision::Removed,
                rule: "dedup:near",
                evidence: prov_dataset::evidence(json!({
                    "duplicate_of": read_id(&mut self.ends, &mut self.ids, reference)?,
                    "band": u32::from_le_bytes(r[1..5].try_into().expect("four bytes")),
                    "jaccard_estimate": f64::from_le_bytes(r[13..].try_into().expect("eight bytes")),
                })),
            },
        }))
    }
}

/// Phase 2 over the map tasks' results, which arrive in task order: checks each task's
/// files, merges their runs, and leaves every shard's decisions in the scratch directory.
/// Returns the shards' sizes and the unverified count.
fn decide_all(
    scratch: &Scratch,
    sketches: impl Iterator<Item = Result<(usize, Sketched), StageError>>,
    config: &DedupConfig,
) -> Result<(Vec<usize>, u64), StageError> {
    let exact = ExternalSort::<[u8; EXACT_W]>::new(scratch.dir.path(), "exact", SORT_BUDGET);
    let buckets = ExternalSort::<[u8; BUCKET_W]>::new(scratch.dir.path(), "bucket", SORT_BUDGET);
    let mut rows = Vec::new();
    for result in sketches {
        let (task, shard) = result?;
        assert_eq!(task, rows.len(), "map results arrive in task order");
        let (exact_run, bucket_run) = shard.check(&scratch.work, task)?;
        exact.adopt_run(&exact_run);
        buckets.adopt_run(&bucket_run);
        rows.push(shard.rows);
    }
    let exact_dups = exact_duplicates(scratch, exact)?;
    let lookups = bucket_lookups(scratch, buckets)?;
    let unverified = decide(scratch, &rows, exact_dups, lookups, config)?;
    Ok((rows, unverified))
}

/// Removes exact and near duplicates, keep-first, with a ledger.
pub struct DedupStage;

impl Stage for DedupStage {
    fn kind(&self) -> &'static str {
        "dedup"
    }
    // 2: the ledger has an id directory (prov_dataset::directory).
    // 3: the ledger record holds its shards' Merkle root, the list is in its parts record
    // (ledger schema 2), so that a proof stays logarithmic in the shard count.
    fn version(&self) -> u32 {
        3
    }
    fn summary(&self) -> &'static str {
        "remove exact (normalised text) and near (MinHash LSH) duplicates, keeping the first in dataset order, with a ledger"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let config: DedupConfig = parse_params(params)?;
        if !config.exact && !config.near {
            return Err(ConfigError::at(&["near"], "with `exact: false` and `near: false` the stage does nothing")
                .with_hint("remove the stage, or enable `exact` or `near`"));
        }
        if config.shingle == 0 {
            return Err(ConfigError::at(&["shingle"], "a shingle has at least one word"));
        }
        for (name, v) in [("permutations", config.permutations), ("bands", config.bands), ("rows", config.rows)] {
            if v == 0 {
                return Err(ConfigError::at(&[name], format!("`{name}` must be at least 1")));
            }
        }
        if config.permutations > MAX_PERMUTATIONS {
            return Err(ConfigError::at(&["permutations"], format!("at most {MAX_PERMUTATIONS} permutations")));
        }
        if u64::from(config.bands) * u64::from(config.rows) != u64::from(config.permutations) {
            return Err(ConfigError::at(
                &["permutations"],
                format!(
                    "bands × rows must equal permutations: {} × {} ≠ {}",
                    config.bands, config.rows, config.permutations
                ),
            ));
        }
        if !config.key.is_text() && (config.near || !config.exact) {
            return Err(ConfigError::at(
                &["key"],
                "a metadata key is an exact key: it needs `exact: true` and `near: false`",
            )
            .with_hint("near duplicates are found in the text; run a second `dedup` stage for them"));
        }
        if !(0.0..=1.0).contains(&config.verify_jaccard) {
            return Err(ConfigError::at(&["verify_jaccard"], "an estimated Jaccard similarity between 0 and 1"));
        }
        Ok(serde_json::to_value(config).expect("numbers and booleans encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("docs", vec![OutputType::Dataset])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        prov_filter::outputs()
    }
    fn seed_names(&self) -> &'static [&'static str] {
        &["minhash"]
    }
    /// One map task per shard: phase 1, the shard's sketches.
    fn map_tasks(&self, cx: &StageContext<'_>) -> Result<Option<usize>, StageError> {
        Ok(Some(cx.input_record::<DatasetRecord>("docs")?.shards.len()))
    }
    fn map(&self, cx: &StageContext<'_>, tasks: &[usize]) -> Result<Vec<MapResultText>, StageError> {
        let config: DedupConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let hasher = MinHasher::new(cx.seed("minhash")?, config.permutations, config.shingle);
        let work = cx.work_dir()?;
        prov_filter::map_input_shards(cx, tasks, |i, shard| {
            let docs = shard_documents(cx.store, &shard.digest)?.map(|d| {
                let d = d?;
                match &config.key {
                    DedupKey::Text => Ok((d.id, d.text)),
                    DedupKey::Metadata(field) => {
                        let key = metadata_key(&d, field)?;
                        Ok((d.id, key))
                    }
                }
            });
            sketch_shard(&work, i, docs, &config, &hasher)
        })
    }
    /// Phases 2 and 3 (see the module doc), where the stage is recorded.
    fn reduce(&self, cx: &StageContext<'_>, results: MapResults<'_>) -> Result<StageOutput, StageError> {
        let config: DedupConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let ds = cx.input_record::<DatasetRecord>("docs")?;
        let scratch = Scratch { dir: cx.scratch()?, work: cx.work_dir()?, permutations: config.permutations as usize };
        let sketches = results.map(|r| {
            let (task, value) = r?;
            let sketched = serde_json::from_value::<Sketched>(value)
                .map_err(|e| StageError::MapResult { task, message: e.to_string() })?;
            Ok((task, sketched))
        });
        let (rows, unverified) = decide_all(&scratch, sketches, &config)?;
        if rows.len() != ds.shards.len() {
            return Err(StageError::Input {
                input: "docs".into(),
                message: format!("{} map results for {} shards", rows.len(), ds.shards.len()),
            });
        }
        // Phase 3: kept documents and ledger shards, shard-parallel (each shard streamed
        // again), each folded into the stage's parts as it finishes.
        let parts = Mutex::new(prov_filter::FilterParts::new(ds.shards.len()));
        cx.pool.install(|| {
            ds.shards.par_iter().enumerate().try_for_each(|(i, s)| {
                let changed = || StageError::Input {
                    input: "docs".into(),
                    message: format!("shard `{}` changed between two reads", s.digest),
                };
                let mut verdicts = Verdicts::open(&scratch, i)?;
                let (mut ends, mut ids) = (Files::new(&scratch, "ends"), Files::new(&scratch, "ids"));
                let mut kept = ShardWriter::new(cx.store)?;
                let mut ledger = Vec::with_capacity(rows[i]);
                for (row, doc) in shard_documents(cx.store, &s.digest)?.enumerate() {
                    let doc = doc?;
                    if row >= rows[i] || read_id(&mut ends, &mut ids, position(i, row)?)? != doc.id {
                        return Err(changed());
                    }
                    let Some(d) = verdicts.next()? else {
                        return Err(changed());
                    };
                    ledger.push(LedgerRow::of_document(&doc, d.decision, d.rule, d.evidence));
                    if d.decision == LedgerDecision::Kept {
                        kept.push(doc)?;
                    }
                }
                if ledger.len() != rows[i] || verdicts.next()?.is_some() {
                    return Err(changed());
                }
                let (ledger, stats) = prov_filter::write_counted_ledger(cx, ledger)?;
                let kept = kept.finish()?;
                parts.lock().expect("no task panics holding the parts").put(i, (kept, ledger, stats));
                Ok::<_, StageError>(())
            })
        })?;
        let mut out = parts.into_inner().expect("no task panicked holding the parts").finish(cx)?;
        out.stats.insert("unverified_candidates".into(), Value::from(unverified));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARAGRAPH: &str = "The committee met on Tuesday to review the annual budget of the regional library \
        network. Members discussed the cost of new shelving, the digitisation of rare manuscripts, longer \
        opening hours during the examination period and a proposal to share catalogues with the university. \
        After a long debate the chair asked for a written report before the next meeting in the spring.";

    fn config() -> DedupConfig {
        serde_json::from_value(DedupStage.resolve_config(&json!({})).unwrap()).unwrap()
    }

    #[test]
    fn normalisation_lowercases_and_collapses_white_space() {
        assert_eq!(normalise("  Hello\t\tWORLD \n\u{00A0} Ünïcode  ÉTÉ\r\n"), "hello world ünïcode été");
        assert_eq!(normalise("ΣΊΣΥΦΟΣ"), "σίσυφος");
        assert_eq!(normalise(" \n\t "), "");
        assert_eq!(normalise("a\u{2003}b"), "a b");
    }

    #[test]
    fn defaults_are_explicit_and_checked() {
        let c = DedupStage.resolve_config(&json!({})).unwrap();
        assert_eq!(
            c,
            json!({"exact": true, "near": true, "shingle": 5, "permutations": 112, "bands": 14, "rows": 8, "verify_jaccard": 0.8})
        );
        assert!(DedupStage.resolve_config(&json!({"bands": 10})).is_err());
        assert!(DedupStage.resolve_config(&json!({"permutations": 120, "bands": 15})).is_ok());
        assert!(DedupStage.resolve_config(&json!({"exact": false, "near": false})).is_err());
        assert!(DedupStage.resolve_config(&json!({"verify_jaccard": 1.5})).is_err());
        assert!(DedupStage.resolve_config(&json!({"shingle": 0})).is_err());
        assert!(DedupStage.resolve_config(&json!({"threshold": 0.7})).is_err());
        // A metadata key is exact only; the text key stays out of the resolved configuration,
        // so lockfiles written before the field existed keep their stage keys.
        assert!(DedupStage.resolve_config(&json!({"key": {"metadata": "bifixer_hash"}})).is_err());
        let c = DedupStage.resolve_config(&json!({"key": {"metadata": "bifixer_hash"}, "near": false})).unwrap();
        assert_eq!(c["key"], json!({"metadata": "bifixer_hash"}));
        assert!(DedupStage.resolve_config(&json!({"key": "text"})).unwrap().get("key").is_none());
    }

    #[test]
    fn minhash_is_deterministic_per_seed() {
        let text = normalise(PARAGRAPH);
        let a = MinHasher::new(7, 112, 5).signature(&text);
        assert_eq!(a.len(), 112);
        assert_eq!(a, MinHasher::new(7, 112, 5).signature(&text));
        assert_ne!(a, MinHasher::new(8, 112, 5).signature(&text));
        assert!(a.iter().all(|&v| v < P61));
        assert!(MinHasher::new(7, 112, 5).signature("").is_empty());
        // Fewer words than a shingle: one shingle of all the words.
        assert_eq!(MinHasher::new(7, 4, 5).signature("two words").len(), 4);
        // Pinned values: the hashes must not change across platforms or releases.
        let pinned = MinHasher::new(1, 2, 5).signature("the quick brown fox jumps over the lazy dog");
        assert_eq!(pinned, [443_694_677_024_768_431, 748_668_290_695_284_984]);
        assert_eq!(band_hashes(&pinned, 1), [5_825_687_637_618_315_971, 4_494_196_018_285_054_541]);
    }

    fn candidates(a: &str, b: &str) -> bool {
        let h = MinHasher::new(42, 112, 5);
        let (ba, bb) = (band_hashes(&h.signature(&normalise(a)), 8), band_hashes(&h.signature(&normalise(b)), 8));
        assert_eq!(ba.len(), 14);
        ba.iter().zip(&bb).any(|(x, y)| x == y)
    }

    #[test]
    fn lsh_finds_a_near_duplicate_and_not_unrelated_text() {
        let changed = PARAGRAPH.replace("Tuesday", "Wednesday");
        assert!(candidates(PARAGRAPH, &changed));
        let h = MinHasher::new(42, 112, 5);
        let j = estimated_jaccard(&h.signature(&normalise(PARAGRAPH)), &h.signature(&normalise(&changed)));
        assert!(j >= 0.8, "{j}");
        let other = "Rain is expected over the northern hills tonight, with strong winds along the coast and \
            snow above eight hundred metres; drivers should carry chains and check the pass before leaving.";
        assert!(!candidates(PARAGRAPH, other));
    }

    /// What the in-memory reference keeps per document.
    struct Sketch {
        id: String,
        key: Digest,
        signature: Vec<u64>,
        bands: Vec<u64>,
    }

    fn sketch(id: String, text: &str, config: &DedupConfig, hasher: &MinHasher) -> Sketch {
        let norm = normalise(text);
        let key = Digest::of(norm.as_bytes());
        let (signature, bands) = if config.near {
            let sig = hasher.signature(&norm);
            let bands = band_hashes(&sig, config.rows);
            (sig, bands)
        } else {
            (Vec::new(), Vec::new())
        };
        Sketch { id, key, signature, bands }
    }

    /// The keep-first rule of the module doc, in memory, as the stage did it before its state
    /// went to disk (release 1 of the stage): the oracle the disk-backed decisions must equal.
    fn reference_decide(shards: &[Vec<Sketch>], config: &DedupConfig) -> (Vec<Vec<Verdict>>, u64) {
        use std::collections::HashMap;
        let mut first: HashMap<Digest, (usize, usize)> = HashMap::new();
        let mut buckets: Vec<HashMap<u64, Vec<(usize, usize)>>> = vec![HashMap::new(); config.bands as usize];
        let mut unverified = 0;
        let mut out = Vec::new();
        for s in 0..shards.len() {
            let mut decisions = Vec::new();
            for r in 0..shards[s].len() {
                let sk = &shards[s][r];
                if config.exact {
                    if let Some(&(fs, fr)) = first.get(&sk.key) {
                        decisions.push(Verdict {
                            decision: LedgerDecision::Removed,
                            rule: "dedup:exact",
                            evidence: prov_dataset::evidence(json!({ "duplicate_of": shards[fs][fr].id })),
                        });
                        continue;
                    }
                    first.insert(sk.key, (s, r));
                }
                let mut near = None;
                let mut had_candidates = false;
                if config.near && !sk.bands.is_empty() {
                    let mut tried = Vec::new();
                    'bands: for (band, h) in sk.bands.iter().enumerate() {
                        for &(cs, cr) in buckets[band].get(h).map_or(&[][..], Vec::as_slice) {
                            if tried.contains(&(cs, cr)) {
                                continue;
                            }
                            tried.push((cs, cr));
                            had_candidates = true;
                            let j = estimated_jaccard(&sk.signature, &shards[cs][cr].signature);
                            if j >= config.verify_jaccard {
                                near = Some((cs, cr, band, j));
                                break 'bands;
                            }
                        }
                    }
                }
                if let Some((cs, cr, band, j)) = near {
                    decisions.push(Verdict {
                        decision: LedgerDecision::Removed,
                        rule: "dedup:near",
                        evidence: prov_dataset::evidence(
                            json!({ "duplicate_of": shards[cs][cr].id, "band": band, "jaccard_estimate": j }),
                        ),
                    });
                    continue;
                }
                if had_candidates {
                    unverified += 1;
                }
                for (band, h) in sk.bands.iter().enumerate() {
                    buckets[band].entry(*h).or_default().push((s, r));
                }
                decisions.push(Verdict { decision: LedgerDecision::Kept, rule: "dedup:unique", evidence: None });
            }
            out.push(decisions);
        }
        (out, unverified)
    }

    /// Ids `d1`, `d2`, … in dataset order.
    fn with_ids(texts: &[&[&str]]) -> Vec<Vec<(String, String)>> {
        let mut n = 0;
        texts
            .iter()
            .map(|shard| {
                shard
                    .iter()
                    .map(|t| {
                        n += 1;
                        (format!("d{n}"), (*t).to_string())
                    })
                    .collect()
            })
            .collect()
    }

    /// The map tasks' sketches of `shards`, in a work directory of `dir`, and the files
    /// phase 2 works in.
    fn sketched(dir: &Path, shards: &[Vec<(String, String)>], c: &DedupConfig) -> (Scratch, Vec<Sketched>) {
        std::fs::create_dir(dir.join("scratch")).unwrap();
        std::fs::create_dir(dir.join("work")).unwrap();
        let scratch = Scratch {
            dir: prov_exec::Scratch::at(dir.join("scratch")),
            work: dir.join("work"),
            permutations: c.permutations as usize,
        };
        let hasher = MinHasher::new(3, c.permutations, c.shingle);
        let sketches = shards
            .iter()
            .enumerate()
            .map(|(i, docs)| sketch_shard(&scratch.work, i, docs.clone().into_iter().map(Ok), c, &hasher).unwrap())
            .collect();
        (scratch, sketches)
    }

    /// The stage's phases 1 and 2 on disk, their decisions read back as phase 3 reads them.
    fn decide_on_disk(shards: &[Vec<(String, String)>], c: &DedupConfig) -> (Vec<Vec<Verdict>>, u64) {
        let dir = tempfile::tempdir().unwrap();
        let (scratch, sketches) = sketched(dir.path(), shards, c);
        let (rows, unverified) = decide_all(&scratch, sketches.into_iter().enumerate().map(Ok), c).unwrap();
        assert_eq!(rows, shards.iter().map(Vec::len).collect::<Vec<_>>());
        let verdicts = (0..shards.len())
            .map(|i| {
                let mut v = Verdicts::open(&scratch, i).unwrap();
                std::iter::from_fn(|| v.next().unwrap()).collect()
            })
            .collect();
        drop(scratch);
        assert!(!dir.path().join("scratch").exists(), "the scratch directory is removed");
        (verdicts, unverified)
    }

    /// A map task's file that is not what the task wrote (bytes changed after the task, the
    /// size kept) is refused as that task's integrity failure, before any decision; a result
    /// that names another task's file is refused as a bad result of its task.
    #[test]
    fn a_map_tasks_file_changed_after_the_task_is_refused() {
        let docs = with_ids(&[&[PARAGRAPH, "one"], &["two", PARAGRAPH]]);
        let c = config();
        let dir = tempfile::tempdir().unwrap();
        let (scratch, sketches) = sketched(dir.path(), &docs, &c);
        let sig = scratch.work_path("sig", 1);
        let mut bytes = fs_err::read(&sig).unwrap();
        bytes[8] ^= 1;
        fs_err::write(&sig, &bytes).unwrap();
        match decide_all(&scratch, sketches.clone().into_iter().enumerate().map(Ok), &c) {
            Err(e @ StageError::WorkFile { task: 1, .. }) => assert!(e.is_integrity_failure(), "{e}"),
            other => panic!("{other:?}"),
        }
        assert!(!scratch.path("verdict", 0).exists(), "nothing was decided");
        let mut swapped = sketches;
        swapped[0].buckets = swapped[1].buckets.clone();
        match decide_all(&scratch, swapped.into_iter().enumerate().map(Ok), &c) {
            Err(StageError::MapResult { task: 0, message }) => {
                assert!(message.contains("`buckets-000001.bin`"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    fn decide_in_memory(shards: &[Vec<(String, String)>], c: &DedupConfig) -> (Vec<Vec<Verdict>>, u64) {
        let h = MinHasher::new(3, c.permutations, c.shingle);
        let sketches: Vec<Vec<Sketch>> =
            shards.iter().map(|s| s.iter().map(|(id, t)| sketch(id.clone(), t, c, &h)).collect()).collect();
        reference_decide(&sketches, c)
    }

    fn flat(d: &[Vec<Verdict>]) -> Vec<(&'static str, Option<Value>)> {
        d.iter().flatten().map(|d| (d.rule, d.evidence.clone().map(|m| m["duplicate_of"].clone()))).collect()
    }

    #[test]
    fn keep_first_in_dataset_order_whatever_the_shards() {
        let near = PARAGRAPH.replace("Tuesday", "Wednesday");
        let upper = PARAGRAPH.to_uppercase().replace(' ', "  \n");
        let docs = [PARAGRAPH, "short one", near.as_str(), upper.as_str(), "Short   ONE", "", "", "unrelated words"];
        let c = config();
        let one = decide_on_disk(&with_ids(&[&docs]), &c).0;
        let three = decide_on_disk(&with_ids(&[&docs[..3], &docs[3..5], &docs[5..]]), &c).0;
        assert_eq!(flat(&one), flat(&three));
        let rules: Vec<_> = flat(&one).into_iter().map(|(r, _)| r).collect();
        assert_eq!(
            rules,
            [
                "dedup:unique",
                "dedup:unique",
                "dedup:near",
                "dedup:exact",
                "dedup:exact",
                "dedup:unique",
                "dedup:exact",
                "dedup:unique"
            ]
        );
        assert_eq!(flat(&one)[2].1, Some(json!("d1")));
        assert_eq!(flat(&one)[4].1, Some(json!("d2")));
        let band = &one[0][2].evidence.as_ref().unwrap()["band"];
        assert!(band.as_u64().unwrap() < 14, "{band}");
        // Exact only: the near duplicate stays.
        let exact_only = DedupConfig { near: false, ..c.clone() };
        let d = decide_on_disk(&with_ids(&[&docs]), &exact_only).0;
        assert_eq!(d[0][2].rule, "dedup:unique");
        // Verification: at 1.0 the changed paragraph is kept, and counted as unverified.
        let strict = DedupConfig { verify_jaccard: 1.0, ..c };
        let (d, unverified) = decide_on_disk(&with_ids(&[&docs]), &strict);
        assert_eq!(d[0][2].rule, "dedup:unique");
        assert_eq!(unverified, 1);
    }

    /// A bucket with more earlier kept members than two read blocks ([`BLOCK`]): members
    /// past the first blocks are tried, in dataset order, as the reference does.
    #[test]
    fn a_bucket_larger_than_a_read_block_is_read_in_full() {
        // Two one-value bands; at 1.0 a candidate passes only with both values equal. Half the
        // documents take `alpha`'s value in the first band, and most of those are kept (their
        // second value is their own word's), so that bucket grows past two blocks.
        let c = DedupConfig { permutations: 2, bands: 2, rows: 1, shingle: 1, verify_jaccard: 1.0, ..config() };
        let h = MinHasher::new(3, 2, 1);
        let alpha = h.signature("alpha");
        let mut texts: Vec<String> = (0..2000).map(|i| format!("alpha u{i}")).collect();
        let in_alpha_bucket: Vec<usize> = (0..texts.len())
            .filter(|&i| {
                let sig = h.signature(&texts[i]);
                sig[0] == alpha[0] && sig[1] != alpha[1]
            })
            .collect();
        assert!(in_alpha_bucket.len() as u64 > 3 * BLOCK, "{}", in_alpha_bucket.len());
        // Late documents with the word set (so the signature) of a member past two blocks, but
        // another exact key: their only passing candidate is deep in the first band's bucket.
        let deep: Vec<usize> = in_alpha_bucket[2 * BLOCK as usize..].iter().step_by(9).copied().collect();
        texts.extend(deep.iter().map(|i| format!("alpha u{i} alpha")));
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let shards = with_ids(&[&refs[..500], &refs[500..]]);
        let (disk, unverified) = decide_on_disk(&shards, &c);
        let (memory, expected_unverified) = decide_in_memory(&shards, &c);
        assert_eq!(disk, memory);
        assert_eq!(unverified, expected_unverified);
        let late: Vec<_> = disk.iter().flatten().skip(2000).collect();
        assert_eq!(late.len(), deep.len());
        for (v, i) in late.iter().zip(&deep) {
            assert_eq!(v.rule, "dedup:near");
            let e = v.evidence.as_ref().unwrap();
            assert_eq!((&e["band"], &e["duplicate_of"]), (&json!(0), &json!(format!("d{}", i + 1))));
        }
    }

    fn variant(base: &str, how: u8) -> String {
        match how % 6 {
            0 => base.to_string(),
            1 => base.to_uppercase(),
            2 => base.replacen("the", "a", 1),
            3 => base.replace(' ', "  "),
            4 => format!("{base} and one more clause about the weather"),
            _ => base.split(' ').take(12).collect::<Vec<_>>().join(" "),
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// On corpora full of exact and near duplicates, cut into shards at random, under
        /// every mode, the disk-backed decisions equal the in-memory reference's, evidence
        /// and unverified count included.
        #[test]
        fn disk_backed_decisions_equal_the_in_memory_reference(
            picks in proptest::collection::vec((0usize..5, 0u8..6), 0..80),
            cuts in proptest::collection::vec(0usize..80, 0..6),
            mode in 0u8..4,
            verify in proptest::sample::select(vec![0.0, 0.5, 0.8, 1.0]),
        ) {
            let bases = [
                PARAGRAPH.to_string(),
                PARAGRAPH.replace("library", "museum").replace("spring", "autumn"),
                "Rain is expected over the northern hills tonight, with strong winds along the coast and snow above eight hundred metres".to_string(),
                String::new(),
                "a b".to_string(),
            ];
            let texts: Vec<String> = picks.iter().map(|&(b, how)| variant(&bases[b], how)).collect();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|&c| c <= refs.len()).collect();
            cuts.sort_unstable();
            let mut pieces: Vec<&[&str]> = Vec::new();
            let mut start = 0;
            for c in cuts.into_iter().chain([refs.len()]) {
                pieces.push(&refs[start..c]);
                start = c;
            }
            let c = DedupConfig { exact: mode != 1, near: mode != 2, verify_jaccard: verify, shingle: if mode == 3 { 2 } else { 5 }, ..config() };
            let shards = with_ids(&pieces);
            proptest::prop_assert_eq!(decide_on_disk(&shards, &c), decide_in_memory(&shards, &c));
        }
    }

    #[test]
    fn s_curve_matches_the_documented_values() {
        let p = |s: f64| 1.0 - (1.0 - s.powi(8)).powi(14);
        assert!((p(0.5) - 0.05).abs() < 0.01 && (p(0.7) - 0.56).abs() < 0.01);
        assert!((p(0.8) - 0.92).abs() < 0.01 && p(0.9) > 0.999);
        assert!(((1.0f64 / 14.0).powf(1.0 / 8.0) - 0.72).abs() < 0.01);
    }
}
