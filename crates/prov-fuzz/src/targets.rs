//! The readers fuzzed, each with its seed corpus: the repository's own inputs of that kind
//! and the files of `crates/prov-fuzz/corpus/`.

use std::path::Path;

use prov_exec::Registry;
use prov_manifest::Record;
use prov_store::{ObjectKind, Store};

use crate::{Target, files, repo_root};

/// The stage kinds a lockfile is checked against: the executor's and the data kinds (the
/// training kinds link libtorch, which a fuzzing process does without).
fn registry() -> Registry {
    let mut r = Registry::with_builtins();
    prov_prep::register(&mut r);
    prov_robots::register(&mut r);
    prov_pii::register(&mut r);
    prov_dedup::register(&mut r);
    prov_heuristics::register(&mut r);
    prov_terms::register(&mut r);
    prov_code::register(&mut r);
    prov_palette::register(&mut r);
    prov_ngram::register(&mut r);
    prov_langid::register(&mut r);
    prov_quality::register(&mut r);
    prov_parallel::register(&mut r);
    prov_toxicity::register(&mut r);
    r
}

/// Every target, in a fixed order.
pub fn all() -> Vec<Target> {
    vec![recipe(), policy(), lockfile(), record(), robots(), spdx(), proof(), parquet(), signed()]
}

/// Returns the target named `name`.
pub fn named(name: &str) -> Option<Target> {
    all().into_iter().find(|t| t.name == name)
}

fn corpus_dir(kind: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(kind)
}

/// Recipes, parsed and then locked (every stage kind's parameter check runs) in a project
/// that holds none of the sources they name.
fn recipe() -> Target {
    let root = repo_root();
    let mut corpus = files(&root.join("recipes"), &[".yaml"]);
    corpus.extend(files(&root.join("tests/fixtures/recipes/invalid"), &[".yaml"]));
    let registry = registry();
    Target {
        name: "recipe",
        corpus,
        run: Box::new(move |input| {
            let text = String::from_utf8_lossy(input);
            let path = Path::new("/nonexistent/recipes/fuzz.yaml");
            if prov_manifest::Recipe::parse(path, &text).is_ok() {
                let _ = prov_exec::lock_text(&registry, path, &text, Path::new("/nonexistent"));
            }
        }),
    }
}

/// Audit policies and license policies.
fn policy() -> Target {
    let root = repo_root();
    let mut corpus = files(&root.join("recipes/policies"), &[".yaml"]);
    corpus.push(b"schema: 1\nname: p\nallow: [MIT, Apache-2.0]\nallow_with:\n  - {license: GPL-2.0-only, addition: Classpath-exception-2.0}\nambiguous: deny\n".to_vec());
    Target {
        name: "policy",
        corpus,
        run: Box::new(|input| {
            let text = String::from_utf8_lossy(input);
            let path = Path::new("policy.yaml");
            let _ = prov_audit::AuditPolicy::parse(path, &text);
            let _ = prov_license::parse_policy(path, &text);
        }),
    }
}

/// Lockfiles, decoded and checked against the stage kinds as before an execution.
fn lockfile() -> Target {
    let corpus = files(&repo_root().join("lockfiles"), &[".lock"]);
    let registry = registry();
    Target {
        name: "lockfile",
        corpus,
        run: Box::new(move |input| {
            if let Ok(Record::Lockfile(l)) = Record::from_bytes(input) {
                let _ = prov_exec::check_lockfile(&registry, &l);
            }
        }),
    }
}

/// Records of every kind, from the committed runs.
fn record() -> Target {
    let root = repo_root();
    let mut corpus = files(&root.join("manifests/quickstart"), &[".json"]);
    corpus.extend(files(&root.join("manifests/mini-apertus"), &[".json"]).into_iter().filter(|r| r.len() < 64 << 10));
    Target {
        name: "record",
        corpus,
        run: Box::new(|input| {
            if let Ok(r) = Record::from_bytes(input) {
                let _ = r.references();
                let _ = r.to_bytes();
            }
        }),
    }
}

/// robots.txt bodies, read both ways and asked about a few agents and paths; the compiled
/// rule tables (for every token, and for two crawlers only) must answer as the explaining
/// path does.
fn robots() -> Target {
    let mut corpus = files(&corpus_dir("robots"), &[".txt"]);
    // The main job's snapshot, when set-up has fetched it: real files of real sites.
    let snapshot = repo_root().join("recipes/data/mini-apertus/robots");
    corpus.extend(files(&snapshot, &[""]).into_iter().take(200));
    Target {
        name: "robots",
        corpus,
        run: Box::new(|input| {
            use prov_robots::{CheckOptions, Crawlers, KeyReading, RequestPath, RobotsTxt};
            let crawlers = std::sync::Arc::new(Crawlers::new(["GPTBot", "CCBot/2.0"]));
            for reading in [KeyReading::Rfc9309, KeyReading::GoogleTypos] {
                let robots = RobotsTxt::parse_with(input, reading);
                let for_two = RobotsTxt::parse_for(input, reading, &crawlers);
                for (agent, url) in [("GPTBot", "/private/x?y=1"), ("*", "/"), ("CCBot/2.0", "/%E3%83%84/a.gif")] {
                    let allowed = robots.check(agent, url).allowed;
                    let path = RequestPath::new(url);
                    for compiled in [&robots, &for_two] {
                        let fast = compiled.rules_for(agent).allows(&path, CheckOptions::default());
                        assert_eq!(fast, allowed, "compiled rules and the explaining path differ: {agent} {url}");
                    }
                }
                let _ = robots.looks_unparseable();
            }
        }),
    }
}

/// SPDX license expressions, and the normalisation of declared license strings.
fn spdx() -> Target {
    let text = files(&corpus_dir("spdx"), &[".txt"]).concat();
    let corpus = text.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(<[u8]>::to_vec).collect();
    Target {
        name: "spdx",
        corpus,
        run: Box::new(|input| {
            let text = String::from_utf8_lossy(input);
            let _ = prov_license::LicenseExpression::parse(&text);
            let _ = prov_license::LicenseExpression::parse_slash_as_or(&text);
            let _ = prov_license::normalize(&text);
        }),
    }
}

/// Document proofs, checked without a pin and with the stage the chain must reach.
fn proof() -> Target {
    Target {
        name: "proof",
        corpus: files(&corpus_dir("proof"), &[".proof"]),
        run: Box::new(|input| {
            let _ = prov_audit::verify(input, &prov_audit::Pins::default());
            let until = prov_audit::Pins { until: Some("tokens".into()), ..prov_audit::Pins::default() };
            let _ = prov_audit::verify(input, &until);
        }),
    }
}

/// Parquet dataset and ledger shards, stored (under their own digest, as an attacker's
/// shard would be) and read back as documents and as ledger rows. The store lives in
/// `/dev/shm` where there is one: each input is written and synced.
fn parquet() -> Target {
    let base = if Path::new("/dev/shm").is_dir() { Some("/dev/shm") } else { None };
    let dir = match base {
        Some(b) => tempfile::tempdir_in(b),
        None => tempfile::tempdir(),
    }
    .expect("a temporary directory");
    let store = Store::init(&dir.path().join(".prov")).expect("a store in a temporary directory");
    let store = std::sync::Mutex::new((dir, store));
    Target {
        name: "parquet",
        corpus: files(&corpus_dir("shard"), &[".parquet"]),
        run: Box::new(move |input| {
            let guard = store.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let (_, store) = &*guard;
            let Ok(digest) = store.put_bytes(ObjectKind::Shard, input) else { return };
            let _ = prov_dataset::read_shard(store, &digest);
            let _ = prov_dataset::read_ledger_shard(store, &digest);
            let _ = prov_dataset::shard_rows(store, &digest);
            let _ = store.remove_objects(&[digest]);
        }),
    }
}

/// What the attestation readers take from outside: key files (PEM and OpenSSH, public and
/// private), DSSE envelopes and the statements in them, model signatures (Sigstore bundles)
/// and verdict signatures. Each input is read as every one of them.
fn signed() -> Target {
    let key = prov_attest::SigningKey::generate(prov_attest::KeyAlgorithm::EcdsaP256).public();
    Target {
        name: "signed",
        corpus: files(&corpus_dir("signed"), &[".json", ".pub", ".key"]),
        run: Box::new(move |input| {
            let text = String::from_utf8_lossy(input);
            let path = Path::new("fuzz.key");
            let _ = prov_attest::PublicKey::parse(path, &text);
            let _ = prov_attest::SigningKey::parse(path, &text);
            if let Ok(envelope) = prov_attest::Envelope::parse(input) {
                let _ = envelope.verify(std::slice::from_ref(&key));
                if let Some(payload) = envelope.unverified_payload()
                    && let Ok(statement) = prov_attest::Statement::parse(&payload)
                {
                    let _ = prov_attest::read_provenance(&statement);
                }
            }
            let _ = prov_attest::Statement::parse(input);
            let _ = prov_attest::is_sigstore_bundle(input);
            let _ = prov_attest::verify_model_signature(input, std::slice::from_ref(&key), None);
            let _ = prov_attest::check_verdict_signature("licenses/MIT.json", b"{}", input, std::slice::from_ref(&key));
        }),
    }
}
