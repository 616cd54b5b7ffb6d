//! `license`: keeps only documents whose declared license the policy allows (the Apertus
//! report keeps only permissively licensed code and post-training data).
//!
//! Each document's license string is read from a metadata field (default `license`),
//! normalised to SPDX by `prov-license` and evaluated against the policy:
//!
//! | rule | decision | when |
//! | --- | --- | --- |
//! | `license:allowed` | kept | the expression is allowed (evidence: SPDX, normalisation and policy rules) |
//! | `license:denied` | removed | the expression is denied, or unknown (evidence: SPDX or the unknown reason, policy rule) |
//! | `license:missing` | removed, or kept with `missing: allow` | the document declares no license |
//!
//! Every decision is a verdict record: for each distinct license string the documents declare,
//! one [`VerdictRecord`] (reviewer `policy`, the policy rule, the SPDX expression or the string
//! as declared when it does not normalise, the normalisation and the decision as rationale),
//! about the input dataset. The records are the files of the stage's third output, `verdicts`,
//! a tree named by the declared strings (`GPL-2+.json`, `MIT%2FApache-2.0.json`: bytes other
//! than ASCII letters, digits and `+-._` percent-encoded), so that `prov verify` and `prov gc`
//! follow them like any output. A verdict decided in a run records no time (`decided_at` is
//! absent): the run's execution log holds it, and the stage stays bit-for-bit reproducible.
//! The stage's stats list every distinct string with its normalisation, decision, document
//! count and verdict record.
//!
//! # Reviewer verdicts
//!
//! The optional input `verdicts` is a source whose directory holds reviewer verdicts (written
//! by `prov license decide`, see `prov_license::review`): one canonical verdict record per
//! `.json` file, at `licenses/<key>.json` (every document declaring a license with that key)
//! or `records/<id>.json` (one document). Being a source, the directory is pinned by content
//! hash when the recipe is locked and its tree digest enters the stage key: a new or changed
//! verdict re-runs this stage (and whatever its outputs change downstream), an unchanged one
//! keeps the cache, and a replay reads the same verdicts. A reviewer verdict decides before the
//! policy (a record's before a license's):
//!
//! | rule | decision | when |
//! | --- | --- | --- |
//! | `license:reviewer-allowed` | kept | a reviewer verdict allows the document's license (evidence: as above, plus `verdict` and `reviewer`) |
//! | `license:reviewer-denied` | removed | a reviewer verdict denies it |
//!
//! The `verdicts` output then names, for a string a reviewer decided, the reviewer's verdict
//! record instead of the policy's, and holds each record verdict that decided a document as
//! `@<id>.json` (`@` is encoded in every string's file name, so the names cannot collide). A
//! verdicts file that is not a canonical reviewer verdict at its own path fails the stage,
//! naming the file. Without the input the stage's outputs are byte for byte those of a stage
//! without reviewer support, so existing runs keep their cache.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use prov_dataset::{Document, LedgerDecision, LedgerRow, ShardWriter, shard_documents};
use prov_exec::{
    ConfigError, InputSpec, MapResultText, MapResults, Stage, StageContext, StageError, StageOutput, parse_params,
};
use prov_license::{Decision, Normalized, Policy, Reviewed, ReviewedVerdicts, evaluate, normalize};
use prov_manifest::{
    Content, Determinism, OutputRef, OutputType, Record, SCHEMA_VERSION, TreeEntry, TreeRecord, VerdictRecord,
    get_record, get_typed, put_record,
};
use prov_store::Digest;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// What to do with a document that declares no license.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissingLicense {
    /// Remove it: no license is no permission.
    Deny,
    /// Keep it (for data whose license is decided elsewhere, e.g. per source).
    Allow,
}

/// The resolved configuration of a `license` stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LicenseConfig {
    /// Metadata field holding the declared license string.
    #[serde(default = "default_field")]
    pub field: String,
    /// Policy preset: `permissive` (redistribution and commercial use allowed) or `afm-code`
    /// (the AFM report's code licenses).
    #[serde(default = "default_policy")]
    pub policy: String,
    /// Documents without a license string.
    #[serde(default = "default_missing")]
    pub missing: MissingLicense,
}

fn default_field() -> String {
    "license".into()
}
fn default_policy() -> String {
    "permissive".into()
}
fn default_missing() -> MissingLicense {
    MissingLicense::Deny
}

fn policy_of(name: &str) -> Result<Policy, ConfigError> {
    Policy::preset(name).ok_or_else(|| {
        ConfigError::at(&["policy"], format!("unknown policy `{name}`"))
            .with_hint(format!("known: {}", Policy::PRESETS.join(", ")))
    })
}

/// What became of one distinct license string: decision, rule and evidence.
type Verdict = (LedgerDecision, &'static str, Map<String, Value>);

fn verdict(raw: &str, policy: &Policy) -> Verdict {
    let normalized = normalize(raw);
    let decision = evaluate(policy, &normalized);
    let mut evidence = Map::new();
    evidence.insert("declared".into(), Value::String(raw.to_owned()));
    match &normalized {
        Normalized::Spdx { expression, via } => {
            evidence.insert("spdx".into(), Value::String(expression.to_string()));
            evidence.insert("normalization".into(), Value::String(via.as_str().into()));
        }
        Normalized::Unknown { reason } => {
            evidence.insert("unknown".into(), Value::String(reason.to_string()));
        }
    }
    evidence.insert("policy_rule".into(), Value::String(decision.rule.as_str().into()));
    match decision.decision {
        Decision::Allow => (LedgerDecision::Kept, "license:allowed", evidence),
        Decision::Deny => (LedgerDecision::Removed, "license:denied", evidence),
    }
}

/// Applies a reviewer's verdict to the policy's evidence about a string.
fn reviewed(policy_verdict: &Verdict, r: &Reviewed<Digest>) -> Verdict {
    let mut evidence = policy_verdict.2.clone();
    evidence.insert("verdict".into(), Value::String(r.id.to_string()));
    evidence.insert("reviewer".into(), Value::String(r.verdict.reviewer.clone()));
    match r.verdict.decision {
        Decision::Allow => (LedgerDecision::Kept, "license:reviewer-allowed", evidence),
        Decision::Deny => (LedgerDecision::Removed, "license:reviewer-denied", evidence),
    }
}

/// Reads the reviewer verdicts of the optional `verdicts` input: a source directory.
fn reviewer_verdicts(cx: &StageContext<'_>) -> Result<ReviewedVerdicts<Digest>, StageError> {
    let Some(input) = cx.inputs.get("verdicts") else { return Ok(ReviewedVerdicts::default()) };
    let bad = |message: String| StageError::Input { input: "verdicts".into(), message };
    let tree = match get_record(cx.store, &input.digest)? {
        Record::Source(s) => match s.content {
            Content::Tree { digest, .. } => digest,
            Content::File { .. } => {
                return Err(bad(format!("source `{}` is a file; reviewer verdicts are a directory", s.name)));
            }
        },
        Record::Tree(_) => input.digest,
        other => return Err(bad(format!("a {} record, not a directory of verdicts", other.kind_name()))),
    };
    let tree = get_typed::<TreeRecord>(cx.store, &tree).map_err(|e| StageError::of_input("verdicts", e))?;
    let mut files = Vec::with_capacity(tree.entries.len());
    for e in &tree.entries {
        files.push((e.path.as_str(), e.digest, cx.store.read(&e.digest)?));
    }
    ReviewedVerdicts::from_files(files.iter().map(|(p, d, b)| (*p, *d, b.as_slice()))).map_err(|e| bad(e.to_string()))
}

/// The policy's verdict on one declared string, which `documents` documents of `subject` (the
/// input dataset) declare. Deterministic: no time, no order but the caller's.
fn verdict_record(subject: Digest, raw: &str, documents: u64, policy: &Policy) -> VerdictRecord {
    let normalized = normalize(raw);
    let decision = evaluate(policy, &normalized);
    let (noun, verb) = if documents == 1 { ("document", "declares") } else { ("documents", "declare") };
    let mut rationale = format!("{documents} {noun} {verb} `{raw}`; ");
    let spdx = match &normalized {
        Normalized::Spdx { expression, via } => {
            let _ = write!(rationale, "normalised to `{expression}` (rule: {})", via.as_str());
            expression.to_string()
        }
        Normalized::Unknown { reason } => {
            let _ = write!(rationale, "does not normalise: {reason}");
            raw.to_owned()
        }
    };
    let verb = match decision.decision {
        Decision::Allow => "allow",
        Decision::Deny => "deny",
    };
    let _ = write!(rationale, "; policy `{}` {}: {verb}: {}", policy.name(), policy.version(), decision.reason);
    VerdictRecord {
        schema: SCHEMA_VERSION,
        subject,
        spdx,
        record: None,
        decision: decision.decision,
        policy_version: format!("{} {}", policy.name(), policy.version()),
        rule: decision.rule.as_str().to_owned(),
        reviewer: "policy".into(),
        rationale,
        decided_at: None,
    }
}

/// The file name of a declared string's verdict in the `verdicts` tree: the string with every
/// byte but ASCII letters, digits and `+-._` percent-encoded, then `.json`. Injective, and
/// always a valid one-component path.
fn verdict_file_name(raw: &str) -> String {
    format!("{}.json", prov_license::encode_file_name(raw))
}

/// Stores one verdict record per declared string (with its document count) and the tree that
/// names them; returns the tree's digest and each string's verdict digest.
fn write_verdicts(
    cx: &StageContext<'_>,
    subject: Digest,
    strings: &BTreeMap<String, u64>,
    policy: &Policy,
    reviewers: &ReviewedVerdicts<Digest>,
    record_verdicts: &BTreeMap<String, Digest>,
) -> Result<(Digest, BTreeMap<String, Digest>), StageError> {
    let mut digests = BTreeMap::new();
    let mut entries = Vec::with_capacity(strings.len() + record_verdicts.len());
    for (raw, &n) in strings {
        let record = match reviewers.decide(None, raw) {
            Some(r) => Record::Verdict(r.verdict.clone()),
            None => Record::Verdict(verdict_record(subject, raw, n, policy)),
        };
        let size = record.to_bytes().map_err(prov_manifest::StoredError::from)?.len() as u64;
        let digest = put_record(cx.store, &record)?;
        let path = verdict_file_name(raw).parse().expect("an encoded name with a suffix is a valid path");
        entries.push(TreeEntry { path, digest, size, executable: false });
        digests.insert(raw.clone(), digest);
    }
    for (id, digest) in record_verdicts {
        let size = cx.store.read(digest)?.len() as u64;
        let path =
            format!("@{}", verdict_file_name(id)).parse().expect("an encoded name with a suffix is a valid path");
        entries.push(TreeEntry { path, digest: *digest, size, executable: false });
    }
    // Tree entries are sorted by path, which is not the strings' order (`%` sorts first).
    entries.sort_by(|a, b| a.path.as_str().cmp(b.path.as_str()));
    let tree = put_record(cx.store, &Record::Tree(TreeRecord { schema: SCHEMA_VERSION, entries }))?;
    Ok((tree, digests))
}

fn declared(doc: &Document, field: &str) -> Option<String> {
    let meta: Value = serde_json::from_str(doc.metadata.as_deref()?).ok()?;
    meta.get(field)?.as_str().map(str::to_owned)
}

/// One shard's result: the counted shard, its declared strings with document counts, and the
/// record verdicts that decided its documents.
/// What one map task counts besides its ledger: each declared license string's documents, and
/// the documents a reviewer's record verdict decided (by id).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShardLicenses {
    strings: BTreeMap<String, u64>,
    by_record: BTreeMap<String, Digest>,
}

/// Filters documents by their declared license.
pub struct LicenseStage;

impl Stage for LicenseStage {
    fn kind(&self) -> &'static str {
        "license"
    }
    // 2: the statistics of every filter (by rule, removed per language, total) besides the verdicts.
    // 3: a verdict record per distinct declared string, in the `verdicts` output.
    // 4: names joined by ` AND ` / ` OR ` normalise (the `compound` rule of prov-license).
    // 5: the ledger has an id directory (prov_dataset::directory).
    // 6: the ledger record holds its shards' Merkle root, the list is in its parts record
    // (ledger schema 2), so that a proof stays logarithmic in the shard count.
    fn version(&self) -> u32 {
        6
    }
    fn summary(&self) -> &'static str {
        "keep documents whose declared license (normalised to SPDX) the policy allows, with a ledger"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let config: LicenseConfig = parse_params(params)?;
        policy_of(&config.policy)?;
        if config.field.is_empty() {
            return Err(ConfigError::at(&["field"], "name the metadata field that holds the license"));
        }
        Ok(serde_json::to_value(config).expect("strings encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![
            ("docs", vec![OutputType::Dataset]),
            ("verdicts", vec![OutputType::Source, OutputType::Tree]),
        ])
    }
    fn optional_inputs(&self) -> &'static [&'static str] {
        &["verdicts"]
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        let mut outputs = prov_filter::outputs();
        outputs.push(("verdicts".into(), OutputType::Tree));
        outputs
    }
    fn map_tasks(&self, cx: &StageContext<'_>) -> Result<Option<usize>, StageError> {
        prov_filter::shard_tasks(cx)
    }

    fn map(&self, cx: &StageContext<'_>, tasks: &[usize]) -> Result<Vec<MapResultText>, StageError> {
        let config: LicenseConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let policy = policy_of(&config.policy)?;
        let reviewers = reviewer_verdicts(cx)?;
        prov_filter::map_shards(cx, tasks, |s| {
            let mut kept = ShardWriter::new(cx.store)?;
            let mut rows = Vec::new();
            let mut seen = ShardLicenses::default();
            // Distinct strings repeat: decide each once per shard.
            let mut decided: BTreeMap<String, Verdict> = BTreeMap::new();
            for doc in shard_documents(cx.store, &s.digest)? {
                let doc = doc?;
                let (decision, rule, evidence) = match declared(&doc, &config.field) {
                    None => {
                        let d = match config.missing {
                            MissingLicense::Deny => LedgerDecision::Removed,
                            MissingLicense::Allow => LedgerDecision::Kept,
                        };
                        (d, "license:missing", None)
                    }
                    Some(raw) => {
                        *seen.strings.entry(raw.clone()).or_default() += 1;
                        let v = decided.entry(raw.clone()).or_insert_with(|| verdict(&raw, &policy));
                        match reviewers.decide(Some(&doc.id), &raw) {
                            Some(r) => {
                                if r.verdict.record.is_some() {
                                    seen.by_record.insert(doc.id.clone(), r.id);
                                }
                                let (d, rule, e) = reviewed(v, r);
                                (d, rule, Some(e))
                            }
                            None => (v.0, v.1, Some(v.2.clone())),
                        }
                    }
                };
                rows.push(LedgerRow::of_document(&doc, decision, rule, evidence));
                if decision == LedgerDecision::Kept {
                    kept.push(doc)?;
                }
            }
            let extra = serde_json::to_value(seen).expect("license counts encode");
            prov_filter::filtered_shard(cx, kept.finish()?, rows, extra)
        })
    }

    fn reduce(&self, cx: &StageContext<'_>, results: MapResults<'_>) -> Result<StageOutput, StageError> {
        let config: LicenseConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let policy = policy_of(&config.policy)?;
        let subject = cx.input("docs")?.digest;
        let reviewers = reviewer_verdicts(cx)?;
        let mut strings: BTreeMap<String, u64> = BTreeMap::new();
        let mut by_record: BTreeMap<String, Digest> = BTreeMap::new();
        let mut out = prov_filter::reduce_filtered(cx, results, |task, extra| {
            let seen: ShardLicenses =
                serde_json::from_value(extra).map_err(|e| StageError::MapResult { task, message: e.to_string() })?;
            for (k, n) in seen.strings {
                *strings.entry(k).or_default() += n;
            }
            by_record.extend(seen.by_record);
            Ok(())
        })?;
        let (tree, records) = write_verdicts(cx, subject, &strings, &policy, &reviewers, &by_record)?;
        let verdicts: Map<String, Value> = strings
            .into_iter()
            .map(|(raw, n)| {
                let policy_verdict = verdict(&raw, &policy);
                let (decision, _, mut e) = match reviewers.decide(None, &raw) {
                    Some(r) => reviewed(&policy_verdict, r),
                    None => policy_verdict,
                };
                e.remove("declared");
                e.insert("decision".into(), Value::String(decision.as_str().into()));
                e.insert("documents".into(), Value::from(n));
                e.insert("verdict".into(), Value::String(records[&raw].to_string()));
                (raw, Value::Object(e))
            })
            .collect();
        out.outputs.insert("verdicts".into(), OutputRef { output_type: OutputType::Tree, digest: tree });
        out.stats.insert("licenses".into(), Value::Object(verdicts));
        if !by_record.is_empty() {
            let records: Map<String, Value> =
                by_record.into_iter().map(|(id, d)| (id, Value::String(d.to_string()))).collect();
            out.stats.insert("record_verdicts".into(), Value::Object(records));
        }
        out.stats.insert("policy".into(), json!({ "name": policy.name(), "version": policy.version() }));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prov_dataset::write_dataset;
    use prov_exec::StageInput;
    use prov_manifest::{Decision as VerdictDecision, closure};
    use prov_store::Store;

    fn permissive() -> Policy {
        Policy::permissive()
    }

    #[test]
    fn verdict_file_names_are_distinct_valid_paths() {
        let cases = [
            ("GPL-2+", "GPL-2+.json"),
            ("MIT/Apache-2.0", "MIT%2FApache-2.0.json"),
            ("CC BY-NC 4.0", "CC%20BY-NC%204.0.json"),
            ("a%2F", "a%252F.json"),
            ("", ".json"),
            ("..", "...json"),
            ("Lizenz ä", "Lizenz%20%C3%A4.json"),
        ];
        for (raw, name) in cases {
            assert_eq!(verdict_file_name(raw), name);
            assert!(name.parse::<prov_manifest::RelPath>().is_ok(), "{name}");
        }
    }

    #[test]
    fn a_verdict_carries_the_normalisation_and_the_policy_decision() {
        let subject = Digest::of(b"dataset");
        let v = verdict_record(subject, "GPL-3+", 2, &permissive());
        assert_eq!(v.subject, subject);
        assert_eq!((v.spdx.as_str(), v.decision), ("GPL-3.0-or-later", VerdictDecision::Deny));
        assert_eq!((v.rule.as_str(), v.reviewer.as_str()), ("not-in-allow-list", "policy"));
        assert_eq!(v.policy_version, "permissive 1");
        assert_eq!(v.decided_at, None);
        assert!(v.rationale.starts_with("2 documents declare `GPL-3+`; normalised to `GPL-3.0-or-later` (rule: debian); policy `permissive` 1: deny: "), "{}", v.rationale);

        let v = verdict_record(subject, "public-domain", 1, &permissive());
        assert_eq!(
            (v.spdx.as_str(), v.decision, v.rule.as_str()),
            ("public-domain", VerdictDecision::Deny, "unknown-license")
        );
        assert!(v.rationale.starts_with("1 document declares `public-domain`; "), "{}", v.rationale);
        assert!(v.rationale.contains("does not normalise: not a license"), "{}", v.rationale);

        let v = verdict_record(subject, "MIT", 5, &permissive());
        assert_eq!((v.spdx.as_str(), v.decision, v.rule.as_str()), ("MIT", VerdictDecision::Allow, "allow-list"));
    }

    fn doc(id: &str, license: Option<&str>) -> Document {
        let mut d = Document::new(id, format!("text of {id}"));
        d.metadata = license.map(|l| serde_json::json!({ "license": l }).to_string());
        d
    }

    /// Runs the stage on one dataset of two shards; returns the store's directory (kept alive),
    /// the store, the input digest and the output.
    fn run(docs: &[Vec<Document>]) -> (tempfile::TempDir, Store, Digest, StageOutput) {
        let (dir, store, input, out) = run_with(docs, &[]);
        (dir, store, input, out.unwrap())
    }

    /// Runs the stage with reviewer verdict files `(path, bytes)` as its `verdicts` input (a
    /// tree); without files, without the input.
    fn run_with(
        docs: &[Vec<Document>],
        verdict_files: &[(&str, Vec<u8>)],
    ) -> (tempfile::TempDir, Store, Digest, Result<StageOutput, StageError>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let mut shards = Vec::new();
        for shard in docs {
            let mut w = ShardWriter::new(&store).unwrap();
            for d in shard {
                w.push(d.clone()).unwrap();
            }
            shards.push(w.finish().unwrap());
        }
        let (input, _) = write_dataset(&store, shards).unwrap();
        let config = LicenseStage.resolve_config(&serde_json::json!({})).unwrap();
        let mut inputs =
            BTreeMap::from([("docs".to_owned(), StageInput { output_type: OutputType::Dataset, digest: input })]);
        if !verdict_files.is_empty() {
            let mut entries = Vec::new();
            for (path, bytes) in verdict_files {
                let digest = store.put_bytes(prov_store::ObjectKind::Blob, bytes).unwrap();
                entries.push(TreeEntry {
                    path: path.parse().unwrap(),
                    digest,
                    size: bytes.len() as u64,
                    executable: false,
                });
            }
            entries.sort_by(|a, b| a.path.as_str().cmp(b.path.as_str()));
            let tree = put_record(&store, &Record::Tree(TreeRecord { schema: SCHEMA_VERSION, entries })).unwrap();
            inputs.insert("verdicts".into(), StageInput { output_type: OutputType::Tree, digest: tree });
        }
        let bench = prov_exec::testing::TestBench::new(2);
        let out = LicenseStage.run(&bench.context(&store, dir.path(), "license", &config, &inputs));
        (dir, store, input, out)
    }

    fn reviewed_file(license: &str, record: Option<&str>, decision: VerdictDecision) -> (String, Vec<u8>) {
        let policy = permissive();
        let review = prov_license::Review {
            license,
            record,
            decision,
            policy: &policy,
            reviewer: "Ada Reviewer <ada@example.org>",
            reason: "read the package's copyright file",
            decided_at: "2026-11-22T10:00:00Z",
        };
        let v = prov_license::reviewer_verdict(Digest::of(b"reviewed"), &review).unwrap();
        (prov_license::verdict_path(&v), Record::Verdict(v).to_bytes().unwrap())
    }

    #[test]
    fn reviewer_verdicts_decide_before_the_policy_a_record_before_its_license() {
        let docs = vec![
            vec![doc("a", Some("public-domain")), doc("b", Some("public-domain"))],
            vec![doc("c", Some("GPL-2+")), doc("d", Some("MIT")), doc("e", Some("GPL-2+"))],
        ];
        let files = [
            reviewed_file("public-domain", None, VerdictDecision::Allow),
            reviewed_file("public-domain", Some("a"), VerdictDecision::Deny),
            reviewed_file("GPL-2.0-or-later", Some("c"), VerdictDecision::Allow),
        ];
        let files: Vec<(&str, Vec<u8>)> = files.iter().map(|(p, b)| (p.as_str(), b.clone())).collect();
        let (_dir, store, _, out) = run_with(&docs, &files);
        let out = out.unwrap();
        let by_rule = &out.stats["by_rule"];
        assert_eq!(by_rule["license:reviewer-allowed"]["documents"], 2, "{by_rule}");
        assert_eq!(by_rule["license:reviewer-denied"]["documents"], 1, "{by_rule}");
        assert_eq!(by_rule["license:allowed"]["documents"], 1, "{by_rule}");
        assert_eq!(by_rule["license:denied"]["documents"], 1, "{by_rule}");
        let licenses = &out.stats["licenses"];
        assert_eq!(licenses["public-domain"]["decision"], "kept", "{licenses}");
        assert_eq!(licenses["public-domain"]["reviewer"], "Ada Reviewer <ada@example.org>");
        assert_eq!(licenses["GPL-2+"]["decision"], "removed", "the record's verdict is not the license's");
        assert_eq!(out.stats["record_verdicts"].as_object().unwrap().keys().collect::<Vec<_>>(), ["a", "c"]);
        let t = prov_manifest::get_typed::<prov_manifest::TreeRecord>(&store, &out.outputs["verdicts"].digest).unwrap();
        let names: Vec<&str> = t.entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(names, ["@a.json", "@c.json", "GPL-2+.json", "MIT.json", "public-domain.json"]);
        let v = prov_manifest::get_typed::<prov_manifest::VerdictRecord>(&store, &t.entries[4].digest).unwrap();
        assert_eq!((v.reviewer.as_str(), v.rule.as_str()), ("Ada Reviewer <ada@example.org>", "manual"));

        // Without the input, nothing changes: the same outputs as a stage without reviewers.
        let (_d1, _s1, _, plain) = run_with(&docs, &[]);
        let (_d2, _s2, _, readme_only) = run_with(&docs, &[("README.md", b"reviewer verdicts".to_vec())]);
        let (plain, readme_only) = (plain.unwrap(), readme_only.unwrap());
        assert_eq!(plain.outputs["dataset"], readme_only.outputs["dataset"]);
        assert_eq!(plain.stats["licenses"], readme_only.stats["licenses"]);
    }

    #[test]
    fn a_misplaced_verdict_file_fails_the_stage_naming_it() {
        let (_, bytes) = reviewed_file("public-domain", None, VerdictDecision::Allow);
        let (_dir, _store, _, out) = run_with(&[vec![doc("a", Some("MIT"))]], &[("licenses/pd.json", bytes)]);
        let err = out.unwrap_err().to_string();
        assert_eq!(
            err,
            "input `verdicts`: verdict file `licenses/pd.json` decides `public-domain`, so it must be named `licenses/public-domain.json`"
        );
    }

    #[test]
    fn the_stage_writes_one_verdict_per_declared_string_in_its_outputs() {
        let docs = vec![
            vec![doc("a", Some("MIT")), doc("b", Some("GPL-2+")), doc("c", None)],
            vec![doc("d", Some("MIT/Apache-2.0")), doc("e", Some("GPL-2+")), doc("f", Some("public-domain"))],
        ];
        let (_dir, store, input, out) = run(&docs);
        let declared_outputs: Vec<String> = LicenseStage.outputs(&Value::Null).into_iter().map(|(n, _)| n).collect();
        assert_eq!(out.outputs.keys().cloned().collect::<Vec<_>>(), declared_outputs);
        let tree = out.outputs["verdicts"];
        assert_eq!(tree.output_type, OutputType::Tree);
        let t = prov_manifest::get_typed::<prov_manifest::TreeRecord>(&store, &tree.digest).unwrap();
        let names: Vec<&str> = t.entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(names, ["GPL-2+.json", "MIT%2FApache-2.0.json", "MIT.json", "public-domain.json"]);
        for e in &t.entries {
            let v = prov_manifest::get_typed::<prov_manifest::VerdictRecord>(&store, &e.digest).unwrap();
            assert_eq!(v.subject, input);
            assert_eq!(e.size, Record::Verdict(v.clone()).to_bytes().unwrap().len() as u64);
        }
        let licenses = &out.stats["licenses"];
        assert_eq!(licenses["GPL-2+"]["documents"], 2);
        assert_eq!(licenses["GPL-2+"]["verdict"], t.entries[0].digest.to_string());
        // What `prov verify` and `prov gc` walk: from the stage's outputs to every verdict and
        // through each to the input dataset.
        let roots: Vec<Digest> = out.outputs.values().map(|o| o.digest).collect();
        let (reachable, problems) = closure(&store, &roots);
        assert!(problems.is_empty());
        assert!(t.entries.iter().all(|e| reachable.contains(&e.digest)));
        assert!(reachable.contains(&input));

        // Bit for bit: the same input gives the same outputs and stats.
        let (_dir2, _store2, input2, again) = run(&docs);
        assert_eq!((input2, again), (input, out));
    }

    #[test]
    fn no_declared_string_gives_an_empty_verdict_tree() {
        let (_dir, store, _, out) = run(&[vec![doc("a", None)]]);
        let t = prov_manifest::get_typed::<prov_manifest::TreeRecord>(&store, &out.outputs["verdicts"].digest).unwrap();
        assert!(t.entries.is_empty());
        assert_eq!(out.stats["licenses"], serde_json::json!({}));
    }
}
