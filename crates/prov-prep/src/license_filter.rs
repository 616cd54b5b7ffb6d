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
//! The stage's stats also list every distinct license string with its normalisation and
//! decision: the policy's verdicts for this dataset.

use std::collections::BTreeMap;

use prov_dataset::{Document, LedgerDecision, LedgerRow, ShardWriter, read_shard, word_count, write_ledger_shard};
use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_license::{Decision, Normalized, Policy, evaluate, normalize};
use prov_manifest::{Determinism, OutputType};
use rayon::prelude::*;
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
    /// Policy preset; `permissive` (redistribution and commercial use allowed).
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
    match name {
        "permissive" => Ok(Policy::permissive()),
        other => Err(ConfigError::at(&["policy"], format!("unknown policy `{other}`")).with_hint("known: permissive")),
    }
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

fn declared(doc: &Document, field: &str) -> Option<String> {
    let meta: Value = serde_json::from_str(doc.metadata.as_deref()?).ok()?;
    meta.get(field)?.as_str().map(str::to_owned)
}

/// Filters documents by their declared license.
pub struct LicenseStage;

impl Stage for LicenseStage {
    fn kind(&self) -> &'static str {
        "license"
    }
    // 2: the statistics of every filter (by rule, removed per language, total) besides the verdicts.
    fn version(&self) -> u32 {
        2
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
        InputSpec::Named(vec![("docs", vec![OutputType::Dataset])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        crate::filter::outputs()
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: LicenseConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let policy = policy_of(&config.policy)?;
        let ds = crate::filter::input_dataset(cx, "docs")?;
        let results: Vec<(crate::filter::ShardResult, BTreeMap<String, u64>)> = cx.pool.install(|| {
            ds.shards
                .par_iter()
                .map(|s| {
                    let mut kept = ShardWriter::new(cx.store)?;
                    let mut rows = Vec::new();
                    let mut strings: BTreeMap<String, u64> = BTreeMap::new();
                    // Distinct strings repeat: decide each once per shard.
                    let mut decided: BTreeMap<String, Verdict> = BTreeMap::new();
                    for doc in read_shard(cx.store, &s.digest)? {
                        let (decision, rule, evidence) = match declared(&doc, &config.field) {
                            None => {
                                let d = match config.missing {
                                    MissingLicense::Deny => LedgerDecision::Removed,
                                    MissingLicense::Allow => LedgerDecision::Kept,
                                };
                                (d, "license:missing", None)
                            }
                            Some(raw) => {
                                *strings.entry(raw.clone()).or_default() += 1;
                                let v = decided.entry(raw.clone()).or_insert_with(|| verdict(&raw, &policy));
                                (v.0, v.1, Some(v.2.clone()))
                            }
                        };
                        rows.push(LedgerRow {
                            id: doc.id.clone(),
                            decision,
                            rule: rule.to_owned(),
                            evidence,
                            language: doc.language.clone(),
                            words: word_count(&doc.text),
                        });
                        if decision == LedgerDecision::Kept {
                            kept.push(doc)?;
                        }
                    }
                    let ledger = write_ledger_shard(cx.store, rows.clone())?;
                    Ok::<_, StageError>(((kept.finish()?, ledger, rows), strings))
                })
                .collect::<Result<_, _>>()
        })?;
        let mut strings: BTreeMap<String, u64> = BTreeMap::new();
        let mut shards = Vec::with_capacity(results.len());
        for (shard, counts) in results {
            for (k, n) in counts {
                *strings.entry(k).or_default() += n;
            }
            shards.push(shard);
        }
        let verdicts: Map<String, Value> = strings
            .into_iter()
            .map(|(raw, n)| {
                let (decision, _, mut e) = verdict(&raw, &policy);
                e.remove("declared");
                e.insert("decision".into(), Value::String(decision.as_str().into()));
                e.insert("documents".into(), Value::from(n));
                (raw, Value::Object(e))
            })
            .collect();
        let mut out = crate::filter::finish(cx, shards)?;
        out.stats.insert("licenses".into(), Value::Object(verdicts));
        out.stats.insert("policy".into(), json!({ "name": policy.name(), "version": policy.version() }));
        Ok(out)
    }
}
