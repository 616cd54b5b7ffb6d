//! Building a [`DocumentProof`] from a run in the store.

use prov_dataset::chunked::{IndexEntry, chunks_around, read_chunk};
use prov_dataset::directory::DirectoryEntry;
use prov_dataset::{read_ledger, read_ledger_shard};
use prov_manifest::{Ledger, LoadedRun, Record, StageRecord, StoredError, shard_leaves};
use prov_store::{Digest, Store, StoreError};

use crate::proof::{
    DocumentPart, DocumentProof, LedgerProof, PROOF_KIND, PROOF_SCHEMA, ShardRange, Subject, UrlIndexProof,
    ledger_output,
};
use crate::range::{RangeProof, prove_range, prove_range_chunked};
use prov_dataset::url_index::{UrlIndexEntry, read_url_index, url_key};
use prov_manifest::ChunkedIndex;
use prov_prep::URL_INDEX_KIND;
use prov_tokenizer::TOKENIZE_KIND;

/// Why a proof cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ProveError {
    /// A record could not be read.
    #[error(transparent)]
    Stored(#[from] StoredError),
    /// An object could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A ledger shard could not be read.
    #[error(transparent)]
    Dataset(#[from] prov_dataset::DatasetError),
    /// The run has no stage with a ledger.
    #[error("run of `{recipe}` has no filter stage with a ledger")]
    NoLedger {
        /// The recipe.
        recipe: String,
    },
    /// A `docs` input is produced by no stage of the run.
    #[error("the `docs` input `{digest}` of stage `{stage}` is no output of a stage of the run")]
    BrokenChain {
        /// The stage.
        stage: String,
        /// The input.
        digest: Digest,
    },
    /// A URL subject, but no `url-index` stage covers the filters' input.
    #[error("run of `{recipe}` has no `url-index` stage over `{dataset}`, the dataset that enters its first filter")]
    NoUrlIndex {
        /// The recipe.
        recipe: String,
        /// The dataset the index must cover.
        dataset: Digest,
    },
    /// The URL index object is malformed.
    #[error("URL index `{digest}`: {message}")]
    UrlIndex {
        /// The index object.
        digest: Digest,
        /// What is wrong.
        message: String,
    },
}

impl ProveError {
    /// True when a stored object or record does not match its digest (exit 2 in the CLI).
    pub fn is_integrity_failure(&self) -> bool {
        match self {
            Self::Stored(e) => e.is_integrity_failure(),
            Self::Store(e) => e.is_integrity_failure(),
            Self::Dataset(e) => e.is_integrity_failure(),
            Self::UrlIndex { .. } => true,
            Self::NoLedger { .. } | Self::BrokenChain { .. } | Self::NoUrlIndex { .. } => false,
        }
    }
}

/// Returns a record's canonical JSON, the text a proof embeds.
fn canonical_text(record: &Record) -> String {
    String::from_utf8(record.to_bytes().expect("a decoded record encodes")).expect("JSON is UTF-8")
}

/// The range of `index` with `key`, read from the chunks around the key, and the entries
/// whose key it is.
fn prove_in_index<E: IndexEntry>(
    store: &Store,
    index: &ChunkedIndex,
    key: &str,
) -> Result<(RangeProof, Vec<E>), ProveError> {
    let around = chunks_around(index, key);
    let mut loaded = Vec::with_capacity(around.len());
    let mut found = Vec::new();
    for chunk in &index.chunks[around.clone()] {
        let entries: Vec<E> = read_chunk(store, chunk)?;
        loaded.push(entries.iter().map(|e| (e.key().to_owned(), e.canonical())).collect::<Vec<_>>());
        found.extend(entries.into_iter().filter(|e| e.key() == key));
    }
    let roots: Vec<Digest> = index.chunks.iter().map(|c| c.root).collect();
    Ok((prove_range_chunked(around.start, &loaded, &roots, index.chunk_entries, key), found))
}

/// One ledger's part of a proof for `id`: the id directory's range, read from the chunks
/// around the id, then for each shard the directory names its leaf in the ledger's tree of
/// shards with the audit path, and the range of its rows, read from that shard alone. The
/// shards read depend on the shards that hold the id, not on how many the ledger has.
fn prove_in_ledger(store: &Store, ledger: &Ledger, leaves: &[Digest], id: &str) -> Result<LedgerProof, ProveError> {
    let dir = &ledger.directory;
    let (directory, found) = prove_in_index::<DirectoryEntry>(store, dir, id)?;
    let shards = found
        .iter()
        .map(|e| u64::from(e.shard))
        .map(|shard| {
            let (index, info) = usize::try_from(shard)
                .ok()
                .and_then(|s| ledger.shards.get(s).map(|info| (s, info)))
                .ok_or_else(|| {
                    ProveError::Dataset(prov_dataset::DatasetError::Chunk {
                        digest: dir.chunks[chunks_around(dir, id).start].digest,
                        message: format!("names shard {shard}, but the ledger has {}", ledger.shards.len()),
                    })
                })?;
            let rows = read_ledger_shard(store, &info.digest)?;
            let entries: Vec<String> =
                rows.iter().map(|r| String::from_utf8(r.canonical()).expect("canonical JSON is UTF-8")).collect();
            let keys: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
            Ok(ShardRange {
                shard,
                entry: info.leaf(shard),
                path: crate::path::audit_path(leaves, index),
                range: prove_range(&entries, &keys, id),
            })
        })
        .collect::<Result<_, ProveError>>()?;
    Ok(LedgerProof { directory, shards })
}

/// Builds the proof of `subject` for `run`, reading the run's stage records, ledgers and, for
/// a URL, its URL index from `store`.
///
/// The chain ends at the run's last `tokenize` stage, or, in a run without one, at its last
/// stage with a ledger, and follows `docs` inputs upstream to a stage without one.
pub fn prove(store: &Store, recorded: &LoadedRun, subject: &Subject) -> Result<DocumentProof, ProveError> {
    let run = &recorded.record;
    let run_text = canonical_text(&Record::Run(run.clone()));
    // Each stage record as the canonical text it is stored as (the encoding is unique).
    let stages: Vec<(StageRecord, String)> = recorded
        .stages()
        .iter()
        .map(|s| (s.record.clone(), canonical_text(&Record::Stage(s.record.clone()))))
        .collect();
    let sink = stages
        .iter()
        .rposition(|(s, _)| s.stage_kind == TOKENIZE_KIND)
        .or_else(|| stages.iter().rposition(|(s, _)| ledger_output(s).is_some()))
        .ok_or_else(|| ProveError::NoLedger { recipe: run.recipe.clone() })?;
    // `stages` holds the run's stages in the run's order, so positions are the same.
    let chain = recorded.docs_chain(sink).map_err(|b| ProveError::BrokenChain { stage: b.stage, digest: b.digest })?;
    let ledger_stages: Vec<(usize, Digest)> =
        chain.iter().filter_map(|&i| ledger_output(&stages[i].0).map(|d| (i, d))).collect();
    if ledger_stages.is_empty() {
        return Err(ProveError::NoLedger { recipe: run.recipe.clone() });
    }

    let (ids, url_index) = match subject {
        Subject::Doc(id) => (vec![id.clone()], None),
        Subject::Url(url) => {
            let entering =
                stages[ledger_stages[0].0].0.inputs.get("docs").copied().ok_or_else(|| ProveError::BrokenChain {
                    stage: stages[ledger_stages[0].0].0.name.to_string(),
                    digest: Digest::of(b""),
                })?;
            let (stage, text) = stages
                .iter()
                .find(|(s, _)| s.stage_kind == URL_INDEX_KIND && s.inputs.get("docs") == Some(&entering))
                .ok_or_else(|| ProveError::NoUrlIndex { recipe: run.recipe.clone(), dataset: entering })?;
            let index = stage
                .outputs
                .get("index")
                .ok_or_else(|| ProveError::UrlIndex { digest: Digest::of(b""), message: "no `index` output".into() })?;
            let listing = read_url_index(store, &index.digest)?;
            // The listing must be the index the stage recorded: its root and size are what
            // the proof is checked against.
            let recorded = (
                stage.stats.get("merkle_root").and_then(|v| v.as_str()).map(str::to_owned),
                stage.stats.get("entries").and_then(serde_json::Value::as_u64),
            );
            if recorded != (Some(listing.root.to_string()), Some(listing.entries)) {
                return Err(ProveError::UrlIndex {
                    digest: index.digest,
                    message: "its root and size are not the ones its stage recorded".into(),
                });
            }
            let key = url_key(url);
            let (range, found) = prove_in_index::<UrlIndexEntry>(store, &listing, &key)?;
            let mut ids: Vec<String> = found.into_iter().map(|e| e.id).collect();
            ids.sort();
            ids.dedup();
            (ids, Some(UrlIndexProof { stage: text.clone(), range }))
        }
    };

    let mut documents: Vec<DocumentPart> =
        ids.iter().map(|id| DocumentPart { id: id.clone(), ledgers: Vec::new() }).collect();
    let mut ledgers = Vec::new();
    for (_, ledger) in &ledger_stages {
        // Loading checks the parts against the record; the proof carries the record only.
        let l = read_ledger(store, ledger)?;
        let leaves = shard_leaves(&l.shards);
        for doc in &mut documents {
            doc.ledgers.push(prove_in_ledger(store, &l, &leaves, &doc.id)?);
        }
        ledgers.push(canonical_text(&Record::Ledger(l.record)));
    }

    Ok(DocumentProof {
        kind: PROOF_KIND.to_owned(),
        schema: PROOF_SCHEMA,
        subject: subject.clone(),
        run_manifest: Digest::of(run_text.as_bytes()),
        run: run_text,
        target: stages[sink].0.name.clone(),
        chain: chain.iter().map(|&i| stages[i].1.clone()).collect(),
        ledgers,
        url_index,
        documents,
    })
}
