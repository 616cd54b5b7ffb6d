//! A small run built from records in a temporary store: the card's parts end to end.

use std::collections::BTreeMap;

use prov_manifest::{
    Column, Content, DatasetRecord, Determinism, Envelope, OutputRef, OutputType, Record, RunRecord, RunStage,
    ShardRef, SourceRecord, StageRecord, put_record,
};
use prov_store::{Digest, ObjectKind, Store};
use serde_json::{Value, json};

use crate::{CardInputs, CardOptions, Format, group, hf, plots, primary_language, write_card};

fn envelope() -> Envelope {
    Envelope {
        workbench_version: "0.1.0".into(),
        os: "Linux".into(),
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
    stats: Value,
) -> Record {
    Record::Stage(StageRecord {
        schema: 1,
        name: name.parse().unwrap(),
        stage_kind: kind.into(),
        version: 1,
        determinism: Determinism::Portable,
        key: Digest::of(name.as_bytes()),
        config: json!({"quantile": 0.95}),
        inputs: inputs.iter().map(|(k, d)| ((*k).to_owned(), *d)).collect(),
        seeds: BTreeMap::new(),
        envelope: envelope(),
        outputs: outputs.iter().map(|(k, t, d)| ((*k).to_owned(), OutputRef { output_type: *t, digest: *d })).collect(),
        stats: serde_json::from_value(stats).unwrap(),
    })
}

fn dataset(store: &Store, rows: u64, seed: &[u8]) -> Digest {
    let shard = store.put_bytes(ObjectKind::Shard, seed).unwrap();
    let columns = ["id", "text", "url", "date", "language"]
        .iter()
        .map(|n| Column { name: (*n).into(), data_type: "Utf8".into(), nullable: *n != "id" && *n != "text" })
        .collect();
    put_record(
        store,
        &Record::Dataset(DatasetRecord::new(
            "parquet",
            columns,
            vec![ShardRef { digest: shard, rows, bytes: seed.len() as u64 }],
        )),
    )
    .unwrap()
}

/// Returns the store and the run record's digest: source → shards → toxicity → license.
fn run(store: &Store) -> Digest {
    run_with(
        store,
        &json!({"MIT": {"decision": "kept", "documents": 57, "spdx": "MIT", "policy_rule": "allow-list"},
               "GPL-3+": {"decision": "removed", "documents": 40, "spdx": "GPL-3.0-or-later", "policy_rule": "not-in-allow-list"}}),
        |_| {},
    )
}

/// The run of [`run`] with the license stage's `licenses` statistics given, and its record
/// edited by `edit`.
fn run_with(store: &Store, licenses: &Value, edit: impl Fn(&mut StageRecord)) -> Digest {
    let src = put_record(
        store,
        &Record::Source(SourceRecord {
            schema: 1,
            name: "docs".parse().unwrap(),
            origin: "data/docs.jsonl".into(),
            content: Content::File { digest: Digest::of(b"docs"), size: 4 },
            license: Some("MIT AND GPL-3.0-or-later".into()),
            retrieved: Some("2025-01-31".into()),
        }),
    )
    .unwrap();
    let s0 =
        put_record(store, &stage("docs", "source", &[], &[("source", OutputType::Source, src)], json!({"files": 1})))
            .unwrap();
    let d1 = dataset(store, 100, b"shard one");
    let s1 = put_record(
        store,
        &stage(
            "shards",
            "shard",
            &[("docs", src)],
            &[("dataset", OutputType::Dataset, d1)],
            json!({"documents": 100, "languages": {"de": 60, "pt-PT": 40}}),
        ),
    )
    .unwrap();
    let d2 = dataset(store, 97, b"shard two");
    let s2 = put_record(
        store,
        &stage(
            "toxicity",
            "toxicity",
            &[("docs", d1)],
            &[("dataset", OutputType::Dataset, d2)],
            json!({
                "by_rule": {"toxicity:kept": {"documents": 57, "words": 570}, "toxicity:toxic": {"documents": 3, "words": 30}, "toxicity:no-classifier": {"documents": 40, "words": 400}},
                "removed_by_language": {"de": {"documents": 3, "words": 30}},
                "quantile": 0.95,
                "thresholds": {"de": {"threshold": 1.25, "scored": 60, "removed": 3}},
                "score_quantiles": {"de": (0..21).map(|i| f64::from(i) * 0.1 - 0.8).collect::<Vec<_>>()},
                "total": {"documents": 100, "words": 1000}
            }),
        ),
    )
    .unwrap();
    let d3 = dataset(store, 57, b"shard three");
    let mut license = stage(
        "license",
        "license",
        &[("docs", d2)],
        &[("dataset", OutputType::Dataset, d3)],
        json!({
            "by_rule": {"license:allowed": {"documents": 57, "words": 570}, "license:denied": {"documents": 40, "words": 400}},
            "removed_by_language": {"pt-PT": {"documents": 40, "words": 400}},
            "licenses": licenses,
            "policy": {"name": "permissive", "version": "1"},
            "total": {"documents": 97, "words": 970}
        }),
    );
    if let Record::Stage(st) = &mut license {
        edit(st);
    }
    let s3 = put_record(store, &license).unwrap();
    let stages = [("docs", s0), ("shards", s1), ("toxicity", s2), ("license", s3)]
        .iter()
        .map(|(n, m)| RunStage { name: n.parse().unwrap(), manifest: *m })
        .collect();
    put_record(store, &Record::Run(RunRecord::new("demo", Digest::of(b"lockfile"), stages))).unwrap()
}

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::init(&dir.path().join(".prov")).unwrap();
    (dir, s)
}

#[test]
fn numbers_and_buckets() {
    assert_eq!(group(0), "0");
    assert_eq!(group(999), "999");
    assert_eq!(group(1_000), "1,000");
    assert_eq!(group(15_640), "15,640");
    assert_eq!(hf::size_category(999), "n<1K");
    assert_eq!(hf::size_category(1_000), "1K<n<10K");
    assert_eq!(hf::size_category(2_000_000_000_000), "n>1T");
    assert_eq!(primary_language("pt-PT"), "pt");
    assert_eq!(primary_language("de"), "de");
}

#[test]
fn evidence_follows_the_chain_and_derives_languages() {
    let (_d, s) = store();
    let run = run(&s);
    let ev = CardInputs::read(&s, &run).unwrap();
    assert_eq!(ev.output.stage, "license");
    let chain: Vec<&str> = ev.chain_stages().map(|st| st.record.name.as_str()).collect();
    assert_eq!(chain, ["shards", "toxicity", "license"]);
    assert_eq!(ev.sources.len(), 1);
    assert!(ev.sources[0].documents);
    let (langs, adds_up) = ev.kept_languages();
    assert_eq!(langs.into_iter().collect::<Vec<_>>(), [("de".to_owned(), 57)]);
    assert!(adds_up);
}

#[test]
fn card_cites_a_manifest_for_every_number() {
    let (_d, s) = store();
    let run = run(&s);
    let ev = CardInputs::read(&s, &run).unwrap();
    let card = hf::render(&ev, &[]);
    let (front, body) = card.strip_prefix("---\n").unwrap().split_once("\n---\n").unwrap();
    let meta: serde_yaml::Value = serde_yaml::from_str(front).unwrap();
    assert_eq!(meta["license"][0].as_str(), Some("mit"));
    assert_eq!(meta["language"][0].as_str(), Some("de"));
    assert_eq!(meta["size_categories"][0].as_str(), Some("n<1K"));
    let (text, _) = body.split_once("## Manifests").unwrap();
    for line in text.lines().filter(|l| !l.starts_with('#') && l.chars().any(|c| c.is_ascii_digit())) {
        assert!(line.contains("[^"), "no manifest: {line}");
    }
    assert!(text.contains("| `GPL-3+` | `GPL-3.0-or-later` | 40 | `removed` |"), "{text}");
    assert!(text.contains("no classifier"), "{text}");
}

#[test]
fn plots_render_to_svg_and_png() {
    let (_d, s) = store();
    let run = run(&s);
    let ev = CardInputs::read(&s, &run).unwrap();
    let all = plots::plots(&ev, 10);
    let stems: Vec<&str> = all.iter().map(|p| p.stem).collect();
    assert_eq!(stems, ["languages", "toxicity", "funnel", "licenses"]);
    for p in &all {
        let png = plots::png(p.stem, &p.svg).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "{}", p.stem);
        assert!(png.len() > 2_000, "{}: {} bytes", p.stem, png.len());
    }
}

/// A corpus decides how many distinct license strings a license stage sees; the plot shows
/// the largest and sums the rest into one row, so that its size does not follow the data
/// (4,000 strings made a 1800 x 176,180 pixel PNG, 2.6 GB of memory, in an adversarial review).
#[test]
fn the_license_plot_has_a_bounded_number_of_rows() {
    let (_d, s) = store();
    let licenses: serde_json::Map<String, Value> = (0..4000)
        .map(|i| {
            (
                format!("LicenseRef-{i:04}"),
                json!({"decision": "removed", "documents": 1 + i % 7, "policy_rule": "unknown-license"}),
            )
        })
        .collect();
    let run = run_with(&s, &Value::Object(licenses), |_| {});
    let ev = CardInputs::read(&s, &run).unwrap();
    let plot = plots::plots(&ev, 10).into_iter().find(|p| p.stem == "licenses").unwrap();
    let documents: u64 = (0..4000u64).map(|i| 1 + i % 7).sum();
    assert!(plot.svg.contains("3,976 other strings"), "the rest in one row");
    // The rows' documents still add up: the 24 largest (7 each) and the rest.
    let largest: u64 = 24 * 7;
    assert!(plot.svg.contains(&crate::group(documents - largest)), "the rest's documents");
    let png = plots::png(plot.stem, &plot.svg).unwrap();
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert!(height < 1600, "{height} pixels");
}

#[test]
fn croissant_hashes_the_shards_and_fails_on_a_missing_one() {
    let (dir, s) = store();
    let run = run(&s);
    let out = dir.path().join("card");
    let options = CardOptions { format: Format::Croissant, top_languages: 10, with_data: true, dataset: None };
    let written = write_card(&s, &run, &out, &options).unwrap();
    assert!(written.iter().any(|w| w.path == "croissant.json"));
    let doc: Value = serde_json::from_slice(&fs_err::read(out.join("croissant.json")).unwrap()).unwrap();
    // SHA-256 of "shard three".
    assert_eq!(doc["distribution"][0]["sha256"], "7f39aaa4654135df78d538b4fe20f35102d6ef09697cb5e73b436558851f60a8");
    assert_eq!(fs_err::read(out.join("data/shard-00000.parquet")).unwrap(), b"shard three");
    fs_err::remove_file(s.object_path(&Digest::of(b"shard three"))).unwrap();
    let err = write_card(&s, &run, &out, &options).unwrap_err();
    assert!(err.to_string().contains("is not in the store"), "{err}");
}

#[test]
fn a_pass_through_filter_stays_in_the_chain() {
    // A filter that keeps everything outputs its input's digest; the next stage's input is
    // then written by two stages, and the chain goes through the later one.
    let (_d, s) = store();
    let d1 = dataset(&s, 3, b"pass");
    let s1 = put_record(
        &s,
        &stage("shards", "shard", &[], &[("dataset", OutputType::Dataset, d1)], json!({"languages": {"en": 3}})),
    )
    .unwrap();
    let kept = json!({"by_rule": {"pii:none": {"documents": 3, "words": 9}}, "removed_by_language": {}});
    let s2 =
        put_record(&s, &stage("pii", "pii", &[("docs", d1)], &[("dataset", OutputType::Dataset, d1)], kept.clone()))
            .unwrap();
    let s3 = put_record(&s, &stage("dedup", "dedup", &[("docs", d1)], &[("dataset", OutputType::Dataset, d1)], kept))
        .unwrap();
    let stages = [("shards", s1), ("pii", s2), ("dedup", s3)]
        .iter()
        .map(|(n, m)| RunStage { name: n.parse().unwrap(), manifest: *m })
        .collect();
    let run = put_record(&s, &Record::Run(RunRecord::new("pass", Digest::of(b"lock"), stages))).unwrap();
    let ev = CardInputs::read(&s, &run).unwrap();
    let chain: Vec<&str> = ev.chain_stages().map(|st| st.record.name.as_str()).collect();
    assert_eq!(chain, ["shards", "pii", "dedup"]);
}

/// Documents kept without a declared license (`missing: allow`) are `NOASSERTION` in the
/// card's licenses (`unknown` in the front matter), not left out: the adversarial review's
/// run kept 999 such documents beside one MIT one, and the card said `MIT`.
#[test]
fn documents_kept_without_a_license_are_no_assertion() {
    let (_d, s) = store();
    let kept_mit = || json!({"MIT": {"decision": "kept", "documents": 1, "spdx": "MIT", "policy_rule": "allow-list"}});
    let missing = |policy: &'static str| {
        move |st: &mut StageRecord| {
            st.config = json!({"missing": policy});
            st.stats.insert("by_rule".into(), json!({"license:missing": {"documents": 999, "words": 9990}}));
        }
    };
    let ev = CardInputs::read(&s, &run_with(&s, &kept_mit(), |_| {})).unwrap();
    assert_eq!(hf::kept_licenses(&ev).0, ["MIT"], "no `license:missing` documents");

    let ev = CardInputs::read(&s, &run_with(&s, &kept_mit(), missing("allow"))).unwrap();
    assert_eq!(hf::kept_licenses(&ev).0, ["MIT", "NOASSERTION"]);
    let card = hf::render(&ev, &[]);
    assert!(card.contains("- \"mit\"\n- \"unknown\"\n"), "{card}");
    assert!(card.contains("999 kept documents declare no license"), "{card}");
    // Under `missing: deny` they were removed: nothing to add.
    let ev = CardInputs::read(&s, &run_with(&s, &kept_mit(), missing("deny"))).unwrap();
    assert_eq!(hf::kept_licenses(&ev).0, ["MIT"]);
}

#[test]
fn without_a_license_stage_the_sources_expressions_give_the_ids() {
    let (_d, s) = store();
    let run = run(&s);
    let mut ev = CardInputs::read(&s, &run).unwrap();
    ev.chain.retain(|&i| ev.run.stages()[i].record.stage_kind != "license");
    ev.sources[0].documents = true;
    let (ids, refs) = hf::kept_licenses(&ev);
    assert_eq!(ids, ["GPL-3.0-or-later", "MIT"]);
    assert_eq!(refs, [ev.sources[0].digest]);
}
