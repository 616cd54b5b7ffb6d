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

use crate::dpi::{self, DpiTarget};
use crate::expression::{LicenseExpression, exception_id_ci, license_id_ci, underline};
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

// ---------------------------------------------------------------------------------------------
// Creative Commons.

/// The versions Creative Commons published (2.1 only as jurisdiction ports).
const CC_VERSIONS: &[&str] = &["1.0", "2.0", "2.1", "2.5", "3.0", "4.0"];

fn creative_commons(input: &str) -> Option<Outcome> {
    let mut s = input.to_lowercase();
    let starts_with_attribution = s.starts_with("attribution");
    if !(s.contains("cc") || s.contains("creative commons") || starts_with_attribution) {
        return None;
    }
    for (from, to) in [
        ("creative commons", " cc "),
        ("attribution", " by "),
        ("non-commercial", " nc "),
        ("noncommercial", " nc "),
        ("non commercial", " nc "),
        ("share-alike", " sa "),
        ("sharealike", " sa "),
        ("share alike", " sa "),
        ("noderivatives", " nd "),
        ("no-derivatives", " nd "),
        ("no derivatives", " nd "),
        ("noderivs", " nd "),
        ("zero", " 0 "),
    ] {
        s = s.replace(from, to);
    }
    let filler = ["license", "licence", "international", "unported", "generic", "universal", "public", "domain"];
    let filler2 = ["dedication", "deed", "the", "version"];
    let tokens: Vec<String> = s
        .split(|c: char| !(c.is_alphanumeric() || c == '.'))
        .filter(|t| !t.is_empty() && !filler.contains(t) && !filler2.contains(t))
        .map(|t| t.strip_prefix('v').filter(|r| r.starts_with(|c: char| c.is_ascii_digit())).unwrap_or(t).to_owned())
        .collect();
    let mut it = tokens.iter().map(String::as_str).peekable();
    match it.next()? {
        "cc0" => return it.all(|t| t == "1.0" || t == "1").then(|| expr("CC0-1.0")).flatten(),
        "cc" if it.peek() == Some(&"0") => {
            it.next();
            return it.all(|t| t == "1.0" || t == "1").then(|| expr("CC0-1.0")).flatten();
        }
        "cc" => {}
        "by" if starts_with_attribution => {
            // "Attribution-NonCommercial 4.0 International": the deed title without "CC".
            return cc_elements(input, std::iter::once("by").chain(it));
        }
        _ => return None,
    }
    cc_elements(input, it)
}

/// Reads `by [nc] [nd|sa] [version [port]]` after the `cc`.
fn cc_elements<'a>(input: &str, tokens: impl Iterator<Item = &'a str>) -> Option<Outcome> {
    let (mut by, mut nc, mut nd, mut sa) = (false, false, false, false);
    let mut version: Option<String> = None;
    let mut port: Option<String> = None;
    for t in tokens {
        match t {
            "by" if version.is_none() => by = true,
            "nc" if version.is_none() => nc = true,
            "nd" if version.is_none() => nd = true,
            "sa" if version.is_none() => sa = true,
            v if version.is_none() && v.starts_with(|c: char| c.is_ascii_digit()) => {
                let v = if v.contains('.') { v.to_owned() } else { format!("{v}.0") };
                if !CC_VERSIONS.contains(&v.as_str()) {
                    return None;
                }
                version = Some(v);
            }
            p if version.is_some()
                && port.is_none()
                && (p.len() == 2 || p == "igo")
                && p.chars().all(|c| c.is_ascii_alphabetic()) =>
            {
                port = Some(p.to_ascii_uppercase());
            }
            _ => return None,
        }
    }
    if !by || (nd && sa) {
        return None;
    }
    let family = format!(
        "CC-BY{}{}",
        if nc { "-NC" } else { "" },
        if nd {
            "-ND"
        } else if sa {
            "-SA"
        } else {
            ""
        }
    );
    let Some(version) = version else {
        return Some(Outcome::Ambiguous {
            term: input.to_owned(),
            why: Ambiguity::NoVersion,
            candidates: family_candidates(&family),
        });
    };
    let id = match &port {
        Some(p) => format!("{family}-{version}-{p}"),
        None => format!("{family}-{version}"),
    };
    match license_id_ci(&id) {
        Some(found) => expr(found.name),
        // A real version or jurisdiction port that the SPDX list does not carry.
        None => expr(&format!("LicenseRef-{id}")),
    }
}

// ---------------------------------------------------------------------------------------------
// Families, versions and candidates.

/// Every non-deprecated SPDX id `<family>-<version>[-only|-or-later]`, in list order.
pub(crate) fn family_candidates(family: &str) -> Vec<LicenseExpression> {
    if family.eq_ignore_ascii_case("BSD") {
        return ["BSD-2-Clause", "BSD-3-Clause", "BSD-4-Clause"]
            .iter()
            .filter_map(|t| LicenseExpression::parse(t).ok())
            .collect();
    }
    let prefix = format!("{}-", family.to_ascii_lowercase());
    spdx::identifiers::LICENSES
        .iter()
        .filter(|l| l.flags & spdx::flags::IS_DEPRECATED == 0)
        .filter(|l| {
            let lower = l.name.to_ascii_lowercase();
            let Some(rest) = lower.strip_prefix(&prefix) else { return false };
            let version = rest.strip_suffix("-only").or_else(|| rest.strip_suffix("-or-later")).unwrap_or(rest);
            !version.is_empty()
                && version.starts_with(|c: char| c.is_ascii_digit())
                && version.chars().all(|c| c.is_ascii_digit() || c == '.')
        })
        .filter_map(|l| LicenseExpression::parse(l.name).ok())
        .collect()
}

/// Family names a caller may write without a version, and the SPDX family they mean.
const VERSIONED_FAMILIES: &[(&str, &str)] = &[
    ("gpl", "GPL"),
    ("lgpl", "LGPL"),
    ("agpl", "AGPL"),
    ("gfdl", "GFDL"),
    ("apache", "Apache"),
    ("mpl", "MPL"),
    ("epl", "EPL"),
    ("cddl", "CDDL"),
    ("cc-by", "CC-BY"),
    ("cc-by-sa", "CC-BY-SA"),
    ("cc-by-nd", "CC-BY-ND"),
    ("cc-by-nc", "CC-BY-NC"),
    ("cc-by-nc-sa", "CC-BY-NC-SA"),
    ("cc-by-nc-nd", "CC-BY-NC-ND"),
];

/// Resolves a family name and a version (`GPL`, `2`) to an SPDX id; `plus` means "or later".
fn family_version(name: &str, version: &str, plus: bool) -> Option<String> {
    let (name, suffix) = match name.to_ascii_lowercase().as_str() {
        "zope" => ("ZPL".to_owned(), ""),
        "gfdl-niv" => ("GFDL".to_owned(), "-no-invariants"),
        _ => (name.to_owned(), ""),
    };
    let version = version.trim_start_matches(['v', 'V']);
    let padded = format!("{version}.0");
    let versions = if version.contains('.') { vec![version] } else { vec![version, padded.as_str()] };
    for v in versions {
        let Some(id) = license_id_ci(&format!("{name}-{v}{suffix}")) else { continue };
        if id.is_gnu() {
            let base = id.name.trim_end_matches("-only").trim_end_matches("-or-later");
            return spdx::gnu_license_id(base, plus).map(|g| g.name.to_owned());
        }
        return Some(if plus { format!("{}+", id.name) } else { id.name.to_owned() });
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Debian.

/// One license term of a Debian expression.
enum Term {
    Text(String),
    Choice { term: String, why: Ambiguity, candidates: Vec<LicenseExpression> },
    NotALicense(NotALicense),
}

/// Debian short names (<https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/#license-specification>)
/// that are not `<family>-<version>[+]` and not SPDX ids.
fn debian_special(token: &str) -> Option<Term> {
    let text = |t: &str| Some(Term::Text(t.to_owned()));
    match token.to_ascii_lowercase().as_str() {
        "expat" => text("MIT"),
        // Perl's license as SPDX writes it.
        "perl" => text("(Artistic-1.0-Perl OR GPL-1.0-or-later)"),
        "public-domain" => Some(Term::NotALicense(NotALicense::PublicDomain)),
        "permissive" => Some(Term::NotALicense(NotALicense::CustomTerms)),
        "artistic" => Some(Term::Choice {
            term: token.to_owned(),
            why: Ambiguity::SeveralTexts,
            candidates: ["Artistic-1.0", "Artistic-1.0-Perl", "Artistic-1.0-cl8"]
                .iter()
                .filter_map(|t| LicenseExpression::parse(t).ok())
                .collect(),
        }),
        "bsd" => Some(Term::Choice {
            term: token.to_owned(),
            why: Ambiguity::NoClauseCount,
            candidates: family_candidates("BSD"),
        }),
        _ => None,
    }
}

fn debian_term(token: &str) -> Option<Term> {
    if let Some(t) = debian_special(token) {
        return Some(t);
    }
    let bare = token.strip_suffix('+');
    let plus = bare.is_some();
    let bare = bare.unwrap_or(token);
    if let Some(id) = license_id_ci(bare) {
        return Some(Term::Text(if plus { format!("{}+", id.name) } else { id.name.to_owned() }));
    }
    // `<family>-<version>`: split at the last `-` that precedes a digit.
    if let Some(dash) = bare.rfind('-').filter(|&i| bare[i + 1..].starts_with(|c: char| c.is_ascii_digit())) {
        return family_version(&bare[..dash], &bare[dash + 1..], plus).map(Term::Text);
    }
    let lower = bare.to_ascii_lowercase();
    VERSIONED_FAMILIES.iter().find(|(k, _)| *k == lower).map(|(_, family)| Term::Choice {
        term: token.to_owned(),
        why: Ambiguity::NoVersion,
        candidates: family_candidates(family),
    })
}

/// The most readings an expression with several ambiguous terms may have.
const MAX_READINGS: usize = 64;

fn debian(input: &str) -> Option<Outcome> {
    // Debian's comma binds loosest: `A or B, and C` is `(A or B) and C`.
    let mut pieces: Vec<Term> = Vec::new();
    for (i, segment) in input.split(',').enumerate() {
        let mut tokens = segment.split_whitespace().peekable();
        if i > 0 {
            let op = tokens.next()?;
            let op = if op.eq_ignore_ascii_case("and") {
                "AND"
            } else if op.eq_ignore_ascii_case("or") {
                "OR"
            } else {
                return None;
            };
            pieces.insert(0, Term::Text("(".into()));
            pieces.push(Term::Text(format!(") {op}")));
        }
        while let Some(token) = tokens.next() {
            let (open, token) = split_parens_front(token);
            let (token, close) = split_parens_back(token);
            pieces.push(Term::Text(open.to_owned()));
            if token.eq_ignore_ascii_case("or") || token.eq_ignore_ascii_case("and") {
                pieces.push(Term::Text(token.to_ascii_uppercase()));
            } else if token.eq_ignore_ascii_case("with") {
                let mut words = Vec::new();
                let close_after = loop {
                    let (w, c) = split_parens_back(tokens.next()?);
                    if w.eq_ignore_ascii_case("exception") {
                        break c;
                    }
                    words.push(w);
                };
                pieces.push(Term::Text(format!("WITH {}", debian_exception(&words)?)));
                pieces.push(Term::Text(close_after.to_owned()));
            } else if !token.is_empty() {
                pieces.push(debian_term(token)?);
            }
            pieces.push(Term::Text(close.to_owned()));
        }
    }
    if let Some(kind) = pieces.iter().find_map(|p| if let Term::NotALicense(k) = p { Some(*k) } else { None }) {
        return Some(Outcome::NotALicense(kind));
    }
    // Expand ambiguous terms into every reading.
    let mut readings = vec![String::new()];
    let mut first_choice: Option<(String, Ambiguity)> = None;
    for piece in &pieces {
        match piece {
            Term::Text(t) => readings.iter_mut().for_each(|r| {
                r.push(' ');
                r.push_str(t);
            }),
            Term::Choice { term, why, candidates } => {
                first_choice.get_or_insert_with(|| (term.clone(), *why));
                if readings.len() * candidates.len() > MAX_READINGS || candidates.is_empty() {
                    return None;
                }
                readings = readings.iter().flat_map(|r| candidates.iter().map(move |c| format!("{r} ({c})"))).collect();
            }
            Term::NotALicense(_) => {}
        }
    }
    let mut parsed = readings.iter().map(|r| LicenseExpression::parse(r).ok()).collect::<Option<Vec<_>>>()?;
    match first_choice {
        None => parsed.pop().map(Outcome::Expr),
        Some((term, why)) => Some(Outcome::Ambiguous { term, why, candidates: parsed }),
    }
}

fn split_parens_front(s: &str) -> (&str, &str) {
    let n = s.len() - s.trim_start_matches('(').len();
    s.split_at(n)
}

fn split_parens_back(s: &str) -> (&str, &str) {
    let n = s.trim_end_matches(')').len();
    s.split_at(n)
}

/// `with OpenSSL exception`: an SPDX exception whose id starts with the words, or an
/// `AdditionRef-` naming them.
fn debian_exception(words: &[&str]) -> Option<String> {
    if words.is_empty() {
        return None;
    }
    let stem = format!("{}-exception", words.join("-"));
    if let Some(e) = exception_id_ci(&stem) {
        return Some(e.name.to_owned());
    }
    let lower = stem.to_ascii_lowercase();
    let by_prefix = spdx::identifiers::EXCEPTIONS
        .iter()
        .filter(|e| e.name.to_ascii_lowercase().starts_with(&lower))
        .min_by_key(|e| e.name.len());
    if let Some(e) = by_prefix {
        return Some(e.name.to_owned());
    }
    let sanitized: String = stem.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.')).collect();
    Some(format!("AdditionRef-{sanitized}"))
}

// ---------------------------------------------------------------------------------------------
// Prose.

/// Lower-cases, spells "licence" as "license", turns punctuation into spaces, drops a leading
/// "the" and the word "version", and writes `v3.0` as `3.0`.
pub(crate) fn prose_key(input: &str) -> String {
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
const ALIASES: &[(&str, &str)] = &[
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
const AMBIGUOUS_PROSE: &[(&str, &str, Ambiguity)] = &[
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

fn prose(input: &str) -> Option<(Outcome, Rule)> {
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

#[cfg(test)]
mod tests {
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
