//! `prov audit` on the quickstart's documents (each given a declared license, a few an e-mail
//! address) run through a robots filter, PII redaction, a license filter and
//! decontamination: an honest run passes the shipped-style policy; a tampered ledger shard,
//! verdict or dataset shard makes the claim that reads it fail, naming the object; a policy
//! with a typo is exit 1 with its file, line and field.

use crate::common::{Project, flip_byte, on_another_machine, recommit};

const RECIPE: &str = "\
schema: 1
name: audited
seed: 20250131
sources:
  docs:
    path: data/audit/docs.jsonl
    license: MIT AND GPL-3.0-only
  snapshot:
    path: data/robots
    retrieved: \"2025-01-31\"
  bench:
    path: data/audit/bench.jsonl
stages:
  shards:
    kind: shard
    inputs: {docs: docs}
    params: {shards: 4}
  robots:
    kind: robots
    inputs: {docs: shards, snapshot: snapshot}
  pii:
    kind: pii
    inputs: {docs: robots.dataset}
  license:
    kind: license
    inputs: {docs: pii.dataset}
  decontaminate:
    kind: decontaminate
    inputs: {docs: license.dataset, benchmark: bench}
";

const POLICY: &str = "\
schema: 1
name: audited
claims:
  - kind: robots
    agents: [GPTBot, CCBot]
    max_default_share: 0.9
  - kind: pii
  - kind: license
    policy: permissive
  - kind: compound-license
  - kind: decontamination
";

/// Returns the project after the run: the quickstart's documents, every 10th declaring
/// GPL-3.0 (removed by the license filter), every 7th with an e-mail address (redacted), the
/// French articles disallowed for `GPTBot`, and two Spanish articles as the benchmark.
pub(crate) fn project() -> Project {
    let p = Project::with_recipes();
    let all = fs_err::read_to_string(p.path("recipes/data/quickstart/udhr-sample.jsonl")).unwrap();
    let mut docs = String::new();
    let mut bench = String::new();
    for (i, line) in all.lines().enumerate() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        v["license"] = (if i % 10 == 3 { "GPL-3.0" } else { "MIT" }).into();
        if i % 7 == 2 {
            let text = format!("{} Contact: someone{i}@example.org", v["text"].as_str().unwrap());
            v["text"] = text.into();
        }
        if v["id"].as_str().unwrap().starts_with("udhr-spa") && bench.lines().count() < 2 && i % 2 == 0 {
            bench.push_str(&serde_json::json!({"id": format!("q{i}"), "text": v["text"]}).to_string());
            bench.push('\n');
        }
        docs.push_str(&v.to_string());
        docs.push('\n');
    }
    assert_eq!(bench.lines().count(), 2, "two benchmark examples");
    p.write("recipes/data/audit/docs.jsonl", &docs);
    p.write("recipes/data/audit/bench.jsonl", &bench);
    p.write(
        "recipes/data/robots/www.ohchr.org",
        "User-agent: GPTBot\nDisallow: /en/human-rights/universal-declaration/translations/french\n",
    );
    p.write("recipes/audited.yaml", RECIPE);
    p.write("policy.yaml", POLICY);
    p.prov(&["run", "recipes/audited.yaml"]).success();
    p
}

/// The store file of the object an output of `stage` names.
fn output_of(p: &Project, stage: &str, output: &str) -> String {
    let run = p.json(&["run", "recipes/audited.yaml"]);
    let s = run.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == stage).expect("the stage");
    s["data"]["outputs"][output].as_str().unwrap_or_else(|| panic!("{s}")).to_owned()
}

fn record(p: &Project, digest: &str) -> serde_json::Value {
    let store = prov_store::Store::open(&p.path(".prov"), prov_store::Access::Shared, true).unwrap();
    let d: prov_store::Digest = digest.parse().unwrap();
    serde_json::from_slice(&store.read(&d).unwrap()).unwrap()
}

/// The digest of shard `i` of a ledger, from its parts record.
fn ledger_shard(p: &Project, ledger: &str, i: usize) -> String {
    let parts = record(p, ledger)["parts"].as_str().expect("a ledger record").to_owned();
    record(p, &parts)["shards"][i]["digest"].as_str().unwrap().to_owned()
}

#[test]
fn an_honest_run_holds_and_reports_in_every_format() {
    let p = project();
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "policy.yaml"]);
    r.success();
    let out = r.stdout();
    for claim in ["robots: HOLDS", "pii: HOLDS", "license: HOLDS", "compound-license: HOLDS", "decontamination: HOLDS"]
    {
        assert!(out.contains(claim), "{claim}\n{}", r.describe());
    }
    assert!(out.contains("5 of 5 claims hold"), "{}", r.describe());
    assert!(out.contains("kept only by the opt-out default"), "{}", r.describe());
    assert!(out.contains("`robots` removed documents: 31"), "{}", r.describe());

    let lines = p.json(&["audit", "lockfiles/audited.lock", "--policy", "policy.yaml"]);
    let claims: Vec<_> = lines.iter().filter(|l| l["type"] == "claim").collect();
    assert_eq!(claims.len(), 5);
    assert!(claims.iter().all(|c| c["data"]["outcome"] == "holds"), "{claims:?}");
    let audit = lines.iter().find(|l| l["type"] == "audit").unwrap();
    assert_eq!(audit["data"]["holds"], 5);

    p.prov(&["audit", "lockfiles/audited.lock", "--policy", "policy.yaml", "--format", "markdown", "--out", "a.md"])
        .success();
    let md = fs_err::read_to_string(p.path("a.md")).unwrap();
    assert!(md.starts_with("# Audit of `audited`"), "{md}");
    assert!(md.contains("## pii: **holds**"), "{md}");
    p.prov(&["audit", "lockfiles/audited.lock", "--policy", "policy.yaml", "--format", "html", "--out", "a.html"])
        .success();
    assert!(fs_err::read_to_string(p.path("a.html")).unwrap().contains("<h2>license: <strong>holds</strong></h2>"));

    // A sample states its confidence.
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "policy.yaml", "--sample", "50", "--seed", "7"]);
    r.success();
    assert!(r.stdout().contains("rescan sample (seed 7): 50 of"), "{}", r.describe());
    assert!(
        r.stdout().contains("`pii` chance that the sample catches a violation if 0.5% of documents hold one: 22.17%"),
        "{}",
        r.describe()
    );
}

/// The filter claims are about what a model trains on: a `tokenize` stage whose documents
/// passed no filter of the claim's kind fails the claim, naming its chain, whether it reads
/// the data around the filters (the shards, before every filter) or a second copy of the
/// corpus; through the filters, the claims hold and say which training data they cover.
/// Found by two adversarial reviews: before, every claim held for both runs.
#[test]
fn filters_that_the_training_data_goes_around_fail_their_claims() {
    let p = project();
    let training = |docs: &str| {
        format!(
            "{RECIPE}  tokenizer:\n    kind: tokenizer\n    inputs: {{docs: {docs}}}\n    params: {{vocab_size: 400}}\n  \
             tokens:\n    kind: tokenize\n    inputs: {{docs: {docs}, tokenizer: tokenizer.tokenizer}}\n    params: \
             {{seq_len: 64}}\n"
        )
    };
    p.write("recipes/audited.yaml", &training("decontaminate.dataset"));
    p.prov(&["run", "recipes/audited.yaml"]).success();
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "policy.yaml"]);
    r.success();
    for filter in ["robots", "pii", "license", "decontaminate"] {
        assert!(r.stdout().contains(&format!("training data after `{filter}`: `tokens`")), "{}", r.describe());
    }

    p.write("recipes/audited.yaml", &training("shards"));
    p.prov(&["run", "recipes/audited.yaml"]).success();
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "policy.yaml"]);
    r.exit(4);
    assert!(
        r.stdout().contains(
            "! `tokens` trains on documents that passed no `robots` stage: its `docs` chain is `docs` -> `shards` -> \
             `tokens`"
        ),
        "{}",
        r.describe()
    );
    for claim in ["robots: FAILS", "pii: FAILS", "license: FAILS", "decontamination: FAILS"] {
        assert!(r.stdout().contains(claim), "{claim}\n{}", r.describe());
    }
    for filter in ["pii", "license", "decontaminate"] {
        assert!(r.stdout().contains(&format!("passed no `{filter}` stage")), "{filter}\n{}", r.describe());
    }

    // A second copy of the corpus (one line more, so another digest), tokenised beside the
    // filtered data: its chain shares no stage with the filters'.
    let mut copy = fs_err::read_to_string(p.path("recipes/data/audit/docs.jsonl")).unwrap();
    copy.push_str("{\"id\": \"zz-extra\", \"text\": \"one more\", \"license\": \"MIT\"}\n");
    p.write("recipes/data/audit/copy.jsonl", &copy);
    let recipe = training("decontaminate.dataset")
        .replace("  bench:\n", "  copy:\n    path: data/audit/copy.jsonl\n    license: MIT\n  bench:\n")
        + "  more:\n    kind: shard\n    inputs: {docs: copy}\n  more-tokens:\n    kind: tokenize\n    inputs: {docs: more, \
         tokenizer: tokenizer.tokenizer}\n    params: {seq_len: 64}\n";
    p.write("recipes/audited.yaml", &recipe);
    p.prov(&["run", "recipes/audited.yaml"]).success();
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "policy.yaml"]);
    r.exit(4);
    assert!(
        r.stdout().contains(
            "! `more-tokens` trains on documents that passed no `robots` stage: its `docs` chain is `copy` -> `more` \
             -> `more-tokens`"
        ),
        "{}",
        r.describe()
    );
    assert!(r.stdout().contains("training data after `robots`: `tokens`"), "{}", r.describe());
}

/// A model trains on a token tree that a command made, while a `tokenize` stage beside it,
/// which nothing trains on, passed every filter. The audit cannot follow the command's tree to
/// its documents, so no filter claim holds; training on the `tokenize` stage's own tree (or on
/// the same bytes copied by a command) lets them hold.
#[test]
fn training_tokens_a_command_made_leave_the_filter_claims_undecided() {
    let p = project();
    let lm = |tokens: &str, command: &str| {
        format!(
            "{}  tokenizer:\n    kind: tokenizer\n    inputs: {{docs: decontaminate.dataset}}\n    params: {{vocab_size: \
             300}}\n  tokens:\n    kind: tokenize\n    inputs: {{docs: decontaminate.dataset, tokenizer: \
             tokenizer.tokenizer}}\n    params: {{seq_len: 32}}\n  made:\n    kind: external\n    inputs: {{tokens: \
             tokens.tokens}}\n    params:\n      command: [sh, -c, \"{command}\"]\n      outputs: {{tokens: out/}}\n  \
             pretrain:\n    kind: pretrain\n    inputs: {{tokens: {tokens}, order: tokens.order, tokenizer: \
             tokenizer.tokenizer}}\n    params:\n      steps: 2\n      batch_size: 2\n      checkpoint_every: 2\n      \
             model: {{hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, num_attention_heads: 2, \
             num_key_value_heads: 1}}\n",
            RECIPE.replace("seed: 20250131\n", "seed: 20250131\nallow_commands: true\n")
        )
    };
    // The command's tree holds the same token ids under other document ids: other bytes.
    let relabel = "cp -r inputs/tokens out && sed -i s/udhr-/doc-/g out/documents.jsonl";
    p.write("recipes/audited.yaml", &lm("made.tokens", relabel));
    p.prov(&["run", "recipes/audited.yaml"]).success();
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "policy.yaml"]);
    r.exit(4);
    let said = "`pretrain` trains on `tokens` (`blake3:";
    let made = "a tree that stage `made` (`external`) made, not a `tokenize` stage: the audit cannot follow it to the \
                documents it holds";
    assert!(r.stdout().contains(said) && r.stdout().contains(made), "{}", r.describe());
    for claim in ["robots: CANNOT-BE-DECIDED", "pii: CANNOT-BE-DECIDED", "license: CANNOT-BE-DECIDED"] {
        assert!(r.stdout().contains(claim), "{claim}\n{}", r.describe());
    }
    assert!(r.stdout().contains("training data after `robots`: `tokens`"), "{}", r.describe());

    // The same bytes copied by the command are the `tokenize` stage's tree: followed.
    p.write("recipes/audited.yaml", &lm("made.tokens", "cp -r inputs/tokens out"));
    p.prov(&["run", "recipes/audited.yaml"]).success();
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "policy.yaml"]);
    r.success();
    assert!(!r.stdout().contains(made), "{}", r.describe());
    p.write("recipes/audited.yaml", &lm("tokens.tokens", relabel));
    p.prov(&["run", "recipes/audited.yaml"]).success();
    p.prov(&["audit", "lockfiles/audited.lock", "--policy", "policy.yaml"]).success();
}

#[test]
fn the_robots_word_loss_per_language_group_is_measured_beside_the_claim() {
    let p = project();
    let policy = "schema: 1\nname: loss\nclaims:\n  - kind: robots-loss\n    groups:\n      - name: french\n        languages: [fr]\n        claimed: 1.0\n      - name: others\n        claimed: 0.0\n    tolerance: 0.0\n";
    p.write("loss.yaml", policy);
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "loss.yaml"]);
    r.success();
    assert!(r.stdout().contains("words removed, french (claimed 100.00%): 1951 of 1951 = 100.00%"), "{}", r.describe());
    assert!(r.stdout().contains("words removed, others (claimed 0.00%): 0 of 12462 = 0.00%"), "{}", r.describe());
    // The Apertus report's figures, beside what this run measured: the claim fails.
    p.write(
        "loss.yaml",
        &policy
            .replace("claimed: 1.0", "claimed: 0.08")
            .replace("claimed: 0.0\n", "claimed: 0.04\n")
            .replace("tolerance: 0.0", "tolerance: 0.02"),
    );
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "loss.yaml"]);
    r.exit(4);
    assert!(
        r.stdout().contains("the filter removed 100.00% of the words of group `french`, not 8.00% within 2.00%"),
        "{}",
        r.describe()
    );
}

#[test]
fn a_source_that_re_licenses_its_documents_fails_the_compound_claim() {
    let p = project();
    p.write("recipes/audited.yaml", &RECIPE.replace("license: MIT AND GPL-3.0-only", "license: MIT"));
    p.prov(&["run", "recipes/audited.yaml"]).success();
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "policy.yaml"]);
    r.exit(4);
    assert!(r.stdout().contains("compound-license: FAILS"), "{}", r.describe());
    assert!(
        r.stdout().contains("documents declaring `GPL-3.0`: constituent 0 (`GPL-3.0-only`) is share-alike"),
        "{}",
        r.describe()
    );
    assert!(r.stdout().contains("license: HOLDS"), "{}", r.describe());
}

#[test]
fn replay_is_decided_from_replay_records_or_a_fresh_replay() {
    let p = project();
    p.write("replay.yaml", "schema: 1\nname: r\nclaims:\n  - kind: replay\n");
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "replay.yaml"]);
    r.exit(4);
    assert!(r.stdout().contains("replay: CANNOT-BE-DECIDED"), "{}", r.describe());
    assert!(
        r.stdout().contains("no replay record re-executed stage(s) bench, docs, snapshot, shards, robots"),
        "{}",
        r.describe()
    );
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "replay.yaml", "--replay"]);
    r.success();
    assert!(r.stdout().contains("stage `decontaminate`: replayed identical"), "{}", r.describe());
    assert!(r.stdout().contains("in the recording's envelope"), "{}", r.describe());
    // The replay is recorded: later audits decide from its record.
    p.prov(&["audit", "lockfiles/audited.lock", "--policy", "replay.yaml"]).success();

    // The execution log is an index: rewriting it (the replay marked as diverged, its stage
    // events pointing elsewhere) changes nothing the claim decides from.
    let edit = |statements: &str| {
        let sql = format!("import sqlite3, sys\ndb = sqlite3.connect(sys.argv[1])\n{statements}db.commit()\n");
        let out = std::process::Command::new("python3")
            .arg("-c")
            .arg(sql)
            .arg(p.path(".prov/index.sqlite"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    edit(
        "db.execute(\"UPDATE executions SET status = 'diverged', detail = 'first divergent stage: robots' WHERE \
         mode = 'replay'\")\ndb.execute(\"UPDATE stage_events SET manifest = NULL\")\n",
    );
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "replay.yaml"]);
    r.success();
    assert!(r.stdout().contains("replay: HOLDS"), "{}", r.describe());
    // Evidence is read among the objects that entered the store as records: data that is a
    // well-formed replay record is no replay (`test_replay::records_shipped_as_data_are_not_evidence`).
    // So an index that calls every object a blob hides the replay, and the claim no longer
    // holds: the edit can take evidence away, never add it.
    edit("db.execute(\"UPDATE objects SET kind = 'blob'\")\n");
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "replay.yaml"]);
    r.exit(4);
    assert!(!r.stdout().contains("replay: HOLDS"), "{}", r.describe());
}

/// A small language model's run: a portable data pipeline and a libtorch training stage of
/// class `envelope`.
const LM: &str = "schema: 1\nname: lm\nseed: 3\nsources:\n  udhr:\n    path: data/quickstart/udhr-sample.jsonl\n    license: MIT\n\
stages:\n  shards:\n    kind: shard\n    inputs: {docs: udhr}\n    params: {shards: 2}\n\
\x20 tokenizer:\n    kind: tokenizer\n    inputs: {docs: shards}\n    params: {vocab_size: 300}\n\
\x20 tokens:\n    kind: tokenize\n    inputs: {docs: shards, tokenizer: tokenizer.tokenizer}\n    params: {seq_len: 32}\n\
\x20 pretrain:\n    kind: pretrain\n    inputs: {tokens: tokens.tokens, order: tokens.order, tokenizer: tokenizer.tokenizer}\n\
\x20   params:\n      steps: 6\n      batch_size: 2\n      checkpoint_every: 3\n\
\x20     model: {hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1}\n";

/// The README's path for a run committed on another machine (another CPU model and flags,
/// another kernel and core count): reproduce it in an empty store with `--against`, then
/// audit. The committed manifests are re-recorded with that machine's envelope, so the test
/// does not depend on the machine it runs on: before replay records, the replay claim
/// compared stage manifest digests, which hold the envelope, and failed for every stage here.
#[test]
fn a_run_recorded_on_another_machine_reproduces_and_its_replay_claim_holds() {
    let recorder = Project::with_recipes();
    recorder.git_init("Recorder", "recorder@example.org");
    recorder.write("recipes/lm.yaml", LM);
    recorder.prov(&["run", "recipes/lm.yaml", "--commit"]).success();

    let auditor = Project::with_recipes();
    auditor.write("recipes/lm.yaml", LM);
    fs_err::create_dir_all(auditor.path("lockfiles")).unwrap();
    fs_err::copy(recorder.path("lockfiles/lm.lock"), auditor.path("lockfiles/lm.lock")).unwrap();
    let elsewhere = recommit(&recorder.path("manifests/lm"), &auditor.path("manifests/lm"), on_another_machine);
    let committed = fs_err::read_to_string(recorder.path("manifests/lm/RUN")).unwrap();
    assert_ne!(committed.trim(), elsewhere.to_string(), "every stage record holds its envelope");

    let lines = auditor.json(&["replay", "lockfiles/lm.lock", "--against", "manifests/lm"]);
    let run = lines.iter().find(|l| l["type"] == "run").expect("a run summary");
    assert_eq!(run["data"]["diverged"], false, "{run}");
    assert!(run["data"]["replay_record"].is_string(), "{run}");
    let replayed: Vec<&str> = lines
        .iter()
        .filter(|l| l["type"] == "stage" && l["data"]["status"] == "replayed")
        .map(|l| l["data"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(replayed, ["udhr", "shards", "tokenizer", "tokens", "pretrain"]);

    auditor.write("replay.yaml", "schema: 1\nname: r\nclaims:\n  - kind: replay\n");
    let audit = |p: &Project| {
        let r = p.prov(&["audit", "lockfiles/lm.lock", "--policy", "replay.yaml"]);
        r.success();
        let out = r.stdout();
        assert!(out.contains("replay: HOLDS"), "{}", r.describe());
        assert!(
            out.contains("stage `pretrain`: replayed identical (replay record")
                && out.contains("in another envelope than the recording's (os, cpu_model, cpu_flags, threads differ)"),
            "{}",
            r.describe()
        );
        assert!(out.contains("evidence of portability): 5 of 5"), "{}", r.describe());
    };
    audit(&auditor);
    // The replay's evidence is a root: collecting garbage keeps it.
    auditor.prov(&["gc"]).success();
    audit(&auditor);
}

#[test]
fn a_tampered_ledger_shard_fails_its_claim_naming_the_shard() {
    let p = project();
    let ledger = output_of(&p, "robots", "ledger");
    let shard = ledger_shard(&p, &ledger, 1);
    flip_byte(&p.object_file(&shard), 200);
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "policy.yaml"]);
    r.exit(4);
    assert!(r.stdout().contains("robots: FAILS"), "{}", r.describe());
    assert!(r.stdout().contains(&format!("shard 1 `{shard}`")), "{}", r.describe());
    assert!(r.stderr().contains("error: claim `robots` fails"), "{}", r.describe());
    assert!(r.stdout().contains("pii: HOLDS"), "other claims are still decided: {}", r.describe());
}

#[test]
fn rewritten_ledger_rows_fail_their_claim_naming_the_shard() {
    let p = project();
    let ledger = output_of(&p, "pii", "ledger");
    let shard: prov_store::Digest = ledger_shard(&p, &ledger, 0).parse().unwrap();
    // Rewrite the shard's rows (a redacted document claimed untouched), a valid ledger shard,
    // and put its bytes where the recorded one was.
    let store = prov_store::Store::open(&p.path(".prov"), prov_store::Access::Shared, true).unwrap();
    let mut rows = prov_dataset::read_ledger_shard(&store, &shard).unwrap();
    let row = rows.iter_mut().find(|r| r.rule == "pii:redacted").expect("a redacted row in shard 0");
    row.rule = "pii:none".into();
    row.decision = prov_dataset::LedgerDecision::Kept;
    row.evidence = None;
    let forged = prov_dataset::write_ledger_shard(&store, rows).unwrap();
    let forged_bytes = store.read(&forged.shard.digest).unwrap();
    drop(store);
    let path = p.object_file(&shard.to_string());
    flip_byte(&path, 0);
    fs_err::write(&path, &forged_bytes).unwrap();
    // The audit reads the shard by its recorded digest and refuses the forged bytes. (Rows
    // forged under a new digest need a new ledger record, stage record and run record; the
    // shard-root check against such a record is the unit test `claims::tests`.)
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "policy.yaml"]);
    r.exit(4);
    assert!(r.stdout().contains("pii: FAILS"), "{}", r.describe());
    assert!(r.stdout().contains(&format!("shard 0 `{shard}`")), "{}", r.describe());
}

#[test]
fn a_tampered_verdict_or_dataset_shard_fails_the_claim_that_reads_it() {
    let p = project();
    let verdicts = output_of(&p, "license", "verdicts");
    let tree = record(&p, &verdicts);
    let mit = tree["entries"].as_array().unwrap().iter().find(|e| e["path"] == "MIT.json").expect("MIT verdict");
    let mit = mit["digest"].as_str().unwrap().to_owned();
    flip_byte(&p.object_file(&mit), 40);
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "policy.yaml"]);
    r.exit(4);
    assert!(r.stdout().contains("license: FAILS"), "{}", r.describe());
    assert!(r.stdout().contains("verdict `MIT.json`"), "{}", r.describe());

    let p = project();
    let dataset = output_of(&p, "decontaminate", "dataset");
    let shard = record(&p, &dataset)["shards"][2]["digest"].as_str().unwrap().to_owned();
    flip_byte(&p.object_file(&shard), 100);
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "policy.yaml"]);
    r.exit(4);
    assert!(r.stdout().contains("decontamination: FAILS"), "{}", r.describe());
    assert!(r.stdout().contains(&format!("shard 2 `{shard}`")), "{}", r.describe());
}

#[test]
fn a_policy_with_a_typo_names_its_file_line_and_field() {
    let p = project();
    p.write("typo.yaml", &POLICY.replace("max_default_share", "max_default_shares"));
    let r = p.prov(&["audit", "lockfiles/audited.lock", "--policy", "typo.yaml"]);
    r.exit(1);
    assert!(
        r.stderr().contains("typo.yaml:6:5: claims.max_default_shares: unknown field `max_default_shares`"),
        "{}",
        r.describe()
    );
    assert!(r.stderr().contains("did you mean `max_default_share`?"), "{}", r.describe());
}

/// A [`prov_audit::Rescan`] whose PII matcher is blind (it never finds anything), as a faulty
/// stage matcher would be: the PII claim must still see what the stage left, through the
/// audit's own scanner.
struct BlindPiiMatcher;

impl prov_audit::Rescan for BlindPiiMatcher {
    fn pii_matcher(&self, _config: &serde_json::Value) -> Result<prov_audit::PiiMatcher, String> {
        Ok(Box::new(|_| 0))
    }
    fn robots_decider<'s>(
        &self,
        store: &'s prov_store::Store,
        config: &serde_json::Value,
        snapshot: &prov_store::Digest,
    ) -> Result<prov_audit::RobotsDecider<'s>, String> {
        prov_audit::StageRescan.robots_decider(store, config, snapshot)
    }
}

pub(crate) type Shards<T> = Vec<Vec<T>>;

/// The run of this file's tests, and its audit policy, for [`audit_forged`].
const AUDITED: (&str, &str) = ("lockfiles/audited.lock", POLICY);

/// Audits (in process, with `rescan`) the run of `lockfile` under the audit policy `policy`
/// (its text) after a forgery that every digest and root check accepts: the filter stage
/// `stage`'s ledger rows and output documents edited by `edit` (which also sees the stage's
/// input documents), then every object written again under its new digest: ledger shards
/// (new shard roots), ledger record (new rule counts and Merkle root), dataset shards and
/// record, stage record, run record.
pub(crate) fn audit_forged(
    p: &Project,
    (lockfile, policy): (&str, &str),
    stage: &str,
    rescan: &dyn prov_audit::Rescan,
    edit: impl Fn(
        &mut Shards<prov_dataset::LedgerRow>,
        &mut Shards<prov_dataset::Document>,
        &Shards<prov_dataset::Document>,
    ),
) -> Vec<prov_audit::ClaimResult> {
    let (store, run, at, mut record) = recorded_stage(p, lockfile, stage);
    let docs_of = |digest: &prov_store::Digest| -> Shards<prov_dataset::Document> {
        let d = prov_manifest::get_typed::<prov_manifest::DatasetRecord>(&store, digest).unwrap();
        d.shards.iter().map(|s| prov_dataset::read_shard(&store, &s.digest).unwrap()).collect()
    };
    let ledger = prov_dataset::read_ledger(&store, &record.outputs["ledger"].digest).unwrap();
    let mut rows: Shards<_> =
        ledger.shards.iter().map(|s| prov_dataset::read_ledger_shard(&store, &s.digest).unwrap()).collect();
    let mut out = docs_of(&record.outputs["dataset"].digest);
    // A stage that reads no dataset (`code-packages` reads a source) has no input documents.
    let input = record.inputs.get("docs").map(docs_of).unwrap_or_default();
    edit(&mut rows, &mut out, &input);
    let ledger_shards = rows.into_iter().map(|r| prov_dataset::write_ledger_shard(&store, r).unwrap()).collect();
    let (ledger, _) = prov_dataset::write_ledger(&store, ledger_shards).unwrap();
    let mut dataset_shards = Vec::new();
    for docs in out {
        let mut w = prov_dataset::ShardWriter::new(&store).unwrap();
        for d in docs {
            w.push(d).unwrap();
        }
        dataset_shards.push(w.finish().unwrap());
    }
    let (dataset, _) = prov_dataset::write_dataset(&store, dataset_shards).unwrap();
    record.outputs.get_mut("ledger").unwrap().digest = ledger;
    record.outputs.get_mut("dataset").unwrap().digest = dataset;
    audit_with_stage(&store, &run, at, record, policy, rescan)
}

/// The store, the recorded run of `lockfile`, the position of its stage `stage` and that
/// stage's record.
pub(crate) fn recorded_stage(
    p: &Project,
    lockfile: &str,
    stage: &str,
) -> (prov_store::Store, prov_manifest::RunRecord, usize, prov_manifest::StageRecord) {
    let store = prov_store::Store::open(&p.path(".prov"), prov_store::Access::Shared, true).unwrap();
    let lockfile = fs_err::read(p.path(lockfile)).unwrap();
    let (_, run) = prov_exec::recorded_run(&store, &prov_manifest::run_id(&lockfile)).unwrap().expect("a recorded run");
    let at = run.stages.iter().position(|s| s.name.as_str() == stage).expect("the stage");
    let record = prov_manifest::get_typed::<prov_manifest::StageRecord>(&store, &run.stages[at].manifest).unwrap();
    (store, run, at, record)
}

/// Audits the run `run` with its stage `at` replaced by `record` (the run record written again
/// under its new digest).
pub(crate) fn audit_with_stage(
    store: &prov_store::Store,
    run: &prov_manifest::RunRecord,
    at: usize,
    record: prov_manifest::StageRecord,
    policy: &str,
    rescan: &dyn prov_audit::Rescan,
) -> Vec<prov_audit::ClaimResult> {
    use prov_manifest::{Record, RunRecord, put_record};
    let mut stages = run.stages.clone();
    stages[at].manifest = put_record(store, &Record::Stage(record)).unwrap();
    let forged = RunRecord::new(&run.recipe, run.lockfile, stages);
    let forged_digest = put_record(store, &Record::Run(forged)).unwrap();
    let forged = prov_manifest::LoadedRun::load(store, forged_digest).unwrap();
    let cx = prov_audit::RunContext::new(store, &forged);
    let policy = prov_audit::AuditPolicy::parse(std::path::Path::new("policy.yaml"), policy).unwrap();
    prov_audit::evaluate(&cx, &policy, &prov_audit::AuditOptions { sample: None, rescan: Some(rescan) })
}

/// Audits (in process) the run of `lockfile` under `policy` after stage `stage`'s record is
/// edited by `edit` and the run record written again: a forgery of what a stage read.
pub(crate) fn audit_with_edited_record(
    p: &Project,
    (lockfile, policy): (&str, &str),
    stage: &str,
    edit: impl Fn(&mut prov_manifest::StageRecord),
) -> Vec<prov_audit::ClaimResult> {
    let (store, run, at, mut record) = recorded_stage(p, lockfile, stage);
    edit(&mut record);
    audit_with_stage(&store, &run, at, record, policy, &prov_audit::StageRescan)
}

/// The forgery of a filter's conclusion: the first ledger row with rule `from` becomes a kept
/// row with rule `to` and `evidence`, and its input document goes back into the output, in
/// input order, as it was before the filter.
fn keep_first(
    rows: &mut Shards<prov_dataset::LedgerRow>,
    out: &mut Shards<prov_dataset::Document>,
    input: &Shards<prov_dataset::Document>,
    (from, to, evidence): (&str, &str, Option<serde_json::Value>),
) {
    keep_row(rows, out, input, |r| r.rule == from, (to, evidence));
}

/// Like [`keep_first`], for the first row that `pick` accepts.
pub(crate) fn keep_row(
    rows: &mut Shards<prov_dataset::LedgerRow>,
    out: &mut Shards<prov_dataset::Document>,
    input: &Shards<prov_dataset::Document>,
    pick: impl Fn(&prov_dataset::LedgerRow) -> bool,
    (to, evidence): (&str, Option<serde_json::Value>),
) {
    let (s, row) = rows
        .iter_mut()
        .enumerate()
        .find_map(|(s, r)| r.iter_mut().find(|r| pick(r)).map(|r| (s, r)))
        .expect("a row to forge");
    row.decision = prov_dataset::LedgerDecision::Kept;
    to.clone_into(&mut row.rule);
    row.evidence = evidence.map(|e| e.as_object().expect("an object").clone());
    let id = row.id.clone();
    let position = |d: &prov_dataset::Document| input[s].iter().position(|i| i.id == d.id).unwrap();
    let doc = input[s].iter().find(|d| d.id == id).unwrap().clone();
    out[s].retain(|d| d.id != id);
    out[s].push(doc);
    out[s].sort_by_key(position);
}

fn claim<'c>(claims: &'c [prov_audit::ClaimResult], kind: &str) -> &'c prov_audit::ClaimResult {
    claims.iter().find(|c| c.kind == kind).expect("the claim")
}

/// Issue 13, item 6: each claim re-derives its figure from the pinned inputs rather than the
/// run's own ledger, so a self-consistent forgery of one filter's conclusions fails its claim.
#[test]
fn self_consistent_forgeries_of_a_filters_conclusions_fail_their_claims() {
    use prov_audit::Outcome;
    let p = project();
    // The forging itself changes nothing the audit can see when it edits nothing.
    let untouched = audit_forged(&p, AUDITED, "robots", &prov_audit::StageRescan, |_, _, _| {});
    assert!(untouched.iter().all(|c| c.outcome == Outcome::Holds), "{untouched:#?}");

    // A document the snapshot disallows for GPTBot, kept with the rule `robots:allowed`.
    let forged = audit_forged(&p, AUDITED, "robots", &prov_audit::StageRescan, |rows, out, input| {
        keep_first(
            rows,
            out,
            input,
            ("robots:disallowed", "robots:allowed", Some(serde_json::json!({"host": "www.ohchr.org"}))),
        );
    });
    let robots = claim(&forged, "robots");
    assert_eq!(robots.outcome, Outcome::Fails, "{robots:#?}");
    assert!(
        robots
            .reasons
            .iter()
            .any(|r| r.contains("is `robots:allowed` in the ledger, but the snapshot gives `robots:disallowed`")),
        "{robots:#?}"
    );

    // A contaminated document kept as clean.
    let forged = audit_forged(&p, AUDITED, "decontaminate", &prov_audit::StageRescan, |rows, out, input| {
        keep_first(rows, out, input, ("decontaminate:contaminated", "decontaminate:clean", None));
    });
    let decontamination = claim(&forged, "decontamination");
    assert_eq!(decontamination.outcome, Outcome::Fails, "{decontamination:#?}");
    assert!(
        decontamination.reasons.iter().any(|r| r.contains("covers 1.0000 of benchmark example `q")),
        "{decontamination:#?}"
    );

    // A redacted document put back unredacted, its row saying there was nothing to redact,
    // audited with a stage matcher that cannot see: the audit's own scanner still finds it.
    let forged = audit_forged(&p, AUDITED, "pii", &BlindPiiMatcher, |rows, out, input| {
        keep_first(rows, out, input, ("pii:redacted", "pii:none", None));
    });
    let pii = claim(&forged, "pii");
    assert_eq!(pii.outcome, Outcome::Fails, "{pii:#?}");
    assert!(pii.reasons.iter().any(|r| r.contains("(1 by the audit's scanner, 0 by the stage's matcher)")), "{pii:#?}");
}
