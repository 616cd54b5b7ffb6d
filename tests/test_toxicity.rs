//! The toxicity stages end to end: `toxicity-train` trains per-language classifiers with
//! libtorch on real labelled data (`HateCheck`, committed under recipes/data/toxicity), the
//! `toxicity` filter removes each language's documents at or above the 95th percentile, the
//! thresholds equal `NumPy`'s on the scores in the ledger, and the run replays bit for bit.
//! The `ATen` CPU capability is pinned, recorded in the training stage's envelope and
//! enforced on replay.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};

use crate::common::{Project, ledger_rows, repo_root, venv_python};

/// Every `step`-th labelled example of these languages, from the committed `HateCheck` file.
fn hatecheck_subset(languages: &[&str], step: usize) -> String {
    let gz = fs_err::File::open(repo_root().join("recipes/data/toxicity/hatecheck.jsonl.gz")).unwrap();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = String::new();
    for line in BufReader::new(flate2::read::GzDecoder::new(gz)).lines() {
        let line = line.unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let lang = v["language"].as_str().unwrap().to_owned();
        if languages.contains(&lang.as_str()) {
            let n = seen.entry(lang).or_default();
            if n.is_multiple_of(step) {
                out.push_str(&line);
                out.push('\n');
            }
            *n += 1;
        }
    }
    out
}

fn recipe(train_params: &str) -> String {
    format!(
        "schema: 1\nname: tox\nseed: 11\nsources:\n  labelled:\n    path: data/labelled.jsonl\n    license: CC-BY-4.0\n\
         \x20 udhr:\n    path: data/quickstart/udhr-sample.jsonl\n    license: MIT\n\
         stages:\n  labels:\n    kind: shard\n    inputs: {{docs: labelled}}\n    params: {{shards: 1}}\n\
         \x20 classifier:\n    kind: toxicity-train\n    inputs: {{examples: labels}}\n    params: {train_params}\n\
         \x20 docs:\n    kind: shard\n    inputs: {{docs: udhr}}\n    params: {{shards: 3}}\n\
         \x20 toxicity:\n    kind: toxicity\n    inputs: {{docs: docs, model: classifier.model}}\n"
    )
}

fn stage<'a>(lines: &'a [serde_json::Value], name: &str) -> &'a serde_json::Value {
    lines
        .iter()
        .find(|l| l["type"] == "stage" && l["data"]["name"] == name)
        .unwrap_or_else(|| panic!("no stage {name}"))
}

#[test]
fn toxicity_trains_filters_at_numpys_quantile_and_replays() {
    let p = Project::with_recipes();
    p.write("recipes/data/labelled.jsonl", &hatecheck_subset(&["en", "de", "fr"], 2));
    p.write("recipes/tox.yaml", &recipe("{epochs: 4}"));
    let lines = p.json(&["run", "recipes/tox.yaml"]);

    // The classifier: one model per language, its tensors listed by name with their digests.
    let classifier = stage(&lines, "classifier");
    let shown = p.json(&["show", classifier["data"]["manifest"].as_str().unwrap()]);
    let record = &shown[0]["data"]["record"];
    assert_eq!(record["determinism"], "envelope", "{record}");
    let langs = &record["stats"]["languages"];
    for lang in ["de", "en", "fr"] {
        let acc = langs[lang]["epochs"].as_array().unwrap().iter().map(|e| e["validation_accuracy"].as_f64().unwrap());
        assert!(acc.fold(0.0, f64::max) > 0.7, "{lang} learned nothing: {langs}");
        assert!(langs[lang]["best_epoch"].as_u64().unwrap() >= 1);
    }
    let model = p.json(&["show", classifier["data"]["outputs"]["model"].as_str().unwrap()]);
    let tensors = model[0]["data"]["record"]["tensors"].as_object().unwrap();
    let names: Vec<&String> = tensors.keys().collect();
    assert_eq!(names.len(), 12, "{names:?}");
    assert_eq!(names[0], "de.fc1.bias");

    // The filter: every document has a row; 95th-percentile thresholds equal NumPy's.
    let tox = stage(&lines, "toxicity");
    let shown = p.json(&["show", tox["data"]["manifest"].as_str().unwrap()]);
    let stats = &shown[0]["data"]["record"]["stats"];
    assert_eq!(stats["total"]["documents"], 248, "{stats}");
    assert_eq!(stats["by_rule"]["toxicity:no-classifier"]["documents"], 155, "5 of 8 languages: {stats}");
    let rows = ledger_rows(&p, tox["data"]["outputs"]["ledger"].as_str().unwrap());
    assert_eq!(rows.len(), 248);
    let mut scores: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in &rows {
        if let Some(e) = &r.evidence
            && let Some(s) = e.get("score")
        {
            scores.entry(e["language"].as_str().unwrap().to_owned()).or_default().push(s.as_f64().unwrap());
        }
    }
    assert_eq!(scores.keys().collect::<Vec<_>>(), ["de", "en", "fr"]);
    let Some(python) = venv_python() else { return };
    let script = "import json, sys, numpy\n\
                  scores = json.load(sys.stdin)\n\
                  out = {}\n\
                  for lang, s in scores.items():\n\
                  \x20   t = float(numpy.quantile(numpy.array(s, dtype=numpy.float64), 0.95))\n\
                  \x20   out[lang] = {'threshold': t, 'removed': int(sum(1 for x in s if x >= t))}\n\
                  print(json.dumps(out))\n";
    let mut child = std::process::Command::new(python)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    serde_json::to_writer(child.stdin.take().unwrap(), &scores).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let numpy: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for (lang, v) in numpy.as_object().unwrap() {
        let ours = &stats["thresholds"][lang];
        assert_eq!(ours["threshold"].as_f64(), v["threshold"].as_f64(), "{lang}: ours {ours}, numpy {v}");
        assert_eq!(ours["removed"], v["removed"], "{lang}: ours {ours}, numpy {v}");
        assert!(v["removed"].as_u64().unwrap() >= 1);
    }
    assert_eq!(stats["score_quantiles"]["en"].as_array().unwrap().len(), 21);

    // Cached on a second run, and replayed bit for bit.
    let again = p.json(&["run", "recipes/tox.yaml"]);
    assert_eq!(stage(&again, "classifier")["data"]["status"], "cached");
    p.prov(&["replay", "lockfiles/tox.lock"]).success();
}

#[test]
fn the_aten_capability_is_pinned_recorded_and_enforced() {
    let p = Project::with_recipes();
    p.write("recipes/data/labelled.jsonl", &hatecheck_subset(&["en"], 4));
    p.write("recipes/tox.yaml", &recipe("{epochs: 1}"));

    let bad = p.command(&["run", "recipes/tox.yaml"]).env("ATEN_CPU_CAPABILITY", "sse9").output().unwrap();
    assert_eq!(bad.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("ATEN_CPU_CAPABILITY=sse9: unknown") && stderr.contains("hint:"), "{stderr}");

    let run = p.command(&["--json", "run", "recipes/tox.yaml"]).env("ATEN_CPU_CAPABILITY", "default").output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&run.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let shown = p.json(&["show", stage(&lines, "classifier")["data"]["manifest"].as_str().unwrap()]);
    let envelope = &shown[0]["data"]["record"]["envelope"];
    assert_eq!(envelope["aten_cpu_capability"], "default", "{envelope}");
    // MKL's branch is `COMPATIBLE` on every CPU; oneDNN's instruction set follows the capability.
    assert_eq!(
        (&envelope["mkl_cbwr"], &envelope["onednn_max_cpu_isa"]),
        (&serde_json::json!("COMPATIBLE"), &serde_json::json!("SSE41"))
    );
    assert!(envelope["libtorch"].as_str().unwrap().starts_with("2.13.0"), "{envelope}");

    let same = p.command(&["replay", "lockfiles/tox.lock"]).env("ATEN_CPU_CAPABILITY", "default").output().unwrap();
    assert!(same.status.success(), "{}", String::from_utf8_lossy(&same.stderr));
    // Another capability is another envelope: replay refuses to call the run equal.
    let doctor = p.json(&["doctor"]);
    let best = doctor.iter().find_map(|l| l["data"]["aten_cpu_capability"].as_str().map(str::to_owned));
    if best.as_deref() == Some("default") {
        eprintln!("skipping the refusal: this CPU runs only the `default` ATen kernels");
        return;
    }
    let other = p.command(&["replay", "lockfiles/tox.lock"]).env_remove("ATEN_CPU_CAPABILITY").output().unwrap();
    let stderr = String::from_utf8_lossy(&other.stderr);
    assert_eq!(other.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("stage `classifier` is of class `envelope`"), "{stderr}");
    assert!(stderr.contains("aten_cpu_capability: recorded `default`"), "{stderr}");
}
