//! License strings to SPDX expressions: [`normalize`].
//!
//! The rules are tried in this order; the first that applies decides, and its [`Rule`] is
//! recorded so that `prov explain license` can say why:
//!
//! | rule | what it accepts | example |
//! | --- | --- | --- |
//! | `spdx-parse` | an SPDX expression, ids matched case-insensitively, deprecated ids rewritten | `mit OR apache-2.0`, `GPL-2.0+` |
//! | `cargo-slash` | Cargo's legacy `license` field, where `/` means `OR` | `MIT/Apache-2.0` |
//! | `dpi-table` | the exact strings of the Data Provenance Initiative ([`crate::dpi`]) | `CC BY-NC-SA 4.0`, `Apache License 2.0` |
//! | (not-a-license table) | words that name no license | `Unspecified`, `Custom`, `public-domain` |
//! | `creative-commons` | Creative Commons spellings | `CC BY 4.0`, `cc-by-nc-4.0`, `CC0 1.0`, `Attribution-ShareAlike 4.0 International` |
//! | `debian` | Debian `copyright` short names and `or` / `and` / `with … exception` | `GPL-2+`, `Expat`, `Apache-2`, `GPL-2+ with OpenSSL exception` |
//! | `alias-table` | hand-written prose names | `BSD 3-Clause License`, `GNU General Public License v3.0`, `new BSD license` |
//! | `spdx-name` | the full names of the SPDX license list | `MIT License`, `Apache License, Version 2.0` |
//! | `name-version` | a family name and a version | `Apache 2.0`, `GPL v3`, `MPL 2` |
//! | `compound` | names that the rules above read, joined by ` AND ` / ` OR ` (`AND` binding tighter) | `Apache License 2.0 AND CC BY 4.0` |
//!
//! The table rules and the order live here; the rules with code of their own each have a
//! module: `creative_commons`, `debian`, `prose` (the alias table, the SPDX names and
//! name-version), and `families` (what a family name and a version denote, and the members an
//! unversioned name leaves open).
//!
//! Anything else is [`Normalized::Unknown`] with an [`UnknownReason`]: empty, not a license,
//! ambiguous (with the candidate expressions), or unrecognised (with the input quoted and the
//! first offending term underlined).
//!
//! # Decisions on ambiguous names
//!
//! A name is ambiguous when the licenses it could mean differ in substance, so that choosing
//! one would put a guess into a provenance record:
//!
//! - a versionless GNU name (`GPL`, `LGPL`, `AGPL`, `GFDL`): GPL-2.0-only and GPL-3.0-only are
//!   incompatible with each other;
//! - `BSD` without a clause count: the 4-clause text adds the advertising clause;
//! - a versionless Creative Commons name (`CC BY-SA`): only 4.0 covers sui generis database
//!   rights, which matter for data sets, and the share-alike versions differ in what they allow
//!   adaptations to be licensed under;
//! - `Apache`, `MPL`, `EPL`, `CDDL` and the prose `Artistic License` without a version;
//! - Debian's `Artistic`: the Debian short name means version 1.0, which SPDX splits into
//!   three texts (`Artistic-1.0`, `Artistic-1.0-Perl`, `Artistic-1.0-cl8`).
//!
//! Not ambiguous, although unversioned: `CC0` (there is only 1.0), `PSF` (only 2.0), `C-UDA`
//! (only 1.0). Names that stand for one version by long convention are mapped to it and the
//! convention is written beside the entry: GitHub's "GNU General Public License v3.0" is
//! SPDX's deprecated `GPL-3.0`, which SPDX defines as `GPL-3.0-only`.

use std::fmt;
use std::ops::Range;

mod creative_commons;
mod debian;
mod families;
mod prose;

use self::creative_commons::creative_commons;
use self::debian::debian;
use self::families::family_candidates;
use self::prose::{prose, prose_key};
use crate::dpi::{self, DpiTarget};
use crate::expression::{LicenseExpression, underline};
pub use crate::not_a_license::NotALicense;

/// A license string after normalisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Normalized {
    /// The string denotes this SPDX expression.
    Spdx {
        /// The expression, in canonical form.
        expression: LicenseExpression,
        /// The rule that recognised it.
        via: Rule,
    },
    /// The string does not denote one SPDX expression.
    Unknown {
        /// Why not.
        reason: UnknownReason,
    },
}

impl Normalized {
    /// Returns the expression, if the string normalised to one.
    pub fn expression(&self) -> Option<&LicenseExpression> {
        match self {
            Self::Spdx { expression, .. } => Some(expression),
            Self::Unknown { .. } => None,
        }
    }
}

impl fmt::Display for Normalized {
    /// Writes the expression, or `unknown (<reason code>)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Spdx { expression, .. } => write!(f, "{expression}"),
            Self::Unknown { reason } => write!(f, "unknown ({})", reason.code()),
        }
    }
}

/// The normalisation rule that recognised a license string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// The string is an SPDX expression.
    SpdxParse,
    /// The string is an SPDX expression with `/` for `OR`.
    CargoSlash,
    /// The string is in the Data Provenance Initiative table ([`crate::dpi`]).
    DpiTable,
    /// A Creative Commons spelling.
    CreativeCommons,
    /// Debian `copyright` short names.
    Debian,
    /// A hand-written prose alias.
    AliasTable,
    /// A full name from the SPDX license list.
    SpdxName,
    /// A family name followed by a version.
    NameVersion,
    /// Names that other rules read, joined by `AND` / `OR`.
    Compound,
}

impl Rule {
    /// Returns the stable name written into ledgers and shown by `prov explain`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SpdxParse => "spdx-parse",
            Self::CargoSlash => "cargo-slash",
            Self::DpiTable => "dpi-table",
            Self::CreativeCommons => "creative-commons",
            Self::Debian => "debian",
            Self::AliasTable => "alias-table",
            Self::SpdxName => "spdx-name",
            Self::NameVersion => "name-version",
            Self::Compound => "compound",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a license string did not normalise.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnknownReason {
    /// The string is empty or whitespace.
    Empty,
    /// The string is a word that names no license.
    NotALicense {
        /// The string, trimmed.
        input: String,
        /// What it says instead.
        kind: NotALicense,
    },
    /// The string names a license family but not which member.
    Ambiguous {
        /// The string, trimmed.
        input: String,
        /// The ambiguous part of the string.
        term: String,
        /// What is missing.
        why: Ambiguity,
        /// Every expression the string could denote.
        candidates: Vec<LicenseExpression>,
    },
    /// No rule recognised the string.
    Unrecognised {
        /// The string, trimmed.
        input: String,
        /// Byte range of `input` where SPDX parsing failed.
        span: Range<usize>,
        /// The SPDX parser's complaint about that span.
        detail: String,
    },
}

impl UnknownReason {
    /// Returns a stable code: `empty`, `not-a-license`, `ambiguous` or `unrecognised`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::NotALicense { .. } => "not-a-license",
            Self::Ambiguous { .. } => "ambiguous",
            Self::Unrecognised { .. } => "unrecognised",
        }
    }
}

impl fmt::Display for UnknownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("empty license string"),
            Self::NotALicense { input, kind } => write!(f, "not a license: `{input}` {kind}"),
            Self::Ambiguous { input, term, why, candidates } => {
                let list = candidates.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ");
                if input == term {
                    write!(f, "ambiguous license: `{input}` {why}; it could be {list}")
                } else {
                    write!(f, "ambiguous license: `{term}` in `{input}` {why}; it could be {list}")
                }
            }
            Self::Unrecognised { input, span, detail } => {
                write!(f, "unrecognised license string: {detail}\n{}", underline(input, span))
            }
        }
    }
}

/// What an ambiguous license name leaves open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Ambiguity {
    /// A versioned family without a version (`GPL`, `CC BY-SA`, `Apache`).
    NoVersion,
    /// `BSD` without a clause count.
    NoClauseCount,
    /// One name for several texts (Debian's `Artistic`).
    SeveralTexts,
}

impl fmt::Display for Ambiguity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NoVersion => "names no version, and the versions differ in substance",
            Self::NoClauseCount => "names no clause count (2, 3 or 4 clauses)",
            Self::SeveralTexts => "stands for several license texts",
        })
    }
}

/// Normalises a declared license string to an SPDX expression, or says why it cannot.
///
/// Never panics; see the [module documentation](mod@crate::normalize) for the rules and their order.
///
/// ```
/// use prov_license::{Normalized, Rule, normalize};
/// let n = normalize("GPL-2+");
/// assert_eq!(n.expression().unwrap().as_str(), "GPL-2.0-or-later");
/// assert!(matches!(n, Normalized::Spdx { via: Rule::Debian, .. }));
/// ```
pub fn normalize(raw: &str) -> Normalized {
    let input = raw.trim();
    match normalize_trimmed(input) {
        // SPDX lists `NOASSERTION` as an id, but it asserts nothing about the license.
        Normalized::Spdx { expression, .. }
            if expression.requirements().iter().any(|r| r.license.id().is_some_and(|id| id.name == "NOASSERTION")) =>
        {
            Normalized::Unknown {
                reason: UnknownReason::NotALicense { input: input.to_owned(), kind: NotALicense::Unspecified },
            }
        }
        n => n,
    }
}

fn normalize_trimmed(input: &str) -> Normalized {
    if input.is_empty() {
        return Normalized::Unknown { reason: UnknownReason::Empty };
    }
    let spdx_error = match LicenseExpression::parse(input) {
        Ok(expression) => return Normalized::Spdx { expression, via: Rule::SpdxParse },
        Err(e) => e,
    };
    if input.contains('/')
        && let Ok(expression) = LicenseExpression::parse_slash_as_or(input)
    {
        return Normalized::Spdx { expression, via: Rule::CargoSlash };
    }
    let found = dpi_rule(input)
        .map(|o| (o, Rule::DpiTable))
        .or_else(|| not_a_license(input).map(|kind| (Outcome::NotALicense(kind), Rule::AliasTable)))
        .or_else(|| creative_commons(input).map(|o| (o, Rule::CreativeCommons)))
        .or_else(|| debian(input).map(|o| (o, Rule::Debian)))
        .or_else(|| prose(input));
    if found.is_none()
        && let Some(expression) = compound(input)
    {
        return Normalized::Spdx { expression, via: Rule::Compound };
    }
    match found {
        Some((Outcome::Expr(expression), via)) => Normalized::Spdx { expression, via },
        Some((Outcome::NotALicense(kind), _)) => {
            Normalized::Unknown { reason: UnknownReason::NotALicense { input: input.to_owned(), kind } }
        }
        Some((Outcome::Ambiguous { term, why, candidates }, _)) => {
            Normalized::Unknown { reason: UnknownReason::Ambiguous { input: input.to_owned(), term, why, candidates } }
        }
        None => Normalized::Unknown {
            reason: UnknownReason::Unrecognised {
                input: input.to_owned(),
                span: spdx_error.span,
                detail: spdx_error.reason,
            },
        },
    }
}

/// Reads `A AND B OR C` where each operand is a name another rule reads (`Apache License 2.0
/// AND CC BY 4.0`: several licenses that all apply, as data set catalogues list them). Only the
/// upper-case SPDX operators between spaces split, so that a name containing `and` (`Creative
/// Commons Attribution and ShareAlike`) stays whole; `AND` binds tighter than `OR`, as in SPDX.
/// Parentheses are left to the SPDX parser. `None` unless every operand is a license:
/// `OpenAI AND CC BY 4.0` stays unknown, since one of the terms that apply cannot be read.
fn compound(input: &str) -> Option<LicenseExpression> {
    if input.contains(['(', ')']) || !(input.contains(" AND ") || input.contains(" OR ")) {
        return None;
    }
    let operand = |text: &str| match normalize_trimmed(text.trim()) {
        Normalized::Spdx { expression, .. } => Some(format!("({expression})")),
        Normalized::Unknown { .. } => None,
    };
    let alternatives = input
        .split(" OR ")
        .map(|alternative| {
            let all: Option<Vec<String>> = alternative.split(" AND ").map(operand).collect();
            all.map(|parts| format!("({})", parts.join(" AND ")))
        })
        .collect::<Option<Vec<String>>>()?;
    LicenseExpression::parse(&alternatives.join(" OR ")).ok()
}

/// What a rule found.
#[derive(Debug)]
enum Outcome {
    Expr(LicenseExpression),
    NotALicense(NotALicense),
    Ambiguous { term: String, why: Ambiguity, candidates: Vec<LicenseExpression> },
}

fn expr(text: &str) -> Option<Outcome> {
    LicenseExpression::parse(text).ok().map(Outcome::Expr)
}

fn dpi_rule(input: &str) -> Option<Outcome> {
    match dpi::lookup(input)? {
        DpiTarget::Spdx(text) => expr(text),
        DpiTarget::NotALicense(kind) => Some(Outcome::NotALicense(kind)),
        DpiTarget::CcUnversioned(family) => Some(Outcome::Ambiguous {
            term: input.to_owned(),
            why: Ambiguity::NoVersion,
            candidates: family_candidates(family),
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// Words that name no license.

/// Phrases (in [`prose_key`] form) that name no license, and what they say instead.
const NOT_A_LICENSE: &[(&str, NotALicense)] = &[
    ("unspecified", NotALicense::Unspecified),
    ("unknown", NotALicense::Unspecified),
    ("unclear", NotALicense::Unspecified),
    ("not specified", NotALicense::Unspecified),
    ("no license specified", NotALicense::Unspecified),
    ("license information unavailable", NotALicense::Unspecified),
    ("noassertion", NotALicense::Unspecified),
    ("n a", NotALicense::Unspecified),
    ("other", NotALicense::CustomTerms),
    ("no license", NotALicense::NoLicense),
    ("none", NotALicense::NoLicense),
    ("all rights reserved", NotALicense::NoLicense),
    ("custom", NotALicense::CustomTerms),
    ("custom commercial", NotALicense::CustomTerms),
    ("proprietary", NotALicense::CustomTerms),
    ("permissive", NotALicense::CustomTerms),
    ("public domain", NotALicense::PublicDomain),
    ("public-domain", NotALicense::PublicDomain),
    ("pd", NotALicense::PublicDomain),
    ("non commercial", NotALicense::UsageSummary),
    ("non-commercial", NotALicense::UsageSummary),
    ("noncommercial", NotALicense::UsageSummary),
    ("research only", NotALicense::UsageSummary),
    ("academic use only", NotALicense::UsageSummary),
    ("academic research purposes only", NotALicense::UsageSummary),
    ("custom non-commercial", NotALicense::UsageSummary),
    ("custom research-only", NotALicense::UsageSummary),
    ("various", NotALicense::Several),
    ("multiple", NotALicense::Several),
    ("custom multiple", NotALicense::Several),
    ("custom various", NotALicense::Several),
    ("openai", NotALicense::ServiceTerms),
    ("anthropic", NotALicense::ServiceTerms),
    ("request form", NotALicense::AccessTerms),
    ("open access", NotALicense::AccessTerms),
];

fn not_a_license(input: &str) -> Option<NotALicense> {
    let key = prose_key(input);
    NOT_A_LICENSE.iter().find(|(k, _)| *k == key).map(|(_, kind)| *kind)
}

#[cfg(test)]
mod tests {
    use super::families::VERSIONED_FAMILIES;
    use super::prose::{ALIASES, AMBIGUOUS_PROSE};
    use super::*;

    fn spdx(s: &str) -> (String, Rule) {
        match normalize(s) {
            Normalized::Spdx { expression, via } => (expression.to_string(), via),
            Normalized::Unknown { reason } => panic!("{s:?} did not normalise: {reason}"),
        }
    }

    fn unknown(s: &str) -> UnknownReason {
        match normalize(s) {
            Normalized::Unknown { reason } => reason,
            n @ Normalized::Spdx { .. } => panic!("{s:?} normalised to {n:?}"),
        }
    }

    #[test]
    fn spdx_expressions() {
        assert_eq!(spdx("MIT OR Apache-2.0"), ("MIT OR Apache-2.0".into(), Rule::SpdxParse));
        assert_eq!(spdx("  mit  "), ("MIT".into(), Rule::SpdxParse));
        assert_eq!(spdx("BSD-3-clause"), ("BSD-3-Clause".into(), Rule::SpdxParse));
        assert_eq!(spdx("GPL-2.0+"), ("GPL-2.0-or-later".into(), Rule::SpdxParse));
        assert_eq!(spdx("MIT/Apache-2.0"), ("MIT OR Apache-2.0".into(), Rule::CargoSlash));
        assert_eq!(spdx("MIT / Apache-2.0 / Zlib"), ("MIT OR Apache-2.0 OR Zlib".into(), Rule::CargoSlash));
    }

    #[test]
    fn debian_short_names() {
        for (input, want) in [
            ("GPL-2+", "GPL-2.0-or-later"),
            ("GPL-2", "GPL-2.0-only"),
            ("GPL-3+", "GPL-3.0-or-later"),
            ("LGPL-2.1+", "LGPL-2.1-or-later"),
            ("LGPL-2+", "LGPL-2.0-or-later"),
            ("Expat", "MIT"),
            ("Apache-2", "Apache-2.0"),
            ("GFDL-NIV-1.2+", "GFDL-1.2-no-invariants-or-later"),
            ("MPL-1.1+", "MPL-1.1+"),
            ("Zope-2.1", "ZPL-2.1"),
            ("GPL-2+ or Expat", "GPL-2.0-or-later OR MIT"),
            ("GPL-2+ and BSD-3-clause", "GPL-2.0-or-later AND BSD-3-Clause"),
            ("GPL-2+ or Artistic-2.0, and BSD-3-clause", "(GPL-2.0-or-later OR Artistic-2.0) AND BSD-3-Clause"),
            ("Perl", "Artistic-1.0-Perl OR GPL-1.0-or-later"),
            ("GPL-2+ with Font exception", "GPL-2.0-or-later WITH Font-exception-2.0"),
            ("GPL-3+ with OpenSSL exception", "GPL-3.0-or-later WITH AdditionRef-OpenSSL-exception"),
        ] {
            // `LGPL-2.1+` and `MPL-1.1+` are also SPDX (deprecated, resp. current) and parse as such.
            let (got, rule) = spdx(input);
            assert_eq!(got, want, "{input}");
            assert!(matches!(rule, Rule::Debian | Rule::SpdxParse), "{input}: {rule}");
        }
        assert_eq!(spdx("GPL-2+").1, Rule::Debian);
        assert_eq!(spdx("LGPL-2.1+").1, Rule::SpdxParse);
        // BSD-3-clause is an SPDX id in another case: the SPDX rule takes it.
        assert_eq!(spdx("bsd-3-clause").1, Rule::SpdxParse);
        assert_eq!(
            unknown("public-domain"),
            UnknownReason::NotALicense { input: "public-domain".into(), kind: NotALicense::PublicDomain }
        );
        let UnknownReason::Ambiguous { why, candidates, .. } = unknown("Artistic") else { panic!() };
        assert_eq!(why, Ambiguity::SeveralTexts);
        assert_eq!(candidates.len(), 3);
        let UnknownReason::Ambiguous { term, candidates, .. } = unknown("GPL-2+ or Artistic") else { panic!() };
        assert_eq!(term, "Artistic");
        assert_eq!(candidates[1].as_str(), "GPL-2.0-or-later OR Artistic-1.0-Perl");
        assert_eq!(unknown("GPL-2+ and public-domain").code(), "not-a-license");
    }

    #[test]
    fn names_joined_by_spdx_operators() {
        // Data Provenance Initiative data sets list several licenses that all apply.
        assert_eq!(spdx("Apache License 2.0 AND CC BY 4.0"), ("Apache-2.0 AND CC-BY-4.0".into(), Rule::Compound));
        assert_eq!(
            spdx("MIT License OR CC BY-SA 4.0 AND BSD 3-Clause License"),
            ("MIT OR (CC-BY-SA-4.0 AND BSD-3-Clause)".into(), Rule::Compound),
            "AND binds tighter than OR"
        );
        assert_eq!(spdx("GNU General Public License v3.0 AND MIT").0, "GPL-3.0-only AND MIT");
        // One operand that is not a license leaves the whole unknown: its terms apply too.
        assert_eq!(unknown("OpenAI AND CC BY-NC 4.0").code(), "unrecognised");
        assert_eq!(unknown("Apache License 2.0 AND Unspecified").code(), "unrecognised");
        // `NOASSERTION` inside a compound asserts nothing either.
        assert_eq!(unknown("MIT License AND NOASSERTION").code(), "not-a-license");
        // Lower-case words inside a name do not split it.
        assert_eq!(spdx("Creative Commons Attribution Share Alike 4.0 International").0, "CC-BY-SA-4.0");
    }

    #[test]
    fn creative_commons_spellings() {
        for (input, want) in [
            ("CC BY 4.0", "CC-BY-4.0"),
            ("CC-BY-SA-4.0", "CC-BY-SA-4.0"),
            ("cc-by-nc-4.0", "CC-BY-NC-4.0"),
            ("CC BY-NC-SA 3.0", "CC-BY-NC-SA-3.0"),
            ("CC BY NC SA 4.0", "CC-BY-NC-SA-4.0"),
            ("CC BY- SA 4.0", "CC-BY-SA-4.0"),
            ("CC0 1.0", "CC0-1.0"),
            ("CC0", "CC0-1.0"),
            ("CC0 1.0 Universal", "CC0-1.0"),
            ("Creative Commons Zero v1.0 Universal", "CC0-1.0"),
            ("CC-BY 4.0", "CC-BY-4.0"),
            ("CC BY 3.0 US", "CC-BY-3.0-US"),
            ("Creative Commons Attribution 4.0 International", "CC-BY-4.0"),
            ("Creative Commons Attribution-ShareAlike 3.0 Unported License", "CC-BY-SA-3.0"),
            ("Attribution-NonCommercial 4.0 International", "CC-BY-NC-4.0"),
            ("Creative Commons Attribution-NoDerivatives 4.0 International", "CC-BY-ND-4.0"),
            ("CC BY-SA 3.0 ES", "LicenseRef-CC-BY-SA-3.0-ES"),
        ] {
            let (got, rule) = spdx(input);
            assert_eq!(got, want, "{input}");
            assert!(matches!(rule, Rule::CreativeCommons | Rule::SpdxParse | Rule::DpiTable), "{input}: {rule}");
        }
        let UnknownReason::Ambiguous { candidates, why, .. } = unknown("CC-BY-SA") else { panic!() };
        assert_eq!(why, Ambiguity::NoVersion);
        let names: Vec<_> = candidates.iter().map(LicenseExpression::as_str).collect();
        assert_eq!(names, ["CC-BY-SA-1.0", "CC-BY-SA-2.0", "CC-BY-SA-2.5", "CC-BY-SA-3.0", "CC-BY-SA-4.0"]);
        assert_eq!(unknown("CC BY-ND-SA 4.0").code(), "unrecognised");
        assert_eq!(unknown("(MIT License").code(), "unrecognised");
        assert_eq!(unknown("MIT\u{0} License").code(), "unrecognised");
        assert_eq!(unknown("CC BY 5.0").code(), "unrecognised");
    }

    #[test]
    fn prose_names() {
        for (input, want, rule) in [
            ("Apache License 2.0", "Apache-2.0", Rule::SpdxName),
            ("Apache License, Version 2.0", "Apache-2.0", Rule::SpdxName),
            ("MIT License", "MIT", Rule::AliasTable),
            ("The MIT License", "MIT", Rule::AliasTable),
            ("BSD 3-Clause License", "BSD-3-Clause", Rule::AliasTable),
            ("BSD 3-Clause \"New\" or \"Revised\" License", "BSD-3-Clause", Rule::SpdxName),
            ("GNU General Public License v3.0", "GPL-3.0-only", Rule::AliasTable),
            ("GNU General Public License v3.0 or later", "GPL-3.0-or-later", Rule::AliasTable),
            ("GNU General Public License v2.0 only", "GPL-2.0-only", Rule::SpdxName),
            ("GNU Lesser General Public License v2.1", "LGPL-2.1-only", Rule::AliasTable),
            ("Mozilla Public License 2.0", "MPL-2.0", Rule::AliasTable),
            ("The Unlicense", "Unlicense", Rule::AliasTable),
            ("Apache-2.0 License", "Apache-2.0", Rule::SpdxName),
            ("Apache 2.0", "Apache-2.0", Rule::NameVersion),
            ("apache 2", "Apache-2.0", Rule::NameVersion),
            ("GPL v3", "GPL-3.0-only", Rule::NameVersion),
            ("GNU GPL v2+", "GPL-2.0-or-later", Rule::NameVersion),
            ("Boost Software License 1.0", "BSL-1.0", Rule::AliasTable),
            ("zlib License", "Zlib", Rule::AliasTable),
        ] {
            // DPI strings are found in the DPI table first; their lower-case spelling is not.
            let (got, via) = spdx(input);
            let (got, via) = if via == Rule::DpiTable { spdx(&input.to_lowercase()) } else { (got, via) };
            assert_eq!((got, via), (want.to_owned(), rule), "{input}");
        }
    }

    #[test]
    fn unknown_reasons() {
        assert_eq!(unknown(""), UnknownReason::Empty);
        assert_eq!(unknown(" \t\n"), UnknownReason::Empty);
        for s in ["Unspecified", "Custom", "custom", "NOASSERTION", "MIT OR noassertion", "NONE", "Various", "OpenAI"] {
            assert_eq!(unknown(s).code(), "not-a-license", "{s}");
        }
        for s in ["BSD", "GPL", "CC BY-SA", "LGPL", "Apache License", "BSD License", "GNU General Public License"] {
            assert_eq!(unknown(s).code(), "ambiguous", "{s}");
        }
        let reason = unknown("Modified MIT License");
        assert_eq!(
            reason.to_string(),
            "unrecognised license string: unknown term\n    Modified MIT License\n    ^^^^^^^^"
        );
    }

    #[test]
    fn ambiguous_message_lists_candidates() {
        assert_eq!(
            unknown("BSD").to_string(),
            "ambiguous license: `BSD` names no clause count (2, 3 or 4 clauses); \
             it could be `BSD-2-Clause`, `BSD-3-Clause`, `BSD-4-Clause`"
        );
    }

    #[test]
    fn every_family_has_candidates() {
        for (_, family) in VERSIONED_FAMILIES {
            assert!(!family_candidates(family).is_empty(), "{family}");
        }
        for (_, family, _) in AMBIGUOUS_PROSE {
            assert!(!family_candidates(family).is_empty(), "{family}");
        }
        let gpl: Vec<_> = family_candidates("GPL").iter().map(ToString::to_string).collect();
        assert_eq!(
            gpl,
            [
                "GPL-1.0-only",
                "GPL-1.0-or-later",
                "GPL-2.0-only",
                "GPL-2.0-or-later",
                "GPL-3.0-only",
                "GPL-3.0-or-later"
            ]
        );
    }

    #[test]
    fn alias_targets_parse() {
        for (k, text) in ALIASES {
            assert!(LicenseExpression::parse(text).is_ok(), "{k} -> {text}");
            assert_eq!(prose_key(k), *k, "alias key not in prose_key form: {k}");
        }
        for (k, _) in NOT_A_LICENSE {
            assert_eq!(prose_key(k), *k, "not-a-license key not in prose_key form: {k}");
        }
    }
}
