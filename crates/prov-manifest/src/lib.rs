//! The records of Provenant and their one canonical encoding.
//!
//! `prov-manifest` owns what a manifest says: the typed records (source, tree, dataset,
//! verdict, stage, checkpoint, run, lockfile, ledger, replay, attestation), canonical JSON (RFC 8785 style, with a written
//! rule for integers and floats), the recipe schema with line-precise errors, the lockfile
//! schema and seed derivation. It stores and reads records through `prov-store`, walks
//! the reference graph between them, reads a run as one typed value, and says how two
//! lockfiles or runs differ and what an object was made from. It encodes named tensors (a
//! checkpoint's weights) as safetensors, byte for byte fixed by the tensors.
//!
//! It does not run anything: stage kinds, planning and the cache are `prov-exec`'s.
//!
//! # Brief overview
//!
//! - [`to_canonical_bytes`], [`from_canonical_bytes`]: the encoding; readers refuse
//!   non-canonical bytes.
//! - [`Record`] and its kinds ([`SourceRecord`], [`DatasetRecord`], [`StageRecord`], …).
//! - [`Recipe`] (YAML) and [`Lockfile`] (canonical JSON), [`derive_seed`].
//! - [`put_record`], [`get_record`], [`closure`]: records in the store; [`get_typed`] for a
//!   record of an expected kind, [`LoadedRun`] for a run with all its stage records.
//! - [`LockfileDiff`], [`RunOutputsDiff`]: how two lockfiles or two recorded runs differ.
//! - [`LineageGraph`]: what each object of a store was made from, as Graphviz or Mermaid.
//! - [`write_committed_run`], [`import_committed_run`], [`committed_runs`]: a run's records
//!   as files named by their digests, the folder `prov run --commit` puts in git.
//!
//! # Example
//!
//! ```
//! use prov_manifest::{Record, RunRecord};
//! use prov_store::Digest;
//! let run = Record::Run(RunRecord::new("demo", Digest::of(b"lockfile"), vec![]));
//! let bytes = run.to_bytes()?;
//! assert!(bytes.starts_with(br#"{"kind":"run","lockfile":"blake3:"#));
//! assert_eq!(Record::from_bytes(&bytes)?, run);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod attestation;
mod canonical;
mod committed;
mod diff;
mod ledger;
mod lineage;
mod loaded_run;
mod lockfile;
mod name;
mod recipe;
mod record;
mod records;
mod replay;
mod stored;
mod tensors;

pub use attestation::{AttestationRecord, AttestationRole};
pub use canonical::{
    DecodeError, EncodeError, Finite, encode_value, from_canonical_bytes, parse_canonical, to_canonical_bytes,
};
pub use committed::{
    CommittedError, RUN_FILE, committed_runs, import_committed_run, read_run_file, write_committed_run,
};
pub use diff::{Change, LockfileDiff, NamedChanges, RunOutputsDiff, StageOutputChanges, diff_values};
pub use ledger::{
    DirectoryHead, LEDGER_SCHEMA_VERSION, Ledger, LedgerPartsRecord, LedgerRecord, LedgerShardRef, ShardLeaf,
    shard_leaves,
};
pub use lineage::{Edge, Graph as LineageGraph, Lineage, Node as LineageNode, Role as LineageRole};
pub use loaded_run::{BrokenDocsChain, LoadedRun, LoadedStage, RecordKind, get_typed};
pub use lockfile::{InputRef, LockedSource, LockedStage, Lockfile, RecipeRef, derive_seed, run_id};
pub use name::{MAX_NAME_LEN, Name, NameError, RelPath};
pub use recipe::{
    MAX_YAML_DEPTH, MAX_YAML_INDENT, RECIPE_SCHEMA, Recipe, RecipeError, RecipeSource, RecipeStage, check_yaml_nesting,
    closest, did_you_mean, from_yaml, locate, without_bom, yaml_error, yaml_to_json,
};
pub use record::Record;
pub use records::{
    CheckpointRecord, ChunkedIndex, Column, Content, CudaEnvelope, DatasetRecord, Decision, Determinism, Envelope,
    IndexChunk, OutputRef, OutputType, RunRecord, RunStage, SCHEMA_VERSION, ShardRef, SourceRecord, StageRecord,
    TreeEntry, TreeRecord, VerdictRecord,
};
pub use replay::{
    EnvelopeCheck, EnvelopeDifference, ReplayDifference, ReplayDivergence, ReplayRecord, ReplayStage, ReplayStatus,
};
pub use stored::{
    LedgerError, StoredError, attestations_of, closure, find_evidence, find_records, get_record, is_manifest,
    load_ledger, looks_like_record, put_record, replays_of,
};
pub use tensors::NamedTensors;
