//! The prose rules: hand-written aliases (`alias-table`), the full names of the SPDX license
//! list (`spdx-name`) and a family name with a version (`name-version`), all compared in
//! [`prose_key`] form.

use super::families::{family_candidates, family_version};
use super::{Ambiguity, Outcome, Rule, expr};
use crate::expression::{LicenseExpression, license_id_ci};

/// Lower-cases, spells "licence" as "license", turns punctuation into spaces, drops a leading
/// "the" and the word "version", and writes `v3.0` as `3.0`.
pub(super) fn prose_key(input: &str) -> String {
    let lower = input.to_lowercase().replace("licence", "license");
    let cleaned: String =
        lower.chars().map(|c| if c.is_alphanumeric() || matches!(c, '.' | '-' | '+') { c } else { ' ' }).collect();
    let mut tokens: Vec<&str> = cleaned
        .split_whitespace()
        .filter(|t| *t != "version")
        .map(|t| t.strip_prefix('v').filter(|r| r.starts_with(|c: char| c.is_ascii_digit())).unwrap_or(t))
        .map(|t| t.trim_end_matches('.'))
        .filter(|t| !t.is_empty())
        .collect();
    if tokens.first() == Some(&"the") {
        tokens.remove(0);
    }
    tokens.join(" ")
}

/// Hand-written prose names (in [`prose_key`] form) and the SPDX expressions they denote.
pub(super) const ALIASES: &[(&str, &str)] = &[
    ("mit", "MIT"),
    ("mit license", "MIT"),
    ("expat license", "MIT"),
    ("bsd 2-clause license", "BSD-2-Clause"),
    ("2-clause bsd license", "BSD-2-Clause"),
    ("simplified bsd license", "BSD-2-Clause"),
    ("freebsd license", "BSD-2-Clause"),
    ("bsd 3-clause license", "BSD-3-Clause"),
    ("3-clause bsd license", "BSD-3-Clause"),
    ("new bsd license", "BSD-3-Clause"),
    ("modified bsd license", "BSD-3-Clause"),
    ("revised bsd license", "BSD-3-Clause"),
    ("bsd 4-clause license", "BSD-4-Clause"),
    ("apache software license 2.0", "Apache-2.0"),
    ("asl 2.0", "Apache-2.0"),
    // GitHub's license names, which SPDX lists as the deprecated `GPL-2.0` / `GPL-3.0` /
    // `LGPL-2.1` / `LGPL-3.0` / `AGPL-3.0`, defined as the "-only" variants.
    ("gnu general public license 2.0", "GPL-2.0-only"),
    ("gnu general public license 3.0", "GPL-3.0-only"),
    ("gnu lesser general public license 2.1", "LGPL-2.1-only"),
    ("gnu lesser general public license 3.0", "LGPL-3.0-only"),
    ("gnu affero general public license 3.0", "AGPL-3.0-only"),
    ("gnu general public license 2.0 or later", "GPL-2.0-or-later"),
    ("gnu general public license 3.0 or later", "GPL-3.0-or-later"),
    ("gplv2", "GPL-2.0-only"),
    ("gplv2+", "GPL-2.0-or-later"),
    ("gplv3", "GPL-3.0-only"),
    ("gplv3+", "GPL-3.0-or-later"),
    ("lgplv2.1", "LGPL-2.1-only"),
    ("lgplv3", "LGPL-3.0-only"),
    ("agplv3", "AGPL-3.0-only"),
    ("mozilla public license 2.0", "MPL-2.0"),
    ("eclipse public license 1.0", "EPL-1.0"),
    ("eclipse public license 2.0", "EPL-2.0"),
    ("isc license", "ISC"),
    ("unlicense", "Unlicense"),
    ("zlib license", "Zlib"),
    ("boost software license", "BSL-1.0"),
    ("boost software license 1.0", "BSL-1.0"),
    ("python software foundation license", "PSF-2.0"),
    ("psf license", "PSF-2.0"),
    ("artistic license 2.0", "Artistic-2.0"),
    ("academic free license 3.0", "AFL-3.0"),
    ("wtfpl", "WTFPL"),
    ("open data commons attribution license", "ODC-By-1.0"),
    ("open data commons open database license", "ODbL-1.0"),
    ("odc-by", "ODC-By-1.0"),
    ("odbl", "ODbL-1.0"),
];

/// Prose names of families (in [`prose_key`] form) that leave the member open.
pub(super) const AMBIGUOUS_PROSE: &[(&str, &str, Ambiguity)] = &[
    ("bsd", "BSD", Ambiguity::NoClauseCount),
    ("bsd license", "BSD", Ambiguity::NoClauseCount),
    ("gpl", "GPL", Ambiguity::NoVersion),
    ("gnu gpl", "GPL", Ambiguity::NoVersion),
    ("gnu general public license", "GPL", Ambiguity::NoVersion),
    ("lgpl", "LGPL", Ambiguity::NoVersion),
    ("gnu lgpl", "LGPL", Ambiguity::NoVersion),
    ("gnu lesser general public license", "LGPL", Ambiguity::NoVersion),
    ("gnu library general public license", "LGPL", Ambiguity::NoVersion),
    ("agpl", "AGPL", Ambiguity::NoVersion),
    ("gnu affero general public license", "AGPL", Ambiguity::NoVersion),
    ("gfdl", "GFDL", Ambiguity::NoVersion),
    ("gnu free documentation license", "GFDL", Ambiguity::NoVersion),
    ("apache", "Apache", Ambiguity::NoVersion),
    ("apache license", "Apache", Ambiguity::NoVersion),
    ("mpl", "MPL", Ambiguity::NoVersion),
    ("mozilla public license", "MPL", Ambiguity::NoVersion),
    ("epl", "EPL", Ambiguity::NoVersion),
    ("eclipse public license", "EPL", Ambiguity::NoVersion),
    ("artistic license", "Artistic", Ambiguity::NoVersion),
];

/// Full names of the SPDX license list (in [`prose_key`] form), for non-deprecated ids.
static FULL_NAMES: std::sync::LazyLock<std::collections::HashMap<String, &'static str>> =
    std::sync::LazyLock::new(|| {
        let mut map = std::collections::HashMap::new();
        for l in spdx::identifiers::LICENSES.iter().filter(|l| l.flags & spdx::flags::IS_DEPRECATED == 0) {
            map.entry(prose_key(l.full_name)).or_insert(l.name);
        }
        map
    });

pub(super) fn prose(input: &str) -> Option<(Outcome, Rule)> {
    // Punctuation is dropped below; refuse what is more likely damage than prose.
    let depth = input.chars().try_fold(0_i32, |d, c| match c {
        '(' => Some(d + 1),
        ')' => (d > 0).then(|| d - 1),
        _ => Some(d),
    });
    if depth != Some(0) || input.chars().any(char::is_control) {
        return None;
    }
    let key = prose_key(input);
    let stripped = key.strip_suffix(" license").map(str::to_owned);
    for k in std::iter::once(key.as_str()).chain(stripped.as_deref()) {
        if let Some((_, text)) = ALIASES.iter().find(|(a, _)| *a == k) {
            return expr(text).map(|o| (o, Rule::AliasTable));
        }
        if let Some((_, family, why)) = AMBIGUOUS_PROSE.iter().find(|(a, ..)| *a == k) {
            let candidates = if *family == "Artistic" {
                ["Artistic-1.0", "Artistic-1.0-Perl", "Artistic-1.0-cl8", "Artistic-2.0"]
                    .iter()
                    .filter_map(|t| LicenseExpression::parse(t).ok())
                    .collect()
            } else {
                family_candidates(family)
            };
            return Some((Outcome::Ambiguous { term: input.to_owned(), why: *why, candidates }, Rule::AliasTable));
        }
        if let Some(name) = FULL_NAMES.get(k) {
            return expr(name).map(|o| (o, Rule::SpdxName));
        }
    }
    // An SPDX id followed by "license": `Apache-2.0 License`.
    if let Some(s) = &stripped
        && !s.contains(' ')
        && let Some(id) = license_id_ci(s)
    {
        return expr(id.name).map(|o| (o, Rule::SpdxName));
    }
    // `<family> <version>`, optionally after "gnu" and before "license": `Apache 2.0`, `GPL v3`.
    let tokens: Vec<&str> = stripped.as_deref().unwrap_or(&key).split(' ').collect();
    let tokens = if tokens.first() == Some(&"gnu") { &tokens[1..] } else { &tokens[..] };
    if let [name, version] = tokens {
        let (version, plus) = version.strip_suffix('+').map_or((*version, false), |v| (v, true));
        let (version, plus) = match version.strip_suffix("-or-later") {
            Some(v) => (v, true),
            None => (version, plus),
        };
        if version.starts_with(|c: char| c.is_ascii_digit())
            && let Some(text) = family_version(name, version, plus)
        {
            return expr(&text).map(|o| (o, Rule::NameVersion));
        }
    }
    None
}
