//! Reading records by the kind the reader expects, and a run with all its stage records.
//!
//! Every reader of a run needs the same thing: the run record, then each stage record it
//! lists, each checked to be a stage record of the stage it is listed under. [`LoadedRun`]
//! is that, read once, with one error ([`StoredError::WrongKind`] or
//! [`StoredError::StageMislisted`]) naming the record that is not what its reference says.
//! [`get_typed`] is the same check for one record of any kind.

use prov_store::{Digest, Store};

use crate::attestation::AttestationRecord;
use crate::ledger::{LedgerPartsRecord, LedgerRecord};
use crate::lockfile::Lockfile;
use crate::record::Record;
use crate::records::{
    CheckpointRecord, DatasetRecord, OutputRef, RunRecord, SourceRecord, StageRecord, TreeRecord, VerdictRecord,
};
use crate::replay::ReplayRecord;
use crate::stored::{StoredError, get_record};

/// A record type that a digest can be expected to name.
pub trait RecordKind: Sized {
    /// The record's `kind`, as [`Record::kind_name`] says it.
    const KIND: &'static str;
    /// The record of this kind, or the record given back when it is of another kind.
    ///
    /// # Errors
    ///
    /// Returns the record itself when it is of another kind.
    fn from_record(record: Record) -> Result<Self, Record>;
}

macro_rules! record_kind {
    ($($ty:ty => $variant:ident, $kind:literal;)*) => {$(
        impl RecordKind for $ty {
            const KIND: &'static str = $kind;
            fn from_record(record: Record) -> Result<Self, Record> {
                match record {
                    Record::$variant(r) => Ok(r),
                    other => Err(other),
                }
            }
        }
    )*};
}

record_kind! {
    SourceRecord => Source, "source";
    TreeRecord => Tree, "tree";
    DatasetRecord => Dataset, "dataset";
    VerdictRecord => Verdict, "verdict";
    StageRecord => Stage, "stage";
    CheckpointRecord => Checkpoint, "checkpoint";
    RunRecord => Run, "run";
    Lockfile => Lockfile, "lockfile";
    LedgerRecord => Ledger, "ledger";
    LedgerPartsRecord => LedgerParts, "ledger_parts";
    ReplayRecord => Replay, "replay";
    AttestationRecord => Attestation, "attestation";
}

/// Reads and verifies a stored record that must be of kind `T`.
///
/// # Errors
///
/// As [`get_record`], and [`StoredError::WrongKind`] when the record is of another kind.
pub fn get_typed<T: RecordKind>(store: &Store, digest: &Digest) -> Result<T, StoredError> {
    T::from_record(get_record(store, digest)?).map_err(|other| StoredError::WrongKind {
        digest: *digest,
        expected: T::KIND,
        found: other.kind_name(),
    })
}

/// One stage of a [`LoadedRun`]: its record and the record's digest.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedStage {
    /// The stage record's digest (the stage manifest).
    pub manifest: Digest,
    /// The stage record.
    pub record: StageRecord,
}

impl LoadedStage {
    /// The stage's name.
    pub fn name(&self) -> &str {
        self.record.name.as_str()
    }

    /// The stage's kind.
    pub fn kind(&self) -> &str {
        &self.record.stage_kind
    }
}

/// A `docs` input that no earlier stage of the run wrote: see [`LoadedRun::docs_chain`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the `docs` input `{digest}` of stage `{stage}` was written by no earlier stage of the run")]
pub struct BrokenDocsChain {
    /// The stage whose input it is.
    pub stage: String,
    /// The input's digest.
    pub digest: Digest,
}

/// A run read from the store: its run record and every stage record it lists, in plan order.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedRun {
    /// The run record's digest (the run manifest).
    pub manifest: Digest,
    /// The run record.
    pub record: RunRecord,
    stages: Vec<LoadedStage>,
}

impl LoadedRun {
    /// Reads the run record `manifest` and its stage records.
    ///
    /// # Errors
    ///
    /// When a record is missing or damaged, is not of the kind its reference says, or a stage
    /// record names another stage than the one it is listed under.
    pub fn load(store: &Store, manifest: Digest) -> Result<Self, StoredError> {
        let record = get_typed::<RunRecord>(store, &manifest)?;
        Self::from_record(store, manifest, record)
    }

    /// Reads the stage records of a run record already read.
    ///
    /// # Errors
    ///
    /// As [`Self::load`].
    pub fn from_record(store: &Store, manifest: Digest, record: RunRecord) -> Result<Self, StoredError> {
        let mut stages = Vec::with_capacity(record.stages.len());
        for listed in &record.stages {
            let stage = get_typed::<StageRecord>(store, &listed.manifest)?;
            if stage.name != listed.name {
                return Err(StoredError::StageMislisted {
                    run: manifest,
                    listed: listed.name.to_string(),
                    manifest: listed.manifest,
                    named: stage.name.to_string(),
                });
            }
            stages.push(LoadedStage { manifest: listed.manifest, record: stage });
        }
        Ok(Self { manifest, record, stages })
    }

    /// The recipe's name.
    pub fn recipe(&self) -> &str {
        &self.record.recipe
    }

    /// Every stage, in plan order.
    pub fn stages(&self) -> &[LoadedStage] {
        &self.stages
    }

    /// The stage called `name`.
    pub fn stage(&self, name: &str) -> Option<&LoadedStage> {
        self.stages.iter().find(|s| s.name() == name)
    }

    /// The stages of kind `kind`, in plan order.
    pub fn stages_of_kind<'a, 'k>(&'a self, kind: &'k str) -> impl Iterator<Item = &'a LoadedStage> + use<'a, 'k> {
        self.stages.iter().filter(move |s| s.kind() == kind)
    }

    /// The output `output` of stage `stage`.
    pub fn output(&self, stage: &str, output: &str) -> Option<&OutputRef> {
        self.stage(stage)?.record.outputs.get(output)
    }

    /// The source at the start of stage `name`'s `docs` chain ([`LoadedRun::docs_chain`]),
    /// whose source record is read. `None` when the chain breaks, does not start at a
    /// `source` stage, or its record is not a source.
    pub fn upstream_source(&self, store: &Store, name: &str) -> Option<(Digest, SourceRecord)> {
        let chain = self.docs_chain(self.position(name)?).ok()?;
        let s = &self.stages[*chain.first()?].record;
        if s.stage_kind != "source" {
            return None;
        }
        let digest = s.outputs.get("source")?.digest;
        get_typed::<SourceRecord>(store, &digest).ok().map(|src| (digest, src))
    }

    /// The `docs` chain of the stage at `position` (in plan order): the stages whose documents
    /// it reads, upstream first, ending with it. Each stage's `docs` input was written by the
    /// stage before it in the chain: the latest earlier stage in plan order with that output
    /// (when two stages write the same bytes, a filter that changed nothing, the chain goes
    /// through the later). It starts at a stage without a `docs` input (a `source` stage,
    /// say). Proofs follow this chain, and the audit asks whether the training data's chain
    /// passes a filter.
    ///
    /// # Errors
    ///
    /// [`BrokenDocsChain`] when a `docs` input was written by no earlier stage of the run.
    pub fn docs_chain(&self, position: usize) -> Result<Vec<usize>, BrokenDocsChain> {
        let mut chain = vec![position];
        let mut here = position;
        while let Some(docs) = self.stages.get(here).and_then(|s| s.record.inputs.get("docs")) {
            here = self.stages[..here]
                .iter()
                .rposition(|p| p.record.outputs.values().any(|o| o.digest == *docs))
                .ok_or_else(|| BrokenDocsChain { stage: self.stages[here].name().to_owned(), digest: *docs })?;
            chain.push(here);
        }
        chain.reverse();
        Ok(chain)
    }

    /// The position of stage `name` in plan order.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.stages.iter().position(|s| s.name() == name)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::BTreeMap;

    use prov_store::Store;
    use serde_json::json;

    use super::*;
    use crate::records::{Determinism, OutputType, RunStage, SCHEMA_VERSION};
    use crate::stored::put_record;

    fn stage(name: &str, output: Digest) -> StageRecord {
        StageRecord {
            schema: SCHEMA_VERSION,
            name: name.parse().unwrap(),
            stage_kind: "shard".into(),
            version: 1,
            determinism: Determinism::Portable,
            key: Digest::of(name.as_bytes()),
            config: json!({}),
            inputs: BTreeMap::new(),
            seeds: BTreeMap::new(),
            envelope: crate::records::tests::envelope(),
            outputs: BTreeMap::from([(
                "docs".to_owned(),
                OutputRef { output_type: OutputType::Dataset, digest: output },
            )]),
            stats: BTreeMap::new(),
        }
    }

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join("s")).unwrap();
        (dir, store)
    }

    #[test]
    fn a_run_loads_with_its_stages_in_plan_order() {
        let (_dir, store) = store();
        let (out_a, out_b) = (Digest::of(b"a"), Digest::of(b"b"));
        let a = put_record(&store, &Record::Stage(stage("a", out_a))).unwrap();
        let b = put_record(&store, &Record::Stage(stage("b", out_b))).unwrap();
        let run = RunRecord::new(
            "r",
            Digest::of(b"lock"),
            vec![
                RunStage { name: "a".parse().unwrap(), manifest: a },
                RunStage { name: "b".parse().unwrap(), manifest: b },
            ],
        );
        let m = put_record(&store, &Record::Run(run)).unwrap();
        let loaded = LoadedRun::load(&store, m).unwrap();
        assert_eq!(loaded.stages().iter().map(LoadedStage::name).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(loaded.output("b", "docs").map(|o| o.digest), Some(out_b));
        assert_eq!(loaded.position("b"), Some(1));
        assert_eq!(loaded.stages_of_kind("shard").count(), 2);
    }

    /// The chain follows `docs` inputs to their latest earlier writer (the filter that
    /// changed nothing, `c`, rather than `a`, which wrote the same bytes), skips stages off
    /// the chain (`b`), and a `docs` input nobody wrote is named.
    #[test]
    fn a_docs_chain_follows_the_latest_writer_of_each_docs_input() {
        let (_dir, store) = store();
        let with_docs = |name: &str, output: &[u8], docs: Option<&[u8]>| {
            let mut s = stage(name, Digest::of(output));
            if let Some(d) = docs {
                s.inputs.insert("docs".into(), Digest::of(d));
            }
            let manifest = put_record(&store, &Record::Stage(s)).unwrap();
            RunStage { name: name.parse().unwrap(), manifest }
        };
        let run = RunRecord::new(
            "r",
            Digest::of(b"lock"),
            vec![
                with_docs("a", b"x", None),
                with_docs("b", b"y", Some(b"x")),
                with_docs("c", b"x", Some(b"x")),
                with_docs("d", b"z", Some(b"x")),
                with_docs("e", b"w", Some(b"nobody")),
            ],
        );
        let loaded = LoadedRun::load(&store, put_record(&store, &Record::Run(run)).unwrap()).unwrap();
        assert_eq!(loaded.docs_chain(3).unwrap(), [0, 2, 3]);
        assert_eq!(loaded.docs_chain(1).unwrap(), [0, 1]);
        assert_eq!(loaded.docs_chain(0).unwrap(), [0]);
        let e = loaded.docs_chain(4).unwrap_err();
        assert_eq!((e.stage.as_str(), e.digest), ("e", Digest::of(b"nobody")));
    }

    #[test]
    fn a_reference_to_the_wrong_kind_or_stage_is_named() {
        let (_dir, store) = store();
        let a = put_record(&store, &Record::Stage(stage("a", Digest::of(b"a")))).unwrap();
        // The run record's digest where a stage record is expected: well-formed, wrong kind.
        let inner = put_record(&store, &Record::Run(RunRecord::new("r", Digest::of(b"x"), vec![]))).unwrap();
        let run =
            RunRecord::new("r", Digest::of(b"lock"), vec![RunStage { name: "a".parse().unwrap(), manifest: inner }]);
        let m = put_record(&store, &Record::Run(run)).unwrap();
        let e = LoadedRun::load(&store, m).unwrap_err();
        assert!(matches!(e, StoredError::WrongKind { expected: "stage", found: "run", .. }), "{e}");
        assert!(e.is_integrity_failure());
        assert!(e.to_string().contains(&inner.to_string()), "{e}");

        // A stage record listed under another stage's name.
        let run = RunRecord::new("r", Digest::of(b"lock"), vec![RunStage { name: "b".parse().unwrap(), manifest: a }]);
        let m = put_record(&store, &Record::Run(run)).unwrap();
        let e = LoadedRun::load(&store, m).unwrap_err();
        assert!(
            matches!(&e, StoredError::StageMislisted { listed, named, .. } if listed == "b" && named == "a"),
            "{e}"
        );
        assert!(e.is_integrity_failure());

        // A stage record where a run is expected.
        let e = LoadedRun::load(&store, a).unwrap_err();
        assert!(matches!(e, StoredError::WrongKind { expected: "run", found: "stage", .. }), "{e}");
        assert!(get_typed::<DatasetRecord>(&store, &a).is_err());
        assert_eq!(get_typed::<StageRecord>(&store, &a).unwrap().name.as_str(), "a");
    }
}
