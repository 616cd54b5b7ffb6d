//! Parallel data end to end (EuroLLM §2.3, "Bifixer-style normalisation and deduplication of
//! sentence pairs"): `sentence-pairs` pairs the quickstart's UDHR articles paragraph by
//! paragraph, English beside four languages, plus a "web" copy of some articles (mojibake,
//! HTML, spaced punctuation) and an exact copy of others; `bifixer` repairs them with the rules
//! `scripts/bifixer-rules.py` read from the pinned package; `dedup` keyed on the pair hash drops
//! the copies.
//!
//! Checked independently: the real `bifixer` executable, run on the same pairs, keeps the same
//! pairs with the same two sides and hashes as the `bifixer` stage's dataset, and drops the ones
//! its ledger removes; deduplicating Bifixer's own output on its hash, first kept, leaves the
//! pairs `dedup` kept, and each removed pair's `duplicate_of` has its hash. The run replays. A
//! Bifixer option Provenant does not carry, and a pair whose language the rules lack, are
//! refused with messages that say so.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use prov_dataset::LedgerDecision;
use serde_json::Value;

use crate::common::{Project, ledger_rows, venv_python};

const LANGUAGES: [(&str, &str); 5] =
    [("eng", "en"), ("deu_1996", "de"), ("fra", "fr"), ("spa", "es"), ("por_PT", "pt")];

fn recipe(extra_params: &str) -> String {
    let languages: Vec<String> = LANGUAGES.iter().map(|(c, l)| format!("{c}: {l}")).collect();
    format!(
        "schema: 1\nname: pairs\nseed: 1\nsources:\n\
         \x20 udhr:\n    path: data/parallel\n    license: MIT\n\
         \x20 clean:\n    path: data/clean\n    license: MIT\n\
         \x20 rules:\n    path: data/bifixer-rules.json\n    license: GPL-3.0-only\n\
         stages:\n\
         \x20 shards:\n    kind: shard\n    inputs: {{docs: udhr}}\n    params: {{shards: 3}}\n\
         \x20 pairs:\n    kind: sentence-pairs\n    inputs: {{docs: shards}}\n    params: {{source: eng, languages: {{{languages}}}}}\n\
         \x20 fixed:\n    kind: bifixer\n    inputs: {{docs: pairs, rules: rules}}\n{extra_params}\
         \x20 unique:\n    kind: dedup\n    inputs: {{docs: fixed.dataset}}\n    params: {{key: {{metadata: bifixer_hash}}, near: false}}\n\
         \x20 clean-shards:\n    kind: shard\n    inputs: {{docs: clean}}\n    params: {{shards: 2}}\n\
         \x20 clean-pairs:\n    kind: sentence-pairs\n    inputs: {{docs: clean-shards}}\n    params: {{source: eng, languages: {{{languages}}}}}\n\
         \x20 scorer:\n    kind: pair-score-train\n    inputs: {{docs: clean-pairs}}\n    params: {{hold_out: 5}}\n\
         \x20 scored:\n    kind: pair-score\n    inputs: {{docs: unique.dataset, model: scorer.model}}\n",
        languages = languages.join(", ")
    )
}

/// The crawl's extra documents: articles 00-09 of each selected translation mangled ("web":
/// UTF-8 read as Windows-1252, wrapped in HTML, spaces before punctuation), articles 10-14
/// copied exactly ("copy"), and articles 15-30 misaligned ("shuf": each translation's text of
/// another article with as many paragraphs as the English one).
fn web_documents(sample: &str) -> String {
    let mut texts: BTreeMap<(String, u32), String> = BTreeMap::new();
    let mut languages: BTreeMap<String, Value> = BTreeMap::new();
    for line in sample.lines() {
        let doc: Value = serde_json::from_str(line).unwrap();
        let (_, rest) = doc["id"].as_str().unwrap().split_once('-').unwrap();
        let (translation, unit) = rest.rsplit_once('-').unwrap();
        if LANGUAGES.iter().any(|(c, _)| *c == translation) {
            texts.insert((translation.to_owned(), unit.parse().unwrap()), doc["text"].as_str().unwrap().to_owned());
            languages.insert(translation.to_owned(), doc["language"].clone());
        }
    }
    let paragraphs = |t: &str| t.split('\n').filter(|p| !p.trim().is_empty()).count();
    let mut out = String::new();
    let mut push = |prefix: &str, translation: &str, unit: u32, text: &str| {
        let id = format!("{prefix}-{translation}-{unit:02}");
        out.push_str(&serde_json::json!({ "id": id, "text": text, "language": languages[translation] }).to_string());
        out.push('\n');
    };
    for ((translation, n), text) in &texts {
        match n {
            0..=9 => {
                let mangled: Vec<String> = text
                    .split('\n')
                    .map(|p| match n % 3 {
                        0 => p.bytes().map(|b| if b == 0x80 { '€' } else { char::from(b) }).collect(),
                        1 => format!("<p>{p} &amp; <b>ok</b></p>"),
                        _ => p.replace(',', " ,").replace('.', " ."),
                    })
                    .collect();
                push("web", translation, *n, &mangled.join("\n"));
            }
            10..=14 => push("copy", translation, *n, text),
            15..=30 if translation == "eng" => push("shuf", translation, *n, text),
            15..=30 => {
                let english = paragraphs(&texts[&("eng".to_owned(), *n)]);
                let other = texts.iter().find(|((t, m), x)| t == translation && m != n && paragraphs(x) == english);
                if let Some((_, x)) = other {
                    push("shuf", translation, *n, x);
                }
            }
            _ => {}
        }
    }
    out
}

/// A project with the quickstart's UDHR and its "web" copies under `data/parallel`, and the
/// Bifixer rules of `langs`.
fn project(python: &Path, langs: &[&str]) -> Project {
    let p = Project::with_recipes();
    let sample = fs_err::read_to_string(p.path("recipes/data/quickstart/udhr-sample.jsonl")).unwrap();
    p.write("recipes/data/parallel/udhr.jsonl", &sample);
    p.write("recipes/data/parallel/web.jsonl", &web_documents(&sample));
    p.write("recipes/data/clean/udhr.jsonl", &sample);
    prov_testkit::bifixer_rules(python, &p.path("recipes/data/bifixer-rules.json"), langs);
    p
}

/// The documents of a dataset of `p`'s store, in dataset order.
fn documents(p: &Project, dataset: &str) -> Vec<prov_dataset::Document> {
    let store = prov_store::Store::open(&p.path(".prov"), prov_store::Access::Shared, true).unwrap();
    let digest: prov_store::Digest = dataset.parse().unwrap();
    let prov_manifest::Record::Dataset(ds) = prov_manifest::get_record(&store, &digest).unwrap() else {
        panic!("a dataset record")
    };
    ds.shards
        .iter()
        .flat_map(|s| prov_dataset::shard_documents(&store, &s.digest).unwrap().map(Result::unwrap))
        .collect()
}

/// Bifixer's output, per pair id: `(source, target, hash)`.
type Fixed = HashMap<String, (String, String, String)>;

/// Bifixer's output for the pairs, per pair id: `(source, target, hash)`, and the ids it kept in
/// input order.
fn real_bifixer(
    python: &Path,
    dir: &Path,
    pairs: &[prov_parallel::pairs::Pair],
    ids: &[String],
) -> (Fixed, Vec<String>) {
    let mut by_languages: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (i, pair) in pairs.iter().enumerate() {
        by_languages.entry((pair.source_language.clone(), pair.target_language.clone())).or_default().push(i);
    }
    let mut out = HashMap::new();
    for ((src, trg), members) in &by_languages {
        let rows: Vec<(&str, &str, &str)> =
            members.iter().map(|&i| (ids[i].as_str(), pairs[i].source.as_str(), pairs[i].target.as_str())).collect();
        for f in prov_testkit::bifixer(python, dir, (src, trg), &rows, &[]) {
            out.insert(f[2].clone(), (f[0].clone(), f[1].clone(), f[3].clone()));
        }
    }
    let kept = ids.iter().filter(|id| out.contains_key(*id)).cloned().collect();
    (out, kept)
}

#[test]
fn pairs_are_repaired_as_bifixer_repairs_them_deduplicated_and_replayed() {
    let Some(python) = venv_python() else { return };
    let p = project(&python, &["en", "de", "fr", "es", "pt"]);
    p.write("recipes/pairs.yaml", &recipe(""));
    let lines = p.json(&["run", "recipes/pairs.yaml"]);
    let stage =
        |name: &str| lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == name).unwrap()["data"].clone();
    let record = |name: &str| p.json(&["show", stage(name)["manifest"].as_str().unwrap()])[0]["data"]["record"].clone();

    // Pairs: every language beside English, from the UDHR and both copies.
    let pair_docs = documents(&p, stage("pairs")["outputs"]["dataset"].as_str().unwrap());
    let stats = record("pairs")["stats"].clone();
    assert_eq!(stats["pairs"].as_u64(), Some(pair_docs.len() as u64), "{stats}");
    for (code, _) in &LANGUAGES[1..] {
        assert!(stats["by_language_pair"][format!("eng-{code}")]["pairs"].as_u64().unwrap() > 50, "{stats}");
    }
    let pairs: Vec<prov_parallel::pairs::Pair> =
        pair_docs.iter().map(|d| prov_parallel::pairs::Pair::of(d).unwrap()).collect();
    let ids: Vec<String> = pair_docs.iter().map(|d| d.id.clone()).collect();
    assert!(ids.iter().any(|i| i.starts_with("web-")) && ids.iter().any(|i| i.starts_with("copy-")));

    // The real Bifixer keeps the pairs the stage keeps, with the same sides and hashes.
    let dir = p.path("bifixer-run");
    fs_err::create_dir_all(&dir).unwrap();
    let (theirs, kept_by_bifixer) = real_bifixer(&python, &dir, &pairs, &ids);
    let fixed = documents(&p, stage("fixed")["outputs"]["dataset"].as_str().unwrap());
    let ours: Vec<String> = fixed.iter().map(|d| d.id.clone()).collect();
    assert_eq!(ours, kept_by_bifixer, "the kept pairs, in order");
    let mut repaired = 0;
    for doc in &fixed {
        let pair = prov_parallel::pairs::Pair::of(doc).unwrap();
        let hash = pair.metadata["bifixer_hash"].as_str().unwrap().to_owned();
        assert_eq!((pair.source.clone(), pair.target.clone(), hash), theirs[&doc.id].clone(), "{}", doc.id);
    }
    let rows = ledger_rows(&p, stage("fixed")["outputs"]["ledger"].as_str().unwrap());
    assert_eq!(rows.len(), pairs.len());
    for row in &rows {
        match row.rule.as_str() {
            "bifixer:repaired" => {
                assert_eq!(row.decision, LedgerDecision::Modified);
                repaired += 1;
            }
            "bifixer:unchanged" => assert_eq!(row.decision, LedgerDecision::Kept),
            other => assert!(other.starts_with("bifixer:empty") && !theirs.contains_key(&row.id), "{row:?}"),
        }
        // Every pair wrapped in HTML (the "web" articles 01, 04 and 07) was repaired.
        if ["web-01.", "web-04.", "web-07."].iter().any(|p| row.id.starts_with(p)) {
            assert_eq!(row.rule, "bifixer:repaired", "{row:?}");
        }
    }
    eprintln!("bifixer: {repaired} of {} pairs repaired", rows.len());
    explain_bifixer_agrees(&p, &pairs, &ids, &rows, &fixed);
    assert!(repaired > 50, "{repaired} pairs repaired");

    // Dedup on the hash, first kept, as a Bifixer user does it.
    let mut first_of: HashMap<&str, &str> = HashMap::new();
    let mut expect_kept = Vec::new();
    for id in &kept_by_bifixer {
        let hash = theirs[id].2.as_str();
        if first_of.insert(hash, id).is_none() {
            expect_kept.push(id.clone());
        }
    }
    let unique: Vec<String> =
        documents(&p, stage("unique")["outputs"]["dataset"].as_str().unwrap()).into_iter().map(|d| d.id).collect();
    assert_eq!(unique, expect_kept);
    let removed: Vec<_> = ledger_rows(&p, stage("unique")["outputs"]["ledger"].as_str().unwrap())
        .into_iter()
        .filter(|r| r.decision == LedgerDecision::Removed)
        .collect();
    assert!(removed.len() > 20, "{} duplicates", removed.len());
    // Pairs are ordered by prefix (copy, udhr, web): a duplicate is the same paragraph pair of
    // the same unit under a later prefix, a UDHR pair after its exact copy, or a mangled "web"
    // pair that Bifixer repaired back to the UDHR's bytes.
    let split = |id: &str| id.split_once('-').map(|(a, b)| (a.to_owned(), b.to_owned())).unwrap();
    for r in &removed {
        let of = r.evidence.as_ref().unwrap()["duplicate_of"].as_str().unwrap();
        let ((prefix, rest), (of_prefix, of_rest)) = (split(&r.id), split(of));
        assert!(rest == of_rest && of_prefix < prefix, "{} duplicate of {of}", r.id);
        assert_eq!(theirs[of].2, theirs[&r.id].2, "{} and {of} share Bifixer's hash", r.id);
    }
    assert!(removed.iter().any(|r| r.id.starts_with("udhr-")) && removed.iter().any(|r| r.id.starts_with("web-")));
    scores_separate_real_pairs_from_misaligned_ones(&p, &stage, &record);
    p.prov(&["replay", "lockfiles/pairs.lock"]).success();
    the_pair_score_claim_holds_and_forgeries_fail(&p);
}

/// EuroLLM's policy holds on the honest run; a lax threshold, and kept pairs forged into the
/// ledger and output with their recorded scores edited or not (every digest and root
/// recomputed), fail it.
fn the_pair_score_claim_holds_and_forgeries_fail(p: &Project) {
    use crate::test_audit::{audit_forged, keep_row};
    use prov_audit::Outcome;
    // The shipped EuroLLM policy reads; its `pair-score` claim, alone, is held here (the run
    // has no heuristics stage for its other claim).
    let shipped = prov_testkit::repo_root().join("recipes/policies/eurollm.yaml");
    let parsed = prov_audit::AuditPolicy::parse(&shipped, &fs_err::read_to_string(&shipped).unwrap()).unwrap();
    assert!(
        parsed.claims.iter().any(|c| c.kind() == "pair-score")
            && parsed.claims.iter().any(|c| c.kind() == "heuristics")
    );
    p.write("pairs-policy.yaml", "schema: 1\nname: pairs\nclaims:\n  - kind: pair-score\n");
    let policy = p.path("pairs-policy.yaml");
    let policy = policy.to_str().unwrap();
    p.prov(&["audit", "lockfiles/pairs.lock", "--policy", policy]).success();

    p.write(
        "recipes/lax.yaml",
        &recipe("").replace("name: pairs", "name: lax").replacen(
            "inputs: {docs: unique.dataset, model: scorer.model}\n",
            "inputs: {docs: unique.dataset, model: scorer.model}\n    params: {bicleaner_threshold: {\"*\": 0.3}}\n",
            1,
        ),
    );
    p.prov(&["run", "recipes/lax.yaml"]).success();
    let run = p.prov(&["audit", "lockfiles/lax.lock", "--policy", policy]);
    let said = run.exit(4).stdout();
    assert!(said.contains("not the claimed ones"), "{said}");

    let text = fs_err::read_to_string(policy).unwrap();
    let claim = |forged: &[prov_audit::ClaimResult]| forged.iter().find(|c| c.kind == "pair-score").unwrap().clone();
    let rescued = |r: &prov_dataset::LedgerRow| r.rule == "pair-score:bicleaner";
    // Kept with the scores it had: the row contradicts its own scores.
    let forged =
        audit_forged(p, ("lockfiles/pairs.lock", &text), "scored", &prov_audit::StageRescan, |rows, out, input| {
            let evidence =
                rows.iter().flatten().find(|r| rescued(r)).unwrap().evidence.clone().map(serde_json::Value::Object);
            keep_row(rows, out, input, rescued, ("pair-score:kept", evidence));
        });
    let c = claim(&forged);
    assert_eq!(c.outcome, Outcome::Fails, "{c:#?}");
    assert!(c.reasons.iter().any(|r| r.contains("does not follow from its recorded scores")), "{c:#?}");
    // Kept with passing scores written in: the row is consistent, the pinned model is not.
    let forged =
        audit_forged(p, ("lockfiles/pairs.lock", &text), "scored", &prov_audit::StageRescan, |rows, out, input| {
            let mut evidence = rows.iter().flatten().find(|r| rescued(r)).unwrap().evidence.clone().unwrap();
            evidence.insert("classifier".into(), serde_json::json!(0.99));
            evidence.insert("quality".into(), serde_json::json!(0.99));
            keep_row(rows, out, input, rescued, ("pair-score:kept", Some(serde_json::Value::Object(evidence))));
        });
    let c = claim(&forged);
    assert_eq!(c.outcome, Outcome::Fails, "{c:#?}");
    assert!(c.reasons.iter().any(|r| r.contains("rescores to classifier")), "{c:#?}");
    // The scorer swapped for an object no pair-score-train stage made (here, the pairs): the
    // stage's rows no longer follow from a model of the run.
    let forged = crate::test_audit::audit_with_edited_record(p, ("lockfiles/pairs.lock", &text), "scored", |r| {
        let rules = *r.inputs.get("docs").unwrap();
        r.inputs.insert("model".into(), rules);
    });
    let c = claim(&forged);
    assert_eq!(c.outcome, Outcome::Fails, "{c:#?}");
    assert!(c.reasons.iter().any(|r| r.contains("not by a `pair-score-train` stage")), "{c:#?}");
}

/// The scorer, fitted on the clean UDHR pairs, keeps most real pairs and removes most
/// misaligned ones by the classifier's threshold; every ledger row's scores are what the
/// pinned model file gives, and its decision follows from them and the report's thresholds.
fn scores_separate_real_pairs_from_misaligned_ones(
    p: &Project,
    stage: &dyn Fn(&str) -> Value,
    record: &dyn Fn(&str) -> Value,
) {
    let stats = record("scorer")["stats"]["language_pairs"].clone();
    for pair in ["en-de", "en-fr", "en-es", "en-pt"] {
        let accuracy = stats[pair]["held_out_accuracy"].as_f64().unwrap();
        eprintln!(
            "pair-score-train {pair}: held-out accuracy {accuracy:.3}, quality RMSE {:.3}",
            stats[pair]["held_out_quality_rmse"]
        );
        assert!(accuracy > 0.7, "{stats}");
    }
    let store = prov_store::Store::open(&p.path(".prov"), prov_store::Access::Shared, true).unwrap();
    let digest: prov_store::Digest = stage("scorer")["outputs"]["model"].as_str().unwrap().parse().unwrap();
    let model_bytes = store.read(&digest).unwrap();
    let model = prov_parallel::scorer::Model::parse(&model_bytes).unwrap();
    drop(store);
    let model_path = p.path("scorer.json");
    fs_err::write(&model_path, &model_bytes).unwrap();
    let docs: HashMap<String, prov_dataset::Document> =
        documents(p, stage("unique")["outputs"]["dataset"].as_str().unwrap())
            .into_iter()
            .map(|d| (d.id.clone(), d))
            .collect();
    let rows = ledger_rows(p, stage("scored")["outputs"]["ledger"].as_str().unwrap());
    assert_eq!(rows.len(), docs.len());
    let (mut real, mut shuffled) = ((0, 0), (0, 0));
    for row in &rows {
        let pair = prov_parallel::pairs::Pair::of(&docs[&row.id]).unwrap();
        let scores =
            model.pair(&pair.source_language, &pair.target_language).unwrap().score(&pair.source, &pair.target);
        let e = row.evidence.as_ref().unwrap();
        assert_eq!(
            (e["classifier"].as_f64(), e["quality"].as_f64()),
            (Some(scores.classifier), Some(scores.quality)),
            "{row:?}"
        );
        let threshold = if pair.target_language.starts_with("pt") { 0.6 } else { 0.5 };
        assert_eq!(e["bicleaner_threshold"].as_f64(), Some(threshold));
        let rule = if scores.classifier < threshold {
            "pair-score:bicleaner"
        } else if scores.quality < 0.7 {
            "pair-score:cometkiwi"
        } else {
            "pair-score:kept"
        };
        assert_eq!(row.rule, rule, "{row:?}");
        let tally = if row.id.starts_with("shuf-") { &mut shuffled } else { &mut real };
        tally.0 += 1;
        tally.1 += usize::from(row.rule == "pair-score:kept");
    }
    eprintln!(
        "pair-score: kept {} of {} real pairs and {} of {} misaligned ones",
        real.1, real.0, shuffled.1, shuffled.0
    );
    assert!(shuffled.0 > 30 && real.0 > 200);
    assert!(real.1 * 10 > real.0 * 6, "most real pairs are kept");
    assert!(shuffled.1 * 10 < shuffled.0 * 3, "most misaligned pairs are removed");
    let removed = rows.iter().find(|r| r.rule == "pair-score:bicleaner").unwrap();
    explain_pair_score_agrees(p, &model_path, &docs[&removed.id], removed);
}

#[test]
fn options_bifixer_has_and_provenant_does_not_and_missing_languages_are_refused() {
    let Some(python) = venv_python() else { return };
    // No Portuguese rules.
    let p = project(&python, &["en", "de", "fr", "es"]);
    p.write("recipes/segment.yaml", &recipe("    params: {segmentation: true}\n"));
    let run = p.prov(&["run", "recipes/segment.yaml"]);
    let said = run.exit(1).stderr();
    assert!(said.contains("segmentation") && said.contains("Punkt"), "{said}");
    p.write("recipes/pairs.yaml", &recipe(""));
    let run = p.prov(&["run", "recipes/pairs.yaml"]);
    let said = run.exit(1).stderr();
    assert!(said.contains("no language `pt`"), "{said}");
}

/// `prov explain bifixer` on a repaired pair's input says the ledger's rule and hash, and its
/// last steps are the repaired sides the stage wrote.
fn explain_bifixer_agrees(
    p: &Project,
    pairs: &[prov_parallel::pairs::Pair],
    ids: &[String],
    rows: &[prov_dataset::LedgerRow],
    fixed: &[prov_dataset::Document],
) {
    let row = rows.iter().find(|r| r.rule == "bifixer:repaired" && r.id.starts_with("web-00")).unwrap();
    let pair = &pairs[ids.iter().position(|i| *i == row.id).unwrap()];
    let rules = p.path("recipes/data/bifixer-rules.json");
    let args = [
        "--json",
        "explain",
        "bifixer",
        "--rules",
        rules.to_str().unwrap(),
        "--source-language",
        &pair.source_language,
        "--target-language",
        &pair.target_language,
    ];
    let out = p.prov_with_stdin(&args, format!("{}\t{}\n", pair.source, pair.target));
    let said: Value = serde_json::from_str(out.success().stdout().trim()).unwrap();
    let said = &said["data"];
    assert_eq!(said["rule"], "bifixer:repaired");
    assert_eq!(&said["evidence"], &serde_json::to_value(row.evidence.as_ref().unwrap()).unwrap());
    let written = prov_parallel::pairs::Pair::of(fixed.iter().find(|d| d.id == row.id).unwrap()).unwrap();
    let last =
        |side: &str| said[side]["steps"].as_array().unwrap().last().unwrap()["text"].as_str().unwrap().to_owned();
    assert_eq!((last("source"), last("target")), (written.source, written.target));
    assert_eq!(said["source"]["steps"][0]["step"], "characters");
}

/// `prov explain pair-score` on a removed pair says the ledger's rule and scores, and its parts
/// add up, with the intercepts, to the classifier's log-odds and the quality estimate.
fn explain_pair_score_agrees(p: &Project, model: &Path, doc: &prov_dataset::Document, row: &prov_dataset::LedgerRow) {
    let pair = prov_parallel::pairs::Pair::of(doc).unwrap();
    let args = [
        "--json",
        "explain",
        "pair-score",
        "--model",
        model.to_str().unwrap(),
        "--source-language",
        &pair.source_language,
        "--target-language",
        &pair.target_language,
    ];
    let out = p.prov_with_stdin(&args, format!("{}\t{}", pair.source, pair.target));
    let said: Value = serde_json::from_str(out.success().stdout().trim()).unwrap();
    let said = &said["data"];
    assert_eq!((said["rule"].as_str(), said["decision"].as_str()), (Some(row.rule.as_str()), Some("removed")));
    let evidence = row.evidence.as_ref().unwrap();
    assert_eq!(said["evidence"]["classifier"], evidence["classifier"]);
    let sum = |key: &str, intercept: &str| -> f64 {
        said["features"].as_array().unwrap().iter().map(|f| f[key].as_f64().unwrap()).sum::<f64>()
            + said[intercept].as_f64().unwrap()
    };
    let c = evidence["classifier"].as_f64().unwrap();
    assert!((sum("classifier_part", "classifier_intercept") - (c / (1.0 - c)).ln()).abs() < 1e-6);
    let q = sum("quality_part", "quality_intercept");
    assert!((q.clamp(0.0, 1.0) - evidence["quality"].as_f64().unwrap()).abs() < 1e-12);
}
