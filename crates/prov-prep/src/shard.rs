//! `shard`: documents from JSON Lines or Parquet into N Parquet shards.
//!
//! Documents keep their input order (files of a directory in path order); shard `i` of `N`
//! holds documents `[i·n/N, (i+1)·n/N)` of the `n` documents, so shards differ in size by at
//! most one row and the result does not depend on the thread count.

use std::path::PathBuf;

use prov_dataset::{Document, InputFormat, ShardWriter, read_documents_as, shard_documents, write_dataset};
use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{Determinism, OutputRef, OutputType, Record, get_record};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The resolved configuration of a `shard` stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardConfig {
    /// Number of output shards.
    #[serde(default = "default_shards")]
    pub shards: u32,
}

fn default_shards() -> u32 {
    1
}

/// Writes documents into deterministic Parquet shards.
pub struct ShardStage;

/// Where the documents come from: files to read in order, or a dataset's shards.
enum Origin {
    Files(Vec<(PathBuf, InputFormat, String)>),
    Dataset(Vec<prov_store::Digest>),
}

fn origin(cx: &StageContext<'_>) -> Result<Origin, StageError> {
    let input = cx.input("docs")?;
    match get_record(cx.store, &input.digest)? {
        Record::Source(_) => {
            Ok(Origin::Files(prov_filter::source_files(cx.store, &input.digest, "docs", "a `shard` source")?))
        }
        Record::Dataset(ds) => Ok(Origin::Dataset(ds.shards.iter().map(|s| s.digest).collect())),
        other => Err(StageError::Input {
            input: "docs".into(),
            message: format!("expected a source or a dataset, found a {} record", other.kind_name()),
        }),
    }
}

fn for_each_document(
    cx: &StageContext<'_>,
    origin: &Origin,
    f: &mut dyn FnMut(Document) -> Result<(), StageError>,
) -> Result<(), StageError> {
    match origin {
        Origin::Files(files) => {
            for (path, format, display) in files {
                for doc in read_documents_as(path, *format, std::path::Path::new(display))? {
                    f(doc?)?;
                }
            }
        }
        Origin::Dataset(shards) => {
            for d in shards {
                for doc in shard_documents(cx.store, d)? {
                    f(doc?)?;
                }
            }
        }
    }
    Ok(())
}

impl Stage for ShardStage {
    fn kind(&self) -> &'static str {
        "shard"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "read JSON Lines or Parquet documents (id, text, url, date, language) into N deterministic Parquet shards"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let config: ShardConfig = parse_params(params)?;
        if config.shards == 0 || config.shards > 1_000_000 {
            return Err(ConfigError::at(
                &["shards"],
                format!("`shards` must be between 1 and 1000000, got {}", config.shards),
            ));
        }
        Ok(serde_json::to_value(config).expect("integers encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("docs", vec![OutputType::Source, OutputType::Dataset])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("dataset".into(), OutputType::Dataset)]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: ShardConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let origin = origin(cx)?;
        // First pass: count, so that shard boundaries are known before writing.
        let mut n: u64 = 0;
        for_each_document(cx, &origin, &mut |_| {
            n += 1;
            Ok(())
        })?;
        let shards = u64::from(config.shards);
        let boundary = |i: u64| -> u64 { (u128::from(i) * u128::from(n) / u128::from(shards)) as u64 };
        let mut written = Vec::with_capacity(config.shards as usize);
        let mut current = ShardWriter::new(cx.store)?;
        let mut index: u64 = 0;
        let mut shard: u64 = 0;
        let mut languages = std::collections::BTreeMap::new();
        for_each_document(cx, &origin, &mut |doc| {
            while index >= boundary(shard + 1) && shard + 1 < shards {
                let done = std::mem::replace(&mut current, ShardWriter::new(cx.store)?);
                written.push(done.finish()?);
                shard += 1;
            }
            *languages.entry(doc.language.clone().unwrap_or_else(|| "und".into())).or_insert(0u64) += 1;
            current.push(doc)?;
            index += 1;
            Ok(())
        })?;
        written.push(current.finish()?);
        while (written.len() as u64) < shards {
            written.push(ShardWriter::new(cx.store)?.finish()?);
        }
        if index != n {
            return Err(StageError::Input {
                input: "docs".into(),
                message: format!("the input changed while being read: {n} documents, then {index}"),
            });
        }
        let bytes: u64 = written.iter().map(|s| s.bytes).sum();
        let (digest, record) = write_dataset(cx.store, written)?;
        let mut out = StageOutput::default();
        out.outputs.insert("dataset".into(), OutputRef { output_type: OutputType::Dataset, digest });
        out.stats.insert("documents".into(), Value::from(record.rows));
        out.stats.insert("shards".into(), Value::from(record.shards.len()));
        out.stats.insert("bytes".into(), Value::from(bytes));
        out.stats.insert("languages".into(), serde_json::to_value(languages).expect("counts encode"));
        Ok(out)
    }
}
