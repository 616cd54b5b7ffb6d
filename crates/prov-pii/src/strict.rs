//! The strict mode: candidates of every kind found on the input, the leftmost (then the
//! longest) kept, and the kept spans replaced in one pass.

use std::cmp::Reverse;

use super::{Patterns, PiiMatch, Redaction, StrictOptions, apertus, iban, ip, splice};
use crate::PiiKind;

pub(super) fn redact<'a>(patterns: &Patterns, options: StrictOptions, text: &'a str) -> Redaction<'a> {
    let mut candidates: Vec<PiiMatch> = apertus::find_emails(&patterns.email, text)
        .map(|r| PiiMatch { kind: PiiKind::Email, start: r.start, end: r.end })
        .collect();
    ip::find_ipv4(&patterns.ipv4_run, text, options.keep_private_ips, &mut candidates);
    ip::find_ipv6(&patterns.ipv6_run, text, options.keep_private_ips, &mut candidates);
    iban::find_ibans(&patterns.iban_start, text, &mut candidates);
    candidates.sort_unstable_by_key(|m| (m.start, Reverse(m.end), m.kind));
    let mut matches: Vec<PiiMatch> = Vec::with_capacity(candidates.len());
    for m in candidates {
        if matches.last().is_none_or(|last| m.start >= last.end) {
            matches.push(m);
        }
    }
    Redaction { text: splice(text, &matches), matches }
}

#[cfg(test)]
mod tests {
    use super::super::Redactor;
    use super::*;

    fn redact(text: &str, keep_private_ips: bool) -> String {
        Redactor::strict(StrictOptions { keep_private_ips }).redact(text).text.into_owned()
    }

    #[test]
    fn every_kind_is_found_in_one_pass() {
        let text = "Jane <jane@example.org>, 8.8.8.8, 2001:4860:4860::8888, 10.0.0.1, \
                    GR16 0110 1250 0000 0001 2300 695 and DE89370400440532013000.";
        assert_eq!(redact(text, false), "Jane <<email-pii>>, <ip-pii>, <ip-pii>, <ip-pii>, <iban-pii> and <iban-pii>.");
        assert_eq!(redact(text, true), "Jane <<email-pii>>, <ip-pii>, <ip-pii>, 10.0.0.1, <iban-pii> and <iban-pii>.");
    }

    /// No `str.replace`: a Message-ID and its tail are each replaced where they are.
    #[test]
    fn spans_are_replaced_where_they_are() {
        let text = "Message-ID: <20050101.foo@example.org>\nFrom: foo@example.org\n";
        let out = Redactor::strict(StrictOptions::default()).redact(text);
        assert_eq!(out.text, "Message-ID: <<email-pii>>\nFrom: <email-pii>\n");
        // An address the pattern does not match at that place stays.
        assert_eq!(redact("éfoo@example.org and foo@example.org", false), "éfoo@example.org and <email-pii>");
    }

    #[test]
    fn the_leftmost_longest_candidate_wins() {
        // The e-mail address starts first and holds the IPv4 address.
        assert_eq!(redact("root@8.8.8.8", false), "<email-pii>");
        // An IPv4-mapped IPv6 address is one IPv6 match, not an IPv4 match inside it.
        let out = Redactor::strict(StrictOptions::default()).redact("::ffff:8.8.8.8");
        assert_eq!((out.matches.len(), out.matches[0].start), (1, 0));
        // A kept private address inside a public IPv6 one: the IPv6 address wins.
        assert_eq!(redact("2001:4860::10.0.0.1", true), "<ip-pii>");
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        #[rustfmt::skip]
        const ATOMS: &[&str] = &[
            "a", "Z", "@", ".", "-", ":", "::", " ", "1", "25", "192.168.", "0.1", "fe80", "ffff", "é", "²", "ж",
            "\u{301}", "DE89", "3704", "0044", "0532", "0130", "00", "DE89370400440532013000", "jane@example.org",
            "2001:db8::", "8.8.8.8", "_", "[", "]",
        ];

        fn pii_like() -> impl Strategy<Value = String> {
            prop::collection::vec(prop::sample::select(ATOMS), 0..40).prop_map(|v| v.concat())
        }

        fn check(text: &str, keep_private_ips: bool) -> Result<(), TestCaseError> {
            let out = Redactor::strict(StrictOptions { keep_private_ips }).redact(text);
            let mut at = 0;
            for m in &out.matches {
                prop_assert!(m.start >= at && m.start < m.end && m.end <= text.len());
                prop_assert!(text.is_char_boundary(m.start) && text.is_char_boundary(m.end));
                at = m.end;
            }
            let spliced = splice(text, &out.matches);
            prop_assert_eq!(out.text.as_ref(), spliced.as_ref());
            Ok(())
        }

        proptest! {
            #[test]
            fn any_text_is_redacted_without_panicking(text in any::<String>(), keep in any::<bool>()) {
                check(&text, keep)?;
            }

            #[test]
            fn pii_like_text_gives_sorted_disjoint_spans(text in pii_like(), keep in any::<bool>()) {
                check(&text, keep)?;
            }
        }
    }
}
