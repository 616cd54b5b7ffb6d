//! Runs the normaliser and the classifier over the Data Provenance Initiative's real license
//! metadata: every license string of `data_summaries/*.json` must normalise or be unknown
//! with a reason, and the classes must agree with `constants/license_classes.json`.
//!
//! The data is `licenses/data-provenance-collection/` in the shared data directory
//! (`PROV_SHARED_DATA`, default `<repo root>/../shared/data`).

#![allow(clippy::print_stderr, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use prov_license::{Class, ConflictKind, Normalized, UnknownReason, check_compound, classify, dpi, normalize};
use serde_json::Value;

/// The DPI directory, or `None` (after saying so) when it is missing outside CI.
fn dpi_dir() -> Option<PathBuf> {
    let repo_root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let base = std::env::var_os("PROV_SHARED_DATA").map_or_else(|| repo_root.join("../shared/data"), PathBuf::from);
    let dir = base.join("licenses/data-provenance-collection");
    if dir.join("constants/license_classes.json").is_file() {
        return Some(dir);
    }
    let msg = format!(
        "Data Provenance Initiative data missing: {} (set PROV_SHARED_DATA to the shared data directory)",
        dir.display()
    );
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{msg}");
    eprintln!("skipping: {msg}");
    None
}

/// One data set of a summary file: its names and its license strings.
struct Dataset {
    id: String,
    name: String,
    licenses: Vec<String>,
    derived_from: Vec<String>,
}

/// Reads every summary file; skips (and reports) the template and files that are not JSON.
fn read_summaries(dir: &Path) -> Vec<Dataset> {
    let mut files: Vec<PathBuf> = fs_err::read_dir(dir.join("data_summaries"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    let (mut read, mut invalid) = (0, Vec::new());
    for path in &files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if file.starts_with('_') {
            eprintln!("skipping {file}: a template, not a data set summary");
            continue;
        }
        let text = fs_err::read_to_string(path).unwrap();
        let value: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => {
                // Upstream ships one summary that is not valid JSON; it is reported, not fatal.
                eprintln!("skipping {file}: not valid JSON upstream: {e}");
                invalid.push(file);
                continue;
            }
        };
        read += 1;
        let Value::Object(datasets) = value else { panic!("{file}: top level is not an object") };
        for (id, d) in datasets {
            let strings = |key: &str| -> Vec<String> {
                d.get(key)
                    .and_then(Value::as_array)
                    .map(|xs| xs.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                    .unwrap_or_default()
            };
            let licenses = d
                .get("Licenses")
                .and_then(Value::as_array)
                .map(|ls| ls.iter().filter_map(|l| l.get("License")?.as_str()).map(str::to_owned).collect())
                .unwrap_or_default();
            out.push(Dataset {
                name: d.get("Dataset Name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                id,
                licenses,
                derived_from: strings("Derived from Datasets"),
            });
        }
    }
    eprintln!("read {read} of {} summary files ({} data sets); invalid upstream: {invalid:?}", files.len(), out.len());
    out
}

fn describe(n: &Normalized) -> String {
    match n {
        Normalized::Spdx { expression, via } => format!("{expression}  [{via}]"),
        Normalized::Unknown { reason } => format!("unknown: {reason}"),
    }
}

#[test]
fn every_dpi_license_string_normalises_or_has_a_reason() {
    let Some(dir) = dpi_dir() else { return };
    let datasets = read_summaries(&dir);
    let mut uses: BTreeMap<&str, usize> = BTreeMap::new();
    for d in &datasets {
        for l in &d.licenses {
            *uses.entry(l.as_str()).or_default() += 1;
        }
    }
    let table: BTreeSet<&str> = dpi::strings().collect();
    let mut by_outcome: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for (&s, &n) in &uses {
        let normalized = normalize(s);
        eprintln!("{n:>5} x {s:?} -> {}", describe(&normalized).replace('\n', " | "));
        let outcome = match &normalized {
            Normalized::Spdx { .. } => "normalised".to_owned(),
            Normalized::Unknown { reason: r @ UnknownReason::NotALicense { kind, .. } } => {
                format!("unknown: {} ({})", r.code(), kind.as_str())
            }
            Normalized::Unknown { reason } => format!("unknown: {}", reason.code()),
        };
        *by_outcome.entry(outcome).or_default() += 1;
        if let Normalized::Unknown { reason: UnknownReason::Unrecognised { .. } } = normalized {
            failures.push(format!("{s:?} is not recognised by any rule"));
        }
        if !table.contains(s) {
            failures.push(format!("{s:?} is missing from the DPI table (src/dpi.rs): regenerate it"));
        }
    }
    eprintln!("{} distinct license strings in {} data sets:", uses.len(), datasets.len());
    for (outcome, n) in &by_outcome {
        eprintln!("  {n:>3} {outcome}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(uses.len() >= 45, "expected about 50 distinct strings, found {}", uses.len());
}

/// Entries of `license_classes.json` whose commercial-use category we do not share, and why.
/// The table files these under "All" (all uses); each names no license text, so we cannot
/// establish that commercial use is granted.
const COMMERCIAL_EXCEPTIONS: &[(&str, &str)] = &[
    ("All Uses-Attribution", "a DPI category for custom terms, not a license text to check"),
    ("No License", "with no license, copyright reserves all rights; the DPI files it under All (its lenient reading)"),
    ("Open Access", "an access status, not a grant of rights"),
    ("Public Domain", "a public-domain claim is jurisdiction-dependent and not checkable from the string"),
];

/// Entries whose share-alike column we do not share, and why. Both are inconsistent with the
/// table's own entries for the same licenses.
const SHARE_ALIKE_EXCEPTIONS: &[(&str, &str)] = &[
    (
        "CC BY-NC-SA",
        "the table says share-alike 0 for the versionless name but 1 for CC BY-NC-SA 3.0 and 4.0; \
         every version of BY-NC-SA is share-alike",
    ),
    (
        "CC BY-ND 4.0",
        "the table says share-alike 1, but ND has no share-alike clause and the table itself says 0 \
         for CC BY-NC-ND 3.0 / 4.0 / versionless; ND is tracked as no-derivatives",
    ),
];

/// Entries whose attribution column we do not share, and why. (The task asks for the
/// commercial and share-alike decisions; attribution is checked as well, since it matters for
/// compound data sets.)
const ATTRIBUTION_EXCEPTIONS: &[(&str, &str)] =
    &[("MIT", "the table says attribution 0 for `MIT` but 1 for `MIT License`; the MIT license requires the notice")];

/// Entries with a share-alike value in the table that we leave unclassified, because the string
/// names no license (it is [`Normalized::Unknown`]). Their commercial decision is still checked
/// (unknown means "not established"), only the share-alike column cannot be compared.
const SHARE_ALIKE_UNCLASSIFIED: &[&str] = &[
    "Academic Research Purposes Only",
    "All Uses-Attribution",
    "No License",
    "Non Commercial",
    "Open Access",
    "Public Domain",
    "Unspecified",
];

#[test]
fn classification_agrees_with_license_classes() {
    let Some(dir) = dpi_dir() else { return };
    let text = fs_err::read_to_string(dir.join("constants/license_classes.json")).unwrap();
    let table: BTreeMap<String, [String; 3]> = serde_json::from_str(&text).unwrap();
    let (mut commercial_off, mut share_alike_off, mut unclassified, mut attribution_off) =
        (BTreeSet::new(), BTreeSet::new(), BTreeSet::new(), Vec::new());
    let mut agree = 0;
    for (name, [category, attribution, share_alike]) in &table {
        let normalized = normalize(name);
        let class: Option<Class> = classify(&normalized).ok();
        let ours_commercial = class.is_some_and(|c| c.commercial);
        let theirs_commercial = category == "All";
        let ours = class.map_or_else(|| "unclassified".to_owned(), |c| c.to_string());
        let theirs = format!("{category}, attribution {attribution}, share-alike {share_alike}");
        let mut ok = true;
        if ours_commercial != theirs_commercial {
            eprintln!("commercial disagrees: {name:?}: ours {ours} ({}) / table {theirs}", describe(&normalized));
            commercial_off.insert(name.as_str());
            ok = false;
        }
        let theirs_share_alike = match share_alike.as_str() {
            "1" => Some(true),
            "0" => Some(false),
            _ => None, // "?": the table does not know either
        };
        match (class, theirs_share_alike) {
            (Some(c), Some(t)) if c.is_share_alike() != t => {
                eprintln!("share-alike disagrees: {name:?}: ours {ours} / table {theirs}");
                share_alike_off.insert(name.as_str());
                ok = false;
            }
            (None, Some(_)) => {
                eprintln!("share-alike not compared: {name:?} is {} / table {theirs}", describe(&normalized));
                unclassified.insert(name.as_str());
            }
            _ => {}
        }
        if let (Some(c), "0" | "1") = (class, attribution.as_str())
            && c.attribution != (attribution == "1")
        {
            attribution_off.push((name.as_str(), format!("{name:?}: ours {ours} / table {theirs}")));
        }
        agree += usize::from(ok);
    }
    eprintln!("{agree} of {} entries agree on commercial use and share-alike", table.len());
    eprintln!(
        "{} commercial, {} share-alike, {} attribution disagreements (documented exceptions); \
         share-alike not compared for {} unclassified entries",
        commercial_off.len(),
        share_alike_off.len(),
        attribution_off.len(),
        unclassified.len()
    );
    for (_, a) in &attribution_off {
        eprintln!("attribution disagrees: {a}");
    }
    let expected = |xs: &[(&'static str, &str)]| xs.iter().map(|(n, _)| *n).collect::<BTreeSet<_>>();
    let attribution_off: BTreeSet<&str> = attribution_off.iter().map(|(n, _)| *n).collect();
    assert_eq!(attribution_off, expected(ATTRIBUTION_EXCEPTIONS), "attribution disagreements changed");
    assert_eq!(commercial_off, expected(COMMERCIAL_EXCEPTIONS), "commercial-use disagreements changed");
    assert_eq!(share_alike_off, expected(SHARE_ALIKE_EXCEPTIONS), "share-alike disagreements changed");
    assert_eq!(unclassified, SHARE_ALIKE_UNCLASSIFIED.iter().copied().collect(), "unclassified entries changed");
}

/// The license strings of a data set as one value: all of them apply (AND); the first unknown
/// one makes the whole unknown.
fn conjunction(licenses: &[String]) -> Normalized {
    let mut parts = Vec::new();
    for l in licenses {
        match normalize(l) {
            Normalized::Spdx { expression, .. } => parts.push(format!("({expression})")),
            unknown @ Normalized::Unknown { .. } => return unknown,
        }
    }
    let joined = parts.join(" AND ");
    normalize(if joined.is_empty() { "" } else { &joined })
}

#[test]
fn dpi_lineage_compound_checks() {
    let Some(dir) = dpi_dir() else { return };
    let datasets = read_summaries(&dir);
    let mut by_name: BTreeMap<&str, &Dataset> = BTreeMap::new();
    for d in &datasets {
        by_name.entry(d.id.as_str()).or_insert(d);
    }
    for d in &datasets {
        by_name.entry(d.name.as_str()).or_insert(d);
    }
    let mut kinds: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut pairs = 0;
    let mut li_li = None;
    for d in &datasets {
        let constituents: Vec<&Dataset> =
            d.derived_from.iter().filter_map(|n| by_name.get(n.as_str()).copied()).collect();
        if constituents.is_empty() {
            continue;
        }
        pairs += constituents.len();
        let mixture = conjunction(&d.licenses);
        let parts: Vec<Normalized> = constituents.iter().map(|c| conjunction(&c.licenses)).collect();
        let conflicts = check_compound(&mixture, &parts);
        for c in &conflicts {
            *kinds.entry(c.kind.code()).or_default() += 1;
        }
        if d.id == "tsi-robust_nli-li_li" {
            li_li = Some((constituents.iter().map(|c| c.name.clone()).collect::<Vec<_>>(), conflicts));
        }
    }
    eprintln!("{pairs} resolved lineage links; conflicts by kind: {kinds:?}");
    // Tasksource's robust_nli-li_li is declared OANC but derives from SNLI (CC BY-SA 4.0).
    let (names, conflicts) = li_li.expect("tsi-robust_nli-li_li is in the DPI summaries");
    let snli = names.iter().position(|n| n == "snli").expect("derived from snli");
    assert!(
        conflicts.iter().any(|c| c.constituent == Some(snli) && c.kind == ConflictKind::ShareAlike),
        "{conflicts:?}"
    );
}

/// The collection's own LICENSE file reads as the Apache License 2.0 it is.
#[test]
fn the_collection_s_license_file_is_apache_2() {
    let Some(dir) = dpi_dir() else { return };
    let text = fs_err::read_to_string(dir.join("LICENSE")).unwrap();
    let found = prov_license::detect::LicenseTexts::load().unwrap().matches(&text);
    assert_eq!(found.licenses, ["Apache-2.0"], "{found:?}");
    assert!(found.nearest.1 > 0.99, "{found:?}");
}
