//! Text repair as ftfy 6.3.1 does it, so that a pipeline that names ftfy (Bifixer does, and
//! through it the parallel data of EuroLLM) gets the same bytes from Provenant.
//!
//! [`fix_text_segment`] is ftfy's function of that name: it repeats, until nothing changes,
//! HTML-entity unescaping, the mojibake repair ([`encoding::fix_encoding`]), the C1 control
//! fix, ligatures, character width, quote uncurling, line breaks, terminal escapes, control
//! characters and Unicode normalisation, each switched by [`Config`] as ftfy's
//! `TextFixerConfig` switches it. [`html::unescape`] is Python's `html.unescape`, which ftfy
//! and Bifixer both call; [`html::escape`] is the other way, the one escape of the HTML and
//! SVG that Provenant writes by hand. [`shown::visible`] is the one escape of outside text
//! (ids, URLs, rule names) that Provenant prints, so that invisible characters and line
//! breaks cannot make it read as something else.
//!
//! Where the behaviour is a table (ftfy's character classes, the code pages it tries) the
//! table is data in `tables.rs`, checked entry by entry against ftfy and `CPython` by
//! `tests/ftfy_reference.rs`, which also holds whole repairs to ftfy on real multilingual
//! text, mangled in the ways ftfy exists to undo.
//!
//! Not carried over: `fix_surrogates` (a Rust `str` cannot hold a surrogate, so there is
//! nothing to fix) and ftfy's `fix_text`, which only cuts text into lines and calls
//! `fix_text_segment` on each. Unicode data comes from the Rust crates (`regex`,
//! `unicode-normalization`), whose Unicode version is newer than Python 3.11's 14.0: text
//! with characters assigned after 14.0 may normalise differently, as it would under a newer
//! Python.

pub mod badness;
pub mod codepages;
pub mod encoding;
pub mod html;
pub mod python;
pub mod shown;
mod tables;

use unicode_normalization::UnicodeNormalization;

/// When ftfy unescapes HTML entities (`unescape_html`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnescapeHtml {
    /// Unescape unless the text contains `<`, which suggests it is HTML whose entities are
    /// meant to be there (ftfy's `"auto"`, its default).
    Auto,
    /// Unescape whatever the text holds.
    Always,
    /// Leave entities alone.
    Never,
}

/// The Unicode normalisation ftfy applies last (`normalization`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Normalization {
    /// Canonical composition, ftfy's default.
    Nfc,
    /// Canonical decomposition.
    Nfd,
    /// Compatibility composition.
    Nfkc,
    /// Compatibility decomposition.
    Nfkd,
}

/// ftfy's `TextFixerConfig`, field for field; [`Config::default`] is ftfy's default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools)] // one switch per ftfy fixer, as ftfy has them
pub struct Config {
    /// When to unescape HTML character references.
    pub unescape_html: UnescapeHtml,
    /// Remove ANSI terminal escape sequences.
    pub remove_terminal_escapes: bool,
    /// Undo mojibake ([`encoding::fix_encoding`]).
    pub fix_encoding: bool,
    /// In mojibake repair, read a space where UTF-8 needs byte 0xA0 as that byte.
    pub restore_byte_a0: bool,
    /// In mojibake repair, turn UTF-8 sequences that lost a byte into U+FFFD.
    pub replace_lossy_sequences: bool,
    /// Repair mojibake embedded in otherwise good text.
    pub decode_inconsistent_utf8: bool,
    /// Read C1 control characters as the Windows-1252 characters of their bytes.
    pub fix_c1_controls: bool,
    /// Spell out Latin ligatures.
    pub fix_latin_ligatures: bool,
    /// Replace halfwidth and fullwidth forms by their standard forms.
    pub fix_character_width: bool,
    /// Replace curly quotes by straight ones.
    pub uncurl_quotes: bool,
    /// Make every line break `\n`.
    pub fix_line_breaks: bool,
    /// Remove control characters that have no place in text.
    pub remove_control_chars: bool,
    /// The Unicode normalisation applied last, if any.
    pub normalization: Option<Normalization>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            unescape_html: UnescapeHtml::Auto,
            remove_terminal_escapes: true,
            fix_encoding: true,
            restore_byte_a0: true,
            replace_lossy_sequences: true,
            decode_inconsistent_utf8: true,
            fix_c1_controls: true,
            fix_latin_ligatures: true,
            fix_character_width: true,
            uncurl_quotes: true,
            fix_line_breaks: true,
            remove_control_chars: true,
            normalization: Some(Normalization::Nfc),
        }
    }
}

/// ftfy's `fix_text_segment(text, config)`: the text repaired as one segment.
#[must_use]
pub fn fix_text_segment(text: &str, config: &Config) -> String {
    let unescape = match config.unescape_html {
        UnescapeHtml::Auto => !text.contains('<'),
        UnescapeHtml::Always => true,
        UnescapeHtml::Never => false,
    };
    let mut text = text.to_owned();
    loop {
        let before = text.clone();
        if unescape {
            text = html::unescape_entities(&text);
        }
        // ftfy's `fix_text_segment` explains nothing, and without an explanation it calls
        // `fix_encoding(text)` with the default configuration: the byte-level switches of
        // `config` (restore_byte_a0, replace_lossy_sequences, decode_inconsistent_utf8, the C1
        // fix inside the repair) do not reach it.
        if config.fix_encoding {
            text = encoding::fix_encoding(&text, &Config::default());
        }
        if config.fix_c1_controls {
            text = encoding::fix_c1_controls(&text);
        }
        if config.fix_latin_ligatures {
            text = fix_latin_ligatures(&text);
        }
        if config.fix_character_width {
            text = fix_character_width(&text);
        }
        if config.uncurl_quotes {
            text = uncurl_quotes(&text);
        }
        if config.fix_line_breaks {
            text = fix_line_breaks(&text);
        }
        if config.remove_terminal_escapes {
            text = remove_terminal_escapes(&text);
        }
        if config.remove_control_chars {
            text = remove_control_chars(&text);
        }
        if let Some(form) = config.normalization {
            text = normalize(&text, form);
        }
        if text == before {
            return text;
        }
    }
}

/// The text in Unicode normal form `form`.
#[must_use]
pub fn normalize(text: &str, form: Normalization) -> String {
    match form {
        Normalization::Nfc => text.nfc().collect(),
        Normalization::Nfd => text.nfd().collect(),
        Normalization::Nfkc => text.nfkc().collect(),
        Normalization::Nfkd => text.nfkd().collect(),
    }
}

/// ftfy's `fix_latin_ligatures`: the Latin typographic ligatures and digraphs spelled out.
#[must_use]
pub fn fix_latin_ligatures(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            'Ĳ' => out.push_str("IJ"),
            'ĳ' => out.push_str("ij"),
            'ŉ' => out.push_str("ʼn"),
            'Ǳ' => out.push_str("DZ"),
            'ǲ' => out.push_str("Dz"),
            'ǳ' => out.push_str("dz"),
            'Ǆ' => out.push_str("DŽ"),
            'ǅ' => out.push_str("Dž"),
            'ǆ' => out.push_str("dž"),
            'Ǉ' => out.push_str("LJ"),
            'ǈ' => out.push_str("Lj"),
            'ǉ' => out.push_str("lj"),
            'Ǌ' => out.push_str("NJ"),
            'ǋ' => out.push_str("Nj"),
            'ǌ' => out.push_str("nj"),
            'ﬀ' => out.push_str("ff"),
            'ﬁ' => out.push_str("fi"),
            'ﬂ' => out.push_str("fl"),
            'ﬃ' => out.push_str("ffi"),
            'ﬄ' => out.push_str("ffl"),
            'ﬅ' => out.push_str("ſt"),
            'ﬆ' => out.push_str("st"),
            other => out.push(other),
        }
    }
    out
}

/// ftfy's `fix_character_width`: the ideographic space becomes a space, and every halfwidth
/// or fullwidth form in U+FF01..U+FFEF becomes what NFKC makes of it.
#[must_use]
pub fn fix_character_width(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{3000}' => out.push(' '),
            '\u{FF01}'..='\u{FFEF}' => out.extend(std::iter::once(c).nfkc()),
            other => out.push(other),
        }
    }
    out
}

/// ftfy's `uncurl_quotes`: curly single quotes (and U+02BC) become `'`, curly double quotes
/// `"`.
#[must_use]
pub fn uncurl_quotes(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\u{201C}'..='\u{201F}' => '"',
            '\u{02BC}' | '\u{2018}'..='\u{201B}' => '\'',
            other => other,
        })
        .collect()
}

/// ftfy's `fix_line_breaks`: CRLF, CR, LINE SEPARATOR, PARAGRAPH SEPARATOR and NEXT LINE
/// become `\n`, replaced in that order.
#[must_use]
pub fn fix_line_breaks(text: &str) -> String {
    text.replace("\r\n", "\n").replace(['\r', '\u{2028}', '\u{2029}', '\u{0085}'], "\n")
}

/// ftfy's `remove_terminal_escapes`: ANSI sequences `ESC [ (digits or ;)* letter`, removed.
#[must_use]
pub fn remove_terminal_escapes(text: &str) -> String {
    static ANSI: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        // Python's `\d` in a str pattern is any decimal digit, `\p{Nd}`.
        regex::Regex::new(r"\x1b\[(?:\p{Nd}|;)*[a-zA-Z]").expect("a fixed pattern")
    });
    ANSI.replace_all(text, "").into_owned()
}

/// ftfy's `remove_control_chars`: the C0 controls other than tab, line feed, form feed and
/// carriage return, DEL, the deprecated format characters U+206A..U+206F, the byte-order mark
/// and the interlinear annotation characters U+FFF9..U+FFFC, removed.
#[must_use]
pub fn remove_control_chars(text: &str) -> String {
    text.chars()
        .filter(|c| {
            !matches!(
                c,
                '\u{00}'..='\u{08}'
                    | '\u{0B}'
                    | '\u{0E}'..='\u{1F}'
                    | '\u{7F}'
                    | '\u{206A}'..='\u{206F}'
                    | '\u{FEFF}'
                    | '\u{FFF9}'..='\u{FFFC}'
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixers_do_what_ftfy_documents() {
        assert_eq!(fix_latin_ligatures("ﬁnal ﬂoor ǆ"), "final floor dž");
        assert_eq!(fix_character_width("ＬＯＵＤ\u{3000}ﾉｲｽﾞ"), "LOUD ノイス\u{3099}");
        assert_eq!(uncurl_quotes("\u{201C}here\u{201D} is \u{2018}a\u{2019}"), "\"here\" is 'a'");
        assert_eq!(fix_line_breaks("a\r\nb\rc\u{2028}d\u{85}e"), "a\nb\nc\nd\ne");
        assert_eq!(remove_terminal_escapes("\x1b[36;44mI'm blue\x1b[0m"), "I'm blue");
        assert_eq!(remove_control_chars("a\u{0}b\tc\u{feff}d\u{7f}"), "ab\tcd");
    }

    #[test]
    fn ftfy_examples_are_repaired() {
        let config = Config::default();
        assert_eq!(fix_text_segment("âœ” No problems", &config), "✔ No problems");
        assert_eq!(
            fix_text_segment("The Mona Lisa doesnÃƒÂ¢Ã¢â€šÂ¬Ã¢â€žÂ¢t have eyebrows.", &config),
            "The Mona Lisa doesn't have eyebrows."
        );
        assert_eq!(fix_text_segment("voilÃ le travail", &config), "voilà le travail");
        assert_eq!(fix_text_segment("&lt;hr&gt;", &config), "<hr>");
        assert_eq!(fix_text_segment("<b>&lt;hr&gt;</b>", &config), "<b>&lt;hr&gt;</b>");
    }
}
