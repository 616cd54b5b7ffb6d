//! The license review queue: what a recorded run's `license` stages say about licenses (the
//! distinct declared strings, the records that declare a lineage, the source upstream and its
//! license files), which of them a reviewer still has to decide under a policy, and finding the
//! subject a reviewer names. The CLI's `prov license queue | decide | diff` present it; writing
//! and committing a verdict is theirs.
//!
//! Reviewer verdicts are read from two places: those pinned in the run (the license stages'
//! `verdicts` input) and those in a verdicts directory, which may be newer than the run; a
//! verdict in the directory wins.

use std::collections::BTreeMap;
use std::path::Path;

use prov_manifest::{DatasetRecord, LoadedRun, Record, StageRecord, TreeRecord, VerdictRecord, get_record, get_typed};
use prov_store::{Digest, Store};
use prov_textfix::shown::{shows_as_itself, visible};
use serde_json::{Value, json};

use crate::detect::{LicenseTexts, TextMatch, is_license_file};
use crate::{
    Policy, PolicyDecision, ReviewedVerdicts, Status, check_compound, evaluate, license_key, normalize, status,
};

/// The metadata field in which a record lists the datasets it is derived from: an array of
/// `{"name": …, "license": …}` (the Data Provenance Initiative's "Derived from Datasets", with
/// each constituent's license).
pub const DERIVED_FROM: &str = "derived_from";

/// How many record ids a license subject shows as examples.
const SAMPLE_IDS: usize = 5;

/// Why the review could not be gathered: bad input (with a hint of what to do), an object that
/// is not what the run says it is, or the store.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The run, a verdict file or an argument is not usable.
    #[error("{message}")]
    Input {
        /// What is wrong.
        message: String,
        /// What to do about it.
        hint: Option<String>,
    },
    /// A stored object is not what the run's records say.
    #[error("{0}")]
    Integrity(String),
    /// The store.
    #[error(transparent)]
    Store(#[from] prov_store::StoreError),
    /// A stored record.
    #[error(transparent)]
    Stored(#[from] prov_manifest::StoredError),
    /// Reading the verdicts directory.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl ReviewError {
    fn input(message: impl Into<String>) -> Self {
        Self::Input { message: message.into(), hint: None }
    }

    fn integrity(message: impl Into<String>) -> Self {
        Self::Integrity(message.into())
    }

    fn with_hint(self, hint: impl Into<String>) -> Self {
        match self {
            Self::Input { message, .. } => Self::Input { message, hint: Some(hint.into()) },
            other => other,
        }
    }

    /// True when a stored object or record does not match its digest or the run's records
    /// (exit 2 in the CLI).
    pub fn is_integrity_failure(&self) -> bool {
        match self {
            Self::Integrity(_) => true,
            Self::Store(e) => e.is_integrity_failure(),
            Self::Stored(e) => e.is_integrity_failure(),
            Self::Input { .. } | Self::Io(_) => false,
        }
    }
}

/// What a subject is: a license (every record declaring it), one record, or a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Every document declaring a license with one key (`license:KEY`).
    License,
    /// One document (`record:ID`).
    Record,
    /// The license a source declares (`source:NAME`).
    Source,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::License => "license",
            Self::Record => "record",
            Self::Source => "source",
        }
    }
}

/// One thing a reviewer can decide, with its evidence.
#[derive(Debug, Clone)]
pub struct ReviewSubject {
    /// What it is.
    pub kind: Kind,
    /// The license key, record id or source name.
    pub name: String,
    /// The license string the verdict is about (a declared string; a source's declaration).
    pub license: String,
    /// The digest a verdict names as its subject: the dataset or source record examined.
    pub digest: Digest,
    /// The `license` stage it was found in.
    pub stage: String,
    /// Declared strings with their document counts.
    pub declared: BTreeMap<String, u64>,
    /// Example record ids.
    pub records: Vec<String>,
    /// `(name, license)` of each constituent: a record's lineage, a source's documents.
    pub constituents: Vec<(String, String)>,
    /// The license files of a source directory and what their texts match.
    pub license_files: Vec<(String, TextMatch)>,
    /// The compound check's findings, and license files that contradict the declaration.
    pub conflicts: Vec<String>,
    /// What the policy says.
    pub policy: PolicyDecision,
    /// The reviewer verdict that decides it, if any.
    pub verdict: Option<(Digest, VerdictRecord)>,
}

impl ReviewSubject {
    /// Returns `kind:name`.
    pub fn id(&self) -> String {
        format!("{}:{}", self.kind.as_str(), self.name)
    }

    /// Returns what keeps it in the queue, if anything: the policy's state, or the compound
    /// check's findings (as `review`).
    pub fn pending(&self) -> Option<Status> {
        if self.verdict.is_some() {
            return None;
        }
        match status(&self.policy) {
            Status::Allow if self.conflicts.is_empty() => None,
            Status::Allow => Some(Status::Review),
            other => Some(other),
        }
    }

    /// Returns the subject as the JSON of `prov license queue`.
    pub fn to_json(&self) -> Value {
        json!({
            "subject": self.id(),
            "kind": self.kind.as_str(),
            "name": self.name,
            "license": self.license,
            "key": license_key(&self.license),
            "reading": reading(&self.license),
            "status": self.pending().map_or("decided", Status::as_str),
            "policy": {
                "decision": status(&self.policy).as_str(),
                "rule": self.policy.rule.as_str(),
                "reason": self.policy.reason,
            },
            "stage": self.stage,
            "digest": self.digest.to_string(),
            "declared": self.declared,
            "records": self.records,
            "constituents": self.constituents.iter().map(|(n, l)| json!({"name": n, "license": l, "reading": reading(l)})).collect::<Vec<_>>(),
            "license_files": self.license_files.iter().map(|(path, m)| json!({
                "path": path,
                "matches": m.licenses,
                "nearest": {"license": m.nearest.0, "score": m.nearest.1},
            })).collect::<Vec<_>>(),
            "conflicts": self.conflicts,
            "verdict": self.verdict.as_ref().map(|(d, v)| json!({
                "digest": d.to_string(),
                "decision": v.decision,
                "reviewer": v.reviewer,
                "decided_at": v.decided_at,
            })),
        })
    }
}

/// Returns what a license string normalises to: `SPDX (rule)` or `unknown: why`. The reason
/// of an unknown string may quote it, over lines (the SPDX parser points at the term it
/// cannot read); when the string holds characters that do not show (a line break, an escape
/// sequence), the reason comes on one line with them escaped, so that it cannot write lines
/// of its own into a reviewer's queue.
pub fn reading(license: &str) -> String {
    match normalize(license) {
        crate::Normalized::Spdx { expression, via } => format!("{expression} ({})", via.as_str()),
        crate::Normalized::Unknown { reason } => {
            let reason = reason.to_string();
            format!("unknown: {}", if shows_as_itself(license) { reason.as_str().into() } else { visible(&reason) })
        }
    }
}

/// Every subject of a run's `license` stages, sorted by kind and name.
pub struct Review {
    /// The subjects, sorted by kind and name.
    pub subjects: Vec<ReviewSubject>,
    /// The reviewer verdicts considered (pinned in the run, then the directory's).
    pub verdicts: ReviewedVerdicts<Digest>,
    /// Whether each reviewer verdict read is signed, by its digest, checked with the policy's
    /// verdict signers.
    pub signed: BTreeMap<Digest, crate::Signed>,
    /// The verdicts refused because the policy requires signed verdicts and they are not
    /// signed by one of its keys: `(path, why)`. They decide nothing.
    pub refused: Vec<(String, String)>,
}

/// Reads the reviewer verdicts pinned in a stage's `verdicts` input: `(path, digest, bytes)`.
fn pinned_files(store: &Store, stage: &StageRecord) -> Result<Vec<(String, Digest, Vec<u8>)>, ReviewError> {
    let Some(input) = stage.inputs.get("verdicts") else { return Ok(Vec::new()) };
    let tree = match get_record(store, input)? {
        Record::Source(s) => s.content.digest(),
        _ => *input,
    };
    let tree = get_typed::<TreeRecord>(store, &tree)?;
    let mut out = Vec::new();
    for e in tree.entries {
        out.push((e.path.as_str().to_owned(), e.digest, store.read(&e.digest)?));
    }
    Ok(out)
}

/// Reads the `.json` files of a verdicts directory and their `.json.sig` signatures
/// (recursively): `(relative path, digest, bytes)`.
fn directory_files(dir: &Path) -> Result<Vec<(String, Digest, Vec<u8>)>, ReviewError> {
    let mut out = Vec::new();
    if !dir.is_dir() {
        return Ok(out);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs_err::read_dir(&d)? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "json") || path.to_string_lossy().ends_with(".json.sig") {
                let bytes = fs_err::read(&path)?;
                let rel = path.strip_prefix(dir).unwrap_or(&path).to_string_lossy().replace('\\', "/");
                out.push((rel, Digest::of(&bytes), bytes));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn verdict_error(where_: &str, e: &crate::VerdictFileError) -> ReviewError {
    ReviewError::input(format!("{where_}: {e}")).with_hint(
        "verdict files are written by `prov license decide`; restore the file from git rather than editing it",
    )
}

/// Gathers the subjects of every `license` stage of a run, with the reviewer verdicts pinned
/// in the run and those in `dir`.
pub fn gather(store: &Store, run: &LoadedRun, policy: &Policy, dir: &Path) -> Result<Review, ReviewError> {
    let stages: Vec<&StageRecord> = run.stages_of_kind("license").map(|s| &s.record).collect();
    if stages.is_empty() {
        return Err(ReviewError::input(format!(
            "run `{}` (recipe `{}`) has no `license` stage",
            run.manifest,
            run.recipe()
        ))
        .with_hint("the review queue reads the decisions of a `license` stage"));
    }
    let mut files = Vec::new();
    for s in &stages {
        files.extend(pinned_files(store, s)?);
    }
    // Each place checked on its own first, so that an error names it.
    ReviewedVerdicts::from_files(files.iter().map(|(p, d, b)| (p.as_str(), *d, b.as_slice())))
        .map_err(|e| verdict_error("a verdict pinned in the run", &e))?;
    let on_disk = directory_files(dir)?;
    ReviewedVerdicts::from_files(on_disk.iter().map(|(p, d, b)| (p.as_str(), *d, b.as_slice())))
        .map_err(|e| verdict_error(&dir.display().to_string(), &e))?;
    let verdicts = ReviewedVerdicts::from_files(
        files
            .iter()
            // A verdict on disk replaces the pinned one, and the pinned one's signature with it.
            .filter(|(p, _, _)| {
                let verdict = p.strip_suffix(".sig").unwrap_or(p);
                !on_disk.iter().any(|(q, _, _)| q == p || q == verdict)
            })
            .chain(on_disk.iter())
            .map(|(p, d, b)| (p.as_str(), *d, b.as_slice())),
    )
    .map_err(|e| verdict_error("reviewer verdicts", &e))?;
    let mut verdicts = verdicts;
    let signed: BTreeMap<Digest, crate::Signed> =
        verdicts.iter().map(|r| (r.id, r.signed(policy.verdict_signers()))).collect();
    let mut refused = Vec::new();
    if !policy.verdict_signers().is_empty() {
        verdicts.retain(|r| match &signed[&r.id] {
            crate::Signed::By(_) => true,
            other => {
                refused.push((r.path.clone(), other.describe()));
                false
            }
        });
    }

    let mut subjects: BTreeMap<(Kind, String), ReviewSubject> = BTreeMap::new();
    let texts = LazyTexts::default();
    for stage in stages {
        stage_subjects(store, run, stage, policy, &verdicts, &texts, &mut subjects)?;
    }
    Ok(Review { subjects: subjects.into_values().collect(), verdicts, signed, refused })
}

fn decided_by(
    verdicts: &ReviewedVerdicts<Digest>,
    record: Option<&str>,
    license: &str,
) -> Option<(Digest, VerdictRecord)> {
    verdicts
        .decide(record, license)
        .filter(|r| record.is_none() || r.verdict.record.is_some())
        .map(|r| (r.id, r.verdict.clone()))
}

/// Adds one `license` stage's subjects: its declared strings, its records with a lineage and
/// the source upstream.
fn stage_subjects(
    store: &Store,
    run: &LoadedRun,
    stage: &StageRecord,
    policy: &Policy,
    verdicts: &ReviewedVerdicts<Digest>,
    texts: &LazyTexts,
    subjects: &mut BTreeMap<(Kind, String), ReviewSubject>,
) -> Result<(), ReviewError> {
    let name = stage.name.to_string();
    let Some(&dataset) = stage.inputs.get("docs") else { return Ok(()) };
    let input = get_typed::<DatasetRecord>(store, &dataset)?;
    let mut by_key: BTreeMap<String, (BTreeMap<String, u64>, Vec<String>)> = BTreeMap::new();
    for_each_document(store, &input, |id, meta| {
        let Some(declared) = meta.get("license").and_then(Value::as_str) else { return };
        let e = by_key.entry(license_key(declared)).or_default();
        *e.0.entry(declared.to_owned()).or_default() += 1;
        if e.1.len() < SAMPLE_IDS {
            e.1.push(id.to_owned());
        }
        let lineage = lineage(meta);
        if lineage.is_empty() {
            return;
        }
        let constituents: Vec<_> = lineage.iter().map(|(_, l)| normalize(l)).collect();
        let conflicts: Vec<String> = check_compound(&normalize(declared), &constituents)
            .iter()
            .map(|c| match c.constituent.and_then(|i| lineage.get(i)) {
                Some((n, _)) => format!("`{n}`: {c}"),
                None => c.to_string(),
            })
            .collect();
        subjects.insert(
            (Kind::Record, id.to_owned()),
            ReviewSubject {
                kind: Kind::Record,
                name: id.to_owned(),
                license: declared.to_owned(),
                digest: dataset,
                stage: name.clone(),
                declared: BTreeMap::from([(declared.to_owned(), 1)]),
                records: vec![id.to_owned()],
                constituents: lineage.clone(),
                license_files: Vec::new(),
                conflicts,
                policy: evaluate(policy, &normalize(declared)),
                verdict: decided_by(verdicts, Some(id), declared),
            },
        );
    })?;
    for (key, (declared, records)) in &by_key {
        let first = declared.keys().next().cloned().unwrap_or_default();
        subjects.entry((Kind::License, key.clone())).or_insert_with(|| ReviewSubject {
            kind: Kind::License,
            name: key.clone(),
            license: first.clone(),
            digest: dataset,
            stage: name.clone(),
            declared: declared.clone(),
            records: records.clone(),
            constituents: Vec::new(),
            license_files: Vec::new(),
            conflicts: Vec::new(),
            policy: evaluate(policy, &normalize(&first)),
            verdict: decided_by(verdicts, None, &first),
        });
    }
    if let Some((digest, source)) = run.upstream_source(store, stage.name.as_str())
        && let Some(declared) = source.license.clone()
    {
        let counts: BTreeMap<String, u64> = by_key.values().flat_map(|(d, _)| d.clone()).collect();
        // As the audit's compound claim: a string without tabulated terms that a reviewer
        // decided is not checked again.
        let strings: Vec<&String> = counts
            .keys()
            .filter(|s| crate::classify(&normalize(s)).is_ok() || verdicts.decide(None, s).is_none())
            .collect();
        let constituents: Vec<_> = strings.iter().map(|s| normalize(s)).collect();
        let mut conflicts: Vec<String> = check_compound(&normalize(&declared), &constituents)
            .iter()
            .map(|c| match c.constituent.and_then(|i| strings.get(i)) {
                Some(s) => format!("documents declaring `{s}`: {c}"),
                None => c.to_string(),
            })
            .collect();
        let license_files = license_files(store, &source, texts)?;
        conflicts.extend(contradicting_files(&declared, &license_files));
        subjects.insert(
            (Kind::Source, source.name.to_string()),
            ReviewSubject {
                kind: Kind::Source,
                name: source.name.to_string(),
                license: declared.clone(),
                digest,
                stage: name.clone(),
                declared: counts.clone(),
                records: Vec::new(),
                constituents: Vec::new(),
                license_files,
                conflicts,
                policy: evaluate(policy, &normalize(&declared)),
                verdict: decided_by(verdicts, None, &declared),
            },
        );
    }
    Ok(())
}

/// The license files of a source directory (`LICENSE`, `COPYING`, …), in path order, each
/// with the SPDX license texts it matches. A file source has none.
fn license_files(
    store: &Store,
    source: &prov_manifest::SourceRecord,
    texts: &LazyTexts,
) -> Result<Vec<(String, TextMatch)>, ReviewError> {
    let prov_manifest::Content::Tree { digest, .. } = source.content else { return Ok(Vec::new()) };
    let tree = get_typed::<TreeRecord>(store, &digest)?;
    let mut out = Vec::new();
    for e in tree.entries.iter().filter(|e| is_license_file(e.path.as_str())) {
        let text = String::from_utf8_lossy(&store.read(&e.digest)?).into_owned();
        out.push((e.path.as_str().to_owned(), texts.get()?.matches(&text)));
    }
    Ok(out)
}

/// A finding for each license file whose text is a license that the declared expression does
/// not name (a file that matches no text says nothing either way).
fn contradicting_files(declared: &str, files: &[(String, TextMatch)]) -> Vec<String> {
    let named: Vec<String> = normalize(declared)
        .expression()
        .map(|e| e.requirements().iter().map(|r| r.license.to_string()).collect())
        .unwrap_or_default();
    files
        .iter()
        .filter(|(_, m)| !m.licenses.is_empty() && !m.licenses.iter().any(|l| named.contains(l)))
        .map(|(path, m)| {
            format!(
                "license file `{path}` is the text of `{}` (score {:.3}), which the declared `{declared}` does not name",
                m.licenses.join("` or `"),
                m.nearest.1
            )
        })
        .collect()
}

/// The SPDX license texts, loaded the first time a license file is read.
#[derive(Default)]
pub struct LazyTexts(std::sync::OnceLock<LicenseTexts>);

impl LazyTexts {
    fn get(&self) -> Result<&LicenseTexts, ReviewError> {
        if let Some(t) = self.0.get() {
            return Ok(t);
        }
        let loaded = LicenseTexts::load().map_err(|e| ReviewError::integrity(e.to_string()))?;
        Ok(self.0.get_or_init(|| loaded))
    }
}

/// Returns a record's lineage from its metadata: `(name, license)` of each constituent with a
/// license.
fn lineage(meta: &serde_json::Map<String, Value>) -> Vec<(String, String)> {
    let Some(Value::Array(items)) = meta.get(DERIVED_FROM) else { return Vec::new() };
    items
        .iter()
        .filter_map(|i| {
            let name = i.get("name").and_then(Value::as_str)?;
            let license = i.get("license").and_then(Value::as_str)?;
            Some((name.to_owned(), license.to_owned()))
        })
        .collect()
}

/// Calls `f(id, metadata)` for every document of a dataset, shard by shard.
fn for_each_document(
    store: &Store,
    dataset: &DatasetRecord,
    mut f: impl FnMut(&str, &serde_json::Map<String, Value>),
) -> Result<(), ReviewError> {
    let empty = serde_json::Map::new();
    for shard in &dataset.shards {
        let docs =
            prov_dataset::shard_documents(store, &shard.digest).map_err(|e| ReviewError::input(e.to_string()))?;
        for doc in docs {
            let doc = doc.map_err(|e| ReviewError::input(e.to_string()))?;
            let meta: Option<serde_json::Map<String, Value>> =
                doc.metadata.as_deref().and_then(|m| serde_json::from_str(m).ok());
            f(&doc.id, meta.as_ref().unwrap_or(&empty));
        }
    }
    Ok(())
}

/// Finds the subject a reviewer named: `license:KEY`, `record:ID`, `source:NAME`, or a bare
/// name matching exactly one of them (a license string in any spelling that normalises to a
/// key, a record id, a source name).
pub fn find_subject<'r>(review: &'r Review, arg: &str) -> Result<&'r ReviewSubject, ReviewError> {
    let (kind, name) = match arg.split_once(':') {
        Some(("license", n)) => (Some(Kind::License), n),
        Some(("record", n)) => (Some(Kind::Record), n),
        Some(("source", n)) => (Some(Kind::Source), n),
        _ => (None, arg),
    };
    let key = license_key(name);
    let matches: Vec<&ReviewSubject> = review
        .subjects
        .iter()
        .filter(|s| kind.is_none_or(|k| k == s.kind))
        .filter(|s| match s.kind {
            Kind::License => s.name == key || s.declared.contains_key(name),
            Kind::Record | Kind::Source => s.name == name,
        })
        .collect();
    match matches.as_slice() {
        [one] => Ok(one),
        [] => {
            let known: Vec<String> = review.subjects.iter().map(ReviewSubject::id).collect();
            let names: Vec<&str> = known.iter().map(String::as_str).collect();
            let e = ReviewError::input(format!("no license, record or source `{arg}` in the run's license stages"));
            Err(match prov_manifest::closest(arg, &names) {
                Some(c) => e.with_hint(format!("did you mean `{c}`? (`prov license queue --all` lists every subject)")),
                None => e.with_hint("`prov license queue --all` lists every subject"),
            })
        }
        many => Err(ReviewError::input(format!(
            "`{arg}` is ambiguous: {}",
            many.iter().map(|s| format!("`{}`", s.id())).collect::<Vec<_>>().join(", ")
        ))
        .with_hint("prefix it with its kind: `license:`, `record:` or `source:`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lineage_is_read_from_metadata() {
        let meta: serde_json::Map<String, Value> = serde_json::from_str(
            r#"{"derived_from":[{"name":"snli","license":"CC BY-SA 4.0"},{"name":"anli"},{"name":"mnli","license":"OANC"}]}"#,
        )
        .unwrap();
        assert_eq!(
            lineage(&meta),
            [("snli".to_owned(), "CC BY-SA 4.0".to_owned()), ("mnli".to_owned(), "OANC".to_owned())]
        );
        assert!(lineage(&serde_json::Map::new()).is_empty());
    }

    #[test]
    fn readings_name_the_rule_or_the_reason() {
        assert_eq!(reading("GPL-2+"), "GPL-2.0-or-later (debian)");
        assert!(reading("Unspecified").starts_with("unknown: not a license"), "{}", reading("Unspecified"));
    }
}
