//! `sample`: seeded sampling, shard by shard.
//!
//! Each document gets the key `u64::from_le_bytes(BLAKE3(seed LE || id)[..8])`, which depends
//! on nothing but the seed and the document id, so the sample is the same whatever the
//! sharding, order or thread count.
//!
//! - `fraction: f` keeps a document when `key < f · 2^64` (independent Bernoulli trials);
//! - `rows: k` keeps the `k` documents with the smallest keys (ties broken by id), found in
//!   two phases: each shard proposes its `k` smallest, then one threshold is chosen.
//!
//! Output shard `i` holds the kept documents of input shard `i`, in input order.

use prov_dataset::{ShardWriter, sample_key, shard_documents, write_dataset};
use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{DatasetRecord, Determinism, Finite, OutputRef, OutputType, ShardRef};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The resolved configuration of a `sample` stage: exactly one of `fraction` and `rows`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleConfig {
    /// Probability of keeping each document, in (0, 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction: Option<Finite>,
    /// Exact number of documents to keep (all when the dataset is smaller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
}

/// Samples documents with a seed.
pub struct SampleStage;

enum Rule {
    Below(u128),
    UpTo((u64, String)),
    Everything,
    Nothing,
}

impl Stage for SampleStage {
    fn kind(&self) -> &'static str {
        "sample"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "keep a seeded sample of documents (a fraction, or an exact number of rows), shard-parallel"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let config: SampleConfig = parse_params(params)?;
        match (&config.fraction, &config.rows) {
            (Some(f), None) if f.get() > 0.0 && f.get() <= 1.0 => {}
            (Some(f), None) => {
                return Err(ConfigError::at(&["fraction"], format!("`fraction` must be in (0, 1], got {}", f.get())));
            }
            (None, Some(_)) => {}
            _ => {
                return Err(ConfigError::at(&[], "give exactly one of `fraction` and `rows`")
                    .with_hint("for example `params: {fraction: 0.1}`"));
            }
        }
        Ok(serde_json::to_value(config).expect("finite numbers encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("docs", vec![OutputType::Dataset])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("dataset".into(), OutputType::Dataset)]
    }
    fn seed_names(&self) -> &'static [&'static str] {
        &["sample"]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: SampleConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let seed = cx.seed("sample")?;
        let ds = cx.input_record::<DatasetRecord>("docs")?;
        let rule = match (config.fraction, config.rows) {
            // f · 2^64 as u128 is exact at f = 1 (2^64), so every key is below it.
            (Some(f), _) => Rule::Below((f.get() * 18_446_744_073_709_551_616.0) as u128),
            (None, Some(k)) => {
                let k = usize::try_from(k).unwrap_or(usize::MAX);
                let proposals: Vec<Vec<(u64, String)>> = cx.pool.install(|| {
                    ds.shards
                        .par_iter()
                        .map(|s| {
                            let mut keys: Vec<(u64, String)> = shard_documents(cx.store, &s.digest)?
                                .map(|d| d.map(|d| (sample_key(seed, &d.id), d.id)))
                                .collect::<Result<_, _>>()?;
                            keys.sort();
                            keys.truncate(k);
                            Ok::<_, StageError>(keys)
                        })
                        .collect::<Result<_, _>>()
                })?;
                let mut all: Vec<(u64, String)> = proposals.into_iter().flatten().collect();
                all.sort();
                match k.checked_sub(1) {
                    None => Rule::Nothing,
                    Some(i) => all.get(i).map_or(Rule::Everything, |last| Rule::UpTo(last.clone())),
                }
            }
            (None, None) => return Err(StageError::Config(ConfigError::at(&[], "no `fraction` or `rows`"))),
        };
        let keep = |id: &str| match &rule {
            Rule::Below(t) => u128::from(sample_key(seed, id)) < *t,
            Rule::UpTo((key, last)) => (sample_key(seed, id), id) <= (*key, last.as_str()),
            Rule::Everything => true,
            Rule::Nothing => false,
        };
        let shards: Vec<ShardRef> = cx.pool.install(|| {
            ds.shards
                .par_iter()
                .map(|s| {
                    let mut w = ShardWriter::new(cx.store)?;
                    for doc in shard_documents(cx.store, &s.digest)? {
                        let doc = doc?;
                        if keep(&doc.id) {
                            w.push(doc)?;
                        }
                    }
                    Ok::<_, StageError>(w.finish()?)
                })
                .collect::<Result<_, _>>()
        })?;
        let (digest, record) = write_dataset(cx.store, shards)?;
        let mut out = StageOutput::default();
        out.outputs.insert("dataset".into(), OutputRef { output_type: OutputType::Dataset, digest });
        out.stats.insert("documents_in".into(), Value::from(ds.rows));
        out.stats.insert("documents_out".into(), Value::from(record.rows));
        Ok(out)
    }
}
