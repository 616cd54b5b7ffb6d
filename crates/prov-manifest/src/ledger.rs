//! Ledger records: the small [`LedgerRecord`] that a stage's `ledger` output names and a
//! document proof embeds, the [`LedgerPartsRecord`] that lists what grows with the ledger
//! (its shards and its id directory's chunks), and [`Ledger`], the two together and checked
//! against each other ([`crate::load_ledger`] reads them from the store).
//!
//! Why two records: a proof must carry the record its stage names, so that record must not
//! grow with the corpus. It holds counts and Merkle roots only. The shards are the leaves of
//! a Merkle tree of their own (leaf `i` is the canonical JSON of
//! `{"bytes","digest","root","rows","shard":i}`), whose root the ledger record holds; a
//! proof gives the leaf of each shard it uses with its audit path, so it grows with the
//! logarithm of the shard count, not with the count.

use std::collections::BTreeMap;

use prov_store::{Digest, merkle_root};
use serde::{Deserialize, Serialize};

use crate::canonical::to_canonical_bytes;
use crate::records::{ChunkedIndex, IndexChunk, SCHEMA_VERSION, ShardRef};

/// The schema version of ledger records. Version 1 listed every shard and directory chunk
/// in the record itself, so a proof, which embeds it, grew with the shard count.
pub const LEDGER_SCHEMA_VERSION: u32 = 2;

/// The per-document decisions of a filter stage: one row per input document (id, decision,
/// rule, evidence, language, words), in Parquet shards parallel to the input's shards, each
/// sorted by document id. Each row's leaf is the BLAKE3 of its canonical JSON; each shard has
/// a Merkle root over its leaves in id order. The id directory (a [`ChunkedIndex`]) says
/// which shards hold each id, so that one document's fate is proven from the shards that hold
/// it, however many there are.
///
/// This record holds the ledger's counts and roots; the lists are in its
/// [`LedgerPartsRecord`] (`parts`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerRecord {
    /// Always [`LEDGER_SCHEMA_VERSION`].
    pub schema: u32,
    /// The number of ledger shards (parallel to the input dataset's shards).
    pub shards: u64,
    /// [`merkle_root`] over the shards' leaves ([`LedgerShardRef::leaf`]) in shard order.
    pub merkle_root: Digest,
    /// Rows in all shards.
    pub rows: u64,
    /// Rows per rule (reason code).
    pub rules: BTreeMap<String, u64>,
    /// Every row's `(id, shard)`, sorted: which shards hold an id, and that the others do not.
    pub directory: DirectoryHead,
    /// The [`LedgerPartsRecord`] listing the shards and the directory's chunks.
    pub parts: Digest,
}

/// What a ledger record says of its id directory: enough to check a range of it (size and
/// root) without its chunk list, which is in the [`LedgerPartsRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirectoryHead {
    /// Entries: one per ledger row.
    pub entries: u64,
    /// Entries per chunk, a power of two.
    pub chunk_entries: u64,
    /// Merkle root over all entries.
    pub root: Digest,
}

/// The lists of a ledger: its shards, in order, and its id directory's chunks, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerPartsRecord {
    /// Always [`SCHEMA_VERSION`].
    pub schema: u32,
    /// The ledger shards.
    pub shards: Vec<LedgerShardRef>,
    /// The id directory's chunks.
    pub chunks: Vec<IndexChunk>,
}

/// One ledger shard: the Parquet file and the Merkle root of its rows' leaves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerShardRef {
    /// BLAKE3 of the shard file.
    pub digest: Digest,
    /// Rows in the shard.
    pub rows: u64,
    /// Size of the shard file in bytes.
    pub bytes: u64,
    /// [`merkle_root`] over the rows' leaves in id order.
    pub root: Digest,
}

/// Shard `shard` of a ledger as a leaf of the tree whose root is
/// [`LedgerRecord::merkle_root`]: its canonical JSON text is the leaf, and a proof carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardLeaf {
    /// Size of the shard file in bytes.
    pub bytes: u64,
    /// BLAKE3 of the shard file.
    pub digest: Digest,
    /// [`merkle_root`] over the shard's rows' leaves in id order.
    pub root: Digest,
    /// Rows in the shard.
    pub rows: u64,
    /// The shard's index in the ledger.
    pub shard: u64,
}

impl LedgerShardRef {
    /// The shard's file as a [`ShardRef`].
    pub fn shard_ref(&self) -> ShardRef {
        ShardRef { digest: self.digest, rows: self.rows, bytes: self.bytes }
    }

    /// The shard's leaf text when it is shard `index`: the canonical JSON of
    /// `{"bytes","digest","root","rows","shard"}`. Its BLAKE3 is the leaf digest.
    pub fn leaf(&self, index: u64) -> String {
        let leaf = ShardLeaf { bytes: self.bytes, digest: self.digest, root: self.root, rows: self.rows, shard: index };
        // Integers and digests only: encoding cannot fail.
        String::from_utf8(to_canonical_bytes(&leaf).unwrap_or_default()).unwrap_or_default()
    }
}

/// The leaf digests of `shards` in order: what [`LedgerRecord::merkle_root`] is the root of.
pub fn shard_leaves(shards: &[LedgerShardRef]) -> Vec<Digest> {
    shards.iter().zip(0u64..).map(|(s, i)| Digest::of(s.leaf(i).as_bytes())).collect()
}

impl LedgerRecord {
    /// Checks what the record says of itself: the rules count the rows, and the directory
    /// has one entry per row in chunks of a power of two.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let counted: u64 = self.rules.values().sum();
        if counted != self.rows {
            return Err(format!("`rows` is {} but the rules count {counted}", self.rows));
        }
        if self.directory.entries != self.rows {
            return Err(format!(
                "the directory holds {} entries, but the ledger has {} rows",
                self.directory.entries, self.rows
            ));
        }
        if !self.directory.chunk_entries.is_power_of_two() {
            return Err(format!("directory: `chunk_entries` is {}, not a power of two", self.directory.chunk_entries));
        }
        if self.shards == 0 && self.merkle_root != merkle_root(&[]) {
            return Err("a ledger without shards has the root of the empty list".into());
        }
        Ok(())
    }
}

/// A ledger read from the store: its record and its parts, checked against each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ledger {
    /// The ledger record.
    pub record: LedgerRecord,
    /// Its shards, in order.
    pub shards: Vec<LedgerShardRef>,
    /// Its id directory, with the chunk list.
    pub directory: ChunkedIndex,
}

impl Ledger {
    /// Builds a ledger from its parts, computing the record's counts and roots; the caller
    /// stores `parts` and puts its digest in the record's `parts`.
    pub fn assemble(
        shards: Vec<LedgerShardRef>,
        directory: ChunkedIndex,
        rules: BTreeMap<String, u64>,
        parts: Digest,
    ) -> Self {
        let record = LedgerRecord {
            schema: LEDGER_SCHEMA_VERSION,
            shards: shards.len() as u64,
            merkle_root: merkle_root(&shard_leaves(&shards)),
            rows: shards.iter().map(|s| s.rows).sum(),
            rules,
            directory: DirectoryHead {
                entries: directory.entries,
                chunk_entries: directory.chunk_entries,
                root: directory.root,
            },
            parts,
        };
        Self { record, shards, directory }
    }

    /// The parts record of `shards` and `directory`.
    pub fn parts_record(shards: &[LedgerShardRef], directory: &ChunkedIndex) -> LedgerPartsRecord {
        LedgerPartsRecord { schema: SCHEMA_VERSION, shards: shards.to_vec(), chunks: directory.chunks.clone() }
    }

    /// Puts a ledger record and its parts record together, checking that the parts give the
    /// record's shard count, rows, Merkle root and directory (chunk sizes, entries, root).
    ///
    /// # Errors
    ///
    /// What does not match, as a sentence.
    pub fn check(record: LedgerRecord, parts: LedgerPartsRecord) -> Result<Self, String> {
        if parts.shards.len() as u64 != record.shards {
            return Err(format!("the record says {} shards, its parts list {}", record.shards, parts.shards.len()));
        }
        let rows: u64 = parts.shards.iter().map(|s| s.rows).sum();
        if rows != record.rows {
            return Err(format!("`rows` is {} but the shards hold {rows}", record.rows));
        }
        let root = merkle_root(&shard_leaves(&parts.shards));
        if root != record.merkle_root {
            return Err(format!("`merkle_root` is `{}` but the shards give `{root}`", record.merkle_root));
        }
        let directory = ChunkedIndex {
            entries: record.directory.entries,
            chunk_entries: record.directory.chunk_entries,
            chunks: parts.chunks,
            root: record.directory.root,
        };
        directory.validate(Some(record.rows)).map_err(|e| format!("directory: {e}"))?;
        Ok(Self { record, shards: parts.shards, directory })
    }

    /// The shards' files, in order.
    pub fn shard_refs(&self) -> Vec<ShardRef> {
        self.shards.iter().map(LedgerShardRef::shard_ref).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(n: u8, rows: u64) -> LedgerShardRef {
        LedgerShardRef { digest: Digest::of(&[n]), rows, bytes: 100 + u64::from(n), root: Digest::of(&[n, n]) }
    }

    fn rules(rows: u64) -> BTreeMap<String, u64> {
        BTreeMap::from([("kept".to_owned(), rows)])
    }

    fn directory(entries: u64) -> ChunkedIndex {
        let chunk = IndexChunk { digest: Digest::of(b"chunk"), entries, first: "a".into(), root: Digest::of(b"r") };
        ChunkedIndex { entries, chunk_entries: 4096, root: Digest::of(b"r"), chunks: vec![chunk] }
    }

    /// The leaf text is the canonical JSON an independent verifier parses (book:
    /// formats/ledgers.md); written out here by hand, not by the encoder under test.
    #[test]
    fn a_shard_leaf_is_canonical_json_with_its_index() {
        let s = shard(1, 7);
        assert_eq!(
            s.leaf(3),
            format!(r#"{{"bytes":101,"digest":"{}","root":"{}","rows":7,"shard":3}}"#, s.digest, s.root)
        );
    }

    #[test]
    fn parts_that_disagree_with_the_record_are_refused() {
        let shards = vec![shard(1, 2), shard(2, 3)];
        let honest = Ledger::assemble(shards.clone(), directory(5), rules(5), Digest::of(b"parts"));
        let parts = Ledger::parts_record(&shards, &honest.directory);
        assert!(Ledger::check(honest.record.clone(), parts.clone()).is_ok());

        // A shard swapped for another with the same rows: the root no longer matches.
        let mut swapped = parts.clone();
        swapped.shards[1] = LedgerShardRef { digest: Digest::of(b"other"), ..swapped.shards[1].clone() };
        let e = Ledger::check(honest.record.clone(), swapped).unwrap_err();
        assert!(e.contains("merkle_root"), "{e}");

        // The two shards in the other order: same rows, same set, another root.
        let mut reordered = parts.clone();
        reordered.shards.reverse();
        assert!(Ledger::check(honest.record.clone(), reordered).is_err());

        // A shard dropped, and the record's count and rows edited to match: the root catches it.
        let mut dropped = parts.clone();
        dropped.shards.pop();
        let mut record = honest.record.clone();
        record.shards = 1;
        record.rows = 2;
        assert!(Ledger::check(record, dropped).unwrap_err().contains("merkle_root"));

        // A directory chunk list that does not hold the rows.
        let mut short = parts;
        short.chunks[0].entries = 4;
        assert!(Ledger::check(honest.record, short).unwrap_err().contains("directory"));
    }
}
