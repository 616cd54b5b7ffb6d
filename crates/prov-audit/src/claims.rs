//! Evaluating a policy's claims against a recorded run: each claim reads the run's stage
//! records, ledgers and datasets from the store, re-checks what it can, and says whether it
//! holds, fails or cannot be decided, with the evidence.
//!
//! Every ledger a claim reads is checked first ([`check_ledger`]): its shards' bytes against
//! their digests, each shard's rows against its recorded shard root, the rows' order and
//! uniqueness, and the record's `rules` counts against the rows. A ledger, verdict or dataset
//! shard that fails these checks makes the claim fail, naming the object.

use std::collections::{BTreeMap, BTreeSet};

use prov_dataset::{Document, LedgerDecision, LedgerRow, read_ledger_shard, shard_documents};
use prov_manifest::{DatasetRecord, LedgerRecord, LoadedRun, LoadedStage, Record, StageRecord, get_record};
use prov_store::{Digest, Store, merkle_root};
use serde::Serialize;
use serde_json::Value;

use crate::policy::{AuditPolicy, Claim, LanguageGroup};

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

/// Re-checks that need the stage implementations (which live in `prov-prep`, a crate that
/// depends on this one): the caller supplies them.
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
    /// `sample` stage's key ([`prov_prep::sample_key`]: the first 8 bytes of
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
}

/// Returns the probability that a sample of `n` documents contains at least one violating
/// document when a share `p` of all documents violate: `1 - (1 - p)^n`.
pub fn detection_probability(p: f64, n: usize) -> f64 {
    1.0 - (1.0 - p).powi(i32::try_from(n).unwrap_or(i32::MAX))
}

/// A ledger whose rows were checked against its record.
pub struct CheckedLedger {
    /// The ledger record.
    pub record: LedgerRecord,
    /// The rows of each shard, in shard order.
    pub shards: Vec<Vec<LedgerRow>>,
}

impl CheckedLedger {
    fn rows(&self) -> impl Iterator<Item = &LedgerRow> {
        self.shards.iter().flatten()
    }
}

/// Reads a ledger and checks its rows against its record: each shard's bytes against their
/// digest, its row count, its Merkle root against the recorded shard root, ids sorted and
/// unique, and the `rules` counts.
///
/// # Errors
///
/// A sentence naming the ledger or shard and what does not match.
pub fn check_ledger(store: &Store, digest: &Digest) -> Result<CheckedLedger, String> {
    let record = match get_record(store, digest) {
        Ok(Record::Ledger(l)) => l,
        Ok(other) => return Err(format!("ledger `{digest}` is a {} record", other.kind_name())),
        Err(e) => return Err(format!("ledger `{digest}`: {e}")),
    };
    let mut shards = Vec::new();
    let mut rules: BTreeMap<String, u64> = BTreeMap::new();
    for (i, (shard, root)) in record.shards.iter().zip(&record.shard_roots).enumerate() {
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
        for r in &rows {
            *rules.entry(r.rule.clone()).or_default() += 1;
        }
        shards.push(rows);
    }
    if rules != record.rules {
        return Err(format!(
            "ledger `{digest}`: its rows' rule counts {rules:?} differ from the record's {:?}",
            record.rules
        ));
    }
    Ok(CheckedLedger { record, shards })
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
        // Shard by shard, ids only: memory stays bounded by a shard.
        let mut ids = Vec::new();
        for (s, shard) in o.shards.iter().enumerate() {
            ids.push(
                shard_docs(cx.store, &out.digest, s, &shard.digest)?
                    .map(|d| d.map(|d| d.id))
                    .collect::<Result<Vec<_>, _>>()?,
            );
        }
        Ok::<_, String>((l, i, o, ids))
    })();
    let (l, i, o, docs) = match checked {
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
    if l.shards.len() == docs.len() {
        for (s, (rows, out_docs)) in l.shards.iter().zip(&docs).enumerate() {
            let passed: BTreeSet<&str> =
                rows.iter().filter(|r| r.decision != LedgerDecision::Removed).map(|r| r.id.as_str()).collect();
            let found: BTreeSet<&str> = out_docs.iter().map(String::as_str).collect();
            if passed != found || out_docs.len() != found.len() {
                let extra: Vec<&&str> = found.difference(&passed).take(3).collect();
                result.fail(format!(
                    "`{name}`: output shard {s} `{}` holds {} documents, its ledger shard passes {}{}",
                    o.shards[s].digest,
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
        result.fail(format!("`{name}`: {} ledger shards but {} output shards", l.shards.len(), docs.len()));
    }
    Some(Filter { ledger: l, input: *input, output: out.digest })
}

/// Loads every stage of `kind` (or only the one named `stage`) with its checked ledger and
/// datasets; a run without one leaves the claim undecided, and one that fails its checks
/// fails the claim and is left out.
fn filters<'c>(
    cx: &'c RunContext<'_>,
    kind: &str,
    stage: Option<&str>,
    result: &mut ClaimResult,
) -> Vec<(&'c StageRecord, Filter)> {
    let stages = cx.stages_of(kind, stage);
    if stages.is_empty() {
        no_stage(result, kind, stage);
    }
    stages.into_iter().filter_map(|s| load_filter(cx, &s.manifest, &s.record, result).map(|f| (&s.record, f))).collect()
}

fn count_rules(ledger: &CheckedLedger, pred: impl Fn(&LedgerRow) -> bool) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for r in ledger.rows().filter(|r| pred(r)) {
        *out.entry(r.rule.clone()).or_insert(0) += 1;
    }
    out
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
    for (rule, n) in count_rules(ledger, |r| r.decision == decision) {
        if !allowed.contains(&rule.as_str()) {
            result.fail(format!("`{name}`: {n} {} documents by rule `{rule}`", decision.as_str()));
        }
    }
}

/// The rows of a filter's ledger a re-derivation looks at, by (ledger shard, id): those that
/// `pick` selects, all of them or, with `--sample`, the sample (seeded by id, so the same
/// documents are chosen by every auditor with the seed). States the sample in the evidence.
fn choose_rows<'f>(
    f: &'f Filter,
    pick: impl Fn(&LedgerRow) -> bool,
    options: &AuditOptions<'_>,
    name: &str,
    result: &mut ClaimResult,
) -> BTreeSet<(usize, &'f str)> {
    let mut candidates: Vec<(usize, &str)> = f
        .ledger
        .shards
        .iter()
        .enumerate()
        .flat_map(|(i, rows)| rows.iter().map(move |r| (i, r)))
        .filter(|(_, r)| pick(r))
        .map(|(i, r)| (i, r.id.as_str()))
        .collect();
    let population = candidates.len();
    if let Some((n, seed)) = options.sample {
        candidates.sort_by_key(|&(i, id)| (prov_prep::sample_key(seed, id), i, id));
        candidates.truncate(n);
        result
            .evidence(format!("`{name}` rescan sample (seed {seed})"), format!("{} of {population}", candidates.len()));
        result.evidence(
            format!("`{name}` chance that the sample catches a violation if 0.5% of documents hold one"),
            percent(detection_probability(0.005, candidates.len())),
        );
    }
    candidates.into_iter().collect()
}

/// Streams the documents of `dataset` (shard `i` beside ledger shard `i`) that are `chosen`,
/// calling `check` on each with its shard; stops at the first error, failing the claim.
/// Returns how many documents were checked.
fn each_chosen_doc(
    cx: &RunContext<'_>,
    dataset: &Digest,
    chosen: &BTreeSet<(usize, &str)>,
    name: &str,
    result: &mut ClaimResult,
    mut check: impl FnMut(usize, &Document, &mut ClaimResult) -> Result<(), String>,
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
        if chosen.range((i, "")..).next().is_none_or(|&(s, _)| s != i) {
            continue;
        }
        let docs = match shard_docs(cx.store, dataset, i, &shard.digest) {
            Ok(d) => d,
            Err(e) => {
                result.fail(format!("`{name}`: {e}"));
                return checked;
            }
        };
        for d in docs {
            let outcome = d.and_then(|d| {
                if chosen.contains(&(i, d.id.as_str())) {
                    checked += 1;
                    check(i, &d, result)?;
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

fn no_stage(result: &mut ClaimResult, kind: &str, stage: Option<&str>) {
    result.undecided(match stage {
        Some(s) => format!("the run has no `{kind}` stage named `{s}`"),
        None => format!("the run has no `{kind}` stage"),
    });
}

/// The opt-out default: rules that keep a document without a robots.txt that allows it.
pub const ROBOTS_DEFAULT_RULES: [&str; 3] = ["robots:no-robots", "robots:unparseable", "robots:no-url"];

fn robots(
    cx: &RunContext<'_>,
    stage: Option<&str>,
    agents: &[String],
    max_default: Option<f64>,
    options: &AuditOptions<'_>,
) -> ClaimResult {
    let mut result = ClaimResult::new(
        "robots",
        "no kept document is disallowed for a listed agent by the pinned robots.txt snapshot".into(),
    );
    for (s, f) in filters(cx, "robots", stage, &mut result) {
        let name = s.name.as_str();
        if let Some(snapshot) = s.inputs.get("snapshot") {
            result.evidence(format!("`{name}` robots.txt snapshot"), snapshot);
        }
        let listed: Vec<&str> = s
            .config
            .get("agents")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        result.evidence(format!("`{name}` agents asked"), listed.len());
        for a in agents {
            if !listed.contains(&a.as_str()) {
                result.fail(format!("`{name}` did not ask about agent `{a}`"));
            }
        }
        check_rules(
            name,
            &f.ledger,
            LedgerDecision::Kept,
            &["robots:allowed", "robots:no-robots", "robots:unparseable", "robots:no-url"],
            &mut result,
        );
        check_rules(
            name,
            &f.ledger,
            LedgerDecision::Removed,
            &["robots:disallowed", "robots:site-disallowed"],
            &mut result,
        );
        check_rules(name, &f.ledger, LedgerDecision::Modified, &[], &mut result);
        for r in f.ledger.rows().filter(|r| r.decision == LedgerDecision::Removed) {
            let named = r
                .evidence
                .as_ref()
                .and_then(|e| e.get("agents"))
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
            if !named {
                result.fail(format!("`{name}`: `{}` is removed without a disallowed agent in its evidence", r.id));
                break;
            }
        }
        result.rechecked.push(format!(
            "`{name}`: every kept row's rule is a keeping one, every removed row names a disallowed agent"
        ));
        redecide_robots(cx, s, &f, options, &mut result);
        let kept = count_rules(&f.ledger, |r| r.decision == LedgerDecision::Kept);
        let kept_total: u64 = kept.values().sum();
        let removed: u64 = f.ledger.record.rows - kept_total;
        let by_default: u64 = ROBOTS_DEFAULT_RULES.iter().filter_map(|r| kept.get(*r)).sum();
        result.evidence(format!("`{name}` kept documents"), kept_total);
        result.evidence(format!("`{name}` removed documents"), removed);
        for rule in ROBOTS_DEFAULT_RULES {
            result.evidence(format!("`{name}` kept by `{rule}`"), kept.get(rule).copied().unwrap_or(0));
        }
        let default_share = share(by_default, kept_total);
        result.evidence(
            format!("`{name}` share of kept documents kept only by the opt-out default"),
            percent(default_share),
        );
        if let Some(max) = max_default
            && default_share > max
        {
            result.fail(format!(
                "`{name}`: {} of kept documents are kept only by the opt-out default, more than the claimed {}",
                percent(default_share),
                percent(max)
            ));
        }
    }
    result
}

/// Decides the stage's input documents again (all, or the sample) with the stage's matcher
/// from the pinned snapshot, and fails the claim for every ledger row whose rule differs: a
/// ledger or output edited to keep a disallowed document is caught even when it is
/// self-consistent.
fn redecide_robots(
    cx: &RunContext<'_>,
    s: &StageRecord,
    f: &Filter,
    options: &AuditOptions<'_>,
    result: &mut ClaimResult,
) {
    let name = s.name.as_str();
    let Some(snapshot) = s.inputs.get("snapshot") else {
        result.undecided(format!("`{name}` has no `snapshot` input to decide its documents again"));
        return;
    };
    let Some(rescan) = options.rescan else {
        result.undecided(format!("`{name}`: no robots matcher was supplied to decide its documents again"));
        return;
    };
    let decide = match rescan.robots_decider(cx.store, &s.config, snapshot) {
        Ok(d) => d,
        Err(e) => {
            result.fail(format!("`{name}`: {e}"));
            return;
        }
    };
    let chosen = choose_rows(f, |_| true, options, name, result);
    let mut differ = 0u64;
    let checked = each_chosen_doc(cx, &f.input, &chosen, name, result, |i, d, result| {
        let rows = &f.ledger.shards[i];
        let row = rows
            .binary_search_by(|r| r.id.as_bytes().cmp(d.id.as_bytes()))
            .map(|at| &rows[at])
            .map_err(|_| format!("input document `{}` has no row in ledger shard {i}", d.id))?;
        let rule = decide(d);
        if rule != row.rule {
            fail_one_of_many(result, &mut differ, || {
                format!(
                    "`{name}`: `{}` ({}) is `{}` in the ledger, but the snapshot gives `{rule}`",
                    d.id,
                    d.url.as_deref().unwrap_or("no URL"),
                    row.rule
                )
            });
        }
        Ok(())
    });
    fail_if_many(result, differ, || {
        format!("`{name}`: {differ} documents in all are decided otherwise by the snapshot")
    });
    result.rechecked.push(format!(
        "`{name}`: decided {checked} input documents again with the stage's matcher from the pinned snapshot `{}`, each rule compared with the ledger's",
        snapshot.short()
    ));
}

/// True when a document's `language` belongs to a group's code: equal, or the code followed
/// by `-` or `_`.
fn language_matches(language: &str, code: &str) -> bool {
    language.strip_prefix(code).is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '_']))
}

fn robots_loss(cx: &RunContext<'_>, stage: Option<&str>, groups: &[LanguageGroup], tolerance: f64) -> ClaimResult {
    let claimed: Vec<String> = groups.iter().map(|g| format!("{} {}", g.name, percent(g.claimed))).collect();
    let mut result = ClaimResult::new(
        "robots-loss",
        format!(
            "the robots filter removes these shares of words per language group, within {}: {}",
            percent(tolerance),
            claimed.join(", ")
        ),
    );
    for (s, f) in filters(cx, "robots", stage, &mut result) {
        let name = s.name.as_str();
        // (total words, removed words) per group, in policy order.
        let mut measured = vec![(0u64, 0u64); groups.len()];
        for r in f.ledger.rows() {
            let language = r.language.as_deref().unwrap_or("");
            let listed = groups.iter().position(|g| g.languages.iter().any(|c| language_matches(language, c)));
            let Some(g) = listed.or_else(|| groups.iter().position(|g| g.languages.is_empty())) else { continue };
            measured[g].0 += r.words;
            if r.decision == LedgerDecision::Removed {
                measured[g].1 += r.words;
            }
        }
        for (g, (total, removed)) in groups.iter().zip(measured) {
            let got = share(removed, total);
            result.evidence(
                format!("`{name}` words removed, {} (claimed {})", g.name, percent(g.claimed)),
                format!("{removed} of {total} = {}", percent(got)),
            );
            if total == 0 {
                result.undecided(format!("`{name}`: no document of group `{}`", g.name));
            } else if (got - g.claimed).abs() > tolerance + 1e-12 {
                result.fail(format!(
                    "`{name}`: the filter removed {} of the words of group `{}`, not {} within {}",
                    percent(got),
                    g.name,
                    percent(g.claimed),
                    percent(tolerance)
                ));
            }
        }
        result.rechecked.push(format!(
            "`{name}`: words per language group summed from the ledger rows (words are the volume unit until a tokenizer is pinned)"
        ));
    }
    result
}

fn pii(cx: &RunContext<'_>, stage: Option<&str>, options: &AuditOptions<'_>) -> ClaimResult {
    let mut result = ClaimResult::new(
        "pii",
        "PII redaction covered every non-exempt document, and rescans of its output, by the audit's own scanner and by the stage's matcher, find no PII".into(),
    );
    for (s, f) in filters(cx, "pii", stage, &mut result) {
        let name = s.name.as_str();
        check_rules(name, &f.ledger, LedgerDecision::Kept, &["pii:none", "pii:exempt"], &mut result);
        check_rules(name, &f.ledger, LedgerDecision::Modified, &["pii:redacted"], &mut result);
        check_rules(name, &f.ledger, LedgerDecision::Removed, &[], &mut result);
        let by_rule = count_rules(&f.ledger, |_| true);
        for (rule, n) in &by_rule {
            result.evidence(format!("`{name}` documents by `{rule}`"), n);
        }
        if let Some(tags) = s.config.get("exempt_tags") {
            result.evidence(format!("`{name}` exempt tags"), tags);
        }
        let mode = s.config.get("mode").and_then(Value::as_str).unwrap_or("");
        let Some(kinds) = crate::pii_scan::kinds_for_mode(mode) else {
            result.undecided(format!("`{name}`: the audit's scanner does not know the PII mode `{mode}`"));
            continue;
        };
        let kind_names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        // The stage's own matcher as a second opinion, when the caller supplies it and it
        // knows the config.
        let stage_matcher = match options.rescan.map(|r| r.pii_matcher(&s.config)) {
            Some(Ok(m)) => Some(m),
            Some(Err(e)) => {
                result.undecided(format!("`{name}`: {e}"));
                None
            }
            None => {
                result.undecided(format!("`{name}`: no stage matcher was supplied for the second rescan"));
                None
            }
        };
        // The output's non-exempt documents: the ledger's passed rows, which `load_filter`
        // checked to be exactly the output's documents.
        let chosen = choose_rows(
            &f,
            |r| r.decision != LedgerDecision::Removed && r.rule != "pii:exempt",
            options,
            name,
            &mut result,
        );
        let (mut ours, mut theirs) = (BTreeMap::<&str, u64>::new(), 0u64);
        let mut first: Vec<String> = Vec::new();
        let scanned = each_chosen_doc(cx, &f.output, &chosen, name, &mut result, |_, d, _| {
            let found = crate::pii_scan::scan(&d.text, kinds);
            for (kind, _) in &found {
                *ours.entry(kind.as_str()).or_default() += 1;
            }
            let matched = stage_matcher.as_ref().map_or(0, |m| m(&d.text));
            theirs += matched;
            if (!found.is_empty() || matched > 0) && first.len() < 3 {
                first.push(d.id.clone());
            }
            Ok(())
        });
        result.rechecked.push(format!(
            "`{name}`: rescanned {scanned} non-exempt documents of the output `{}` with the audit's own scanner ({}, written from the patterns, not the stage's code){}",
            f.output.short(),
            kind_names.join(", "),
            if stage_matcher.is_some() { " and with the stage's matcher in its mode" } else { "" }
        ));
        if mode == "strict" {
            result.rechecked.push(format!(
                "`{name}`: IP addresses and IBANs of mode `strict` are rescanned by the stage's matcher only"
            ));
        }
        let total: u64 = ours.values().sum();
        result.evidence(format!("`{name}` PII found by the audit's scanner"), total);
        for (kind, n) in &ours {
            result.evidence(format!("`{name}` PII found by the audit's scanner: {kind}"), n);
        }
        if stage_matcher.is_some() {
            result.evidence(format!("`{name}` PII matches of the stage's matcher"), theirs);
        }
        if total > 0 || theirs > 0 {
            result.fail(format!(
                "`{name}`: the rescan finds PII in the output ({total} by the audit's scanner, {theirs} by the stage's matcher), in {first:?}"
            ));
        }
    }
    result
}

fn number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn toxicity(cx: &RunContext<'_>, stage: Option<&str>, removed_share: f64, tolerance: f64) -> ClaimResult {
    let mut result = ClaimResult::new(
        "toxicity",
        format!(
            "per language, the removed toxicity share is {} within {}, at the recorded thresholds",
            percent(removed_share),
            percent(tolerance)
        ),
    );
    for (s, f) in filters(cx, "toxicity", stage, &mut result) {
        let name = s.name.as_str();
        if let Some(q) = number(s.stats.get("quantile")) {
            result.evidence(format!("`{name}` quantile applied"), q);
        }
        let Some(Value::Object(thresholds)) = s.stats.get("thresholds") else {
            result.undecided(format!("`{name}` recorded no `thresholds` statistic"));
            continue;
        };
        let mut scored: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        let mut bad_rows = 0u64;
        for r in f.ledger.rows() {
            let ev = r.evidence.as_ref();
            let Some(lang) = ev.and_then(|e| e.get("language")).and_then(Value::as_str) else { continue };
            if !matches!(r.rule.as_str(), "toxicity:toxic" | "toxicity:kept") {
                continue;
            }
            let recorded = thresholds.get(lang).and_then(|t| number(t.get("threshold")));
            let (score, threshold) =
                (number(ev.and_then(|e| e.get("score"))), number(ev.and_then(|e| e.get("threshold"))));
            let consistent = match (score, threshold, recorded) {
                (Some(sc), Some(t), Some(rt)) if t.to_bits() == rt.to_bits() => {
                    (sc >= t) == (r.rule == "toxicity:toxic")
                }
                _ => false,
            };
            if !consistent {
                bad_rows += 1;
            }
            let e = scored.entry(thresholds.get_key_value(lang).map_or("", |(k, _)| k.as_str())).or_insert((0, 0));
            e.0 += 1;
            if r.rule == "toxicity:toxic" {
                e.1 += 1;
            }
        }
        if bad_rows > 0 {
            result.fail(format!(
                "`{name}`: {bad_rows} scored rows disagree with their language's recorded threshold (score at or above it must be removed)"
            ));
        }
        result.rechecked.push(format!("`{name}`: every scored row's score against its language's recorded threshold"));
        for (lang, t) in thresholds {
            let Some(threshold) = number(t.get("threshold")) else { continue };
            let (n, removed) = scored.get(lang.as_str()).copied().unwrap_or((0, 0));
            let stats = (t.get("scored").and_then(Value::as_u64), t.get("removed").and_then(Value::as_u64));
            if stats != (Some(n), Some(removed)) {
                result.fail(format!(
                    "`{name}` `{lang}`: the ledger has {n} scored and {removed} removed, the statistics say {:?} and {:?}",
                    stats.0, stats.1
                ));
            }
            let got = share(removed, n);
            result.evidence(
                format!("`{name}` `{lang}` removed (threshold {threshold})"),
                format!("{removed} of {n} = {}", percent(got)),
            );
            if (got - removed_share).abs() > tolerance + 1e-12 {
                result.fail(format!(
                    "`{name}` `{lang}`: removed {} of scored documents, not {} within {}",
                    percent(got),
                    percent(removed_share),
                    percent(tolerance)
                ));
            }
        }
    }
    result
}

/// Reads a tree of verdict records (`what` names it in reasons: `verdicts`, `reviewer
/// verdicts`): each `.json` entry with its record. A tree or record that cannot be read fails
/// the claim and is named; `None` when the tree itself cannot be read.
fn read_verdict_tree(
    cx: &RunContext<'_>,
    name: &str,
    what: &str,
    tree: Digest,
    result: &mut ClaimResult,
) -> Option<Vec<(prov_manifest::TreeEntry, prov_manifest::VerdictRecord)>> {
    let entries = match get_record(cx.store, &tree) {
        Ok(Record::Tree(t)) => t.entries,
        Ok(other) => {
            result.fail(format!("`{name}`: {what} `{tree}` is a {} record", other.kind_name()));
            return None;
        }
        Err(e) => {
            result.fail(format!("`{name}`: {what} `{tree}`: {e}"));
            return None;
        }
    };
    let mut out = Vec::new();
    for e in entries {
        if std::path::Path::new(e.path.as_str()).extension().is_none_or(|x| x != "json") {
            continue;
        }
        match get_record(cx.store, &e.digest) {
            Ok(Record::Verdict(v)) => out.push((e, v)),
            Ok(other) => {
                result.fail(format!("`{name}`: {what} `{}` ({}) is a {} record", e.path, e.digest, other.kind_name()));
            }
            Err(err) => result.fail(format!("`{name}`: {what} `{}`: {err}", e.path)),
        }
    }
    Some(out)
}

/// Reads the reviewer verdicts pinned in a `license` stage's optional `verdicts` input (a
/// source directory or a tree), by digest. A verdict that cannot be read fails the claim and is
/// named; a stage without the input has none.
fn pinned_reviewer_verdicts(
    cx: &RunContext<'_>,
    s: &StageRecord,
    result: &mut ClaimResult,
) -> BTreeMap<Digest, prov_manifest::VerdictRecord> {
    let Some(input) = s.inputs.get("verdicts") else { return BTreeMap::new() };
    let name = s.name.as_str();
    let tree = match get_record(cx.store, input) {
        Ok(Record::Source(src)) => src.content.digest(),
        Ok(Record::Tree(_)) => *input,
        Ok(other) => {
            result.fail(format!("`{name}`: its `verdicts` input `{input}` is a {} record", other.kind_name()));
            return BTreeMap::new();
        }
        Err(e) => {
            result.fail(format!("`{name}`: its `verdicts` input `{input}`: {e}"));
            return BTreeMap::new();
        }
    };
    result.evidence(format!("`{name}` reviewer verdicts (pinned input)"), tree);
    let entries = read_verdict_tree(cx, name, "reviewer verdict", tree, result).unwrap_or_default();
    entries.into_iter().map(|(e, v)| (e.digest, v)).collect()
}

/// Says who decided, for evidence: `allow by reviewer Ada <a@b> at 2026-…`.
fn reviewed_by(v: &prov_manifest::VerdictRecord) -> String {
    format!(
        "{} by reviewer {} at {}",
        decision_name(v.decision),
        v.reviewer,
        v.decided_at.as_deref().unwrap_or("an unrecorded time")
    )
}

/// Reads the verdict records of a `license` stage's `verdicts` output, by digest; failures fail
/// the claim.
fn output_verdicts(
    cx: &RunContext<'_>,
    s: &StageRecord,
    f: &Filter,
    result: &mut ClaimResult,
) -> Option<BTreeMap<Digest, prov_manifest::VerdictRecord>> {
    let name = s.name.as_str();
    let Some(tree) = s.outputs.get("verdicts") else {
        result.undecided(format!("`{name}` recorded no verdicts (license stage before version 3)"));
        return None;
    };
    result.evidence(format!("`{name}` verdicts"), tree.digest);
    let mut verdicts = BTreeMap::new();
    for (entry, v) in read_verdict_tree(cx, name, "verdict", tree.digest, result)? {
        if v.reviewer == "policy" && v.subject != f.input {
            result.fail(format!(
                "`{name}`: verdict `{}` ({}) is about `{}`, not the stage's input",
                entry.path, entry.digest, v.subject
            ));
        }
        verdicts.insert(entry.digest, v);
    }
    Some(verdicts)
}

/// Checks the documents a reviewer verdict kept, grouped by `(declared, verdict)`: each
/// verdict must be pinned in the stage's input, allow, and be about them.
fn check_reviewer_kept(
    name: &str,
    kept: &BTreeMap<(String, String), (u64, Vec<String>)>,
    pinned: &BTreeMap<Digest, prov_manifest::VerdictRecord>,
    result: &mut ClaimResult,
) {
    for ((declared, v), (n, ids)) in kept {
        let key = prov_license::license_key(declared);
        let found = v.parse::<Digest>().ok().and_then(|d| pinned.get(&d).map(|r| (d, r)));
        let Some((d, record)) = found else {
            result.fail(format!(
                "`{name}`: {n} kept documents declaring `{declared}` name reviewer verdict `{v}`, which is not among the verdicts pinned in the stage's `verdicts` input"
            ));
            continue;
        };
        result
            .evidence(format!("`{name}` `{declared}` ({n} kept documents)"), format!("{} ({d})", reviewed_by(record)));
        if record.decision != prov_license::Decision::Allow || record.rule != prov_license::MANUAL_RULE {
            result.fail(format!(
                "`{name}`: {n} documents declaring `{declared}` are kept by verdict `{d}`, which is `{}` by rule `{}`",
                decision_name(record.decision),
                record.rule
            ));
        }
        if record.spdx != key || record.record.as_ref().is_some_and(|r| ids.iter().any(|i| i != r)) {
            result.fail(format!(
                "`{name}`: verdict `{d}` is about `{}`{}, not the kept documents declaring `{declared}`",
                record.spdx,
                record.record.as_ref().map(|r| format!(" in record `{r}`")).unwrap_or_default()
            ));
        }
    }
}

fn license(cx: &RunContext<'_>, stage: Option<&str>, policy_name: &str) -> ClaimResult {
    let mut result = ClaimResult::new(
        "license",
        format!(
            "every kept document's license is allowed by the stage's verdicts, and by policy `{policy_name}` or a pinned reviewer verdict"
        ),
    );
    let policy = match policy_name {
        "permissive" => prov_license::Policy::permissive(),
        other => {
            result.undecided(format!("unknown license policy `{other}` (known: permissive)"));
            return result;
        }
    };
    result.evidence("license policy", format!("{} {}", policy.name(), policy.version()));
    for (s, f) in filters(cx, "license", stage, &mut result) {
        let name = s.name.as_str();
        check_rules(
            name,
            &f.ledger,
            LedgerDecision::Kept,
            &["license:allowed", "license:reviewer-allowed"],
            &mut result,
        );
        let pinned = pinned_reviewer_verdicts(cx, s, &mut result);
        let Some(verdicts) = output_verdicts(cx, s, &f, &mut result) else { continue };
        let licenses = s.stats.get("licenses").and_then(Value::as_object);
        // Kept by the policy: per declared string. Kept by a reviewer: per string and verdict.
        let mut by_policy: BTreeMap<String, u64> = BTreeMap::new();
        let mut by_reviewer: BTreeMap<(String, String), (u64, Vec<String>)> = BTreeMap::new();
        for r in f.ledger.rows().filter(|r| r.decision == LedgerDecision::Kept) {
            let field = |k: &str| r.evidence.as_ref().and_then(|e| e.get(k)).and_then(Value::as_str).unwrap_or("");
            if r.rule == "license:reviewer-allowed" {
                let e = by_reviewer.entry((field("declared").to_owned(), field("verdict").to_owned())).or_default();
                e.0 += 1;
                e.1.push(r.id.clone());
            } else {
                *by_policy.entry(field("declared").to_owned()).or_default() += 1;
            }
        }
        for (declared, n) in &by_policy {
            let verdict = licenses
                .and_then(|l| l.get(declared))
                .and_then(|l| l.get("verdict"))
                .and_then(Value::as_str)
                .and_then(|v| v.parse::<Digest>().ok());
            match verdict.and_then(|v| verdicts.get(&v).map(|r| (v, r))) {
                Some((v, record)) => {
                    result.evidence(
                        format!("`{name}` `{declared}` ({n} kept documents)"),
                        format!("{} by {v}", decision_name(record.decision)),
                    );
                    if record.decision != prov_license::Decision::Allow {
                        result.fail(format!(
                            "`{name}`: {n} documents declaring `{declared}` are kept, but its verdict `{v}` is `{}`",
                            decision_name(record.decision)
                        ));
                    }
                }
                None => result.fail(format!(
                    "`{name}`: {n} kept documents declare `{declared}`, which no verdict of the stage decides"
                )),
            }
            let d = prov_license::evaluate(&policy, &prov_license::normalize(declared));
            if d.decision != prov_license::Decision::Allow {
                result.fail(format!(
                    "`{name}`: {n} kept documents declare `{declared}`, which policy `{policy_name}` denies: {}",
                    d.reason
                ));
            }
        }
        check_reviewer_kept(name, &by_reviewer, &pinned, &mut result);
        result.rechecked.push(format!(
            "`{name}`: each kept license string re-normalised and re-evaluated against policy `{policy_name}`, or matched to a reviewer verdict pinned in the stage's input, and every verdict record read"
        ));
    }
    result
}

fn compound_license(cx: &RunContext<'_>, stage: Option<&str>) -> ClaimResult {
    let mut result = ClaimResult::new(
        "compound-license",
        "no source re-licenses its documents: its declared license is compatible with each of theirs".into(),
    );
    for (s, f) in filters(cx, "license", stage, &mut result) {
        let name = s.name.as_str();
        let Some((digest, source)) = cx.run.upstream_source(cx.store, s.name.as_str()) else {
            result.undecided(format!("`{name}`: no `source` stage at the start of its `docs` chain"));
            continue;
        };
        let Some(declared) = source.license.as_deref() else {
            result.undecided(format!("`{name}`: source `{}` declares no license", source.name));
            continue;
        };
        result.evidence(format!("source `{}` ({declared})", source.name), digest);
        // A reviewer's verdict about a license (pinned in the stage's input) decides what the
        // check cannot: an unclassifiable constituent, or the mixture itself.
        let pinned = pinned_reviewer_verdicts(cx, s, &mut result);
        let reviewed = |license: &str| {
            let key = prov_license::license_key(license);
            pinned.iter().find(|(_, v)| v.record.is_none() && v.spdx == key).map(|(d, v)| (*d, v))
        };
        let mut strings = BTreeMap::new();
        for r in f.ledger.rows() {
            if let Some(d) = r.evidence.as_ref().and_then(|e| e.get("declared")).and_then(Value::as_str) {
                *strings.entry(d.to_owned()).or_insert(0u64) += 1;
            }
        }
        for (d, n) in &strings {
            result.evidence(format!("`{name}` documents declaring `{d}`"), n);
        }
        let mut checked: Vec<&str> = Vec::new();
        for d in strings.keys() {
            let unclassified = prov_license::classify(&prov_license::normalize(d)).is_err();
            match reviewed(d) {
                Some((v, record)) if unclassified => result.evidence(
                    format!("`{name}` `{d}`: no tabulated terms; decided by reviewer verdict"),
                    format!("{} ({v}): {}", reviewed_by(record), record.rationale),
                ),
                _ => checked.push(d),
            }
        }
        let constituents: Vec<prov_license::Normalized> = checked.iter().map(|d| prov_license::normalize(d)).collect();
        for c in prov_license::check_compound(&prov_license::normalize(declared), &constituents) {
            let what = match c.constituent.and_then(|i| checked.get(i)) {
                Some(d) => format!("`{name}`: source `{}` and documents declaring `{d}`: {c}", source.name),
                None => format!("`{name}`: source `{}`: {c}", source.name),
            };
            match c.kind {
                prov_license::ConflictKind::UnclassifiedMixture(_) => match reviewed(declared) {
                    Some((v, record)) => result.evidence(
                        format!("`{name}`: source `{}`: no tabulated terms; decided by reviewer verdict", source.name),
                        format!("{} ({v}): {}", reviewed_by(record), record.rationale),
                    ),
                    None => result.undecided(what),
                },
                prov_license::ConflictKind::UnclassifiedConstituent(_) => result.undecided(what),
                _ => result.fail(what),
            }
        }
        result.rechecked.push(format!(
            "`{name}`: the source's declared license against each of the {} license strings its documents declare (prov-license's compound check; {} decided by a reviewer verdict)",
            strings.len(),
            strings.len() - checked.len()
        ));
    }
    result
}

fn decision_name(d: prov_license::Decision) -> &'static str {
    match d {
        prov_license::Decision::Allow => "allow",
        prov_license::Decision::Deny => "deny",
    }
}

fn decontamination(
    cx: &RunContext<'_>,
    stage: Option<&str>,
    benchmark: Option<&Digest>,
    options: &AuditOptions<'_>,
) -> ClaimResult {
    let mut result = ClaimResult::new(
        "decontamination",
        "no kept document overlaps the pinned benchmark beyond the decontamination rule".into(),
    );
    for (s, f) in filters(cx, "decontaminate", stage, &mut result) {
        let name = s.name.as_str();
        match (s.inputs.get("benchmark"), benchmark) {
            (Some(b), Some(want)) if b != want => {
                result.fail(format!("`{name}` ran against benchmark `{b}`, not the pinned `{want}`"));
            }
            (Some(b), _) => result.evidence(format!("`{name}` benchmark"), b),
            (None, _) => result.undecided(format!("`{name}` has no `benchmark` input")),
        }
        result.evidence(format!("`{name}` config"), &s.config);
        check_rules(name, &f.ledger, LedgerDecision::Kept, &["decontaminate:clean"], &mut result);
        check_rules(name, &f.ledger, LedgerDecision::Removed, &["decontaminate:contaminated"], &mut result);
        check_rules(name, &f.ledger, LedgerDecision::Modified, &[], &mut result);
        for (rule, n) in count_rules(&f.ledger, |_| true) {
            result.evidence(format!("`{name}` documents by `{rule}`"), n);
        }
        result
            .rechecked
            .push(format!("`{name}`: no kept row is flagged; every removed row is `decontaminate:contaminated`"));
        if let Some(b) = s.inputs.get("benchmark") {
            rescan_overlap(cx, s, &f, b, options, &mut result);
        }
    }
    result
}

/// Rescans the kept documents (all, or the sample) against the benchmark with the audit's own
/// n-gram check ([`crate::overlap`]) and fails the claim for every one that contaminates an
/// example.
fn rescan_overlap(
    cx: &RunContext<'_>,
    s: &StageRecord,
    f: &Filter,
    benchmark: &Digest,
    options: &AuditOptions<'_>,
    result: &mut ClaimResult,
) {
    let name = s.name.as_str();
    let bench = match crate::overlap::OverlapRule::from_config(&s.config)
        .and_then(|rule| crate::overlap::Benchmark::read(cx.store, benchmark, rule))
    {
        Ok(b) => b,
        Err(e) => {
            result.fail(format!("`{name}`: {e}"));
            return;
        }
    };
    let chosen = choose_rows(f, |r| r.decision != LedgerDecision::Removed, options, name, result);
    let mut found = 0u64;
    let checked = each_chosen_doc(cx, &f.output, &chosen, name, result, |_, d, result| {
        if let Some(o) = bench.contaminated(&d.text) {
            fail_one_of_many(result, &mut found, || {
                format!(
                    "`{name}`: kept document `{}` covers {:.4} of benchmark example `{}`, more than the rule allows",
                    d.id, o.coverage, o.example
                )
            });
        }
        Ok(())
    });
    fail_if_many(result, found, || format!("`{name}`: {found} kept documents in all overlap the benchmark"));
    result.rechecked.push(format!(
        "`{name}`: rescanned {checked} kept documents against the {} examples of the benchmark with the audit's own n-gram check (written from the stage's specification, not its code)",
        bench.len()
    ));
}

/// Evaluates every claim of `policy` against a run.
pub fn evaluate(cx: &RunContext<'_>, policy: &AuditPolicy, options: &AuditOptions<'_>) -> Vec<ClaimResult> {
    policy
        .claims
        .iter()
        .map(|claim| match claim {
            Claim::Robots { stage, agents, max_default_share } => {
                robots(cx, stage.as_deref(), agents, *max_default_share, options)
            }
            Claim::RobotsLoss { stage, groups, tolerance } => robots_loss(cx, stage.as_deref(), groups, *tolerance),
            Claim::Pii { stage } => pii(cx, stage.as_deref(), options),
            Claim::Toxicity { stage, removed_share, tolerance } => {
                toxicity(cx, stage.as_deref(), *removed_share, *tolerance)
            }
            Claim::License { stage, policy } => license(cx, stage.as_deref(), policy),
            Claim::CompoundLicense { stage } => compound_license(cx, stage.as_deref()),
            Claim::Decontamination { stage, benchmark } => {
                decontamination(cx, stage.as_deref(), benchmark.as_ref(), options)
            }
            Claim::Replay {} => crate::replay_claim::replay(cx),
        })
        .collect()
}
