//! The audit's own PII scanner: it looks for what the `pii` stage's mode promises to redact,
//! written from the patterns' definitions (the released Apertus regular expressions, see the
//! book's PII page) and not from the stage's code, so that a fault in the stage's matcher
//! cannot hide itself in its own rescan.
//!
//! The stage asks "where are the leftmost, non-overlapping matches, and what does replacing
//! them give"; this scanner asks only "does some substring of the text belong to the
//! pattern's language", which needs neither backtracking nor a regex engine, and is answered
//! by a hand-written scan per kind:
//!
//! - **e-mail** (both modes): at each `@`, a dot-atom of RFC 5322 `atext` characters ending
//!   right before it whose first character sits on a word boundary (`\b`, Python's definition
//!   approximated by [`char::is_alphanumeric`] or `_`; the two differ only on a few combining
//!   marks), and after it either a host name of at least two labels (`x.y`) or an address
//!   literal in brackets (`[192.0.2.1]`).
//! - **IPv4** (mode `apertus`): four runs of ASCII digits joined by single dots, the middle
//!   two whole runs worth at most 255 (the pattern has no boundaries, so any digit ends the
//!   outer two).
//! - **IBAN** (mode `apertus`): two capital letters, two digits, four groups of a space and
//!   four digits, a space and a capital letter or digit.
//!
//! In mode `strict` only e-mail addresses are scanned: that mode keeps private IP addresses on
//! request and IBANs with a wrong checksum, which this scanner would have to re-derive from
//! the SWIFT registry; those kinds are rescanned by the stage's matcher alone, and the claim
//! says so.

/// A PII kind the scanner can look for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ScanKind {
    /// An e-mail address.
    Email,
    /// An IPv4 address, in the Apertus pattern's form.
    Ipv4,
    /// An IBAN, in the Apertus pattern's grouped form.
    Iban,
}

impl ScanKind {
    /// The kind's name in claim evidence.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Email => "e-mail",
            Self::Ipv4 => "IPv4",
            Self::Iban => "IBAN",
        }
    }
}

/// The kinds a `pii` stage in `mode` promises to redact and this scanner can re-derive;
/// `None` for a mode it does not know.
pub fn kinds_for_mode(mode: &str) -> Option<&'static [ScanKind]> {
    match mode {
        "apertus" => Some(&[ScanKind::Email, ScanKind::Ipv4, ScanKind::Iban]),
        "strict" => Some(&[ScanKind::Email]),
        _ => None,
    }
}

/// Every place in `text` where a substring of one of `kinds` starts or (e-mail) has its `@`:
/// (kind, byte offset), in offset order.
pub fn scan(text: &str, kinds: &[ScanKind]) -> Vec<(ScanKind, usize)> {
    let mut found = Vec::new();
    if kinds.contains(&ScanKind::Email) {
        found.extend(emails(text).into_iter().map(|at| (ScanKind::Email, at)));
    }
    if kinds.contains(&ScanKind::Ipv4) {
        found.extend(ipv4s(text).into_iter().map(|at| (ScanKind::Ipv4, at)));
    }
    if kinds.contains(&ScanKind::Iban) {
        found.extend(ibans(text).into_iter().map(|at| (ScanKind::Iban, at)));
    }
    found.sort_by_key(|&(k, at)| (at, k));
    found
}

fn is_atext(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+/=?^_`{|}~-".contains(c)
}

fn is_word(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// The byte offsets of the `@` of every e-mail address.
fn emails(text: &str) -> Vec<usize> {
    text.match_indices('@')
        .map(|(at, _)| at)
        .filter(|&at| local_part_ends_at(text, at) && domain_starts_at(text, at + 1))
        .collect()
}

/// True when some dot-atom that starts on a word boundary ends right before byte `at`.
fn local_part_ends_at(text: &str, at: usize) -> bool {
    let before = &text[..at];
    // The last character must be atext (a dot-atom does not end with a dot).
    if !before.chars().next_back().is_some_and(is_atext) {
        return false;
    }
    let mut previous_was_dot = false;
    for (start, c) in before.char_indices().rev() {
        if c == '.' {
            if previous_was_dot {
                return false; // `..`: no start further left gives a dot-atom.
            }
            previous_was_dot = true;
            continue;
        }
        if !is_atext(c) {
            return false;
        }
        previous_was_dot = false;
        // A candidate start: the atom begins here. `\b` holds when the character before and
        // this one differ in being word characters.
        let left = before[..start].chars().next_back();
        if is_word(left) != is_word(Some(c)) {
            return true;
        }
    }
    false
}

/// True when a host name of at least two labels, or a bracketed address literal, starts at
/// byte `from`.
fn domain_starts_at(text: &str, from: usize) -> bool {
    let rest = &text[from..];
    if let Some(literal) = rest.strip_prefix('[') {
        return address_literal(literal);
    }
    let run: &str =
        &rest[..rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '-')).unwrap_or(rest.len())];
    let mut labels = run.split('.');
    let first = labels.next().unwrap_or("");
    let whole_label = |l: &str| {
        l.starts_with(|c: char| c.is_ascii_alphanumeric()) && l.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    // `(label \.)+ label`: the first label whole, then any label (a single character is one).
    whole_label(first) && labels.next().is_some_and(|second| second.starts_with(|c: char| c.is_ascii_alphanumeric()))
}

/// `192.0.2.1]` or `192.0.2.tag:]`: three octets and dots, then an octet or a tag ending in an
/// alphanumeric character and a colon, then `]`.
fn address_literal(rest: &str) -> bool {
    let Some(end) = rest.find(']') else { return false };
    let inside = &rest[..end];
    let parts: Vec<&str> = inside.splitn(4, '.').collect();
    if parts.len() != 4 || !parts[..3].iter().all(|p| octet(p)) {
        return false;
    }
    let last = parts[3];
    octet(last)
        || last.strip_suffix(':').is_some_and(|tag| {
            tag.ends_with(|c: char| c.is_ascii_alphanumeric())
                && tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// One to three ASCII digits worth at most 255.
fn octet(s: &str) -> bool {
    (1..=3).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()) && s.parse::<u16>().is_ok_and(|v| v <= 255)
}

/// The byte offsets of the first digit run of every dotted quad.
fn ipv4s(text: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    // Maximal runs of ASCII digits: (start, end).
    let mut runs = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            runs.push((start, i));
        } else {
            i += 1;
        }
    }
    let joined = |a: (usize, usize), b: (usize, usize)| a.1 + 1 == b.0 && bytes[a.1] == b'.';
    runs.windows(4)
        .filter(|w| {
            joined(w[0], w[1])
                && joined(w[1], w[2])
                && joined(w[2], w[3])
                && octet(&text[w[1].0..w[1].1])
                && octet(&text[w[2].0..w[2].1])
        })
        .map(|w| w[0].0)
        .collect()
}

/// The byte offsets of every grouped IBAN.
fn ibans(text: &str) -> Vec<usize> {
    // `AA00` + 4 × ` 0000` + ` X`: 26 bytes.
    const LEN: usize = 4 + 4 * 5 + 2;
    let bytes = text.as_bytes();
    (0..bytes.len().saturating_sub(LEN - 1))
        .filter(|&p| {
            let b = &bytes[p..p + LEN];
            b[0].is_ascii_uppercase()
                && b[1].is_ascii_uppercase()
                && b[2].is_ascii_digit()
                && b[3].is_ascii_digit()
                && (0..4).all(|g| b[4 + g * 5] == b' ' && b[5 + g * 5..9 + g * 5].iter().all(u8::is_ascii_digit))
                && b[24] == b' '
                && (b[25].is_ascii_uppercase() || b[25].is_ascii_digit())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &[ScanKind] = &[ScanKind::Email, ScanKind::Ipv4, ScanKind::Iban];

    fn kinds(text: &str) -> Vec<ScanKind> {
        scan(text, ALL).into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn e_mail_addresses_follow_the_pattern_language() {
        assert_eq!(kinds("write to jane.doe+x@example.org today"), [ScanKind::Email]);
        assert_eq!(kinds("root@[192.0.2.1]"), [ScanKind::Email, ScanKind::Ipv4]);
        assert_eq!(kinds("x@a.b"), [ScanKind::Email]);
        // A single label, a dot-atom ending in a dot, a leading hyphen: no address.
        assert!(kinds("root@localhost").is_empty());
        assert!(kinds("jane.@example.org").is_empty());
        assert!(kinds("jane@-example.org").is_empty());
        // `\b`: no boundary between `é` and `f`, and none further left within the atom.
        assert!(kinds("éfoo@example.org").is_empty());
        // A non-word first character needs a word character before it: `a!b@x.y` starts at `a`.
        assert_eq!(kinds("a!b@x.y"), [ScanKind::Email]);
        assert_eq!(kinds(" !b@x.y"), [ScanKind::Email]); // starts at `b`
        // The markers the stage writes hold nothing.
        assert!(kinds("<email-pii> <ip-pii> <iban-pii>").is_empty());
    }

    #[test]
    fn ipv4_and_iban_follow_the_pattern_language() {
        assert_eq!(kinds("from 203.0.113.9."), [ScanKind::Ipv4]);
        // No boundaries: the outer runs may be longer than an octet.
        assert_eq!(kinds("1234.1.1.5678"), [ScanKind::Ipv4]);
        assert!(kinds("1.256.1.1").is_empty());
        assert!(kinds("1.2.3").is_empty());
        assert!(kinds("1..2.3.4").is_empty());
        assert_eq!(kinds("GR16 0110 1250 0000 0001 2300 695"), [ScanKind::Iban]);
        assert!(kinds("DE89370400440532013000").is_empty());
        assert!(kinds("GR16 0110 1250 0000 0001").is_empty());
    }

    #[test]
    fn strict_mode_scans_e_mail_only() {
        assert_eq!(kinds_for_mode("strict"), Some(&[ScanKind::Email][..]));
        assert_eq!(kinds_for_mode("nonsense"), None);
        assert!(scan("10.0.0.1", kinds_for_mode("strict").unwrap()).is_empty());
    }
}
