//! Building a [`DocumentProof`] from a run in the store.

use prov_dataset::{LedgerRow, read_ledger_shard};
use prov_manifest::{LedgerRecord, LoadedRun, Record, StageRecord, StoredError, get_typed};
use prov_store::{Digest, Store, StoreError};

use crate::proof::{DocumentPart, DocumentProof, PROOF_KIND, PROOF_SCHEMA, Subject, UrlIndexProof, ledger_output};
use crate::range::{RangeProof, prove_range};
use prov_dataset::url_index::{UrlIndexEntry, read_url_index, url_key};
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

/// A ledger's shards, read once: each row's canonical text and id.
struct LoadedShard {
    entries: Vec<String>,
    ids: Vec<String>,
}

impl LoadedShard {
    fn new(rows: &[LedgerRow]) -> Self {
        Self {
            entries: rows.iter().map(|r| String::from_utf8(r.canonical()).expect("canonical JSON is UTF-8")).collect(),
            ids: rows.iter().map(|r| r.id.clone()).collect(),
        }
    }

    fn prove(&self, key: &str) -> RangeProof {
        let keys: Vec<&str> = self.ids.iter().map(String::as_str).collect();
        prove_range(&self.entries, &keys, key)
    }
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
    let mut chain = vec![sink];
    while let Some(docs) = stages[*chain.last().expect("starts with the sink")].0.inputs.get("docs") {
        let here = &stages[*chain.last().expect("not empty")].0;
        // The latest stage before this one in plan order: when two stages write the same
        // bytes (a filter that changed nothing), the path goes through both.
        let before = *chain.last().expect("not empty");
        let producer = stages[..before]
            .iter()
            .rposition(|(s, _)| s.outputs.values().any(|o| o.digest == *docs))
            .ok_or_else(|| ProveError::BrokenChain { stage: here.name.to_string(), digest: *docs })?;
        chain.push(producer);
    }
    chain.reverse();
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
            let entries = read_url_index(store, &index.digest)?;
            let keys: Vec<&str> = entries.iter().map(|e| e.url.as_str()).collect();
            let texts: Vec<String> = entries.iter().map(UrlIndexEntry::canonical).collect();
            let range = prove_range(&texts, &keys, &url_key(url));
            let mut ids: Vec<String> = entries.iter().filter(|e| e.url == url_key(url)).map(|e| e.id.clone()).collect();
            ids.sort();
            ids.dedup();
            (ids, Some(UrlIndexProof { stage: text.clone(), range }))
        }
    };

    let mut documents: Vec<DocumentPart> =
        ids.iter().map(|id| DocumentPart { id: id.clone(), ledgers: Vec::new() }).collect();
    let mut ledgers = Vec::new();
    for (_, ledger) in &ledger_stages {
        let l = get_typed::<LedgerRecord>(store, ledger)?;
        let record = Record::Ledger(l.clone());
        let mut per_doc: Vec<Vec<RangeProof>> = vec![Vec::new(); documents.len()];
        for shard in &l.shards {
            let loaded = LoadedShard::new(&read_ledger_shard(store, &shard.digest)?);
            for (d, doc) in documents.iter().enumerate() {
                per_doc[d].push(loaded.prove(&doc.id));
            }
        }
        for (doc, ranges) in documents.iter_mut().zip(per_doc) {
            doc.ledgers.push(ranges);
        }
        ledgers.push(canonical_text(&record));
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
