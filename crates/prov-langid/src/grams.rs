//! The features a text is identified by: the character n-grams of its words.
//!
//! A text is lowercased (Unicode full lowercasing, so `İ` is `i̇`) and cut into words: maximal
//! runs of `Alphabetic` characters; digits, punctuation, symbols, marks that are not
//! `Alphabetic` and whitespace separate words. Each word is padded with a space on each side,
//! and every run of 1 to `max_order` consecutive characters of the padded word is a gram,
//! except the lone space. `"Ab1c"` gives the words `ab` and `c`, and at order 2 the grams
//! `a`, `b`, ` a`, `ab`, `b `, then `c`, ` c`, `c `.
//!
//! A gram is packed into a [`Gram`] (22 bits a character, the first in the highest bits), whose
//! order as an integer is the lexicographic order of its characters by code point.

/// The Unicode version whose `Alphabetic` property and lowercase mappings (Rust's `char`
/// methods) cut words here. A toolchain with other tables cuts some texts differently, which
/// changes models and detections: the test below fails then, and the stage versions must be
/// raised with it.
pub const UNICODE_VERSION: (u8, u8, u8) = (17, 0, 0);

/// The highest gram order a model may use.
pub const MAX_ORDER: usize = 5;

/// Bits per character in a [`Gram`]: a code point plus one (0 marks no character).
const CHAR_BITS: u32 = 22;

/// A gram of 1 to [`MAX_ORDER`] characters, packed.
pub type Gram = u128;

/// Packs `chars` (1 to [`MAX_ORDER`] of them).
pub fn pack(chars: &[char]) -> Gram {
    debug_assert!(!chars.is_empty() && chars.len() <= MAX_ORDER);
    let mut g: Gram = 0;
    for i in 0..MAX_ORDER {
        g <<= CHAR_BITS;
        if let Some(c) = chars.get(i) {
            g |= Gram::from(u32::from(*c) + 1);
        }
    }
    g
}

/// The characters of a packed gram, or `None` for bits that no [`pack`] gives.
pub fn unpack(g: Gram) -> Option<Vec<char>> {
    let mut out = Vec::with_capacity(MAX_ORDER);
    let mut ended = false;
    for i in (0..MAX_ORDER).rev() {
        let v = ((g >> (CHAR_BITS * i as u32)) & ((1 << CHAR_BITS) - 1)) as u32;
        if v == 0 {
            ended = true;
        } else if ended {
            return None;
        } else {
            out.push(char::from_u32(v - 1)?);
        }
    }
    if out.is_empty() || g >> (CHAR_BITS * MAX_ORDER as u32) != 0 {
        return None;
    }
    Some(out)
}

/// Calls `f` with every gram of `text` up to `max_order` (at most [`MAX_ORDER`]), in text
/// order: word by word, and within a word by start position, then by length.
pub fn for_each_gram(text: &str, max_order: usize, mut f: impl FnMut(Gram)) {
    let max_order = max_order.min(MAX_ORDER);
    let mut word: Vec<char> = vec![' '];
    let mut emit = |word: &mut Vec<char>| {
        if word.len() > 1 {
            word.push(' ');
            for start in 0..word.len() {
                for len in 1..=max_order.min(word.len() - start) {
                    let gram = &word[start..start + len];
                    if gram != [' '] {
                        f(pack(gram));
                    }
                }
            }
        }
        word.clear();
        word.push(' ');
    };
    for c in text.chars() {
        if c.is_alphabetic() {
            word.extend(c.to_lowercase());
        } else {
            emit(&mut word);
        }
    }
    emit(&mut word);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grams(text: &str, order: usize) -> Vec<String> {
        let mut out = Vec::new();
        for_each_gram(text, order, |g| out.push(unpack(g).unwrap().into_iter().collect()));
        out
    }

    #[test]
    fn words_are_alphabetic_runs_padded_with_spaces() {
        assert_eq!(grams("Ab1c", 2), [" a", "a", "ab", "b", "b ", " c", "c", "c "]);
        assert_eq!(grams("  ", 3), Vec::<String>::new());
        assert_eq!(grams("İ", 1), ["i", "\u{307}"]);
        // A non-alphabetic combining acute splits the word; precomposed letters do not.
        assert_eq!(grams("e\u{301}", 1), ["e"]);
        assert_eq!(grams("é", 2), [" é", "é", "é "]);
        // " 日本語 ": 4 grams from the leading space, then 4, 3 and 2.
        assert_eq!(grams("日本語", 5).len(), 13);
    }

    #[test]
    fn the_unicode_tables_are_the_ones_the_stages_were_versioned_with() {
        assert_eq!(char::UNICODE_VERSION, UNICODE_VERSION, "raise langid-train's and langid's versions");
    }

    #[test]
    fn packing_keeps_lexicographic_order() {
        let words = ["a", "ab", "abc", "b", "\u{10ffff}", "a\u{10ffff}", " ", "  a"];
        let mut by_chars: Vec<Vec<char>> = words.iter().map(|w| w.chars().collect()).collect();
        by_chars.sort();
        let mut packed: Vec<Gram> = words.iter().map(|w| pack(&w.chars().collect::<Vec<_>>())).collect();
        packed.sort_unstable();
        assert_eq!(packed.iter().map(|g| unpack(*g).unwrap()).collect::<Vec<_>>(), by_chars);
        assert_eq!(unpack(0), None);
        assert_eq!(unpack(1), None, "a gap before the last character");
    }

    proptest::proptest! {
        #[test]
        fn every_gram_unpacks_to_a_substring_of_a_padded_word(text in "\\PC{0,40}", order in 1usize..=MAX_ORDER) {
            let lower: String = text.chars().flat_map(char::to_lowercase).collect();
            for_each_gram(&text, order, |g| {
                let chars = unpack(g).unwrap();
                assert!(chars.len() <= order && chars != [' ']);
                let s: String = chars.iter().filter(|c| **c != ' ').collect();
                assert!(lower.contains(&s), "{s:?} not in {lower:?}");
            });
        }
    }
}
