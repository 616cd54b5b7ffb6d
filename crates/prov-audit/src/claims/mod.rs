//! Evaluating a policy's claims against a recorded run: each claim reads the run's stage
//! records, ledgers and datasets from the store, re-checks what it can, and says whether it
//! holds, fails or cannot be decided, with the evidence.
//!
//! Every ledger a claim reads is checked first ([`check_ledger`]): its shards' bytes against
//! their digests, each shard's rows against its recorded shard root, the rows' order and
//! uniqueness, and the record's `rules` counts against the rows. A ledger, verdict or dataset
//! shard that fails these checks makes the claim fail, naming the object.

use std::collections::{BTreeMap, BTreeSet};

use prov_dataset::chunked::read_chunk;
use prov_dataset::directory::DirectoryEntry;
use prov_dataset::{Document, LedgerDecision, LedgerRow, read_ledger_shard, shard_documents};
use prov_manifest::{
    ChunkedIndex, DatasetRecord, Ledger, LedgerRecord, LedgerShardRef, LoadedRun, LoadedStage, OutputType, Record,
    StageRecord, get_record,
};
use prov_store::{Digest, Store, merkle_root};
use prov_tokenizer::TOKENIZE_KIND;
use serde::Serialize;
use serde_json::Value;

use crate::policy::{AuditPolicy, Claim};

mod code_licenses;
mod common_usage;
mod decontamination;
mod heuristics;
mod license;
mod pair_score;
mod palette;
mod pii;
mod replay;
mod robots;
mod tiers;
mod toxicity;

pub use robots::ROBOTS_DEFAULT_RULES;

/// The stage kind that trains a model on token trees (`prov-train`'s `pretrain`).
const PRETRAIN_KIND: &str = "pretrain";

/// The outcome of one claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The evidence supports the claim and every re-check agrees.
    Holds,
    /// The evidence contradicts the claim, or a re-check or an integrity check failed.
    Fails,
    /// The run does not hold the evidence the claim needs.
    CannotBeDecided,
}

impl Outcome {
    /// Returns the outcome as written in reports (`holds`, `fails`, `cannot-be-decided`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Holds => "holds",
            Self::Fails => "fails",
            Self::CannotBeDecided => "cannot-be-decided",
        }
    }
}

/// One piece of evidence: what it is and its value (a digest, a count, a share).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evidence {
    /// What the value is, e.g. `ledger` or `kept documents`.
    pub name: String,
    /// The value, as text.
    pub value: String,
}

/// The result of one claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClaimResult {
    /// The claim's kind (`robots`, `pii`, …).
    pub kind: String,
    /// The claim in one sentence.
    pub statement: String,
    /// Holds, fails or cannot be decided.
    pub outcome: Outcome,
    /// Why it does not hold (empty when it holds).
    pub reasons: Vec<String>,
    /// Digests and counts the result rests on.
    pub evidence: Vec<Evidence>,
    /// What was re-checked, rather than taken from the records.
    pub rechecked: Vec<String>,
}

impl ClaimResult {
    pub(crate) fn new(kind: &str, statement: String) -> Self {
        Self {
            kind: kind.into(),
            statement,
            outcome: Outcome::Holds,
            reasons: Vec::new(),
            evidence: Vec::new(),
            rechecked: Vec::new(),
        }
    }

    pub(crate) fn evidence(&mut self, name: impl Into<String>, value: impl std::fmt::Display) {
        self.evidence.push(Evidence { name: name.into(), value: value.to_string() });
    }

    pub(crate) fn fail(&mut self, reason: impl Into<String>) {
        self.outcome = Outcome::Fails;
        self.reasons.push(reason.into());
    }

    pub(crate) fn undecided(&mut self, reason: impl Into<String>) {
        if self.outcome == Outcome::Holds {
            self.outcome = Outcome::CannotBeDecided;
        }
        self.reasons.push(reason.into());
    }
}

/// Re-checks that use the stages' own implementations (`prov-robots`, `prov-pii`) as second
/// opinions: the caller supplies them ([`crate::StageRescan`]), so that tests can pass blind
/// or forged ones.
pub trait Rescan {
    /// Returns a function that counts the PII matches the `pii` stage with `config` finds in
    /// a text.
    ///
    /// # Errors
    ///
    /// A message when `config` is not a `pii` config this build knows.
    fn pii_matcher(&self, config: &Value) -> Result<PiiMatcher, String>;

    /// Returns a function that decides documents as the `robots` stage with `config` does
    /// against the pinned snapshot `snapshot` (a source record): the ledger rule it gives.
    ///
    /// # Errors
    ///
    /// A message when `config` is not a `robots` config this build knows, or the snapshot
    /// cannot be read.
    fn robots_decider<'s>(
        &self,
        store: &'s Store,
        config: &Value,
        snapshot: &Digest,
    ) -> Result<RobotsDecider<'s>, String>;
}

/// Counts the PII matches of a `pii` stage's matcher in one text.
pub type PiiMatcher = Box<dyn Fn(&str) -> u64>;

/// Decides one document as a `robots` stage does: the ledger rule it gets.
pub type RobotsDecider<'s> = Box<dyn Fn(&Document) -> String + 's>;

/// How to evaluate: sampling, re-checks.
#[derive(Default)]
pub struct AuditOptions<'a> {
    /// Re-check only this many documents: those with the smallest keys under this seed, by the
    /// `sample` stage's key ([`prov_dataset::sample_key`]: the first 8 bytes of
    /// `BLAKE3(seed as 8 little-endian bytes ‖ id)`, read little-endian).
    pub sample: Option<(usize, u64)>,
    /// The re-checks that need stage implementations; without them, those claims cannot be
    /// decided.
    pub rescan: Option<&'a dyn Rescan>,
}

/// A run as the claims see it.
pub struct RunContext<'a> {
    /// The store.
    pub store: &'a Store,
    /// The run, with its stage records.
    pub run: &'a LoadedRun,
}

impl<'a> RunContext<'a> {
    /// The claims' view of a run.
    pub fn new(store: &'a Store, run: &'a LoadedRun) -> Self {
        Self { store, run }
    }

    fn stages_of(&self, kind: &str, name: Option<&str>) -> Vec<&LoadedStage> {
        self.run.stages_of_kind(kind).filter(|s| name.is_none_or(|n| s.name() == n)).collect()
    }

    /// The stage of the run that wrote output `digest`.
    fn producer(&self, digest: &Digest) -> Option<&prov_manifest::StageRecord> {
        self.run.stages().iter().map(|s| &s.record).find(|r| r.outputs.values().any(|o| o.digest == *digest))
    }

    /// Fails the claim unless `digest` (input `input` of stage `stage`) is an output of a
    /// stage of kind `kind` in the run: a pinned model must have been trained by the run
    /// whose conclusions it decides (whether that training reproduces is the `replay`
    /// claim's question).
    pub(super) fn require_trained(
        &self,
        stage: &str,
        input: &str,
        digest: &Digest,
        kind: &str,
        result: &mut ClaimResult,
    ) {
        match self.producer(digest) {
            Some(p) if p.stage_kind == kind => {
                result.evidence(format!("`{stage}` {input} trained by"), format!("`{}`", p.name.as_str()));
            }
            Some(p) => result.fail(format!(
                "`{stage}`'s `{input}` `{}` was written by `{}` ({}), not by a `{kind}` stage",
                digest.short(),
                p.name.as_str(),
                p.stage_kind
            )),
            None => result.fail(format!(
                "`{stage}`'s `{input}` `{}` was written by no stage of the run; a `{kind}` stage of the run must have made it",
                digest.short()
            )),
        }
    }
}

/// Returns the probability that a sample of `n` documents contains at least one violating
/// document when a share `p` of all documents violate: `1 - (1 - p)^n`.
pub fn detection_probability(p: f64, n: usize) -> f64 {
    1.0 - (1.0 - p).powi(i32::try_from(n).unwrap_or(i32::MAX))
}

/// A ledger whose rows were checked against its record. It keeps the record and the rows'
/// counts per decision and rule, not the rows: a claim reads them again shard by shard
/// ([`CheckedLedger::rows`], [`CheckedLedger::shard`]), each shard checked again as it is
/// read (its bytes verified against its digest, its rows against the recorded shard root), so
/// an audit holds one ledger shard at a time whatever the corpus.
pub struct CheckedLedger {
    /// The ledger record.
    pub record: LedgerRecord,
    /// Its shards, from its parts record (checked against the record's root).
    pub shards: Vec<LedgerShardRef>,
    digest: Digest,
    /// Rows per (decision, rule).
    by_decision: BTreeMap<(&'static str, String), u64>,
}

impl CheckedLedger {
    /// Shard `i`'s rows, read and checked again.
    ///
    /// # Errors
    ///
    /// A sentence naming the ledger and shard, and what does not match.
    pub fn shard(&self, store: &Store, i: usize) -> Result<Vec<LedgerRow>, String> {
        let shard = self.shards.get(i).ok_or_else(|| format!("ledger `{}` has no shard {i}", self.digest))?;
        checked_shard(store, &self.digest, shard, i)
    }

    /// Every row with its shard, shard by shard; after an error, nothing more.
    pub fn rows<'a>(&'a self, store: &'a Store) -> LedgerRows<'a> {
        LedgerRows { store, ledger: self, next: 0, shard: 0, current: Vec::new().into_iter(), done: false }
    }

    /// Rows per rule, of one decision or of all.
    fn rules(&self, decision: Option<LedgerDecision>) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for ((d, rule), n) in &self.by_decision {
            if decision.is_none_or(|x| x.as_str() == *d) {
                *out.entry(rule.clone()).or_insert(0) += n;
            }
        }
        out
    }
}

/// The rows of a [`CheckedLedger`], one shard in memory at a time.
pub struct LedgerRows<'a> {
    store: &'a Store,
    ledger: &'a CheckedLedger,
    next: usize,
    shard: usize,
    current: std::vec::IntoIter<LedgerRow>,
    done: bool,
}

impl Iterator for LedgerRows<'_> {
    type Item = Result<(usize, LedgerRow), String>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            if let Some(r) = self.current.next() {
                return Some(Ok((self.shard, r)));
            }
            if self.next >= self.ledger.shards.len() {
                self.done = true;
                return None;
            }
            match self.ledger.shard(self.store, self.next) {
                Ok(rows) => {
                    (self.shard, self.next) = (self.next, self.next + 1);
                    self.current = rows.into_iter();
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Takes the next row of [`CheckedLedger::rows`]; a row that cannot be read fails the claim.
fn row_or_fail(row: Result<(usize, LedgerRow), String>, name: &str, result: &mut ClaimResult) -> Option<LedgerRow> {
    match row {
        Ok((_, r)) => Some(r),
        Err(e) => {
            result.fail(format!("`{name}`: {e}"));
            None
        }
    }
}

/// Reads shard `i` of a ledger and checks it against the record: its bytes against their
/// digest, its row count, its ids sorted and unique, its Merkle root.
fn checked_shard(store: &Store, digest: &Digest, shard: &LedgerShardRef, i: usize) -> Result<Vec<LedgerRow>, String> {
    let root = &shard.root;
    let rows = read_ledger_shard(store, &shard.digest)
        .map_err(|e| format!("ledger `{digest}`, shard {i} `{}`: {e}", shard.digest))?;
    if rows.len() as u64 != shard.rows {
        return Err(format!(
            "ledger `{digest}`, shard {i} `{}` holds {} rows, the record says {}",
            shard.digest,
            rows.len(),
            shard.rows
        ));
    }
    if let Some(w) = rows.windows(2).find(|w| w[0].id.as_bytes() >= w[1].id.as_bytes()) {
        return Err(format!(
            "ledger `{digest}`, shard {i} `{}`: ids not sorted and unique (`{}` then `{}`)",
            shard.digest, w[0].id, w[1].id
        ));
    }
    let actual = merkle_root(&rows.iter().map(LedgerRow::leaf).collect::<Vec<_>>());
    if actual != *root {
        return Err(format!(
            "ledger `{digest}`, shard {i} `{}`: its rows hash to root `{actual}`, the record's shard root is `{root}`",
            shard.digest
        ));
    }
    Ok(rows)
}

/// Reads a ledger and checks its rows against its record, shard by shard: each shard's bytes
/// against their digest, its row count, its Merkle root against the recorded shard root, ids
/// sorted and unique, and the `rules` counts; then its id directory against the shards.
///
/// # Errors
///
/// A sentence naming the ledger or shard and what does not match.
pub fn check_ledger(store: &Store, digest: &Digest) -> Result<CheckedLedger, String> {
    // Loading checks the parts record against the ledger record: shard count, rows, the
    // Merkle root over the shards' leaves, and the directory's chunks against its root.
    let Ledger { record, shards, directory } = match prov_manifest::load_ledger(store, digest) {
        Ok(l) => l,
        Err(prov_manifest::LedgerError::Stored(prov_manifest::StoredError::WrongKind { found, .. })) => {
            return Err(format!("ledger `{digest}` names a {found} record where a ledger (or its parts) should be"));
        }
        Err(e) => return Err(format!("ledger `{digest}`: {e}")),
    };
    let mut by_decision: BTreeMap<(&'static str, String), u64> = BTreeMap::new();
    let mut shard_ids = Vec::with_capacity(shards.len());
    for (i, shard) in shards.iter().enumerate() {
        let mut ids = IdSequence::default();
        for r in checked_shard(store, digest, shard, i)? {
            ids.push(&r.id);
            *by_decision.entry((r.decision.as_str(), r.rule)).or_default() += 1;
        }
        shard_ids.push(ids.finish());
    }
    check_directory(store, digest, &directory, &shards, &shard_ids)?;
    let ledger = CheckedLedger { record, shards, digest: *digest, by_decision };
    let rules = ledger.rules(None);
    if rules != ledger.record.rules {
        return Err(format!(
            "ledger `{digest}`: its rows' rule counts {rules:?} differ from the record's {:?}",
            ledger.record.rules
        ));
    }
    Ok(ledger)
}

/// A digest of a sequence of ids, each hashed with its length so that no two sequences
/// share one.
#[derive(Default)]
struct IdSequence(prov_store::Hasher);

impl IdSequence {
    fn push(&mut self, id: &str) {
        self.0.update(&(id.len() as u64).to_le_bytes());
        self.0.update(id.as_bytes());
    }
    fn finish(self) -> Digest {
        self.0.finalize()
    }
}

/// Checks a ledger's id directory against its shards: the directory, read chunk by chunk
/// (each checked against its record: sorted, canonical, its root), must list under each
/// shard exactly that shard's ids. Taken in the directory's order, the ids it lists under one
/// shard are in id order, as the shard's rows are, so one running digest per shard compares
/// them without holding either. A directory that omits a row would let a proof say a filter
/// never saw a document it decided on; this is where such a ledger is caught.
fn check_directory(
    store: &Store,
    digest: &Digest,
    directory: &ChunkedIndex,
    shards: &[LedgerShardRef],
    shard_ids: &[Digest],
) -> Result<(), String> {
    let mut listed: Vec<IdSequence> = (0..shard_ids.len()).map(|_| IdSequence::default()).collect();
    for (c, chunk) in directory.chunks.iter().enumerate() {
        let entries = read_chunk::<DirectoryEntry>(store, chunk)
            .map_err(|e| format!("ledger `{digest}`, directory chunk {c}: {e}"))?;
        for e in entries {
            let seq = listed.get_mut(e.shard as usize).ok_or_else(|| {
                format!(
                    "ledger `{digest}`, directory chunk {c}: `{}` is listed under shard {}, but the ledger has {}",
                    e.id,
                    e.shard,
                    shard_ids.len()
                )
            })?;
            seq.push(&e.id);
        }
    }
    for (i, (seq, ids)) in listed.into_iter().zip(shard_ids).enumerate() {
        if seq.finish() != *ids {
            return Err(format!(
                "ledger `{digest}`: its id directory does not list exactly the ids of shard {i} `{}`",
                shards[i].digest
            ));
        }
    }
    Ok(())
}

fn dataset(store: &Store, digest: &Digest) -> Result<DatasetRecord, String> {
    match get_record(store, digest) {
        Ok(Record::Dataset(d)) => Ok(d),
        Ok(other) => Err(format!("`{digest}` is a {} record, not a dataset", other.kind_name())),
        Err(e) => Err(format!("dataset `{digest}`: {e}")),
    }
}

/// Streams the documents of shard `i` of a dataset (its bytes verified), one record batch in
/// memory at a time.
fn shard_docs(
    store: &Store,
    ds_digest: &Digest,
    i: usize,
    shard: &Digest,
) -> Result<impl Iterator<Item = Result<Document, String>>, String> {
    let where_ = move |e: &dyn std::fmt::Display| format!("dataset `{ds_digest}`, shard {i} `{shard}`: {e}");
    let docs = shard_documents(store, shard).map_err(|e| where_(&e))?;
    Ok(docs.map(move |d| d.map_err(|e| where_(&e))))
}

/// What every ledger claim reads: the stage's ledger, input and output datasets, checked
/// against each other.
struct Filter {
    ledger: CheckedLedger,
    /// The `docs` input dataset.
    input: Digest,
    /// The output dataset.
    output: Digest,
}

/// Loads a filter stage's ledger and datasets, and checks that the ledger has one row per
/// input document and that the output holds exactly the kept and modified documents of each
/// ledger shard. Records the evidence; on failure, fails the claim and returns `None`.
fn load_filter(
    cx: &RunContext<'_>,
    manifest: &Digest,
    stage: &StageRecord,
    result: &mut ClaimResult,
) -> Option<Filter> {
    let name = &stage.name;
    result.evidence(format!("stage `{name}` ({})", stage.stage_kind), manifest);
    let (Some(ledger), Some(out), Some(input)) =
        (stage.outputs.get("ledger"), stage.outputs.get("dataset"), stage.inputs.get("docs"))
    else {
        result.undecided(format!("stage `{name}` has no ledger, dataset output or `docs` input"));
        return None;
    };
    let checked = (|| {
        let l = check_ledger(cx.store, &ledger.digest)?;
        let i = dataset(cx.store, input)?;
        let o = dataset(cx.store, &out.digest)?;
        Ok::<_, String>((l, i, o))
    })();
    let (l, i, o) = match checked {
        Ok(x) => x,
        Err(e) => {
            result.fail(format!("stage `{name}`: {e}"));
            return None;
        }
    };
    result.evidence(format!("`{name}` ledger (Merkle root {})", l.record.merkle_root), ledger.digest);
    result.evidence(format!("`{name}` input dataset ({} documents)", i.rows), input);
    result.evidence(format!("`{name}` output dataset ({} documents)", o.rows), out.digest);
    result.rechecked.push(format!(
        "`{name}`: the {} rows of the ledger's {} shards against their shard roots, order and rule counts",
        l.record.rows,
        l.shards.len()
    ));
    if l.record.rows != i.rows {
        result.fail(format!("`{name}`: the ledger has {} rows, its input dataset {} documents", l.record.rows, i.rows));
    }
    if l.shards.len() == o.shards.len() {
        // Shard by shard, ids only: memory stays bounded by a shard.
        for (s, shard) in o.shards.iter().enumerate() {
            let read = (|| {
                let rows = l.shard(cx.store, s)?;
                let ids = shard_docs(cx.store, &out.digest, s, &shard.digest)?
                    .map(|d| d.map(|d| d.id))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok::<_, String>((rows, ids))
            })();
            let (rows, out_docs) = match read {
                Ok(x) => x,
                Err(e) => {
                    result.fail(format!("stage `{name}`: {e}"));
                    return None;
                }
            };
            let passed: BTreeSet<&str> =
                rows.iter().filter(|r| r.decision != LedgerDecision::Removed).map(|r| r.id.as_str()).collect();
            let found: BTreeSet<&str> = out_docs.iter().map(String::as_str).collect();
            if passed != found || out_docs.len() != found.len() {
                let extra: Vec<&&str> = found.difference(&passed).take(3).collect();
                result.fail(format!(
                    "`{name}`: output shard {s} `{}` holds {} documents, its ledger shard passes {}{}",
                    shard.digest,
                    out_docs.len(),
                    passed.len(),
                    if extra.is_empty() { String::new() } else { format!(" (not passed: {extra:?})") }
                ));
            }
        }
        result
            .rechecked
            .push(format!("`{name}`: the output dataset's ids against the ledger's kept and modified rows"));
    } else {
        result.fail(format!("`{name}`: {} ledger shards but {} output shards", l.shards.len(), o.shards.len()));
    }
    Some(Filter { ledger: l, input: *input, output: out.digest })
}

/// Says whether the documents the run trains on passed one of the claim's filter stages
/// (`filters`: those of kind `kind`, or the one named `named`), since the claims are about what a model
/// trained on. The training data are the `docs` of the run's `tokenize` stages, as in
/// proofs; each is followed up its `docs` chain
/// ([`LoadedRun::docs_chain`](prov_manifest::LoadedRun::docs_chain)), which must hold one of
/// the filters. A chain without one fails the claim, whether it goes around a filter (reads
/// the shards before it) or starts from other data (a second copy of the corpus): either way
/// the model trains on documents no filter of the claim looked at. A run without a
/// `tokenize` stage is noted: its claims are about the stages' outputs.
///
/// The token trees a `pretrain` stage reads must be outputs of `tokenize` stages (the same
/// bytes: a command that copied a tokenize stage's tree unchanged made no other data). A
/// tree that an `external` command or any other stage made cannot be followed back to its
/// documents, so the claim cannot be decided: otherwise a run could train on such a tree
/// while a `tokenize` stage beside it, which nothing trains on, passed every filter.
fn check_training_passes(
    cx: &RunContext<'_>,
    filters: &[&LoadedStage],
    (kind, named): (&str, Option<&str>),
    result: &mut ClaimResult,
) {
    let stages = cx.run.stages();
    let (what, missed) = match named {
        Some(name) => (format!("`{name}`"), format!("did not pass `{name}`")),
        None => (format!("a `{kind}` stage"), format!("passed no `{kind}` stage")),
    };
    let training: Vec<usize> = (0..stages.len()).filter(|&i| stages[i].kind() == TOKENIZE_KIND).collect();
    let followed = training_tokens_are_followed(cx.run, result);
    if training.is_empty() && followed {
        result.evidence(
            format!("training data after {what}"),
            "none: the run has no `tokenize` stage, so the claim is about the stage's output",
        );
        return;
    }
    let positions: Vec<usize> = filters.iter().filter_map(|f| cx.run.position(f.name())).collect();
    let mut after: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for t in training {
        let tokens = stages[t].name();
        let chain = match cx.run.docs_chain(t) {
            Ok(c) => c,
            Err(e) => {
                result.undecided(format!("training data `{tokens}`: {e}"));
                continue;
            }
        };
        match chain.iter().find(|i| positions.contains(i)) {
            Some(&f) => after.entry(f).or_default().push(format!("`{tokens}`")),
            None => result.fail(format!(
                "`{tokens}` trains on documents that {missed}: its `docs` chain is {}",
                chain.iter().map(|&i| format!("`{}`", stages[i].name())).collect::<Vec<_>>().join(" -> ")
            )),
        }
    }
    for (f, tokens) in after {
        result.evidence(format!("training data after `{}`", stages[f].name()), tokens.join(", "));
    }
}

/// Checks that every token tree a `pretrain` stage reads is a `tokenize` stage's output (see
/// [`check_training_passes`]); a tree that another stage made, or that no stage of the run
/// made, leaves `result` undecided, naming the tree, its stage and who made it. Returns true
/// when every tree is followed.
fn training_tokens_are_followed(run: &LoadedRun, result: &mut ClaimResult) -> bool {
    let stages = run.stages();
    let mut followed = true;
    for (t, trainer) in stages.iter().enumerate().filter(|(_, s)| s.kind() == PRETRAIN_KIND) {
        for (input, digest) in &trainer.record.inputs {
            let made_by = |s: &LoadedStage| s.record.outputs.values().any(|o| o.digest == *digest);
            let writers: Vec<&LoadedStage> = stages[..t].iter().filter(|s| made_by(s)).collect();
            let is_tree = writers
                .iter()
                .flat_map(|s| s.record.outputs.values())
                .any(|o| o.digest == *digest && o.output_type == OutputType::Tree);
            // Checkpoints (a distillation teacher) and files (the order, the tokenizer) hold
            // no training text; a source or a tree of another stage might.
            let holds_text = writers.is_empty() || is_tree;
            if !holds_text || writers.iter().any(|s| s.kind() == TOKENIZE_KIND) {
                continue;
            }
            followed = false;
            let maker = writers.last().map_or_else(
                || "no stage of the run made".to_owned(),
                |s| format!("stage `{}` (`{}`) made, not a `{TOKENIZE_KIND}` stage", s.name(), s.kind()),
            );
            result.undecided(format!(
                "`{}` trains on `{input}` (`{digest}`), a tree that {maker}: the audit cannot follow it to the \
                 documents it holds",
                trainer.name()
            ));
        }
    }
    followed
}

/// What a filter claim's statement is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Covers {
    /// The documents a model trains on (robots opt-outs, PII, toxicity, …): the filter must
    /// stand between the data and every `tokenize` stage that reads the same data
    /// ([`check_training_passes`]).
    TrainingData,
    /// The stage's own output, which is not pretraining text (sentence pairs for
    /// fine-tuning, say).
    StageOutput,
}

/// Loads every stage of `kind` (or only the one named `stage`) with its checked ledger and
/// datasets; a run without one leaves the claim undecided, and one that fails its checks
/// fails the claim and is left out. For a claim about the training data, each stage is
/// also checked to stand before it.
fn filters<'c>(
    cx: &'c RunContext<'_>,
    kind: &str,
    stage: Option<&str>,
    covers: Covers,
    result: &mut ClaimResult,
) -> Vec<(&'c StageRecord, Filter)> {
    let stages = cx.stages_of(kind, stage);
    if stages.is_empty() {
        no_stage(result, kind, stage);
        return Vec::new();
    }
    let loaded =
        stages.iter().filter_map(|s| load_filter(cx, &s.manifest, &s.record, result).map(|f| (&s.record, f))).collect();
    if covers == Covers::TrainingData {
        check_training_passes(cx, &stages, (kind, stage), result);
    }
    loaded
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 { 0.0 } else { part as f64 / whole as f64 }
}

fn percent(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

/// Fails the claim for rows of a decision whose rule is not among `allowed`.
fn check_rules(
    name: &str,
    ledger: &CheckedLedger,
    decision: LedgerDecision,
    allowed: &[&str],
    result: &mut ClaimResult,
) {
    for (rule, n) in ledger.rules(Some(decision)) {
        if !allowed.contains(&rule.as_str()) {
            result.fail(format!("`{name}`: {n} {} documents by rule `{rule}`", decision.as_str()));
        }
    }
}

/// The rows of a filter's ledger a re-derivation looks at: those that `pick` selects, all of
/// them, or with `--sample` a sample of them (seeded by id, so that every auditor with the
/// seed chooses the same documents).
struct Chosen<'p> {
    pick: Box<dyn Fn(&LedgerRow) -> bool + 'p>,
    /// The sample, by (ledger shard, id); `None`: every picked row.
    sample: Option<BTreeSet<(usize, String)>>,
}

/// Chooses the rows a re-derivation looks at (see [`Chosen`]) and states the sample in the
/// evidence. A sample is the `n` picked rows with the least sample keys, found in one pass
/// over the ledger holding `n` of them; without one, nothing is read here. `None` when the
/// ledger cannot be read (the claim then fails).
fn choose_rows<'p>(
    cx: &RunContext<'_>,
    f: &Filter,
    pick: impl Fn(&LedgerRow) -> bool + 'p,
    options: &AuditOptions<'_>,
    name: &str,
    result: &mut ClaimResult,
) -> Option<Chosen<'p>> {
    let Some((n, seed)) = options.sample else { return Some(Chosen { pick: Box::new(pick), sample: None }) };
    let mut least: std::collections::BinaryHeap<(u64, usize, String)> = std::collections::BinaryHeap::new();
    let mut population = 0usize;
    for row in f.ledger.rows(cx.store) {
        let (i, r) = match row {
            Ok(x) => x,
            Err(e) => {
                result.fail(format!("`{name}`: {e}"));
                return None;
            }
        };
        if !pick(&r) {
            continue;
        }
        population += 1;
        let key = (prov_dataset::sample_key(seed, &r.id), i, r.id);
        if least.len() < n {
            least.push(key);
        } else if least.peek().is_some_and(|top| key < *top) {
            least.pop();
            least.push(key);
        }
    }
    let sample: BTreeSet<(usize, String)> = least.into_iter().map(|(_, i, id)| (i, id)).collect();
    result.evidence(format!("`{name}` rescan sample (seed {seed})"), format!("{} of {population}", sample.len()));
    result.evidence(
        format!("`{name}` chance that the sample catches a violation if 0.5% of documents hold one"),
        percent(detection_probability(0.005, sample.len())),
    );
    Some(Chosen { pick: Box::new(pick), sample: Some(sample) })
}

/// Streams the documents of `dataset` (shard `i` beside ledger shard `i`) that are `chosen`,
/// calling `check` on each with its shard and the ledger shard's rows; stops at the first
/// error, failing the claim. Holds one ledger shard and one set of its ids at a time.
/// Returns how many documents were checked.
fn each_chosen_doc(
    cx: &RunContext<'_>,
    f: &Filter,
    dataset: &Digest,
    chosen: &Chosen<'_>,
    name: &str,
    result: &mut ClaimResult,
    mut check: impl FnMut(usize, &Document, &[LedgerRow], &mut ClaimResult) -> Result<(), String>,
) -> usize {
    let shards = match self::dataset(cx.store, dataset) {
        Ok(d) => d.shards,
        Err(e) => {
            result.fail(format!("`{name}`: {e}"));
            return 0;
        }
    };
    let mut checked = 0;
    for (i, shard) in shards.iter().enumerate() {
        if let Some(sample) = &chosen.sample
            && sample.range((i, String::new())..).next().is_none_or(|(s, _)| *s != i)
        {
            continue;
        }
        let rows = match f.ledger.shard(cx.store, i) {
            Ok(rows) => rows,
            Err(e) => {
                result.fail(format!("`{name}`: {e}"));
                return checked;
            }
        };
        let ids: BTreeSet<&str> = match &chosen.sample {
            Some(sample) => {
                sample.range((i, String::new())..).take_while(|(s, _)| *s == i).map(|(_, id)| id.as_str()).collect()
            }
            None => rows.iter().filter(|r| (chosen.pick)(r)).map(|r| r.id.as_str()).collect(),
        };
        let docs = match shard_docs(cx.store, dataset, i, &shard.digest) {
            Ok(d) => d,
            Err(e) => {
                result.fail(format!("`{name}`: {e}"));
                return checked;
            }
        };
        for d in docs {
            let outcome = d.and_then(|d| {
                if ids.contains(d.id.as_str()) {
                    checked += 1;
                    check(i, &d, &rows, result)?;
                }
                Ok(())
            });
            if let Err(e) = outcome {
                result.fail(format!("`{name}`: {e}"));
                return checked;
            }
        }
    }
    checked
}

/// How many failures of one kind a claim names one by one before it only counts them.
const NAMED_FAILURES: u64 = 3;

/// Counts one failure of a kind that may occur many times, naming it while few are counted.
fn fail_one_of_many(result: &mut ClaimResult, count: &mut u64, reason: impl FnOnce() -> String) {
    *count += 1;
    if *count <= NAMED_FAILURES {
        result.fail(reason());
    }
}

/// After [`fail_one_of_many`]: one more reason with the total, when not all were named.
fn fail_if_many(result: &mut ClaimResult, count: u64, total: impl FnOnce() -> String) {
    if count > NAMED_FAILURES {
        result.fail(total());
    }
}

/// The `benchmark` input of decontamination stage `s`, named in the evidence: fails the
/// claim when it is not the policy's pinned `want`, and leaves it undecided when the stage has
/// none (then `None`).
fn stage_benchmark<'s>(s: &'s StageRecord, want: Option<&Digest>, result: &mut ClaimResult) -> Option<&'s Digest> {
    let name = s.name.as_str();
    let Some(b) = s.inputs.get("benchmark") else {
        result.undecided(format!("`{name}` has no `benchmark` input"));
        return None;
    };
    match want {
        Some(want) if b != want => {
            result.fail(format!("`{name}` ran against benchmark `{b}`, not the pinned `{want}`"));
        }
        _ => result.evidence(format!("`{name}` benchmark"), b),
    }
    Some(b)
}

fn no_stage(result: &mut ClaimResult, kind: &str, stage: Option<&str>) {
    result.undecided(match stage {
        Some(s) => format!("the run has no `{kind}` stage named `{s}`"),
        None => format!("the run has no `{kind}` stage"),
    });
}

/// Evaluates every claim of `policy` against a run.
pub fn evaluate(cx: &RunContext<'_>, policy: &AuditPolicy, options: &AuditOptions<'_>) -> Vec<ClaimResult> {
    policy.claims.iter().map(|claim| evaluate_claim(cx, policy, claim, options)).collect()
}

/// Evaluates one claim of `policy` (its keys are the policy's): what [`evaluate`] does for
/// each, for a caller that reports progress between claims.
pub fn evaluate_claim(
    cx: &RunContext<'_>,
    policy: &AuditPolicy,
    claim: &Claim,
    options: &AuditOptions<'_>,
) -> ClaimResult {
    match claim {
        Claim::Robots { stage, agents, max_default_share } => {
            robots::robots(cx, stage.as_deref(), agents, *max_default_share, options)
        }
        Claim::RobotsLoss { stage, groups, tolerance } => robots::robots_loss(cx, stage.as_deref(), groups, *tolerance),
        Claim::Pii { stage } => pii::pii(cx, stage.as_deref(), options),
        Claim::Toxicity { stage, removed_share, tolerance } => {
            toxicity::toxicity(cx, stage.as_deref(), *removed_share, *tolerance)
        }
        Claim::License { stage, policy: license_policy, verdict_signers } => {
            license::license(cx, stage.as_deref(), license_policy, &policy.keys_of(verdict_signers))
        }
        Claim::CompoundLicense { stage } => license::compound_license(cx, stage.as_deref()),
        Claim::Decontamination { stage, benchmark } => {
            decontamination::decontamination(cx, stage.as_deref(), benchmark.as_ref(), options)
        }
        Claim::BitsPerWeight { stage, max } => palette::bits_per_weight(cx, stage.as_deref(), *max),
        Claim::CodeLicenses { stage, policy: license_policy } => {
            code_licenses::code_licenses(cx, stage.as_deref(), license_policy)
        }
        Claim::CommonUsageDecontamination { stage, benchmark, min_n, max_n, threshold, count } => {
            let rule = common_usage::ClaimedRule { min_n: *min_n, max_n: *max_n, threshold: *threshold, count };
            common_usage::common_usage(cx, stage.as_deref(), benchmark.as_ref(), &rule, options)
        }
        Claim::Heuristics { stage, languages, thresholds } => {
            heuristics::heuristics(cx, stage.as_deref(), languages, thresholds, options)
        }
        Claim::TiersByPhase { stage, phases, cutoffs } => {
            tiers::tiers_by_phase(cx, stage.as_deref(), phases, cutoffs.as_ref(), options)
        }
        Claim::PairScore { stage, bicleaner, cometkiwi } => {
            pair_score::pair_score(cx, stage.as_deref(), bicleaner, *cometkiwi, options)
        }
        Claim::Replay { replayers, min_signed_replays } => {
            replay::replay(cx, &policy.keys_of(replayers), *min_signed_replays)
        }
    }
}
