//! Runs google/robotstxt-spec-test against [`prov_robots`]: every `STANDARD` case must
//! pass; the `GOOGLE_SPECIFIC` ones (Google's extensions beyond RFC 9309) are reported.
//!
//! The cases come from `robots/google-robotstxt-spec-test.json` in the shared data directory
//! (`PROV_SHARED_DATA`, default `<repo root>/../shared/data`): records
//! `{file, test, robotstxt_b64, url, useragent, expected, type}`.

#![allow(clippy::print_stderr, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;

use base64::Engine as _;
use prov_robots::{CheckOptions, RobotsTxt};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    file: String,
    test: u32,
    robotstxt_b64: String,
    url: String,
    useragent: String,
    expected: Expected,
    #[serde(rename = "type")]
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
enum Expected {
    Allowed,
    Disallowed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
enum Kind {
    Standard,
    GoogleSpecific,
}

/// Where the suite is, or `None` (after saying so) when it is missing outside CI.
fn suite_path() -> Option<PathBuf> {
    let repo_root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let base = std::env::var_os("PROV_SHARED_DATA").map_or_else(|| repo_root.join("../shared/data"), PathBuf::from);
    let path = base.join("robots/google-robotstxt-spec-test.json");
    if path.is_file() {
        return Some(path);
    }
    let msg = format!(
        "robots.txt conformance suite missing: {} (set PROV_SHARED_DATA to the shared data directory)",
        path.display()
    );
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{msg}");
    eprintln!("skipping: {msg}");
    None
}

/// Runs one case; returns a description of the failure, if it fails.
fn run(case: &Case) -> Option<String> {
    let body = base64::engine::general_purpose::STANDARD.decode(&case.robotstxt_b64).expect("robotstxt_b64 is base64");
    let robots = RobotsTxt::parse(&body);
    // The suite treats `/robots.txt` like any other path (three STANDARD cases disallow it).
    let options = CheckOptions { robots_txt_implicitly_allowed: false };
    let decision = robots.check_with(&case.useragent, &case.url, options);
    let expected = case.expected == Expected::Allowed;
    (decision.allowed != expected).then(|| {
        format!(
            "{} test {}: agent {:?}, url {:?}: expected {:?}, got allowed={} ({:?}, rule {:?})\n    robots.txt: {:?}",
            case.file,
            case.test,
            case.useragent,
            case.url,
            case.expected,
            decision.allowed,
            decision.basis,
            decision.rule,
            String::from_utf8_lossy(&body),
        )
    })
}

#[test]
fn google_robotstxt_spec_test() {
    let Some(path) = suite_path() else { return };
    let text = fs_err::read_to_string(&path).unwrap();
    let cases: Vec<Case> = serde_json::from_str(&text).expect("the suite is a JSON array of cases");
    let (standard, google): (Vec<&Case>, Vec<&Case>) = cases.iter().partition(|c| c.kind == Kind::Standard);
    assert_eq!(standard.len(), 378, "the suite has 378 STANDARD cases");

    let google_failures: Vec<String> = google.iter().filter_map(|c| run(c)).collect();
    eprintln!("GOOGLE_SPECIFIC: {} passed, {} failed", google.len() - google_failures.len(), google_failures.len());
    for f in &google_failures {
        eprintln!("  GOOGLE_SPECIFIC failure (not an error): {f}");
    }

    let failures: Vec<String> = standard.iter().filter_map(|c| run(c)).collect();
    eprintln!("STANDARD: {} passed, {} failed", standard.len() - failures.len(), failures.len());
    assert!(
        failures.is_empty(),
        "{} of {} STANDARD cases fail:\n{}",
        failures.len(),
        standard.len(),
        failures.join("\n")
    );
}

/// With the RFC default (`/robots.txt` implicitly allowed), the only STANDARD cases that
/// change are those for `/robots.txt` itself.
#[test]
fn the_rfc_default_differs_only_on_robots_txt() {
    let Some(path) = suite_path() else { return };
    let cases: Vec<Case> = serde_json::from_str(&fs_err::read_to_string(&path).unwrap()).unwrap();
    for case in cases.iter().filter(|c| c.kind == Kind::Standard) {
        let body = base64::engine::general_purpose::STANDARD.decode(&case.robotstxt_b64).unwrap();
        let robots = RobotsTxt::parse(&body);
        let rfc = robots.check(&case.useragent, &case.url);
        let suite =
            robots.check_with(&case.useragent, &case.url, CheckOptions { robots_txt_implicitly_allowed: false });
        if rfc.allowed != suite.allowed {
            assert!(case.url.ends_with("/robots.txt"), "{} test {}: {}", case.file, case.test, case.url);
        }
    }
}
