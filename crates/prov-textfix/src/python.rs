//! Python's notion of whitespace, which ftfy's patterns (`\s`) and Bifixer's string handling
//! (`str.strip()`, `\s+`) use, and which differs from Rust's: Python counts the information
//! separators U+001C..U+001F as whitespace, Rust's `char::is_whitespace` and the `regex`
//! crate's `\s` do not.

/// `str.isspace()` for one character in Python 3.11: bidirectional class WS, B or S, or
/// general category Zs. `tests/ftfy_reference.rs` compares it with Python over every code
/// point.
#[must_use]
pub fn is_space(c: char) -> bool {
    matches!(
        c,
        '\t'..='\r'
            | '\u{1C}'..='\u{20}'
            | '\u{85}'
            | '\u{A0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200A}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202F}'
            | '\u{205F}'
            | '\u{3000}'
    )
}

/// The regular-expression class that matches exactly [`is_space`], for patterns written with
/// Python's `\s`.
pub const SPACE_CLASS: &str =
    r"[\t-\r\x1C-\x20\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]";

/// `str.strip()` with no argument: Python whitespace removed from both ends.
#[must_use]
pub fn strip(text: &str) -> &str {
    text.trim_matches(is_space)
}
