//! What the filter stages share: their per-shard results, the statistics every filter
//! reports (documents and words per rule, removed per language, totals: what `prov run`
//! prints after a filter), and writing the kept documents and the ledger as the stage's two
//! outputs, `dataset` and `ledger`.
//!
//! A filter is a map-reduce stage ([`prov_exec::Stage::map_tasks`]): one map task per input
//! shard ([`map_shards`]) writes that shard's kept documents and ledger shard and returns
//! them as a [`FilteredShard`]; the reduce step ([`reduce_filtered`]) writes the dataset and
//! ledger records over every shard, in shard order. The bytes are the same whether the tasks
//! ran in one process or on many machines.
//!
//! Memory: a filter streams each shard ([`prov_dataset::shard_documents`]) and holds only
//! that shard's ledger rows, which must be sorted by id before they are written. Counting the
//! rows per shard ([`write_counted_ledger`]) lets them go as soon as their shard is written,
//! so nothing held grows with the number of shards.

use std::collections::BTreeMap;

use prov_dataset::{LedgerDecision, LedgerRow, LedgerShard, write_dataset, write_ledger, write_ledger_shard};
use prov_exec::{StageContext, StageError, StageOutput};
use prov_manifest::{DatasetRecord, OutputRef, OutputType, ShardRef};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// One shard's result: the kept (or rewritten) documents, its ledger shard and its rows'
/// counts (see [`write_counted_ledger`]).
pub type CountedShard = (ShardRef, LedgerShard, FilterStats);

/// The outputs every filter declares; [`finish_counted`] writes exactly these.
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

/// Runs `filter` on each shard of input `docs` that `tasks` names, in parallel on the stage's
/// pool, and returns the results as JSON in the order of `tasks`.
pub fn map_shards(
    cx: &StageContext<'_>,
    tasks: &[usize],
    filter: impl Fn(&ShardRef) -> Result<FilteredShard, StageError> + Sync,
) -> Result<Vec<Value>, StageError> {
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
    cx.pool.install(|| {
        shards.par_iter().map(|s| Ok(serde_json::to_value(filter(s)?).expect("a filtered shard encodes"))).collect()
    })
}

/// Reads the map results back, in task order.
pub fn read_filtered(results: Vec<Value>) -> Result<Vec<FilteredShard>, StageError> {
    results
        .into_iter()
        .enumerate()
        .map(|(task, v)| serde_json::from_value(v).map_err(|e| StageError::MapResult { task, message: e.to_string() }))
        .collect()
}

/// The reduce step of a filter: [`finish_counted`] over the map results, which it returns
/// for the filter's own statistics.
pub fn reduce_filtered(
    cx: &StageContext<'_>,
    results: Vec<Value>,
) -> Result<(StageOutput, Vec<FilteredShard>), StageError> {
    let shards = read_filtered(results)?;
    let counted = shards.iter().map(|s| (s.shard.clone(), s.ledger.clone(), s.counts.clone())).collect();
    Ok((finish_counted(cx, counted)?, shards))
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

/// Sums the shards' statistics, writes the dataset and the ledger from the results (in
/// shard order) and returns the stage output with both and the statistics.
pub fn finish_counted(cx: &StageContext<'_>, results: Vec<CountedShard>) -> Result<StageOutput, StageError> {
    let mut stats = FilterStats::default();
    let (mut shards, mut ledgers) = (Vec::with_capacity(results.len()), Vec::with_capacity(results.len()));
    for (shard, ledger, counts) in results {
        stats.merge(counts);
        shards.push(shard);
        ledgers.push(ledger);
    }
    let (dataset, _) = write_dataset(cx.store, shards)?;
    let (ledger, _) = write_ledger(cx.store, ledgers)?;
    let mut out = StageOutput::default();
    out.outputs.insert("dataset".into(), OutputRef { output_type: OutputType::Dataset, digest: dataset });
    out.outputs.insert("ledger".into(), OutputRef { output_type: OutputType::Ledger, digest: ledger });
    out.stats = stats.into_map();
    Ok(out)
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
}
