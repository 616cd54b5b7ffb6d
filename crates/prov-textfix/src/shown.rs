//! Text from outside shown as it is, so that what a reader sees is what the bytes say.
//!
//! A document id, a URL or a rule name comes from a dataset, a proof file or a robots.txt;
//! printed raw, a zero-width space makes `udhr-deu_1996-00\u{200b}` look like another
//! document's id, a newline starts a line that looks like Provenant's own output, and a
//! right-to-left override reorders what follows. [`visible`] returns the text unchanged when
//! every character shows as itself, and otherwise writes each character that does not
//! (controls, format characters, separators, white space other than the ASCII space,
//! combining marks with nothing to combine with, and every default-ignorable code point,
//! which a renderer shows as nothing: the Hangul fillers, variation selectors, the combining
//! grapheme joiner) as
//! `\u{…}` (or `\n`, `\r`, `\t`), with `\` written `\\` so that the escapes are not
//! ambiguous. Which characters are shown escaped follows Rust's `str::escape_debug`.
//!
//! [`terminal_safe`] is the weaker guard for whole lines of output, which Provenant writes
//! with their line breaks: it escapes the same characters but keeps line feeds and tabs, and
//! leaves backslashes alone. Whatever a line quotes, no escape sequence reaches the
//! terminal (to erase a line or colour a forged one) and no text is reordered or hidden.

use std::borrow::Cow;

/// True when every character of `text` shows as itself: [`visible`] would escape nothing
/// but backslashes. A caller that prints a string derived from `text` (an error quoting it)
/// asks this to know whether that string needs escaping too.
pub fn shows_as_itself(text: &str) -> bool {
    let mut chars = text.chars();
    !chars.next().is_some_and(|c| hidden(c, true)) && !chars.any(|c| hidden(c, false))
}

/// Returns `text` as it would show, escaping what would not; see the module's doc.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.contains('\\') && shows_as_itself(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for (i, c) in text.chars().enumerate() {
        if c == '\\' {
            out.push_str("\\\\");
        } else if hidden(c, i == 0) {
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                _ => out.extend(c.escape_unicode()),
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Returns `text` with every character that would not show escaped as `\u{…}`, except line
/// feeds and tabs: for lines of output as a whole; see the module's doc.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    let kept = |c: char| matches!(c, '\n' | '\t') || !hidden(c, false);
    if text.chars().all(kept) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if kept(c) {
            out.push(c);
        } else {
            out.extend(c.escape_unicode());
        }
    }
    Cow::Owned(out)
}

/// True when `c` does not show as itself; `first` when it starts the text (a combining mark
/// there has nothing to combine with).
fn hidden(c: char, first: bool) -> bool {
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    // Shown as nothing wherever they stand (Unicode's Default_Ignorable_Code_Point, as the
    // `regex` crate's tables give it), or blank though Unicode calls it a symbol.
    if c == '\u{2800}' || ignorable(c) {
        return true;
    }
    // `char::escape_debug` escapes what is not printable, and every grapheme extender (a
    // combining mark); the `str` version keeps a grapheme extender that follows another
    // character, which shows with it.
    if c.escape_debug().len() == 1 {
        return false;
    }
    first || {
        let mut pair = [0u8; 8];
        let pair = {
            let n = 'a'.encode_utf8(&mut pair).len();
            let m = c.encode_utf8(&mut pair[n..]).len();
            std::str::from_utf8(&pair[..n + m]).unwrap_or_default()
        };
        pair.escape_debug().count() != pair.chars().count()
    }
}

/// True when `c` is a default-ignorable code point (a variation selector, U+034F, …).
fn ignorable(c: char) -> bool {
    static IGNORABLE: std::sync::LazyLock<Option<regex::Regex>> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"^\p{Default_Ignorable_Code_Point}$").ok());
    let mut buf = [0u8; 4];
    // Without the table (it is compiled in; the pattern cannot fail), nothing is taken for
    // ignorable, and the other tests still apply.
    IGNORABLE.as_ref().is_some_and(|r| r.is_match(c.encode_utf8(&mut buf)))
}

#[cfg(test)]
mod tests {
    use super::visible;

    #[test]
    fn text_that_shows_as_itself_is_unchanged() {
        for text in [
            "udhr-deu_1996-00",
            "https://example.org/a?b=c#d",
            "Menschenwürde",
            "世界人权宣言",
            "हिन्दी",
            "\"q\" 'q' `q`",
            "",
        ] {
            assert!(matches!(visible(text), std::borrow::Cow::Borrowed(t) if t == text), "{text}");
        }
    }

    #[test]
    fn invisible_and_line_breaking_characters_are_escaped() {
        assert_eq!(visible("udhr-deu_1996-00\u{200B}"), "udhr-deu_1996-00\\u{200b}");
        assert_eq!(visible("a`\n  robots: kept"), "a`\\n  robots: kept");
        assert_eq!(visible("x\u{202E}gpj.exe"), "x\\u{202e}gpj.exe");
        assert_eq!(visible("a\u{A0}b\u{2028}c\u{FEFF}d\u{AD}e\tf\r"), "a\\u{a0}b\\u{2028}c\\u{feff}d\\u{ad}e\\tf\\r");
        assert_eq!(visible("\u{3164}id"), "\\u{3164}id");
        assert_eq!(visible("\u{1b}[2J"), "\\u{1b}[2J");
    }

    #[test]
    fn a_combining_mark_is_escaped_only_with_nothing_before_it() {
        assert_eq!(visible("e\u{301}"), "e\u{301}");
        assert_eq!(visible("\u{301}e"), "\\u{301}e");
    }

    /// Marks that show as nothing after a letter are escaped all the same: the combining
    /// grapheme joiner, variation selectors, a Mongolian free variation selector, a Khmer
    /// inherent vowel (found by an adversarial review), and a Hangul filler.
    #[test]
    fn default_ignorable_code_points_are_escaped_anywhere() {
        for c in ['\u{34F}', '\u{FE0F}', '\u{FE00}', '\u{180B}', '\u{17B4}', '\u{E0100}', '\u{1160}', '\u{FFA0}'] {
            let id = format!("udhr-deu_1996-00{c}");
            assert_eq!(visible(&id), format!("udhr-deu_1996-00\\u{{{:x}}}", u32::from(c)), "U+{:04X}", u32::from(c));
            assert_ne!(super::terminal_safe(&id), id, "U+{:04X}", u32::from(c));
        }
    }

    #[test]
    fn terminal_output_keeps_its_lines_and_loses_its_escape_sequences() {
        let text = "a\tb\nc\\d";
        assert!(matches!(super::terminal_safe(text), std::borrow::Cow::Borrowed(t) if t == text));
        assert_eq!(super::terminal_safe("\u{1b}[2K\u{1b}[1GProprietary\n"), "\\u{1b}[2K\\u{1b}[1GProprietary\n");
        assert_eq!(super::terminal_safe("GPL-3.0\u{202E}\r"), "GPL-3.0\\u{202e}\\u{d}");
    }

    /// `shows_as_itself` is `visible` escaping nothing, backslashes aside.
    #[test]
    fn shows_as_itself_agrees_with_visible() {
        for text in ["udhr", "a\\b", "e\u{301}", "\u{301}e", "a\u{200B}", "a\nb", "", "\u{1b}[2J", "世界"] {
            let escaped = visible(&text.replace('\\', "")).into_owned() != text.replace('\\', "");
            assert_eq!(super::shows_as_itself(text), !escaped, "{text:?}");
        }
        assert!(super::shows_as_itself("a\\b") && !super::shows_as_itself("a\u{34F}"));
    }

    /// A backslash is doubled once anything is escaped, so that an id holding the text
    /// `\u{200b}` and one holding the character read differently.
    #[test]
    fn escapes_are_not_ambiguous() {
        assert_eq!(visible("a\\u{200b}"), "a\\\\u{200b}");
        assert_ne!(visible("a\\u{200b}"), visible("a\u{200B}"));
    }
}
