//! The CLI's output, pinned: the human and `--json` output of every command on small runs
//! (the quickstart; the audit test's robots, PII, license and decontamination run; a small
//! trained model), compared with the snapshots in `tests/snapshots/` (`insta`).
//!
//! These pin what a user reads, so that moving code between crates is checked by more than
//! the end-to-end assertions. What differs between machines is replaced before comparing:
//! the project directory, every digest (by a label naming what it is: `<stage:shards>`,
//! `<out:shards.docs>`, `<run:quickstart>`, …, found by reading the store, or `<#N>` by first
//! appearance for anything else), times, sizes and the envelope's machine fields. A digest
//! that is the same on every machine (an output) is labelled too, so that the snapshot reads
//! as what it names; the replay tests pin the digests themselves.
//!
//! To accept an intended change of output: `cargo insta review` (or run with
//! `INSTA_UPDATE=always` and read the diff of `tests/snapshots/` before committing).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use prov_manifest::{Record, get_record};
use prov_store::{Access, ObjectKind, Store};
use serde_json::Value;

use crate::common::Project;

/// Runs commands of one project and snapshots their output with machine facts redacted.
struct Pinned<'p> {
    p: &'p Project,
    /// Full hex digest -> label.
    labels: BTreeMap<String, String>,
    /// Literal machine facts (envelope values) -> placeholder.
    facts: Vec<(String, String)>,
}

impl<'p> Pinned<'p> {
    fn new(p: &'p Project) -> Self {
        Self { p, labels: BTreeMap::new(), facts: Vec::new() }
    }

    /// Gives `digest` the label `label`, or `label@recipe` when another digest has it; a
    /// digest keeps its first label.
    fn label(&mut self, digest: &prov_store::Digest, label: String, recipe: &str) {
        let hex = digest.to_hex();
        if self.labels.contains_key(&hex) {
            return;
        }
        let taken = self.labels.values().any(|l| *l == label);
        self.labels.insert(hex, if taken { format!("{label}@{recipe}") } else { label });
    }

    /// Labels the records of every run in the store (runs by recipe name, stages in plan
    /// order) by what they are, and every object a stage outputs by the output's name, and
    /// learns the envelope's machine facts.
    fn learn_store(&mut self) {
        let store = Store::open(&self.p.path(".prov"), Access::ReadOnly, true).unwrap();
        let manifests = store.index().objects_of_kind(ObjectKind::Manifest.as_str()).unwrap();
        let records: Vec<(prov_store::Digest, Record)> =
            manifests.into_iter().map(|d| (d, get_record(&store, &d).unwrap())).collect();
        let mut runs: Vec<(&prov_store::Digest, &prov_manifest::RunRecord)> =
            records.iter().filter_map(|(d, r)| if let Record::Run(run) = r { Some((d, run)) } else { None }).collect();
        runs.sort_by(|a, b| a.1.recipe.cmp(&b.1.recipe));
        for (d, run) in runs {
            let recipe = run.recipe.clone();
            self.label(d, format!("run-manifest:{recipe}"), &recipe);
            self.label(&run.lockfile, format!("run:{recipe}"), &recipe);
            self.label(&run.root, format!("run-root:{recipe}"), &recipe);
            for listed in &run.stages {
                let Ok(Record::Stage(s)) = get_record(&store, &listed.manifest) else { continue };
                self.label(&listed.manifest, format!("stage:{}", s.name), &recipe);
                self.label(&s.key, format!("key:{}", s.name), &recipe);
                for (name, o) in &s.outputs {
                    self.label(&o.digest, format!("out:{}.{name}", s.name), &recipe);
                }
                self.learn_envelope(&s.envelope);
            }
        }
        for (d, r) in &records {
            if let Record::Replay(replay) = r {
                let recipe =
                    self.labels.get(&replay.lockfile.to_hex()).map_or("?", |l| l.trim_start_matches("run:")).to_owned();
                self.label(d, format!("replay-record:{recipe}"), "");
            }
        }
        for (d, r) in &records {
            if let Record::Source(s) = r {
                self.label(d, format!("source:{}", s.name), "");
            }
        }
        for (d, r) in &records {
            if let Record::Dataset(ds) = r {
                let owner = self.labels.get(&d.to_hex()).cloned().unwrap_or_else(|| "dataset".to_owned());
                for (i, shard) in ds.shards.iter().enumerate() {
                    self.label(&shard.digest, format!("{owner}[{i}]"), "");
                }
            }
        }
    }

    /// The envelope's strings that name this machine, replaced wherever they are printed.
    fn learn_envelope(&mut self, envelope: &prov_manifest::Envelope) {
        for (text, placeholder) in [(&envelope.cpu_model, "[cpu-model]"), (&envelope.os, "[os]")] {
            if text.len() >= 5 && !self.facts.iter().any(|(t, _)| t == text) {
                self.facts.push((text.clone(), placeholder.to_owned()));
            }
        }
        // Longest first, so that a value inside another is not replaced first.
        self.facts.sort_by_key(|(t, _)| std::cmp::Reverse(t.len()));
    }

    fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for root in [self.p.root.canonicalize().unwrap(), self.p.root.clone()] {
            out = out.replace(&root.display().to_string(), "[PROJECT]");
        }
        if let Some(parent) = self.p.root.parent() {
            out = out.replace(&parent.display().to_string(), "[HOME]");
        }
        for (fact, placeholder) in &self.facts {
            out = out.replace(fact.as_str(), placeholder);
        }
        let mut unknown: Vec<String> = Vec::new();
        let number = |hex: &str, unknown: &mut Vec<String>| -> usize {
            if let Some(i) = unknown.iter().position(|h| h == hex) {
                i + 1
            } else {
                unknown.push(hex.to_owned());
                unknown.len()
            }
        };
        let full = regex::Regex::new(r"(blake3:)?\b([0-9a-f]{64})\b").unwrap();
        out = full
            .replace_all(&out, |c: &regex::Captures<'_>| match self.labels.get(&c[2]) {
                Some(l) => format!("<{l}>"),
                None => format!("<#{}>", number(&c[2], &mut unknown)),
            })
            .into_owned();
        let short = regex::Regex::new(r"\b([0-9a-f]{12})\b").unwrap();
        out = short
            .replace_all(&out, |c: &regex::Captures<'_>| {
                let known = self.labels.iter().find(|(hex, _)| hex.starts_with(&c[1]));
                match known {
                    Some((_, l)) => format!("<{l}…>"),
                    None => match unknown.iter().position(|h| h.starts_with(&c[1])) {
                        Some(i) => format!("<#{}…>", i + 1),
                        None => format!("<#{}…>", number(&c[1], &mut unknown)),
                    },
                }
            })
            .into_owned();
        for (pattern, with) in [
            // Wall-clock durations.
            (r"\b\d+\.\d+ ?(s|ms)\b", "[TIME]"),
            (r#""(millis|elapsed_ms|seconds)": ?[0-9.]+"#, r#""$1": "[TIME]""#),
            // Sizes that include envelope strings or SQLite pages.
            (r"\b\d+(\.\d+)? (B|KiB|MiB|GiB)\b", "[SIZE]"),
            (r#""bytes": ?\d+"#, r#""bytes": "[SIZE]""#),
            // Files that embed stage records (a proof) or their short digests drawn as pixels
            // (a card's PNG plots): their sizes follow the envelope. SVG and Markdown files
            // hold digests as fixed-width text, so their sizes are pinned.
            (r"(\.proof|\.png) \(\d+ bytes\)", "$1 ([SIZE] bytes)"),
            (r"\b\d+ threads\b", "[N] threads"),
            // Envelopes printed as JSON text (`--json` output is redacted structurally).
            (r#""cpu_flags": \[[^\]]*\]"#, r#""cpu_flags": "[cpu_flags]""#),
            (r#""(aten_cpu_capability|mkl_cbwr|onednn_max_cpu_isa|cpu_model|os)": "[^"]*""#, r#""$1": "[$1]""#),
            (r#""threads": \d+"#, r#""threads": "[threads]""#),
            // The width of a table's time column follows the longest time.
            (r"(\[TIME\]) +", "$1 "),
            (r"\btime +(outputs|stage)", "time $1"),
        ] {
            out = regex::Regex::new(pattern).unwrap().replace_all(&out, with).into_owned();
        }
        out
    }

    /// Runs `prov ARGS` and snapshots its exit code, stdout and stderr, redacted. JSON
    /// Lines output is pretty-printed, one value after the other, so that a diff is readable.
    #[track_caller]
    fn snap(&self, name: &str, args: &[&str], code: i32) -> crate::common::Run {
        let r = self.p.prov(args);
        assert_eq!(r.code(), code, "{}", r.describe());
        self.record(name, args, &r);
        r
    }

    #[track_caller]
    fn record(&self, name: &str, args: &[&str], r: &crate::common::Run) {
        let mut text = format!("$ prov {}\nexit {}\n", args.join(" "), r.code());
        let stdout = r.stdout();
        if args.contains(&"--json") {
            for line in stdout.lines() {
                let mut v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                redact_envelopes(&mut v);
                let _ = writeln!(text, "{}", serde_json::to_string_pretty(&v).unwrap());
            }
        } else {
            text.push_str(&stdout);
        }
        if !r.stderr().is_empty() {
            let _ = write!(text, "--- stderr\n{}", r.stderr());
        }
        insta::assert_snapshot!(name, self.redact(&text));
    }

    /// [`Self::snap`] with `input` on stdin.
    #[track_caller]
    fn stdin(&self, name: &str, args: &[&str], input: &str) {
        let r = self.p.prov_with_stdin(args, input);
        assert_eq!(r.code(), 0, "{}", r.describe());
        self.record(name, args, &r);
    }

    /// [`Self::snap`] of the human output, then of `--json`.
    #[track_caller]
    fn both(&self, name: &str, args: &[&str]) {
        self.snap(name, args, 0);
        let mut json = vec!["--json"];
        json.extend_from_slice(args);
        self.snap(&format!("{name}.json"), &json, 0);
    }
}

/// A variant of the quickstart: another fraction, and one more stage.
const QUARTER: &str = "schema: 1\nname: quickstart-quarter\nextends: quickstart.yaml\nstages:\n  half:\n    kind: sample\n    inputs: {docs: shards}\n    params: {fraction: 0.25}\n  count:\n    kind: external\n    inputs: {sample: half}\n    params:\n      command: [sh, -c, \"cat inputs/sample/*.parquet | wc -c > BYTES\"]\n      outputs: {bytes: BYTES}\n";

#[test]
fn the_quickstart_commands_print_what_they_printed() {
    let p = Project::with_recipes();
    let mut pin = Pinned::new(&p);
    pin.snap("lock", &["lock", "recipes/quickstart.yaml"], 0);
    pin.snap("lock.json", &["--json", "lock", "recipes/quickstart.yaml"], 0);
    p.prov(&["run", "recipes/quickstart.yaml"]).success();
    pin.learn_store();
    // The first run executed; run it again into a fresh store for the human output.
    let fresh = Project::with_recipes();
    let mut fresh_pin = Pinned::new(&fresh);
    fresh.prov(&["lock", "recipes/quickstart.yaml"]).success();
    fresh_pin.labels.clone_from(&pin.labels);
    fresh_pin.facts.clone_from(&pin.facts);
    fresh_pin.snap("run.executed", &["run", "lockfiles/quickstart.lock"], 0);
    pin.both("run.cached", &["run", "lockfiles/quickstart.lock"]);
    pin.both("replay", &["replay", "lockfiles/quickstart.lock"]);
    pin.learn_store();
    pin.both("verify", &["verify"]);
    pin.both("status", &["status"]);
    pin.both("log", &["log"]);
    let run = p.json(&["run", "lockfiles/quickstart.lock"]);
    let manifest = |stage: &str| -> String {
        let s = run.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == stage).unwrap();
        s["data"]["manifest"].as_str().unwrap().to_owned()
    };
    let output = |stage: &str, name: &str| -> String {
        let s = run.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == stage).unwrap();
        s["data"]["outputs"][name].as_str().unwrap().to_owned()
    };
    let run_manifest =
        run.iter().find(|l| l["type"] == "run").unwrap()["data"]["run_manifest"].as_str().unwrap().to_owned();
    pin.both("show.run", &["show", &run_manifest]);
    pin.both("show.stage", &["show", &manifest("half")]);
    pin.both("show.dataset", &["show", &output("half", "dataset")]);
    pin.both("show.tree", &["show", &output("checksums", "sums")]);
    pin.both("lineage.dot", &["lineage", &output("half", "dataset")]);
    pin.snap("lineage.mermaid", &["lineage", &output("half", "dataset"), "--format", "mermaid", "--depth", "1"], 0);

    p.write("recipes/quickstart-quarter.yaml", QUARTER);
    p.prov(&["lock", "recipes/quickstart-quarter.yaml"]).success();
    pin.both("diff.unrecorded", &["diff", "lockfiles/quickstart.lock", "lockfiles/quickstart-quarter.lock"]);
    p.prov(&["run", "lockfiles/quickstart-quarter.lock"]).success();
    pin.learn_store();
    pin.both("diff", &["diff", "lockfiles/quickstart.lock", "lockfiles/quickstart-quarter.lock"]);
    pin.snap(
        "diff.exit-code",
        &["diff", "--exit-code", "lockfiles/quickstart.lock", "lockfiles/quickstart-quarter.lock"],
        1,
    );
    // A stale lockfile: the recipe changed after locking.
    p.write("recipes/quickstart-quarter.yaml", &QUARTER.replace("0.25", "0.125"));
    p.write(
        "recipes/quickstart.yaml",
        &fs_err::read_to_string(p.path("recipes/quickstart.yaml")).unwrap().replace("shards: 4", "shards: 3"),
    );
    pin.both("status.stale", &["status"]);
    pin.both("gc.dry-run", &["gc", "--dry-run"]);
}

/// The same output on a machine unlike the one the snapshots were recorded on. Stage records
/// hold the envelope (CPU model and flags, thread count), so on another machine every record
/// digest differs, and with it what follows from one: a proof's size, digests drawn in a
/// card's plots, an order by digest. Three threads, which no machine here defaults to,
/// change the envelope as another CPU would; the snapshots must not notice.
#[test]
fn the_snapshots_hold_with_another_envelope() {
    crate::common::with_threads(3, || {
        the_quickstart_commands_print_what_they_printed();
        the_audit_run_commands_print_what_they_printed();
        the_proof_commands_print_what_they_printed();
    });
}

const FRENCH: &str = "https://www.ohchr.org/en/human-rights/universal-declaration/translations/french#article-01";

#[test]
fn the_audit_run_commands_print_what_they_printed() {
    let p = crate::test_audit::project();
    let mut pin = Pinned::new(&p);
    pin.learn_store();
    pin.both("audit", &["audit", "lockfiles/audited.lock", "--policy", "policy.yaml"]);
    pin.snap(
        "audit.markdown",
        &["audit", "lockfiles/audited.lock", "--policy", "policy.yaml", "--format", "markdown"],
        0,
    );
    pin.both("license.queue", &["license", "queue", "lockfiles/audited.lock", "--all"]);
    let share_alike = crate::common::repo_root().join("recipes/license-policies/share-alike.yaml");
    p.write("share-alike.yaml", &fs_err::read_to_string(share_alike).unwrap());
    pin.both("license.diff", &["license", "diff", "permissive", "share-alike.yaml"]);
    pin.both("card.hf", &["card", "lockfiles/audited.lock", "--format", "hf", "--out", "card-hf"]);
    let readme = fs_err::read_to_string(p.path("card-hf/README.md")).unwrap();
    insta::assert_snapshot!("card.hf.README.md", pin.redact(&readme));
    pin.both("card.croissant", &["card", "lockfiles/audited.lock", "--format", "croissant", "--out", "card-croissant"]);
    let croissant = fs_err::read_to_string(p.path("card-croissant/croissant.json")).unwrap();
    insta::assert_snapshot!("card.croissant.croissant.json", pin.redact(&croissant));
}

#[test]
fn the_proof_commands_print_what_they_printed() {
    let (p, manifest) = crate::test_prove::project();
    let mut pin = Pinned::new(&p);
    pin.learn_store();
    pin.both("prove.url", &["prove", "lockfiles/prove.lock", "--url", FRENCH, "--out", "url.proof"]);
    pin.both("prove.doc", &["prove", "lockfiles/prove.lock", "--doc", "udhr-fra-01", "--out", "doc.proof"]);
    pin.both("verify-proof", &["verify-proof", "url.proof", "--run", &manifest]);
    pin.both("verify-proof.unanchored", &["verify-proof", "doc.proof", "--unanchored"]);
}

#[test]
fn the_commands_that_need_no_store_print_what_they_printed() {
    let p = Project::new();
    let pin = Pinned::new(&p);
    p.write("robots.txt", "User-agent: GPTBot\nDisallow: /private\nAllow: /private/open\n\nUser-agent: *\nDisallow:\n");
    pin.both(
        "explain.robots",
        &["explain", "robots", "--robots", "robots.txt", "--agent", "GPTBot", "--url", "https://example.com/private/x"],
    );
    pin.both("explain.license", &["explain", "license", "GPL-2.0+ OR MIT"]);
    pin.stdin("explain.pii", &["explain", "pii", "--mode", "strict"], "write to jane.doe@example.com from 192.0.2.1\n");
    pin.stdin(
        "explain.pii.json",
        &["--json", "explain", "pii", "--mode", "apertus"],
        "write to jane.doe@example.com\n",
    );
    pin.stdin("explain.goldfish", &["explain", "goldfish", "--k", "3", "--h", "2"], "[5, 6, 7, 8, 9, 10, 11, 12]");
    pin.stdin(
        "explain.goldfish.json",
        &["--json", "explain", "goldfish", "--k", "3", "--h", "2"],
        "[5, 6, 7, 8, 9, 10, 11, 12]",
    );
    pin.snap("version", &["--version"], 0);
    pin.snap("help", &["--help"], 0);
    pin.snap("usage-error", &["run"], 1);
    pin.snap("input-error", &["run", "recipes/missing.yaml"], 1);
}

#[test]
fn the_trained_model_commands_print_what_they_printed() {
    let (p, lines) = crate::test_train::trained();
    let mut pin = Pinned::new(&p);
    pin.learn_store();
    let pretrain = lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == "pretrain").unwrap();
    let model = pretrain["data"]["outputs"]["model"].as_str().unwrap().to_owned();
    pin.both("explain.batch", &["explain", "batch", "lockfiles/lm.lock", "3"]);
    pin.both("sample", &["sample", &model, "--prompt-ids", "[0]", "--seed", "1", "--max-tokens", "8"]);
    p.write("ids.jsonl", "[0, 5, 9, 14, 3, 7]\n");
    pin.both("eval", &["eval", &model, "--ids", "ids.jsonl"]);
    pin.both("export", &["export", &model, "--out", "hf"]);
}

/// Replaces the machine's facts in every envelope inside `v` (an object with `cpu_flags`),
/// also in records carried as JSON text (a proof's stage records): the CPU, its flags, the
/// kernel, the `ATen` capability with the MKL and oneDNN pins that follow it, and the thread count.
fn redact_envelopes(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if o.contains_key("cpu_flags") {
                for field in
                    ["cpu_flags", "cpu_model", "os", "aten_cpu_capability", "mkl_cbwr", "onednn_max_cpu_isa", "threads"]
                {
                    if let Some(x) = o.get_mut(field) {
                        *x = Value::String(format!("[{field}]"));
                    }
                }
            }
            o.values_mut().for_each(redact_envelopes);
        }
        Value::Array(a) => a.iter_mut().for_each(redact_envelopes),
        Value::String(s) if s.starts_with("{\"") => {
            if let Ok(mut inner) = serde_json::from_str::<Value>(s) {
                redact_envelopes(&mut inner);
                *s = inner.to_string();
            }
        }
        _ => {}
    }
}
