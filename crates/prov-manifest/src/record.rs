//! [`Record`]: any record, tagged by its `kind`, with its one canonical encoding, its
//! validation and the digests it refers to.

use prov_store::{Digest, merkle_root};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::attestation::AttestationRecord;
use crate::canonical::{DecodeError, EncodeError, parse_canonical, to_canonical_bytes};
use crate::ledger::{LEDGER_SCHEMA_VERSION, LedgerPartsRecord, LedgerRecord};
use crate::lockfile::Lockfile;
use crate::records::{
    CheckpointRecord, DatasetRecord, RunRecord, SCHEMA_VERSION, SourceRecord, StageRecord, TreeRecord, VerdictRecord,
};
use crate::replay::ReplayRecord;

/// Any record, tagged by its `kind`.
// Records are decoded one at a time; boxing the larger kinds would only add indirection.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// An input pinned from outside.
    Source(SourceRecord),
    /// A directory: its files by relative path.
    Tree(TreeRecord),
    /// A list of Parquet shards.
    Dataset(DatasetRecord),
    /// A license decision.
    Verdict(VerdictRecord),
    /// One stage boundary.
    Stage(StageRecord),
    /// Model weights and training state.
    Checkpoint(CheckpointRecord),
    /// One complete execution of a lockfile.
    Run(RunRecord),
    /// A lockfile.
    Lockfile(Lockfile),
    /// Per-document decisions of a filter stage: counts and roots.
    Ledger(LedgerRecord),
    /// A ledger's shards and directory chunks.
    LedgerParts(LedgerPartsRecord),
    /// The outcome of one replay of a run.
    Replay(ReplayRecord),
    /// A signed statement about a run.
    Attestation(AttestationRecord),
}

impl Record {
    /// Returns the record's kind as written in its `kind` field.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Self::Source(_) => "source",
            Self::Tree(_) => "tree",
            Self::Dataset(_) => "dataset",
            Self::Verdict(_) => "verdict",
            Self::Stage(_) => "stage",
            Self::Checkpoint(_) => "checkpoint",
            Self::Run(_) => "run",
            Self::Lockfile(_) => "lockfile",
            Self::Ledger(_) => "ledger",
            Self::LedgerParts(_) => "ledger_parts",
            Self::Replay(_) => "replay",
            Self::Attestation(_) => "attestation",
        }
    }

    /// The schema version this build writes and reads for records of kind `kind`.
    pub fn schema_of(kind: &str) -> u32 {
        if kind == "ledger" { LEDGER_SCHEMA_VERSION } else { SCHEMA_VERSION }
    }

    /// Encodes the record canonically.
    pub fn to_bytes(&self) -> Result<Vec<u8>, EncodeError> {
        to_canonical_bytes(self)
    }

    /// Decodes a canonical record, checking its kind and schema version before its fields so
    /// that a record from a newer version says so.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        let value = parse_canonical(bytes)?;
        let obj = value.as_object().ok_or_else(|| DecodeError::Shape("a record is a JSON object".into()))?;
        let kind = obj
            .get("kind")
            .and_then(Value::as_str)
            .ok_or_else(|| DecodeError::Shape("missing string field `kind`".into()))?
            .to_owned();
        let supported = Self::schema_of(&kind);
        match obj.get("schema").and_then(Value::as_u64) {
            Some(v) if v == u64::from(supported) => {}
            Some(v) => {
                return Err(DecodeError::Shape(format!(
                    "unsupported {kind} schema version (v{v}, but only v{supported} is supported)"
                )));
            }
            None => {
                return Err(DecodeError::Shape(format!("{kind} record has no integer field `schema`")));
            }
        }
        let record: Self =
            serde_json::from_value(value).map_err(|e| DecodeError::Shape(format!("{kind} record: {e}")))?;
        record.validate().map_err(|e| DecodeError::Shape(format!("{kind} record: {e}")))?;
        // One record, one encoding: an explicit `null` for an optional field, say, is valid
        // canonical JSON but not what a writer produces, and would give the record a second name.
        let again = record.to_bytes().map_err(|e| DecodeError::Shape(e.to_string()))?;
        if again != bytes {
            return Err(DecodeError::Shape(format!(
                "{kind} record is not in the form writers produce (an explicit null for an optional field?)"
            )));
        }
        Ok(record)
    }

    /// Checks invariants that the types alone do not express.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Self::Tree(t) => t.validate(),
            Self::Dataset(d) => d.validate(),
            Self::Run(r) => {
                let mut names = std::collections::BTreeSet::new();
                if let Some(twice) = r.stages.iter().find(|s| !names.insert(&s.name)) {
                    return Err(format!("stage `{}` is listed twice", twice.name));
                }
                let digests: Vec<Digest> = r.stages.iter().map(|s| s.manifest).collect();
                let root = merkle_root(&digests);
                if root == r.root {
                    Ok(())
                } else {
                    Err(format!("`root` is `{}` but the stages give `{root}`", r.root))
                }
            }
            Self::Lockfile(l) => l.validate(),
            Self::Ledger(l) => l.validate(),
            Self::Replay(r) => r.validate(),
            Self::Attestation(a) => a.validate(),
            _ => Ok(()),
        }
    }

    /// Returns every digest the record refers to (objects and other records), sorted and
    /// without duplicates: the edges of the store's reference graph.
    pub fn references(&self) -> Vec<Digest> {
        let mut out: Vec<Digest> = match self {
            Self::Source(s) => vec![s.content.digest()],
            Self::Tree(t) => t.entries.iter().map(|e| e.digest).collect(),
            Self::Dataset(d) => d.shards.iter().map(|s| s.digest).collect(),
            Self::Verdict(v) => vec![v.subject],
            Self::Stage(s) => s.inputs.values().chain(s.outputs.values().map(|o| &o.digest)).copied().collect(),
            // Tensor digests name bytes inside the weights file, not store objects.
            Self::Checkpoint(c) => {
                let mut v = vec![c.weights, c.optimizer, c.rng, c.config];
                v.extend(c.log);
                v.extend(c.tokenizer);
                v.extend(c.palette);
                v
            }
            Self::Run(r) => {
                let mut v: Vec<Digest> = r.stages.iter().map(|s| s.manifest).collect();
                v.push(r.lockfile);
                v
            }
            // A lockfile pins bytes outside the store; until the source stage imports them they
            // are not in it, so the pins are not store references (the run record reaches the
            // imported copies through the source stages).
            Self::Lockfile(_) => Vec::new(),
            Self::Ledger(l) => vec![l.parts],
            Self::LedgerParts(p) => {
                p.shards.iter().map(|s| s.digest).chain(p.chunks.iter().map(|c| c.digest)).collect()
            }
            Self::Replay(r) => r.references(),
            Self::Attestation(a) => vec![a.envelope, a.run],
        };
        out.sort();
        out.dedup();
        out
    }
}
