//! Runs Presidio's IBAN recognizer cases against the strict PII mode: every valid case must be
//! found with Presidio's expected spans, no invalid one may be found.
//!
//! The cases come from `pii/presidio-iban-cases.json` in the shared data directory
//! (`PROV_SHARED_DATA`, default `<repo root>/../shared/data`): `{"valid": [IBAN…],
//! "invalid": [IBAN…], "all": [[text, expected count, [[start, end]…]]…]}`, offsets in
//! characters (MIT, Presidio contributors).

#![allow(clippy::print_stderr, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;

use prov_pii::{PiiKind, Redactor, StrictOptions, is_valid_iban};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Cases {
    valid: Vec<String>,
    invalid: Vec<String>,
    all: Vec<Case>,
}

/// `[text, expected count, [[start, end]…]]`, offsets in characters.
#[derive(Debug, Deserialize)]
struct Case(String, usize, Vec<(usize, usize)>);

/// Where the cases are, or `None` (after saying so) when they are missing outside CI.
fn cases_path() -> Option<PathBuf> {
    let repo_root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let base = std::env::var_os("PROV_SHARED_DATA").map_or_else(|| repo_root.join("../shared/data"), PathBuf::from);
    let path = base.join("pii/presidio-iban-cases.json");
    if path.is_file() {
        return Some(path);
    }
    let msg =
        format!("Presidio IBAN cases missing: {} (set PROV_SHARED_DATA to the shared data directory)", path.display());
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{msg}");
    eprintln!("skipping: {msg}");
    None
}

/// The IBAN spans the strict mode finds in `text`, in characters.
fn iban_spans(text: &str) -> Vec<(usize, usize)> {
    let chars = |byte: usize| text[..byte].chars().count();
    Redactor::strict(StrictOptions::default())
        .redact(text)
        .matches
        .iter()
        .filter(|m| m.kind == PiiKind::Iban)
        .map(|m| (chars(m.start), chars(m.end)))
        .collect()
}

#[test]
fn presidio_iban_cases() {
    let Some(path) = cases_path() else { return };
    let cases: Cases = serde_json::from_str(&fs_err::read_to_string(&path).unwrap()).unwrap();
    assert_eq!((cases.valid.len(), cases.invalid.len(), cases.all.len()), (156, 173, 330));

    let mut failures = Vec::new();
    // `valid` holds texts with at least one IBAN (most are an IBAN alone, a few sentences).
    for text in &cases.valid {
        let spans = iban_spans(text);
        if spans.is_empty() {
            failures.push(format!("valid {text:?}: no IBAN found"));
        }
        for (start, end) in spans {
            let found: String = text.chars().skip(start).take(end - start).collect();
            let compact: String = found.chars().filter(|c| !matches!(c, ' ' | '-')).collect();
            if !is_valid_iban(&compact) {
                failures.push(format!("valid {text:?}: is_valid_iban({compact:?}) is false"));
            }
        }
    }
    for iban in &cases.invalid {
        if !iban_spans(iban).is_empty() {
            failures.push(format!("invalid {iban:?}: found {:?}", iban_spans(iban)));
        }
    }
    let (mut found, mut rejected) = (0, 0);
    for Case(text, count, spans) in &cases.all {
        assert_eq!(*count, spans.len(), "{text:?}: the count and the spans agree");
        let got = iban_spans(text);
        if &got == spans {
            if spans.is_empty() {
                rejected += 1;
            } else {
                found += 1;
            }
        } else {
            failures.push(format!("{text:?}: expected {spans:?}, found {got:?}"));
        }
    }
    eprintln!("presidio IBAN cases: {found} with IBANs found at the expected spans, {rejected} without IBANs rejected");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
