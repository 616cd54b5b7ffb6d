//! `url-index`: a sorted, Merkle-rooted index `BLAKE3(url) -> id` of a dataset, so that
//! `prov prove --url` can map a URL to document ids and prove a URL absent.
//!
//! Ledgers are sorted by id and name no URLs (the robots ledger's evidence holds the host
//! only), so without this index a URL never seen could not be proven absent without the
//! corpus. The stage reads a dataset and writes one `tree` output, `index`: the entries
//! `{"id":ID,"url":"blake3:<hex>"}` sorted by `url` then `id`, one per distinct pair, for
//! every document with a `url`, in JSON Lines chunks with the `index.json` that lists them
//! (format: [`prov_dataset::url_index`]). Its statistics record the index's Merkle root
//! (`merkle_root`) and size (`entries`), which a proof checks against.
//! It changes no other stage's bytes: it only reads the dataset.
//!
//! One map task per shard (an array task under `--executor slurm`) writes the shard's entries
//! as one sorted run to the stage's work directory and names it with its digest; the reduce
//! step checks every run, merges them and streams the index to the store.

use prov_dataset::chunked::{CHUNK_ENTRIES, ChunkWriter};
use prov_dataset::shard_documents;
use prov_dataset::url_index::{UrlIndexEntry, write_url_index};
use prov_exec::{
    ConfigError, InputSpec, MapResultText, MapResults, Stage, StageContext, StageError, StageOutput, WorkFile,
    WorkFileRef, parse_params,
};
use prov_extsort::{ExternalSort, write_run_to};
use prov_manifest::{DatasetRecord, Determinism, OutputRef, OutputType};
use prov_store::Digest;
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
    // 2: the index in chunks of 65,536 entries (a tree with `index.json`), not one file.
    fn version(&self) -> u32 {
        2
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
        vec![("index".into(), OutputType::Tree)]
    }
    /// One map task per shard: its entries as one sorted run, in the work directory.
    fn map_tasks(&self, cx: &StageContext<'_>) -> Result<Option<usize>, StageError> {
        Ok(Some(cx.input_record::<DatasetRecord>("docs")?.shards.len()))
    }
    fn map(&self, cx: &StageContext<'_>, tasks: &[usize]) -> Result<Vec<MapResultText>, StageError> {
        let work = cx.work_dir()?;
        prov_filter::map_input_shards(cx, tasks, |i, shard| {
            // `BLAKE3(url) ‖ id`, whose byte order is the index's (`url` keys are that digest in
            // lowercase hex), so the bytes depend on no thread count.
            let (mut records, mut without) = (Vec::new(), 0u64);
            for doc in shard_documents(cx.store, &shard.digest)? {
                let doc = doc?;
                match &doc.url {
                    Some(url) => {
                        let mut r = Digest::of(url.as_bytes()).as_bytes().to_vec();
                        r.extend_from_slice(doc.id.as_bytes());
                        records.push(r);
                    }
                    None => without += 1,
                }
            }
            let mut run = WorkFile::create(&work, &run_name(i))?;
            write_run_to(&mut records, &mut run)?;
            Ok(ShardUrls { without, urls: run.finish()? })
        })
    }
    /// One merge of the tasks' runs, streamed to the store.
    fn reduce(&self, cx: &StageContext<'_>, results: MapResults<'_>) -> Result<StageOutput, StageError> {
        let ds = cx.input_record::<DatasetRecord>("docs")?;
        let (work, scratch) = (cx.work_dir()?, cx.scratch()?);
        let sort = ExternalSort::<Vec<u8>>::new(scratch.path(), "urls", SORT_BUDGET);
        let mut without = 0u64;
        for r in results {
            let (task, value) = r?;
            let shard: ShardUrls =
                serde_json::from_value(value).map_err(|e| StageError::MapResult { task, message: e.to_string() })?;
            sort.adopt_run(&shard.urls.check_named(&work, task, &run_name(task))?);
            without += shard.without;
        }
        let mut index = ChunkWriter::new(Some(cx.store), CHUNK_ENTRIES);
        let mut last: Option<Vec<u8>> = None;
        for r in sort.finish()? {
            let r = r?;
            if last.as_ref() == Some(&r) {
                continue;
            }
            // A record the sort read back damaged (the scratch disk) is an error, not a panic.
            let damaged = || std::io::Error::new(std::io::ErrorKind::InvalidData, "a damaged URL index sort record");
            let url = r.get(..32).and_then(|d| Digest::try_from(d).ok()).ok_or_else(damaged)?;
            let id = std::str::from_utf8(&r[32..]).map_err(|_| damaged())?.to_owned();
            index.push(UrlIndexEntry { url: url.to_string(), id })?;
            last = Some(r);
        }
        let index = index.finish()?;
        let digest = write_url_index(cx.store, &index)?;
        let (entries, root) = (index.entries, index.root);
        let mut out = StageOutput::default();
        out.outputs.insert("index".into(), OutputRef { output_type: OutputType::Tree, digest });
        out.stats.insert("documents".into(), Value::from(ds.rows));
        out.stats.insert("documents_without_url".into(), Value::from(without));
        out.stats.insert("entries".into(), Value::from(entries));
        out.stats.insert("merkle_root".into(), Value::from(root.to_string()));
        Ok(out)
    }
}

/// What map task `S` leaves: how many of shard `S`'s documents have no URL, and its entries
/// as one sorted run (`urls-S.bin`, byte strings as `prov-extsort` writes them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShardUrls {
    without: u64,
    urls: WorkFileRef,
}

/// The name of shard `shard`'s run.
fn run_name(shard: usize) -> String {
    format!("urls-{shard:06}.bin")
}

/// What the external sort may buffer before it spills a run.
const SORT_BUDGET: usize = 64 << 20;
