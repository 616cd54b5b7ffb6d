//! The `ngram-train` stage end to end on real text: one model per language in the `models`
//! tree, each byte for byte the ARPA file that KenLM's `lmplz` writes from the same documents
//! normalised by `cc_net`'s own normaliser (PyPI `cc-net`, in Python): so the stage's routing by
//! language, paragraph split, normalisation and tokenisation are checked against the
//! references end to end, not only its estimator. Then the run replays bit for bit.

use serde_json::Value;

use crate::common::{Project, main_job_data_fetched, repo_root, venv_python};

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
         \x20 lm:\n    kind: ngram-train\n    inputs: {docs: shards}\n    params: {order: 3, languages: [fr, DE]}\n",
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
    let shown = p.json(&["show", stage["data"]["manifest"].as_str().unwrap()]);
    let stats = &shown[0]["data"]["record"]["stats"]["languages"];
    assert!(stats["de"]["tokens"].as_u64().unwrap() > 50_000, "{stats}");
    assert_eq!(shown[0]["data"]["record"]["config"]["languages"], serde_json::json!(["de", "fr"]));
    p.prov(&["replay", "lockfiles/lm.lock"]).success();
}
