//! `dedup`: removes exact duplicates (on normalised text) and near duplicates (`MinHash` LSH),
//! keeping the first document of each group, with a ledger row for every document.
//!
//! | rule | decision | when |
//! | --- | --- | --- |
//! | `dedup:unique` | kept | no earlier document is an exact or near duplicate |
//! | `dedup:exact` | removed | an earlier document has the same normalised text (evidence: `duplicate_of`) |
//! | `dedup:near` | removed | an earlier kept document shares an LSH bucket and passes verification (evidence: `duplicate_of`, `band` (0-based), `jaccard_estimate`) |
//!
//! # Order: keep-first
//!
//! Documents are visited in dataset order: shard index, then row within the shard. The
//! `shard` stage keeps input order across shards (shard `i` holds a contiguous range), so
//! the kept set depends neither on the thread count nor on the number of shards.
//!
//! # Normalisation and exact duplicates
//!
//! The normalised text is the Unicode lowercase of the text (`str::to_lowercase`), with every
//! run of Unicode white space collapsed to one ASCII space and leading and trailing white
//! space removed. The exact key is BLAKE3 of the normalised text's UTF-8 bytes. The first
//! document with a key is its reference: later documents with the same key are removed as
//! `dedup:exact`, `duplicate_of` the first one (which may itself have been removed as a near
//! duplicate; its own ledger row then names the kept document). Empty documents normalise
//! to the empty string, so all but the first empty document are exact duplicates.
//!
//! # Near duplicates: `MinHash` LSH
//!
//! Shingles are the word `shingle`-grams of the normalised text (a text with fewer words
//! than `shingle` has a single shingle, all its words; an empty text has none and never
//! takes part in near dedup). A shingle hashes to the first 8 bytes (little endian) of
//! BLAKE3 of its words joined by single spaces, reduced modulo the Mersenne prime
//! `p = 2^61 - 1`. Permutation `i` is `h_i(x) = (a_i·x + b_i) mod p`, where `a_i` and `b_i`
//! come from BLAKE3 of `"prov-dedup-minhash" || seed (u64 LE) || i (u32 LE)`: `a_i` from
//! bytes 0..8 (mapped into `1..p`), `b_i` from bytes 8..16 (mapped into `0..p`). The seed
//! is the stage's seed `minhash`. Every hash is fixed by the bytes, not by the platform
//! (no `std::hash::Hasher`, no `RandomState`).
//!
//! The signature (`permutations` minima) is cut into `bands` bands of `rows` values; a band's
//! bucket is the first 8 bytes of BLAKE3 of its values (u64 LE). Two documents with Jaccard
//! similarity `s` share at least one bucket with probability `1 - (1 - s^rows)^bands`, an
//! S-curve whose threshold is about `(1/bands)^(1/rows)`. With the defaults (112
//! permutations, 14 bands × 8 rows, 5-word shingles: the `FineWeb` settings) the threshold
//! is about 0.72 and the probability is 0.05 at `s = 0.5`, 0.56 at `s = 0.7`, 0.92 at
//! `s = 0.8` and 0.9996 at `s = 0.9`.
//!
//! A document sharing a bucket with an earlier *kept* document is a candidate; candidates
//! are verified: the fraction of equal signature values (an estimate of the Jaccard
//! similarity) must be at least `verify_jaccard` (default 0.8; 0 accepts every candidate).
//! Candidates are tried in band order, then in dataset order within a bucket; the first
//! that passes decides. A document whose candidates all fail is kept as `dedup:unique`
//! (the stats count these as `unverified_candidates`).
//!
//! # Phases
//!
//! 1. Shard-parallel: each document's exact key, signature and band buckets.
//! 2. Sequential, in dataset order: the keep-first decisions.
//! 3. Shard-parallel: each shard is read again, its kept documents and its ledger written.
//!
//! # Known limit
//!
//! Phase 2 holds, for every document, its id, its exact key (32 bytes), its bucket hashes
//! (`bands` × 8 bytes) and its signature (`permutations` × 8 bytes, about 1 KiB with the
//! defaults) in memory; the documents' text is not held. A corpus much larger than memory
//! needs an external sort of the bucket hashes, which this stage does not do yet.
//! A bucket shared by very many kept documents (boilerplate) makes its candidates be tried
//! one by one; the maps are `HashMap`s used for look-ups only, never iterated, so their
//! random state cannot reach the output.

use std::collections::HashMap;

use prov_dataset::{LedgerDecision, LedgerRow, ShardWriter, shard_documents};
use prov_exec::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use prov_manifest::{DatasetRecord, Determinism, OutputType};
use prov_store::{Digest, Hasher};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The resolved configuration of a `dedup` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DedupConfig {
    /// Remove exact duplicates of the normalised text.
    #[serde(default = "yes")]
    pub exact: bool,
    /// Remove near duplicates found by `MinHash` LSH.
    #[serde(default = "yes")]
    pub near: bool,
    /// Words per shingle.
    #[serde(default = "default_shingle")]
    pub shingle: u32,
    /// `MinHash` permutations: the signature length; must equal `bands × rows`.
    #[serde(default = "default_permutations")]
    pub permutations: u32,
    /// LSH bands.
    #[serde(default = "default_bands")]
    pub bands: u32,
    /// Signature values per band.
    #[serde(default = "default_rows")]
    pub rows: u32,
    /// The least estimated Jaccard similarity for a candidate pair to count (0 to 1).
    #[serde(default = "default_verify_jaccard")]
    pub verify_jaccard: f64,
}

fn yes() -> bool {
    true
}
fn default_shingle() -> u32 {
    5
}
fn default_permutations() -> u32 {
    112
}
fn default_bands() -> u32 {
    14
}
fn default_rows() -> u32 {
    8
}
fn default_verify_jaccard() -> f64 {
    0.8
}

/// The largest signature this stage accepts (memory per document grows with it).
const MAX_PERMUTATIONS: u32 = 4096;

/// Returns the normalised text: Unicode lowercase, white-space runs collapsed to one space,
/// trimmed.
pub fn normalise(text: &str) -> String {
    let lower = text.to_lowercase();
    let mut out = String::with_capacity(lower.len());
    for w in lower.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

/// The Mersenne prime `2^61 - 1`.
const P61: u64 = (1 << 61) - 1;

/// `(a·x + b) mod p` for `a, x, b < p`.
fn mul_add_mod(a: u64, x: u64, b: u64) -> u64 {
    let prod = u128::from(a) * u128::from(x);
    let mut r = ((prod as u64) & P61) + ((prod >> 61) as u64);
    if r >= P61 {
        r -= P61;
    }
    r += b;
    if r >= P61 {
        r -= P61;
    }
    r
}

fn first_u64(d: &Digest, at: usize) -> u64 {
    u64::from_le_bytes(d.as_bytes()[at..at + 8].try_into().expect("a digest has 32 bytes"))
}

/// The `MinHash` permutations of a seed: `(a_i, b_i)` pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinHasher {
    params: Vec<(u64, u64)>,
    shingle: usize,
}

impl MinHasher {
    /// Derives `permutations` hash functions from a seed.
    pub fn new(seed: u64, permutations: u32, shingle: u32) -> Self {
        let params = (0..permutations)
            .map(|i| {
                let mut h = Hasher::new();
                h.update(b"prov-dedup-minhash").update(&seed.to_le_bytes()).update(&i.to_le_bytes());
                let d = h.finalize();
                (1 + first_u64(&d, 0) % (P61 - 1), first_u64(&d, 8) % P61)
            })
            .collect();
        Self { params, shingle: shingle.max(1) as usize }
    }

    /// The signature of a normalised text; empty when it has no words.
    pub fn signature(&self, normalised: &str) -> Vec<u64> {
        let words: Vec<&str> = normalised.split(' ').filter(|w| !w.is_empty()).collect();
        if words.is_empty() {
            return Vec::new();
        }
        let mut sig = vec![u64::MAX; self.params.len()];
        for gram in words.windows(self.shingle.min(words.len())) {
            let mut h = Hasher::new();
            for (i, w) in gram.iter().enumerate() {
                if i > 0 {
                    h.update(b" ");
                }
                h.update(w.as_bytes());
            }
            let x = first_u64(&h.finalize(), 0) % P61;
            for (s, &(a, b)) in sig.iter_mut().zip(&self.params) {
                *s = (*s).min(mul_add_mod(a, x, b));
            }
        }
        sig
    }
}

/// The bucket hash of each band of a signature (`rows` values per band).
pub fn band_hashes(signature: &[u64], rows: u32) -> Vec<u64> {
    signature
        .chunks(rows.max(1) as usize)
        .map(|band| {
            let mut h = Hasher::new();
            for v in band {
                h.update(&v.to_le_bytes());
            }
            first_u64(&h.finalize(), 0)
        })
        .collect()
}

/// The fraction of equal values of two signatures: an estimate of the Jaccard similarity.
pub fn estimated_jaccard(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() || a.len() != b.len() {
        return 0.0;
    }
    a.iter().zip(b).filter(|(x, y)| x == y).count() as f64 / a.len() as f64
}

/// What phase 1 computes for one document.
struct Sketch {
    id: String,
    key: Digest,
    signature: Vec<u64>,
    bands: Vec<u64>,
}

fn sketch(id: String, text: &str, config: &DedupConfig, hasher: &MinHasher) -> Sketch {
    let norm = normalise(text);
    let key = Digest::of(norm.as_bytes());
    let (signature, bands) = if config.near {
        let sig = hasher.signature(&norm);
        let bands = band_hashes(&sig, config.rows);
        (sig, bands)
    } else {
        (Vec::new(), Vec::new())
    };
    Sketch { id, key, signature, bands }
}

/// A decision of phase 2.
#[derive(Debug, Clone, PartialEq)]
struct Verdict {
    decision: LedgerDecision,
    rule: &'static str,
    evidence: Option<Map<String, Value>>,
}

fn object(v: Value) -> Option<Map<String, Value>> {
    if let Value::Object(m) = v { Some(m) } else { None }
}

/// Phase 2: keep-first decisions for sketches in dataset order (the outer order is the shard
/// order). Returns the decisions, shaped like the input, and the number of documents kept
/// although they had candidates that failed verification.
fn decide(shards: &mut [Vec<Sketch>], config: &DedupConfig) -> (Vec<Vec<Verdict>>, u64) {
    // Exact key -> first document's (shard, row).
    let mut first: HashMap<Digest, (usize, usize)> = HashMap::new();
    // One bucket map per band: bucket hash -> kept documents' (shard, row), in dataset order.
    let mut buckets: Vec<HashMap<u64, Vec<(usize, usize)>>> = vec![HashMap::new(); config.bands as usize];
    let mut unverified = 0;
    let mut out: Vec<Vec<Verdict>> = Vec::with_capacity(shards.len());
    for s in 0..shards.len() {
        let mut decisions = Vec::with_capacity(shards[s].len());
        for r in 0..shards[s].len() {
            let sk = &shards[s][r];
            if config.exact {
                if let Some(&(fs, fr)) = first.get(&sk.key) {
                    decisions.push(Verdict {
                        decision: LedgerDecision::Removed,
                        rule: "dedup:exact",
                        evidence: object(json!({ "duplicate_of": shards[fs][fr].id })),
                    });
                    continue;
                }
                first.insert(sk.key, (s, r));
            }
            let mut near = None;
            let mut had_candidates = false;
            if config.near && !sk.bands.is_empty() {
                let mut tried = Vec::new();
                'bands: for (band, h) in sk.bands.iter().enumerate() {
                    for &(cs, cr) in buckets[band].get(h).map_or(&[][..], Vec::as_slice) {
                        if tried.contains(&(cs, cr)) {
                            continue;
                        }
                        tried.push((cs, cr));
                        had_candidates = true;
                        let j = estimated_jaccard(&sk.signature, &shards[cs][cr].signature);
                        if j >= config.verify_jaccard {
                            near = Some((cs, cr, band, j));
                            break 'bands;
                        }
                    }
                }
            }
            if let Some((cs, cr, band, j)) = near {
                decisions.push(Verdict {
                    decision: LedgerDecision::Removed,
                    rule: "dedup:near",
                    evidence: object(json!({ "duplicate_of": shards[cs][cr].id, "band": band, "jaccard_estimate": j })),
                });
                // A removed document is never a candidate: its signature is no longer needed.
                shards[s][r].signature = Vec::new();
                continue;
            }
            if had_candidates {
                unverified += 1;
            }
            for (band, h) in shards[s][r].bands.iter().enumerate() {
                buckets[band].entry(*h).or_default().push((s, r));
            }
            decisions.push(Verdict { decision: LedgerDecision::Kept, rule: "dedup:unique", evidence: None });
        }
        out.push(decisions);
    }
    (out, unverified)
}

/// Removes exact and near duplicates, keep-first, with a ledger.
pub struct DedupStage;

impl Stage for DedupStage {
    fn kind(&self) -> &'static str {
        "dedup"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "remove exact (normalised text) and near (MinHash LSH) duplicates, keeping the first in dataset order, with a ledger"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let config: DedupConfig = parse_params(params)?;
        if !config.exact && !config.near {
            return Err(ConfigError::at(&["near"], "with `exact: false` and `near: false` the stage does nothing")
                .with_hint("remove the stage, or enable `exact` or `near`"));
        }
        if config.shingle == 0 {
            return Err(ConfigError::at(&["shingle"], "a shingle has at least one word"));
        }
        for (name, v) in [("permutations", config.permutations), ("bands", config.bands), ("rows", config.rows)] {
            if v == 0 {
                return Err(ConfigError::at(&[name], format!("`{name}` must be at least 1")));
            }
        }
        if config.permutations > MAX_PERMUTATIONS {
            return Err(ConfigError::at(&["permutations"], format!("at most {MAX_PERMUTATIONS} permutations")));
        }
        if u64::from(config.bands) * u64::from(config.rows) != u64::from(config.permutations) {
            return Err(ConfigError::at(
                &["permutations"],
                format!(
                    "bands × rows must equal permutations: {} × {} ≠ {}",
                    config.bands, config.rows, config.permutations
                ),
            ));
        }
        if !(0.0..=1.0).contains(&config.verify_jaccard) {
            return Err(ConfigError::at(&["verify_jaccard"], "an estimated Jaccard similarity between 0 and 1"));
        }
        Ok(serde_json::to_value(config).expect("numbers and booleans encode"))
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
    fn seed_names(&self) -> &'static [&'static str] {
        &["minhash"]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let config: DedupConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let hasher = MinHasher::new(cx.seed("minhash")?, config.permutations, config.shingle);
        let ds = cx.input_record::<DatasetRecord>("docs")?;
        // Phase 1: sketches, shard-parallel (each shard streamed), collected in shard order.
        let mut sketches: Vec<Vec<Sketch>> = cx.pool.install(|| {
            ds.shards
                .par_iter()
                .map(|s| {
                    shard_documents(cx.store, &s.digest)?
                        .map(|d| {
                            let d = d?;
                            Ok::<_, StageError>(sketch(d.id, &d.text, &config, &hasher))
                        })
                        .collect::<Result<Vec<_>, _>>()
                })
                .collect::<Result<_, _>>()
        })?;
        // Phase 2: keep-first, sequential in dataset order.
        let (decisions, unverified) = decide(&mut sketches, &config);
        let ids: Vec<Vec<String>> = sketches.into_iter().map(|s| s.into_iter().map(|k| k.id).collect()).collect();
        // Phase 3: kept documents and ledger shards, shard-parallel (each shard streamed
        // again), collected in shard order.
        let results: Vec<prov_filter::CountedShard> = cx.pool.install(|| {
            ds.shards
                .par_iter()
                .zip(decisions.par_iter().zip(ids.par_iter()))
                .map(|(s, (decisions, ids))| {
                    let changed = || StageError::Input {
                        input: "docs".into(),
                        message: format!("shard `{}` changed between two reads", s.digest),
                    };
                    let mut kept = ShardWriter::new(cx.store)?;
                    let mut rows = Vec::with_capacity(decisions.len());
                    let mut expected = decisions.iter().zip(ids);
                    for doc in shard_documents(cx.store, &s.digest)? {
                        let doc = doc?;
                        let Some((d, _)) = expected.next().filter(|(_, id)| &doc.id == *id) else {
                            return Err(changed());
                        };
                        rows.push(LedgerRow::of_document(&doc, d.decision, d.rule, d.evidence.clone()));
                        if d.decision == LedgerDecision::Kept {
                            kept.push(doc)?;
                        }
                    }
                    if expected.next().is_some() {
                        return Err(changed());
                    }
                    let (ledger, stats) = prov_filter::write_counted_ledger(cx, rows)?;
                    Ok((kept.finish()?, ledger, stats))
                })
                .collect::<Result<_, _>>()
        })?;
        let mut out = prov_filter::finish_counted(cx, results)?;
        out.stats.insert("unverified_candidates".into(), Value::from(unverified));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARAGRAPH: &str = "The committee met on Tuesday to review the annual budget of the regional library \
        network. Members discussed the cost of new shelving, the digitisation of rare manuscripts, longer \
        opening hours during the examination period and a proposal to share catalogues with the university. \
        After a long debate the chair asked for a written report before the next meeting in the spring.";

    fn config() -> DedupConfig {
        serde_json::from_value(DedupStage.resolve_config(&json!({})).unwrap()).unwrap()
    }

    #[test]
    fn normalisation_lowercases_and_collapses_white_space() {
        assert_eq!(normalise("  Hello\t\tWORLD \n\u{00A0} Ünïcode  ÉTÉ\r\n"), "hello world ünïcode été");
        assert_eq!(normalise("ΣΊΣΥΦΟΣ"), "σίσυφος");
        assert_eq!(normalise(" \n\t "), "");
        assert_eq!(normalise("a\u{2003}b"), "a b");
    }

    #[test]
    fn defaults_are_explicit_and_checked() {
        let c = DedupStage.resolve_config(&json!({})).unwrap();
        assert_eq!(
            c,
            json!({"exact": true, "near": true, "shingle": 5, "permutations": 112, "bands": 14, "rows": 8, "verify_jaccard": 0.8})
        );
        assert!(DedupStage.resolve_config(&json!({"bands": 10})).is_err());
        assert!(DedupStage.resolve_config(&json!({"permutations": 120, "bands": 15})).is_ok());
        assert!(DedupStage.resolve_config(&json!({"exact": false, "near": false})).is_err());
        assert!(DedupStage.resolve_config(&json!({"verify_jaccard": 1.5})).is_err());
        assert!(DedupStage.resolve_config(&json!({"shingle": 0})).is_err());
        assert!(DedupStage.resolve_config(&json!({"threshold": 0.7})).is_err());
    }

    #[test]
    fn minhash_is_deterministic_per_seed() {
        let text = normalise(PARAGRAPH);
        let a = MinHasher::new(7, 112, 5).signature(&text);
        assert_eq!(a.len(), 112);
        assert_eq!(a, MinHasher::new(7, 112, 5).signature(&text));
        assert_ne!(a, MinHasher::new(8, 112, 5).signature(&text));
        assert!(a.iter().all(|&v| v < P61));
        assert!(MinHasher::new(7, 112, 5).signature("").is_empty());
        // Fewer words than a shingle: one shingle of all the words.
        assert_eq!(MinHasher::new(7, 4, 5).signature("two words").len(), 4);
        // Pinned values: the hashes must not change across platforms or releases.
        let pinned = MinHasher::new(1, 2, 5).signature("the quick brown fox jumps over the lazy dog");
        assert_eq!(pinned, [443_694_677_024_768_431, 748_668_290_695_284_984]);
        assert_eq!(band_hashes(&pinned, 1), [5_825_687_637_618_315_971, 4_494_196_018_285_054_541]);
    }

    fn candidates(a: &str, b: &str) -> bool {
        let h = MinHasher::new(42, 112, 5);
        let (ba, bb) = (band_hashes(&h.signature(&normalise(a)), 8), band_hashes(&h.signature(&normalise(b)), 8));
        assert_eq!(ba.len(), 14);
        ba.iter().zip(&bb).any(|(x, y)| x == y)
    }

    #[test]
    fn lsh_finds_a_near_duplicate_and_not_unrelated_text() {
        let changed = PARAGRAPH.replace("Tuesday", "Wednesday");
        assert!(candidates(PARAGRAPH, &changed));
        let h = MinHasher::new(42, 112, 5);
        let j = estimated_jaccard(&h.signature(&normalise(PARAGRAPH)), &h.signature(&normalise(&changed)));
        assert!(j >= 0.8, "{j}");
        let other = "Rain is expected over the northern hills tonight, with strong winds along the coast and \
            snow above eight hundred metres; drivers should carry chains and check the pass before leaving.";
        assert!(!candidates(PARAGRAPH, other));
    }

    fn sketches(texts: &[&[&str]], c: &DedupConfig) -> Vec<Vec<Sketch>> {
        let h = MinHasher::new(3, c.permutations, c.shingle);
        let mut n = 0;
        texts
            .iter()
            .map(|shard| {
                shard
                    .iter()
                    .map(|t| {
                        n += 1;
                        sketch(format!("d{n}"), t, c, &h)
                    })
                    .collect()
            })
            .collect()
    }

    fn flat(d: &[Vec<Verdict>]) -> Vec<(&'static str, Option<Value>)> {
        d.iter().flatten().map(|d| (d.rule, d.evidence.clone().map(|m| m["duplicate_of"].clone()))).collect()
    }

    #[test]
    fn keep_first_in_dataset_order_whatever_the_shards() {
        let near = PARAGRAPH.replace("Tuesday", "Wednesday");
        let upper = PARAGRAPH.to_uppercase().replace(' ', "  \n");
        let docs = [PARAGRAPH, "short one", near.as_str(), upper.as_str(), "Short   ONE", "", "", "unrelated words"];
        let c = config();
        let one = decide(&mut sketches(&[&docs], &c), &c).0;
        let three = decide(&mut sketches(&[&docs[..3], &docs[3..5], &docs[5..]], &c), &c).0;
        assert_eq!(flat(&one), flat(&three));
        let rules: Vec<_> = flat(&one).into_iter().map(|(r, _)| r).collect();
        assert_eq!(
            rules,
            [
                "dedup:unique",
                "dedup:unique",
                "dedup:near",
                "dedup:exact",
                "dedup:exact",
                "dedup:unique",
                "dedup:exact",
                "dedup:unique"
            ]
        );
        assert_eq!(flat(&one)[2].1, Some(json!("d1")));
        assert_eq!(flat(&one)[4].1, Some(json!("d2")));
        let band = &one[0][2].evidence.as_ref().unwrap()["band"];
        assert!(band.as_u64().unwrap() < 14, "{band}");
        // Exact only: the near duplicate stays.
        let exact_only = DedupConfig { near: false, ..c.clone() };
        let d = decide(&mut sketches(&[&docs], &exact_only), &exact_only).0;
        assert_eq!(d[0][2].rule, "dedup:unique");
        // Verification: at 1.0 the changed paragraph is kept, and counted as unverified.
        let strict = DedupConfig { verify_jaccard: 1.0, ..c };
        let (d, unverified) = decide(&mut sketches(&[&docs], &strict), &strict);
        assert_eq!(d[0][2].rule, "dedup:unique");
        assert_eq!(unverified, 1);
    }

    #[test]
    fn s_curve_matches_the_documented_values() {
        let p = |s: f64| 1.0 - (1.0 - s.powi(8)).powi(14);
        assert!((p(0.5) - 0.05).abs() < 0.01 && (p(0.7) - 0.56).abs() < 0.01);
        assert!((p(0.8) - 0.92).abs() < 0.01 && p(0.9) > 0.999);
        assert!(((1.0f64 / 14.0).powf(1.0 / 8.0) - 0.72).abs() < 0.01);
    }
}
