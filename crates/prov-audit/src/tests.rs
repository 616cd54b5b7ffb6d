//! Proofs over small synthetic runs: a source, one filter with a ledger, a URL index and a
//! `tokenize` stage, stored in a temporary store.

use std::collections::BTreeMap;

use proptest::prelude::*;
use prov_dataset::{LedgerDecision, LedgerRow, write_ledger, write_ledger_chunked, write_ledger_shard};
use prov_manifest::{
    Determinism, Envelope, OutputRef, OutputType, Record, RunRecord, RunStage, StageRecord, put_record,
};
use prov_store::{Digest, Store};
use serde_json::{Value, json};

use crate::{Pins, Subject, VerifyError, prove, verify};
use prov_dataset::url_index::{UrlIndexEntry, build_url_index};

fn envelope() -> Envelope {
    Envelope {
        workbench_version: "0.1.0".into(),
        os: "linux".into(),
        arch: "x86_64".into(),
        cpu_model: "test".into(),
        cpu_flags: vec![],
        threads: 1,
        device: "cpu".into(),
        libtorch: None,
        aten_cpu_capability: None,
        mkl_cbwr: None,
        onednn_max_cpu_isa: None,
        cuda: None,
    }
}

fn stage(
    name: &str,
    kind: &str,
    inputs: &[(&str, Digest)],
    outputs: &[(&str, OutputType, Digest)],
    stats: BTreeMap<String, Value>,
) -> StageRecord {
    StageRecord {
        schema: 1,
        name: name.parse().expect("valid name"),
        stage_kind: kind.into(),
        version: 1,
        determinism: Determinism::Portable,
        key: Digest::of(name.as_bytes()),
        config: json!({}),
        inputs: inputs.iter().map(|(k, d)| ((*k).to_owned(), *d)).collect(),
        seeds: BTreeMap::new(),
        envelope: envelope(),
        outputs: outputs.iter().map(|(k, t, d)| ((*k).to_owned(), OutputRef { output_type: *t, digest: *d })).collect(),
        stats,
    }
}

fn row(id: &str, removed: bool) -> LedgerRow {
    LedgerRow {
        id: id.into(),
        decision: if removed { LedgerDecision::Removed } else { LedgerDecision::Kept },
        rule: if removed { "test:removed".into() } else { "test:kept".into() },
        evidence: removed.then(|| json!({"why": id}).as_object().cloned().expect("an object")),
        language: Some("en".into()),
        words: id.len() as u64,
    }
}

fn url_of(id: &str) -> String {
    format!("https://example.org/{id}")
}

/// A run whose one filter has a ledger of `shards` (ids; those starting with `x` removed).
fn fixture(store: &Store, shards: &[Vec<String>]) -> prov_manifest::LoadedRun {
    fixture_chunked(store, shards, prov_dataset::chunked::CHUNK_ENTRIES)
}

/// [`fixture`] with the ledger's id directory and the URL index in chunks of `chunk` entries.
fn fixture_chunked(store: &Store, shards: &[Vec<String>], chunk: u64) -> prov_manifest::LoadedRun {
    let source = Digest::of(b"source record");
    let mut ledger_shards = Vec::new();
    for ids in shards {
        let rows = ids.iter().map(|id| row(id, id.starts_with('x'))).collect();
        ledger_shards.push(write_ledger_shard(store, rows).expect("ledger shard"));
    }
    let (ledger, _) = write_ledger_chunked(store, ledger_shards, chunk).expect("ledger");
    let dataset = Digest::of(b"filtered dataset");
    let urls = shards.iter().flatten().map(|id| UrlIndexEntry::new(&url_of(id), id)).collect();
    let (index_digest, index) = build_url_index(store, urls, chunk).expect("index");
    let stats: BTreeMap<String, Value> = [
        ("entries".to_owned(), Value::from(index.entries)),
        ("merkle_root".to_owned(), Value::from(index.root.to_string())),
    ]
    .into();
    let records = [
        stage("docs", "source", &[], &[("source", OutputType::Source, source)], BTreeMap::new()),
        stage(
            "filter",
            "robots",
            &[("docs", source)],
            &[("dataset", OutputType::Dataset, dataset), ("ledger", OutputType::Ledger, ledger)],
            BTreeMap::new(),
        ),
        stage("urls", "url-index", &[("docs", source)], &[("index", OutputType::Tree, index_digest)], stats),
        stage("tokens", "tokenize", &[("docs", dataset)], &[], BTreeMap::new()),
    ];
    let stages = records
        .into_iter()
        .map(|s| RunStage { name: s.name.clone(), manifest: put_record(store, &Record::Stage(s)).expect("stage") })
        .collect();
    let run = RunRecord::new("test", Digest::of(b"lockfile"), stages);
    let manifest = put_record(store, &Record::Run(run)).expect("run");
    prov_manifest::LoadedRun::load(store, manifest).expect("the run loads")
}

fn new_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::init(&dir.path().join(".prov")).expect("store");
    (dir, store)
}

fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn every_row_of_a_small_ledger_and_the_gaps_between_them_verify() {
    let (_dir, store) = new_store();
    let shards = [ids(&["a", "c", "xe"]), ids(&[]), ids(&["b"]), ids(&["c", "d", "f", "g", "xh"])];
    let run = fixture(&store, &shards);
    for id in ["a", "b", "c", "d", "xe", "f", "g", "xh", "", "0", "bb", "e", "z", "\u{10ffff}"] {
        let proof = prove(&store, &run, &Subject::Doc(id.into())).expect("proves");
        let v = verify(&proof.to_bytes(), &Pins { root: Some(run.record.root), ..Pins::default() }).expect("verifies");
        let expected: Vec<usize> = (0..shards.len()).filter(|s| shards[*s].iter().any(|i| i == id)).collect();
        assert_eq!(v.stages[0].rows.iter().map(|r| r.shard).collect::<Vec<_>>(), expected, "{id}");
        for r in &v.stages[0].rows {
            assert_eq!(r.decision, if id.starts_with('x') { "removed" } else { "kept" });
        }
        let t = v.training.expect("ends at tokenize");
        assert_eq!(t.reached, Some(!expected.is_empty() && !id.starts_with('x')), "{id}");
        assert_eq!((t.stage.as_str(), t.dataset_stage.as_str()), ("tokens", "filter"));
    }
}

#[test]
fn urls_seen_and_never_seen() {
    let (_dir, store) = new_store();
    let run = fixture(&store, &[ids(&["a", "xb"]), ids(&["a", "c"])]);
    for (url, expect) in
        [(url_of("a"), vec!["a"]), (url_of("xb"), vec!["xb"]), ("https://never.example/".into(), vec![])]
    {
        let proof = prove(&store, &run, &Subject::Url(url.clone())).expect("proves");
        let v = verify(&proof.to_bytes(), &Pins::default()).expect("verifies");
        assert_eq!(v.ids, expect, "{url}");
        assert_eq!(v.url_index.as_deref(), Some("urls"));
        if expect.is_empty() {
            assert!(v.stages[0].rows.is_empty());
            assert_eq!(v.training.and_then(|t| t.reached), Some(false));
        }
    }
    // `a` is in two shards: two rows.
    let v = verify(&prove(&store, &run, &Subject::Url(url_of("a"))).expect("proves").to_bytes(), &Pins::default())
        .expect("verifies");
    assert_eq!(v.stages[0].rows.len(), 2);
}

/// With the URL index in chunks of one, two or four entries, every URL and URLs never seen
/// prove from the chunks around their key (a range across chunk boundaries), and verify.
#[test]
fn urls_prove_across_index_chunks() {
    let shards = [ids(&["a", "b", "c", "xd"]), ids(&["a", "e", "f"]), ids(&["g", "h", "xi", "j"])];
    for chunk in [1, 2, 4] {
        let (_dir, store) = new_store();
        let run = fixture_chunked(&store, &shards, chunk);
        let mut urls: Vec<(String, Vec<&str>)> =
            ["a", "b", "c", "xd", "e", "f", "g", "h", "xi", "j"].iter().map(|id| (url_of(id), vec![*id])).collect();
        urls.extend((0..8).map(|i| (format!("https://never{i}.example/"), vec![])));
        for (url, expect) in urls {
            let proof = prove(&store, &run, &Subject::Url(url.clone())).expect("proves");
            let v = verify(&proof.to_bytes(), &Pins { root: Some(run.record.root), ..Pins::default() })
                .unwrap_or_else(|e| panic!("{url} in chunks of {chunk}: {e}"));
            assert_eq!(v.ids, expect, "{url} in chunks of {chunk}");
        }
    }
}

/// An index whose listing is not the one its stage recorded (another index's tree put in
/// its place, its stage record consistent) is refused by the prover, not proven from.
#[test]
fn a_url_index_unlike_its_stage_record_is_refused() {
    let (_dir, store) = new_store();
    let run = fixture(&store, &[ids(&["a", "b"])]);
    let (other, _) = build_url_index(&store, vec![UrlIndexEntry::new(&url_of("z"), "z")], 4).expect("index");
    let urls = run.stages().iter().find(|s| s.record.name.as_str() == "urls").expect("a url-index stage");
    let stats = urls.record.stats.clone();
    let mut forged = urls.record.clone();
    forged.outputs.insert("index".into(), OutputRef { output_type: OutputType::Tree, digest: other });
    forged.stats = stats;
    let mut record = run.record.clone();
    for s in &mut record.stages {
        if s.name.as_str() == "urls" {
            s.manifest = put_record(&store, &Record::Stage(forged.clone())).expect("stage");
        }
    }
    let record = RunRecord::new(&record.recipe, record.lockfile, record.stages);
    let manifest = put_record(&store, &Record::Run(record)).expect("run");
    let forged_run = prov_manifest::LoadedRun::load(&store, manifest).expect("loads");
    let e = prove(&store, &forged_run, &Subject::Url(url_of("a"))).expect_err("refused");
    assert!(e.to_string().contains("not the ones its stage recorded"), "{e}");
}

#[test]
fn pins_and_swapped_parts_are_refused() {
    let (_dir, store) = new_store();
    let run = fixture(&store, &[ids(&["a", "b", "c"])]);
    let proof = prove(&store, &run, &Subject::Doc("b".into())).expect("proves");
    let bytes = proof.to_bytes();
    let other = Digest::of(b"other");
    assert!(matches!(verify(&bytes, &Pins { root: Some(other), ..Pins::default() }), Err(VerifyError::Pin { .. })));
    assert!(matches!(
        verify(&bytes, &Pins { run_manifest: Some(other), ..Pins::default() }),
        Err(VerifyError::Pin { what: "manifest", .. })
    ));
    // The proof for `b` does not prove anything about `a`, even with the subject changed
    // consistently.
    let mut forged = proof.clone();
    forged.subject = Subject::Doc("a".into());
    forged.documents[0].id = "a".into();
    let err = verify(&forged.to_bytes(), &Pins::default()).unwrap_err();
    assert!(err.to_string().contains("do not bracket"), "{err}");
    // A dropped ledger or a dropped chain stage is noticed.
    let mut no_ledger = proof.clone();
    no_ledger.ledgers.clear();
    assert!(verify(&no_ledger.to_bytes(), &Pins::default()).is_err());
    let mut short = proof;
    short.chain.remove(0);
    assert!(matches!(verify(&short.to_bytes(), &Pins::default()), Err(VerifyError::Chain { .. })));
}

/// A chain cut short after an early stage used to verify and print that the run had no
/// `tokenize` stage; now the proof names where its chain ends, and the caller can require it.
#[test]
fn a_chain_cut_short_or_reordered_is_refused_or_says_where_it_ends() {
    let (_dir, store) = new_store();
    let run = fixture(&store, &[ids(&["a", "xb"])]);
    let proof = prove(&store, &run, &Subject::Doc("a".into())).expect("proves");
    assert_eq!(proof.target.as_str(), "tokens");
    let whole = verify(&proof.to_bytes(), &Pins::default()).expect("verifies");
    assert_eq!(whole.path, ["docs", "filter", "tokens"]);
    assert!(whole.training.is_some());

    let mut cut = proof.clone();
    cut.chain.pop();
    let err = verify(&cut.to_bytes(), &Pins::default()).unwrap_err();
    assert!(err.to_string().contains("the chain ends here, but the proof names `tokens` as its end"), "{err}");
    // Cut and renamed consistently: it verifies, shows no training claim and names its end.
    cut.target = "filter".parse().unwrap();
    let v = verify(&cut.to_bytes(), &Pins::default()).expect("a consistent shorter proof");
    assert_eq!((v.target.0.as_str(), v.training), ("filter", None));
    // Unless the caller requires the chain to reach the run's `tokenize` stage.
    let until = Pins { until: Some("tokens".into()), ..Pins::default() };
    assert!(matches!(verify(&cut.to_bytes(), &until), Err(VerifyError::Until { .. })));
    verify(&proof.to_bytes(), &until).expect("the whole proof reaches it");

    let mut reordered = proof;
    reordered.chain.swap(0, 1);
    assert!(matches!(verify(&reordered.to_bytes(), &Pins::default()), Err(VerifyError::Chain { .. })));
}

#[test]
fn every_single_byte_change_of_a_small_proof_is_rejected() {
    let (_dir, store) = new_store();
    let run = fixture(&store, &[ids(&["a", "xb"]), ids(&[])]);
    let mut bytes = prove(&store, &run, &Subject::Url(url_of("xb"))).expect("proves").to_bytes();
    bytes.push(b'\n');
    verify(&bytes, &Pins::default()).expect("the original verifies");
    for i in 0..bytes.len() {
        let mut changed = bytes.clone();
        changed[i] ^= 0x01;
        assert!(verify(&changed, &Pins::default()).is_err(), "byte {i} changed and still valid");
    }
}

/// A proof holds the id directory's range and, per shard that holds the id, the shard's leaf
/// in the ledger's tree of shards and one range of its rows; building it reads the shards
/// that hold the id, not the others (a shard removed from the store that does not hold the
/// id does not stop the proof). The whole proof, ledger records included, grows with the
/// logarithm of the shard count: from 4 to 256 shards of 8 rows (six more tree levels) it
/// may add one path digest per level to each leaf it shows (two shard leaves and at most
/// four directory leaves), about 80 bytes each. A version 3 proof, whose ledger records
/// listed every shard, grew by some 50 KB there.
#[test]
fn a_proof_grows_with_the_logarithm_of_the_shard_count() {
    let proof_len = |n_shards: usize| {
        let (_dir, store) = new_store();
        // 8 ids a shard; `m0003` is in shard 0 and in the last.
        let mut shards: Vec<Vec<String>> =
            (0..n_shards).map(|s| (0..8).map(|i| format!("m{:04}", s * 8 + i)).collect()).collect();
        shards[n_shards - 1].push("m0003".into());
        shards[n_shards - 1].sort();
        let run = fixture_chunked(&store, &shards, 16);
        let holders = vec![0, n_shards - 1];
        // Every shard that does not hold the id is removed from the store.
        let ledger = run.stages()[1].record.outputs["ledger"].digest;
        let l = prov_dataset::read_ledger(&store, &ledger).expect("a ledger");
        let others: Vec<Digest> = (1..n_shards - 1).map(|s| l.shards[s].digest).collect();
        store.remove_objects(&others).expect("removed");
        let proof = prove(&store, &run, &Subject::Doc("m0003".into())).expect("proves from the holders alone");
        let part = &proof.documents[0].ledgers[0];
        assert_eq!(part.shards.iter().map(|s| s.shard as usize).collect::<Vec<_>>(), holders);
        let v = verify(&proof.to_bytes(), &Pins { root: Some(run.record.root), ..Pins::default() }).expect("verifies");
        assert_eq!(v.stages[0].rows.iter().map(|r| r.shard).collect::<Vec<_>>(), holders);
        proof.to_bytes().len()
    };
    let (four, many) = (proof_len(4), proof_len(256));
    let bound = 6 * (2 + 4) * 80;
    assert!(many <= four + bound, "4 shards: {four} bytes, 256 shards: {many} bytes (more than {bound} more)");
}

/// The shards a proof gives ranges for must be exactly those the directory names: dropping
/// one, adding one (with a true absence range of its own) or naming another is refused.
#[test]
fn shard_ranges_other_than_the_directory_names_are_refused() {
    let (_dir, store) = new_store();
    let shards = [ids(&["a", "c"]), ids(&["b", "c"]), ids(&["c", "d"])];
    let run = fixture_chunked(&store, &shards, 2);
    let proof = prove(&store, &run, &Subject::Doc("c".into())).expect("proves");
    verify(&proof.to_bytes(), &Pins::default()).expect("verifies");
    assert_eq!(proof.documents[0].ledgers[0].shards.len(), 3);
    let directory_refused = |p: &crate::DocumentProof| {
        let e = verify(&p.to_bytes(), &Pins::default()).unwrap_err();
        assert!(matches!(e, VerifyError::Directory { .. }), "{e}");
    };
    let mut dropped = proof.clone();
    dropped.documents[0].ledgers[0].shards.remove(1);
    directory_refused(&dropped);
    let mut repeated = proof.clone();
    let again = repeated.documents[0].ledgers[0].shards[0].clone();
    repeated.documents[0].ledgers[0].shards.push(again);
    directory_refused(&repeated);

    // For `b` the directory names shard 1; a true absence range from shard 0 added beside it
    // still does not pass, nor does the directory range for `c` given for `b`.
    let b = prove(&store, &run, &Subject::Doc("b".into())).expect("proves");
    let a_in_0 = prove(&store, &run, &Subject::Doc("a".into())).expect("proves");
    assert_eq!(a_in_0.documents[0].ledgers[0].shards[0].shard, 0);
    let mut extra = b.clone();
    let absent_from_0 = a_in_0.documents[0].ledgers[0].shards[0].clone();
    extra.documents[0].ledgers[0].shards.insert(0, absent_from_0);
    assert!(verify(&extra.to_bytes(), &Pins::default()).is_err());
    let mut swapped = b;
    swapped.documents[0].ledgers[0].directory = proof.documents[0].ledgers[0].directory.clone();
    directory_refused(&swapped);
}

/// A shard is shown by its leaf in the ledger's tree of shards. Another shard's leaf and
/// path (valid, but for another index), a leaf with its row root swapped for another shard's
/// (each field well-formed), or a path cut short are refused, each before the rows are read.
#[test]
fn a_shard_leaf_that_is_not_the_ledgers_at_its_index_is_refused() {
    fn part(p: &mut crate::DocumentProof) -> &mut Vec<crate::ShardRange> {
        &mut p.documents[0].ledgers[0].shards
    }
    let (_dir, store) = new_store();
    let shards = [ids(&["a", "c"]), ids(&["b", "c"]), ids(&["c", "d"])];
    let run = fixture_chunked(&store, &shards, 2);
    let proof = prove(&store, &run, &Subject::Doc("c".into())).expect("proves");
    verify(&proof.to_bytes(), &Pins::default()).expect("verifies");
    let leaf_refused = |p: &crate::DocumentProof, why: &str| {
        let e = verify(&p.to_bytes(), &Pins::default()).unwrap_err();
        assert!(matches!(e, VerifyError::ShardLeaf { .. }), "{why}: {e}");
    };

    let mut borrowed = proof.clone();
    let other = part(&mut borrowed)[1].clone();
    (part(&mut borrowed)[0].entry, part(&mut borrowed)[0].path) = (other.entry, other.path);
    leaf_refused(&borrowed, "shard 1's leaf for shard 0");

    let mut relabelled = proof.clone();
    let text = part(&mut relabelled)[1].entry.replace("\"shard\":1", "\"shard\":0");
    part(&mut relabelled)[0].entry = text;
    leaf_refused(&relabelled, "shard 1's leaf with its index edited");

    let mut reroot = proof.clone();
    let mut leaf: prov_manifest::ShardLeaf = serde_json::from_str(&part(&mut reroot)[0].entry).expect("a shard leaf");
    let theirs: prov_manifest::ShardLeaf = serde_json::from_str(&part(&mut reroot)[1].entry).expect("a shard leaf");
    leaf.root = theirs.root;
    part(&mut reroot)[0].entry = String::from_utf8(prov_manifest::to_canonical_bytes(&leaf).unwrap()).unwrap();
    leaf_refused(&reroot, "a leaf naming another shard's root");

    let mut short = proof;
    part(&mut short)[2].path.pop();
    leaf_refused(&short, "a path cut short");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn random_ledgers_prove_every_id_and_reject_changes(
        shards in prop::collection::vec(prop::collection::btree_set("[a-dx]{1,3}", 0..12), 1..4),
        probe in "[a-dx]{1,3}",
        flips in prop::collection::vec(any::<(usize, u8)>(), 8),
        chunk in prop::sample::select(vec![1u64, 2, 4, 65_536]),
    ) {
        let (_dir, store) = new_store();
        let shards: Vec<Vec<String>> = shards.into_iter().map(|s| s.into_iter().collect()).collect();
        let run = fixture_chunked(&store, &shards, chunk);
        let mut all: Vec<&String> = shards.iter().flatten().collect();
        all.push(&probe);
        for id in all {
            let bytes = prove(&store, &run, &Subject::Doc(id.clone())).expect("proves").to_bytes();
            let v = verify(&bytes, &Pins { root: Some(run.record.root), ..Pins::default() }).expect("verifies");
            let expected = shards.iter().filter(|s| s.contains(id)).count();
            prop_assert_eq!(v.stages[0].rows.len(), expected);
            for (at, bit) in &flips {
                let mut changed = bytes.clone();
                let at = at % changed.len();
                changed[at] ^= 1 << (bit % 8);
                prop_assert!(verify(&changed, &Pins::default()).is_err(), "byte {} changed and still valid", at);
            }
        }
    }
}

mod audit {
    use prov_dataset::{Document, ShardWriter, write_dataset};
    use prov_manifest::{ChunkedIndex, Ledger, LedgerShardRef};

    /// Stores a ledger of `shards` and `directory` consistent in itself (parts record, shard
    /// count, rows and both roots recomputed), as a forger would, and returns its digest.
    fn forge_ledger(
        store: &Store,
        shards: Vec<LedgerShardRef>,
        directory: ChunkedIndex,
        rules: BTreeMap<String, u64>,
    ) -> Digest {
        let parts = put_record(store, &Record::LedgerParts(Ledger::parts_record(&shards, &directory))).expect("parts");
        let ledger = Ledger::assemble(shards, directory, rules, parts);
        put_record(store, &Record::Ledger(ledger.record)).expect("a record consistent in itself")
    }

    fn shard_ref(s: &prov_dataset::LedgerShard) -> LedgerShardRef {
        LedgerShardRef { digest: s.shard.digest, rows: s.shard.rows, bytes: s.shard.bytes, root: s.root }
    }

    use super::*;
    use crate::{AuditOptions, AuditPolicy, Outcome, RunContext, check_ledger, evaluate};

    fn dataset(store: &Store, ids: &[String]) -> Digest {
        let mut w = ShardWriter::new(store).expect("writer");
        for id in ids {
            let mut d = Document::new(id.clone(), "some words");
            d.language = Some("en".into());
            w.push(d).expect("push");
        }
        write_dataset(store, vec![w.finish().expect("shard")]).expect("dataset").0
    }

    fn tox_row(i: u32, threshold: f64) -> LedgerRow {
        let score = f64::from(i);
        let toxic = score >= threshold;
        LedgerRow {
            id: format!("d{i:02}"),
            decision: if toxic { LedgerDecision::Removed } else { LedgerDecision::Kept },
            rule: if toxic { "toxicity:toxic".into() } else { "toxicity:kept".into() },
            evidence: json!({"language": "en", "score": score, "threshold": threshold}).as_object().cloned(),
            language: Some("en".into()),
            words: 2,
        }
    }

    /// A run with one `toxicity` stage over 40 English documents scored 0 to 39 at
    /// `threshold`; `tamper` may change the rows before they are written.
    fn toxicity_run(store: &Store, threshold: f64, tamper: impl Fn(&mut Vec<LedgerRow>)) -> (Digest, RunRecord) {
        let mut rows: Vec<LedgerRow> = (0..40).map(|i| tox_row(i, threshold)).collect();
        let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
        let input = dataset(store, &ids);
        tamper(&mut rows);
        let removed = rows.iter().filter(|r| r.decision == LedgerDecision::Removed).count();
        let kept: Vec<String> =
            rows.iter().filter(|r| r.decision != LedgerDecision::Removed).map(|r| r.id.clone()).collect();
        let output = dataset(store, &kept);
        let (ledger, _) = write_ledger(store, vec![write_ledger_shard(store, rows).expect("shard")]).expect("ledger");
        let stats: BTreeMap<String, Value> = [
            ("quantile".to_owned(), json!(0.95)),
            ("thresholds".to_owned(), json!({"en": {"threshold": threshold, "scored": 40, "removed": removed}})),
        ]
        .into();
        let s = stage(
            "toxicity",
            "toxicity",
            &[("docs", input)],
            &[("dataset", OutputType::Dataset, output), ("ledger", OutputType::Ledger, ledger)],
            stats,
        );
        let manifest = put_record(store, &Record::Stage(s.clone())).expect("stage");
        let run = RunRecord::new("t", Digest::of(b"lockfile"), vec![RunStage { name: s.name, manifest }]);
        (put_record(store, &Record::Run(run.clone())).expect("run"), run)
    }

    fn audit(store: &Store, run: &(Digest, RunRecord), policy: &str) -> Vec<crate::ClaimResult> {
        let policy = AuditPolicy::parse(std::path::Path::new("p.yaml"), policy).expect("policy");
        let run = prov_manifest::LoadedRun::load(store, run.0).expect("the run");
        evaluate(&RunContext::new(store, &run), &policy, &AuditOptions::default())
    }

    const TOX: &str = "schema: 1\nname: t\nclaims:\n  - kind: toxicity\n    removed_share: 0.05\n    tolerance: 0.01\n";

    #[test]
    fn the_toxicity_share_is_checked_per_language_at_the_recorded_threshold() {
        let (_d, store) = new_store();
        let run = toxicity_run(&store, 37.5, |_| {});
        let r = &audit(&store, &run, TOX)[0];
        assert_eq!(r.outcome, Outcome::Holds, "{r:?}");
        assert!(
            r.evidence
                .iter()
                .any(|e| e.name == "`toxicity` `en` removed (threshold 37.5)" && e.value == "2 of 40 = 5.00%")
        );

        // Four removed is 10%: outside 5% ± 1%.
        let run = toxicity_run(&store, 35.5, |_| {});
        let r = &audit(&store, &run, TOX)[0];
        assert_eq!(r.outcome, Outcome::Fails, "{r:?}");
        assert!(r.reasons[0].contains("removed 10.00% of scored documents, not 5.00% within 1.00%"), "{r:?}");

        // A row kept above its threshold contradicts the recorded decision.
        let run = toxicity_run(&store, 37.5, |rows| {
            rows[39].decision = LedgerDecision::Kept;
            rows[39].rule = "toxicity:kept".into();
        });
        let r = &audit(&store, &run, TOX)[0];
        assert_eq!(r.outcome, Outcome::Fails, "{r:?}");
        assert!(r.reasons.iter().any(|m| m.contains("1 scored rows disagree")), "{r:?}");

        // A run without the stage: cannot be decided.
        let r =
            &audit(&store, &run, &TOX.replace("toxicity\n    removed", "toxicity\n    stage: other\n    removed"))[0];
        assert_eq!(r.outcome, Outcome::CannotBeDecided, "{r:?}");
    }

    #[test]
    fn ledger_rows_that_do_not_hash_to_the_recorded_shard_root_are_refused() {
        let (_d, store) = new_store();
        let a = write_ledger_shard(&store, vec![row("a", false), row("b", true)]).expect("shard");
        let b = write_ledger_shard(&store, vec![row("a", false), row("c", true)]).expect("shard");
        let (honest, ledger) = write_ledger(&store, vec![a.clone()]).expect("ledger");
        assert_eq!(check_ledger(&store, &honest).expect("checks").record.rows, 2);
        // The rows of shard `a` under the root of shard `b`: a ledger consistent in itself.
        let forged = LedgerShardRef { root: b.root, ..shard_ref(&a) };
        let forged = forge_ledger(&store, vec![forged], ledger.directory, a.rules.clone());
        let e = check_ledger(&store, &forged).err().expect("refused");
        assert!(
            e.contains(&format!("its rows hash to root `{}`, the record's shard root is `{}`", a.root, b.root)),
            "{e}"
        );
    }

    /// The audit holds no rows: it reads each shard again when a claim needs it. A shard whose
    /// bytes change after the ledger was checked (swapped under the auditor) is refused then,
    /// and the row stream ends at the error instead of going on without the shard.
    #[test]
    fn a_ledger_shard_changed_after_the_check_is_refused_when_read_again() {
        let (_d, store) = new_store();
        let a = write_ledger_shard(&store, vec![row("a", false), row("b", true)]).expect("shard");
        let b = write_ledger_shard(&store, vec![row("c", false), row("d", true)]).expect("shard");
        let (digest, _) = write_ledger(&store, vec![a.clone(), b.clone()]).expect("ledger");
        let ledger = check_ledger(&store, &digest).expect("checks");
        let rows: Vec<_> = ledger.rows(&store).collect::<Result<_, _>>().expect("reads");
        assert_eq!(
            rows.iter().map(|(i, r)| (*i, r.id.as_str())).collect::<Vec<_>>(),
            [(0, "a"), (0, "b"), (1, "c"), (1, "d")]
        );
        // Shard 0's object replaced by shard 1's bytes: well-formed rows, wrong object.
        let path = store.object_path(&a.shard.digest);
        let mut perms = fs_err::metadata(&path).unwrap().permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        perms.set_readonly(false);
        fs_err::set_permissions(&path, perms).unwrap();
        fs_err::write(&path, fs_err::read(store.object_path(&b.shard.digest)).unwrap()).unwrap();
        let e = ledger.shard(&store, 0).expect_err("refused");
        assert!(e.contains(&a.shard.digest.to_string()), "{e}");
        let after: Vec<_> = ledger.rows(&store).collect();
        assert_eq!(after.len(), 1, "the stream ends at the error: {after:?}");
        assert!(after[0].is_err());
    }

    /// A ledger record whose parts record lists another shard than its root covers: the
    /// parts (a second shard appended) are a valid record, the ledger record's count, rows and
    /// rules edited to match; only the root over the shards' leaves tells them apart.
    #[test]
    fn a_ledger_whose_parts_are_not_the_ones_its_root_covers_is_refused() {
        let (_d, store) = new_store();
        let a = write_ledger_shard(&store, vec![row("a", false), row("b", true)]).expect("shard");
        let b = write_ledger_shard(&store, vec![row("c", false)]).expect("shard");
        let (_, one) = write_ledger(&store, vec![a.clone()]).expect("ledger");
        let (_, both) = write_ledger(&store, vec![a.clone(), b.clone()]).expect("ledger");
        let parts = put_record(&store, &Record::LedgerParts(Ledger::parts_record(&both.shards, &both.directory)))
            .expect("parts");
        let forged = prov_manifest::LedgerRecord {
            parts,
            shards: 2,
            directory: both.record.directory.clone(),
            rows: 3,
            rules: both.record.rules.clone(),
            ..one.record
        };
        let forged = put_record(&store, &Record::Ledger(forged)).expect("a record that decodes");
        let e = check_ledger(&store, &forged).err().expect("refused");
        assert!(e.contains("`merkle_root` is"), "{e}");
    }

    /// A ledger whose id directory lists a row under the wrong shard, or lists another id
    /// in its place, is refused: the record is consistent in itself (entries, chunk roots and
    /// root recomputed), and a proof built on it would say the filter never saw `b` in the
    /// shard that holds it.
    #[test]
    fn a_ledger_whose_directory_misplaces_or_replaces_a_row_is_refused() {
        use prov_dataset::chunked::ChunkWriter;
        use prov_dataset::directory::DirectoryEntry;
        let (_d, store) = new_store();
        let a = write_ledger_shard(&store, vec![row("a", false), row("b", true)]).expect("shard");
        let b = write_ledger_shard(&store, vec![row("c", false)]).expect("shard");
        let (honest, ledger) = write_ledger(&store, vec![a, b]).expect("ledger");
        check_ledger(&store, &honest).expect("the honest ledger checks");
        let forge = |entries: &[(&str, u32)]| {
            let mut w = ChunkWriter::new(Some(&store), 2);
            for (id, shard) in entries {
                w.push(DirectoryEntry { id: (*id).into(), shard: *shard }).expect("in order");
            }
            let directory = w.finish().expect("written");
            forge_ledger(&store, ledger.shards.clone(), directory, ledger.record.rules.clone())
        };
        for entries in [
            vec![("a", 0), ("b", 1), ("c", 1)],
            vec![("a", 0), ("bb", 0), ("c", 1)],
            vec![("a", 0), ("c", 1), ("c", 1)].into_iter().take(2).chain([("d", 1)]).collect(),
        ] {
            let forged = forge(&entries);
            let e = check_ledger(&store, &forged).err().expect("refused");
            assert!(e.contains("its id directory does not list exactly the ids of shard"), "{entries:?}: {e}");
        }
        let e = check_ledger(&store, &forge(&[("a", 0), ("b", 0), ("c", 2)])).err().expect("refused");
        assert!(e.contains("listed under shard 2, but the ledger has 2"), "{e}");
    }

    #[test]
    fn a_sample_states_its_confidence() {
        assert!((crate::claims::detection_probability(0.005, 1000) - 0.993_346).abs() < 1e-6);
        // The key is the `sample` stage's: BLAKE3(seed LE ‖ id), first 8 bytes, little-endian.
        let mut h = blake3::Hasher::new();
        h.update(&7u64.to_le_bytes());
        h.update(b"a");
        let expected = u64::from_le_bytes(h.finalize().as_bytes()[..8].try_into().unwrap());
        assert_eq!(prov_dataset::sample_key(7, "a"), expected);
        assert_ne!(prov_dataset::sample_key(7, "a"), prov_dataset::sample_key(7, "b"));
    }
}
