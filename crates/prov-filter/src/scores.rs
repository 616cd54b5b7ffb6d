//! What the filters share that cut at quantiles of the corpus's own scores (`toxicity` at a
//! per-language quantile of toxicity, `perplexity` at `CCNet`'s per-language percentiles):
//! every document must be scored before any can be decided, so such a filter runs in two
//! passes, and nothing per document may stay in memory between them.
//!
//! Pass 1 is the stage's map tasks, one per input shard. Each scores its shard through a
//! [`ShardScorer`], which writes two work files and returns a [`ScoredShard`] naming them:
//! every document's score, or none (`scores-S.bin`, [`SCORE_FILE_W`] bytes a document, read
//! back in pass 2), and the scored documents' groups (their languages) and scores as one
//! sorted run (`sorted-S.bin`, [`RECORD_W`] bytes a record, for the quantiles).
//!
//! The reduce step checks every file against its task's result ([`CorpusScores::collect`]),
//! merges the sorted runs into each group's quantiles, reading only the ranks the quantiles
//! need ([`CorpusScores::quantiles`]), and runs pass 2 shard by shard, each shard's scores read
//! back in document order: [`decide_shards`] writes each shard's kept documents and ledger
//! from its documents and their scores.

use std::collections::BTreeMap;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use std::sync::Mutex;

use prov_dataset::{Document, LedgerDecision, LedgerRow, ShardWriter, shard_documents};
use prov_exec::{MapResults, StageContext, StageError, StageOutput, WorkFile, WorkFileRef};
use prov_extsort::{ExternalSort, write_run_to};
use prov_manifest::DatasetRecord;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A sorted record: the group's index among the stage's groups (which are in name order) and
/// the score (`f64` bits turned to sort in [`f64::total_cmp`] order), big endian: sorted, each
/// group's scores are adjacent and ascending.
pub const RECORD_W: usize = 12;

/// Per document in a shard's scores file: one byte (1 scored, 0 not) and the score as an
/// `f64`, little endian.
pub const SCORE_FILE_W: usize = 9;

/// The layout of the two files, named in every [`ScoredShard`]: a result of another layout
/// (from a build before [`SCORE_FILE_W`] was 9 bytes, say, left by a killed run) is refused
/// as a bad result, so that its task runs again instead of being misread.
const FORMAT: u32 = 2;

/// The data cards' quantiles: 0, 5, …, 100%.
pub fn card_fractions() -> Vec<f64> {
    (0..=20).map(|i| f64::from(i) / 20.0).collect()
}

/// What one external sort of scores may buffer before it spills a run.
const SORT_BUDGET: usize = 16 << 20;

/// The two ranks (0-based, in ascending order) that [`quantile_of`] reads for `q` of `n` values.
fn quantile_ranks(n: usize, q: f64) -> Option<(usize, usize)> {
    let last = n.checked_sub(1)?;
    let below = ((last as f64 * q).floor() as usize).min(last);
    Some((below, (below + 1).min(last)))
}

/// The `q` quantile of sorted values by linear interpolation between closest ranks: with
/// `h = (n - 1) * q`, `v[floor(h)] + (h - floor(h)) * (v[floor(h) + 1] - v[floor(h)])`
/// (Hyndman and Fan's type 7, `numpy.quantile`'s default), of `n` sorted values, reading only
/// the two it needs through `at`. `None` for no values.
pub fn quantile_of(n: usize, q: f64, at: impl Fn(usize) -> f64) -> Option<f64> {
    let (below, above) = quantile_ranks(n, q)?;
    let virtual_index = (n - 1) as f64 * q;
    let (lo, hi, frac) = (at(below), at(above), virtual_index - below as f64);
    // NumPy's `_lerp`, operation for operation, so that thresholds agree to the bit.
    Some(if frac >= 0.5 { hi - (hi - lo) * (1.0 - frac) } else { lo + (hi - lo) * frac })
}

/// Maps an `f64` to a `u64` whose unsigned order is [`f64::total_cmp`]'s.
fn sortable(x: f64) -> u64 {
    let b = x.to_bits();
    if b >> 63 == 1 { !b } else { b | 1 << 63 }
}

/// The inverse of [`sortable`].
fn unsortable(u: u64) -> f64 {
    f64::from_bits(if u >> 63 == 1 { u & !(1 << 63) } else { !u })
}

/// A scoring pass's files that disagree with each other or with the input.
fn input_error(message: String) -> StageError {
    StageError::Input { input: "docs".into(), message }
}

/// The name of shard `shard`'s work file `name`.
fn file_name(name: &str, shard: usize) -> String {
    format!("{name}-{shard:06}.bin")
}

/// The scoring pass over one shard (one map task), document by document.
pub struct ShardScorer<'g> {
    groups: &'g [String],
    scores: WorkFile,
    sorted: WorkFile,
    records: Vec<[u8; RECORD_W]>,
    counts: BTreeMap<String, u64>,
}

impl<'g> ShardScorer<'g> {
    /// Starts shard `shard`'s files in the stage's work directory `work`; `groups` (sorted by
    /// name, without repeats) are every group a score may be in.
    ///
    /// # Errors
    ///
    /// The file system's.
    pub fn create(work: &Path, shard: usize, groups: &'g [String]) -> Result<Self, StageError> {
        debug_assert!(groups.windows(2).all(|w| w[0] < w[1]), "groups are sorted and distinct");
        Ok(Self {
            groups,
            scores: WorkFile::create(work, &file_name("scores", shard))?,
            sorted: WorkFile::create(work, &file_name("sorted", shard))?,
            records: Vec::new(),
            counts: BTreeMap::new(),
        })
    }

    /// Records the next document's score in its group, or that it has none.
    ///
    /// # Errors
    ///
    /// A group that is not among the scorer's, and the file system's.
    pub fn push(&mut self, score: Option<(&str, f64)>) -> Result<(), StageError> {
        let mut entry = [0u8; SCORE_FILE_W];
        if let Some((group, score)) = score {
            let index = self
                .groups
                .binary_search_by(|g| g.as_str().cmp(group))
                .map_err(|_| input_error(format!("a score in group `{group}`, which the stage does not have")))?;
            let mut r = [0u8; RECORD_W];
            r[..4].copy_from_slice(&u32::try_from(index).expect("fewer than 2^32 groups").to_be_bytes());
            r[4..].copy_from_slice(&sortable(score).to_be_bytes());
            self.records.push(r);
            *self.counts.entry(group.to_owned()).or_default() += 1;
            entry[0] = 1;
            entry[1..].copy_from_slice(&score.to_le_bytes());
        }
        self.scores.write_all(&entry)?;
        Ok(())
    }

    /// Ends the shard: sorts its records into its run and names both files.
    ///
    /// # Errors
    ///
    /// The file system's.
    pub fn finish(self) -> Result<ScoredShard, StageError> {
        let Self { scores, mut sorted, mut records, counts, .. } = self;
        write_run_to(&mut records, &mut sorted)?;
        Ok(ScoredShard { format: FORMAT, counts, scores: scores.finish()?, sorted: sorted.finish()? })
    }
}

/// What scoring map task `S` leaves for the reduce step: how many documents of each group it
/// scored, and its two work files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoredShard {
    format: u32,
    counts: BTreeMap<String, u64>,
    scores: WorkFileRef,
    sorted: WorkFileRef,
}

/// A group's 21 data-card quantiles, and its values at a stage's own quantiles.
pub type CardAnd = (Vec<f64>, Vec<f64>);

/// Every shard's scores, checked, as the reduce step reads them.
pub struct CorpusScores {
    counts: BTreeMap<String, u64>,
    sorted: Vec<PathBuf>,
    scores: Vec<PathBuf>,
    /// What the sorted runs held, once merged: their scores' count and the wrapping sum of
    /// their bits, which pass 2 compares with the per-document files'.
    merged: std::sync::OnceLock<Fingerprint>,
}

/// A count of scores and the wrapping sum of their bits: equal for the same scores in any
/// order.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Fingerprint(u64, u64);

impl Fingerprint {
    fn add(&mut self, score: f64) {
        self.0 += 1;
        self.1 = self.1.wrapping_add(score.to_bits());
    }
}

impl CorpusScores {
    /// Reads the results of the scoring tasks over `shards` shards, each file checked to be
    /// what its task wrote under the name the reduce step expects.
    ///
    /// # Errors
    ///
    /// A result that does not parse or names other files, a file that is not what its task
    /// wrote, and fewer or more results than shards.
    pub fn collect(work: &Path, results: MapResults<'_>, shards: usize) -> Result<Self, StageError> {
        let mut out = Self {
            counts: BTreeMap::new(),
            sorted: Vec::new(),
            scores: Vec::new(),
            merged: std::sync::OnceLock::new(),
        };
        for r in results {
            let (task, value) = r?;
            let bad = |message: String| StageError::MapResult { task, message };
            let shard: ScoredShard = serde_json::from_value(value).map_err(|e| bad(e.to_string()))?;
            if shard.format != FORMAT {
                return Err(bad(format!("its files are of layout {}, this build reads {FORMAT}", shard.format)));
            }
            out.scores.push(shard.scores.check_named(work, task, &file_name("scores", task))?);
            out.sorted.push(shard.sorted.check_named(work, task, &file_name("sorted", task))?);
            for (group, n) in shard.counts {
                *out.counts.entry(group).or_default() += n;
            }
        }
        if out.scores.len() != shards {
            return Err(input_error(format!("{} scoring results for {shards} shards", out.scores.len())));
        }
        Ok(out)
    }

    /// How many documents of each group were scored.
    pub fn counts(&self) -> &BTreeMap<String, u64> {
        &self.counts
    }

    /// Each scored group's values at the quantiles `qs` ([`quantile_of`]) of its scores, in
    /// the order of `qs`; `groups` are the scorers'. The runs are merged in `scratch`, and only
    /// the ranks the quantiles need are kept: the same values as sorting each group's scores
    /// in memory, at no memory per document.
    ///
    /// # Errors
    ///
    /// The file system's, and runs that hold other counts than the results said (a run cut
    /// at a record boundary reads back as fewer scores, not as an error).
    pub fn quantiles(
        &self,
        groups: &[String],
        scratch: &Path,
        qs: &[f64],
    ) -> Result<BTreeMap<String, Vec<f64>>, StageError> {
        let count = |g: &str| self.counts.get(g).copied().unwrap_or(0) as usize;
        // Per group (by index): the ranks to keep, then the values found at them.
        let mut wanted: Vec<BTreeMap<usize, f64>> = groups
            .iter()
            .map(|g| {
                qs.iter()
                    .filter_map(|q| quantile_ranks(count(g), *q))
                    .flat_map(|(a, b)| [(a, f64::NAN), (b, f64::NAN)])
                    .collect()
            })
            .collect();
        let sort = ExternalSort::<[u8; RECORD_W]>::new(scratch, "scores", SORT_BUDGET);
        for run in &self.sorted {
            sort.adopt_run(run);
        }
        let (mut current, mut rank) = (usize::MAX, 0usize);
        let mut seen = vec![0usize; groups.len()];
        let mut merged = Fingerprint::default();
        for r in sort.finish()? {
            let r = r?;
            merged.add(unsortable(u64::from_be_bytes(r[4..].try_into().expect("eight bytes"))));
            let group = u32::from_be_bytes(r[..4].try_into().expect("four bytes")) as usize;
            if let Some(n) = seen.get_mut(group) {
                *n += 1;
            }
            if group != current {
                (current, rank) = (group, 0);
            }
            if let Some(v) = wanted.get_mut(group).and_then(|w| w.get_mut(&rank)) {
                *v = unsortable(u64::from_be_bytes(r[4..].try_into().expect("eight bytes")));
            }
            rank += 1;
        }
        let _ = self.merged.set(merged);
        let mut out = BTreeMap::new();
        for (i, g) in groups.iter().enumerate() {
            if seen[i] != count(g) {
                return Err(input_error(format!(
                    "the sorted scores of `{g}` are {}, the scoring pass scored {}",
                    seen[i],
                    count(g)
                )));
            }
            if seen[i] > 0 {
                let at = |k: usize| wanted[i][&k];
                out.insert(g.clone(), qs.iter().map(|q| quantile_of(seen[i], *q, at).expect("non-empty")).collect());
            }
        }
        Ok(out)
    }

    /// Each scored group's 21 data-card quantiles ([`card_fractions`]) and its values at the
    /// quantiles `extra`, in their order ([`Self::quantiles`]).
    ///
    /// # Errors
    ///
    /// [`Self::quantiles`]'.
    pub fn card_and(
        &self,
        groups: &[String],
        scratch: &Path,
        extra: &[f64],
    ) -> Result<BTreeMap<String, CardAnd>, StageError> {
        let card = card_fractions();
        let qs: Vec<f64> = card.iter().chain(extra).copied().collect();
        Ok(self
            .quantiles(groups, scratch, &qs)?
            .into_iter()
            .map(|(g, mut values)| {
                let extra = values.split_off(card.len());
                (g, (values, extra))
            })
            .collect())
    }

    /// Checks that pass 2 read the scores the quantiles were computed from: the same count and
    /// bits in the per-document files as in the sorted runs.
    fn check_read(&self, read: Fingerprint) -> Result<(), StageError> {
        match self.merged.get() {
            Some(merged) if *merged != read => Err(input_error(format!(
                "the sorted scores ({} of them) are not the per-document scores ({}) the decisions read",
                merged.0, read.0
            ))),
            _ => Ok(()),
        }
    }

    /// Shard `shard`'s scores, in document order, for pass 2.
    ///
    /// # Errors
    ///
    /// The file system's.
    pub fn shard(&self, shard: usize) -> Result<ShardScores, StageError> {
        let path = self.scores.get(shard).ok_or_else(|| input_error(format!("no scores of shard {shard}")))?;
        Ok(ShardScores { shard, file: BufReader::new(fs_err::File::open(path)?), read: Fingerprint::default() })
    }
}

/// A ledger row's decision, rule and evidence.
pub type Decision = (LedgerDecision, &'static str, Option<Map<String, Value>>);

/// Pass 2 over the input `docs`: each document decided by `decide` from its score of pass 1,
/// shard-parallel on the stage's threads; each shard's kept documents and ledger written and
/// folded into the stage's `dataset` and `ledger` outputs as it finishes. `decide` may tally
/// what the stage reports in a per-shard `T`, which `merge` adds to the stage's.
///
/// # Errors
///
/// A shard with another number of documents than it had in pass 1, and the store's.
pub fn decide_shards<T: Default + Send>(
    cx: &StageContext<'_>,
    corpus: &CorpusScores,
    decide: impl Fn(&Document, Option<f64>, &mut T) -> Result<Decision, StageError> + Sync,
    merge: impl Fn(&mut T, T) + Sync,
) -> Result<(StageOutput, T), StageError> {
    let ds = cx.input_record::<DatasetRecord>("docs")?;
    let parts = Mutex::new((crate::FilterParts::new(ds.shards.len()), T::default(), Fingerprint::default()));
    cx.pool.install(|| {
        ds.shards.par_iter().enumerate().try_for_each(|(i, s)| {
            let mut out = ShardWriter::new(cx.store)?;
            let mut rows = Vec::new();
            let mut tally = T::default();
            let mut scores = corpus.shard(i)?;
            for doc in shard_documents(cx.store, &s.digest)? {
                let doc = doc?;
                let (decision, rule, evidence) = decide(&doc, scores.next_score()?, &mut tally)?;
                rows.push(LedgerRow::of_document(&doc, decision, rule, evidence));
                if decision != LedgerDecision::Removed {
                    out.push(doc)?;
                }
            }
            let read = scores.finish_counted()?;
            let (ledger, stats) = crate::write_counted_ledger(cx, rows)?;
            let written = out.finish()?;
            let mut held = parts.lock().expect("no task panics holding the parts");
            held.0.put(i, (written, ledger, stats));
            merge(&mut held.1, tally);
            (held.2).0 += read.0;
            (held.2).1 = (held.2).1.wrapping_add(read.1);
            Ok::<_, StageError>(())
        })
    })?;
    let (parts, tally, read) = parts.into_inner().expect("no task panicked holding the parts");
    corpus.check_read(read)?;
    Ok((parts.finish(cx)?, tally))
}

/// One shard's scores, read back in document order.
pub struct ShardScores {
    shard: usize,
    file: BufReader<fs_err::File>,
    read: Fingerprint,
}

impl ShardScores {
    /// The next document's score, if it was scored.
    ///
    /// # Errors
    ///
    /// The shard has more documents than were scored: its object changed between the passes.
    pub fn next_score(&mut self) -> Result<Option<f64>, StageError> {
        let mut entry = [0u8; SCORE_FILE_W];
        self.file.read_exact(&mut entry).map_err(|_| self.changed())?;
        let score = f64::from_le_bytes(entry[1..].try_into().expect("eight bytes"));
        match entry[0] {
            0 => Ok(None),
            1 => {
                self.read.add(score);
                Ok(Some(score))
            }
            flag => Err(input_error(format!("shard {}'s scores hold the flag {flag}, neither 0 nor 1", self.shard))),
        }
    }

    /// Checks that every score was read.
    ///
    /// # Errors
    ///
    /// The shard has fewer documents than were scored.
    pub fn finish(self) -> Result<(), StageError> {
        self.finish_counted().map(|_| ())
    }

    /// [`Self::finish`], with what was read.
    fn finish_counted(mut self) -> Result<Fingerprint, StageError> {
        if self.file.read(&mut [0u8; 1])? != 0 {
            return Err(self.changed());
        }
        Ok(self.read)
    }

    /// A shard read twice gave a different number of documents: its object changed in the
    /// store between the passes (the store is content-addressed, so only damage does that).
    fn changed(&self) -> StageError {
        input_error(format!("shard {} gave a different number of documents on the second pass", self.shard))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
        quantile_of(sorted.len(), q, |i| sorted[i])
    }

    #[test]
    fn sortable_bits_follow_total_cmp() {
        let mut v = vec![-1.5, 0.0, -0.0, 3.25, f64::MIN, f64::MAX, -1e-300, 1e-300, f64::NEG_INFINITY, f64::INFINITY];
        let mut by_bits = v.clone();
        v.sort_by(f64::total_cmp);
        by_bits.sort_by_key(|x| sortable(*x));
        assert_eq!(
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            by_bits.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        for x in v {
            assert_eq!(unsortable(sortable(x)).to_bits(), x.to_bits());
        }
    }

    /// Values `numpy.quantile` (`NumPy` 2.4.6, linear) gives, to the bit, including both
    /// branches of its `_lerp`.
    #[test]
    #[allow(clippy::float_cmp)] // The point is equality to the bit.
    fn quantile_matches_numpy_linear() {
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.95), Some(3.849_999_999_999_999_6));
        let v: Vec<f64> = (0..31).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.95), Some(28.5));
        assert_eq!(quantile(&[0.1, 0.7, 2.9], 0.3), Some(0.459_999_999_999_999_96));
        assert_eq!(quantile(&[0.1, 0.7, 2.9], 0.6), Some(1.14));
        assert_eq!(quantile(&[7.0], 0.95), Some(7.0));
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&[1.0, 2.0], 1.0), Some(2.0));
        assert_eq!(quantile(&[1.0, 2.0], 0.0), Some(1.0));
    }

    /// Scores `shards` through the files, as the map tasks and the reduce step would.
    fn through_files(
        work: &Path,
        groups: &[String],
        shards: &[Vec<Option<(usize, f64)>>],
    ) -> (CorpusScores, Vec<Vec<Option<f64>>>) {
        let mut results = Vec::new();
        for (i, docs) in shards.iter().enumerate() {
            let mut scorer = ShardScorer::create(work, i, groups).unwrap();
            for d in docs {
                scorer.push(d.map(|(g, s)| (groups[g].as_str(), s))).unwrap();
            }
            results.push(serde_json::to_value(scorer.finish().unwrap()).unwrap());
        }
        let corpus = CorpusScores::collect(work, MapResults::of(results), shards.len()).unwrap();
        let back = (0..shards.len())
            .map(|i| {
                let mut r = corpus.shard(i).unwrap();
                let v = shards[i].iter().map(|_| r.next_score().unwrap()).collect();
                r.finish().unwrap();
                v
            })
            .collect();
        (corpus, back)
    }

    proptest::proptest! {
        /// Each group's quantiles from the files equal, to the bit, those of its scores sorted
        /// in memory, and every document's score reads back in order.
        #[test]
        fn quantiles_through_files_equal_the_in_memory_ones(
            shards in proptest::collection::vec(
                proptest::collection::vec(proptest::option::of((0usize..4, -8i32..8, 0u8..3)), 0..40), 1..6),
            q in 0.0f64..1.0,
        ) {
            let groups: Vec<String> = ["de", "en", "fr", "sw"].map(String::from).to_vec();
            let shards: Vec<Vec<Option<(usize, f64)>>> = shards
                .iter()
                .map(|s| s.iter().map(|d| d.map(|(g, v, f)| (g, f64::from(v) + f64::from(f) / 3.0))).collect())
                .collect();
            let work = tempfile::tempdir().unwrap();
            let scratch = tempfile::tempdir().unwrap();
            let (corpus, back) = through_files(work.path(), &groups, &shards);
            for (s, b) in shards.iter().zip(&back) {
                let expected: Vec<Option<u64>> = s.iter().map(|d| d.map(|(_, v)| v.to_bits())).collect();
                let got: Vec<Option<u64>> = b.iter().map(|d| d.map(f64::to_bits)).collect();
                proptest::prop_assert_eq!(expected, got);
            }
            let qs = [0.0, q, 0.3, 0.6, 1.0];
            let got = corpus.quantiles(&groups, scratch.path(), &qs).unwrap();
            let mut by_group: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            for (g, v) in shards.iter().flatten().flatten() {
                by_group.entry(groups[*g].clone()).or_default().push(*v);
            }
            let expected: BTreeMap<String, Vec<f64>> = by_group
                .into_iter()
                .map(|(g, mut v)| {
                    v.sort_by(f64::total_cmp);
                    (g, qs.iter().map(|q| quantile(&v, *q).unwrap()).collect())
                })
                .collect();
            proptest::prop_assert_eq!(json!(expected).to_string(), json!(got).to_string());
        }
    }

    #[test]
    fn a_cut_or_extended_scores_file_is_refused() {
        let groups = vec!["de".to_owned()];
        let work = tempfile::tempdir().unwrap();
        let (corpus, _) = through_files(work.path(), &groups, &[vec![Some((0, 1.0)), None]]);
        let mut r = corpus.shard(0).unwrap();
        r.next_score().unwrap();
        assert!(r.finish().is_err(), "a document left unread was not noticed");
        let mut r = corpus.shard(0).unwrap();
        r.next_score().unwrap();
        r.next_score().unwrap();
        assert!(r.next_score().is_err(), "a document past the scored ones was not noticed");
    }

    /// A result whose files were rewritten and whose digests were recomputed to match (a
    /// forged but well-formed result): the sorted run holds other scores than the
    /// per-document file, with the same counts. Pass 2 notices.
    #[test]
    fn sorted_runs_that_disagree_with_the_scores_are_refused() {
        let groups = vec!["de".to_owned()];
        let (work, scratch) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut scorer = ShardScorer::create(work.path(), 0, &groups).unwrap();
        scorer.push(Some(("de", 2.0))).unwrap();
        scorer.push(None).unwrap();
        let mut result = serde_json::to_value(scorer.finish().unwrap()).unwrap();
        let mut forged = [0u8; RECORD_W];
        forged[4..].copy_from_slice(&sortable(9.0).to_be_bytes());
        fs_err::write(work.path().join("sorted-000000.bin"), forged).unwrap();
        result["sorted"]["digest"] = json!(prov_store::Digest::of(&forged).to_string());
        let corpus = CorpusScores::collect(work.path(), MapResults::of(vec![result]), 1).unwrap();
        assert_eq!(corpus.quantiles(&groups, scratch.path(), &[0.5]).unwrap()["de"], [9.0]);
        let mut r = corpus.shard(0).unwrap();
        assert_eq!((r.next_score().unwrap(), r.next_score().unwrap()), (Some(2.0), None));
        let read = r.finish_counted().unwrap();
        assert!(corpus.check_read(read).is_err(), "the ledger would state scores the cut-offs were not computed from");
    }

    #[test]
    fn a_flag_other_than_zero_or_one_and_another_layout_are_refused() {
        let groups = vec!["de".to_owned()];
        let work = tempfile::tempdir().unwrap();
        let mut scorer = ShardScorer::create(work.path(), 0, &groups).unwrap();
        scorer.push(None).unwrap();
        let mut result = serde_json::to_value(scorer.finish().unwrap()).unwrap();
        let forged = [2u8; SCORE_FILE_W];
        fs_err::write(work.path().join("scores-000000.bin"), forged).unwrap();
        result["scores"]["digest"] = json!(prov_store::Digest::of(&forged).to_string());
        let corpus = CorpusScores::collect(work.path(), MapResults::of(vec![result.clone()]), 1).unwrap();
        assert!(corpus.shard(0).unwrap().next_score().is_err());
        result["format"] = json!(1);
        let e = CorpusScores::collect(work.path(), MapResults::of(vec![result]), 1).err().unwrap();
        assert!(matches!(e, StageError::MapResult { .. }), "{e}");
    }

    #[test]
    fn a_file_changed_after_its_task_is_refused() {
        let groups = vec!["de".to_owned()];
        let work = tempfile::tempdir().unwrap();
        let mut scorer = ShardScorer::create(work.path(), 0, &groups).unwrap();
        scorer.push(Some(("de", 2.0))).unwrap();
        assert!(scorer.push(Some(("xx", 2.0))).is_err(), "a score in an unknown group was taken");
        let result = serde_json::to_value(scorer.finish().unwrap()).unwrap();
        fs_err::write(work.path().join("sorted-000000.bin"), [0u8; RECORD_W]).unwrap();
        let e = CorpusScores::collect(work.path(), MapResults::of(vec![result]), 1).err().unwrap();
        assert!(matches!(e, StageError::WorkFile { .. }), "{e}");
    }
}
