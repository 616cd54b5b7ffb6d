//! IPv4 and IPv6 candidates for the strict mode, validated by `std::net` parsing.
//!
//! - IPv4: a maximal run of dot-separated digit groups with exactly four groups (so `1.2.3.4`
//!   inside the version `1.2.3.4.5` or the OID `1.3.6.1.4.1` is none), not touching a letter,
//!   digit or `_` on either side, nor a dot that follows one (`v.1.2.3.4`), that
//!   [`Ipv4Addr`]'s parser accepts (four decimal octets up to 255, no leading zeros).
//! - IPv6: a maximal run of hex digits, `:` and `.` with a trailing `.` or single `:` and a
//!   leading single `:` dropped (sentence ends, `addr:` labels), holding at least two colons
//!   and, unless it has all eight groups, a decimal digit (so that `::` in code and
//!   identifiers such as `add::bee` are left alone), not touching a letter, digit or `_`,
//!   that [`Ipv6Addr`]'s parser accepts (embedded IPv4 included; zone ids are not part of
//!   the match).

use std::net::{Ipv4Addr, Ipv6Addr};

use regex::Regex;

use super::{PiiKind, PiiMatch, word_continues_at, word_ends_at};

/// Maximal runs of dot-separated digit groups (leftmost-first and greedy, so each match is a
/// whole run).
pub(super) const IPV4_RUN: &str = r"[0-9]+(?:\.[0-9]+)*";

/// Maximal runs of hex digits, `:` and `.` that hold a `:`.
pub(super) const IPV6_RUN: &str = r"[0-9A-Fa-f.:]*:[0-9A-Fa-f.:]*";

/// Pushes the IPv4 addresses of `text` to `out`, without the special-purpose ones when
/// `keep_private` is set. `runs` is [`IPV4_RUN`].
pub(super) fn find_ipv4(runs: &Regex, text: &str, keep_private: bool, out: &mut Vec<PiiMatch>) {
    let b = text.as_bytes();
    for run in runs.find_iter(text) {
        let (start, end) = (run.start(), run.end());
        if run.as_str().split('.').count() != 4 || word_ends_at(text, start) || word_continues_at(text, end) {
            continue;
        }
        if start > 0 && b[start - 1] == b'.' && word_ends_at(text, start - 1) {
            continue;
        }
        let Ok(addr) = run.as_str().parse::<Ipv4Addr>() else { continue };
        if !(keep_private && is_special_v4(addr)) {
            out.push(PiiMatch { kind: PiiKind::Ip, start, end });
        }
    }
}

/// Pushes the IPv6 addresses of `text` to `out`, without the special-purpose ones when
/// `keep_private` is set. `runs` is [`IPV6_RUN`].
pub(super) fn find_ipv6(runs: &Regex, text: &str, keep_private: bool, out: &mut Vec<PiiMatch>) {
    let b = text.as_bytes();
    for run in runs.find_iter(text) {
        let (mut start, mut end) = (run.start(), run.end());
        while end > start && b[end - 1] == b'.' {
            end -= 1;
        }
        if end - start >= 2 && b[end - 1] == b':' && b[end - 2] != b':' {
            end -= 1;
        }
        if end - start >= 2 && b[start] == b':' && b[start + 1] != b':' {
            start += 1;
        }
        let candidate = &b[start..end];
        let colons = text[start..end].matches(':').count();
        if colons < 2 || (colons < 7 && !candidate.iter().any(u8::is_ascii_digit)) {
            continue;
        }
        if word_ends_at(text, start) || word_continues_at(text, end) {
            continue;
        }
        let Ok(addr) = text[start..end].parse::<Ipv6Addr>() else { continue };
        if !(keep_private && is_special_v6(addr)) {
            out.push(PiiMatch { kind: PiiKind::Ip, start, end });
        }
    }
}

/// IPv4 blocks that identify no host on the internet (IANA IPv4 Special-Purpose Address
/// Registry, RFC 6890 and successors, plus multicast and the reserved class E), as
/// `(network, prefix length)`.
const SPECIAL_V4: &[([u8; 4], u32)] = &[
    ([0, 0, 0, 0], 8),       // "this network" (RFC 791)
    ([10, 0, 0, 0], 8),      // private (RFC 1918)
    ([100, 64, 0, 0], 10),   // shared address space, CGNAT (RFC 6598)
    ([127, 0, 0, 0], 8),     // loopback (RFC 1122)
    ([169, 254, 0, 0], 16),  // link-local (RFC 3927)
    ([172, 16, 0, 0], 12),   // private (RFC 1918)
    ([192, 0, 0, 0], 24),    // IETF protocol assignments (RFC 6890)
    ([192, 0, 2, 0], 24),    // documentation, TEST-NET-1 (RFC 5737)
    ([192, 168, 0, 0], 16),  // private (RFC 1918)
    ([198, 18, 0, 0], 15),   // benchmarking (RFC 2544)
    ([198, 51, 100, 0], 24), // documentation, TEST-NET-2 (RFC 5737)
    ([203, 0, 113, 0], 24),  // documentation, TEST-NET-3 (RFC 5737)
    ([224, 0, 0, 0], 4),     // multicast (RFC 5771)
    ([240, 0, 0, 0], 4),     // reserved, and the limited broadcast address (RFC 1112, RFC 919)
];

/// IPv6 blocks that identify no host on the internet (IANA IPv6 Special-Purpose Address
/// Registry and RFC 4291), as `(network, prefix length)`. IPv4-mapped addresses are judged
/// by their IPv4 address instead.
const SPECIAL_V6: &[([u16; 8], u32)] = &[
    ([0, 0, 0, 0, 0, 0, 0, 0], 96),        // unspecified, loopback, IPv4-compatible (RFC 4291)
    ([0x100, 0, 0, 0, 0, 0, 0, 0], 64),    // discard-only (RFC 6666)
    ([0x2001, 0x2, 0, 0, 0, 0, 0, 0], 48), // benchmarking (RFC 5180)
    ([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32), // documentation (RFC 3849)
    ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20),   // documentation (RFC 9637)
    ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7),    // unique local (RFC 4193)
    ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10),   // link-local (RFC 4291)
    ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10),   // site-local, deprecated (RFC 3879)
    ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8),    // multicast (RFC 4291)
];

/// True when `addr` lies in one of [`SPECIAL_V4`]'s blocks.
pub(super) fn is_special_v4(addr: Ipv4Addr) -> bool {
    let a = u32::from(addr);
    SPECIAL_V4.iter().any(|&(net, len)| a & mask32(len) == u32::from(Ipv4Addr::from(net)))
}

/// True when `addr` lies in one of [`SPECIAL_V6`]'s blocks, or is an IPv4-mapped address of
/// a special IPv4 address.
pub(super) fn is_special_v6(addr: Ipv6Addr) -> bool {
    if let Some(v4) = addr.to_ipv4_mapped() {
        return is_special_v4(v4);
    }
    let a = u128::from(addr);
    SPECIAL_V6.iter().any(|&(net, len)| a & mask128(len) == u128::from(Ipv6Addr::from(net)))
}

fn mask32(len: u32) -> u32 {
    u32::MAX.checked_shl(32 - len).unwrap_or(0)
}

fn mask128(len: u32) -> u128 {
    u128::MAX.checked_shl(128 - len).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::super::PATTERNS;
    use super::*;

    fn v4(text: &str, keep_private: bool) -> Vec<&str> {
        let mut out = Vec::new();
        find_ipv4(&PATTERNS.ipv4_run, text, keep_private, &mut out);
        out.iter().map(|m| &text[m.start..m.end]).collect()
    }

    fn v6(text: &str, keep_private: bool) -> Vec<&str> {
        let mut out = Vec::new();
        find_ipv6(&PATTERNS.ipv6_run, text, keep_private, &mut out);
        out.iter().map(|m| &text[m.start..m.end]).collect()
    }

    #[test]
    fn ipv4_addresses_stand_alone_and_parse() {
        assert_eq!(v4("from 8.8.8.8, to [1.2.3.4]:80 and (9.9.9.9).", false), ["8.8.8.8", "1.2.3.4", "9.9.9.9"]);
        assert_eq!(v4("end 4.4.4.4.", false), ["4.4.4.4"]);
        // Not addresses: out of range, leading zeros, too few or too many groups, glued.
        for text in ["256.1.1.1", "01.2.3.4", "1.2.3", "1.2.3.4.5", "1.3.6.1.4.1", "v1.2.3.4", "1.2.3.4a", "x.1.2.3.4"]
        {
            assert_eq!(v4(text, false), Vec::<&str>::new(), "{text}");
        }
        assert_eq!(v4("é1.2.3.4 ²1.2.3.4", false), Vec::<&str>::new());
    }

    #[test]
    fn private_ipv4_addresses_can_be_kept() {
        let text = "10.1.2.3 172.16.0.1 172.32.0.1 192.168.1.1 127.0.0.1 169.254.1.1 100.64.0.1 0.0.0.0 \
                    192.0.2.1 198.51.100.7 203.0.113.9 198.19.0.1 224.0.0.1 255.255.255.255 8.8.8.8";
        assert_eq!(v4(text, true), ["172.32.0.1", "8.8.8.8"]);
        assert_eq!(v4(text, false).len(), 15);
    }

    #[test]
    fn ipv6_addresses_stand_alone_and_parse() {
        let text = "2001:4860:4860::8888, [2a00:1450::1]:443, fe80::1%eth0, ::ffff:8.8.8.8 and ::1.";
        assert_eq!(v6(text, false), ["2001:4860:4860::8888", "2a00:1450::1", "fe80::1", "::ffff:8.8.8.8", "::1"]);
        assert_eq!(v6("addr:2001:db8::1: up", false), ["2001:db8::1"]);
        assert_eq!(v6("dead:beef:cafe:babe:dead:beef:cafe:babe", false).len(), 1);
        // Not addresses: times, MAC addresses, C++ and Haskell, identifiers, too many groups.
        for text in [
            "12:30:45",
            "00:1a:2b:3c:4d:5e",
            "std::vector",
            "x :: Int",
            "add::bee",
            "Foo::Bar",
            "g2001:db8::1",
            "2001:db8::1x",
            "1:2:3:4:5:6:7:8:9",
            "2001:db8::1::2",
        ] {
            assert_eq!(v6(text, false), Vec::<&str>::new(), "{text}");
        }
    }

    #[test]
    fn private_ipv6_addresses_can_be_kept() {
        let text = ":: ::1 fe80::1 fd12:3456::1 2001:db8::1 3fff::1 ff02::1 2001:2::1 100::1 ::ffff:10.0.0.1 \
                    ::ffff:8.8.8.8 2001:4860:4860::8888";
        assert_eq!(v6(text, true), ["::ffff:8.8.8.8", "2001:4860:4860::8888"]);
        // `::` has no digit and is never a candidate.
        assert_eq!(v6(text, false).len(), 11);
    }
}
