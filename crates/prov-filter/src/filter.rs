//! What the filter stages share: their per-shard results, the statistics every filter
//! reports (documents and words per rule, removed per language, totals: what `prov run`
//! prints after a filter), and writing the kept documents and the ledger as the stage's two
//! outputs, `dataset` and `ledger`.
//!
//! A filter is a map-reduce stage ([`prov_exec::Stage::map_tasks`]): one map task per input
//! shard ([`map_shards`]) writes that shard's kept documents and ledger shard and returns
//! them as a [`FilteredShard`]; the reduce step ([`reduce_filtered`]) folds the results as they
//! arrive into [`FilterParts`], which writes the dataset and ledger records over every shard,
//! in shard order. The bytes are the same whether the tasks
//! ran in one process or on many machines.
//!
//! Memory: a filter streams each shard ([`prov_dataset::shard_documents`]) and holds only
//! that shard's ledger rows, which must be sorted by id before they are written. Counting the
//! rows per shard ([`write_counted_ledger`]) lets them go as soon as their shard is written,
//! and the reduce step sums the counts as results arrive, so what is held beyond one shard
//! grows with the number of shards only by the references the output records list.

use std::collections::BTreeMap;

use prov_dataset::{
    Document, LedgerDecision, LedgerRow, LedgerShard, ShardWriter, shard_documents, write_dataset, write_ledger,
    write_ledger_shard,
};
use prov_exec::{MapResultText, MapResults, StageContext, StageError, StageOutput, map_result_text};
use prov_manifest::{DatasetRecord, OutputRef, OutputType, ShardRef};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// One shard's result: the kept (or rewritten) documents, its ledger shard and its rows'
/// counts (see [`write_counted_ledger`]), as [`FilterParts::put`] takes it.
pub type CountedShard = (ShardRef, LedgerShard, FilterStats);

/// The outputs every filter declares; [`FilterParts::finish`] writes exactly these.
pub fn outputs() -> Vec<(String, OutputType)> {
    vec![("dataset".into(), OutputType::Dataset), ("ledger".into(), OutputType::Ledger)]
}

/// Documents and words per rule, removed per language, and in all.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterStats {
    by_rule: BTreeMap<String, (u64, u64)>,
    removed_by_language: BTreeMap<String, (u64, u64)>,
    total: (u64, u64),
}

impl FilterStats {
    /// Counts one ledger row.
    pub fn add(&mut self, r: &LedgerRow) {
        let bump = |e: &mut (u64, u64)| {
            e.0 += 1;
            e.1 += r.words;
        };
        bump(self.by_rule.entry(r.rule.clone()).or_default());
        bump(&mut self.total);
        if r.decision == LedgerDecision::Removed {
            bump(self.removed_by_language.entry(r.language.clone().unwrap_or_else(|| "und".into())).or_default());
        }
    }

    /// Counts rows.
    pub fn of(rows: &[LedgerRow]) -> Self {
        let mut stats = Self::default();
        for r in rows {
            stats.add(r);
        }
        stats
    }

    /// Adds another shard's counts.
    pub fn merge(&mut self, other: Self) {
        let sum = |a: &mut (u64, u64), b: (u64, u64)| {
            a.0 += b.0;
            a.1 += b.1;
        };
        for (k, v) in other.by_rule {
            sum(self.by_rule.entry(k).or_default(), v);
        }
        for (k, v) in other.removed_by_language {
            sum(self.removed_by_language.entry(k).or_default(), v);
        }
        sum(&mut self.total, other.total);
    }

    /// Returns `by_rule`, `removed_by_language` and `total`, each as documents and words.
    pub fn into_map(self) -> BTreeMap<String, Value> {
        let counts = |m: BTreeMap<String, (u64, u64)>| -> Value {
            m.into_iter().map(|(k, (d, w))| (k, json!({ "documents": d, "words": w }))).collect()
        };
        BTreeMap::from([
            ("by_rule".into(), counts(self.by_rule)),
            ("removed_by_language".into(), counts(self.removed_by_language)),
            ("total".into(), json!({ "documents": self.total.0, "words": self.total.1 })),
        ])
    }
}

/// What one map task of a filter returns: its shard's kept (or rewritten) documents, its
/// ledger shard, their counts, and what the filter counts besides (`extra`, summed by its
/// reduce step).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilteredShard {
    /// The documents written.
    pub shard: ShardRef,
    /// The ledger shard.
    pub ledger: LedgerShard,
    /// Its rows' counts.
    pub counts: FilterStats,
    /// The filter's own counts.
    #[serde(default)]
    pub extra: Value,
}

/// The number of map tasks of a filter over input `docs`: one per shard.
pub fn shard_tasks(cx: &StageContext<'_>) -> Result<Option<usize>, StageError> {
    Ok(Some(cx.input_record::<DatasetRecord>("docs")?.shards.len()))
}

/// Runs `task` for each shard of input `docs` that `tasks` names (with the task's index), in
/// parallel on the stage's pool, and returns its results as JSON text in the order of
/// `tasks`: the map step of a stage with one map task per input shard.
pub fn map_input_shards<T: serde::Serialize>(
    cx: &StageContext<'_>,
    tasks: &[usize],
    task: impl Fn(usize, &ShardRef) -> Result<T, StageError> + Sync,
) -> Result<Vec<MapResultText>, StageError> {
    let ds = cx.input_record::<DatasetRecord>("docs")?;
    let shards: Vec<&ShardRef> = tasks
        .iter()
        .map(|&t| {
            ds.shards.get(t).ok_or_else(|| StageError::MapResult {
                task: t,
                message: format!("the input has {} shards", ds.shards.len()),
            })
        })
        .collect::<Result<_, _>>()?;
    cx.pool.install(|| tasks.par_iter().zip(shards).map(|(&t, s)| map_result_text(t, &task(t, s)?)).collect())
}

/// Runs `filter` on each shard of input `docs` that `tasks` names ([`map_input_shards`]).
pub fn map_shards(
    cx: &StageContext<'_>,
    tasks: &[usize],
    filter: impl Fn(&ShardRef) -> Result<FilteredShard, StageError> + Sync,
) -> Result<Vec<MapResultText>, StageError> {
    map_input_shards(cx, tasks, |_, s| filter(s))
}

/// A filter's decision on one document as it is (the text unchanged): the ledger decision, the
/// rule and the evidence.
pub type Decided = (LedgerDecision, String, Option<serde_json::Map<String, Value>>);

/// The map step of a filter that only keeps or removes documents: each shard's documents are
/// decided by `decide` (which counts what it likes in the shard's `T`, returned as the result's
/// `extra`), the kept ones written and every decision put in the ledger.
pub fn map_decided<T: Default + Serialize>(
    cx: &StageContext<'_>,
    tasks: &[usize],
    decide: impl Fn(&Document, &mut T) -> Decided + Sync,
) -> Result<Vec<MapResultText>, StageError> {
    map_shards(cx, tasks, |s| {
        let mut out = ShardWriter::new(cx.store)?;
        let (mut rows, mut counts) = (Vec::new(), T::default());
        for doc in shard_documents(cx.store, &s.digest)? {
            let doc = doc?;
            let (decision, rule, evidence) = decide(&doc, &mut counts);
            rows.push(LedgerRow::of_document(&doc, decision, &rule, evidence));
            if decision != LedgerDecision::Removed {
                out.push(doc)?;
            }
        }
        filtered_shard(cx, out.finish()?, rows, json!(counts))
    })
}

/// The reduce step of a filter: reads each map result as it arrives, hands its `extra` to
/// `extra` (the filter's own counts, with the task's index), folds the rest into
/// [`FilterParts`] and lets it go, then writes the dataset and the ledger.
pub fn reduce_filtered(
    cx: &StageContext<'_>,
    results: MapResults<'_>,
    mut extra: impl FnMut(usize, Value) -> Result<(), StageError>,
) -> Result<StageOutput, StageError> {
    let mut parts = FilterParts::new(results.tasks());
    for result in results {
        let (task, value) = result?;
        let shard: FilteredShard =
            serde_json::from_value(value).map_err(|e| StageError::MapResult { task, message: e.to_string() })?;
        parts.put(task, (shard.shard, shard.ledger, shard.counts));
        extra(task, shard.extra)?;
    }
    parts.finish(cx)
}

/// Counts a shard's ledger rows, then writes them as its ledger shard.
pub fn write_counted_ledger(
    cx: &StageContext<'_>,
    rows: Vec<LedgerRow>,
) -> Result<(LedgerShard, FilterStats), StageError> {
    let stats = FilterStats::of(&rows);
    Ok((write_ledger_shard(cx.store, rows)?, stats))
}

/// Counts a shard's ledger rows, writes them as its ledger shard and returns the map result
/// with the shard written before.
pub fn filtered_shard(
    cx: &StageContext<'_>,
    shard: ShardRef,
    rows: Vec<LedgerRow>,
    extra: Value,
) -> Result<FilteredShard, StageError> {
    let (ledger, counts) = write_counted_ledger(cx, rows)?;
    Ok(FilteredShard { shard, ledger, counts, extra })
}

/// What a filter keeps of its shards until it writes its outputs: each shard's output and
/// ledger shard references, in shard order, and the statistics summed as shards finish (in
/// any order: the sums do not depend on it). Nothing else of a shard's result is held, so what
/// grows with the shard count is only what the dataset and ledger records list.
#[derive(Debug)]
pub struct FilterParts {
    shards: Vec<Option<(ShardRef, LedgerShard)>>,
    stats: FilterStats,
}

impl FilterParts {
    /// Room for `shards` shards.
    pub fn new(shards: usize) -> Self {
        Self { shards: vec![None; shards], stats: FilterStats::default() }
    }

    /// Takes shard `i`'s result: its references are kept, its counts added.
    ///
    /// # Panics
    ///
    /// When `i` is not below the number of shards given to [`FilterParts::new`] (a caller's
    /// bug: shard indexes come from the input dataset).
    pub fn put(&mut self, i: usize, (shard, ledger, counts): CountedShard) {
        self.stats.merge(counts);
        self.shards[i] = Some((shard, ledger));
    }

    /// Writes the dataset and the ledger over every shard, in shard order, and returns the
    /// stage output with both and the statistics. A shard without a result is an error.
    pub fn finish(self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let (mut shards, mut ledgers) = (Vec::with_capacity(self.shards.len()), Vec::with_capacity(self.shards.len()));
        for (task, part) in self.shards.into_iter().enumerate() {
            let (shard, ledger) =
                part.ok_or_else(|| StageError::MapResult { task, message: "no result for this shard".into() })?;
            shards.push(shard);
            ledgers.push(ledger);
        }
        let (dataset, _) = write_dataset(cx.store, shards)?;
        let (ledger, _) = write_ledger(cx.store, ledgers)?;
        let mut out = StageOutput::default();
        out.outputs.insert("dataset".into(), OutputRef { output_type: OutputType::Dataset, digest: dataset });
        out.outputs.insert("ledger".into(), OutputRef { output_type: OutputType::Ledger, digest: ledger });
        out.stats = self.stats.into_map();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: usize, decision: LedgerDecision, rule: &str, language: Option<&str>) -> LedgerRow {
        LedgerRow {
            id: format!("d{id}"),
            decision,
            rule: rule.into(),
            evidence: None,
            language: language.map(str::to_owned),
            words: id as u64,
        }
    }

    #[test]
    fn counts_merged_per_shard_equal_counts_of_all_rows() {
        let rows: Vec<LedgerRow> = (0..50)
            .map(|i| match i % 3 {
                0 => row(i, LedgerDecision::Kept, "x:kept", Some("en")),
                1 => row(i, LedgerDecision::Removed, "x:removed", Some(if i % 2 == 0 { "de" } else { "en" })),
                _ => row(i, LedgerDecision::Removed, "x:other", None),
            })
            .collect();
        let mut merged = FilterStats::default();
        for shard in rows.chunks(7) {
            merged.merge(FilterStats::of(shard));
        }
        assert_eq!(merged.into_map(), FilterStats::of(&rows).into_map());
    }

    /// Shards put in any order give the same outputs and statistics as in shard order (the
    /// parallel filters put them as they finish); a shard never put is an error, not a
    /// dataset with a hole.
    #[test]
    fn parts_put_in_any_order_write_the_same_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let store = prov_store::Store::init(&dir.path().join(".prov")).unwrap();
        let bench = prov_exec::testing::TestBench::new(1);
        let (config, inputs) = (Value::Null, BTreeMap::new());
        let cx = bench.context(&store, dir.path(), "f", &config, &inputs);
        let shards: Vec<CountedShard> = (0..5)
            .map(|s| {
                let mut w = prov_dataset::ShardWriter::new(&store).unwrap();
                w.push(prov_dataset::Document::new(format!("d{s}"), format!("text {s}"))).unwrap();
                let rows =
                    vec![row(s, LedgerDecision::Removed, "x:removed", Some(if s % 2 == 0 { "de" } else { "en" }))];
                let (ledger, stats) = write_counted_ledger(&cx, rows).unwrap();
                (w.finish().unwrap(), ledger, stats)
            })
            .collect();
        let write = |order: &[usize]| {
            let mut parts = FilterParts::new(shards.len());
            for &i in order {
                parts.put(i, shards[i].clone());
            }
            parts.finish(&cx)
        };
        let in_order = write(&[0, 1, 2, 3, 4]).unwrap();
        let shuffled = write(&[3, 0, 4, 2, 1]).unwrap();
        assert_eq!(in_order.outputs, shuffled.outputs);
        assert_eq!(in_order.stats, shuffled.stats);
        assert_eq!(in_order.stats["total"]["documents"], 5);
        assert!(matches!(write(&[0, 1, 3, 4]), Err(StageError::MapResult { task: 2, .. })));
    }
}
