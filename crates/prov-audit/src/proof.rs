//! The document proof: its format ([`DocumentProof`]) and its check ([`verify`]).
//!
//! The format is specified in the book, `book/src/formats/proofs.md`; this module is its
//! reference implementation. A verifier needs nothing but the proof's bytes and BLAKE3.

use std::collections::BTreeMap;

use prov_dataset::url_index::url_key;
use prov_manifest::{
    LedgerRecord, Name, OutputType, Record, RunRecord, ShardLeaf, StageRecord, from_canonical_bytes, parse_canonical,
};
// A proof names two stage kinds: the chain ends at the `tokenize` stage, whose `docs` input
// is the training data, and a URL is found through the `url-index` stage.
use prov_prep::URL_INDEX_KIND;
use prov_store::Digest;
use prov_textfix::shown::visible;
use prov_tokenizer::TOKENIZE_KIND;
use serde::{Deserialize, Serialize};

use crate::path::verify_path;
use crate::range::{RangeError, RangeProof, verify_range};

/// The `kind` of a document proof.
pub const PROOF_KIND: &str = "document-proof";
/// The `schema` version this build writes and reads. Version 4 embeds ledger records of
/// schema 2, which hold a Merkle root over their shards instead of the list, and gives each
/// shard it uses as a leaf of that tree with its audit path: a proof grows with the
/// logarithm of the shard count. Version 3 embedded ledger records that listed every shard
/// and directory chunk, so it grew with the shard count; version 3 found a document's rows
/// through each ledger's id directory (version 2 held a range in every shard of every
/// ledger). Version 2 named the stage the chain ends at (`target`); a version 1 proof could
/// be cut short without saying so.
pub const PROOF_SCHEMA: u32 = 4;

/// What a proof is about: one document id, or every document with one URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Subject {
    /// A document id.
    Doc(String),
    /// A URL, exactly as written in the dataset's `url` column.
    Url(String),
}

impl Subject {
    /// Returns ``document `ID` `` or ``URL `URL` ``, for messages, with what would not show
    /// escaped ([`prov_textfix::shown::visible`]): a look-alike id cannot pass for another.
    pub fn describe(&self) -> String {
        match self {
            Self::Doc(id) => format!("document `{}`", visible(id)),
            Self::Url(url) => format!("URL `{}`", visible(url)),
        }
    }
}

/// A proof of what the filter stages of one run did with a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentProof {
    /// Always [`PROOF_KIND`].
    pub kind: String,
    /// Always [`PROOF_SCHEMA`].
    pub schema: u32,
    /// What the proof is about.
    pub subject: Subject,
    /// The run record, as its canonical JSON text.
    pub run: String,
    /// The run manifest: the digest of `run`, which every byte of it changes.
    pub run_manifest: Digest,
    /// Stage records (canonical JSON texts) along the `docs` inputs, upstream first: from a
    /// stage without a `docs` input to the last one (a `tokenize` stage, or the run's last
    /// stage with a ledger).
    pub chain: Vec<String>,
    /// The name of the stage the chain ends at: the run's `tokenize` stage, or, in a run
    /// without one, its last stage with a ledger. What the proof shows stops there.
    pub target: Name,
    /// The ledger record (canonical JSON text) of each stage of `chain` with a ledger, in
    /// chain order.
    pub ledgers: Vec<String>,
    /// For a URL subject: the URL index stage's record and the range of its entries with the
    /// URL's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_index: Option<UrlIndexProof>,
    /// One entry per document id the subject names, sorted by id.
    pub documents: Vec<DocumentPart>,
}

/// The URL index part of a proof.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UrlIndexProof {
    /// The `url-index` stage record, as canonical JSON text.
    pub stage: String,
    /// The entries whose `url` is the subject's key.
    pub range: RangeProof,
}

/// The rows of one document id in every ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentPart {
    /// The document id.
    pub id: String,
    /// Per ledger (as in [`DocumentProof::ledgers`]): where the id's rows are, and the rows.
    pub ledgers: Vec<LedgerProof>,
}

/// One ledger's rows of one id: the id directory's entries for the id (which shards hold it,
/// and that no other does), and in each of those shards the row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerProof {
    /// The range of the ledger's id directory with the id.
    pub directory: RangeProof,
    /// One per directory entry of the id, in the directory's order (by shard).
    pub shards: Vec<ShardRange>,
}

/// One ledger shard, proven a shard of the ledger, and the range of its rows with an id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardRange {
    /// The shard's index in the ledger.
    pub shard: u64,
    /// The shard's leaf in the ledger's tree of shards: the canonical JSON text of a
    /// [`prov_manifest::ShardLeaf`] (file, rows, bytes, the root of its rows).
    pub entry: String,
    /// The leaf's RFC 6962 audit path in that tree (root: the ledger's `merkle_root`).
    pub path: Vec<Digest>,
    /// The range of its rows with the id.
    pub range: RangeProof,
}

impl DocumentProof {
    /// Returns the proof's canonical JSON bytes, the form written to a proof file.
    pub fn to_bytes(&self) -> Vec<u8> {
        prov_manifest::to_canonical_bytes(self).expect("a proof is plain JSON")
    }
}

/// Why a proof does not verify. Every variant is an integrity failure of the proof.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The bytes are not a canonical JSON proof of a supported version.
    #[error("not a valid proof: {0}")]
    Format(String),
    /// The embedded run record is not the run manifest the proof names.
    #[error("the run record's digest is `{actual}`, but the proof names run manifest `{stated}`")]
    RunManifest {
        /// `run_manifest` of the proof.
        stated: Digest,
        /// The digest of `run`.
        actual: Digest,
    },
    /// An embedded record does not decode.
    #[error("{what} is not a valid {kind} record: {message}")]
    Record {
        /// Which part of the proof.
        what: String,
        /// The record kind expected.
        kind: &'static str,
        /// The decoder's message.
        message: String,
    },
    /// A stage record is not one of the run's stages.
    #[error("stage record `{digest}` ({name}) is not a stage of the run")]
    NotInRun {
        /// The stage record's digest.
        digest: Digest,
        /// Its name.
        name: String,
    },
    /// The chain of stages is broken.
    #[error("the stage chain is broken at `{stage}`: {reason}")]
    Chain {
        /// The stage where it breaks.
        stage: String,
        /// What is wrong.
        reason: String,
    },
    /// A ledger record is not the one its stage wrote.
    #[error("the ledger of stage `{stage}` is `{actual}`, but the stage wrote `{expected}`")]
    Ledger {
        /// The stage.
        stage: String,
        /// The digest in the stage record.
        expected: Digest,
        /// The digest of the proof's ledger record.
        actual: Digest,
    },
    /// The URL index part is missing, extra or wrong.
    #[error("URL index: {0}")]
    UrlIndex(String),
    /// The documents listed are not those the subject names.
    #[error("the proof lists documents {listed:?}, but the subject names {expected:?}")]
    Documents {
        /// Ids in the proof.
        listed: Vec<String>,
        /// Ids the subject names.
        expected: Vec<String>,
    },
    /// A range proof does not hold.
    #[error("document `{id}`, stage `{stage}`, shard {shard}: {source}")]
    Range {
        /// The document id.
        id: String,
        /// The stage.
        stage: String,
        /// The shard index.
        shard: usize,
        /// What failed.
        source: RangeError,
    },
    /// The id directory part of a ledger does not hold, or the shards listed are not the
    /// ones it names.
    #[error("document `{id}`, stage `{stage}`, id directory: {reason}")]
    Directory {
        /// The document id.
        id: String,
        /// The stage.
        stage: String,
        /// What is wrong.
        reason: String,
    },
    /// A shard's leaf is not a leaf of the ledger's tree of shards at the shard's index.
    #[error("document `{id}`, stage `{stage}`, shard {shard}: the shard's leaf in the ledger: {reason}")]
    ShardLeaf {
        /// The document id.
        id: String,
        /// The stage.
        stage: String,
        /// The shard index.
        shard: u64,
        /// What is wrong.
        reason: String,
    },
    /// A row that the proof shows is not a valid ledger row.
    #[error("document `{id}`, stage `{stage}`, shard {shard}: {reason}")]
    Row {
        /// The document id.
        id: String,
        /// The stage.
        stage: String,
        /// The shard index.
        shard: usize,
        /// What is wrong.
        reason: String,
    },
    /// The chain does not end at the stage the caller requires.
    #[error("the proof ends at stage `{actual}`, but it must reach stage `{expected}`")]
    Until {
        /// The stage required.
        expected: String,
        /// The stage the chain ends at.
        actual: String,
    },
    /// The subject is not the one the caller asks about.
    #[error("the proof is about {actual}, not {expected}")]
    Subject {
        /// The subject asked about, described.
        expected: String,
        /// The proof's, described.
        actual: String,
    },
    /// The run is not the one pinned by the caller.
    #[error("the proof is for a run with {what} `{actual}`, but `{expected}` was expected")]
    Pin {
        /// `root` or `manifest`.
        what: &'static str,
        /// The expected digest.
        expected: Digest,
        /// The proof's.
        actual: Digest,
    },
}

/// What a caller pins the proof's run to. A proof checked without a pin only shows what
/// happened in a run whose records it carries itself: anyone can write such a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pins {
    /// The expected run root (the run record's `root`): it pins the run's stage records, not
    /// the run record's `recipe` and `lockfile`.
    pub root: Option<Digest>,
    /// The expected run manifest (the digest of the run record): it pins everything.
    pub run_manifest: Option<Digest>,
    /// The stage the chain must reach (the run's `tokenize` stage, to learn whether the
    /// documents reached the training data).
    pub until: Option<String>,
    /// The subject the proof must be about, exactly: a reader who asks about one document
    /// is not shown a proof about another that looks the same.
    pub subject: Option<Subject>,
}

impl Pins {
    /// True when the proof's run is pinned by its root or its manifest.
    pub fn anchored(&self) -> bool {
        self.root.is_some() || self.run_manifest.is_some()
    }
}

/// What a valid proof shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verified {
    /// The subject.
    pub subject: Subject,
    /// The run record's `root`.
    pub run_root: Digest,
    /// The digest of the run record.
    pub run_manifest: Digest,
    /// The run id (the lockfile's digest).
    pub run_id: Digest,
    /// The stage the chain ends at, and its kind.
    pub target: (String, String),
    /// The chain's stages, upstream first.
    pub path: Vec<String>,
    /// The recipe's name.
    pub recipe: String,
    /// The `url-index` stage that mapped the URL to ids, for a URL subject.
    pub url_index: Option<String>,
    /// The document ids the subject names (none: the URL was never seen).
    pub ids: Vec<String>,
    /// Every stage with a ledger on the chain, upstream first.
    pub stages: Vec<StageFate>,
    /// Whether the documents reached the training data, when the proof can say.
    pub training: Option<Training>,
}

/// One filter stage's decisions about the subject's documents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageFate {
    /// Stage name.
    pub stage: String,
    /// Stage kind.
    pub stage_kind: String,
    /// The ledger record's digest.
    pub ledger: Digest,
    /// Shards in the ledger.
    pub shards: usize,
    /// Every row of the subject's ids, in id then shard order; none when the documents were
    /// not in the stage's input.
    pub rows: Vec<FoundRow>,
}

/// One ledger row of a proven document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FoundRow {
    /// Document id.
    pub id: String,
    /// Ledger shard.
    pub shard: usize,
    /// Row index in the shard.
    pub row: u64,
    /// `kept`, `removed` or `modified`.
    pub decision: String,
    /// The rule that decided.
    pub rule: String,
    /// The row's evidence, when it has one.
    pub evidence: Option<serde_json::Value>,
}

/// Whether the documents reached the training data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Training {
    /// The `tokenize` stage whose `docs` input is the training data.
    pub stage: String,
    /// The stage that wrote that dataset.
    pub dataset_stage: String,
    /// True when some row of that stage's ledger kept or modified one of the ids; `None`
    /// when that stage writes no ledger, so the proof cannot say.
    pub reached: Option<bool>,
}

fn format_err(message: impl Into<String>) -> VerifyError {
    VerifyError::Format(message.into())
}

/// Parses proof bytes: canonical JSON (one trailing newline allowed), `kind` and `schema`
/// checked first, no unknown or missing member, and nothing the typed form would not write.
pub fn parse_proof(bytes: &[u8]) -> Result<DocumentProof, VerifyError> {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let value = parse_canonical(bytes).map_err(|e| format_err(e.to_string()))?;
    let kind = value.get("kind").and_then(serde_json::Value::as_str);
    if kind != Some(PROOF_KIND) {
        return Err(format_err(format!("`kind` is {kind:?}, expected `{PROOF_KIND}`")));
    }
    let schema = value.get("schema").and_then(serde_json::Value::as_u64);
    if schema != Some(u64::from(PROOF_SCHEMA)) {
        return Err(format_err(format!(
            "unsupported proof schema version ({}, but only v{PROOF_SCHEMA} is supported)",
            schema.map_or_else(|| "none".to_owned(), |s| format!("v{s}"))
        )));
    }
    let proof: DocumentProof = from_canonical_bytes(bytes).map_err(|e| format_err(e.to_string()))?;
    if proof.to_bytes() != bytes {
        return Err(format_err("a member has a value the format does not allow (an explicit `null`?)"));
    }
    Ok(proof)
}

fn decode<T>(text: &str, what: &str, kind: &'static str, pick: fn(Record) -> Option<T>) -> Result<T, VerifyError> {
    let bad = |message: String| VerifyError::Record { what: what.to_owned(), kind, message };
    let record = Record::from_bytes(text.as_bytes()).map_err(|e| bad(e.to_string()))?;
    let found = record.kind_name();
    pick(record).ok_or_else(|| bad(format!("it is a {found} record")))
}

fn stage_of(r: Record) -> Option<StageRecord> {
    if let Record::Stage(s) = r { Some(s) } else { None }
}

/// Decodes a stage record of the proof and checks that the run lists it under its name.
fn run_stage(text: &str, what: &str, run: &RunRecord) -> Result<StageRecord, VerifyError> {
    let stage = decode(text, what, "stage", stage_of)?;
    let digest = Digest::of(text.as_bytes());
    if !run.stages.iter().any(|s| s.manifest == digest && s.name == stage.name) {
        return Err(VerifyError::NotInRun { digest, name: stage.name.to_string() });
    }
    Ok(stage)
}

/// Returns the digest of a stage's `ledger`-typed output, if it has one.
pub(crate) fn ledger_output(stage: &StageRecord) -> Option<Digest> {
    stage.outputs.values().find(|o| o.output_type == OutputType::Ledger).map(|o| o.digest)
}

/// Checks a proof's bytes and returns what it shows. Needs nothing but the bytes: every
/// record the proof relies on is inside it, tied by digests to the run's root.
pub fn verify(bytes: &[u8], pins: &Pins) -> Result<Verified, VerifyError> {
    let proof = parse_proof(bytes)?;
    let Record::Run(run) = Record::from_bytes(proof.run.as_bytes()).map_err(|e| VerifyError::Record {
        what: "`run`".into(),
        kind: "run",
        message: e.to_string(),
    })?
    else {
        return Err(VerifyError::Record { what: "`run`".into(), kind: "run", message: "another kind".into() });
    };
    let run_manifest = Digest::of(proof.run.as_bytes());
    if run_manifest != proof.run_manifest {
        return Err(VerifyError::RunManifest { stated: proof.run_manifest, actual: run_manifest });
    }
    if let Some(expected) = pins.root.filter(|r| *r != run.root) {
        return Err(VerifyError::Pin { what: "root", expected, actual: run.root });
    }
    if let Some(expected) = pins.run_manifest.filter(|m| *m != run_manifest) {
        return Err(VerifyError::Pin { what: "manifest", expected, actual: run_manifest });
    }
    if let Some(expected) = pins.subject.as_ref().filter(|s| **s != proof.subject) {
        return Err(VerifyError::Subject { expected: expected.describe(), actual: proof.subject.describe() });
    }

    // The chain: each stage's `docs` input is an output of the stage before it.
    let chain: Vec<StageRecord> = proof
        .chain
        .iter()
        .enumerate()
        .map(|(i, text)| run_stage(text, &format!("`chain[{i}]`"), &run))
        .collect::<Result<_, _>>()?;
    let (Some(first), Some(last)) = (chain.first(), chain.last()) else {
        return Err(format_err("`chain` is empty"));
    };
    // A chain cut short says so: it ends at the stage the proof names, and the caller may
    // require that stage.
    if last.name != proof.target {
        return Err(VerifyError::Chain {
            stage: last.name.to_string(),
            reason: format!("the chain ends here, but the proof names `{}` as its end", proof.target),
        });
    }
    if let Some(until) = pins.until.as_ref().filter(|u| *u != last.name.as_str()) {
        return Err(VerifyError::Until { expected: until.clone(), actual: last.name.to_string() });
    }
    if first.inputs.contains_key("docs") {
        return Err(VerifyError::Chain { stage: first.name.to_string(), reason: "it has a `docs` input".into() });
    }
    // Plan order: the run lists each stage after the stages it reads.
    let position = |s: &StageRecord| run.stages.iter().position(|r| r.name == s.name);
    for pair in chain.windows(2) {
        if position(&pair[1]) <= position(&pair[0]) {
            return Err(VerifyError::Chain {
                stage: pair[1].name.to_string(),
                reason: format!("it does not come after `{}` in the run", pair[0].name),
            });
        }
        let docs = pair[1].inputs.get("docs");
        if !docs.is_some_and(|d| pair[0].outputs.values().any(|o| o.digest == *d)) {
            return Err(VerifyError::Chain {
                stage: pair[1].name.to_string(),
                reason: format!("its `docs` input is not an output of `{}`", pair[0].name),
            });
        }
    }

    // The ledgers of the chain's filter stages.
    let with_ledger: Vec<(&StageRecord, Digest)> =
        chain.iter().filter_map(|s| ledger_output(s).map(|d| (s, d))).collect();
    if with_ledger.len() != proof.ledgers.len() {
        return Err(format_err(format!(
            "the chain has {} stages with a ledger, but the proof has {} ledgers",
            with_ledger.len(),
            proof.ledgers.len()
        )));
    }
    let mut ledgers: Vec<LedgerRecord> = Vec::new();
    for ((stage, expected), text) in with_ledger.iter().zip(&proof.ledgers) {
        let actual = Digest::of(text.as_bytes());
        if actual != *expected {
            return Err(VerifyError::Ledger { stage: stage.name.to_string(), expected: *expected, actual });
        }
        let what = format!("the ledger of `{}`", stage.name);
        ledgers.push(decode(text, &what, "ledger", |r| if let Record::Ledger(l) = r { Some(l) } else { None })?);
    }

    // The ids the subject names.
    let (ids, url_index) = subject_ids(&proof, &run, &with_ledger)?;
    let listed: Vec<String> = proof.documents.iter().map(|d| d.id.clone()).collect();
    if listed != ids {
        return Err(VerifyError::Documents { listed, expected: ids });
    }

    // Every shard of every ledger, for every id.
    let mut stages = check_documents(&proof.documents, &with_ledger, &ledgers)?;
    let training = training(&chain, &stages);
    for s in &mut stages {
        s.rows.sort_by(|a, b| (&a.id, a.shard).cmp(&(&b.id, b.shard)));
    }
    Ok(Verified {
        subject: proof.subject.clone(),
        run_root: run.root,
        run_manifest,
        run_id: run.lockfile,
        recipe: run.recipe.clone(),
        target: (last.name.to_string(), last.stage_kind.clone()),
        path: chain.iter().map(|s| s.name.to_string()).collect(),
        url_index,
        ids: listed,
        stages,
        training,
    })
}

/// Checks every document's part of every ledger: the directory range (which shards hold the
/// id), then the range in each of those shards, which must hold exactly one row with the id.
/// Returns each filter's rows of the documents.
fn check_documents(
    documents: &[DocumentPart],
    with_ledger: &[(&StageRecord, Digest)],
    ledgers: &[LedgerRecord],
) -> Result<Vec<StageFate>, VerifyError> {
    let mut stages: Vec<StageFate> = with_ledger
        .iter()
        .zip(ledgers)
        .map(|((s, d), l)| StageFate {
            stage: s.name.to_string(),
            stage_kind: s.stage_kind.clone(),
            ledger: *d,
            shards: usize::try_from(l.shards).unwrap_or(usize::MAX),
            rows: Vec::new(),
        })
        .collect();
    for doc in documents {
        if doc.ledgers.len() != ledgers.len() {
            return Err(format_err(format!(
                "document `{}` has {} ledgers, not {}",
                doc.id,
                doc.ledgers.len(),
                ledgers.len()
            )));
        }
        for ((fate, ledger), part) in stages.iter_mut().zip(ledgers).zip(&doc.ledgers) {
            let directory_err =
                |reason: String| VerifyError::Directory { id: doc.id.clone(), stage: fate.stage.clone(), reason };
            let entries =
                verify_range(&part.directory, "id", &doc.id, ledger.directory.entries, &ledger.directory.root)
                    .map_err(|e| directory_err(e.to_string()))?;
            // The shards the directory names for the id, in its order: each once, ascending,
            // each a shard of the ledger.
            let mut named: Vec<u64> = Vec::with_capacity(entries.len());
            for (i, entry) in &entries {
                let shard = entry
                    .get("shard")
                    .and_then(serde_json::Value::as_u64)
                    .filter(|s| *s < ledger.shards)
                    .ok_or_else(|| directory_err(format!("entry {i} has no `shard` below {}", ledger.shards)))?;
                if named.last().is_some_and(|last| *last >= shard) {
                    return Err(directory_err(format!("entry {i} names shard {shard} out of order")));
                }
                named.push(shard);
            }
            let listed: Vec<u64> = part.shards.iter().map(|s| s.shard).collect();
            if listed != named {
                return Err(directory_err(format!(
                    "the directory names shards {named:?}, but the proof gives ranges for {listed:?}"
                )));
            }
            for ShardRange { shard, entry, path, range } in &part.shards {
                let leaf = check_shard_leaf(ledger, *shard, entry, path).map_err(|reason| VerifyError::ShardLeaf {
                    id: doc.id.clone(),
                    stage: fate.stage.clone(),
                    shard: *shard,
                    reason,
                })?;
                let shard = usize::try_from(*shard).expect("below the shard count");
                let found = verify_range(range, "id", &doc.id, leaf.rows, &leaf.root).map_err(|source| {
                    VerifyError::Range { id: doc.id.clone(), stage: fate.stage.clone(), shard, source }
                })?;
                let row_err =
                    |reason: String| VerifyError::Row { id: doc.id.clone(), stage: fate.stage.clone(), shard, reason };
                let [(row, value)] = found.as_slice() else {
                    return Err(row_err(format!(
                        "the directory names this shard, but it has {} rows with the id, not one",
                        found.len()
                    )));
                };
                fate.rows.push(found_row(&doc.id, shard, *row, value).map_err(row_err)?);
            }
        }
    }

    Ok(stages)
}

/// Checks that `entry` is the leaf of shard `shard` in the ledger's tree of shards: canonical
/// JSON of a [`ShardLeaf`] naming that index, whose audit path leads to the ledger's root.
fn check_shard_leaf(ledger: &LedgerRecord, shard: u64, entry: &str, path: &[Digest]) -> Result<ShardLeaf, String> {
    let leaf: ShardLeaf =
        from_canonical_bytes(entry.as_bytes()).map_err(|e| format!("`entry` is not a shard leaf: {e}"))?;
    if leaf.shard != shard {
        return Err(format!("`entry` is the leaf of shard {}", leaf.shard));
    }
    if !verify_path(shard, ledger.shards, &Digest::of(entry.as_bytes()), path, &ledger.merkle_root) {
        return Err(format!("its audit path does not lead to the ledger's root `{}`", ledger.merkle_root));
    }
    Ok(leaf)
}

/// Reads a proven ledger row's decision, rule and evidence.
fn found_row(id: &str, shard: usize, row: u64, value: &serde_json::Value) -> Result<FoundRow, String> {
    let text = |k: &str| value.get(k).and_then(serde_json::Value::as_str).map(str::to_owned);
    let decision = text("decision").filter(|d| ["kept", "removed", "modified"].contains(&d.as_str()));
    let (Some(decision), Some(rule)) = (decision, text("rule")) else {
        return Err(format!("row {row} has no valid `decision` and `rule`"));
    };
    Ok(FoundRow { id: id.to_owned(), shard, row, decision, rule, evidence: value.get("evidence").cloned() })
}

/// Returns the ids the subject names and, for a URL, the name of the index stage.
fn subject_ids(
    proof: &DocumentProof,
    run: &RunRecord,
    with_ledger: &[(&StageRecord, Digest)],
) -> Result<(Vec<String>, Option<String>), VerifyError> {
    let url = match (&proof.subject, &proof.url_index) {
        (Subject::Doc(id), None) => return Ok((vec![id.clone()], None)),
        (Subject::Doc(_), Some(_)) => return Err(VerifyError::UrlIndex("present for a document subject".into())),
        (Subject::Url(_), None) => return Err(VerifyError::UrlIndex("missing for a URL subject".into())),
        (Subject::Url(url), Some(index)) => (url, index),
    };
    let (url, index) = url;
    let stage = run_stage(&index.stage, "`url_index.stage`", run)?;
    if stage.stage_kind != URL_INDEX_KIND {
        return Err(VerifyError::UrlIndex(format!("stage `{}` is a `{}` stage", stage.name, stage.stage_kind)));
    }
    // The index must cover the dataset that entered the first filter of the chain.
    let entering = with_ledger.first().and_then(|(s, _)| s.inputs.get("docs"));
    if entering.is_none() || stage.inputs.get("docs") != entering {
        return Err(VerifyError::UrlIndex(format!(
            "stage `{}` does not index the dataset that entered the first filter",
            stage.name
        )));
    }
    let root = stage.stats.get("merkle_root").and_then(|v| v.as_str()).and_then(|s| s.parse::<Digest>().ok());
    let entries = stage.stats.get("entries").and_then(serde_json::Value::as_u64);
    let (Some(root), Some(entries)) = (root, entries) else {
        return Err(VerifyError::UrlIndex(format!("stage `{}` records no `merkle_root` and `entries`", stage.name)));
    };
    let found = verify_range(&index.range, "url", &url_key(url), entries, &root)
        .map_err(|e| VerifyError::UrlIndex(e.to_string()))?;
    let mut ids = Vec::new();
    for (i, value) in found {
        let id = value.get("id").and_then(serde_json::Value::as_str);
        ids.push(id.ok_or_else(|| VerifyError::UrlIndex(format!("entry {i} has no string `id`")))?.to_owned());
    }
    ids.sort();
    ids.dedup();
    Ok((ids, Some(stage.name.to_string())))
}

/// Decides whether the documents reached the training data: the chain ends at a `tokenize`
/// stage, and the stage before it wrote a ledger.
fn training(chain: &[StageRecord], stages: &[StageFate]) -> Option<Training> {
    let [.., feeding, last] = chain else { return None };
    if last.stage_kind != TOKENIZE_KIND {
        return None;
    }
    let fate = stages.iter().find(|f| f.stage == feeding.name.as_str() && ledger_output(feeding).is_some());
    let reached = fate.map(|f| f.rows.iter().any(|r| r.decision != "removed"));
    Some(Training { stage: last.name.to_string(), dataset_stage: feeding.name.to_string(), reached })
}

/// Counts rows per decision, for summaries.
pub fn decisions(rows: &[FoundRow]) -> BTreeMap<&str, usize> {
    let mut out = BTreeMap::new();
    for r in rows {
        *out.entry(r.decision.as_str()).or_insert(0) += 1;
    }
    out
}
