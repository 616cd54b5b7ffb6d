//! ftfy's test for mojibake ([`is_bad`]): text is suspect where characters that UTF-8 read
//! through a single-byte code page produces sit next to each other in ways real text rarely
//! has them (a lowercase accented letter before a currency sign, a box-drawing character
//! before an accented capital, `Ã` before a no-break space, ...).
//!
//! The character categories are ftfy's (`MOJIBAKE_CATEGORIES`, in `tables.rs`); the
//! juxtapositions below are ftfy's `BADNESS_RE`, one alternative per line in ftfy's order.
//! Python's `\s` and `\w` are written as explicit classes, since the `regex` crate's differ.

use std::sync::LazyLock;

use regex::Regex;

use crate::python::SPACE_CLASS;
use crate::tables::{
    MOJIBAKE_BAD as BAD, MOJIBAKE_BOX as BOX, MOJIBAKE_C1 as C1, MOJIBAKE_COMMON as COMMON,
    MOJIBAKE_CURRENCY as CURRENCY, MOJIBAKE_END_PUNCTUATION as END, MOJIBAKE_KAOMOJI as KAOMOJI, MOJIBAKE_LAW as LAW,
    MOJIBAKE_LOWER_ACCENTED as LOWER_ACCENTED, MOJIBAKE_LOWER_COMMON as LOWER_COMMON, MOJIBAKE_NUMERIC as NUMERIC,
    MOJIBAKE_START_PUNCTUATION as START, MOJIBAKE_UPPER_ACCENTED as UPPER_ACCENTED,
    MOJIBAKE_UPPER_COMMON as UPPER_COMMON,
};

type Ranges = &'static [(u32, u32)];

/// A character class of the union of `categories` and the characters of `extra`.
pub(crate) fn class(categories: &[Ranges], extra: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::from("[");
    for ranges in categories {
        for &(lo, hi) in *ranges {
            if lo == hi {
                let _ = write!(out, "\\x{{{lo:X}}}");
            } else {
                let _ = write!(out, "\\x{{{lo:X}}}-\\x{{{hi:X}}}");
            }
        }
    }
    for c in extra.chars() {
        let _ = write!(out, "\\x{{{:X}}}", u32::from(c));
    }
    out.push(']');
    out
}

/// Python's `\w` for text: letters, numbers and `_` (`str.isalnum()` or `_`).
const WORD: &str = r"[\p{L}\p{N}_]";

fn pattern() -> String {
    let c = class;
    let alternatives: Vec<String> = vec![
        c(&[C1], ""),
        c(&[BAD, LOWER_ACCENTED, UPPER_ACCENTED, BOX, START, END, CURRENCY, NUMERIC, LAW], "") + &c(&[BAD], ""),
        "[a-zA-Z]".to_owned() + &c(&[LOWER_COMMON, UPPER_COMMON], "") + &c(&[BAD], ""),
        c(&[BAD], "") + &c(&[LOWER_ACCENTED, UPPER_ACCENTED, BOX, START, END, CURRENCY, NUMERIC, LAW], ""),
        c(&[LOWER_ACCENTED, LOWER_COMMON, BOX, END, CURRENCY, NUMERIC], "") + &c(&[UPPER_ACCENTED], ""),
        c(&[BOX, END, CURRENCY, NUMERIC], "") + &c(&[LOWER_ACCENTED], ""),
        c(&[LOWER_ACCENTED, BOX, END], "") + &c(&[CURRENCY], ""),
        SPACE_CLASS.to_owned() + &c(&[UPPER_ACCENTED], "") + &c(&[CURRENCY], ""),
        c(&[UPPER_ACCENTED, BOX], "") + &c(&[NUMERIC, LAW], ""),
        c(&[LOWER_ACCENTED, UPPER_ACCENTED, BOX, CURRENCY, END], "") + &c(&[START], "") + &c(&[NUMERIC], ""),
        c(&[LOWER_ACCENTED, UPPER_ACCENTED, CURRENCY, NUMERIC, BOX, LAW], "") + &c(&[END], "") + &c(&[START], ""),
        c(&[CURRENCY, NUMERIC, BOX], "") + &c(&[START], ""),
        "[a-z]".to_owned() + &c(&[UPPER_ACCENTED], "") + &c(&[START, CURRENCY], ""),
        c(&[BOX], "") + &c(&[KAOMOJI], ""),
        c(&[LOWER_ACCENTED, UPPER_ACCENTED, CURRENCY, NUMERIC, START, END, LAW], "") + &c(&[BOX], ""),
        c(&[BOX], "") + &c(&[END], ""),
        c(&[LOWER_ACCENTED, UPPER_ACCENTED], "") + &c(&[START, END], "") + WORD,
        // The ligature œ when not followed by an unaccented Latin letter.
        c(&[], "Œœ") + "[^A-Za-z]",
        // Degree signs after capital letters.
        c(&[UPPER_ACCENTED], "") + &c(&[], "°"),
        // Common Windows-1252 two-character mojibake the cases above miss.
        c(&[], "ÂÃÎÐ") + &c(&[START, END], "€œŠš¢£Ÿž\u{a0}\u{ad}®©°·»–—´"),
        c(&[], "×") + &c(&[], "²³"),
        // Windows-1252 mojibake of Arabic needs the common characters, so four must match.
        {
            let arabic = c(&[], "ØÙ") + &c(&[COMMON, CURRENCY, BAD, NUMERIC, START], "ŸŠ®°µ»");
            arabic.clone() + &arabic
        },
        // Windows-1252 mojibake that starts three-character sequences of South Asian scripts.
        c(&[], "à") + &c(&[], "²µ¹¼½¾"),
        // MacRoman mojibake the cases above miss.
        c(&[], "√") + &c(&[], "±∂†≠®™´≤≥¥µø"),
        c(&[], "≈") + &c(&[], "°¢"),
        c(&[], "‚") + &c(&[], "Ä") + &c(&[], "ìîïòôúùû†°¢π"),
        c(&[], "‚") + &c(&[], "âó") + &c(&[], "àä°ê"),
        // Windows-1251 mojibake of characters in the U+2000 range.
        c(&[], "в") + &c(&[], "Ђ"),
        // Windows-1251 mojibake of Latin-1 and Cyrillic: three characters, as two are common.
        c(&[], "ВГРС") + &c(&[C1, BAD, START, END, CURRENCY], "°µ") + &c(&[], "ВГРС"),
        // Five Cyrillic letters: Windows-1251 mojibake over Latin-1 mojibake of Windows-1252.
        c(&[], "Г") + &c(&[], "ў") + &c(&[], "В") + &c(&[], "Ђ") + &c(&[], "В") + "." + "[A-Za-z ]",
        // Windows-1252 encodings of 'à' and 'á', and of U+00A0 itself.
        c(&[], "Ã") + &c(&[], "\u{a0}¡"),
        "[a-z]".to_owned() + SPACE_CLASS + "?" + &c(&[], "ÃÂ") + "[ ]",
        "^".to_owned() + &c(&[], "ÃÂ") + "[ ]",
        // Â before a character it encodes as itself, when that character is common enough.
        c(&[END], "abcdefghijklmnopqrstuvwxyz.,?!") + &c(&[], "Â") + &c(&[START, END], " "),
        // Windows-1253 mojibake of characters in the U+2000 range.
        c(&[], "β") + &c(&[], "€") + &c(&[], "™\u{a0}Ά\u{ad}®°"),
        // Windows-1253 mojibake of Latin-1 and the Greek alphabet.
        c(&[], "ΒΓΞΟ") + &c(&[C1, BAD, START, END, CURRENCY], "°") + &c(&[], "ΒΓΞΟ"),
        // Windows-1257 mojibake of characters in the U+2000 range.
        c(&[], "ā") + &c(&[], "€"),
    ];
    alternatives.join("|")
}

static BADNESS: LazyLock<Regex> = LazyLock::new(|| Regex::new(&pattern()).expect("ftfy's pattern compiles"));

/// ftfy's `is_bad`: whether the text holds a juxtaposition that suggests mojibake.
#[must_use]
pub fn is_bad(text: &str) -> bool {
    BADNESS.is_match(text)
}

/// ftfy's `badness`: how many non-overlapping suspect juxtapositions the text holds.
#[must_use]
pub fn badness(text: &str) -> usize {
    BADNESS.find_iter(text).count()
}

/// The code points of each of ftfy's categories by ftfy's name, for the reference test.
#[must_use]
pub fn categories() -> Vec<(&'static str, Vec<u32>)> {
    use crate::tables::{
        CLUE_UTF8_CONTINUATION, CLUE_UTF8_CONTINUATION_STRICT, CLUE_UTF8_FIRST_OF_2, CLUE_UTF8_FIRST_OF_3,
        CLUE_UTF8_FIRST_OF_4,
    };
    let named: [(&str, Ranges); 19] = [
        ("common", COMMON),
        ("c1", C1),
        ("bad", BAD),
        ("law", LAW),
        ("currency", CURRENCY),
        ("start_punctuation", START),
        ("end_punctuation", END),
        ("numeric", NUMERIC),
        ("kaomoji", KAOMOJI),
        ("upper_accented", UPPER_ACCENTED),
        ("lower_accented", LOWER_ACCENTED),
        ("upper_common", UPPER_COMMON),
        ("lower_common", LOWER_COMMON),
        ("box", BOX),
        ("utf8_first_of_2", CLUE_UTF8_FIRST_OF_2),
        ("utf8_first_of_3", CLUE_UTF8_FIRST_OF_3),
        ("utf8_first_of_4", CLUE_UTF8_FIRST_OF_4),
        ("utf8_continuation", CLUE_UTF8_CONTINUATION),
        ("utf8_continuation_strict", CLUE_UTF8_CONTINUATION_STRICT),
    ];
    named.iter().map(|(name, ranges)| (*name, ranges.iter().flat_map(|&(lo, hi)| lo..=hi).collect())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mojibake_is_bad_and_clean_text_is_not() {
        assert!(is_bad("âœ” No problems"));
        assert!(is_bad("Ã  perturber"));
        assert!(!is_bad("À perturber la réflexion"));
        assert!(!is_bad("Ελληνικά, русский, 日本語"));
    }
}
