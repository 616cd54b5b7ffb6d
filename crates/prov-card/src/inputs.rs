//! What a card is made of: a run's records, read from the store, and the manifest each
//! number comes from.

use std::collections::{BTreeMap, BTreeSet};

use prov_manifest::{DatasetRecord, LoadedRun, LoadedStage, OutputType, SourceRecord, get_typed};
use prov_store::{Digest, Store};
use serde_json::Value;

use crate::CardError;

/// A source of the run: its source record and the stage record that imported it.
#[derive(Debug, Clone)]
pub struct Source {
    /// The source record's digest.
    pub digest: Digest,
    /// The source record.
    pub record: SourceRecord,
    /// Whether the source's documents flow into the output dataset (rather than being an
    /// input of a filter, such as a robots.txt snapshot or a benchmark).
    pub documents: bool,
}

/// The dataset a card describes: the `dataset` output of the stage asked for, or else the last
/// dataset output of the run, in plan order.
#[derive(Debug, Clone)]
pub struct Output {
    /// The stage that wrote it.
    pub stage: String,
    /// The dataset record's digest.
    pub digest: Digest,
    /// The dataset record.
    pub record: DatasetRecord,
}

/// Everything a card says, read from a run's records.
#[derive(Debug, Clone)]
pub struct CardInputs {
    /// The run, with every stage record in plan order.
    pub run: LoadedRun,
    /// Every source, in plan order.
    pub sources: Vec<Source>,
    /// The output dataset.
    pub output: Output,
    /// The stages the output's documents went through, from the first (a `shard` stage, when
    /// there is one) to the one that wrote the output, in order.
    pub chain: Vec<usize>,
}

impl CardInputs {
    /// Reads a run record and every stage and source record it names, for the card of the
    /// run's last dataset output in plan order.
    pub fn read(store: &Store, run_manifest: &Digest) -> Result<Self, CardError> {
        Self::read_output(store, run_manifest, None)
    }

    /// Like [`CardInputs::read`], for the `dataset` output of stage `stage` when given (a run
    /// with several outputs, such as documents and sentence pairs, has a card for each).
    pub fn read_output(store: &Store, run_manifest: &Digest, stage: Option<&str>) -> Result<Self, CardError> {
        let run = LoadedRun::load(store, *run_manifest)?;
        let stages = run.stages();
        let dataset_of = |(i, s): (usize, &prov_manifest::LoadedStage)| {
            s.record.outputs.get("dataset").filter(|o| o.output_type == OutputType::Dataset).map(|o| (i, o.digest))
        };
        let (out_index, out_digest) = match stage {
            Some(name) => stages
                .iter()
                .enumerate()
                .find(|(_, s)| s.record.name.as_str() == name)
                .and_then(dataset_of)
                .ok_or_else(|| CardError::NoSuchDataset { run: *run_manifest, stage: name.to_owned() })?,
            // The last dataset in plan order (the documents' own chain ends at a filter).
            None => stages
                .iter()
                .enumerate()
                .rev()
                .find_map(dataset_of)
                .ok_or(CardError::NoDataset { run: *run_manifest })?,
        };
        let record = get_typed::<DatasetRecord>(store, &out_digest)?;
        let output = Output { stage: stages[out_index].record.name.as_str().to_owned(), digest: out_digest, record };
        let chain = chain(stages, out_index);
        let ancestors = ancestors(stages, out_index);
        let doc_inputs: BTreeSet<Digest> =
            chain.first().map(|&i| stages[i].record.inputs.values().copied().collect()).unwrap_or_default();
        let mut sources = Vec::new();
        for (i, s) in stages.iter().enumerate() {
            if s.record.stage_kind != "source" || !ancestors.contains(&i) {
                continue;
            }
            let Some(o) = s.record.outputs.get("source") else { continue };
            let record = get_typed::<SourceRecord>(store, &o.digest)?;
            sources.push(Source { digest: o.digest, record, documents: doc_inputs.contains(&o.digest) });
        }
        Ok(Self { run, sources, output, chain })
    }

    /// The stages of the chain, in order.
    pub fn chain_stages(&self) -> impl Iterator<Item = &LoadedStage> {
        self.chain.iter().map(|&i| &self.run.stages()[i])
    }

    /// The filter stages of the chain: those that record `by_rule` statistics.
    pub fn filters(&self) -> impl Iterator<Item = &LoadedStage> {
        self.chain_stages().filter(|s| s.record.stats.contains_key("by_rule"))
    }

    /// The first stage of the chain of the given kind.
    pub fn chain_stage(&self, kind: &str) -> Option<&LoadedStage> {
        self.chain_stages().find(|s| s.record.stage_kind == kind)
    }

    /// Documents per language in the output: the first stage's `languages` count less every
    /// filter's `removed_by_language`. Returns the counts and whether they add up to the
    /// output's rows (they do when every stage of the chain records its removals).
    pub fn kept_languages(&self) -> (BTreeMap<String, u64>, bool) {
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        if let Some(first) = self.chain_stages().next()
            && let Some(Value::Object(langs)) = first.record.stats.get("languages")
        {
            for (l, n) in langs {
                counts.insert(l.clone(), n.as_u64().unwrap_or(0));
            }
        }
        for s in self.filters() {
            if let Some(Value::Object(removed)) = s.record.stats.get("removed_by_language") {
                for (l, v) in removed {
                    let n = v.get("documents").and_then(Value::as_u64).unwrap_or(0);
                    let c = counts.entry(l.clone()).or_default();
                    *c = c.saturating_sub(n);
                }
            }
        }
        counts.retain(|_, n| *n > 0);
        let total: u64 = counts.values().sum();
        (counts, total == self.output.record.rows)
    }
}

/// The last stage before `before` that wrote `digest`, if any. Two stages can write the same
/// digest (a filter that keeps every document passes its input through byte for byte), and the
/// consumer's input is the one planned last before it.
fn producer(stages: &[LoadedStage], digest: &Digest, before: usize) -> Option<usize> {
    stages[..before].iter().rposition(|s| s.record.outputs.values().any(|o| o.digest == *digest))
}

/// Follows the `docs` input back from the stage at `last` while it names a dataset written by
/// another stage.
fn chain(stages: &[LoadedStage], last: usize) -> Vec<usize> {
    let mut out = vec![last];
    let mut at = last;
    while let Some(d) = stages[at].record.inputs.get("docs").copied() {
        match producer(stages, &d, at) {
            Some(p) if stages[p].record.stage_kind != "source" && !out.contains(&p) => {
                out.push(p);
                at = p;
            }
            _ => break,
        }
    }
    out.reverse();
    out
}

/// Every stage the stage at `last` depends on, itself included.
fn ancestors(stages: &[LoadedStage], last: usize) -> BTreeSet<usize> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![last];
    while let Some(i) = todo.pop() {
        if !seen.insert(i) {
            continue;
        }
        for d in stages[i].record.inputs.values() {
            if let Some(p) = producer(stages, d, i) {
                todo.push(p);
            }
        }
    }
    seen
}
