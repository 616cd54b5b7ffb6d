//! Provenant's Bifixer against PyPI `bifixer` 0.8.12 itself (pinned in
//! lockfiles/requirements.txt), run as its users run it (`bifixer IN OUT SRC TRG`, with
//! `--ignore_segmentation`, whose sentence models no registry serves).
//!
//! The pairs are the quickstart's UDHR articles, English beside each of seven translations
//! (German, Spanish, French, Italian, Dutch, Polish, Portuguese), paired paragraph by
//! paragraph; each pair also comes mangled the ways Bifixer exists to repair: UTF-8 read
//! through a single-byte code page, HTML tags and entities (plain and spaced apart), spaces
//! before punctuation, doubled apostrophes in contractions, no-break and typographic spaces,
//! C1 controls and private-use characters, misspellings from the language's own orthographic
//! table in three casings, an empty side, a side over 5,000 characters and exact duplicates.
//! Maltese pairs built from Bifixer's detokenisation list cover that step. Every kept pair's
//! two sides and hash must equal Bifixer's, in Bifixer's order, and the dropped pairs must be
//! the ones Bifixer drops; a second run with Bifixer's `--ignore_*` flags covers [`Options`].
//!
//! Without `.venv` the test fails under `CI=true` and is skipped elsewhere.

#![allow(clippy::unwrap_used, clippy::print_stderr, missing_docs)]

use std::path::Path;

use prov_parallel::bifixer::{Options, Outcome, fix_pair};
use prov_parallel::rules::Rules;
use serde_json::Value;

const LANGUAGES: [(&str, &str); 7] =
    [("de-1996", "de"), ("es", "es"), ("fr", "fr"), ("it", "it"), ("nl", "nl"), ("pl", "pl"), ("pt-PT", "pt")];

/// The quickstart's UDHR paragraphs: `(language, article) -> paragraphs`.
fn udhr() -> std::collections::BTreeMap<(String, String), Vec<String>> {
    let sample = prov_testkit::repo_root().join("recipes/data/quickstart/udhr-sample.jsonl");
    let mut out = std::collections::BTreeMap::new();
    for line in fs_err::read_to_string(sample).unwrap().lines() {
        let doc: Value = serde_json::from_str(line).unwrap();
        let article = doc["id"].as_str().unwrap().rsplit('-').next().unwrap().to_owned();
        let paragraphs: Vec<String> =
            doc["text"].as_str().unwrap().split('\n').filter(|p| !p.trim().is_empty()).map(str::to_owned).collect();
        out.insert((doc["language"].as_str().unwrap().to_owned(), article), paragraphs);
    }
    out
}

/// A deterministic stream of small numbers, so that the mangling is the same on every run.
struct Picks(u64);

impl Picks {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        usize::try_from((self.0 >> 33) % n as u64).unwrap()
    }
}

/// Mojibake of `text`: its UTF-8 bytes read as Windows-1252 (or Latin-1 where 1252 has none).
fn mojibake(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            0x80 => '€',
            0x82 => '‚',
            0x84 => '„',
            0x85 => '…',
            0x91 => '‘',
            0x92 => '’',
            0x93 => '“',
            0x94 => '”',
            0x96 => '–',
            0x97 => '—',
            0x99 => '™',
            0x9C => 'œ',
            0xA9 => '©',
            other => char::from(other),
        })
        .collect()
}

/// One mangled variant of `text` (`kind` chooses which), with `misspelt` words of the language's
/// orthographic table to plant.
fn mangle(text: &str, kind: usize, misspelt: &[String], picks: &mut Picks) -> String {
    let cut = text.char_indices().nth(text.chars().count() / 2).map_or(0, |(i, _)| i);
    let (head, tail) = text.split_at(cut);
    match kind {
        0 => text.to_owned(),
        1 => mojibake(text),
        2 => format!("<p>{head} <b>&amp; &eacute;</b> &lt;{tail}</p>"),
        3 => format!("{head} & # 39 ; &#233; &quot;{tail} &nbsp;"),
        4 => text.replace(',', " ,").replace('.', " .").replace('(', "( ").replace(':', " :"),
        5 => format!("{head} don''t it''s we''re{tail}"),
        6 => text.replacen(' ', "\u{a0}", 2).replacen(' ', "\u{2009}", 1) + "\u{85}\u{e000}\u{fffd}",
        7 => {
            if misspelt.is_empty() {
                return format!("{head}  \u{b}\u{c} \u{1c}{tail}");
            }
            let word = &misspelt[picks.below(misspelt.len())];
            let capital: String =
                word.chars().take(1).flat_map(char::to_uppercase).chain(word.chars().skip(1)).collect();
            format!("{word} {head} {capital}, {} {tail}", word.to_uppercase())
        }
        8 => format!("{head}\u{3000}Ｕ\u{ff2e} ﬁ “{tail}”"),
        _ => unreachable!(),
    }
}

/// A pair as the test writes it: `(id, source, target)`.
type Pair = (String, String, String);

/// The test's pairs per language pair.
fn pairs(rules_orthography: &dyn Fn(&str) -> Vec<String>) -> Vec<(String, Vec<Pair>)> {
    let udhr = udhr();
    let mut picks = Picks(17);
    let mut out = Vec::new();
    for (code, lang) in LANGUAGES {
        let en_words = rules_orthography("en");
        let their_words = rules_orthography(lang);
        let mut list = Vec::new();
        for ((language, article), paragraphs) in &udhr {
            if language != code {
                continue;
            }
            let english = &udhr[&("en".to_owned(), article.clone())];
            if english.len() != paragraphs.len() {
                continue;
            }
            for (n, (src, trg)) in english.iter().zip(paragraphs).enumerate() {
                // Two different manglings of every pair.
                let first = picks.below(9);
                for kind in [first, (first + 1 + picks.below(8)) % 9] {
                    let id = format!("{article}.{n}.{kind}");
                    list.push((
                        id,
                        mangle(src, kind, &en_words, &mut picks),
                        mangle(trg, kind, &their_words, &mut picks),
                    ));
                }
            }
        }
        // Exact duplicates, an empty side, a side over 5,000 characters, a side that only
        // whitespace is left of.
        let first = list[0].clone();
        list.push((format!("{}.again", first.0), first.1.clone(), first.2.clone()));
        list.push(("empty".into(), String::new(), "x".into()));
        list.push(("long".into(), "Ã© ,".repeat(1300), "short .".into()));
        list.push(("blank".into(), "<br>".into(), "text".into()));
        out.push((lang.to_owned(), list));
    }
    out
}

/// Maltese pairs built from Bifixer's detokenisation list.
fn maltese(rules: &Rules) -> Vec<Pair> {
    let mt = rules.language("mt").unwrap();
    let mut entries: Vec<(&String, &Vec<String>)> = mt.detokenisation.iter().collect();
    entries.sort();
    entries
        .iter()
        .enumerate()
        .map(|(i, (word, next))| {
            let joined = next.join(" ");
            (
                format!("mt{i}"),
                "The right of everyone.".to_owned(),
                format!("Id-dritt {word} {joined} kulħadd u {word}  {joined}."),
            )
        })
        .collect()
}

fn run_bifixer(python: &Path, dir: &Path, src: &str, trg: &str, pairs: &[Pair], flags: &[&str]) -> Vec<Vec<String>> {
    let rows: Vec<(&str, &str, &str)> = pairs.iter().map(|(id, s, t)| (id.as_str(), s.as_str(), t.as_str())).collect();
    prov_testkit::bifixer(python, dir, (src, trg), &rows, flags)
}

fn ours(rules: &Rules, src: &str, trg: &str, pairs: &[Pair], options: Options) -> Vec<Vec<String>> {
    let (s, t) = (rules.language(src).unwrap(), rules.language(trg).unwrap());
    pairs
        .iter()
        .filter_map(|(id, source, target)| match fix_pair(source, target, s, t, options) {
            Outcome::Kept { source, target, hash } => Some(vec![source, target, id.clone(), hash, "1".to_owned()]),
            Outcome::EmptyInput(_) | Outcome::EmptyAfterRepair(_) => None,
        })
        .collect()
}

fn compare(label: &str, theirs: &[Vec<String>], ours: &[Vec<String>], total: usize) {
    let mut wrong = Vec::new();
    for (t, o) in theirs.iter().zip(ours) {
        if t != o {
            wrong.push(format!("bifixer {t:?}\n   ours {o:?}"));
        }
    }
    assert_eq!(
        theirs.len(),
        ours.len(),
        "{label}: Bifixer kept {} of {total} pairs, Provenant {}",
        theirs.len(),
        ours.len()
    );
    assert!(
        wrong.is_empty(),
        "{label}: {} of {} pairs differ; first:\n{}",
        wrong.len(),
        theirs.len(),
        wrong[..wrong.len().min(4)].join("\n")
    );
}

#[test]
fn pairs_hashes_and_drops_equal_bifixers() {
    let Some(python) = prov_testkit::venv_python() else { return };
    let dir = std::env::temp_dir().join(format!("prov-bifixer-{}", std::process::id()));
    fs_err::create_dir_all(&dir).unwrap();
    let rules_path = dir.join("rules.json");
    prov_testkit::bifixer_rules(&python, &rules_path, &["en", "de", "es", "fr", "it", "nl", "pl", "pt", "mt"]);
    let rules = Rules::parse(&fs_err::read(&rules_path).unwrap()).unwrap();
    assert_eq!(rules.bifixer, "0.8.12");

    let words = |lang: &str| -> Vec<String> {
        let mut w: Vec<String> = rules.language(lang).unwrap().orthography.keys().cloned().collect();
        w.sort();
        w.into_iter().step_by(37).collect()
    };
    let mut checked = 0;
    for (lang, list) in pairs(&words) {
        let theirs = run_bifixer(&python, &dir, "en", &lang, &list, &[]);
        compare(&format!("en-{lang}"), &theirs, &ours(&rules, "en", &lang, &list, Options::default()), list.len());
        checked += theirs.len();
        if lang == "pt" {
            let flags = ["--ignore_orthography", "--ignore_html", "--ignore_long"];
            let options = Options { orthography: false, html: false, skip_long: false, ..Options::default() };
            let theirs = run_bifixer(&python, &dir, "en", &lang, &list, &flags);
            compare("en-pt with --ignore_*", &theirs, &ours(&rules, "en", &lang, &list, options), list.len());
            let flags = ["--ignore_characters", "--ignore_normalization", "--ignore_detokenization"];
            let options =
                Options { characters: false, normalization: false, detokenization: false, ..Options::default() };
            let theirs = run_bifixer(&python, &dir, "en", &lang, &list, &flags);
            compare("en-pt with other --ignore_*", &theirs, &ours(&rules, "en", &lang, &list, options), list.len());
        }
    }
    let mt = maltese(&rules);
    let theirs = run_bifixer(&python, &dir, "en", "mt", &mt, &[]);
    compare("en-mt", &theirs, &ours(&rules, "en", "mt", &mt, Options::default()), mt.len());
    assert!(checked > 1000, "only {checked} pairs compared");
    fs_err::remove_dir_all(&dir).unwrap();
}
