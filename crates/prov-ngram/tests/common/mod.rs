//! The real text the reference tests of this crate share: the main job's corpus (UDHR
//! translations and Debian fortunes, `recipes/data/mini-apertus/corpus/`, made by
//! `scripts/setup`), missing under `CI=true` a failure and elsewhere a skip.

#![allow(dead_code, clippy::unwrap_used)]

/// The texts of every `step`-th document of the main job's corpus from the `first`.
pub fn main_job_docs(first: usize, step: usize) -> Option<Vec<String>> {
    let corpus = prov_testkit::require(
        prov_testkit::repo_root().join("recipes/data/mini-apertus/corpus"),
        "the main job's corpus: run `scripts/setup`",
    )?;
    let mut out = Vec::new();
    for name in ["udhr.jsonl", "debian.jsonl"] {
        for line in fs_err::read_to_string(corpus.join(name)).unwrap().lines().skip(first).step_by(step) {
            let doc: serde_json::Value = serde_json::from_str(line).unwrap();
            out.push(doc["text"].as_str().unwrap().to_owned());
        }
    }
    Some(out)
}

/// The lines of those documents, lowercased, split at whitespace and joined by one space
/// (`lmplz` splits at space, tab, CR and NUL only: no other whitespace may reach it); empty
/// lines left out.
pub fn sentences(first: usize, step: usize) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for text in main_job_docs(first, step)? {
        for l in text.split('\n') {
            let words: Vec<String> = l.split_whitespace().map(str::to_lowercase).collect();
            if !words.is_empty() {
                out.push(words.join(" "));
            }
        }
    }
    Some(out)
}
