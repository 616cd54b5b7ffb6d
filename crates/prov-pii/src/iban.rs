//! IBAN candidates for the strict mode: every country of the SWIFT IBAN Registry, compact or
//! grouped in fours, with the country's exact length and a valid ISO 7064 mod-97 checksum.
//!
//! A candidate starts with two upper-case letters that name a registry country and two
//! digits, not right after a letter, digit or `_`. Then either the rest of the IBAN follows
//! compactly (upper-case letters and digits), or in groups of four separated by one space or
//! one hyphen (the same separator throughout), the last group holding one to four
//! characters; either way exactly as many characters as the country's IBAN has, with no
//! letter, digit or `_` right after them. A full last group may be followed by more text
//! (`VG96 VPVG 0000 0123 4567 8901 X` holds the IBAN without ` X`). Lower-case IBANs are not
//! recognised.

use regex::Regex;

use super::iban_registry::IBAN_LENGTHS;
use super::{PiiKind, PiiMatch, word_continues_at, word_ends_at};

/// Returns the IBAN length of a country, if the registry lists it.
fn country_length(code: [u8; 2]) -> Option<usize> {
    IBAN_LENGTHS.binary_search_by(|(c, _)| c.cmp(&code)).ok().map(|i| usize::from(IBAN_LENGTHS[i].1))
}

fn is_iban_char(c: u8) -> bool {
    c.is_ascii_uppercase() || c.is_ascii_digit()
}

/// True when `iban` (compact: no separators) has a registry country, that country's length,
/// upper-case letters and digits only, check digits from 02 to 98 and a valid ISO 7064
/// MOD 97-10 checksum.
pub fn is_valid_iban(iban: &str) -> bool {
    let b = iban.as_bytes();
    b.len() >= 4
        && b[..2].iter().all(u8::is_ascii_uppercase)
        && country_length([b[0], b[1]]) == Some(b.len())
        && b.iter().all(|&c| is_iban_char(c))
        && checksum_ok(b.iter().copied())
}

/// Checks the check digits and the mod-97 checksum of the IBAN characters `chars` (without
/// separators, at least 4, all upper-case letters or digits).
fn checksum_ok(chars: impl Iterator<Item = u8> + Clone) -> bool {
    let head: Vec<u8> = chars.clone().take(4).collect();
    if head.len() < 4 || !head[2].is_ascii_digit() || !head[3].is_ascii_digit() {
        return false;
    }
    let check = (head[2] - b'0') * 10 + (head[3] - b'0');
    if !(2..=98).contains(&check) {
        return false;
    }
    // The country code and check digits move to the end; letters count as 10 to 35.
    let mut rem = 0u32;
    for c in chars.clone().skip(4).chain(chars.take(4)) {
        rem = if c.is_ascii_digit() {
            (rem * 10 + u32::from(c - b'0')) % 97
        } else {
            (rem * 100 + u32::from(c - b'A') + 10) % 97
        };
    }
    rem == 1
}

/// Where an IBAN may start: two upper-case letters and two digits.
pub(super) const IBAN_START: &str = "[A-Z]{2}[0-9]{2}";

/// Pushes every valid IBAN of `text` to `out`. `starts` is [`IBAN_START`].
pub(super) fn find_ibans(starts: &Regex, text: &str, out: &mut Vec<PiiMatch>) {
    let b = text.as_bytes();
    let mut after = 0;
    for m in starts.find_iter(text) {
        let i = m.start();
        if i < after || word_ends_at(text, i) {
            continue;
        }
        if let Some(len) = country_length([b[i], b[i + 1]])
            && let Some((end, sep)) = layout(text, i, len)
            && checksum_ok(b[i..end].iter().copied().filter(move |&c| Some(c) != sep))
        {
            out.push(PiiMatch { kind: PiiKind::Iban, start: i, end });
            after = end;
        }
    }
}

/// Returns the end of an IBAN of `len` characters starting at `start` (its first four
/// characters checked by the caller), compact or grouped, and its separator.
fn layout(text: &str, start: usize, len: usize) -> Option<(usize, Option<u8>)> {
    let b = text.as_bytes();
    let first = *b.get(start + 4)?;
    if is_iban_char(first) {
        let end = start + len;
        let ok = end <= b.len() && b[start + 4..end].iter().all(|&c| is_iban_char(c)) && !word_continues_at(text, end);
        return ok.then_some((end, None));
    }
    if first != b' ' && first != b'-' {
        return None;
    }
    let sep = first;
    let (mut at, mut count) = (start + 4, 4);
    loop {
        if b.get(at) != Some(&sep) {
            return None;
        }
        at += 1;
        let group_start = at;
        while at < b.len() && at - group_start < 4 && count < len && is_iban_char(b[at]) {
            at += 1;
            count += 1;
        }
        let group = at - group_start;
        if group == 0 {
            return None;
        }
        if count == len {
            return (!word_continues_at(text, at)).then_some((at, Some(sep)));
        }
        if group < 4 {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::PATTERNS;
    use super::super::iban_registry::IBAN_REGISTRY_RELEASE;
    use super::*;

    fn ibans(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        find_ibans(&PATTERNS.iban_start, text, &mut out);
        out.iter().map(|m| &text[m.start..m.end]).collect()
    }

    /// Returns a valid IBAN of `country` whose BBAN is `bban` (check digits computed).
    fn make_iban(country: [u8; 2], bban: &str) -> String {
        let probe = format!("{}{}00{bban}", char::from(country[0]), char::from(country[1]));
        let b = probe.as_bytes();
        let mut rem = 0u32;
        for &c in b[4..].iter().chain(&b[..4]) {
            rem = if c.is_ascii_digit() {
                (rem * 10 + u32::from(c - b'0')) % 97
            } else {
                (rem * 100 + u32::from(c - b'A') + 10) % 97
            };
        }
        format!("{}{}{:02}{bban}", char::from(country[0]), char::from(country[1]), 98 - rem)
    }

    #[test]
    fn the_registry_table_is_sorted_and_plausible() {
        assert_eq!(IBAN_REGISTRY_RELEASE, 100);
        assert_eq!(IBAN_LENGTHS.len(), 89);
        assert!(IBAN_LENGTHS.windows(2).all(|w| w[0].0 < w[1].0), "sorted by country code, no duplicates");
        assert!(IBAN_LENGTHS.iter().all(|(c, l)| c.iter().all(u8::is_ascii_uppercase) && (15..=34).contains(l)));
        assert_eq!(country_length(*b"DE"), Some(22));
        assert_eq!(country_length(*b"NO"), Some(15));
        assert_eq!(country_length(*b"RU"), Some(33));
        assert_eq!(country_length(*b"US"), None);
    }

    /// Every country of the table: a constructed IBAN is found compact, grouped by spaces and
    /// by hyphens, and one with a wrong check digit, or one character more or less, is not.
    #[test]
    fn every_country_is_recognised_in_every_layout() {
        for &(country, len) in IBAN_LENGTHS {
            let bban: String = (0..usize::from(len) - 4).map(|i| char::from(b"0123456789ABCDEF"[i * 7 % 16])).collect();
            let iban = make_iban(country, &bban);
            assert!(is_valid_iban(&iban), "{iban}");
            let grouped = |sep: &str| {
                iban.as_bytes().chunks(4).map(|c| std::str::from_utf8(c).unwrap()).collect::<Vec<_>>().join(sep)
            };
            for form in [iban.clone(), grouped(" "), grouped("-")] {
                let text = format!("IBAN: {form}.");
                assert_eq!(ibans(&text), [form.as_str()], "{text}");
                let mut broken = form.clone().into_bytes();
                let last = broken.len() - 1;
                broken[last] = if broken[last] == b'0' { b'1' } else { b'0' };
                let broken = String::from_utf8(broken).unwrap();
                assert_eq!(ibans(&broken), Vec::<&str>::new(), "{broken}");
                assert_eq!(ibans(&format!("{form}0")), Vec::<&str>::new(), "one more character: {form}");
                assert_eq!(ibans(&form[..form.len() - 1]), Vec::<&str>::new(), "one character less: {form}");
            }
        }
    }

    #[test]
    fn ibans_stand_alone() {
        assert_eq!(
            ibans("x DE89370400440532013000, DE89 3704 0044 0532 0130 00"),
            ["DE89370400440532013000", "DE89 3704 0044 0532 0130 00"]
        );
        assert_eq!(ibans("XDE89370400440532013000"), Vec::<&str>::new());
        assert_eq!(ibans("éDE89370400440532013000"), Vec::<&str>::new());
        assert_eq!(ibans("DE89370400440532013000é"), Vec::<&str>::new());
        assert_eq!(ibans("de89370400440532013000"), Vec::<&str>::new());
        // Separators are not mixed, and a group is never split by two spaces.
        assert_eq!(ibans("DE89 3704-0044 0532 0130 00"), Vec::<&str>::new());
        assert_eq!(ibans("DE89  3704 0044 0532 0130 00"), Vec::<&str>::new());
        // A full last group may be followed by more text.
        assert_eq!(ibans("VG96 VPVG 0000 0123 4567 8901 X"), ["VG96 VPVG 0000 0123 4567 8901"]);
    }

    #[test]
    fn check_digits_are_02_to_98() {
        // Valid mod 97 with check digits 01 or 99 are not IBANs (ISO 13616).
        let iban = make_iban(*b"DE", "370400440532013000");
        assert_eq!(iban, "DE89370400440532013000");
        assert!(!checksum_ok(b"DE01370400440532013000".iter().copied()));
        assert!(!is_valid_iban("DE8937040044053201300"));
        assert!(!is_valid_iban(""));
        assert!(!is_valid_iban("DE"));
        assert!(!is_valid_iban("ÄÖ89370400440532013000"));
    }
}
