//! The audit's PII scanner against the reference itself: Python's `re.search` with the
//! released Apertus patterns (the shared `pii/apertus-pii-regexes.json`, the same bytes as the
//! stage's embedded copy). For every line of every document of the shared PII bench corpus
//! (`pii/bench-corpus.jsonl.gz`: 9,099 Debian copyright files, changelogs and manual pages), of
//! the same document after Python's Apertus redaction, and of a list of tricky lines, the set
//! of kinds whose pattern matches somewhere in the line must equal the kinds the scanner finds.
//!
//! Needs the project's Python and the shared data: fails under `CI=true` without them, skips
//! with a message elsewhere.

#![allow(clippy::print_stderr, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use prov_audit::pii_scan::{ScanKind, scan};

const SCRIPT: &str = r#"
import gzip, json, re, sys
spec = json.load(open(sys.argv[1]))
order = spec["order"]
patterns = {k: re.compile(spec["patterns"][k]) for k in order}

def redact(text):
    for k in order:
        found = {m.group(0) for m in patterns[k].finditer(text)}
        for s in sorted(found, key=lambda s: (-len(s.encode("utf-8")), s.encode("utf-8"))):
            text = text.replace(s, spec["markers"][k])
    return text

def bits(text):
    return "".join(str(sum(1 << i for i, k in enumerate(order) if patterns[k].search(line))) for line in text.split("\n"))

out = []
for line in gzip.open(sys.argv[2], "rt", encoding="utf-8"):
    text = json.loads(line)["text"]
    redacted = redact(text)
    out.append({"raw": bits(text), "redacted": redacted, "redacted_bits": bits(redacted)})
tricky = json.loads(sys.stdin.read())
out.append({"tricky": [bits(t) for t in tricky]})
json.dump({"order": order, "docs": out}, sys.stdout)
"#;

/// Lines near the patterns' edges.
const TRICKY: &[&str] = &[
    "jane@example.org",
    "éfoo@example.org",
    "\u{301}foo@example.org",
    "_foo@example.org",
    "-foo@example.org",
    " -foo@example.org",
    "a.-b@x.y",
    "a..b@x.y",
    ".a@x.y",
    "a.@x.y",
    "a@x",
    "a@x.",
    "a@x.-",
    "a@x-.y",
    "a@-x.y",
    "a@x.y-",
    "a@[1.2.3.4]",
    "a@[1.2.3.256]",
    "a@[1.2.3.tag:]",
    "a@[1.2.3.-:]",
    "a@[1.2.3]",
    "Ⅻa@x.y",
    "²a@x.y",
    "x²@y.z",
    "1.2.3.4",
    "1.2.3.256",
    "256.256.256.256",
    "1234.255.255.9999",
    "1.2.3.",
    ".1.2.3.4.",
    "01.002.3.4",
    "1.0002.3.4",
    "١.٢.٣.٤",
    "DE89 3704 0044 0532 0130 00",
    "DE89 3704 0044 0532 0130",
    "de89 3704 0044 0532 0130 00",
    "DE89 3704 0044 0532 0130 X",
    "DE89  3704 0044 0532 0130 00",
    "xDE89 3704 0044 0532 0130 0",
    "<email-pii> <ip-pii> <iban-pii>",
];

#[test]
fn the_scanner_finds_what_python_re_finds() {
    let (Some(python), Some(spec), Some(corpus)) = (
        prov_testkit::venv_python(),
        prov_testkit::shared_data("pii/apertus-pii-regexes.json"),
        prov_testkit::shared_data("pii/bench-corpus.jsonl.gz"),
    ) else {
        return;
    };
    let script = format!(
        "import sys; sys.argv = ['', {:?}, {:?}]\n{SCRIPT}",
        spec.display().to_string(),
        corpus.display().to_string()
    );
    let out = prov_testkit::run_python(&python, &script, serde_json::to_string(TRICKY).unwrap().as_bytes());
    let out: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let order: Vec<ScanKind> = out["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| match k.as_str().unwrap() {
            "email" => ScanKind::Email,
            "ip" => ScanKind::Ipv4,
            "iban" => ScanKind::Iban,
            other => panic!("kind {other}"),
        })
        .collect();
    let ours = |line: &str| -> char {
        let found = scan(line, &order);
        let bits: u32 =
            order.iter().enumerate().filter(|(_, k)| found.iter().any(|(f, _)| f == *k)).map(|(i, _)| 1 << i).sum();
        char::from_digit(bits, 10).unwrap()
    };
    let compare = |what: &str, text: &str, expected: &str, checked: &mut [u64; 2]| {
        assert_eq!(text.split('\n').count(), expected.chars().count(), "{what}: line counts");
        for (line, want) in text.split('\n').zip(expected.chars()) {
            let got = ours(line);
            assert_eq!(got, want, "{what}: the scanner finds {got}, Python {want}, in the line {line:?}");
            checked[0] += 1;
            checked[1] += u64::from(want != '0');
        }
    };
    let docs = out["docs"].as_array().unwrap();
    let mut checked = [0u64; 2];
    let mut redacted_found = 0u64;
    let mut n = 0;
    for (doc, want) in prov_dataset::read_documents(&corpus).unwrap().zip(docs) {
        let doc = doc.unwrap();
        compare(&format!("document `{}`", doc.id), &doc.text, want["raw"].as_str().unwrap(), &mut checked);
        let before = checked[1];
        compare(
            &format!("document `{}` after redaction", doc.id),
            want["redacted"].as_str().unwrap(),
            want["redacted_bits"].as_str().unwrap(),
            &mut checked,
        );
        redacted_found += checked[1] - before;
        n += 1;
    }
    assert_eq!(n + 1, docs.len(), "the corpus and Python's output have as many documents");
    let tricky = docs.last().unwrap()["tricky"].as_array().unwrap();
    for (line, want) in TRICKY.iter().zip(tricky) {
        compare("tricky line", line, want.as_str().unwrap(), &mut checked);
    }
    eprintln!(
        "{} lines compared with Python's re, {} with a match; {redacted_found} lines of redacted output still match",
        checked[0], checked[1]
    );
    assert!(checked[1] > 1000, "the corpus holds PII: {checked:?}");
}
