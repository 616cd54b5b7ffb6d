//! `url-index`: a sorted, Merkle-rooted index `BLAKE3(url) -> id` of a dataset, so that
//! `prov prove --url` can map a URL to document ids and prove a URL absent.
//!
//! Ledgers are sorted by id and name no URLs (the robots ledger's evidence holds the host
//! only), so without this index a URL never seen could not be proven absent without the
//! corpus. The stage reads a dataset and writes one `file` output, `index`: JSON Lines of
//! `{"id":ID,"url":"blake3:<hex>"}` sorted by `url` then `id`, one entry per distinct pair, for
//! every document with a `url` (format: [`prov_dataset::url_index`]). Its statistics record the
//! index's Merkle root (`merkle_root`) and size (`entries`), which a proof checks against.
//! It changes no other stage's bytes: it only reads the dataset.

use prov_dataset::shard_documents;
use prov_dataset::url_index::{UrlIndexEntry, build_url_index};
use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{DatasetRecord, Determinism, OutputRef, OutputType};
use prov_store::ObjectKind;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The configuration of a `url-index` stage: none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UrlIndexConfig {}

/// The kind name of the `url-index` stage.
pub const URL_INDEX_KIND: &str = "url-index";

/// Indexes a dataset's URLs.
pub struct UrlIndexStage;

impl Stage for UrlIndexStage {
    fn kind(&self) -> &'static str {
        URL_INDEX_KIND
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "index a dataset's URLs (BLAKE3(url) -> id, sorted, Merkle-rooted) so that a URL's absence can be proven"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let config: UrlIndexConfig = parse_params(params)?;
        Ok(serde_json::to_value(config).expect("an empty object encodes"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("docs", vec![OutputType::Dataset])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("index".into(), OutputType::File)]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let ds = cx.input_record::<DatasetRecord>("docs")?;
        // Shards in parallel, then one sort: the bytes do not depend on the thread count.
        let parts: Vec<(Vec<UrlIndexEntry>, u64)> = cx.pool.install(|| {
            ds.shards
                .par_iter()
                .map(|s| {
                    let (mut entries, mut without) = (Vec::new(), 0u64);
                    for doc in shard_documents(cx.store, &s.digest)? {
                        let doc = doc?;
                        match &doc.url {
                            Some(url) => entries.push(UrlIndexEntry::new(url, &doc.id)),
                            None => without += 1,
                        }
                    }
                    Ok::<_, StageError>((entries, without))
                })
                .collect::<Result<_, _>>()
        })?;
        let without: u64 = parts.iter().map(|(_, w)| w).sum();
        let index = build_url_index(parts.into_iter().flat_map(|(e, _)| e).collect());
        let digest = cx.store.put_bytes(ObjectKind::Blob, &index.bytes)?;
        let mut out = StageOutput::default();
        out.outputs.insert("index".into(), OutputRef { output_type: OutputType::File, digest });
        out.stats.insert("documents".into(), Value::from(ds.rows));
        out.stats.insert("documents_without_url".into(), Value::from(without));
        out.stats.insert("entries".into(), Value::from(index.entries));
        out.stats.insert("merkle_root".into(), Value::from(index.root.to_string()));
        Ok(out)
    }
}
