//! What a run or replay attestation states, built from the store's records, and the check
//! that a signed statement is about a given run.
//!
//! A run attestation says "this lockfile was executed and these outputs came out"; a replay
//! attestation says "I re-executed this lockfile and got these outputs". Both are in-toto
//! Statements with a SLSA Provenance v1 predicate:
//!
//! - `subject`: every output of every stage, in plan order, named `STAGE/OUTPUT`, with the
//!   output object's BLAKE3 (its name in the store) and SHA-256 (for consumers that know only
//!   SHA-256). The object is the output's record (a dataset, checkpoint or ledger record) or
//!   file; records name everything below them by BLAKE3.
//! - `buildDefinition`: `buildType` [`RUN_BUILD_TYPE`] or [`REPLAY_BUILD_TYPE`];
//!   `externalParameters` the recipe and the lockfile's digest (and for a replay, the
//!   recording it compared with); `resolvedDependencies` the lockfile and every source it pins.
//! - `runDetails`: the builder [`BUILDER_ID`] with the Provenant (and libtorch) versions;
//!   `metadata.invocationId` the run or replay record's digest; `byproducts` that record and
//!   each distinct envelope with the stages that ran in it.
//!
//! No clock: the same run signed with the same key gives the same attestation, byte for byte.

use std::collections::BTreeMap;

use prov_manifest::{
    AttestationRole, Envelope, LoadedRun, Lockfile, ReplayRecord, ReplayStatus, StageRecord, StoredError, get_typed,
};
use prov_store::{Digest, Store};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::statement::{
    BuildDefinition, BuildMetadata, Builder, Provenance, ResourceDescriptor, RunDetails, SLSA_PROVENANCE_V1,
    STATEMENT_TYPE, Statement,
};

/// `buildType` of a run attestation.
pub const RUN_BUILD_TYPE: &str = "https://provenant.dev/attestation/run/v1";
/// `buildType` of a replay attestation.
pub const REPLAY_BUILD_TYPE: &str = "https://provenant.dev/attestation/replay/v1";
/// `builder.id` of Provenant's executor.
pub const BUILDER_ID: &str = "https://provenant.dev/prov";
/// Media type of Provenant's records (canonical JSON).
pub const RECORD_MEDIA_TYPE: &str = "application/vnd.provenant.record+json";

/// Why a statement cannot be made or does not hold.
#[derive(Debug, thiserror::Error)]
pub enum ProvenanceError {
    /// A record cannot be read.
    #[error(transparent)]
    Stored(#[from] StoredError),
    /// The replay is not one an attestation can be made of.
    #[error("{0}")]
    NotAttestable(String),
    /// The statement is not one Provenant makes (another predicate or build type).
    #[error("{0}")]
    Unrecognised(String),
    /// The statement is a SLSA Provenance that does not read, or one of Provenant's build
    /// types without the parameters it defines.
    #[error("{0}")]
    Malformed(String),
    /// The statement is about other outputs than the run's.
    #[error("the attestation is not about this run: {0}")]
    OtherRun(String),
}

impl ProvenanceError {
    /// True when stored bytes are damaged or the statement contradicts the run.
    pub fn is_integrity_failure(&self) -> bool {
        match self {
            Self::Stored(e) => e.is_integrity_failure(),
            Self::OtherRun(_) => true,
            Self::NotAttestable(_) | Self::Unrecognised(_) | Self::Malformed(_) => false,
        }
    }
}

/// Reads an object verified and gives its digest set: BLAKE3 (its name) and SHA-256.
fn digest_set(store: &Store, digest: &Digest) -> Result<BTreeMap<String, String>, StoredError> {
    let mut reader = store.open_verified(digest)?;
    let mut sha = Sha256::new();
    // The reader fails at the end when the bytes do not match their BLAKE3.
    std::io::copy(&mut reader, &mut sha)
        .map_err(|e| StoredError::Store(prov_store::StoreError::from_verified_read(e)))?;
    Ok(BTreeMap::from([("blake3".to_owned(), digest.to_hex()), ("sha256".to_owned(), hex::encode(sha.finalize()))]))
}

/// The subjects of a statement over these stage records: every output, `STAGE/OUTPUT`.
fn subjects<'a>(
    store: &Store,
    stages: impl Iterator<Item = &'a StageRecord>,
) -> Result<Vec<ResourceDescriptor>, StoredError> {
    let mut out = Vec::new();
    for stage in stages {
        for (name, output) in &stage.outputs {
            out.push(ResourceDescriptor {
                name: format!("{}/{name}", stage.name),
                digest: digest_set(store, &output.digest)?,
                ..ResourceDescriptor::default()
            });
        }
    }
    Ok(out)
}

fn blake3_only(digest: &Digest) -> BTreeMap<String, String> {
    BTreeMap::from([("blake3".to_owned(), digest.to_hex())])
}

/// The lockfile and the sources it pins.
fn resolved_dependencies(
    store: &Store,
    lockfile_digest: &Digest,
    lockfile: &Lockfile,
) -> Result<Vec<ResourceDescriptor>, StoredError> {
    let mut deps = vec![ResourceDescriptor {
        name: "lockfile".into(),
        digest: digest_set(store, lockfile_digest)?,
        media_type: RECORD_MEDIA_TYPE.into(),
        ..ResourceDescriptor::default()
    }];
    for source in &lockfile.sources {
        let mut annotations = Map::new();
        annotations.insert("path".into(), json!(source.path.as_str()));
        if let Some(l) = &source.license {
            annotations.insert("license".into(), json!(l));
        }
        if let Some(r) = &source.retrieved {
            annotations.insert("retrieved".into(), json!(r));
        }
        deps.push(ResourceDescriptor {
            name: format!("source:{}", source.name),
            digest: blake3_only(&source.content.digest()),
            annotations,
            ..ResourceDescriptor::default()
        });
    }
    Ok(deps)
}

/// Each distinct envelope, with the stages that ran in it, as byproducts.
fn envelope_byproducts<'a>(stages: impl Iterator<Item = (&'a str, &'a Envelope)>) -> Vec<ResourceDescriptor> {
    let mut distinct: Vec<(&Envelope, Vec<&str>)> = Vec::new();
    for (name, envelope) in stages {
        match distinct.iter_mut().find(|(e, _)| *e == envelope) {
            Some((_, names)) => names.push(name),
            None => distinct.push((envelope, vec![name])),
        }
    }
    distinct
        .into_iter()
        .map(|(envelope, names)| {
            let Value::Object(mut annotations) = serde_json::to_value(envelope).expect("an envelope serialises") else {
                unreachable!("an envelope is a JSON object")
            };
            annotations.insert("stages".into(), json!(names));
            ResourceDescriptor { name: "envelope".into(), annotations, ..ResourceDescriptor::default() }
        })
        .collect()
}

fn builder<'a>(envelopes: impl Iterator<Item = &'a Envelope> + Clone) -> Builder {
    let mut version = BTreeMap::new();
    let provs: std::collections::BTreeSet<&str> = envelopes.clone().map(|e| e.workbench_version.as_str()).collect();
    version.insert("prov".to_owned(), provs.into_iter().collect::<Vec<_>>().join(","));
    let torches: std::collections::BTreeSet<&str> = envelopes.filter_map(|e| e.libtorch.as_deref()).collect();
    if !torches.is_empty() {
        version.insert("libtorch".to_owned(), torches.into_iter().collect::<Vec<_>>().join(","));
    }
    Builder { id: BUILDER_ID.into(), version, builder_dependencies: Vec::new() }
}

fn statement(subject: Vec<ResourceDescriptor>, provenance: &Provenance) -> Statement {
    let Value::Object(predicate) = serde_json::to_value(provenance).expect("provenance serialises") else {
        unreachable!("provenance is a JSON object")
    };
    Statement { statement_type: STATEMENT_TYPE.into(), subject, predicate_type: SLSA_PROVENANCE_V1.into(), predicate }
}

fn external_parameters(lockfile: &Lockfile, lockfile_digest: &Digest) -> Map<String, Value> {
    let mut p = Map::new();
    p.insert("recipe".into(), json!({"name": lockfile.recipe.name.as_str(), "path": lockfile.recipe.path}));
    p.insert("lockfile".into(), json!({"blake3": lockfile_digest.to_hex()}));
    p
}

/// What distinguishes a run's statement from a replay's: the build type, and the record that
/// is the invocation (and a byproduct).
struct Invocation<'a> {
    build_type: &'static str,
    record_name: &'static str,
    record: &'a Digest,
}

/// The statement of an execution of `lockfile` whose stages wrote `stages`: what
/// [`run_statement`] and [`replay_statement`] share.
fn provenance_statement<'a>(
    store: &Store,
    invocation: &Invocation<'_>,
    external_parameters: Map<String, Value>,
    (lockfile_digest, lockfile): (&Digest, &Lockfile),
    builder: Builder,
    stages: impl Iterator<Item = &'a StageRecord> + Clone,
) -> Result<Statement, ProvenanceError> {
    let provenance = Provenance {
        build_definition: BuildDefinition {
            build_type: invocation.build_type.into(),
            external_parameters,
            internal_parameters: Map::new(),
            resolved_dependencies: resolved_dependencies(store, lockfile_digest, lockfile)?,
        },
        run_details: RunDetails {
            builder,
            metadata: Some(BuildMetadata {
                invocation_id: invocation.record.to_string(),
                started_on: String::new(),
                finished_on: String::new(),
            }),
            byproducts: std::iter::once(ResourceDescriptor {
                name: invocation.record_name.into(),
                digest: digest_set(store, invocation.record)?,
                media_type: RECORD_MEDIA_TYPE.into(),
                ..ResourceDescriptor::default()
            })
            .chain(envelope_byproducts(stages.clone().map(|s| (s.name.as_str(), &s.envelope))))
            .collect(),
        },
    };
    Ok(statement(subjects(store, stages)?, &provenance))
}

/// The statement "this lockfile was executed and these outputs came out", for a recorded run.
pub fn run_statement(store: &Store, run: &LoadedRun) -> Result<Statement, ProvenanceError> {
    let lockfile = get_typed::<Lockfile>(store, &run.record.lockfile)?;
    let stages = run.stages().iter().map(|s| &s.record);
    let external = external_parameters(&lockfile, &run.record.lockfile);
    let invocation = Invocation { build_type: RUN_BUILD_TYPE, record_name: "run", record: &run.manifest };
    let builder = builder(stages.clone().map(|s| &s.envelope));
    provenance_statement(store, &invocation, external, (&run.record.lockfile, &lockfile), builder, stages)
}

/// The statement "I re-executed this lockfile and got these outputs", for a replay that
/// re-executed every stage of `recording` and reproduced it: only such a replay is evidence
/// of the whole run.
pub fn replay_statement(
    store: &Store,
    recording: &LoadedRun,
    replay_digest: &Digest,
    replay: &ReplayRecord,
) -> Result<Statement, ProvenanceError> {
    if replay.recording != recording.manifest || replay.lockfile != recording.record.lockfile {
        return Err(ProvenanceError::NotAttestable(format!(
            "replay record {replay_digest} is a replay of another run than {}",
            recording.manifest
        )));
    }
    if let Some(d) = &replay.divergence {
        return Err(ProvenanceError::NotAttestable(format!(
            "the replay diverged at stage `{}`: only a replay that reproduced the run is attested",
            d.stage()
        )));
    }
    let replayed: Vec<&str> =
        replay.stages.iter().filter(|s| s.status == ReplayStatus::Replayed).map(|s| s.name.as_str()).collect();
    let all: Vec<&str> = recording.stages().iter().map(prov_manifest::LoadedStage::name).collect();
    if replayed != all {
        return Err(ProvenanceError::NotAttestable(
            "the replay did not re-execute every stage (`--from` or `--until`): only a whole replay is attested".into(),
        ));
    }
    let lockfile = get_typed::<Lockfile>(store, &replay.lockfile)?;
    let mut stage_records = Vec::new();
    for s in &replay.stages {
        stage_records.push(get_typed::<StageRecord>(store, &s.manifest)?);
    }
    let mut external = external_parameters(&lockfile, &replay.lockfile);
    external.insert("recording".into(), json!({"blake3": recording.manifest.to_hex()}));
    let invocation = Invocation { build_type: REPLAY_BUILD_TYPE, record_name: "replay", record: replay_digest };
    let builder = builder(std::iter::once(&replay.envelope));
    provenance_statement(store, &invocation, external, (&replay.lockfile, &lockfile), builder, stage_records.iter())
}

/// A statement Provenant made, read back: its role, the lockfile it names and its
/// provenance.
#[derive(Debug, Clone, PartialEq)]
pub struct RunProvenance {
    /// Run or replay.
    pub role: AttestationRole,
    /// The lockfile (run id) it names.
    pub lockfile: Digest,
    /// For a replay, the recording it compared with.
    pub recording: Option<Digest>,
    /// The predicate.
    pub provenance: Provenance,
}

/// Reads the SLSA predicate of a statement Provenant made.
pub fn read_provenance(statement: &Statement) -> Result<RunProvenance, ProvenanceError> {
    if statement.predicate_type != SLSA_PROVENANCE_V1 {
        return Err(ProvenanceError::Unrecognised(format!(
            "predicate type `{}`, not SLSA Provenance v1",
            statement.predicate_type
        )));
    }
    let provenance: Provenance = serde_json::from_value(Value::Object(statement.predicate.clone()))
        .map_err(|e| ProvenanceError::Malformed(format!("not a SLSA Provenance v1 predicate: {e}")))?;
    let role = match provenance.build_definition.build_type.as_str() {
        RUN_BUILD_TYPE => AttestationRole::Run,
        REPLAY_BUILD_TYPE => AttestationRole::Replay,
        other => return Err(ProvenanceError::Unrecognised(format!("build type `{other}` is not one of Provenant's"))),
    };
    let digest_param = |name: &str| -> Result<Digest, ProvenanceError> {
        provenance
            .build_definition
            .external_parameters
            .get(name)
            .and_then(|v| v.get("blake3"))
            .and_then(Value::as_str)
            .and_then(|h| Digest::from_hex(h).ok())
            .ok_or_else(|| {
                ProvenanceError::Malformed(format!("`externalParameters.{name}.blake3` is missing or not a digest"))
            })
    };
    let lockfile = digest_param("lockfile")?;
    let recording = match role {
        AttestationRole::Replay => Some(digest_param("recording")?),
        AttestationRole::Run => None,
    };
    Ok(RunProvenance { role, lockfile, recording, provenance })
}

/// The subjects a statement about `run` must have: every output, with both digests
/// recomputed from the store.
pub fn run_subjects(store: &Store, run: &LoadedRun) -> Result<Vec<ResourceDescriptor>, ProvenanceError> {
    Ok(subjects(store, run.stages().iter().map(|s| &s.record))?)
}

/// Checks that a statement is about `run`: the lockfile it names is the run's, and its subjects
/// are exactly the run's outputs, with both digests recomputed from the store (a subject
/// missing, added, renamed or with another digest is refused). A run attestation must also
/// name this run record as its invocation; a replay attestation this run as its recording.
pub fn check_about_run(
    store: &Store,
    statement: &Statement,
    run: &LoadedRun,
) -> Result<RunProvenance, ProvenanceError> {
    check_about_run_with(statement, run, &run_subjects(store, run)?)
}

/// [`check_about_run`] with the run's subjects computed once by the caller ([`run_subjects`]),
/// for checking several statements about one run without hashing its outputs each time.
pub fn check_about_run_with(
    statement: &Statement,
    run: &LoadedRun,
    expected: &[ResourceDescriptor],
) -> Result<RunProvenance, ProvenanceError> {
    let read = read_provenance(statement)?;
    if read.lockfile != run.record.lockfile {
        return Err(ProvenanceError::OtherRun(format!(
            "it names lockfile {}, the run's is {}",
            read.lockfile, run.record.lockfile
        )));
    }
    match read.role {
        AttestationRole::Run => {
            let invocation = read.provenance.run_details.metadata.as_ref().map_or("", |m| m.invocation_id.as_str());
            if invocation != run.manifest.to_string() {
                return Err(ProvenanceError::OtherRun(format!(
                    "its invocation is `{invocation}`, the run record is {}",
                    run.manifest
                )));
            }
        }
        AttestationRole::Replay => {
            if read.recording != Some(run.manifest) {
                return Err(ProvenanceError::OtherRun(format!(
                    "it is a replay of recording {}, not of run record {}",
                    read.recording.map_or_else(|| "(none)".to_owned(), |d| d.to_string()),
                    run.manifest
                )));
            }
        }
    }
    if statement.subject != expected {
        let stated: BTreeMap<&str, &ResourceDescriptor> =
            statement.subject.iter().map(|s| (s.name.as_str(), s)).collect();
        let wanted: BTreeMap<&str, &ResourceDescriptor> = expected.iter().map(|s| (s.name.as_str(), s)).collect();
        let why = if let Some(name) = wanted.keys().find(|n| !stated.contains_key(*n)) {
            format!("output `{name}` is not among its subjects")
        } else if let Some(name) = stated.keys().find(|n| !wanted.contains_key(*n)) {
            format!("subject `{name}` is not an output of the run")
        } else if let Some((name, s)) = stated.iter().find(|(n, s)| wanted[*n] != **s) {
            format!("subject `{name}` has digests {:?}, the run's output has {:?}", s.digest, wanted[name].digest)
        } else {
            "its subjects are listed in another order or more than once".to_owned()
        };
        return Err(ProvenanceError::OtherRun(why));
    }
    Ok(read)
}
