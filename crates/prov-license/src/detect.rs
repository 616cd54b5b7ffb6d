//! License files: which SPDX license texts the text of a `LICENSE`, `COPYING` or similar file
//! matches, as evidence for a reviewer beside what a source declares.
//!
//! The matching is the `spdx` crate's detection (a port of askalono): the texts are normalised
//! (case, punctuation, quotes, bullets, copyright lines, whitespace) and compared by the Dice
//! coefficient of their word bigrams with the texts of the SPDX license list the crate embeds
//! (693 entries). A score is in `[0, 1]`; at or above [`MATCH_THRESHOLD`] the file
//! is that license's text, give or take a copyright line. A match lists every license within
//! [`TIE`] of the best score, by id, and for a `-or-later` id also the `-only` one: the GNU
//! licenses' `-only` and `-or-later` forms share one text ("or later" is in the notice). The crate keeps its texts
//! in a hash map; every score is computed and sorted here, so the result does not depend on its
//! iteration order.
//!
//! ```
//! use prov_license::detect::{LicenseTexts, is_license_file};
//! let texts = LicenseTexts::load().unwrap();
//! let mit = "Permission is hereby granted, free of charge, to any person obtaining a copy of this \
//!     software and associated documentation files (the \"Software\"), to deal in the Software \
//!     without restriction, including without limitation the rights to use, copy, modify, merge, \
//!     publish, distribute, sublicense, and/or sell copies of the Software, and to permit persons \
//!     to whom the Software is furnished to do so, subject to the following conditions:\n\nThe \
//!     above copyright notice and this permission notice shall be included in all copies or \
//!     substantial portions of the Software.\n\nTHE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT \
//!     WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF \
//!     MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE \
//!     AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN \
//!     AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE \
//!     SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.";
//! let found = texts.matches(mit);
//! assert_eq!(found.best.as_deref(), Some("MIT"));
//! assert!(is_license_file("LICENSE.md") && !is_license_file("licensed-data.jsonl"));
//! ```

use spdx::detection::{Store, TextData};

/// The score at or above which a file is taken to be a license's text.
pub const MATCH_THRESHOLD: f32 = 0.9;

/// Scores within this of the best are ties (licenses that share one text).
pub const TIE: f32 = 0.001;

/// The file names (lower case, before any `.`, `-` or `_` suffix) that hold license texts or
/// notices: `LICENSE`, `LICENSE.md`, `LICENSE-MIT`, `COPYING.LESSER`, Debian's `copyright`.
const LICENSE_FILE_NAMES: [&str; 6] = ["license", "licence", "copying", "copyright", "unlicense", "notice"];

/// Whether a file name (the last component of a path) is that of a license file.
pub fn is_license_file(name: &str) -> bool {
    let lower = name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase();
    LICENSE_FILE_NAMES
        .iter()
        .any(|base| lower.strip_prefix(base).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '-', '_'])))
}

/// The SPDX license texts, ready to match (loading takes about a tenth of a second: load once
/// and pass it along).
pub struct LicenseTexts {
    store: Store,
}

/// What a text matches.
#[derive(Debug, Clone, PartialEq)]
pub struct TextMatch {
    /// The licenses whose texts score within [`TIE`] of the best, at or above
    /// [`MATCH_THRESHOLD`], as canonical SPDX ids, sorted; empty when none does.
    pub licenses: Vec<String>,
    /// The first of `licenses`, if any.
    pub best: Option<String>,
    /// Every license whose text scores at or above [`MATCH_THRESHOLD`], with its score, best
    /// first (ties by id): the texts that differ from the best by a clause or two. The
    /// `Pixar` license is Apache-2.0 with one section changed, and an Apache-2.0 file without
    /// its appendix scores higher against it; the caller that knows which license was declared
    /// looks here.
    pub candidates: Vec<(String, f32)>,
    /// The best score, and the license that has it (the first by id on a tie), whether or not
    /// it reaches the threshold: how close the nearest text is.
    pub nearest: (String, f32),
}

/// The texts could not be loaded (the embedded cache is damaged).
#[derive(Debug, thiserror::Error)]
#[error("loading the SPDX license texts: {0}")]
pub struct LoadError(String);

impl LicenseTexts {
    /// Loads the texts the `spdx` crate embeds.
    ///
    /// # Errors
    ///
    /// [`LoadError`] when the embedded cache does not decode.
    pub fn load() -> Result<Self, LoadError> {
        Store::load_inline().map(|store| Self { store }).map_err(|e| LoadError(e.to_string()))
    }

    /// Matches `text` against every license text.
    pub fn matches(&self, text: &str) -> TextMatch {
        let data = TextData::new(text);
        // Canonical id -> best score over the entries that read as it (the list has both
        // `GPL-2.0+` and `GPL-2.0-or-later`).
        let mut scores: Vec<(String, f32)> = Vec::with_capacity(self.store.len());
        for (name, entry) in self.store.iter() {
            scores.push((canonical_id(name), entry.original.match_score(&data)));
        }
        scores.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        scores.dedup_by(|later, earlier| later.0 == earlier.0);
        let top = scores.first().map_or(0.0, |s| s.1);
        let mut licenses: Vec<String> = if top >= MATCH_THRESHOLD {
            scores.iter().take_while(|s| s.1 >= top - TIE).map(|s| s.0.clone()).collect()
        } else {
            Vec::new()
        };
        // A GNU text does not say whether later versions may be used (the notice does), and
        // the list keeps it under the `-or-later` id only: name both readings.
        let only: Vec<String> = licenses
            .iter()
            .filter_map(|l| l.strip_suffix("-or-later").map(|base| format!("{base}-only")))
            .filter(|l| spdx::license_id(l).is_some())
            .collect();
        licenses.extend(only);
        licenses.sort();
        licenses.dedup();
        let candidates: Vec<(String, f32)> = scores.iter().take_while(|s| s.1 >= MATCH_THRESHOLD).cloned().collect();
        let nearest = scores.into_iter().next().unwrap_or_default();
        TextMatch { best: licenses.first().cloned(), licenses, candidates, nearest }
    }
}

/// The canonical SPDX id of a name of the license list (deprecated ids rewritten).
fn canonical_id(name: &str) -> String {
    crate::normalize(name).expression().map_or_else(|| name.to_owned(), ToString::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn license_file_names() {
        for yes in [
            "LICENSE",
            "license.md",
            "LICENSE-MIT",
            "LICENCE.txt",
            "COPYING",
            "COPYING.LESSER",
            "copyright",
            "NOTICE",
            "UNLICENSE",
            "data/LICENSE",
        ] {
            assert!(is_license_file(yes), "{yes}");
        }
        for no in ["licensed.jsonl", "udhr.jsonl", "README.md", "licenses", "my-license.txt", "copyrights.json"] {
            assert!(!is_license_file(no), "{no}");
        }
    }

    #[test]
    fn the_spdx_texts_match_their_licenses_and_shared_texts_tie() {
        let texts = LicenseTexts::load().unwrap();
        let text = |id: &str| spdx::license_id(id).unwrap().text();
        for id in ["Apache-2.0", "MIT", "BSD-3-Clause", "MPL-2.0", "CC-BY-4.0", "CC-BY-SA-4.0"] {
            let m = texts.matches(text(id));
            assert!(m.licenses.contains(&id.to_owned()), "{id}: {m:?}");
            assert!(m.nearest.1 >= MATCH_THRESHOLD, "{id}: {m:?}");
        }
        // The GPL's text does not say whether later versions are allowed.
        let m = texts.matches(text("GPL-3.0-or-later"));
        assert!(
            m.licenses.contains(&"GPL-3.0-only".to_owned()) && m.licenses.contains(&"GPL-3.0-or-later".to_owned()),
            "{m:?}"
        );
        assert!(m.licenses.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates: {m:?}");
        assert!(!m.licenses.iter().any(|l| l == "GPL-3.0" || l == "GPL-3.0+"), "deprecated ids are rewritten: {m:?}");
        // Prose that is no license text matches none.
        let m = texts.matches("These files are free to use for research. Contact the authors for anything else.");
        assert!(m.licenses.is_empty() && m.best.is_none() && m.nearest.1 < MATCH_THRESHOLD, "{m:?}");
    }
}
