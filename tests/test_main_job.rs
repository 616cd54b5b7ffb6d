//! The main job, recipes/mini-apertus.yaml, on its real data (fetched by scripts/setup from
//! npm, `PyPI` and Debian, pinned by version and hash): it runs, every document gets a ledger
//! row, the Debian documents' real e-mail addresses are redacted, each `HateCheck` language's
//! most toxic 5% removed, the copyleft licenses removed with a verdict record per declared
//! license, a tokenizer and a small model trained on what is left, fine-tuned on translation
//! pairs and aligned with QRPO (and, in the DPO variant, with DPO), and all of it reproduces,
//! in an empty store, every output of the committed run (`manifests/mini-apertus/`), bit for
//! bit: the proof that the run reproduces on another machine.

use serde_json::Value;

use crate::common::{Project, copy_dir, repo_root};

/// The UDHR and Debian documents that scripts/make-main-data.py writes.
const UDHR_DOCUMENTS: u64 = 16_308;
const DEBIAN_DOCUMENTS: u64 = 1_102;

fn stage<'a>(lines: &'a [Value], name: &str) -> &'a Value {
    lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == name).unwrap_or_else(|| panic!("stage {name}"))
}

fn record(p: &Project, digest: &Value) -> Value {
    let shown = p.json(&["show", digest.as_str().expect("a digest")]);
    shown[0]["data"]["record"].clone()
}

#[test]
fn mini_apertus_runs_and_replays_bit_for_bit() {
    if !crate::common::main_job_data_fetched() {
        return;
    }
    let p = Project::new();
    copy_dir(&repo_root().join("recipes"), &p.path("recipes"));
    copy_dir(&repo_root().join("manifests/mini-apertus"), &p.path("manifests/mini-apertus"));
    copy_dir(&repo_root().join("manifests/mini-apertus-dpo"), &p.path("manifests/mini-apertus-dpo"));
    fs_err::create_dir_all(p.path("lockfiles")).unwrap();
    for lock in ["mini-apertus.lock", "mini-apertus-dpo.lock"] {
        fs_err::copy(repo_root().join("lockfiles").join(lock), p.path("lockfiles").join(lock)).unwrap();
    }
    // The committed lockfile is what the recipe locks to today.
    let committed = fs_err::read_to_string(p.path("lockfiles/mini-apertus.lock")).unwrap();
    p.prov(&["lock", "recipes/mini-apertus.yaml"]).success();
    let locked = fs_err::read_to_string(p.path("lockfiles/mini-apertus.lock")).unwrap();
    assert_eq!(locked, committed, "the committed lockfile is stale: run `prov run recipes/mini-apertus.yaml --commit`");
    tampered_manifests_are_refused(&p);
    // Every stage re-executed in an empty store gives exactly the committed outputs.
    let lines = p.json(&["replay", "lockfiles/mini-apertus.lock", "--against", "manifests/mini-apertus"]);
    let run = lines.iter().find(|l| l["type"] == "run").expect("a run summary");
    assert_eq!(run["data"]["diverged"], false, "{run}");
    assert_eq!(lines.iter().filter(|l| l["type"] == "stage" && l["data"]["status"] == "replayed").count(), 23);

    let shards = record(&p, &stage(&lines, "shards")["data"]["manifest"]);
    assert_eq!(shards["stats"]["documents"], UDHR_DOCUMENTS + DEBIAN_DOCUMENTS, "{}", shards["stats"]);

    let stats = record(&p, &stage(&lines, "robots")["data"]["manifest"])["stats"].clone();
    assert_eq!(stats["total"]["documents"], UDHR_DOCUMENTS + DEBIAN_DOCUMENTS, "{stats}");
    assert_eq!(stats["snapshot_hosts"], 4_231, "{stats}");
    let removed = stats["by_rule"]["robots:disallowed"]["documents"].as_u64().unwrap();
    assert!(removed > 0 && removed < UDHR_DOCUMENTS, "{stats}");

    // The Debian manual pages name their translators with real addresses.
    let stats = record(&p, &stage(&lines, "pii")["data"]["manifest"])["stats"].clone();
    assert!(stats["replaced"]["email"].as_u64().unwrap() > 1_000, "{stats}");
    assert!(stats["by_rule"]["pii:redacted"]["documents"].as_u64().unwrap() > 500, "{stats}");

    toxicity_removes_five_percent_per_language(&p, &lines);

    // The license stage keeps the MIT documents and removes every Debian one (GPL-3+, GPL-2+
    // and a public-domain claim), each distinct string decided once by a verdict record.
    let license = stage(&lines, "license");
    let rec = record(&p, &license["data"]["manifest"]);
    let stats = &rec["stats"];
    let by_rule = &stats["by_rule"];
    let licenses = &stats["licenses"];
    let names: Vec<&str> = licenses.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(names, ["GPL-2+", "GPL-3+", "MIT", "public-domain"], "{licenses}");
    assert_eq!(licenses["MIT"]["decision"], "kept");
    assert_eq!(licenses["MIT"]["documents"], by_rule["license:allowed"]["documents"], "{stats}");
    let denied: u64 = ["GPL-2+", "GPL-3+", "public-domain"]
        .iter()
        .map(|l| {
            assert_eq!(licenses[l]["decision"], "removed", "{licenses}");
            licenses[l]["documents"].as_u64().unwrap()
        })
        .sum();
    assert_eq!(by_rule["license:denied"]["documents"], denied, "{stats}");
    assert!(denied > DEBIAN_DOCUMENTS * 9 / 10 && denied <= DEBIAN_DOCUMENTS, "{stats}");
    assert!(by_rule.get("license:missing").is_none(), "{stats}");
    assert_eq!(licenses["GPL-3+"]["spdx"], "GPL-3.0-or-later");
    assert_eq!(licenses["GPL-2+"]["spdx"], "GPL-2.0-or-later");
    assert_eq!(licenses["public-domain"]["policy_rule"], "unknown-license");
    let kept = record(&p, &license["data"]["outputs"]["dataset"]);
    assert_eq!(kept["rows"], by_rule["license:allowed"]["documents"]);

    let verdicts = record(&p, &license["data"]["outputs"]["verdicts"]);
    let entries = verdicts["entries"].as_array().unwrap();
    let files: Vec<&str> = entries.iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert_eq!(files, ["GPL-2+.json", "GPL-3+.json", "MIT.json", "public-domain.json"]);
    for (e, name) in entries.iter().zip(names) {
        assert_eq!(e["digest"], licenses[name]["verdict"]);
        let v = record(&p, &e["digest"]);
        assert_eq!(v["kind"], "verdict");
        assert_eq!(v["reviewer"], "policy");
        assert_eq!(v["subject"], rec["inputs"]["docs"], "about the dataset the stage read: {v}");
        assert_eq!(v["decision"], if name == "MIT" { "allow" } else { "deny" }, "{v}");
        assert_eq!(v["rule"], licenses[name]["policy_rule"], "{v}");
        assert!(v.get("decided_at").is_none(), "a verdict decided in a run records no time: {v}");
    }
    ledger_removes_exactly_the_debian_documents(&p, &license["data"]["outputs"]["ledger"]);

    // The ten held-out evaluation articles are found in the training data and removed.
    let by_rule = record(&p, &stage(&lines, "decontaminate")["data"]["manifest"])["stats"]["by_rule"].clone();
    assert!(by_rule["decontaminate:contaminated"]["documents"].as_u64().unwrap() >= 10, "{by_rule}");

    training_learned(&p, &lines);
    post_training_is_pinned_and_evaluated(&p, &lines);
    the_dpo_variant_reproduces_from_its_own_stages(&p);
    urls_are_proven_against_the_committed_run(&p);
    // The Apertus compliance claims hold for the committed run, the replay above included.
    let audit = p.prov(&["audit", "lockfiles/mini-apertus.lock", "--policy", "recipes/policies/apertus.yaml"]);
    audit.success();
    for claim in ["robots", "pii", "toxicity", "license", "decontamination", "replay"] {
        assert!(audit.stdout().contains(claim), "{claim}: {}", audit.describe());
    }
    p.prov(&["gc"]).success();
    p.prov(&["verify"]).success();
    p.prov(&["show", licenses["GPL-3+"]["verdict"].as_str().unwrap()]).success();
}

/// Proofs by URL from the replayed run, checked without the store against the committed
/// run: a document that reached the training data, one that a site's robots.txt removed, and a
/// URL that was never in the corpus.
fn urls_are_proven_against_the_committed_run(p: &Project) {
    let cases = [
        (
            "https://www.audionetwork.com/udhr/007/00",
            "robots (robots): kept by `robots:allowed`",
            "reached the training data",
        ),
        (
            "https://www.linkedin.com/debian/fortunes-de/anekdoten/001",
            "robots (robots): removed by `robots:disallowed`",
            "did not reach the training data",
        ),
        (
            "https://example.invalid/never-crawled",
            "never seen: no document has this URL",
            "did not reach the training data",
        ),
    ];
    let run_file = p.path("manifests/mini-apertus/RUN");
    let alone = tempfile::tempdir().unwrap();
    for (i, (url, fate, training)) in cases.iter().enumerate() {
        let out = alone.path().join(format!("{i}.proof"));
        p.prov(&["prove", "lockfiles/mini-apertus.lock", "--url", url, "--out", out.to_str().unwrap()]).success();
        // No store in that directory: the proof and the committed run id are all it needs.
        let output = p
            .command(&["verify-proof", &format!("{i}.proof"), "--run", run_file.to_str().unwrap(), "--until", "tokens"])
            .current_dir(alone.path())
            .output()
            .unwrap();
        let shown = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{url}: {}", String::from_utf8_lossy(&output.stderr));
        assert!(shown.contains(fate) && shown.contains(training), "{url}: {shown}");
    }
}

/// A tampered manifest is refused (exit 2) before anything runs.
fn tampered_manifests_are_refused(p: &Project) {
    let tampered = p.path("tampered");
    copy_dir(&p.path("manifests/mini-apertus"), &tampered);
    let victim = fs_err::read_dir(&tampered)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|f| f.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let text = fs_err::read_to_string(&victim).unwrap().replacen("\"schema\":1", "\"schema\":2", 1);
    fs_err::write(&victim, text).unwrap();
    let r = p.prov(&["replay", "lockfiles/mini-apertus.lock", "--against", "tampered"]);
    r.exit(2);
    assert!(r.stderr().contains("hash to"), "{}", r.describe());
}

/// The tokenizer, the packed samples and the pretraining run of the main job.
fn training_learned(p: &Project, lines: &[Value]) {
    let tokenizer = record(p, &stage(lines, "tokenizer")["data"]["manifest"])["stats"].clone();
    assert_eq!(tokenizer["vocab_size"], 4096, "{tokenizer}");
    let decontaminated = record(p, &stage(lines, "decontaminate")["data"]["manifest"])["stats"]["by_rule"]
        ["decontaminate:clean"]["documents"]
        .clone();
    assert_eq!(tokenizer["documents"], decontaminated, "trained on the prepared corpus: {tokenizer}");
    let tokens = record(p, &stage(lines, "tokens")["data"]["manifest"])["stats"].clone();
    assert!(tokens["samples"].as_u64().unwrap() >= 300 * 8, "enough samples for 300 steps of 8: {tokens}");
    let pretrain = record(p, &stage(lines, "pretrain")["data"]["manifest"]);
    assert_eq!(pretrain["determinism"], "envelope");
    let stats = &pretrain["stats"];
    assert_eq!(stats["steps"], 300, "{stats}");
    // From ln(4096) = 8.32 at the start; the model learns the corpus's statistics.
    assert!(stats["first_loss"].as_f64().unwrap() > 8.0, "{stats}");
    assert!(stats["final_loss"].as_f64().unwrap() < 7.0, "{stats}");
    let dropped = stats["goldfish_dropped_fraction"].as_f64().unwrap();
    assert!(dropped > 0.002 && dropped < 0.02, "{stats}");
    let checkpoints = p.json(&["show", stage(lines, "pretrain")["data"]["outputs"]["checkpoints"].as_str().unwrap()]);
    let entries = checkpoints[0]["data"]["record"]["entries"].as_array().unwrap().len();
    assert_eq!(entries, 3, "a checkpoint every 100 steps");
}

/// Toxicity: one classifier per `HateCheck` language; in each, the documents at or above the
/// language's 95th percentile are removed (within one document of 5%), and the languages
/// without a classifier are kept and counted.
fn toxicity_removes_five_percent_per_language(p: &Project, lines: &[Value]) {
    let stats = record(p, &stage(lines, "toxicity")["data"]["manifest"])["stats"].clone();
    let thresholds = stats["thresholds"].as_object().unwrap();
    let languages: Vec<&str> = thresholds.keys().map(String::as_str).collect();
    assert_eq!(languages, ["ar", "de", "en", "es", "fr", "hi", "it", "nl", "pl", "pt", "zh"], "{stats}");
    let mut removed = 0;
    for (lang, t) in thresholds {
        let (scored, n) = (t["scored"].as_u64().unwrap(), t["removed"].as_u64().unwrap());
        assert!(t["threshold"].is_f64(), "{lang}: {t}");
        assert!((n as f64 - 0.05 * scored as f64).abs() <= 1.0, "{lang}: {n} of {scored} removed");
        removed += n;
    }
    assert_eq!(stats["by_rule"]["toxicity:toxic"]["documents"], removed, "{stats}");
    assert!(stats["by_rule"]["toxicity:no-classifier"]["documents"].as_u64().unwrap() > 10_000, "{stats}");
    assert_eq!(stats["quantile"], 0.95);
}

/// SFT, the reference completions, their rewards, QRPO and the evaluation of the main job:
/// the aligned model's manifest pins its reference checkpoint, completions and rewards, and the
/// replay reports the aligned model's chrF beside the SFT model's.
fn post_training_is_pinned_and_evaluated(p: &Project, lines: &[Value]) {
    let output = |name: &str, output: &str| stage(lines, name)["data"]["outputs"][output].clone();
    let sft = record(p, &stage(lines, "sft")["data"]["manifest"]);
    assert_eq!(sft["inputs"]["model"], output("pretrain", "model"));
    assert_eq!(sft["inputs"]["examples"], output("sft-data", "train"));
    let stats = &sft["stats"];
    assert!(stats["final_loss"].as_f64().unwrap() < stats["first_loss"].as_f64().unwrap() - 1.0, "{stats}");
    let sampled = record(p, &stage(lines, "reference-completions")["data"]["manifest"]);
    assert_eq!(sampled["inputs"]["model"], output("sft", "model"), "sampled from the SFT model");
    assert_eq!((sampled["stats"]["prompts"].as_u64(), sampled["stats"]["completions"].as_u64()), (Some(16), Some(160)));
    let qrpo = record(p, &stage(lines, "qrpo")["data"]["manifest"]);
    assert_eq!(qrpo["inputs"]["model"], output("sft", "model"), "the reference checkpoint");
    assert_eq!(qrpo["inputs"]["completions"], output("reference-completions", "completions"));
    assert_eq!(qrpo["inputs"]["rewards"], output("rewards", "rewards"));
    assert_eq!(qrpo["config"]["beta"], 5.0);
    assert_eq!(qrpo["config"]["length_normalised"], true);
    let evaluation = lines.iter().find(|l| l["type"] == "evaluation").expect("the replay reports the evaluation");
    let e = &evaluation["data"];
    assert_eq!(
        (e["model"]["checkpoint"].as_str(), e["baseline"]["checkpoint"].as_str()),
        (Some("qrpo.model"), Some("sft.model"))
    );
    assert_eq!(e["examples"], 20, "article 30 in 5 languages, every ordered pair");
    let eval = record(p, &stage(lines, "eval")["data"]["manifest"]);
    assert_eq!(
        (&e["model"]["score"], &e["baseline"]["score"]),
        (&eval["stats"]["chrf"], &eval["stats"]["baseline_chrf"])
    );
}

/// The DPO variant extends the main job: in the store the replay filled, only its own stages
/// (and those after them in plan order) are re-executed, to the committed bytes.
fn the_dpo_variant_reproduces_from_its_own_stages(p: &Project) {
    let committed = fs_err::read_to_string(p.path("lockfiles/mini-apertus-dpo.lock")).unwrap();
    p.prov(&["lock", "recipes/mini-apertus-dpo.yaml"]).success();
    assert_eq!(fs_err::read_to_string(p.path("lockfiles/mini-apertus-dpo.lock")).unwrap(), committed, "stale");
    let lines = p.json(&[
        "replay",
        "lockfiles/mini-apertus-dpo.lock",
        "--against",
        "manifests/mini-apertus-dpo",
        "--from",
        "dpo",
    ]);
    let run = lines.iter().find(|l| l["type"] == "run").expect("a run summary");
    assert_eq!(run["data"]["diverged"], false, "{run}");
    let status = |name: &str| stage(&lines, name)["data"]["status"].as_str().unwrap().to_owned();
    assert_eq!(
        (status("dpo"), status("dpo-eval"), status("pretrain")),
        ("replayed".into(), "replayed".into(), "reused".into())
    );
    let dpo = record(p, &stage(&lines, "dpo")["data"]["manifest"]);
    assert_eq!(dpo["inputs"]["rewards"], stage(&lines, "rewards")["data"]["outputs"]["rewards"]);
    assert!(dpo["stats"]["pairs"].as_u64().unwrap() > 0, "{}", dpo["stats"]);
    let evaluations: Vec<&Value> = lines.iter().filter(|l| l["type"] == "evaluation").map(|l| &l["data"]).collect();
    assert!(evaluations.iter().any(|e| e["model"]["checkpoint"] == "dpo.model"), "{evaluations:?}");
}

/// With the project's Python: every row of the license ledger is `license:denied` exactly when
/// the document is a Debian one.
fn ledger_removes_exactly_the_debian_documents(p: &Project, ledger: &Value) {
    let Some(python) = crate::common::venv_python() else { return };
    let shards = crate::test_pii::shard_files(p, ledger);
    let script = "import sys, pyarrow.parquet as pq\n\
                  wrong, rows = [], 0\n\
                  for f in sys.argv[1:]:\n\
                  \x20   for r in pq.read_table(f, columns=['id', 'rule']).to_pylist():\n\
                  \x20       rows += 1\n\
                  \x20       if (r['rule'] == 'license:denied') != r['id'].startswith('debian-'):\n\
                  \x20           wrong.append(r)\n\
                  print(rows, len(wrong), wrong[:3])\n";
    let out = std::process::Command::new(python).arg("-c").arg(script).args(&shards).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    let rows: u64 = words.next().unwrap().parse().unwrap();
    assert!(rows > UDHR_DOCUMENTS, "{text}");
    assert_eq!(words.next(), Some("0"), "rows whose rule is not what their source declares: {text}");
}
