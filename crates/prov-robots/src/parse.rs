//! Parsing robots.txt bytes into groups of rules (RFC 9309 §2.1, §2.2).
//!
//! The parser works on bytes and never fails: a line it cannot use is counted in
//! [`ParseStats`] and otherwise ignored, as §2.2 asks ("Crawlers MUST ignore … lines that are
//! not valid").

use serde::{Deserialize, Serialize};

use super::Directive;
use super::scan::Scan;

/// How the key of a line (`user-agent`, `allow`, `disallow`) is recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyReading {
    /// RFC 9309: the key is `user-agent`, `allow` or `disallow`, in any case, and nothing
    /// else. A file that writes `User Agent: *` has no group at all.
    #[default]
    Rfc9309,
    /// As Google's parser reads keys (its "frequent typos" mode, on by default there): a key
    /// that starts with `user-agent`, `useragent` or `user agent` is a user-agent line; one
    /// that starts with `allow` an allow line; one that starts with `disallow` or one of its
    /// misspellings `dissallow`, `dissalow`, `disalow`, `diasllow`, `disallaw` a disallow
    /// line; all in any case. Only the keys are read this way; everything else stays RFC 9309.
    GoogleTypos,
}

/// What a line's key says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    UserAgent,
    Rule(Directive),
    Other,
}

impl KeyReading {
    fn key(self, key: &[u8]) -> Key {
        match self {
            Self::Rfc9309 => {
                if key.eq_ignore_ascii_case(b"user-agent") {
                    Key::UserAgent
                } else if key.eq_ignore_ascii_case(b"allow") {
                    Key::Rule(Directive::Allow)
                } else if key.eq_ignore_ascii_case(b"disallow") {
                    Key::Rule(Directive::Disallow)
                } else {
                    Key::Other
                }
            }
            Self::GoogleTypos => {
                let starts =
                    |prefix: &[u8]| key.len() >= prefix.len() && key[..prefix.len()].eq_ignore_ascii_case(prefix);
                // In this order: `allow` is tried before the `disallow` family, and no
                // spelling of one starts with another's.
                if [&b"user-agent"[..], b"useragent", b"user agent"].into_iter().any(starts) {
                    Key::UserAgent
                } else if starts(b"allow") {
                    Key::Rule(Directive::Allow)
                } else if [&b"disallow"[..], b"dissallow", b"dissalow", b"disalow", b"diasllow", b"disallaw"]
                    .into_iter()
                    .any(starts)
                {
                    Key::Rule(Directive::Disallow)
                } else {
                    Key::Other
                }
            }
        }
    }
}

impl KeyReading {
    /// Returns what `key` is under this reading, and whether it is a misspelling: a key that
    /// RFC 9309 does not know but Google's parser reads. One call per line; the three keys
    /// RFC 9309 knows are told apart by length first, and only keys starting with `u`, `a` or
    /// `d` (as every spelling Google's parser reads does) are tried against the misspellings.
    fn classify(self, key: &[u8]) -> (Key, bool) {
        let exact = match key.len() {
            10 if key.eq_ignore_ascii_case(b"user-agent") => Key::UserAgent,
            5 if key.eq_ignore_ascii_case(b"allow") => Key::Rule(Directive::Allow),
            8 if key.eq_ignore_ascii_case(b"disallow") => Key::Rule(Directive::Disallow),
            _ => Key::Other,
        };
        if exact != Key::Other {
            return (exact, false);
        }
        let typo = match key.first().map(u8::to_ascii_lowercase) {
            Some(b'u' | b'a' | b'd') => KeyReading::GoogleTypos.key(key),
            _ => Key::Other,
        };
        let kind = match self {
            Self::Rfc9309 => Key::Other,
            Self::GoogleTypos => typo,
        };
        (kind, typo != Key::Other)
    }
}

/// One group: the user-agent lines that start it and the rules that follow them, as ranges
/// of [`Parsed::agents`] and [`Parsed::rules`] (one allocation each per file, not per group).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    pub agents: std::ops::Range<usize>,
    pub rules: std::ops::Range<usize>,
}

/// The product token of one `user-agent` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Agent {
    /// `user-agent: *`, the group for crawlers that no other group names.
    Any,
    /// A product token as written (ASCII letters, `-` and `_`; RFC 9309 §2.2.1), as a range
    /// of [`Parsed::names`]. It may be empty when the line held no token, and then it matches
    /// no crawler.
    Token(std::ops::Range<u32>),
}

/// One `allow` or `disallow` line. Positions are `u32` (a body is read up to
/// [`MAX_BODY`] octets), which halves the size of a file's rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    /// 1-based line number in the body.
    pub line: u32,
    pub directive: Directive,
    /// The pattern holds a `*`.
    pub wildcard: bool,
    /// Where the path pattern is in [`Parsed::patterns`]: in canonical form (see
    /// [`normalise_pattern`]), always ASCII.
    pub pattern: std::ops::Range<u32>,
}

impl Rule {
    /// The pattern's range of [`Parsed::patterns`].
    pub fn span(&self) -> std::ops::Range<usize> {
        self.pattern.start as usize..self.pattern.end as usize
    }
}

/// How much of a body is read: 512 MiB. RFC 9309 §2.5 lets a crawler limit what it parses,
/// to no less than 500 KiB; Google's parser reads 500 KiB. Within this limit every position, line number and
/// canonical pattern (at most three octets per octet read) fits in a `u32`.
pub const MAX_BODY: usize = 512 << 20;

/// A parsed body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Parsed {
    pub groups: Vec<Group>,
    /// The agents of all groups, group after group.
    pub agents: Vec<Agent>,
    /// The product tokens of all agents, one after the other; ASCII.
    pub names: String,
    /// The rules of all groups, group after group.
    pub rules: Vec<Rule>,
    /// The patterns of all rules, one after the other (one allocation instead of one per
    /// rule); ASCII.
    pub patterns: Vec<u8>,
    pub stats: ParseStats,
    /// Line numbers (1-based) of the lines counted in [`ParseStats::misspelled_keys`].
    pub misspelled: Vec<usize>,
}

impl Parsed {
    /// Returns an agent's product token as written, or `*`.
    pub fn agent_str(&self, agent: &Agent) -> &str {
        match agent {
            Agent::Any => "*",
            Agent::Token(t) => self.names.get(t.start as usize..t.end as usize).unwrap_or_default(),
        }
    }
}

/// What the parser saw, including what it could not use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ParseStats {
    /// Number of lines in the body (CR, LF and CRLF each end one).
    pub lines: usize,
    /// Number of groups (a run of `user-agent` lines and the rules that follow).
    pub groups: usize,
    /// Number of `allow` and `disallow` rules kept (empty ones are not kept).
    pub rules: usize,
    /// Lines with content but no `:`, ignored.
    pub missing_colon: usize,
    /// `allow` and `disallow` lines before the first `user-agent` line, ignored.
    pub outside_group: usize,
    /// `allow` and `disallow` lines with an empty path: they match nothing.
    pub empty_rules: usize,
    /// Records with another key (`sitemap`, `crawl-delay`, misspellings, …): they neither
    /// decide access nor end a group (§2.2.4).
    pub other_records: usize,
    /// Lines whose key RFC 9309 does not know but Google's parser reads as `user-agent`,
    /// `allow` or `disallow` (`User Agent`, `Disalow`, …): ignored under
    /// [`KeyReading::Rfc9309`], read under [`KeyReading::GoogleTypos`]. Counted either way.
    pub misspelled_keys: usize,
    /// True when the body started with a UTF-8 byte order mark (or a prefix of one).
    pub bom: bool,
    /// True when the whole body is valid UTF-8.
    pub valid_utf8: bool,
    /// What the body looks like.
    pub body: BodyKind,
}

impl ParseStats {
    /// Returns the number of lines that looked like records but could not be used.
    pub fn ignored_lines(&self) -> usize {
        self.missing_colon + self.outside_group
    }
}

/// What a robots.txt body looks like, judged from its first 8 KiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BodyKind {
    /// Plain text, as a robots.txt should be.
    #[default]
    Text,
    /// An HTML or XML document (an error page served in place of the file).
    Html,
    /// Binary data: a NUL byte, a gzip header, or more than 10% control characters and
    /// invalid UTF-8 sequences.
    Binary,
}

/// How many leading bytes [`sniff`] looks at.
const SNIFF_BYTES: usize = 8192;

/// Returns the groups of `bytes`, their patterns and the statistics of the parse.
///
/// One pass over the body, line by line, with a [`Scan`] that finds where things end from
/// bit masks of 64-octet blocks: the key up to its `:` (or the line's end or comment), and
/// for a `user-agent` or rule line the value up to the line's end or comment, with whether it
/// holds octets that its canonical form changes. The rest of a line (a comment, or the value
/// of another record) is skipped to the line's end the same way.
/// `parse_by_lines` (tests only) is the first, plainer version, which splits the lines first;
/// the two give the same [`Parsed`].
pub(crate) fn parse(bytes: &[u8], reading: KeyReading) -> Parsed {
    let (body, mut stats) = body_and_stats(bytes);
    let mut groups: Vec<Group> = Vec::new();
    let (mut agents, mut rules) = (Vec::new(), Vec::new());
    let mut patterns = Vec::new();
    // True while the lines since the last rule are user-agent lines, i.e. a further
    // user-agent line joins the current group instead of starting a new one.
    let mut collecting_agents = false;
    let mut misspelled = Vec::new();
    let mut names = String::new();
    let n = body.len();
    let mut scan = Scan::new(body);
    let mut i = 0;
    let mut number = 0;
    while i < n {
        number += 1;
        // The key: up to the first `:`, `#` or line end.
        let key_start = i;
        i = scan.key_end(i);
        let key = body[key_start..i].trim_ascii();
        if body.get(i) != Some(&b':') {
            // No `:` before the comment or the line's end.
            if !key.is_empty() {
                stats.missing_colon += 1;
            }
            i = scan.next_line(i);
            continue;
        }
        i += 1;
        let (kind, misspelled_key) = reading.classify(key);
        if misspelled_key {
            stats.misspelled_keys += 1;
            misspelled.push(number);
        }
        let directive = match kind {
            Key::Other => {
                stats.other_records += 1;
                i = scan.next_line(i);
                continue;
            }
            Key::UserAgent => None,
            Key::Rule(directive) => Some(directive),
        };
        // The value: up to the comment or the line's end, noting whether it holds octets
        // that its canonical form changes.
        let value_start = i;
        let scanned = scan.value_end(i);
        i = scanned.end;
        let value = body[value_start..i].trim_ascii();
        i = scan.next_line(i);
        let Some(directive) = directive else {
            // A user-agent line.
            if !collecting_agents {
                groups.push(Group { agents: agents.len()..agents.len(), rules: rules.len()..rules.len() });
                collecting_agents = true;
            }
            if let Some(group) = groups.last_mut() {
                push_agent(value, &mut agents, &mut names);
                group.agents.end = agents.len();
            }
            continue;
        };
        let Some(group) = groups.last_mut() else {
            stats.outside_group += 1;
            continue;
        };
        // A rule, even an empty one, ends the run of user-agent lines (§2.1).
        collecting_agents = false;
        if value.is_empty() {
            stats.empty_rules += 1;
            continue;
        }
        let start = patterns.len();
        if scanned.changes {
            normalise_pattern(value, &mut patterns);
        } else {
            // Already canonical, as most patterns are.
            patterns.extend_from_slice(value);
        }
        let (line, wildcard) = (number as u32, scanned.star);
        rules.push(Rule { line, directive, wildcard, pattern: start as u32..patterns.len() as u32 });
        group.rules.end = rules.len();
        stats.rules += 1;
    }
    stats.lines = number;
    stats.groups = groups.len();
    Parsed { groups, agents, names, rules, patterns, stats, misspelled }
}

/// Returns the body that both parsers read (the part within [`MAX_BODY`], without a byte order
/// mark) and the statistics known before any line is read: the mark, UTF-8 validity and
/// what the body looks like.
fn body_and_stats(bytes: &[u8]) -> (&[u8], ParseStats) {
    let bytes = readable(bytes);
    let (body, bom) = strip_bom(bytes);
    let valid_utf8 = bytes.is_ascii() || std::str::from_utf8(bytes).is_ok();
    // The body after a stripped BOM is valid too, unless only a part of a BOM was stripped.
    let body_valid = valid_utf8 && matches!(bytes.len() - body.len(), 0 | 3);
    (body, ParseStats { bom, valid_utf8, body: sniff(body, body_valid), ..ParseStats::default() })
}

/// Returns the part of a body that is read: its first [`MAX_BODY`] octets.
fn readable(bytes: &[u8]) -> &[u8] {
    &bytes[..bytes.len().min(MAX_BODY)]
}

/// Strips a UTF-8 byte order mark, or a leading prefix of one (`EF`, `EF BB`), as the
/// conformance suite expects; returns the rest and whether anything was stripped.
fn strip_bom(bytes: &[u8]) -> (&[u8], bool) {
    const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];
    let n = bytes.iter().zip(BOM).take_while(|(a, b)| *a == b).count();
    (&bytes[n..], n > 0)
}

/// Returns the agent of a `user-agent` value: `*`, or the leading product token (RFC 9309
/// §2.2.1: letters, `-` and `_`), so that `FooBot/1.2` and `Foo Bar` name `FooBot` and `Foo`.
///
/// The value is `*` only when the `*` stands alone or is followed by white space (`* bots`),
/// as in Google's reference parser. `*OrkashBot*`, a pattern some files use, is not `*`: its
/// leading token is empty, so it names no crawler (RFC 9309 has no wildcards in product
/// tokens).
fn agent(value: &[u8]) -> Written<'_> {
    if let [b'*', rest @ ..] = value
        && rest.first().is_none_or(u8::is_ascii_whitespace)
    {
        return Written::Any;
    }
    let n = value.iter().take_while(|&&b| is_token_byte(b)).count();
    Written::Token(&value[..n])
}

/// What a `user-agent` line names, as written: see [`agent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written<'a> {
    Any,
    Token(&'a [u8]),
}

/// Appends the agent of a `user-agent` value to `agents`, its token to `names`.
fn push_agent(value: &[u8], agents: &mut Vec<Agent>, names: &mut String) {
    agents.push(match agent(value) {
        Written::Any => Agent::Any,
        Written::Token(token) => {
            let start = names.len() as u32;
            // Token octets are ASCII, so this is one char per octet.
            names.extend(token.iter().map(|&b| char::from(b)));
            Agent::Token(start..names.len() as u32)
        }
    });
}

/// True for the bytes of a product token (RFC 9309 §2.2.1: `a-zA-Z`, `-`, `_`).
pub(crate) fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'-' || b == b'_'
}

/// Returns a rule path in canonical form: octets outside ASCII are percent-encoded and the
/// hex digits of existing escapes are upper-cased (`%e3` → `%E3`), so that a rule written
/// with raw UTF-8 matches a request for its encoded form (RFC 9309 §2.2.2).
///
/// Escapes of unreserved characters are *not* decoded: the conformance suite expects
/// `/foo/bar/%62%61%7A` to match only that literal path, not `/foo/bar/baz`.
///
/// Appends the canonical form, which is ASCII, to `out`.
pub(crate) fn normalise_pattern(value: &[u8], out: &mut Vec<u8>) {
    // Most patterns are ASCII without escapes, and stay as they are (two vectorised
    // searches are faster than one loop testing each octet for both).
    if value.is_ascii() && memchr::memchr(b'%', value).is_none() {
        out.extend_from_slice(value);
        return;
    }
    let mut i = 0;
    while let Some(&b) = value.get(i) {
        if b == b'%'
            && let (Some(&h), Some(&l)) = (value.get(i + 1), value.get(i + 2))
            && h.is_ascii_hexdigit()
            && l.is_ascii_hexdigit()
        {
            out.extend_from_slice(&[b'%', h.to_ascii_uppercase(), l.to_ascii_uppercase()]);
            i += 3;
            continue;
        }
        if b.is_ascii() {
            out.push(b);
        } else {
            push_escape(out, b);
        }
        i += 1;
    }
}

/// Appends `%XX` (upper-case hex) for one octet.
fn push_escape(out: &mut Vec<u8>, b: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0x0F)]]);
}

/// Judges what a body looks like from its first [`SNIFF_BYTES`]; `valid_utf8` says that the
/// whole body is valid UTF-8 (then its head has no invalid sequences to count).
fn sniff(body: &[u8], valid_utf8: bool) -> BodyKind {
    let head = &body[..body.len().min(SNIFF_BYTES)];
    if head.contains(&0) || head.starts_with(&[0x1F, 0x8B]) {
        return BodyKind::Binary;
    }
    let control = |b: u8| (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0C)) || b == 0x7F;
    // Counted in octets over runs of 255, which cannot overflow one: the compiler
    // vectorises this 16 or 32 octets at a time, where a count in `usize` it does not.
    let controls: usize =
        head.chunks(255).map(|run| usize::from(run.iter().fold(0u8, |n, &b| n + u8::from(control(b))))).sum();
    let invalid: usize = if valid_utf8 { 0 } else { head.utf8_chunks().map(|c| c.invalid().len()).sum() };
    if (controls + invalid) * 10 > head.len() {
        return BodyKind::Binary;
    }
    let text = head.trim_ascii_start();
    if text.first() == Some(&b'<') {
        let start = text[..text.len().min(1024)].to_ascii_lowercase();
        let markers: [&[u8]; 5] = [b"<html", b"<!doctype", b"<head", b"<body", b"<?xml"];
        if markers.iter().any(|m| start.windows(m.len()).any(|w| w == *m)) {
            return BodyKind::Html;
        }
    }
    BodyKind::Text
}

/// Iterates over the lines of a body, each without its comment: CR, LF and CRLF each end a
/// line, the terminator is not part of the line, and a line ends at its first `#`. A body
/// that does not end with a terminator still has a last line.
///
/// One vectorised search (`memchr3`) runs over the whole body for the three octets that
/// matter, so the octets between them are never looked at one by one.
#[cfg(test)]
struct Lines<'a> {
    body: &'a [u8],
    /// Where the next line starts; past the end once the last line was returned.
    start: usize,
    marks: memchr::Memchr3<'a>,
}

#[cfg(test)]
impl<'a> Lines<'a> {
    fn new(body: &'a [u8]) -> Self {
        Self { body, start: 0, marks: memchr::memchr3_iter(b'\n', b'\r', b'#', body) }
    }
}

#[cfg(test)]
impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let (body, start) = (self.body, self.start);
        if start >= body.len() {
            return None;
        }
        // Where the line's comment starts, if it has one.
        let mut cut = None;
        loop {
            let Some(i) = self.marks.next() else {
                self.start = body.len();
                return Some(&body[start..cut.unwrap_or(body.len())]);
            };
            // The LF of a CRLF, already consumed with its CR.
            if i < start {
                continue;
            }
            let next = match body[i] {
                b'#' => {
                    cut.get_or_insert(i);
                    continue;
                }
                b'\r' if body.get(i + 1) == Some(&b'\n') => i + 2,
                _ => i + 1,
            };
            self.start = next;
            return Some(&body[start..cut.unwrap_or(i)]);
        }
    }
}

/// The first version of [`parse`], which splits the lines first ([`Lines`]): the reference
/// that the faster one is tested against.
#[cfg(test)]
pub(crate) fn parse_by_lines(bytes: &[u8], reading: KeyReading) -> Parsed {
    let (body, mut stats) = body_and_stats(bytes);
    let mut groups: Vec<Group> = Vec::new();
    let (mut agents, mut rules) = (Vec::new(), Vec::new());
    let mut patterns = Vec::new();
    // True while the lines since the last rule are user-agent lines, i.e. a further
    // user-agent line joins the current group instead of starting a new one.
    let mut collecting_agents = false;
    let mut misspelled = Vec::new();
    let mut names = String::new();
    for (index, line) in Lines::new(body).enumerate() {
        let number = index + 1;
        stats.lines = number;
        let content = line.trim_ascii();
        if content.is_empty() {
            continue;
        }
        let Some(colon) = memchr::memchr(b':', content) else {
            stats.missing_colon += 1;
            continue;
        };
        let key = content[..colon].trim_ascii();
        let value = content[colon + 1..].trim_ascii();
        let (kind, misspelled_key) = reading.classify(key);
        if misspelled_key {
            stats.misspelled_keys += 1;
            misspelled.push(number);
        }
        if kind == Key::UserAgent {
            if !collecting_agents {
                groups.push(Group { agents: agents.len()..agents.len(), rules: rules.len()..rules.len() });
                collecting_agents = true;
            }
            if let Some(group) = groups.last_mut() {
                push_agent(value, &mut agents, &mut names);
                group.agents.end = agents.len();
            }
            continue;
        }
        let Key::Rule(directive) = kind else {
            stats.other_records += 1;
            continue;
        };
        let Some(group) = groups.last_mut() else {
            stats.outside_group += 1;
            continue;
        };
        // A rule, even an empty one, ends the run of user-agent lines (§2.1).
        collecting_agents = false;
        if value.is_empty() {
            stats.empty_rules += 1;
            continue;
        }
        let start = patterns.len();
        normalise_pattern(value, &mut patterns);
        let (line, wildcard) = (number as u32, value.contains(&b'*'));
        rules.push(Rule { line, directive, wildcard, pattern: start as u32..patterns.len() as u32 });
        group.rules.end = rules.len();
        stats.rules += 1;
    }
    stats.groups = groups.len();
    Parsed { groups, agents, names, rules, patterns, stats, misspelled }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalised(value: &[u8]) -> String {
        let mut out = Vec::new();
        normalise_pattern(value, &mut out);
        String::from_utf8(out).unwrap()
    }

    /// One group with its agents (as written, or `*`) and rules.
    struct Owned {
        agents: Vec<String>,
        rules: Vec<Rule>,
    }

    /// The groups and, for each rule, its pattern.
    fn parse_patterns(body: &[u8]) -> (Vec<Owned>, Vec<Vec<String>>, ParseStats) {
        let parsed = parse(body, KeyReading::Rfc9309);
        let groups: Vec<Owned> = parsed
            .groups
            .iter()
            .map(|g| Owned {
                agents: parsed.agents[g.agents.clone()].iter().map(|a| parsed.agent_str(a).to_owned()).collect(),
                rules: parsed.rules[g.rules.clone()].to_vec(),
            })
            .collect();
        let patterns = groups
            .iter()
            .map(|g| g.rules.iter().map(|r| String::from_utf8(parsed.patterns[r.span()].to_vec()).unwrap()).collect())
            .collect();
        (groups, patterns, parsed.stats)
    }

    fn lines(body: &[u8]) -> Vec<&[u8]> {
        Lines::new(body).collect()
    }

    #[test]
    fn cr_lf_and_crlf_each_end_a_line() {
        assert_eq!(lines(b"a\nb\r\nc\rd"), [&b"a"[..], b"b", b"c", b"d"]);
        assert_eq!(lines(b"a\n\r\n\nb"), [&b"a"[..], b"", b"", b"b"]);
        // LF then CR is two terminators, an empty line between them.
        assert_eq!(lines(b"a\n\rb"), [&b"a"[..], b"", b"b"]);
        assert_eq!(lines(b"a\n"), [&b"a"[..]]);
        assert!(lines(b"").is_empty());
    }

    #[test]
    fn lines_end_at_a_comment() {
        assert_eq!(lines(b"a#b\nc\r\n# d\re#\n#"), [&b"a"[..], b"c", b"", b"e", b""]);
        assert_eq!(
            lines(b"0123456789abcdef#ghijklmnopqrstuv\r\n0123456789abcdefg"),
            [&b"0123456789abcdef"[..], b"0123456789abcdefg"]
        );
    }

    /// Lines as the first version split them, one octet at a time.
    fn lines_one_octet_at_a_time(body: &[u8]) -> Vec<&[u8]> {
        let mut out = Vec::new();
        let (mut start, mut i) = (0, 0);
        while let Some(&b) = body.get(i) {
            let skip = match b {
                b'\r' if body.get(i + 1) == Some(&b'\n') => 2,
                b'\n' | b'\r' => 1,
                _ => {
                    i += 1;
                    continue;
                }
            };
            out.push(&body[start..i]);
            i += skip;
            start = i;
        }
        if start < body.len() {
            out.push(&body[start..]);
        }
        out.into_iter().map(|l| &l[..l.iter().position(|&b| b == b'#').unwrap_or(l.len())]).collect()
    }

    proptest::proptest! {
        /// One classification per line says what the two readings of `key` say.
        #[test]
        fn classify_agrees_with_both_readings(key in "(?i)(user[- ]?agent|(dis|dia|diss)?al+[oa]w|sitemap|u|d|a)[a-z ]{0,3}") {
            for reading in [KeyReading::Rfc9309, KeyReading::GoogleTypos] {
                let k = key.as_bytes();
                let misspelled = KeyReading::Rfc9309.key(k) == Key::Other && KeyReading::GoogleTypos.key(k) != Key::Other;
                proptest::prop_assert_eq!(reading.classify(k), (reading.key(k), misspelled));
            }
        }
    }

    proptest::proptest! {
        /// Long enough bodies for the vectorised search to run over whole blocks.
        #[test]
        fn lines_are_split_as_one_octet_at_a_time(
            body in proptest::collection::vec(proptest::sample::select(b"ab:##\r\n\n\x80\xFF ".to_vec()), 0..300)
        ) {
            proptest::prop_assert_eq!(lines(&body), lines_one_octet_at_a_time(&body));
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]
        /// The one-pass parser gives what the line-splitting one gives: on bodies of
        /// robots.txt-like lines with every line end, comments, escapes, raw UTF-8, stray
        /// octets and white space in odd places, under both key readings.
        #[test]
        fn one_pass_parse_is_the_line_by_line_parse(
            lines in proptest::collection::vec(
                "[ \t\x0C]{0,2}(?i:user-agent|user agent|allow|disallow|disalow|sitemap|crawl-delay|u)?[ \t]{0,2}:?[ \t]{0,2}[*/a-zA-Z_%e3%E3$?#:ツÿ \t-]{0,12}",
                0..16),
            ends in proptest::collection::vec(proptest::sample::select(vec!["\n", "\r", "\r\n", "\n\r", ""]), 16),
            bom in proptest::sample::select(vec![&b""[..], b"\xEF\xBB\xBF", b"\xEF"]),
        ) {
            let mut body = bom.to_vec();
            for (line, end) in lines.iter().zip(&ends) {
                body.extend_from_slice(line.as_bytes());
                body.extend_from_slice(end.as_bytes());
            }
            for reading in [KeyReading::Rfc9309, KeyReading::GoogleTypos] {
                proptest::prop_assert_eq!(parse(&body, reading), parse_by_lines(&body, reading));
            }
        }

        /// The same on arbitrary octets.
        #[test]
        fn one_pass_parse_is_the_line_by_line_parse_on_any_octets(
            body in proptest::collection::vec(proptest::sample::select(b"uU:#%*\r\n \t/a\xE3\x80".to_vec()), 0..200)
        ) {
            proptest::prop_assert_eq!(parse(&body, KeyReading::Rfc9309), parse_by_lines(&body, KeyReading::Rfc9309));
        }
    }

    /// And on every file of the main job's robots.txt snapshot, when set-up has fetched it.
    #[test]
    #[allow(clippy::print_stderr)]
    fn one_pass_parse_is_the_line_by_line_parse_on_the_snapshot() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recipes/data/mini-apertus/robots");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{} is missing; run scripts/setup", dir.display());
            eprintln!("skipping: {} is missing; run scripts/setup", dir.display());
            return;
        };
        let mut files = 0;
        for entry in entries {
            let body = fs_err::read(entry.unwrap().path()).unwrap();
            for reading in [KeyReading::Rfc9309, KeyReading::GoogleTypos] {
                assert_eq!(parse(&body, reading), parse_by_lines(&body, reading));
            }
            files += 1;
        }
        assert!(files > 4000, "{files} files");
    }

    #[test]
    fn a_body_is_read_up_to_its_limit() {
        // Zeroed by the allocator on demand: no page of it is touched.
        let long = vec![0u8; MAX_BODY + 1];
        assert_eq!(readable(&long).len(), MAX_BODY);
        assert_eq!(readable(b"user-agent: *"), b"user-agent: *");
        // Every position within the limit fits the `u32` fields, canonical patterns
        // included (at most three octets per octet read), and so does a rule's key.
        assert!(u32::try_from(3 * MAX_BODY * 2 + 1).is_ok());
    }

    #[test]
    fn a_bom_or_a_prefix_of_one_is_stripped() {
        assert_eq!(strip_bom(b"\xEF\xBB\xBFx"), (&b"x"[..], true));
        assert_eq!(strip_bom(b"\xEF\xBBx"), (&b"x"[..], true));
        assert_eq!(strip_bom(b"\xEFx"), (&b"x"[..], true));
        assert_eq!(strip_bom(b"\xEF\x11\xBFx"), (&b"\x11\xBFx"[..], true));
        assert_eq!(strip_bom(b"x\xEF\xBB\xBF"), (&b"x\xEF\xBB\xBF"[..], false));
    }

    #[test]
    fn directive_names_are_case_insensitive_and_values_trimmed() {
        let (groups, patterns, stats) = parse_patterns(b"uSeR-aGeNt :  FooBot \nDiSaLlOw\t:\t/x \n");
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].agents, ["FooBot"]);
        assert_eq!(groups[0].rules, [Rule { line: 2, directive: Directive::Disallow, wildcard: false, pattern: 0..2 }]);
        assert_eq!(patterns, [["/x"]]);
        assert_eq!(stats.rules, 1);
    }

    #[test]
    fn comments_run_to_the_end_of_the_line() {
        let (groups, patterns, _) = parse_patterns(b"user-agent: a # the a bot\n# disallow: /\ndisallow: /q#r\n");
        assert_eq!(groups[0].agents, ["a"]);
        assert_eq!(patterns, [["/q"]]);
        assert_eq!(groups[0].rules[0].line, 3);
    }

    #[test]
    fn lines_without_a_colon_and_rules_before_any_agent_are_counted_and_ignored() {
        let (groups, _, stats) = parse_patterns(b"allow: /a\nuser-agent foo\n<br />\nuser-agent: b\ndisallow: /\n");
        assert_eq!(groups.len(), 1);
        assert_eq!(stats.missing_colon, 2);
        assert_eq!(stats.outside_group, 1);
        assert_eq!(stats.ignored_lines(), 3);
        assert_eq!(stats.lines, 5);
    }

    #[test]
    fn consecutive_agents_share_a_group_until_a_rule() {
        let body = b"user-agent: a\n\nuser-agent: b\nsitemap: /s.xml\nuser-agent: c\ndisallow: /\n\
                     user-agent: d\nallow: /x\n\nallow: /y\n";
        let (groups, _, stats) = parse_patterns(body);
        assert_eq!(groups.len(), 2);
        let names: Vec<&str> = groups[0].agents.iter().map(String::as_str).collect();
        assert_eq!(names, ["a", "b", "c"]);
        // Blank lines and other records do not end a group.
        assert_eq!(groups[1].rules.len(), 2);
        assert_eq!(stats.other_records, 1);
    }

    #[test]
    fn an_empty_rule_matches_nothing_but_ends_the_agent_lines() {
        let (groups, _, stats) = parse_patterns(b"user-agent: a\ndisallow:\nuser-agent: b\ndisallow: /\n");
        assert_eq!(groups.len(), 2);
        assert!(groups[0].rules.is_empty());
        assert_eq!(stats.empty_rules, 1);
    }

    #[test]
    fn product_tokens_are_the_leading_letters_dashes_and_underscores() {
        assert_eq!(agent(b"FooBot/1.2"), Written::Token(b"FooBot"));
        assert_eq!(agent(b"Foo Bar"), Written::Token(b"Foo"));
        assert_eq!(agent(b"AB42bot"), Written::Token(b"AB"));
        assert_eq!(agent(b"foo_bar-baz"), Written::Token(b"foo_bar-baz"));
        assert_eq!(agent(b"*"), Written::Any);
        assert_eq!(agent(b"/x"), Written::Token(b""));
    }

    #[test]
    fn only_a_lone_star_is_the_star_agent() {
        assert_eq!(agent(b"* everyone else"), Written::Any);
        assert_eq!(agent(b"*\tx"), Written::Any);
        // Real files (www.nzherald.co.nz, www.asb.co.nz) write `User-agent: *OrkashBot*`.
        assert_eq!(agent(b"*OrkashBot*"), Written::Token(b""));
        assert_eq!(agent(b"**"), Written::Token(b""));
    }

    #[test]
    fn patterns_encode_non_ascii_and_uppercase_escapes() {
        assert_eq!(normalised("/foo/bar/ツ".as_bytes()), "/foo/bar/%E3%83%84");
        assert_eq!(normalised(b"/a%e3%83%84"), "/a%E3%83%84");
        assert_eq!(normalised(b"/%62%61%7a"), "/%62%61%7A");
        assert_eq!(normalised(b"/%zz%4"), "/%zz%4");
        assert_eq!(normalised(b"/\xFF"), "/%FF");
        assert_eq!(normalised(b"/*.php$"), "/*.php$");
    }

    #[test]
    fn invalid_utf8_is_parsed_as_bytes() {
        let (_, patterns, stats) = parse_patterns(b"user-agent: a\ndisallow: /\xC3(\n");
        assert!(!stats.valid_utf8);
        assert_eq!(patterns, [["/%C3("]]);
        assert_eq!(stats.body, BodyKind::Text);
    }

    fn kind(body: &[u8]) -> BodyKind {
        sniff(body, std::str::from_utf8(body).is_ok())
    }

    #[test]
    fn html_and_binary_bodies_are_recognised() {
        assert_eq!(kind(b"  <!DOCTYPE html><html><body>Not found</body></html>"), BodyKind::Html);
        assert_eq!(kind(b"<HTML>\n<p>user-agent: *</p>"), BodyKind::Html);
        assert_eq!(kind(b"user-agent: *\n<br />\ndisallow: /\n"), BodyKind::Text);
        assert_eq!(kind(b"\x1F\x8B\x08\x00rest"), BodyKind::Binary);
        assert_eq!(kind(b"user-agent: *\0"), BodyKind::Binary);
        assert_eq!(kind(b"\xFF\xFE\xFD\x01\x02ab"), BodyKind::Binary);
        assert_eq!(kind(b""), BodyKind::Text);
        // A partial BOM stripped from valid UTF-8 leaves invalid bytes, which count.
        assert_eq!(parse(b"\xEF\xBF\xBDa", KeyReading::Rfc9309).stats.body, BodyKind::Binary);
        assert_eq!(parse(b"\xEF\xBB\xBFa", KeyReading::Rfc9309).stats.body, BodyKind::Text);
    }
}
