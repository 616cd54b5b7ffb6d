//! A deterministic synthetic web corpus of any size, so that scale is measured rather than
//! assumed (`synthetic-corpus --size 20G --out DIR`).
//!
//! Its text is real: sentences of the main job's documents (the UDHR in 500 languages and
//! the Debian manual pages and fortunes, `recipes/data/mini-apertus/corpus`), recombined
//! within each language. Each document is placed on one of the hosts of the main job's
//! robots.txt snapshot (`recipes/data/mini-apertus/robots`), so the `robots` stage meets real
//! files; hosts are drawn with a heavy tail, as on the web. Into the text go what the
//! filters look for: e-mail addresses (one document in ten), IBANs of nine countries with
//! valid check digits (compact, or in groups of four as printed), IPv4 addresses; and 3% of documents are exact copies of an earlier one,
//! 3% near copies (a few words replaced), for dedup.
//!
//! The same `--size`, `--seed` and input files give the same bytes, on any machine: a
//! `SplitMix64` generator drives every choice, and nothing is read from the clock or the
//! environment. Output: `DIR/corpus/part-NNNNN.jsonl`, 256 MiB each at most, each line a
//! document with the main job's fields (`id`, `text`, `url`, `date`, `language`,
//! `license`, `source`).

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufWriter, Write as _};
use std::path::Path;

/// `SplitMix64`: small, fast, and the same on every platform.
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        // The modulo bias is below 2^-40 for the sizes used here.
        usize::try_from(self.next_u64() % n as u64).unwrap_or(0)
    }

    /// True with probability `percent` / 100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }
}

/// The sentences of one language, with the license their documents declare.
struct Language {
    code: String,
    license: String,
    sentences: Vec<String>,
}

/// What the corpus is made from.
pub struct Material {
    languages: Vec<Language>,
    hosts: Vec<String>,
}

impl Material {
    /// Reads the sentences of every `*.jsonl` document file in `corpus` and the host names of
    /// the robots.txt snapshot `robots` (one file per host, or `<host>/robots.txt`).
    pub fn load(corpus: &Path, robots: &Path) -> std::io::Result<Self> {
        let mut by_language: BTreeMap<String, Language> = BTreeMap::new();
        let mut files: Vec<_> = fs_err::read_dir(corpus)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        files.sort();
        for path in files {
            for line in std::io::BufReader::new(fs_err::File::open(&path)?).lines() {
                let line = line?;
                let Ok(doc) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
                let (Some(text), Some(code)) = (doc["text"].as_str(), doc["language"].as_str()) else { continue };
                let license = doc["license"].as_str().unwrap_or("MIT").to_owned();
                let entry = by_language.entry(code.to_owned()).or_insert_with(|| Language {
                    code: code.to_owned(),
                    license,
                    sentences: Vec::new(),
                });
                entry.sentences.extend(sentences(text));
            }
        }
        let mut hosts: Vec<String> = fs_err::read_dir(robots)?
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .collect();
        hosts.sort();
        let languages: Vec<Language> = by_language.into_values().filter(|l| !l.sentences.is_empty()).collect();
        if languages.is_empty() || hosts.is_empty() {
            return Err(std::io::Error::other(
                "no sentences or no hosts: give the main job's corpus and robots folders",
            ));
        }
        Ok(Self { languages, hosts })
    }
}

/// Splits a text into sentences (at `.`, `!`, `?`, `。`, `।` and line ends), trimmed, each of
/// at least three characters.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        current.push(c);
        if matches!(c, '.' | '!' | '?' | '。' | '।' | '\n') {
            let s = current.trim();
            if s.chars().count() >= 3 {
                out.push(s.to_owned());
            }
            current.clear();
        }
    }
    let s = current.trim();
    if s.chars().count() >= 3 {
        out.push(s.to_owned());
    }
    out
}

/// IBAN countries whose account part is all digits, with their lengths (SWIFT IBAN Registry).
const IBAN_COUNTRIES: [(&str, usize); 9] =
    [("AT", 20), ("BE", 16), ("CH", 21), ("DE", 22), ("ES", 24), ("FI", 18), ("PL", 28), ("PT", 25), ("SI", 19)];

/// A valid IBAN: random digits, check digits by ISO 7064 MOD 97-10.
fn iban(rng: &mut Rng) -> String {
    let (country, length) = IBAN_COUNTRIES[rng.below(IBAN_COUNTRIES.len())];
    let account: String =
        (0..length - 4).map(|_| char::from(b'0' + u8::try_from(rng.below(10)).unwrap_or(0))).collect();
    // Account, then the country's letters as numbers (A = 10), then "00".
    let mut rem = 0u64;
    let letters = country.bytes().map(|b| u64::from(b - b'A') + 10);
    for d in account.bytes().map(|b| u64::from(b - b'0')) {
        rem = (rem * 10 + d) % 97;
    }
    for v in letters {
        rem = (rem * 100 + v) % 97;
    }
    rem = (rem * 100) % 97;
    format!("{country}{:02}{account}", 98 - rem)
}

/// Words for the local parts of e-mail addresses.
const NAMES: [&str; 12] =
    ["anna", "jonas", "lea", "marco", "sofia", "pierre", "ines", "lukas", "elena", "noah", "clara", "matteo"];

/// Writes the corpus; returns the number of documents and bytes written.
pub fn write_corpus(material: &Material, size: u64, seed: u64, out: &Path) -> std::io::Result<(u64, u64)> {
    const PART: u64 = 256 << 20;
    let dir = out.join("corpus");
    fs_err::create_dir_all(&dir)?;
    let mut rng = Rng::new(seed);
    let mut recent: Vec<(String, usize)> = Vec::new(); // text and language of recent documents
    let (mut written, mut documents, mut part, mut in_part) = (0u64, 0u64, 0u32, 0u64);
    let mut file = BufWriter::with_capacity(1 << 20, fs_err::File::create(dir.join("part-00000.jsonl"))?);
    while written < size {
        let roll = rng.below(100);
        let (text, lang) = if roll < 3 && !recent.is_empty() {
            recent[rng.below(recent.len())].clone()
        } else if roll < 6 && !recent.is_empty() {
            let (text, lang) = recent[rng.below(recent.len())].clone();
            (near_copy(&text, &mut rng), lang)
        } else {
            let lang = rng.below(material.languages.len());
            (fresh_text(material, lang, &mut rng), lang)
        };
        if recent.len() < 1000 {
            recent.push((text.clone(), lang));
        } else {
            let slot = rng.below(recent.len());
            recent[slot] = (text.clone(), lang);
        }
        let language = &material.languages[lang];
        // A heavy tail: a few hosts hold many documents.
        let host =
            &material.hosts[(rng.below(material.hosts.len()) * rng.below(material.hosts.len())) / material.hosts.len()];
        let doc = serde_json::json!({
            "id": format!("synthetic-{documents:010}"),
            "text": text,
            "url": format!("https://{host}/{}/{documents}", language.code),
            "date": "2024-06-01",
            "language": language.code,
            "license": language.license,
            "source": "synthetic",
        });
        let line = serde_json::to_string(&doc).map_err(std::io::Error::other)?;
        if in_part > 0 && in_part + line.len() as u64 + 1 > PART {
            file.flush()?;
            part += 1;
            in_part = 0;
            file = BufWriter::with_capacity(1 << 20, fs_err::File::create(dir.join(format!("part-{part:05}.jsonl")))?);
        }
        writeln!(file, "{line}")?;
        in_part += line.len() as u64 + 1;
        written += line.len() as u64 + 1;
        documents += 1;
    }
    file.flush()?;
    Ok((documents, written))
}

/// 3 to 30 sentences of one language, with what the PII filters look for mixed in.
fn fresh_text(material: &Material, lang: usize, rng: &mut Rng) -> String {
    let language = &material.languages[lang];
    let count = 3 + rng.below(28);
    let mut parts: Vec<String> =
        (0..count).map(|_| language.sentences[rng.below(language.sentences.len())].clone()).collect();
    if rng.percent(10) {
        let host = &material.hosts[rng.below(material.hosts.len())];
        let at = rng.below(parts.len());
        parts.insert(at, format!("{}.{}@{host}", NAMES[rng.below(NAMES.len())], rng.below(1000)));
    }
    if rng.percent(3) {
        let at = rng.below(parts.len());
        let iban = iban(rng);
        // Half as stored (compact), half as printed: in groups of four.
        let shown = if rng.percent(50) {
            iban.as_bytes().chunks(4).map(|c| String::from_utf8_lossy(c).into_owned()).collect::<Vec<_>>().join(" ")
        } else {
            iban
        };
        parts.insert(at, format!("IBAN {shown}"));
    }
    if rng.percent(3) {
        let at = rng.below(parts.len());
        parts
            .insert(at, format!("{}.{}.{}.{}", 1 + rng.below(223), rng.below(256), rng.below(256), 1 + rng.below(254)));
    }
    parts.join(" ")
}

/// The text with one word in twenty (at least one) replaced by another word of it.
fn near_copy(text: &str, rng: &mut Rng) -> String {
    let mut words: Vec<&str> = text.split(' ').collect();
    let changes = (words.len() / 20).max(1);
    for _ in 0..changes {
        let (a, b) = (rng.below(words.len()), rng.below(words.len()));
        words[a] = words[b];
    }
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ibans_have_valid_check_digits() {
        // Checked with the published example of each scheme: DE89 3704 0044 0532 0130 00.
        let mut rem = 0u64;
        for c in "370400440532013000DE89".bytes() {
            rem = if c.is_ascii_digit() {
                (rem * 10 + u64::from(c - b'0')) % 97
            } else {
                (rem * 100 + u64::from(c - b'A') + 10) % 97
            };
        }
        assert_eq!(rem, 1);
        let mut rng = Rng::new(7);
        for _ in 0..200 {
            let i = iban(&mut rng);
            let moved = format!("{}{}", &i[4..], &i[..4]);
            let mut rem = 0u64;
            for c in moved.bytes() {
                rem = if c.is_ascii_digit() {
                    (rem * 10 + u64::from(c - b'0')) % 97
                } else {
                    (rem * 100 + u64::from(c - b'A') + 10) % 97
                };
            }
            assert_eq!(rem, 1, "{i}");
            assert_eq!(IBAN_COUNTRIES.iter().find(|(c, _)| i.starts_with(c)).unwrap().1, i.len());
        }
    }

    fn material() -> Material {
        Material {
            languages: vec![
                Language {
                    code: "en".into(),
                    license: "MIT".into(),
                    sentences: sentences("One two. Three four! Five six?"),
                },
                Language { code: "de".into(), license: "MIT".into(), sentences: sentences("Eins zwei.\nDrei vier.") },
            ],
            hosts: vec!["a.example".into(), "b.example".into(), "c.example".into()],
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_bytes_and_another_seed_others() {
        let dir = std::env::temp_dir().join(format!("prov-synthetic-{}", std::process::id()));
        let bytes = |seed: u64, sub: &str| {
            let out = dir.join(sub);
            let (docs, written) = write_corpus(&material(), 200_000, seed, &out).unwrap();
            let data = fs_err::read(out.join("corpus/part-00000.jsonl")).unwrap();
            assert_eq!(data.len() as u64, written);
            assert!(docs > 100 && written >= 200_000);
            data
        };
        let (a, b, c) = (bytes(1, "a"), bytes(1, "b"), bytes(2, "c"));
        assert_eq!(a, b);
        assert_ne!(a, c);
        let text = String::from_utf8(a).unwrap();
        // What the filters look for is there: duplicates, e-mail addresses, grouped IBANs.
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let texts: std::collections::BTreeSet<&str> = lines.iter().map(|l| l["text"].as_str().unwrap()).collect();
        assert!(texts.len() < lines.len(), "exact duplicates");
        assert!(text.contains('@') && text.contains("IBAN "), "e-mail addresses and IBANs");
        fs_err::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn splitmix_matches_its_reference_values() {
        // The first outputs of SplitMix64 seeded with 0, from its reference implementation
        // (Vigna, splitmix64.c).
        let mut rng = Rng::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }
}
