//! `pii`: replaces e-mail addresses, IP addresses and IBANs with markers in every document,
//! shard-parallel, and writes a ledger that counts what was replaced per document, never the
//! PII itself.
//!
//! | rule | decision | when |
//! | --- | --- | --- |
//! | `pii:redacted` | modified | at least one span was replaced (evidence: counts per type) |
//! | `pii:none` | kept | nothing matched |
//! | `pii:exempt` | kept | the document's `tag` metadata field is in `exempt_tags` (the report does not anonymise code and math) |

use prov_dataset::{Document, LedgerDecision, LedgerRow, ShardWriter, shard_documents, word_count};
use prov_exec::{
    ConfigError, InputSpec, MapResultText, MapResults, Stage, StageContext, StageError, StageOutput, parse_params,
};
use prov_manifest::{Determinism, OutputType};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{Mode, PiiCounts, Redactor, StrictOptions};

/// The resolved configuration of a `pii` stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PiiConfig {
    /// `apertus` (the released step, in a fixed order) or `strict`.
    #[serde(default = "default_mode")]
    pub mode: Mode,
    /// `strict` only: keep private, loopback and other non-public IP addresses.
    #[serde(default)]
    pub keep_private_ips: bool,
    /// Values of the documents' `tag` metadata field whose documents are left untouched.
    #[serde(default)]
    pub exempt_tags: Vec<String>,
}

fn default_mode() -> Mode {
    Mode::Apertus
}

/// Returns the document's `tag` metadata field, if it has one.
fn tag(doc: &Document) -> Option<String> {
    let meta: Value = serde_json::from_str(doc.metadata.as_deref()?).ok()?;
    meta.get("tag")?.as_str().map(str::to_owned)
}

/// Redacts PII in documents, with a ledger.
pub struct PiiStage;

impl Stage for PiiStage {
    fn kind(&self) -> &'static str {
        "pii"
    }
    // 2: the statistics of every filter (by rule, removed per language, total) besides `replaced`.
    // 3: the ledger has an id directory (prov_dataset::directory).
    // 4: the ledger record holds its shards' Merkle root, the list is in its parts record
    // (ledger schema 2), so that a proof stays logarithmic in the shard count.
    fn version(&self) -> u32 {
        4
    }
    fn summary(&self) -> &'static str {
        "replace e-mail addresses, IP addresses and IBANs by markers (apertus or strict mode), with a ledger of counts"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let mut config: PiiConfig = parse_params(params)?;
        if config.keep_private_ips && config.mode == Mode::Apertus {
            return Err(ConfigError::at(&["keep_private_ips"], "`keep_private_ips` applies to mode `strict` only")
                .with_hint("the apertus mode reproduces the released step, which redacts every IPv4 match"));
        }
        // A set: sorted and unique, so that equal configurations have one encoding.
        config.exempt_tags.sort();
        config.exempt_tags.dedup();
        Ok(serde_json::to_value(config).expect("strings and booleans encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("docs", vec![OutputType::Dataset])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        prov_filter::outputs()
    }
    fn map_tasks(&self, cx: &StageContext<'_>) -> Result<Option<usize>, StageError> {
        prov_filter::shard_tasks(cx)
    }

    fn map(&self, cx: &StageContext<'_>, tasks: &[usize]) -> Result<Vec<MapResultText>, StageError> {
        let config: PiiConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let redactor = Redactor::new(config.mode, StrictOptions { keep_private_ips: config.keep_private_ips });
        prov_filter::map_shards(cx, tasks, |s| {
            let mut out = ShardWriter::new(cx.store)?;
            let mut rows = Vec::new();
            let mut counts = PiiCounts::default();
            for doc in shard_documents(cx.store, &s.digest)? {
                let mut doc = doc?;
                let words = word_count(&doc.text);
                let (decision, rule, evidence) = match tag(&doc) {
                    Some(t) if config.exempt_tags.contains(&t) => {
                        (LedgerDecision::Kept, "pii:exempt", Some(json!({ "tag": t })))
                    }
                    _ => {
                        let r = redactor.redact(&doc.text);
                        let c = r.counts();
                        if c.total() == 0 {
                            (LedgerDecision::Kept, "pii:none", None)
                        } else {
                            counts.email += c.email;
                            counts.ip += c.ip;
                            counts.iban += c.iban;
                            doc.text = r.text.into_owned();
                            (LedgerDecision::Modified, "pii:redacted", Some(json!(c)))
                        }
                    }
                };
                rows.push(LedgerRow {
                    id: doc.id.clone(),
                    decision,
                    rule: rule.to_owned(),
                    evidence: evidence.and_then(prov_dataset::evidence),
                    language: doc.language.clone(),
                    words,
                });
                out.push(doc)?;
            }
            prov_filter::filtered_shard(cx, out.finish()?, rows, json!(counts))
        })
    }

    fn reduce(&self, cx: &StageContext<'_>, results: MapResults<'_>) -> Result<StageOutput, StageError> {
        let mut total = PiiCounts::default();
        let mut out = prov_filter::reduce_filtered(cx, results, |task, extra| {
            let counts: PiiCounts =
                serde_json::from_value(extra).map_err(|e| StageError::MapResult { task, message: e.to_string() })?;
            total.email += counts.email;
            total.ip += counts.ip;
            total.iban += counts.iban;
            Ok(())
        })?;
        out.stats.insert("replaced".into(), json!(total));
        Ok(out)
    }
}
