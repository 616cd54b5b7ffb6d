//! PII redaction: e-mail addresses, IP addresses and IBANs replaced by markers; and the `pii`
//! stage kind that redacts a dataset's documents with a ledger ([`PiiStage`], in `stage`).
//!
//! A [`Redactor`] is built once per worker and applied to one document at a time with
//! [`Redactor::redact`], which returns the redacted text and the [`PiiMatch`]es: the kind and
//! the byte span in the *input* text of everything it replaced, never the PII itself, so a
//! ledger can keep the spans or just the [`PiiCounts`].
//!
//! # Modes
//!
//! - [`Mode::Apertus`] reproduces the PII step of the released Apertus pipeline: the three
//!   Python `re` patterns of [`APERTUS_SPEC_JSON`] (email, then IPv4, then IBAN). For each kind
//!   in that order, every match on the current text is found (Python `re.finditer`:
//!   leftmost-first, non-overlapping), the distinct match strings are collected, and each is
//!   replaced everywhere in the text by the kind's marker, like Python's `str.replace`. The
//!   order of the replacements matters when one match lies inside another (an address that is
//!   the tail of a Message-ID: `20050101.foo@example.org` and `foo@example.org`), and the
//!   released code does not document one (it iterates a Python `set`; the book's PII page). This mode
//!   fixes it: longest match first, then byte order; `str.replace` of an earlier string may
//!   change or remove occurrences of later ones, exactly as in Python. (The copy of the
//!   released `PIIFormatter` in swiss-ai/pretrain-data replaces in order of first occurrence,
//!   using the set only to skip repeats; on the 9,099 documents of the shared PII bench
//!   corpus, 15 come out differently in that order.) `\b` follows Python's
//!   definition of a word character (`str.isalnum()` or `_`, Unicode 14.0 as in Python 3.11),
//!   not the `regex` crate's, which also counts combining marks and leaves out `²`.
//! - [`Mode::Strict`] does it right, in one pass over the input with no `str.replace`
//!   semantics: e-mail addresses (the same pattern); IPv4 and IPv6 addresses, each checked by
//!   `std::net` parsing, optionally keeping private, loopback, link-local, documentation and
//!   other special-purpose addresses ([`StrictOptions::keep_private_ips`]); IBANs of every
//!   country in the SWIFT IBAN Registry, compact (`DE89370400440532013000`) or in groups of
//!   four separated by single spaces or hyphens (`DE89 3704 0044 0532 0130 00`), upper case,
//!   with the country's exact length and a valid ISO 7064 mod-97 checksum. Candidates of all
//!   kinds compete: the leftmost wins, then the longest; the winners never overlap.
//!
//! # Example
//!
//! ```
//! use prov_pii::{PiiKind, Redactor, StrictOptions};
//!
//! let text = "Mail jane@example.org from 203.0.113.9 or 8.8.8.8, IBAN DE89370400440532013000.";
//! let apertus = Redactor::apertus().redact(text);
//! assert_eq!(apertus.text, "Mail <email-pii> from <ip-pii> or <ip-pii>, IBAN DE89370400440532013000.");
//!
//! let strict = Redactor::strict(StrictOptions { keep_private_ips: true }).redact(text);
//! assert_eq!(strict.text, "Mail <email-pii> from 203.0.113.9 or <ip-pii>, IBAN <iban-pii>.");
//! let first = &strict.matches[0];
//! assert_eq!((first.kind, first.start, first.end), (PiiKind::Email, 5, 21));
//! assert_eq!(strict.counts().ip, 1);
//! ```

mod apertus;
mod iban;
mod iban_registry;
mod ip;
mod python_word;
mod stage;
mod strict;

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

pub use iban::is_valid_iban;
pub use stage::{PiiConfig, PiiStage};

/// The patterns, markers and order of the released Apertus PII step, as JSON
/// (`{"what", "order", "patterns", "markers"}`): a byte-for-byte copy of the shared
/// `pii/apertus-pii-regexes.json` (origin and license in `THIRD_PARTY.md` beside this file).
pub const APERTUS_SPEC_JSON: &str = include_str!("apertus-pii-regexes.json");

/// The SWIFT IBAN Registry release whose country lengths [`Mode::Strict`] checks.
pub const IBAN_REGISTRY_RELEASE: u32 = iban_registry::IBAN_REGISTRY_RELEASE;

/// What kind of PII a match is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PiiKind {
    /// An e-mail address.
    Email,
    /// An IPv4 or IPv6 address.
    Ip,
    /// An IBAN.
    Iban,
}

impl PiiKind {
    /// Every kind, in the order the apertus mode applies them.
    pub const ALL: [PiiKind; 3] = [PiiKind::Email, PiiKind::Ip, PiiKind::Iban];

    /// Returns the name used in ledgers, JSON and the apertus spec (`email`, `ip`, `iban`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Email => "email",
            Self::Ip => "ip",
            Self::Iban => "iban",
        }
    }

    /// Returns the marker that replaces a match (`<email-pii>`, `<ip-pii>`, `<iban-pii>`).
    pub fn marker(self) -> &'static str {
        match self {
            Self::Email => "<email-pii>",
            Self::Ip => "<ip-pii>",
            Self::Iban => "<iban-pii>",
        }
    }
}

impl fmt::Display for PiiKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One replaced span: its kind and its byte offsets in the input text (`start..end`). The
/// PII itself is deliberately not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PiiMatch {
    /// What was replaced.
    #[serde(rename = "type")]
    pub kind: PiiKind,
    /// Byte offset of the first byte in the input text.
    pub start: usize,
    /// Byte offset just past the last byte in the input text.
    pub end: usize,
}

impl PiiMatch {
    /// Returns the length of the replaced span in bytes.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// True for an empty span (never produced by a [`Redactor`]).
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
}

/// Replaced spans per kind: what a ledger keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PiiCounts {
    /// E-mail addresses replaced.
    pub email: u64,
    /// IP addresses replaced.
    pub ip: u64,
    /// IBANs replaced.
    pub iban: u64,
}

impl PiiCounts {
    /// Returns the count of one kind.
    pub fn get(&self, kind: PiiKind) -> u64 {
        match kind {
            PiiKind::Email => self.email,
            PiiKind::Ip => self.ip,
            PiiKind::Iban => self.iban,
        }
    }

    /// Returns the sum over all kinds.
    pub fn total(&self) -> u64 {
        self.email + self.ip + self.iban
    }
}

/// The result of [`Redactor::redact`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction<'a> {
    /// The redacted text; borrowed from the input when nothing was replaced.
    pub text: Cow<'a, str>,
    /// Every replaced span, sorted by position in the input; spans never overlap.
    pub matches: Vec<PiiMatch>,
}

impl Redaction<'_> {
    /// Returns the number of replaced spans per kind.
    pub fn counts(&self) -> PiiCounts {
        let mut c = PiiCounts::default();
        for m in &self.matches {
            match m.kind {
                PiiKind::Email => c.email += 1,
                PiiKind::Ip => c.ip += 1,
                PiiKind::Iban => c.iban += 1,
            }
        }
        c
    }
}

/// Which redaction to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The released Apertus step, in a fixed order (see the module documentation).
    Apertus,
    /// Validated e-mail, IPv4, IPv6 and IBAN detection in one pass.
    Strict,
}

impl Mode {
    /// Returns the mode's name (`apertus`, `strict`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Apertus => "apertus",
            Self::Strict => "strict",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A PII mode name that is neither `apertus` nor `strict`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown PII mode `{0}` (expected `apertus` or `strict`)")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "apertus" => Ok(Self::Apertus),
            "strict" => Ok(Self::Strict),
            other => Err(UnknownMode(other.to_owned())),
        }
    }
}

/// Options of [`Mode::Strict`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StrictOptions {
    /// Keep IP addresses that identify no one on the internet: private, shared (CGNAT),
    /// loopback, link-local, unspecified, documentation, benchmarking, multicast and reserved
    /// ranges (IPv4 and IPv6, including IPv4-mapped IPv6).
    pub keep_private_ips: bool,
}

/// Redacts PII in one mode; built once, used for many documents (from many threads).
#[derive(Debug, Clone)]
pub struct Redactor {
    mode: Mode,
    options: StrictOptions,
    patterns: &'static Patterns,
}

impl Redactor {
    /// Returns a redactor in [`Mode::Apertus`].
    pub fn apertus() -> Redactor {
        Redactor { mode: Mode::Apertus, options: StrictOptions::default(), patterns: &PATTERNS }
    }

    /// Returns a redactor in [`Mode::Strict`] with `options`.
    pub fn strict(options: StrictOptions) -> Redactor {
        Redactor { mode: Mode::Strict, options, patterns: &PATTERNS }
    }

    /// Returns a redactor in `mode`; `options` apply to [`Mode::Strict`] only.
    pub fn new(mode: Mode, options: StrictOptions) -> Redactor {
        match mode {
            Mode::Apertus => Redactor::apertus(),
            Mode::Strict => Redactor::strict(options),
        }
    }

    /// Returns the mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Returns the options (meaningful in [`Mode::Strict`]).
    pub fn options(&self) -> StrictOptions {
        self.options
    }

    /// Redacts `text`. Never fails and never panics; text without PII comes back borrowed.
    pub fn redact<'a>(&self, text: &'a str) -> Redaction<'a> {
        match self.mode {
            Mode::Apertus => apertus::redact(self.patterns, text),
            Mode::Strict => strict::redact(self.patterns, self.options, text),
        }
    }
}

/// The apertus spec, parsed from [`APERTUS_SPEC_JSON`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApertusSpec {
    #[allow(dead_code)]
    what: String,
    order: Vec<PiiKind>,
    patterns: std::collections::BTreeMap<PiiKind, String>,
    markers: std::collections::BTreeMap<PiiKind, String>,
}

/// The compiled patterns shared by every [`Redactor`].
#[derive(Debug)]
struct Patterns {
    /// The apertus email pattern without its leading `\b`, which [`apertus::find_emails`]
    /// checks with Python's definition instead.
    email: Regex,
    /// The apertus IPv4 pattern, as written.
    ip: Regex,
    /// The apertus IBAN pattern, as written.
    iban: Regex,
    /// Strict mode: IPv4 candidates ([`ip::IPV4_RUN`]).
    ipv4_run: Regex,
    /// Strict mode: IPv6 candidates ([`ip::IPV6_RUN`]).
    ipv6_run: Regex,
    /// Strict mode: where IBANs may start ([`iban::IBAN_START`]).
    iban_start: Regex,
}

static PATTERNS: LazyLock<Patterns> = LazyLock::new(|| {
    let spec: ApertusSpec = serde_json::from_str(APERTUS_SPEC_JSON).expect("the embedded apertus spec is valid JSON");
    assert_eq!(spec.order, PiiKind::ALL, "the embedded apertus spec applies email, ip, iban in this order");
    for kind in PiiKind::ALL {
        assert_eq!(spec.markers.get(&kind).map(String::as_str), Some(kind.marker()), "marker of {kind}");
    }
    let pattern = |kind: PiiKind| spec.patterns.get(&kind).expect("the embedded apertus spec has every pattern");
    let email = pattern(PiiKind::Email)
        .strip_prefix(r"\b")
        .expect("the apertus email pattern starts with `\\b`, the only assertion in the three patterns");
    let compile = |p: &str| Regex::new(p).expect("the embedded patterns compile");
    Patterns {
        email: compile(email),
        ip: compile(pattern(PiiKind::Ip)),
        iban: compile(pattern(PiiKind::Iban)),
        ipv4_run: compile(ip::IPV4_RUN),
        ipv6_run: compile(ip::IPV6_RUN),
        iban_start: compile(iban::IBAN_START),
    }
});

/// True when `c` is a word character for Python's `re` (`\w`): `c.isalnum() or c == '_'`.
pub(crate) fn is_python_word(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric() || c == '_';
    }
    let c = u32::from(c);
    let ranges = python_word::PYTHON_WORD_RANGES;
    let i = ranges.partition_point(|&(_, hi)| hi < c);
    ranges.get(i).is_some_and(|&(lo, _)| lo <= c)
}

/// True when Python's `\b` holds at byte offset `at` of `text` (a char boundary).
fn python_word_boundary(text: &str, at: usize) -> bool {
    let before = text[..at].chars().next_back().is_some_and(is_python_word);
    let after = text[at..].chars().next().is_some_and(is_python_word);
    before != after
}

/// True when the char starting at `at` continues a word (alphanumeric or `_`), so that a
/// candidate ending at `at` is only part of a longer token.
fn word_continues_at(text: &str, at: usize) -> bool {
    text.get(at..).and_then(|rest| rest.chars().next()).is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// True when the char ending at `at` is part of a word (alphanumeric or `_`).
fn word_ends_at(text: &str, at: usize) -> bool {
    text.get(..at).and_then(|head| head.chars().next_back()).is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// Builds the redacted text from non-overlapping, sorted spans of `text`.
fn splice<'a>(text: &'a str, matches: &[PiiMatch]) -> Cow<'a, str> {
    if matches.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for m in matches {
        out.push_str(&text[at..m.start]);
        out.push_str(m.kind.marker());
        at = m.end;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

/// Registers the `pii` stage kind.
pub fn register(registry: &mut prov_exec::Registry) {
    registry.register(std::sync::Arc::new(PiiStage));
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// The shared data directory, or `None` (after saying so) when it is missing outside CI.
    fn shared_data(rel: &str) -> Option<PathBuf> {
        let repo_root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let base = std::env::var_os("PROV_SHARED_DATA").map_or_else(|| repo_root.join("../shared/data"), PathBuf::from);
        let path = base.join(rel);
        if path.is_file() {
            return Some(path);
        }
        let msg =
            format!("shared test data missing: {} (set PROV_SHARED_DATA to the shared data directory)", path.display());
        assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{msg}");
        #[allow(clippy::print_stderr)]
        {
            eprintln!("skipping: {msg}");
        }
        None
    }

    #[test]
    fn embedded_patterns_equal_the_shared_copy() {
        let Some(path) = shared_data("pii/apertus-pii-regexes.json") else { return };
        let shared = fs_err::read_to_string(&path).unwrap();
        assert_eq!(shared, APERTUS_SPEC_JSON, "{} and the embedded copy differ", path.display());
        let shared: serde_json::Value = serde_json::from_str(&shared).unwrap();
        let embedded: serde_json::Value = serde_json::from_str(APERTUS_SPEC_JSON).unwrap();
        assert_eq!(shared["patterns"], embedded["patterns"]);
        // The email class holds a backtick, which Markdown renderings of the issue lose.
        assert!(shared["patterns"]["email"].as_str().unwrap().contains("^_`{|}~-]"));
    }

    #[test]
    fn the_spec_parses_and_compiles() {
        let p = &*PATTERNS;
        assert!(p.email.is_match("jane@example.org"));
        assert!(p.ip.is_match("8.8.8.8"));
        assert!(p.iban.is_match("DE89 3704 0044 0532 0130 00"));
        let spec: ApertusSpec = serde_json::from_str(APERTUS_SPEC_JSON).unwrap();
        assert_eq!(spec.order, PiiKind::ALL);
    }

    #[test]
    fn python_word_characters() {
        // Letters, digits and `_` in any script, and numerics Python counts (isnumeric).
        for c in ['a', 'Z', '0', '_', 'é', 'ß', 'ж', '中', '٣', '²', '½', 'Ⅻ', '〇'] {
            assert!(is_python_word(c), "{c:?} is a word character in Python");
        }
        // Marks, connector punctuation other than `_`, joiners and symbols are not.
        for c in ['-', '.', '@', ' ', '\u{301}', '\u{200D}', '\u{203F}', 'Ⓐ', '€', '\u{E000}', '\u{10FFFF}'] {
            assert!(!is_python_word(c), "{c:?} is not a word character in Python");
        }
    }

    #[test]
    fn the_python_word_table_is_sorted_and_disjoint() {
        let ranges = python_word::PYTHON_WORD_RANGES;
        assert!(ranges.iter().all(|(lo, hi)| lo <= hi));
        assert!(ranges.windows(2).all(|w| w[0].1 + 1 < w[1].0), "sorted, disjoint and not adjacent");
        assert!(ranges.last().unwrap().1 <= 0x10_FFFF);
    }

    #[test]
    fn modes_parse_and_print() {
        for mode in [Mode::Apertus, Mode::Strict] {
            assert_eq!(mode.as_str().parse::<Mode>(), Ok(mode));
        }
        assert_eq!(
            "Strict".parse::<Mode>().unwrap_err().to_string(),
            "unknown PII mode `Strict` (expected `apertus` or `strict`)"
        );
    }

    #[test]
    fn matches_serialize_without_the_pii() {
        let m = PiiMatch { kind: PiiKind::Iban, start: 3, end: 25 };
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"type":"iban","start":3,"end":25}"#);
        assert_eq!(m.len(), 22);
        let r = Redactor::apertus().redact("a@b.cd and 1.2.3.4 and e@f.gh");
        assert_eq!(r.counts(), PiiCounts { email: 2, ip: 1, iban: 0 });
        assert_eq!(r.counts().total(), 3);
    }

    #[test]
    fn text_without_pii_is_borrowed() {
        let text = "nothing to see here: 1.2.3 and foo@ and DE89";
        for r in [Redactor::apertus(), Redactor::strict(StrictOptions::default())] {
            let out = r.redact(text);
            assert!(matches!(out.text, Cow::Borrowed(_)), "{:?}", r.mode());
            assert!(out.matches.is_empty());
        }
        assert_eq!(Redactor::apertus().redact("").text, "");
    }
}
