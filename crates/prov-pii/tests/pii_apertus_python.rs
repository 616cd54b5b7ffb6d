//! Differential test of the apertus PII mode against Python's `re`: a small Python script
//! implements the mode with the same patterns (the crate's embedded copy) in the same
//! documented order (distinct matches longest first, then by UTF-8 bytes, each replaced with
//! `str.replace`), and every output must equal the Rust one byte for byte.
//!
//! - `bench_corpus_equals_python`: every document of `pii/bench-corpus.jsonl.gz` in the shared
//!   data directory (`PROV_SHARED_DATA`, default `<repo root>/../shared/data`; 9,099 Debian
//!   copyright files, changelogs and manual pages, 53 MB).
//! - `tricky_text_equals_python`: generated text dense in PII-like fragments and in the
//!   characters where Python's `\w` and the `regex` crate's differ (combining marks, `²`,
//!   joiners, connector punctuation, letters newer than Python 3.11's Unicode 14.0).
//!
//! Python 3 must be on `PATH` as `python3`; without it the tests fail under `CI=true` and are
//! skipped (with a message) elsewhere. Python streams its results while Rust compares them.

#![allow(clippy::print_stderr, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use prov_pii::{APERTUS_SPEC_JSON, Redactor};

/// Python's side. Arguments: the spec JSON, then a `.jsonl.gz` path or `-` for JSON lines on
/// stdin. Writes one header record (Python and Unicode versions), then for every document
/// three records: id, input text, redacted text; each record is a little-endian u32 length
/// and that many bytes of UTF-8.
const SCRIPT: &str = r#"
import gzip, json, re, struct, sys, unicodedata
spec = json.loads(sys.argv[1])
rules = [(re.compile(spec["patterns"][k]), spec["markers"][k]) for k in spec["order"]]

def redact(text):
    for pattern, marker in rules:
        found = {m.group(0) for m in pattern.finditer(text)}
        for s in sorted(found, key=lambda s: (-len(s.encode("utf-8")), s.encode("utf-8"))):
            text = text.replace(s, marker)
    return text

out = sys.stdout.buffer
def emit(s):
    b = s.encode("utf-8")
    out.write(struct.pack("<I", len(b)))
    out.write(b)

emit("%s; unicode %s" % (sys.version.split()[0], unicodedata.unidata_version))
src = gzip.open(sys.argv[2], "rt", encoding="utf-8") if sys.argv[2] != "-" else sys.stdin
for line in src:
    doc = json.loads(line)
    emit(doc["id"])
    emit(doc["text"])
    emit(redact(doc["text"]))
out.flush()
"#;

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Where the corpus is, or `None` (after saying so) when it is missing outside CI.
fn corpus_path() -> Option<PathBuf> {
    let repo_root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let base = std::env::var_os("PROV_SHARED_DATA").map_or_else(|| repo_root.join("../shared/data"), PathBuf::from);
    let path = base.join("pii/bench-corpus.jsonl.gz");
    if path.is_file() {
        return Some(path);
    }
    let msg =
        format!("PII bench corpus missing: {} (set PROV_SHARED_DATA to the shared data directory)", path.display());
    assert!(!in_ci(), "{msg}");
    eprintln!("skipping: {msg}");
    None
}

/// Starts the Python side on `source`, or returns `None` (after saying so) when there is no
/// `python3` outside CI.
fn start_python(source: &str) -> Option<Child> {
    let child = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(APERTUS_SPEC_JSON)
        .arg(source)
        .env("PYTHONIOENCODING", "utf-8")
        .stdin(if source == "-" { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn();
    match child {
        Ok(child) => Some(child),
        Err(e) => {
            let msg = format!("cannot start `python3` ({e}): the differential test needs Python 3 on PATH");
            assert!(!in_ci(), "{msg}");
            eprintln!("skipping: {msg}");
            None
        }
    }
}

/// Reads one record, or `None` at the end of the stream.
fn read_record(r: &mut impl BufRead) -> Option<String> {
    if r.fill_buf().expect("reading Python's output").is_empty() {
        return None;
    }
    let mut len = [0u8; 4];
    r.read_exact(&mut len).expect("a record length");
    let mut bytes = vec![0u8; u32::from_le_bytes(len) as usize];
    r.read_exact(&mut bytes).expect("a record");
    Some(String::from_utf8(bytes).expect("Python writes UTF-8"))
}

/// Returns the first byte offset where `a` and `b` differ, moved back to a char boundary of
/// both.
fn first_difference(a: &str, b: &str) -> usize {
    let mut at = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !(a.is_char_boundary(at) && b.is_char_boundary(at)) {
        at -= 1;
    }
    at
}

/// Up to 80 bytes of `s` either side of `at`, on char boundaries.
fn snippet(s: &str, at: usize) -> &str {
    let mut start = at.saturating_sub(80);
    while !s.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (at + 80).min(s.len());
    while !s.is_char_boundary(end) {
        end += 1;
    }
    &s[start..end]
}

/// What a comparison saw.
struct Outcome {
    python: String,
    documents: usize,
    bytes: usize,
    replaced: usize,
    differing: usize,
    first_failure: Option<String>,
}

/// Compares every document Python sends with the Rust redaction.
fn compare(child: &mut Child) -> Outcome {
    let redactor = Redactor::apertus();
    let mut r = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
    let python = read_record(&mut r).expect("the header record");
    let mut o = Outcome { python, documents: 0, bytes: 0, replaced: 0, differing: 0, first_failure: None };
    while let Some(id) = read_record(&mut r) {
        let input = read_record(&mut r).expect("the input text");
        let expected = read_record(&mut r).expect("the redacted text");
        let got = redactor.redact(&input);
        o.documents += 1;
        o.bytes += input.len();
        o.replaced += got.matches.len();
        if got.text != expected {
            o.differing += 1;
            if o.first_failure.is_none() {
                let at = first_difference(&got.text, &expected);
                o.first_failure = Some(format!(
                    "document {id:?} differs at byte {at} of the output:\n  rust:   {:?}\n  python: {:?}",
                    snippet(&got.text, at),
                    snippet(&expected, at),
                ));
            }
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "python3 failed: {status}");
    o
}

fn check(o: &Outcome, what: &str) {
    assert!(
        o.differing == 0,
        "{what}: {} of {} documents differ from Python ({}); the first:\n{}",
        o.differing,
        o.documents,
        o.python,
        o.first_failure.as_deref().unwrap_or_default()
    );
}

#[test]
fn bench_corpus_equals_python() {
    let Some(path) = corpus_path() else { return };
    let started = Instant::now();
    let Some(mut child) = start_python(path.to_str().expect("a UTF-8 path")) else { return };
    let o = compare(&mut child);
    eprintln!(
        "apertus PII mode vs Python {}: {} documents ({} bytes, {} spans replaced), {} differ, in {:.1}s",
        o.python,
        o.documents,
        o.bytes,
        o.replaced,
        o.differing,
        started.elapsed().as_secs_f64()
    );
    assert_eq!(o.documents, 9_099, "the corpus has 9,099 documents");
    check(&o, "bench corpus");
}

/// A tiny deterministic generator (xorshift64*), so that the cases are the same every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

/// What the generated text is made of.
#[rustfmt::skip]
const ATOMS: &[&str] = &[
    // Pieces of e-mail addresses, including every ASCII symbol of the local-part class.
    "a", "Z", "x9", ".", "..", "@", "@@", "-", "_", "!", "#", "$", "%", "&", "'", "*", "+", "/", "=", "?", "^", "`",
    "{", "|", "}", "~", "example.org", "b.cd", "[", "]", ":", "[1.2.3.4]", "[IPv6:x]", "foo@example.org",
    "20050101.foo@example.org", "<", ">", " ", "\n", "\t",
    // IPv4 and IBAN fragments.
    "1", "25", "255", "256", "0", "192.168.", "10.0.0.1", "1.2.3.4.5", "DE89", " 3704", " 0044 0532", " 0130 00",
    "AB12", " 1234", "X9",
    // Characters where Python's `\w` and the regex crate's differ, and ordinary non-ASCII.
    "é", "ß", "ж", "中", "²", "½", "Ⅻ", "\u{301}", "\u{903}", "\u{200C}", "\u{200D}", "\u{203F}", "Ⓐ", "\u{11F04}",
    "\u{1E4D0}", "\u{FF3F}", "€", "\u{A0}",
    // Markers already in the text.
    "<email-pii>", "<ip-pii>",
];

#[test]
fn tricky_text_equals_python() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut input = String::new();
    let cases = 20_000;
    for i in 0..cases {
        let n = 1 + rng.next() % 24;
        let text: String = (0..n).map(|_| rng.pick(ATOMS)).collect();
        input.push_str(&serde_json::json!({"id": format!("case-{i}"), "text": text}).to_string());
        input.push('\n');
    }
    let started = Instant::now();
    let Some(mut child) = start_python("-") else { return };
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        stdin.write_all(input.as_bytes()).expect("writing to python3");
    });
    let o = compare(&mut child);
    writer.join().unwrap();
    eprintln!(
        "apertus PII mode vs Python {} on generated text: {} cases, {} spans replaced, {} differ, in {:.1}s",
        o.python,
        o.documents,
        o.replaced,
        o.differing,
        started.elapsed().as_secs_f64()
    );
    assert_eq!(o.documents, cases);
    assert!(o.replaced > cases / 2, "the generated text holds PII");
    // The word-character table is CPython 3.11's (Unicode 14.0): another Unicode version may
    // legitimately disagree on letters added since.
    if !o.python.ends_with("unicode 14.0.0") && o.differing > 0 {
        eprintln!("skipping: Python {} has another Unicode version than the table (14.0.0)", o.python);
        return;
    }
    check(&o, "generated text");
}
