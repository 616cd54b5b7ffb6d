//! The `ngram-train` and `perplexity` stages end to end on real text, against `cc_net` itself
//! (PyPI `cc-net`, in Python) and KenLM.
//!
//! `ngram-train`: one model per language in the `models` tree, each byte for byte the ARPA
//! file that KenLM's `lmplz` writes from the same documents normalised by `cc_net`'s own
//! normaliser: so the stage's routing by language, paragraph split, normalisation and
//! tokenisation are checked against the references end to end, not only its estimator.
//!
//! `perplexity`: every document's perplexity and bucket equal what `cc_net`'s `DocLM` (loading
//! the stage's ARPA files through the `kenlm` module) and `PerplexityBucket` give, the latter
//! reading a cut-off file of `numpy.percentile`s of those perplexities per language, as
//! `CCNet`'s `cutoff.csv`; the same with fixed cut-offs; `prov explain perplexity` names the
//! ledger's rule. Then the run replays bit for bit.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::common::{Project, ledger_rows, main_job_data_fetched, repo_root, venv_python};

/// Python's side: the documents (JSON lines) of one language, each paragraph normalised by
/// `cc_net`, the non-empty ones (words split at spaces) joined by single spaces, one per line.
const NORMALISE: &str = r#"
import json, sys
from cc_net import text_normalizer
out = []
for l in sys.stdin.read().split("\n"):
    if not l:
        continue
    for p in json.loads(l)["text"].split("\n"):
        words = [w for w in text_normalizer.normalize(p).split(" ") if w]
        if words:
            out.append(" ".join(words))
sys.stdout.write("".join(w + "\n" for w in out))
"#;

/// Python's side of the perplexity filter: the documents (JSON lines) on stdin, the models as
/// `LANG=PATH` arguments after the cut-off file's path and the fixed cut-offs (`HEAD,TAIL`, or
/// `-` for the dataset's percentiles); out, per document, `{"id", "perplexity", "bucket"}`, then one line
/// of the percentile cut-offs per language.
const CCNET_BUCKETS: &str = r#"
import json, sys
from pathlib import Path
import numpy as np, pandas as pd
from cc_net import perplexity
csv, fixed = sys.argv[1], sys.argv[2]
models = {l: Path(p) for l, p in (a.split("=", 1) for a in sys.argv[3:])}
docs = [json.loads(l) for l in sys.stdin.read().split("\n") if l]
lm = perplexity.DocLM(models, field="text", normalize=True)
lm._prepare()
for d in docs:
    d["language"] = (d.get("language") or "und").replace("_", "-").split("-")[0].lower()
    lm.do(d)
pps = {l: [d["perplexity"] for d in docs if d["language"] == l and "perplexity" in d] for l in sorted(models)}
if fixed == "-":
    table = {l: np.percentile(v, range(101)) for l, v in pps.items()}
else:
    head, tail = (float(x) for x in fixed.split(","))
    table = {l: [head if i < 45 else tail for i in range(101)] for l in pps}
pd.DataFrame(table).to_csv(csv)
bucket = perplexity.PerplexityBucket(Path(csv), 30, 60)
bucket._prepare()
out = [json.dumps({"id": d["id"], "perplexity": d.get("perplexity"), "bucket": bucket.get_bucket(d)}) for d in docs]
out.append(json.dumps({l: [bucket.cutoffs[l][0], bucket.cutoffs[l][1]] for l in pps}))
sys.stdout.write("\n".join(out) + "\n")
"#;

#[test]
fn ngram_models_equal_lmplz_on_ccnet_normalised_documents_and_replay() {
    if !main_job_data_fetched() {
        return;
    }
    let Some(python) = venv_python() else { return };
    let lmplz = repo_root().join(".venv/bin/lmplz");
    assert!(lmplz.is_file() || !std::env::var("CI").is_ok_and(|v| v == "true"), "run scripts/setup for lmplz");
    if !lmplz.is_file() {
        return;
    }
    let corpus = repo_root().join("recipes/data/mini-apertus/corpus");
    let mut lines: Vec<String> =
        fs_err::read_to_string(corpus.join("debian.jsonl")).unwrap().lines().map(str::to_owned).collect();
    lines.extend(fs_err::read_to_string(corpus.join("udhr.jsonl")).unwrap().lines().step_by(5).map(str::to_owned));
    let p = Project::new();
    p.write("recipes/data/docs.jsonl", &lines.iter().flat_map(|l| [l.as_str(), "\n"]).collect::<String>());
    p.write(
        "recipes/lm.yaml",
        "schema: 1\nname: lm\nseed: 1\nsources:\n  docs:\n    path: data/docs.jsonl\nstages:\n  shards:\n    kind: shard\n    inputs: {docs: docs}\n    params: {shards: 3}\n\
         \x20 lm:\n    kind: ngram-train\n    inputs: {docs: shards}\n    params: {order: 3, languages: [fr, DE]}\n\
         \x20 pp:\n    kind: perplexity\n    inputs: {docs: shards, models: lm}\n\
         \x20 pp_fixed:\n    kind: perplexity\n    inputs: {docs: shards, models: lm}\n    params: {cutoffs: {'*': [5, 8]}, keep: [head]}\n",
    );
    let run = p.json(&["run", "recipes/lm.yaml"]);
    let stage = run.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == "lm").unwrap();
    let store = prov_store::Store::open(&p.path(".prov"), prov_store::Access::Shared, true).unwrap();
    let tree: prov_manifest::TreeRecord =
        prov_manifest::get_typed(&store, &stage["data"]["outputs"]["models"].as_str().unwrap().parse().unwrap())
            .unwrap();
    let names: Vec<&str> = tree.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(names, ["de.arpa", "fr.arpa"]);

    for entry in &tree.entries {
        let language = entry.path.as_str().trim_end_matches(".arpa");
        let docs: String = lines
            .iter()
            .filter(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                v["language"].as_str().is_some_and(|t| prov_dataset::primary_language(t) == language)
            })
            .flat_map(|l| [l.as_str(), "\n"])
            .collect();
        let sentences = prov_testkit::pipe(&python, &["-c", NORMALISE], docs.as_bytes());
        let theirs = prov_testkit::pipe(
            &lmplz,
            &["-o", "3", "-S", "256M", "-T", &std::env::temp_dir().display().to_string()],
            &sentences,
        );
        let ours = store.read(&entry.digest).unwrap();
        assert!(ours == theirs, "{}: the stage's model is not lmplz's on cc_net-normalised text", entry.path.as_str());
    }
    perplexity_equals_ccnets(&p, &python, &run, &tree, &store, &lines);

    let shown = p.json(&["show", stage["data"]["manifest"].as_str().unwrap()]);
    let stats = &shown[0]["data"]["record"]["stats"]["languages"];
    assert!(stats["de"]["tokens"].as_u64().unwrap() > 50_000, "{stats}");
    assert_eq!(shown[0]["data"]["record"]["config"]["languages"], serde_json::json!(["de", "fr"]));
    p.prov(&["replay", "lockfiles/lm.lock"]).success();
}

/// The `pp` and `pp_fixed` stages of the run against `cc_net`'s `DocLM` and `PerplexityBucket`.
fn perplexity_equals_ccnets(
    p: &Project,
    python: &std::path::Path,
    run: &[Value],
    tree: &prov_manifest::TreeRecord,
    store: &prov_store::Store,
    lines: &[String],
) {
    // The models as files, for `kenlm` and for `prov explain perplexity`.
    let mut models = Vec::new();
    for e in &tree.entries {
        let path = p.write(
            &format!("models/{}", e.path.as_str()),
            std::str::from_utf8(&store.read(&e.digest).unwrap()).unwrap(),
        );
        models.push(format!("{}={}", e.path.as_str().trim_end_matches(".arpa"), path.display()));
    }
    let docs: String = lines.iter().flat_map(|l| [l.as_str(), "\n"]).collect();
    for (name, fixed) in [("pp", "-"), ("pp_fixed", "5,8")] {
        let csv = p.path(&format!("{name}-cutoff.csv")).display().to_string();
        let args: Vec<&str> =
            ["-c", CCNET_BUCKETS, &csv, fixed].into_iter().chain(models.iter().map(String::as_str)).collect();
        let out = String::from_utf8(prov_testkit::pipe(python, &args, docs.as_bytes())).unwrap();
        let mut theirs: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let their_cutoffs = theirs.pop().unwrap();
        let stage = run.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == name).unwrap();
        let rows = ledger_rows(p, stage["data"]["outputs"]["ledger"].as_str().unwrap());
        let ours: BTreeMap<&str, &prov_dataset::LedgerRow> = rows.iter().map(|r| (r.id.as_str(), r)).collect();
        assert_eq!(ours.len(), theirs.len());
        let mut by_rule: BTreeMap<String, u64> = BTreeMap::new();
        for t in &theirs {
            let r = ours[t["id"].as_str().unwrap()];
            *by_rule.entry(r.rule.clone()).or_default() += 1;
            let evidence = r.evidence.clone().map_or(Value::Null, Value::Object);
            match t["bucket"].as_str().unwrap() {
                "all" => assert!(
                    ["perplexity:no-model", "perplexity:empty"].contains(&r.rule.as_str()) && t["perplexity"].is_null(),
                    "{name} {t}: {} {evidence}",
                    r.rule
                ),
                bucket => {
                    assert_eq!(r.rule, format!("perplexity:{bucket}"), "{name} {t}: {evidence}");
                    // Canonical JSON writes 20.0 as 20: compare numbers as numbers.
                    assert_eq!(evidence["perplexity"].as_f64(), t["perplexity"].as_f64(), "{name} {t}");
                    let kept = if name == "pp" { bucket != "tail" } else { bucket == "head" };
                    assert_eq!(r.decision == prov_dataset::LedgerDecision::Kept, kept, "{name} {t}");
                }
            }
        }
        assert!(by_rule.len() >= 4, "{name}: the run does not reach enough rules: {by_rule:?}");
        // The cut-offs the stage used are the percentiles `PerplexityBucket` read.
        let shown = p.json(&["show", stage["data"]["manifest"].as_str().unwrap()]);
        let stats = &shown[0]["data"]["record"]["stats"]["cutoffs"];
        for (language, c) in their_cutoffs.as_object().unwrap() {
            let number = |v: &Value| v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect::<Vec<f64>>();
            assert_eq!(number(&stats[language]["cutoffs"]), number(c), "{name} {language}: {stats}");
            assert_eq!(stats[language]["from"], if name == "pp" { "percentiles" } else { "fixed" });
        }
    }
    // `prov explain perplexity` names the rule of the first document the `pp` stage removed.
    let stage = run.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == "pp").unwrap();
    let rows = ledger_rows(p, stage["data"]["outputs"]["ledger"].as_str().unwrap());
    let removed = rows.iter().find(|r| r.decision == prov_dataset::LedgerDecision::Removed).unwrap();
    let evidence = removed.evidence.as_ref().unwrap();
    let language = evidence["language"].as_str().unwrap();
    let text = lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|d| d["id"] == removed.id.as_str())
        .unwrap()["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let cutoffs = format!("{},{}", evidence["cutoffs"][0], evidence["cutoffs"][1]);
    let model = p.path(&format!("models/{language}.arpa")).display().to_string();
    let shown =
        p.prov_with_stdin(&["--json", "explain", "perplexity", "--model", &model, "--cutoffs", &cutoffs], &text);
    let message: Value = serde_json::from_str(shown.success().stdout().lines().next().unwrap()).unwrap();
    assert_eq!(message["data"]["rule"], json!(removed.rule), "{message}");
    assert_eq!(message["data"]["kept"], json!(false));
    assert_eq!(message["data"]["perplexity"].as_f64(), evidence["perplexity"].as_f64());
    let human = p.prov_with_stdin(&["explain", "perplexity", "--model", &model, "--cutoffs", &cutoffs], &text);
    assert!(human.success().stdout().contains("perplexity:tail: removed"), "{}", human.stdout());
}
