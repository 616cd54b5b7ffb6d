//! The ARPA back-off language model format, as `lmplz` writes it and KenLM, SRILM and others
//! read it: a `\data\` header with the n-gram count of each order, then one section per order
//! (`\1-grams:` …) with a line per n-gram, `log10 p`, a tab, the words separated by spaces, and
//! below the highest order a tab and the `log10` back-off weight; `\end\` closes the file.
//!
//! [`Arpa::write`] writes what `lmplz` writes for the same model, byte for byte: n-grams in
//! suffix order of their ids (by the last word's id, then the one before it, …), numbers as the
//! shortest decimal that reads back as the same single-precision float, in exponent form
//! (`1.5e-7`) only below 10⁻⁶ in magnitude, as the double-conversion library prints them.
//! [`Arpa::parse`] reads any well-formed ARPA file, with the line and a reason for any error.

use std::collections::HashMap;
use std::fmt::Write as _;

/// One n-gram: its word ids, `log10` probability and, below the highest order, its `log10`
/// back-off weight.
#[derive(Debug, Clone, PartialEq)]
pub struct NGramEntry {
    /// Word ids, oldest first.
    pub ids: Vec<u32>,
    /// `log10 p(last | the others)`.
    pub log_prob: f32,
    /// `log10` of the back-off weight; `None` at the highest order.
    pub backoff: Option<f32>,
}

/// A back-off n-gram model: the vocabulary (a word's id is its index) and the n-grams of each
/// order (index n-1).
#[derive(Debug, Clone, PartialEq)]
pub struct Arpa {
    /// Words by id.
    pub vocab: Vec<String>,
    /// The n-grams of each order.
    pub grams: Vec<Vec<NGramEntry>>,
}

/// Why an ARPA file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ARPA line {line}: {message}")]
pub struct ArpaError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// `x` as the double-conversion library's `ToShortestSingle` prints it with KenLM's settings:
/// the shortest digits that read back as `x` (of two equally short and equally near, the one
/// ending in an even digit), in decimal notation when the decimal exponent is from -6 to 20,
/// otherwise as `d.ddde-N` or `d.ddde+N`.
pub fn format_f32(x: f32) -> String {
    if x == 0.0 || !x.is_finite() {
        // `0` and `-0`; the trainer writes no infinite or NaN value.
        return format!("{x}");
    }
    let (mut digits, exponent) = sci_digits(&format!("{:e}", x.abs()));
    // A tie: x lies exactly halfway between two shortest candidates. Rust rounds the last
    // digit up; double-conversion (as David Gay's dtoa) picks the even one.
    if short_expansion(x) {
        tie_to_even(x, digits.len(), exponent, &mut digits);
    }
    let sign = if x < 0.0 { "-" } else { "" };
    if (-6..21).contains(&exponent) {
        let point = exponent + 1;
        if point <= 0 {
            return format!("{sign}0.{}{digits}", "0".repeat((-point) as usize));
        }
        let point = point as usize;
        if digits.len() <= point {
            return format!("{sign}{digits}{}", "0".repeat(point - digits.len()));
        }
        return format!("{sign}{}.{}", &digits[..point], &digits[point..]);
    }
    let mantissa = if digits.len() == 1 { digits } else { format!("{}.{}", &digits[..1], &digits[1..]) };
    format!("{sign}{mantissa}e{}{}", if exponent < 0 { "-" } else { "+" }, exponent.abs())
}

/// Whether `x`'s exact decimal expansion has at most 10 significant digits: only then can it
/// lie halfway between two shortest candidates of up to 9 digits. With `x = m 2^-q` (`m` odd),
/// the expansion is `m 5^q` shifted, so this is `m 5^q < 10^10`, or `x` an integer.
fn short_expansion(x: f32) -> bool {
    let bits = x.abs().to_bits();
    let (exp_bits, frac) = (bits >> 23, bits & 0x7f_ffff);
    let (mut m, mut e) = if exp_bits == 0 { (frac, -149i32) } else { (frac | 0x80_0000, exp_bits.cast_signed() - 150) };
    let tz = m.trailing_zeros();
    m >>= tz;
    e += tz.cast_signed();
    if e >= 0 {
        return true;
    }
    let mut v = u128::from(m);
    for _ in 0..-e {
        v *= 5;
        if v >= 10_000_000_000 {
            return false;
        }
    }
    true
}

/// Where `x` lies exactly halfway between two `k`-digit candidates, makes `digits` the one
/// ending in an even digit.
fn tie_to_even(x: f32, k: usize, exponent: i32, digits: &mut String) {
    let (exact, exact_exp) = sci_digits(&format!("{:.*e}", k, x.abs()));
    let (longer, _) = sci_digits(&format!("{:.*e}", k + 30, x.abs()));
    if exact_exp != exponent || !exact.ends_with('5') || longer.trim_end_matches('0') != exact {
        return;
    }
    let lower = &exact[..k];
    let last = lower.as_bytes()[k - 1];
    if last % 2 == 0 {
        lower.clone_into(digits);
    } else if last != b'9' {
        // The upper candidate: the same digits, the last one up by one (odd + 1 is even).
        *digits = format!("{}{}", &lower[..k - 1], char::from(last + 1));
    }
}

/// The significant digits and the decimal exponent of Rust's `{:e}` form (`2.5e-3`).
fn sci_digits(sci: &str) -> (String, i32) {
    let (mantissa, exponent) = sci.split_once('e').expect("`{:e}` has an exponent");
    (mantissa.replace('.', ""), exponent.parse().expect("an integer exponent"))
}

impl Arpa {
    /// The highest order.
    pub fn order(&self) -> usize {
        self.grams.len()
    }

    /// The ARPA text.
    pub fn write(&self) -> String {
        let mut out = String::from("\\data\\\n");
        for (n, g) in self.grams.iter().enumerate() {
            writeln!(out, "ngram {}={}", n + 1, g.len()).expect("writing to a String");
        }
        out.push('\n');
        for (n, g) in self.grams.iter().enumerate() {
            writeln!(out, "\\{}-grams:", n + 1).expect("writing to a String");
            for e in g {
                out.push_str(&format_f32(e.log_prob));
                out.push('\t');
                for (i, id) in e.ids.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    out.push_str(&self.vocab[*id as usize]);
                }
                if let Some(b) = e.backoff {
                    out.push('\t');
                    out.push_str(&format_f32(b));
                }
                out.push('\n');
            }
            out.push('\n');
        }
        out.push_str("\\end\\\n");
        out
    }

    /// Reads an ARPA file. Word ids are given in order of first appearance in the unigram
    /// section; every word of a higher-order n-gram must be a unigram.
    pub fn parse(text: &str) -> Result<Self, ArpaError> {
        let mut lines = text.split('\n').enumerate().map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)));
        let err = |line: usize, message: String| ArpaError { line, message };
        // Up to `\data\`.
        let mut last = 0;
        loop {
            let Some((n, l)) = lines.next() else { return Err(err(last, "no `\\data\\` header".into())) };
            last = n;
            if l.trim() == "\\data\\" {
                break;
            }
        }
        let mut declared: Vec<usize> = Vec::new();
        let mut next = None;
        for (n, l) in lines.by_ref() {
            let l = l.trim();
            if l.is_empty() {
                continue;
            }
            if let Some(spec) = l.strip_prefix("ngram ") {
                let (order, count) = spec
                    .split_once('=')
                    .and_then(|(o, c)| Some((o.trim().parse::<usize>().ok()?, c.trim().parse::<usize>().ok()?)))
                    .ok_or_else(|| err(n, format!("`{l}` is not `ngram N=COUNT`")))?;
                if order != declared.len() + 1 {
                    return Err(err(
                        n,
                        format!("expected the count of order {}, got order {order}", declared.len() + 1),
                    ));
                }
                declared.push(count);
            } else {
                next = Some((n, l.to_owned()));
                break;
            }
        }
        if declared.is_empty() {
            return Err(err(last, "the header declares no n-gram counts".into()));
        }
        let order = declared.len();
        if order > crate::gram::MAX_ORDER {
            return Err(err(
                last,
                format!("the model is of order {order}; Provenant reads models up to order {}", crate::gram::MAX_ORDER),
            ));
        }
        let mut vocab: Vec<String> = Vec::new();
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut grams: Vec<Vec<NGramEntry>> = Vec::with_capacity(order);
        let mut header = next;
        for (o, &count) in declared.iter().enumerate() {
            let expect = format!("\\{}-grams:", o + 1);
            let (n, l) = header.take().ok_or_else(|| err(last, format!("missing `{expect}`")))?;
            if l != expect {
                return Err(err(n, format!("expected `{expect}`, got `{l}`")));
            }
            let mut entries = Vec::with_capacity(count);
            for (n, l) in lines.by_ref() {
                last = n;
                if l.trim().is_empty() {
                    continue;
                }
                if l.starts_with('\\') {
                    header = Some((n, l.trim().to_owned()));
                    break;
                }
                entries.push(parse_line(n, l, o, order, &mut vocab, &mut ids)?);
            }
            if entries.len() != count {
                return Err(err(
                    last,
                    format!("the header declares {count} {}-grams, the section has {}", o + 1, entries.len()),
                ));
            }
            grams.push(entries);
        }
        match header {
            Some((n, l)) if l == "\\end\\" => {
                // KenLM refuses a model without sentence markers; the scorer finds them by name.
                for marker in ["<s>", "</s>"] {
                    if !ids.contains_key(marker) {
                        return Err(err(n, format!("the vocabulary has no `{marker}`")));
                    }
                }
                Ok(Self { vocab, grams })
            }
            Some((n, l)) => Err(err(n, format!("expected `\\end\\`, got `{l}`"))),
            None => Err(err(last, "missing `\\end\\`".into())),
        }
    }
}

/// One n-gram line of order `o + 1` of a model of `order`, at line `n`: its probability, its
/// words (new unigrams get the next id; a higher-order n-gram's words must be unigrams) and
/// its back-off weight (0 where a lower-order line has none).
fn parse_line(
    n: usize,
    l: &str,
    o: usize,
    order: usize,
    vocab: &mut Vec<String>,
    ids: &mut HashMap<String, u32>,
) -> Result<NGramEntry, ArpaError> {
    let err = |message: String| ArpaError { line: n, message };
    let fields: Vec<&str> = l.split(['\t', ' ']).filter(|f| !f.is_empty()).collect();
    let has_backoff = fields.len() == o + 3;
    if fields.len() != o + 2 && !(has_backoff && o + 1 < order) {
        return Err(err(format!(
            "a {}-gram line needs a probability, {} words and an optional back-off",
            o + 1,
            o + 1
        )));
    }
    let number = |s: &str| {
        s.parse::<f32>().ok().filter(|x| x.is_finite()).ok_or_else(|| err(format!("`{s}` is not a finite number")))
    };
    let log_prob = number(fields[0])?;
    let mut gram = Vec::with_capacity(o + 1);
    for w in &fields[1..=o + 1] {
        let id = if o == 0 {
            if ids.contains_key(*w) {
                return Err(err(format!("the unigram `{w}` is listed twice")));
            }
            let id = vocab.len() as u32;
            vocab.push((*w).to_owned());
            ids.insert((*w).to_owned(), id);
            id
        } else {
            *ids.get(*w).ok_or_else(|| err(format!("`{w}` is not a unigram")))?
        };
        gram.push(id);
    }
    let backoff = if has_backoff {
        Some(number(fields[o + 2])?)
    } else if o + 1 < order {
        Some(0.0)
    } else {
        None
    };
    Ok(NGramEntry { ids: gram, log_prob, backoff })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_as_double_conversion_writes_them() {
        assert_eq!(format_f32("-0.30103".parse().unwrap()), "-0.30103");
        assert_eq!(format_f32(0.0), "0");
        assert_eq!(format_f32(-99.0), "-99");
        assert_eq!(format_f32(-0.100_856_535), "-0.100856535");
        assert_eq!(format_f32(-1.5e-6), "-0.0000015");
        assert_eq!(format_f32(-1.5e-7), "-1.5e-7");
        assert_eq!(format_f32(-1e-7), "-1e-7");
        // -541/256 = -2.11328125 is exactly halfway between -2.1132812 and -2.1132813: the even one.
        assert_eq!(format_f32(-541.0 / 256.0), "-2.1132812");
        assert_eq!(format_f32(-769.0 / 256.0), "-3.0039062");
        assert_eq!(format_f32(-1049.0 / 256.0), "-4.0976562");
        assert_eq!(format_f32(-1.0e21), "-1e+21");
        assert_eq!(format_f32(-1234.5), "-1234.5");
        for x in [-0.123_456_79f32, -7.25e-9, -3.0e-6, -12.5] {
            assert_eq!(format_f32(x).parse::<f32>().unwrap().to_bits(), x.to_bits());
        }
    }

    #[test]
    fn parse_reads_what_write_writes_and_names_bad_lines() {
        let text = "\\data\\\nngram 1=3\nngram 2=1\n\n\\1-grams:\n-1\t<unk>\t0\n0\t<s>\t-0.5\n-0.25\t</s>\n\n\\2-grams:\n-0.1\t<s> </s>\n\n\\end\\\n";
        let arpa = Arpa::parse(text).unwrap();
        assert_eq!(arpa.vocab, ["<unk>", "<s>", "</s>"]);
        assert_eq!(arpa.grams[0][2].backoff, Some(0.0));
        assert_eq!(arpa.write(), text.replace("-0.25\t</s>\n", "-0.25\t</s>\t0\n"));
        let bad = text.replace("ngram 2=1", "ngram 2=2");
        assert_eq!(Arpa::parse(&bad).unwrap_err().message, "the header declares 2 2-grams, the section has 1");
        let bad = text.replace("<s> </s>", "<s> x");
        assert_eq!(Arpa::parse(&bad).unwrap_err(), ArpaError { line: 11, message: "`x` is not a unigram".into() });
        assert!(Arpa::parse(&text.replace("\\end\\", "")).is_err());
        // An order the scorer's fixed-size keys cannot hold is refused, not truncated.
        let header =
            "ngram 1=0\nngram 2=0\nngram 3=0\nngram 4=0\nngram 5=0\nngram 6=0\nngram 7=0\nngram 8=0\nngram 9=0\n";
        let deep = Arpa::parse(&format!("\\data\\\n{header}\n\\1-grams:\n")).unwrap_err();
        assert!(deep.message.contains("order 9"), "{deep}");
        // KenLM needs the sentence markers; non-finite numbers would decide filters by NaN.
        let bad = text.replace("<s> </s>", "</s> </s>").replace("0\t<s>\t-0.5", "0\t<x>\t-0.5");
        assert_eq!(Arpa::parse(&bad).unwrap_err().message, "the vocabulary has no `<s>`");
        for number in ["nan", "inf", "-inf"] {
            let bad = text.replace("-0.1\t<s>", &format!("{number}\t<s>"));
            assert!(Arpa::parse(&bad).unwrap_err().message.contains("finite"), "{number} was accepted");
        }
    }

    /// A model whose markers are not where lmplz puts them scores as if they were.
    #[test]
    fn the_scorer_finds_the_markers_by_name() {
        let lmplz = "\\data\\\nngram 1=4\n\n\\1-grams:\n-1\t<unk>\n-99\t<s>\n-0.25\t</s>\n-0.5\ta\n\n\\end\\\n";
        let moved =
            lmplz.replace("-1\t<unk>\n-99\t<s>\n-0.25\t</s>\n-0.5\ta\n", "-0.5\ta\n-0.25\t</s>\n-99\t<s>\n-1\t<unk>\n");
        let (a, b) =
            (crate::Model::new(&Arpa::parse(lmplz).unwrap()), crate::Model::new(&Arpa::parse(&moved).unwrap()));
        for sentence in ["a", "a b a", ""] {
            assert_eq!(a.score_sentence(sentence).to_bits(), b.score_sentence(sentence).to_bits(), "{sentence:?}");
        }
    }
}
