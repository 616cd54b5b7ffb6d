//! The records of Provenant and their one canonical encoding.
//!
//! `prov-manifest` owns what a manifest says: the typed records (source, tree, dataset,
//! verdict, stage, checkpoint, run, lockfile, replay), canonical JSON (RFC 8785 style, with a written
//! rule for integers and floats), the recipe schema with line-precise errors, the lockfile
//! schema and seed derivation. It stores and reads records through `prov-store`, and walks
//! the reference graph between them.
//!
//! It does not run anything: stage kinds, planning and the cache are `prov-exec`'s.
//!
//! # Brief overview
//!
//! - [`to_canonical_bytes`], [`from_canonical_bytes`]: the encoding; readers refuse
//!   non-canonical bytes.
//! - [`Record`] and its kinds ([`SourceRecord`], [`DatasetRecord`], [`StageRecord`], …).
//! - [`Recipe`] (YAML) and [`Lockfile`] (canonical JSON), [`derive_seed`].
//! - [`put_record`], [`get_record`], [`closure`]: records in the store.
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

mod canonical;
mod lockfile;
mod name;
mod recipe;
mod records;
mod replay;
mod stored;

pub use canonical::{
    DecodeError, EncodeError, Finite, encode_value, from_canonical_bytes, parse_canonical, to_canonical_bytes,
};
pub use lockfile::{InputRef, LockedSource, LockedStage, Lockfile, RecipeRef, derive_seed, run_id};
pub use name::{MAX_NAME_LEN, Name, NameError, RelPath};
pub use recipe::{
    MAX_YAML_DEPTH, MAX_YAML_INDENT, RECIPE_SCHEMA, Recipe, RecipeError, RecipeSource, RecipeStage, check_yaml_nesting,
    closest, did_you_mean, from_yaml, locate, yaml_error, yaml_to_json,
};
pub use records::{
    CheckpointRecord, Column, Content, DatasetRecord, Decision, Determinism, Envelope, LedgerRecord, OutputRef,
    OutputType, Record, RunRecord, RunStage, SCHEMA_VERSION, ShardRef, SourceRecord, StageRecord, TreeEntry,
    TreeRecord, VerdictRecord,
};
pub use replay::{
    EnvelopeCheck, EnvelopeDifference, ReplayDifference, ReplayDivergence, ReplayRecord, ReplayStage, ReplayStatus,
};
pub use stored::{
    StoredError, closure, find_records, get_record, is_manifest, looks_like_record, put_record, replays_of,
};
