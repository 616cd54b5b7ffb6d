//! The single-byte code pages ftfy re-encodes mojibake with, and the UTF-8 variant it decodes
//! the bytes as.
//!
//! ftfy's order (`CHARMAP_ENCODINGS`): Latin-1, the "sloppy" Windows code pages 1252, 1251,
//! 1250, 1253, 1254 and 1257 (`CPython`'s tables, with every byte `CPython` leaves undefined
//! decoding to the Latin-1 character of the same value and byte 0x1A to U+FFFD), ISO-8859-2,
//! Mac Roman and code page 437. The tables are in `tables.rs`.

use std::collections::HashMap;
use std::sync::LazyLock;

use crate::tables::CODE_PAGES;

/// One code page: what each byte decodes to, and back.
pub struct CodePage {
    /// ftfy's name for it.
    pub name: &'static str,
    decode: [char; 256],
    encode: HashMap<char, u8>,
}

impl CodePage {
    fn new(name: &'static str, high: &[u16; 128], sub: u16) -> Self {
        let mut decode = ['\0'; 256];
        for (byte, slot) in decode.iter_mut().enumerate().take(0x80) {
            *slot = char::from(u8::try_from(byte).expect("below 0x80"));
        }
        decode[0x1A] = char::from_u32(u32::from(sub)).expect("a table entry is a character");
        for (i, &c) in high.iter().enumerate() {
            decode[0x80 + i] = char::from_u32(u32::from(c)).expect("a table entry is a character");
        }
        // Python's charmap encoder keeps the last byte a character decodes from; the tables
        // have no character twice, so the order does not matter.
        let encode = decode.iter().enumerate().map(|(b, &c)| (c, u8::try_from(b).expect("a byte"))).collect();
        Self { name, decode, encode }
    }

    /// ftfy's `possible_encoding`: every character of `text` is one this code page can write
    /// (ftfy's pattern leaves out U+001A unless byte 0x1A decodes to it).
    #[must_use]
    pub fn can_encode(&self, text: &str) -> bool {
        text.chars().all(|c| self.encode.contains_key(&c))
    }

    /// The bytes of `text` in this code page, or `None` when a character has none.
    #[must_use]
    pub fn encode(&self, text: &str) -> Option<Vec<u8>> {
        text.chars().map(|c| self.encode.get(&c).copied()).collect()
    }

    /// The character `byte` decodes to.
    #[must_use]
    pub fn decode_byte(&self, byte: u8) -> char {
        self.decode[usize::from(byte)]
    }

    /// `bytes` decoded.
    #[must_use]
    pub fn decode(&self, bytes: &[u8]) -> String {
        bytes.iter().map(|&b| self.decode_byte(b)).collect()
    }
}

/// The code pages in ftfy's order.
pub static CODE_PAGE_ORDER: LazyLock<Vec<CodePage>> =
    LazyLock::new(|| CODE_PAGES.iter().map(|(name, high, sub)| CodePage::new(name, high, *sub)).collect());

/// The code page called `name` (ftfy's names: `latin-1`, `sloppy-windows-1252`, ...).
#[must_use]
pub fn code_page(name: &str) -> Option<&'static CodePage> {
    CODE_PAGE_ORDER.iter().find(|p| p.name == name)
}

/// What `byte` decodes to in sloppy Windows-1252.
#[must_use]
pub fn windows_1252_sloppy(byte: u8) -> char {
    code_page("sloppy-windows-1252").expect("a built-in code page").decode_byte(byte)
}

/// Python's `bytes.decode("utf-8-variants")` with ftfy's codec: strict UTF-8, except that
/// `C0 80` is U+0000 and a surrogate pair written as two three-byte sequences (CESU-8) is the
/// character it pairs to. `None` where Python raises `UnicodeDecodeError`.
#[must_use]
pub fn decode_utf8_variants(input: &[u8]) -> Option<String> {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while !rest.is_empty() {
        let Some(cut) = first_special(rest) else {
            out.push_str(std::str::from_utf8(rest).ok()?);
            break;
        };
        if cut > 0 {
            out.push_str(std::str::from_utf8(&rest[..cut]).ok()?);
            rest = &rest[cut..];
            continue;
        }
        if rest[0] == 0xC0 {
            if rest.len() < 2 {
                return None;
            }
            out.push('\0');
            rest = &rest[2..];
            continue;
        }
        // A surrogate: six bytes that pair are one character; anything else is an error
        // (the codec hands the first three to the strict decoder, which refuses them).
        if rest.len() < 6 || !cesu8_at(rest) {
            return None;
        }
        let code = ((u32::from(rest[1]) & 0x0F) << 16)
            + ((u32::from(rest[2]) & 0x3F) << 10)
            + ((u32::from(rest[4]) & 0x0F) << 6)
            + (u32::from(rest[5]) & 0x3F)
            + 0x10000;
        out.push(char::from_u32(code)?);
        rest = &rest[6..];
    }
    Some(out)
}

/// Python's `$` in a pattern without MULTILINE: the end, or just before a final `\n`.
fn at_end(bytes: &[u8], at: usize) -> bool {
    at == bytes.len() || (at + 1 == bytes.len() && bytes[at] == b'\n')
}

/// Python's match of a run of parts `([lo-hi]|$)` from `at`: each part takes one byte in its
/// range, or matches the end without taking one. The end of the match, or `None`.
fn parts_match(bytes: &[u8], mut at: usize, parts: &[(u8, u8)]) -> Option<usize> {
    for &(lo, hi) in parts {
        if bytes.get(at).is_some_and(|b| (lo..=hi).contains(b)) {
            at += 1;
        } else if !at_end(bytes, at) {
            return None;
        }
    }
    Some(at)
}

/// ftfy's `CESU8_RE` matched at the start of `bytes`.
fn cesu8_at(bytes: &[u8]) -> bool {
    bytes.first() == Some(&0xED)
        && parts_match(bytes, 1, &[(0xA0, 0xAF), (0x80, 0xBF), (0xED, 0xED), (0xB0, 0xBF), (0x80, 0xBF)]).is_some()
}

/// Where ftfy's `SPECIAL_BYTES_RE` first matches: `C0` before `80` or the end, or `ED` before a
/// surrogate's second and third bytes or the end (its CESU-8 alternative matches only where
/// this one does).
fn first_special(bytes: &[u8]) -> Option<usize> {
    (0..bytes.len()).find(|&i| match bytes[i] {
        0xC0 => parts_match(bytes, i + 1, &[(0x80, 0x80)]).is_some(),
        0xED => parts_match(bytes, i + 1, &[(0xA0, 0xBF), (0x80, 0xBF)]).is_some(),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variant_decoder_reads_java_nulls_and_cesu8() {
        assert_eq!(decode_utf8_variants(b"a\xc0\x80b").as_deref(), Some("a\0b"));
        // U+1F600 as CESU-8: D83D DE00.
        assert_eq!(decode_utf8_variants(b"\xed\xa0\xbd\xed\xb8\x80").as_deref(), Some("\u{1F600}"));
        assert_eq!(decode_utf8_variants(b"\xed\xa0\xbd!"), None);
        assert_eq!(decode_utf8_variants(b"\xff"), None);
        assert_eq!(decode_utf8_variants("é".as_bytes()).as_deref(), Some("é"));
    }

    #[test]
    fn sloppy_1252_fills_the_holes_with_latin1() {
        assert_eq!(windows_1252_sloppy(0x80), '€');
        assert_eq!(windows_1252_sloppy(0x81), '\u{81}');
        assert_eq!(windows_1252_sloppy(0x1A), '\u{FFFD}');
        assert!(!code_page("sloppy-windows-1252").unwrap().can_encode("\u{1A}"));
        assert!(code_page("latin-1").unwrap().can_encode("\u{1A}"));
    }
}
