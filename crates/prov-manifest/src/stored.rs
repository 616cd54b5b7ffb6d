//! Reading and writing records in the store, and walking the reference graph.

use std::collections::BTreeSet;

use prov_store::{Digest, ObjectKind, Store, StoreError};

use crate::attestation::AttestationRecord;
use crate::canonical::{DecodeError, EncodeError};
use crate::ledger::Ledger;
use crate::record::Record;
use crate::replay::ReplayRecord;

/// An error reading or writing a stored record.
#[derive(Debug, thiserror::Error)]
pub enum StoredError {
    /// The store failed, or the bytes do not match their digest.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The object is not a valid record.
    #[error("object `{digest}` is not a valid record: {source}")]
    Decode {
        /// The object.
        digest: Digest,
        /// Why.
        source: DecodeError,
    },
    /// The record could not be encoded.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// A reference names a record of another kind than the one it should name.
    #[error("`{digest}` is a {found} record where a {expected} record is expected")]
    WrongKind {
        /// The record.
        digest: Digest,
        /// The kind the reference should name.
        expected: &'static str,
        /// The kind it names.
        found: &'static str,
    },
    /// A run record lists a stage record under another stage's name.
    #[error("run `{run}` lists stage record `{manifest}` as stage `{listed}`, but that record is stage `{named}`")]
    StageMislisted {
        /// The run record.
        run: Digest,
        /// The name the run lists it under.
        listed: String,
        /// The stage record.
        manifest: Digest,
        /// The name the stage record states.
        named: String,
    },
}

impl StoredError {
    /// Returns true when stored bytes do not match their digest.
    pub fn is_integrity_failure(&self) -> bool {
        // A stored manifest that does not decode is damaged store content too.
        // So is a reference to the wrong kind of record: every reference a record holds was
        // written by the executor, so one that points elsewhere was damaged or forged.
        matches!(self, Self::Decode { .. } | Self::WrongKind { .. } | Self::StageMislisted { .. })
            || matches!(self, Self::Store(e) if e.is_integrity_failure())
    }
}

/// Why a ledger cannot be read with its parts.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// Reading a record failed, or one is of another kind than expected.
    #[error(transparent)]
    Stored(#[from] StoredError),
    /// The parts record does not give the counts or roots the ledger record states.
    #[error("ledger `{ledger}`: {message}")]
    Inconsistent {
        /// The ledger record.
        ledger: Digest,
        /// What does not match, as a sentence.
        message: String,
    },
}

impl LedgerError {
    /// Returns true when stored bytes are damaged or forged (every mismatch is).
    pub fn is_integrity_failure(&self) -> bool {
        match self {
            Self::Stored(e) => e.is_integrity_failure(),
            Self::Inconsistent { .. } => true,
        }
    }
}

/// Reads the ledger record `digest` and its parts record, and checks them against each other
/// ([`Ledger::check`]): what every reader of a ledger's shards does.
///
/// # Errors
///
/// [`LedgerError::Stored`] when a record is missing, damaged or of another kind;
/// [`LedgerError::Inconsistent`] when the parts do not match the record.
pub fn load_ledger(store: &Store, digest: &Digest) -> Result<Ledger, LedgerError> {
    let wrong = |d: Digest, expected, found| StoredError::WrongKind { digest: d, expected, found };
    let record = match get_record(store, digest)? {
        Record::Ledger(l) => l,
        other => return Err(wrong(*digest, "ledger", other.kind_name()).into()),
    };
    let parts = match get_record(store, &record.parts)? {
        Record::LedgerParts(p) => p,
        other => return Err(wrong(record.parts, "ledger_parts", other.kind_name()).into()),
    };
    Ledger::check(record, parts).map_err(|message| LedgerError::Inconsistent { ledger: *digest, message })
}

/// Stores a record canonically, records its references in the index, and returns its digest.
pub fn put_record(store: &Store, record: &Record) -> Result<Digest, StoredError> {
    let bytes = record.to_bytes()?;
    let digest = store.put_bytes(ObjectKind::Manifest, &bytes)?;
    store.index().add_refs(&digest, &record.references())?;
    Ok(digest)
}

/// Reads and verifies a stored record.
pub fn get_record(store: &Store, digest: &Digest) -> Result<Record, StoredError> {
    let bytes = store.read(digest)?;
    Record::from_bytes(&bytes).map_err(|source| StoredError::Decode { digest: *digest, source })
}

/// Returns true when the bytes look like a record (a JSON object with a `kind`), without
/// validating it; used to tell manifests from data when the index is not trusted.
pub fn looks_like_record(bytes: &[u8]) -> bool {
    bytes.starts_with(b"{\"") && bytes.ends_with(b"}") && bytes.windows(7).any(|w| w == b"\"kind\":")
}

/// Decides whether an object is a manifest: from the kind the index recorded for it, or,
/// when the index does not know it (a process killed between writing the object and
/// recording it), from its bytes (small, and shaped like a record).
pub fn is_manifest(store: &Store, indexed_kind: Option<&str>, digest: &Digest) -> bool {
    if let Some(kind) = indexed_kind {
        kind == "manifest"
    } else {
        let path = store.object_path(digest);
        let small = fs_err::metadata(&path).is_ok_and(|m| m.len() < 64 << 20);
        small && fs_err::read(&path).is_ok_and(|b| looks_like_record(&b))
    }
}

/// Returns every record in the store that `pick` keeps, found from the objects themselves,
/// sorted by digest. The index is not consulted: an object is a candidate when its bytes look
/// like a record (an edit of the index's `kind` column cannot hide a run or a replay record).
/// A damaged or invalid manifest is skipped: reporting it is `prov verify`'s job.
pub fn find_records<T>(store: &Store, pick: impl Fn(Record) -> Option<T>) -> Result<Vec<(Digest, T)>, StoreError> {
    let mut out = Vec::new();
    for d in store.list_objects()? {
        if !starts_like_a_record(&store.object_path(&d)) {
            continue;
        }
        if let Some(t) = get_record(store, &d).ok().and_then(&pick) {
            out.push((d, t));
        }
    }
    Ok(out)
}

/// True when a file is small enough to be a record and begins as one does (`{"`): reads two
/// bytes, so that data objects (Parquet shards begin `PAR1`, weights with a length) cost
/// nothing.
fn starts_like_a_record(path: &std::path::Path) -> bool {
    use std::io::Read as _;
    let Ok(mut file) = fs_err::File::open(path) else { return false };
    let small = file.metadata().is_ok_and(|m| m.len() < 64 << 20);
    let mut head = [0u8; 2];
    small && file.read_exact(&mut head).is_ok() && head == *b"{\""
}

/// Every record that `pick` keeps among the records that reference `target`, sorted by
/// digest: what evidence about a run (its replays, its attestations) is looked up among. The
/// candidates are the index's referrers of `target` (what `put_record` noted when it wrote
/// each record) that entered the store as records (kind `manifest`: written by an
/// execution, by `prov attest`, or by the import of a committed run, which takes no replay or
/// attestation record). Data that happens to be a well-formed record (a source file, a
/// command's output) entered as a blob, and is not evidence: a lockfile's author could
/// otherwise ship a replay record as a data file and have it taken as a replay. An index
/// that lost its rows hides evidence rather than inventing it; [`find_records`], which
/// reads every object, is for what must not lose one (`gc`'s roots). Reading referrers, not
/// every record, keeps `prov status` from reading the store once per lockfile.
///
/// # Errors
///
/// When the index cannot be read.
pub fn find_evidence<T>(
    store: &Store,
    target: &Digest,
    pick: impl Fn(Record) -> Option<T>,
) -> Result<Vec<(Digest, T)>, StoreError> {
    let mut out = Vec::new();
    for d in store.index().referrers(target)? {
        if store.index().object_kind(&d)?.as_deref() != Some(ObjectKind::Manifest.as_str()) {
            continue;
        }
        if let Some(t) = get_record(store, &d).ok().and_then(&pick) {
            out.push((d, t));
        }
    }
    out.sort_by_key(|(d, _)| *d);
    Ok(out)
}

/// Every replay record of the run record `recording`, sorted by digest ([`find_evidence`]).
pub fn replays_of(store: &Store, recording: &Digest) -> Result<Vec<(Digest, ReplayRecord)>, StoreError> {
    find_evidence(store, recording, |r| match r {
        Record::Replay(r) if r.recording == *recording => Some(r),
        _ => None,
    })
}

/// The attestation records attached to a run record, in digest order ([`find_evidence`]).
pub fn attestations_of(store: &Store, run: &Digest) -> Result<Vec<(Digest, AttestationRecord)>, StoreError> {
    find_evidence(store, run, |r| match r {
        Record::Attestation(a) if a.run == *run => Some(a),
        _ => None,
    })
}

/// Walks everything reachable from `roots` through record references. Objects that are not
/// records (data files, shards) are leaves. Missing or unreadable records are returned
/// separately rather than failing the walk, so that one bad object does not hide the others.
pub fn closure(store: &Store, roots: &[Digest]) -> (BTreeSet<Digest>, Vec<(Digest, StoredError)>) {
    let mut seen = BTreeSet::new();
    let mut problems = Vec::new();
    let mut stack: Vec<Digest> = roots.to_vec();
    while let Some(d) = stack.pop() {
        if !seen.insert(d) {
            continue;
        }
        let is_manifest = match store.index().object_kind(&d) {
            Ok(Some(kind)) => kind == "manifest",
            // Not indexed: decide from the bytes.
            _ => {
                if let Ok(bytes) = fs_err::read(store.object_path(&d)) {
                    looks_like_record(&bytes)
                } else {
                    problems.push((d, StoredError::Store(StoreError::NotFound(d))));
                    continue;
                }
            }
        };
        if !is_manifest {
            continue;
        }
        match get_record(store, &d) {
            Ok(record) => stack.extend(record.references()),
            Err(e) => problems.push((d, e)),
        }
    }
    (seen, problems)
}
