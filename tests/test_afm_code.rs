//! AFM's license-filtered code (§3.1.3) end to end, on 19 real packages from crates.io, npm
//! and PyPI (`scripts/make-afm-data.py`, pinned by the registries' hashes), with their real
//! metadata and license files.
//!
//! The reference is `tests/python/code_license_reference.py`, written from the book's
//! specification ("The AFM recipe", code from the package registries) without the Rust code:
//! it reads the metadata, chooses the license files, builds and evaluates each package's
//! expression with PyPI `license-expression` (an independent SPDX library) and derives every
//! ledger row. It takes one thing from the stage: what each license file's text matches
//! (matching against the SPDX texts is `prov-license`'s detection, tested on its own).
//! The table of expected verdicts below is a transcription: each was checked by reading the
//! package's metadata and license files.

use serde_json::{Value, json};

use crate::common::{Project, copy_dir, ledger_rows, repo_root, venv_python};

const CODE: &str = "recipes/data/mini-afm/code";

/// Whether `scripts/make-afm-data.py` has fetched the packages (fails in CI when not).
fn packages_fetched() -> bool {
    if repo_root().join(CODE).join("itoa-1.0.11/Cargo.toml").is_file() {
        return true;
    }
    let msg = format!("{CODE} missing: run `scripts/setup` (it runs scripts/make-afm-data.py)");
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{msg}");
    eprintln!("skipping: {msg}");
    false
}

/// A project with the packages under `recipes/data/code` and a recipe running `code-packages`
/// under `policy`.
fn project(policy: &str) -> Project {
    let p = Project::new();
    copy_dir(&repo_root().join(CODE), &p.path("recipes/data/code"));
    p.write(
        "recipes/code.yaml",
        &format!(
            "schema: 1\nname: code\nseed: 1\nsources:\n  packages:\n    path: data/code\nstages:\n  code:\n    \
             kind: code-packages\n    inputs: {{packages: packages}}\n    params: {{policy: {policy}}}\n"
        ),
    );
    p
}

fn stage(run: &[Value], name: &str) -> Value {
    run.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == name).unwrap_or_else(|| panic!("{run:?}")).clone()
}

fn record(p: &Project, run: &[Value], name: &str) -> Value {
    p.json(&["show", stage(run, name)["data"]["manifest"].as_str().unwrap()])[0]["data"]["record"].clone()
}

/// The packages the AFM list allows, and the licenses that exclude each other package (the
/// transcription the module documentation describes).
const ALLOWED: [&str; 9] = [
    "crates.io/adler@1.0.2",
    "crates.io/fuchsia-cprng@0.1.1",
    "crates.io/itoa@1.0.11",
    "crates.io/libloading@0.8.5",
    "crates.io/memchr@2.7.4",
    "crates.io/ryu@1.0.18",
    "crates.io/tiny-keccak@2.0.2",
    "pypi/six@1.16.0",
    "pypi/text-unidecode@1.3",
];
const EXCLUDED: [(&str, &str, &[&str]); 10] = [
    ("crates.io/adler32@1.2.0", "code:denied", &["Zlib", "LicenseRef-unrecognised-LICENSE"]),
    ("crates.io/option-ext@0.2.0", "code:denied", &["MPL-2.0"]),
    ("crates.io/unicode-ident@1.0.13", "code:denied", &["Unicode-DFS-2016", "Unicode-3.0"]),
    ("npm/argparse@2.0.1", "code:denied", &["Python-2.0", "LicenseRef-unrecognised-LICENSE"]),
    ("npm/ffmpeg-static@5.2.0", "code:denied", &["GPL-3.0-or-later"]),
    ("npm/left-pad@1.3.0", "code:denied", &["WTFPL"]),
    ("npm/pako@2.1.0", "code:denied", &["Zlib"]),
    // ISC declared, but its LICENSE adds terms to the ISC text that match no license.
    ("npm/sax@1.2.4", "code:denied", &["LicenseRef-unrecognised-LICENSE"]),
    ("pypi/Unidecode@1.3.8", "code:denied", &["GPL-2.0-only", "GPL-2.0-or-later"]),
    ("pypi/python-dateutil@2.9.0.post0", "code:denied", &["LicenseRef-unrecognised-LICENSE"]),
];

/// Every package's verdict and every ledger row equal the independent reference's, and the
/// verdicts are the transcribed table's.
#[test]
fn code_packages_decide_as_the_independent_reference() {
    if !packages_fetched() {
        return;
    }
    let Some(python) = venv_python() else { return };
    let p = project("afm-code");
    let run = p.json(&["run", "recipes/code.yaml"]);
    let rec = record(&p, &run, "code");
    let packages = rec["stats"]["packages"].clone();
    let mut verdicts: Vec<(String, String, Vec<String>)> = packages
        .as_object()
        .unwrap()
        .values()
        .map(|v| {
            let verdict = &v["verdict"];
            let excluded =
                verdict["excluded_by"].as_array().unwrap().iter().map(|e| e[0].as_str().unwrap().to_owned()).collect();
            (v["package"].as_str().unwrap().to_owned(), verdict["rule"].as_str().unwrap().to_owned(), excluded)
        })
        .collect();
    verdicts.sort();
    let mut expected: Vec<(String, String, Vec<String>)> = ALLOWED
        .iter()
        .map(|p| ((*p).to_owned(), "code:allowed".to_owned(), vec![]))
        .chain(
            EXCLUDED
                .iter()
                .map(|(p, r, e)| ((*p).to_owned(), (*r).to_owned(), e.iter().map(|s| (*s).to_owned()).collect())),
        )
        .collect();
    expected.sort();
    assert_eq!(verdicts, expected);

    let rows = ledger_rows(&p, stage(&run, "code")["data"]["outputs"]["ledger"].as_str().unwrap());
    let kept = rows.iter().filter(|r| r.decision == prov_dataset::LedgerDecision::Kept).count();
    assert!(kept > 100 && rows.len() > 300, "{kept} of {} rows kept", rows.len());
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({"id": r.id, "decision": r.decision.as_str(), "rule": r.rule,
                   "evidence": r.evidence.clone().map_or(Value::Null, Value::Object)})
        })
        .collect();
    let stage_json = json!({"config": rec["config"], "packages": packages, "rows": rows});
    let file = p.write("stage.json", &stage_json.to_string());
    let script = repo_root().join("tests/python/code_license_reference.py");
    let policy = repo_root().join("recipes/license-policies/afm-code.yaml");
    let packages_dir = p.path("recipes/data/code");
    let out = prov_testkit::pipe(
        &python,
        &[
            script.to_str().unwrap(),
            "--packages",
            packages_dir.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
            "--stage",
            file.to_str().unwrap(),
        ],
        b"",
    );
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("19 packages") && out.contains("agree"), "{out}");
    eprintln!("{}", out.trim());
}

/// `prov explain code-packages` names each license that excludes a package, and the file
/// matches behind them; a directory that is not a package is exit 1 with a hint.
#[test]
fn explain_names_the_license_that_excludes_a_package() {
    if !packages_fetched() {
        return;
    }
    let p = project("afm-code");
    let dir = "recipes/data/code/unicode-ident-1.0.13";
    let r = p.prov(&["explain", "code-packages", "--package", dir, "--policy", "afm-code"]);
    let out = r.success().stdout();
    assert!(out.contains("package: crates.io/unicode-ident@1.0.13"), "{out}");
    assert!(out.contains("license file LICENSE-APACHE: the text of Apache-2.0 (declared; best match Pixar)"), "{out}");
    assert!(out.contains("license file LICENSE-UNICODE: the text of Unicode-3.0 (not declared: added)"), "{out}");
    assert!(out.contains("code:denied: removed under policy `afm-code 1`"), "{out}");
    assert!(out.contains("excluded by Unicode-DFS-2016: `Unicode-DFS-2016` is not in the allow list"), "{out}");
    let j = p.json(&["explain", "code-packages", "--package", dir, "--policy", "afm-code"]);
    assert_eq!(j[0]["data"]["verdict"]["rule"], "code:denied");
    // The permissive preset allows Zlib, which the AFM list does not.
    let r =
        p.prov(&["explain", "code-packages", "--package", "recipes/data/code/pako-2.1.0", "--policy", "permissive"]);
    assert!(r.success().stdout().contains("code:allowed: kept under policy `permissive 1`"), "{}", r.describe());
    let r = p.prov(&["explain", "code-packages", "--package", "recipes", "--policy", "afm-code"]);
    assert!(r.exit(1).stderr().contains("holds none of Cargo.toml, PKG-INFO, package.json"), "{}", r.describe());
    let r = p.prov(&["explain", "code-packages", "--package", dir, "--policy", "anything-goes"]);
    assert!(r.exit(1).stderr().contains("known: afm-code, permissive"), "{}", r.describe());
}

/// Well-formed packages that try to pass copyleft code as allowed: a package that declares
/// MIT but ships the GPL's text is judged by both and denied; two directories of one package
/// (whose files would share ids) and a loose file among the packages fail the stage.
#[test]
fn a_license_text_the_metadata_hides_excludes_the_package() {
    if !packages_fetched() {
        return;
    }
    let p = project("afm-code");
    let gpl = fs_err::read_to_string(p.path("recipes/data/code/ffmpeg-static-5.2.0/LICENSE")).unwrap();
    p.write("recipes/data/code/six-1.16.0/COPYING", &gpl);
    let run = p.json(&["run", "recipes/code.yaml"]);
    let rec = record(&p, &run, "code");
    let six = &rec["stats"]["packages"]["six-1.16.0"]["verdict"];
    assert_eq!(six["rule"], "code:denied", "{six}");
    assert_eq!(six["license"], "MIT AND GPL-3.0-only AND GPL-3.0-or-later", "{six}");
    let rows = ledger_rows(&p, stage(&run, "code")["data"]["outputs"]["ledger"].as_str().unwrap());
    let six_py = rows.iter().find(|r| r.id == "pypi/six@1.16.0/six.py").expect("six.py's row");
    assert_eq!((six_py.decision, six_py.rule.as_str()), (prov_dataset::LedgerDecision::Removed, "code:denied"));
    assert_eq!(six_py.evidence.as_ref().unwrap()["excluded_by"], json!(["GPL-3.0-only", "GPL-3.0-or-later"]));

    // A bundled dependency under its own license is not the package's code; a second metadata
    // file's declaration binds the package too.
    let gpl_code = fs_err::read_to_string(p.path("recipes/data/code/ffmpeg-static-5.2.0/index.js")).unwrap();
    p.write("recipes/data/code/itoa-1.0.11/vendor/gpl/COPYING", &gpl);
    p.write("recipes/data/code/itoa-1.0.11/vendor/gpl/lib.rs", &gpl_code);
    p.write(
        "recipes/data/code/tiny-keccak-2.0.2/package.json",
        r#"{"name":"tiny-keccak","version":"2.0.2","license":"GPL-3.0-only"}"#,
    );
    let run = p.json(&["run", "recipes/code.yaml"]);
    let rows = ledger_rows(&p, stage(&run, "code")["data"]["outputs"]["ledger"].as_str().unwrap());
    let vendored = rows.iter().find(|r| r.id == "crates.io/itoa@1.0.11/vendor/gpl/lib.rs").expect("the vendored file");
    assert_eq!((vendored.decision, vendored.rule.as_str()), (prov_dataset::LedgerDecision::Removed, "code:vendored"));
    let keccak = &record(&p, &run, "code")["stats"]["packages"]["tiny-keccak-2.0.2"];
    assert_eq!(
        (&keccak["package"], &keccak["verdict"]["rule"]),
        (&json!("crates.io/tiny-keccak@2.0.2"), &json!("code:denied"))
    );
    assert_eq!(keccak["verdict"]["declared"], "(CC0-1.0) AND (GPL-3.0-only)", "{keccak}");
    for f in ["itoa-1.0.11/vendor", "tiny-keccak-2.0.2/package.json"] {
        let path = p.path(&format!("recipes/data/code/{f}"));
        if path.is_dir() { fs_err::remove_dir_all(path).unwrap() } else { fs_err::remove_file(path).unwrap() }
    }

    copy_dir(&p.path("recipes/data/code/itoa-1.0.11"), &p.path("recipes/data/code/itoa-copy"));
    let r = p.prov(&["run", "recipes/code.yaml"]);
    assert!(r.exit(1).stderr().contains("both hold package `crates.io/itoa@1.0.11`"), "{}", r.describe());
    fs_err::remove_dir_all(p.path("recipes/data/code/itoa-copy")).unwrap();
    p.write("recipes/data/code/evil.rs", "fn main() {}\n");
    let r = p.prov(&["run", "recipes/code.yaml"]);
    assert!(r.exit(1).stderr().contains("`evil.rs` is not in a package directory"), "{}", r.describe());
}

const CODE_POLICY: &str = "schema: 1\nname: afm\nclaims:\n  - kind: code-licenses\n";

fn code_claim(claims: &[prov_audit::ClaimResult]) -> &prov_audit::ClaimResult {
    claims.iter().find(|c| c.kind == "code-licenses").expect("the claim")
}

/// The `code-licenses` claim holds on an honest run, fails a run under the wider permissive
/// policy, and fails well-formed forgeries that every digest and Merkle root check accepts:
/// a denied package's file put back as kept, and an allowed file's text swapped for GPL code.
#[test]
fn the_code_licenses_claim_judges_again_and_fails_forgeries() {
    if !packages_fetched() {
        return;
    }
    let p = project("afm-code");
    p.prov(&["run", "recipes/code.yaml"]).success();
    p.write("policy.yaml", CODE_POLICY);
    let r = p.prov(&["audit", "lockfiles/code.lock", "--policy", "policy.yaml"]);
    let out = r.success().stdout();
    assert!(out.contains("code-licenses: HOLDS") && out.contains("19 packages, 9 allowed"), "{out}");

    let gpl_source = fs_err::read_to_string(p.path("recipes/data/code/ffmpeg-static-5.2.0/index.js")).unwrap();
    let option_ext = fs_err::read_to_string(p.path("recipes/data/code/option-ext-0.2.0/src/lib.rs")).unwrap();
    let lockfile = ("lockfiles/code.lock", CODE_POLICY);
    // A denied package's file kept, its row rewritten as allowed.
    let claims =
        crate::test_audit::audit_forged(&p, lockfile, "code", &prov_audit::StageRescan, |rows, out, _input| {
            let id = "crates.io/option-ext@0.2.0/src/lib.rs";
            let (s, row) = rows
                .iter_mut()
                .enumerate()
                .find_map(|(s, r)| r.iter_mut().find(|r| r.id == id).map(|r| (s, r)))
                .expect("option-ext's row");
            row.decision = prov_dataset::LedgerDecision::Kept;
            row.rule = "code:allowed".into();
            row.evidence =
                Some(json!({"package": "crates.io/option-ext@0.2.0", "license": "MIT"}).as_object().unwrap().clone());
            out[s].push(prov_dataset::Document::new(id, option_ext.clone()));
        });
    let c = code_claim(&claims);
    assert_eq!(c.outcome, prov_audit::Outcome::Fails, "{c:?}");
    assert!(
        c.reasons.iter().any(|r| r.contains("`crates.io/option-ext@0.2.0`, which the policy does not allow")),
        "{c:?}"
    );
    // An allowed file's text swapped for GPL code, under the allowed file's id.
    let claims =
        crate::test_audit::audit_forged(&p, lockfile, "code", &prov_audit::StageRescan, |_rows, out, _input| {
            let doc = out.iter_mut().flatten().find(|d| d.id == "crates.io/itoa@1.0.11/src/lib.rs").expect("itoa");
            doc.text.clone_from(&gpl_source);
        });
    let c = code_claim(&claims);
    assert!(c.reasons.iter().any(|r| r.contains("the text is not the bytes of `src/lib.rs`")), "{c:?}");

    // The same packages under the permissive preset keep Zlib and Python-2.0 code.
    let p = project("permissive");
    p.prov(&["run", "recipes/code.yaml"]).success();
    p.write("policy.yaml", CODE_POLICY);
    let r = p.prov(&["audit", "lockfiles/code.lock", "--policy", "policy.yaml"]);
    let out = r.exit(4).stdout();
    assert!(out.contains("ran under policy `permissive`, not the claimed `afm-code`"), "{out}");
    assert!(out.contains("`npm/pako@2.1.0`, which the policy does not allow"), "{out}");
    assert!(out.contains("kept documents are not allowed code"), "{out}");
}
