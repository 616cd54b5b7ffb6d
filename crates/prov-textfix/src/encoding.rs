//! ftfy's mojibake repair (`fix_encoding`): while the text looks like UTF-8 read through a
//! single-byte code page ([`crate::badness::is_bad`]), write it back in the first code page
//! of ftfy's order that can hold it and read the bytes as UTF-8; failing that, repair the
//! mojibake embedded in otherwise good text, then Latin-1 meant as Windows-1252, then stray
//! C1 controls. Each step is ftfy 6.3.1's, in its order, with its byte-level patches
//! (`restore_byte_a0`, `replace_lossy_sequences`).

use std::sync::LazyLock;

use regex::Regex;

use crate::Config;
use crate::badness::{class, is_bad};
use crate::codepages::{CODE_PAGE_ORDER, decode_utf8_variants, windows_1252_sloppy};
use crate::tables::{
    CLUE_UTF8_CONTINUATION, CLUE_UTF8_CONTINUATION_STRICT, CLUE_UTF8_FIRST_OF_2, CLUE_UTF8_FIRST_OF_3,
    CLUE_UTF8_FIRST_OF_4,
};

/// ftfy's `fix_encoding` with `config`'s switches: one repair step after another until the
/// text stops changing.
#[must_use]
pub fn fix_encoding(text: &str, config: &Config) -> String {
    if !config.fix_encoding {
        return text.to_owned();
    }
    let mut text = text.to_owned();
    loop {
        let fixed = fix_one_step(&text, config);
        if fixed == text {
            return text;
        }
        text = fixed;
    }
}

fn fix_one_step(text: &str, config: &Config) -> String {
    if text.is_empty() || text.is_ascii() || !is_bad(text) {
        return text.to_owned();
    }
    let mut latin1_possible = false;
    for page in CODE_PAGE_ORDER.iter() {
        let Some(mut bytes) = page.encode(text) else { continue };
        latin1_possible |= page.name == "latin-1";
        if config.restore_byte_a0 && page.name != "macroman" && ALTERED_UTF8.is_match(&bytes) {
            bytes = restore_byte_a0(&bytes);
        }
        if config.replace_lossy_sequences && page.name.starts_with("sloppy") {
            bytes = LOSSY_UTF8.replace_all(&bytes, "\u{FFFD}".as_bytes()).into_owned();
        }
        let decoded = if bytes.contains(&0xED) || bytes.contains(&0xC0) {
            decode_utf8_variants(&bytes)
        } else {
            String::from_utf8(bytes).ok()
        };
        if let Some(fixed) = decoded {
            return fixed;
        }
    }
    if config.decode_inconsistent_utf8 && UTF8_RUN.is_match(text) {
        let fixed = decode_inconsistent_utf8(text);
        if fixed != text {
            return fixed;
        }
    }
    // ftfy then asks whether "windows-1252" was among the possible code pages; its list names
    // the sloppy variant, so the answer is always no, and Latin-1 text is read as strict
    // Windows-1252 whenever that decodes.
    if latin1_possible
        && let Some(fixed) = latin1_as_strict_windows_1252(text)
        && fixed != text
    {
        return fixed;
    }
    if config.fix_c1_controls && text.chars().any(is_c1) {
        return fix_c1_controls(text);
    }
    text.to_owned()
}

fn is_c1(c: char) -> bool {
    ('\u{80}'..='\u{9F}').contains(&c)
}

/// `text.encode("latin-1").decode("windows-1252")` in Python: `None` where a character is
/// past Latin-1 or a byte is one strict Windows-1252 leaves undefined.
fn latin1_as_strict_windows_1252(text: &str) -> Option<String> {
    text.chars()
        .map(|c| {
            let byte = u8::try_from(u32::from(c)).ok()?;
            match byte {
                0x81 | 0x8D | 0x8F | 0x90 | 0x9D => None,
                0x80..=0x9F => Some(windows_1252_sloppy(byte)),
                _ => Some(c),
            }
        })
        .collect()
}

/// ftfy's `fix_c1_controls`: each C1 control read as the Windows-1252 character of its byte.
#[must_use]
pub fn fix_c1_controls(text: &str) -> String {
    text.chars()
        .map(|c| if is_c1(c) { windows_1252_sloppy(u8::try_from(u32::from(c)).expect("a C1 control")) } else { c })
        .collect()
}

/// ftfy's `ALTERED_UTF8_RE`: UTF-8 sequences with a space where byte 0xA0 belongs.
static ALTERED_UTF8: LazyLock<regex::bytes::Regex> = LazyLock::new(|| {
    regex::bytes::Regex::new(concat!(
        r"(?-u)[\xc2\xc3\xc5\xce\xd0\xd9][ ]",
        r"|[\xe2\xe3][ ][\x80-\x84\x86-\x9f\xa1-\xbf]",
        r"|[\xe0-\xe3][\x80-\x84\x86-\x9f\xa1-\xbf][ ]",
        r"|[\xf0][ ][\x80-\xbf][\x80-\xbf]",
        r"|[\xf0][\x80-\xbf][ ][\x80-\xbf]",
        r"|[\xf0][\x80-\xbf][\x80-\xbf][ ]",
    ))
    .expect("a fixed pattern")
});

/// ftfy's `LOSSY_UTF8_RE`: UTF-8 sequences with a byte lost to `?` or 0x1A.
static LOSSY_UTF8: LazyLock<regex::bytes::Regex> = LazyLock::new(|| {
    regex::bytes::Regex::new(concat!(
        r"(?-u)[\xc2-\xdf][\x1a]",
        r"|[\xc2-\xc3][?]",
        r"|\xed[\xa0-\xaf][\x1a?]\xed[\xb0-\xbf][\x1a?\x80-\xbf]",
        r"|\xed[\xa0-\xaf][\x1a?\x80-\xbf]\xed[\xb0-\xbf][\x1a?]",
        r"|[\xe0-\xef][\x1a?][\x1a\x80-\xbf]",
        r"|[\xe0-\xef][\x1a\x80-\xbf][\x1a?]",
        r"|[\xf0-\xf4][\x1a?][\x1a\x80-\xbf][\x1a\x80-\xbf]",
        r"|[\xf0-\xf4][\x1a\x80-\xbf][\x1a?][\x1a\x80-\xbf]",
        r"|[\xf0-\xf4][\x1a\x80-\xbf][\x1a\x80-\xbf][\x1a?]",
        r"|\x1a",
    ))
    .expect("a fixed pattern")
});

/// ftfy's `restore_byte_a0`: `Ã` and a space before a word (not before a space, `quele`,
/// `quela`, `quilo` or `s `, where a Portuguese or Spanish `Ã` may stand) gets its 0xA0 back,
/// then every [`ALTERED_UTF8`] sequence has its spaces made 0xA0.
fn restore_byte_a0(bytes: &[u8]) -> Vec<u8> {
    let mut graved = Vec::with_capacity(bytes.len() + 8);
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 0xC3 && bytes.get(i + 1) == Some(&b' ') {
            let after = &bytes[i + 2..];
            let excluded = [&b" "[..], b"quele", b"quela", b"quilo", b"s "].iter().any(|w| after.starts_with(w));
            if !excluded {
                graved.extend_from_slice(b"\xc3\xa0 ");
                i += 2;
                continue;
            }
        }
        graved.push(bytes[i]);
        i += 1;
    }
    ALTERED_UTF8
        .replace_all(&graved, |caps: &regex::bytes::Captures| {
            caps[0].iter().map(|&b| if b == b' ' { 0xA0 } else { b }).collect::<Vec<u8>>()
        })
        .into_owned()
}

/// A run of what look like UTF-8 sequences read through a code page (ftfy's
/// `UTF8_DETECTOR_RE` without its look-behind, which [`decode_inconsistent_utf8`] checks),
/// anchored at the start of the haystack.
static UTF8_RUN: LazyLock<Regex> = LazyLock::new(|| {
    let cont = class(&[CLUE_UTF8_CONTINUATION], "");
    let first2 = class(&[CLUE_UTF8_FIRST_OF_2], "");
    let first3 = class(&[CLUE_UTF8_FIRST_OF_3], "");
    let first4 = class(&[CLUE_UTF8_FIRST_OF_4], "");
    Regex::new(&format!("(?:{first2}{cont}|{first3}{cont}{{2}}|{first4}{cont}{{3}})+"))
        .expect("ftfy's pattern compiles")
});

static UTF8_RUN_ANCHORED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"\A(?:{})", UTF8_RUN.as_str())).expect("ftfy's pattern compiles"));

fn strict_continuation(c: char) -> bool {
    let c = u32::from(c);
    CLUE_UTF8_CONTINUATION_STRICT.iter().any(|&(lo, hi)| (lo..=hi).contains(&c))
}

/// ftfy's `decode_inconsistent_utf8`: each run of UTF-8-looking mojibake that does not follow
/// a strict continuation character, is shorter than the whole text and looks bad by itself,
/// repaired on its own (with ftfy's default configuration, as ftfy calls it).
#[must_use]
pub fn decode_inconsistent_utf8(text: &str) -> String {
    let total = text.chars().count();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    let mut previous: Option<char> = None;
    while at < text.len() {
        let preceded_by_strict = previous.is_some_and(strict_continuation);
        if !preceded_by_strict && let Some(found) = UTF8_RUN_ANCHORED.find(&text[at..]) {
            let run = found.as_str();
            if run.chars().count() < total && is_bad(run) {
                out.push_str(&fix_encoding(run, &Config::default()));
            } else {
                out.push_str(run);
            }
            at += run.len();
            previous = run.chars().next_back();
            continue;
        }
        let c = text[at..].chars().next().expect("at a char boundary");
        out.push(c);
        at += c.len_utf8();
        previous = Some(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ftfy_documented_repairs() {
        let config = Config::default();
        assert_eq!(fix_encoding("sÃ³", &config), "só");
        assert_eq!(fix_encoding("voilÃ le travail", &config), "voilà le travail");
        assert_eq!(fix_encoding("Ã  perturber la rÃ©flexion", &config), "à perturber la réflexion");
        assert_eq!(fix_encoding("Ã¢â‚¬Å“mismatched quotesâ€¦\u{9d}", &config), "“mismatched quotes…\u{9d}");
        assert_eq!(fix_c1_controls("\u{80}\u{81}"), "€\u{81}");
    }

    #[test]
    fn embedded_mojibake_is_repaired_in_place() {
        // A whole line that is fine but for one mojibake word.
        let text = "Chère amie, I’ve seen cafÃ© culture.";
        assert_eq!(decode_inconsistent_utf8(text), "Chère amie, I’ve seen café culture.");
    }
}
