//! The audit's own check of EuroLLM's heuristic rules on a kept document, written from the
//! book's definitions ("The EuroLLM recipe", *What the rules count*), not from
//! `prov-heuristics`' code: what the output of a `heuristics` stage may not contain.
//!
//! A kept text breaks the rules when a paragraph of it contains `lorem ipsum` (ASCII letters of
//! any case, white space between; across paragraphs it would be a false alarm where a removed
//! paragraph stood between them), the word `javascript` (ASCII, any case, no letter or number beside
//! it) or a curly bracket; when a paragraph (a line) has more uppercase letters over letters,
//! more hashes or ellipses over words, or more words without a letter over words, than the
//! thresholds; or when it has fewer characters than `min_chars`.

use prov_heuristics::Thresholds;

/// The first way a kept text breaks the rules, described; `None` when it keeps them.
pub(crate) fn violation(text: &str, t: &Thresholds) -> Option<String> {
    // Within one kept paragraph: a paragraph removed between two kept ones joins their
    // neighbours with a line feed in the output, which the input never had.
    if t.lorem_ipsum && text.split('\n').any(contains_lorem_ipsum) {
        return Some("contains `lorem ipsum`".into());
    }
    if t.javascript && contains_javascript(text) {
        return Some("contains the word `javascript`".into());
    }
    if t.curly_brackets && text.contains(['{', '}']) {
        return Some("contains a curly bracket".into());
    }
    for (i, paragraph) in text.split('\n').enumerate() {
        if let Some(why) = paragraph_violation(paragraph, t) {
            return Some(format!("paragraph {i} {why}"));
        }
    }
    let chars = text.chars().count() as u64;
    (chars < t.min_chars).then(|| format!("has {chars} characters, fewer than {}", t.min_chars))
}

/// Whether `lower` (ASCII-lowercased bytes) holds `word` at `at`.
fn at(lower: &[char], at: usize, word: &str) -> bool {
    word.chars().enumerate().all(|(k, w)| lower.get(at + k) == Some(&w))
}

fn ascii_lower(text: &str) -> Vec<char> {
    text.chars().map(|c| c.to_ascii_lowercase()).collect()
}

fn contains_lorem_ipsum(text: &str) -> bool {
    let chars = ascii_lower(text);
    (0..chars.len()).any(|i| {
        if !at(&chars, i, "lorem") {
            return false;
        }
        let mut j = i + 5;
        let spaces = chars[j..].iter().take_while(|c| c.is_whitespace()).count();
        j += spaces;
        spaces > 0 && at(&chars, j, "ipsum")
    })
}

fn contains_javascript(text: &str) -> bool {
    let chars = ascii_lower(text);
    let alnum = |c: Option<&char>| c.is_some_and(|c| c.is_alphabetic() || c.is_numeric());
    (0..chars.len()).any(|i| {
        at(&chars, i, "javascript") && !alnum(i.checked_sub(1).and_then(|p| chars.get(p))) && !alnum(chars.get(i + 10))
    })
}

/// Ellipses in a word count: `...` without overlap from the left, and `…`.
fn ellipses(text: &str) -> u64 {
    let mut n = text.matches('…').count() as u64;
    let mut rest = text;
    while let Some(p) = rest.find("...") {
        n += 1;
        rest = &rest[p + 3..];
    }
    n
}

fn paragraph_violation(paragraph: &str, t: &Thresholds) -> Option<String> {
    let words: Vec<&str> = paragraph.split(char::is_whitespace).filter(|w| !w.is_empty()).collect();
    if words.is_empty() {
        return None;
    }
    let letters = paragraph.chars().filter(|c| c.is_alphabetic()).count();
    let upper = paragraph.chars().filter(|c| c.is_alphabetic() && c.is_uppercase()).count();
    let n = words.len() as f64;
    let share = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    if share(upper, letters) > t.max_uppercase_fraction {
        return Some(format!("has {upper} uppercase letters of {letters}"));
    }
    let hashes = paragraph.matches('#').count();
    if hashes as f64 / n > t.max_symbol_word_ratio || ellipses(paragraph) as f64 / n > t.max_symbol_word_ratio {
        return Some(format!("has {hashes} hashes and {} ellipses in {} words", ellipses(paragraph), words.len()));
    }
    let bare = words.iter().filter(|w| !w.chars().any(char::is_alphabetic)).count();
    (bare as f64 / n > t.max_non_alpha_word_fraction)
        .then(|| format!("has {bare} of {} words without a letter", words.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definitions_hold() {
        let t = Thresholds::default();
        let long = "Das ist ein ganz gewöhnlicher Absatz mit genug Wörtern und Buchstaben. ".repeat(4);
        assert_eq!(violation(&long, &t), None);
        assert!(violation(&format!("{long}LOREM \tipsum"), &t).unwrap().contains("lorem"));
        // Across kept paragraphs a removed one may have stood between them.
        assert_eq!(violation(&format!("{long}lorem\nipsum"), &t), None);
        assert!(violation(&format!("{long}JavaScript-Code"), &t).unwrap().contains("javascript"));
        assert_eq!(violation(&format!("{long} nojavascript javascripts"), &t), None);
        assert!(violation(&format!("{long}}}"), &t).unwrap().contains("curly"));
        assert!(violation(&format!("{long}\nKAUFEN SIE JETZT"), &t).unwrap().contains("uppercase"));
        assert!(violation(&format!("{long}\nwarte ... nur … so"), &t).unwrap().contains("ellipses"));
        assert!(violation(&format!("{long}\n1 2 3 Wort"), &t).unwrap().contains("without a letter"));
        assert!(violation("kurz", &t).unwrap().contains("fewer than 200"));
        // Exactly at a threshold is kept: 2 of 5 letters uppercase is 0.4.
        assert_eq!(paragraph_violation("ABcde", &t), None);
    }
}
