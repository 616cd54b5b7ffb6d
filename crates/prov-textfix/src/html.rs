//! HTML character references: Python's `html.unescape` ([`unescape`]), which Bifixer applies
//! after ftfy, and ftfy's own, more cautious `unescape_html` ([`unescape_entities`]); and the
//! other way, [`escape`], for the HTML and SVG that Provenant writes by hand (audit reports,
//! card plots, the workbench's lineage drawings).
//!
//! Both read the WHATWG table of named references (the `entities` crate's copy; Python's
//! `html.entities.html5` is the same table, which `tests/ftfy_reference.rs` checks entry by
//! entry).

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::{Captures, Regex};

/// Named references without their `&`, with and without the `;` where the table has both
/// (`"amp;"`, `"amp"`), as Python's `html.entities.html5` keys them.
static HTML5: LazyLock<HashMap<&'static str, &'static str>> =
    LazyLock::new(|| entities::ENTITIES.iter().map(|e| (e.entity.trim_start_matches('&'), e.characters)).collect());

/// ftfy's `HTML_ENTITIES`: every `&name;` of the table, and for each all-lowercase name whose
/// uppercase spelling Python would leave alone, that spelling mapped to the uppercase
/// character (`&EACUTE;` is `É`).
static FTFY_ENTITIES: LazyLock<HashMap<String, String>> = LazyLock::new(|| {
    let mut out = HashMap::new();
    for (name, chars) in HTML5.iter() {
        if !name.ends_with(';') {
            continue;
        }
        out.insert(format!("&{name}"), (*chars).to_owned());
        if *name == name.to_lowercase() {
            let upper = format!("&{}", name.to_uppercase());
            if unescape(&upper) == upper {
                out.insert(upper, python_upper(chars));
            }
        }
    }
    out
});

/// Python's `str.upper()`, which uses the full case mappings as Rust's does.
fn python_upper(text: &str) -> String {
    text.to_uppercase()
}

/// Returns `text` with `&`, `<`, `>`, `"` and `'` as character references: safe as an
/// element's text and as an attribute value in either quotes, in HTML and SVG alike.
/// [`unescape`] reads it back.
#[must_use]
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Python's `html.unescape`: numeric and named character references replaced as HTML5 says,
/// named ones without `;` by their longest prefix in the table.
#[must_use]
pub fn unescape(text: &str) -> String {
    static CHARREF: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\x0C <&#;]{1,32};?)").expect("a fixed pattern")
    });
    if !text.contains('&') {
        return text.to_owned();
    }
    CHARREF.replace_all(text, |caps: &Captures| replace_charref(&caps[1])).into_owned()
}

fn replace_charref(reference: &str) -> String {
    if let Some(number) = reference.strip_prefix('#') {
        let (digits, radix) = match number.strip_prefix(['x', 'X']) {
            Some(hex) => (hex, 16),
            None => (number, 10),
        };
        return numeric_reference(parse_saturating(digits.trim_end_matches(';'), radix));
    }
    if let Some(chars) = HTML5.get(reference) {
        return (*chars).to_owned();
    }
    // The longest prefix of at least two characters that the table holds, then the rest as
    // it was. Names are ASCII in the table, so a prefix that is not a char boundary cannot
    // match and is skipped, as Python would find no such key.
    let bounds: Vec<usize> = reference.char_indices().map(|(i, _)| i).skip(2).collect();
    for &end in bounds.iter().rev() {
        if let Some(chars) = HTML5.get(&reference[..end]) {
            return format!("{chars}{}", &reference[end..]);
        }
    }
    format!("&{reference}")
}

/// The number a run of digits spells, or `u64::MAX` when it is larger (Python's integers do
/// not overflow, and every such number is past U+10FFFF and handled as such).
fn parse_saturating(digits: &str, radix: u32) -> u64 {
    let mut value: u64 = 0;
    for d in digits.chars() {
        let Some(v) = d.to_digit(radix) else { return u64::MAX };
        value = match value.checked_mul(u64::from(radix)).and_then(|x| x.checked_add(u64::from(v))) {
            Some(x) => x,
            None => return u64::MAX,
        };
    }
    value
}

/// What `html.unescape` makes of `&#number;`: the windows-1252 reading for 0x80..0x9F and a
/// few other repairs, U+FFFD for surrogates and numbers past Unicode, nothing for
/// noncharacters and most controls.
fn numeric_reference(number: u64) -> String {
    match number {
        0x00 => return "\u{FFFD}".to_owned(),
        0x0D => return "\r".to_owned(),
        0x80..=0x9F => {
            let byte = u8::try_from(number).expect("in 0x80..=0x9F");
            return crate::codepages::windows_1252_sloppy(byte).to_string();
        }
        _ => {}
    }
    if (0xD800..=0xDFFF).contains(&number) || number > 0x10_FFFF {
        return "\u{FFFD}".to_owned();
    }
    let invalid =
        matches!(number, 0x01..=0x08 | 0x0B | 0x0E..=0x1F | 0x7F..=0x9F | 0xFDD0..=0xFDEF) || number & 0xFFFE == 0xFFFE;
    if invalid {
        return String::new();
    }
    char::from_u32(u32::try_from(number).expect("at most 0x10FFFF")).map_or_else(String::new, String::from)
}

/// ftfy's `unescape_html`: each `&name;` or `&#number;` (1 to 24 letters or digits, `;`
/// required) that ftfy's table or Python resolves to text without a `;` is replaced; anything
/// else is left as written.
#[must_use]
pub fn unescape_entities(text: &str) -> String {
    static ENTITY: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"&#?[0-9A-Za-z]{1,24};").expect("a fixed pattern"));
    ENTITY
        .replace_all(text, |caps: &Captures| {
            let entity = &caps[0];
            if let Some(chars) = FTFY_ENTITIES.get(entity) {
                chars.clone()
            } else if entity.starts_with("&#") {
                let unescaped = unescape(entity);
                if unescaped.contains(';') { entity.to_owned() } else { unescaped }
            } else {
                entity.to_owned()
            }
        })
        .into_owned()
}

/// Python's `html.entities.html5`, as (name, characters) pairs sorted by name, for the
/// reference test.
#[must_use]
pub fn named_references() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = HTML5.iter().map(|(k, v)| (*k, *v)).collect();
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_text_holds_no_markup_and_reads_back() {
        let text = "<script>\"a\" & 'b'</script> é &amp;";
        assert_eq!(escape(text), "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt; é &amp;amp;");
        assert_eq!(unescape(&escape(text)), text);
    }

    #[test]
    fn python_unescape_cases() {
        assert_eq!(
            unescape("&amp;lt; &eacute &eacute; &#233; &#xE9; &#x80; &#0; &#1; &#xD800; &#99999999999999999999999;"),
            "&lt; é é é é € \u{FFFD}  \u{FFFD} \u{FFFD}"
        );
        assert_eq!(unescape("&notit; &ampx &unknown;"), "¬it; &x &unknown;");
    }

    #[test]
    fn ftfy_unescape_needs_the_semicolon_and_knows_uppercase_names() {
        assert_eq!(unescape_entities("&eacute &EACUTE; &amp; &#x3b; &#128;"), "&eacute É & &#x3b; €");
    }
}
