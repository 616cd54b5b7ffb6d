//! Compound data sets: is a mixture's declared license compatible with its constituents'?
//!
//! # The rule
//!
//! A mixture may not be more permissive than any of its constituents. With the [`Class`] of
//! the mixture's license and of each constituent's (for `A OR B`: the branch the licensor of
//! the mixture could pick, see [`mod@crate::classify`]), [`check_compound`] reports:
//!
//! | conflict | when |
//! | --- | --- |
//! | [`ConflictKind::CommercialUse`] | the mixture allows commercial use, the constituent does not |
//! | [`ConflictKind::NoDerivatives`] | the constituent forbids derivatives, the mixture does not |
//! | [`ConflictKind::ShareAlike`] | the constituent is share-alike, the mixture is not |
//! | [`ConflictKind::ShareAlikeMismatch`] | both are share-alike, but the mixture's license is not one the constituent's permits |
//! | [`ConflictKind::WeakCopyleft`] | the constituent is weak copyleft, the mixture has no copyleft at all |
//! | [`ConflictKind::Attribution`] | the constituent requires attribution, the mixture does not |
//! | [`ConflictKind::UnclassifiedMixture`], [`ConflictKind::UnclassifiedConstituent`] | a license is unknown, so nothing can be checked |
//!
//! "A license the constituent's permits" is, for a share-alike requirement `X`: `X` itself;
//! with `X+` / `-or-later`, any later version of `X`; for a Creative Commons share-alike
//! license, any later version with the same elements, ports included (CC BY-SA 3.0 §4(b)
//! allows adaptations under "a later version of this License with the same License
//! Elements"). Cross-license compatibility declarations (CC BY-SA 4.0 → GPLv3) are not
//! modelled and show up as mismatches for a reviewer to accept.
//!
//! Attribution is checked although it is the mildest: re-licensing MIT data as CC0 drops a
//! condition the MIT license attaches to every copy.
//!
//! A constituent whose license is the mixture's license, or one operand of the mixture's
//! top-level `AND`, is carried, not re-licensed: whoever uses the mixture must comply with
//! that license. It needs no classification, so a mixture declared
//! `MIT AND LicenseRef-public-domain` is checked against `MIT` constituents even though its
//! `LicenseRef-` has no tabulated terms; only the other constituents need the mixture's class.

use std::fmt;

use spdx::LicenseItem;

use crate::classify::{Class, ShareAlike, Unclassified, classify, classify_requirement};
use crate::normalize::Normalized;
use crate::version::is_same_or_later;

/// A way in which a mixture's license re-licenses a constituent invalidly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// Index of the constituent in the slice passed to [`check_compound`]; `None` when the
    /// conflict is about the mixture alone.
    pub constituent: Option<usize>,
    /// The constituent's license as normalised (`unknown (…)` if it did not normalise).
    pub constituent_license: String,
    /// The mixture's license as normalised.
    pub mixture_license: String,
    /// What is wrong.
    pub kind: ConflictKind,
}

/// What is wrong with a mixture's license.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConflictKind {
    /// The mixture's license has no class, so it cannot be checked.
    UnclassifiedMixture(Unclassified),
    /// A constituent's license has no class, so it cannot be checked.
    UnclassifiedConstituent(Unclassified),
    /// The mixture allows commercial use that the constituent forbids.
    CommercialUse,
    /// The constituent forbids derivatives; the mixture allows them.
    NoDerivatives,
    /// The constituent is share-alike; the mixture is not.
    ShareAlike,
    /// Both are share-alike, with licenses that do not match.
    ShareAlikeMismatch,
    /// The constituent is weak copyleft; the mixture has no copyleft.
    WeakCopyleft,
    /// The constituent requires attribution; the mixture does not.
    Attribution,
}

impl ConflictKind {
    /// Returns a stable code for ledgers and reports.
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnclassifiedMixture(_) => "unclassified-mixture",
            Self::UnclassifiedConstituent(_) => "unclassified-constituent",
            Self::CommercialUse => "commercial-use",
            Self::NoDerivatives => "no-derivatives",
            Self::ShareAlike => "share-alike",
            Self::ShareAlikeMismatch => "share-alike-mismatch",
            Self::WeakCopyleft => "weak-copyleft",
            Self::Attribution => "attribution",
        }
    }
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &self.mixture_license;
        let c = match self.constituent {
            Some(i) => format!("constituent {i} (`{}`)", self.constituent_license),
            None => "a constituent".to_owned(),
        };
        match &self.kind {
            ConflictKind::UnclassifiedMixture(why) => write!(f, "the mixture's license `{m}` cannot be checked: {why}"),
            ConflictKind::UnclassifiedConstituent(why) => write!(f, "{c} cannot be checked: {why}"),
            ConflictKind::CommercialUse => write!(f, "{c} forbids commercial use, which the mixture's `{m}` allows"),
            ConflictKind::NoDerivatives => write!(f, "{c} forbids derivatives, which the mixture's `{m}` allows"),
            ConflictKind::ShareAlike => {
                write!(f, "{c} is share-alike, so the mixture must carry its license, but it is `{m}`")
            }
            ConflictKind::ShareAlikeMismatch => {
                write!(f, "{c} is share-alike, and the mixture's `{m}` is not a license it permits for derivatives")
            }
            ConflictKind::WeakCopyleft => {
                write!(
                    f,
                    "{c} is weak copyleft, so its files keep their license, but the mixture's `{m}` has no copyleft"
                )
            }
            ConflictKind::Attribution => write!(f, "{c} requires attribution, which the mixture's `{m}` drops"),
        }
    }
}

/// Checks a mixture's license against its constituents' (see the module documentation for the
/// rule). Returns no conflicts when the mixture's license is valid.
///
/// ```
/// use prov_license::{ConflictKind, check_compound, normalize};
/// let conflicts = check_compound(&normalize("CC-BY-4.0"), &[normalize("MIT"), normalize("CC BY-NC 4.0")]);
/// assert_eq!(conflicts.len(), 1);
/// assert_eq!((conflicts[0].constituent, &conflicts[0].kind), (Some(1), &ConflictKind::CommercialUse));
/// ```
pub fn check_compound(mixture: &Normalized, constituents: &[Normalized]) -> Vec<Conflict> {
    let mixture_license = mixture.to_string();
    let conflict = |i: Option<usize>, c: &Normalized, kind| Conflict {
        constituent: i,
        constituent_license: c.to_string(),
        mixture_license: mixture_license.clone(),
        kind,
    };
    let conjuncts = mixture.expression().map(crate::LicenseExpression::conjuncts).unwrap_or_default();
    let carried = |c: &Normalized| c.expression().is_some_and(|e| conjuncts.iter().any(|m| m == e.as_str()));
    let m = match classify(mixture) {
        Ok(m) => m,
        Err(why) if constituents.is_empty() || !constituents.iter().all(carried) => {
            return vec![Conflict {
                constituent: None,
                constituent_license: String::new(),
                mixture_license: mixture_license.clone(),
                kind: ConflictKind::UnclassifiedMixture(why),
            }];
        }
        Err(_) => return Vec::new(),
    };
    let mut out = Vec::new();
    for (i, constituent) in constituents.iter().enumerate() {
        if carried(constituent) {
            continue;
        }
        let c: Class = match classify(constituent) {
            Ok(c) => c,
            Err(why) => {
                out.push(conflict(Some(i), constituent, ConflictKind::UnclassifiedConstituent(why)));
                continue;
            }
        };
        let mut kinds = Vec::new();
        if m.commercial && !c.commercial {
            kinds.push(ConflictKind::CommercialUse);
        }
        if c.no_derivatives && !m.no_derivatives {
            kinds.push(ConflictKind::NoDerivatives);
        }
        match (c.share_alike, m.share_alike) {
            (ShareAlike::Strong, ShareAlike::Strong) if !share_alike_compatible(constituent, mixture) => {
                kinds.push(ConflictKind::ShareAlikeMismatch);
            }
            (ShareAlike::Strong, ShareAlike::No | ShareAlike::Weak) => kinds.push(ConflictKind::ShareAlike),
            (ShareAlike::Weak, ShareAlike::No) => kinds.push(ConflictKind::WeakCopyleft),
            _ => {}
        }
        if c.attribution && !m.attribution {
            kinds.push(ConflictKind::Attribution);
        }
        out.extend(kinds.into_iter().map(|k| conflict(Some(i), constituent, k)));
    }
    out
}

/// True if the mixture names a license that one of the constituent's share-alike requirements
/// permits for derivatives.
fn share_alike_compatible(constituent: &Normalized, mixture: &Normalized) -> bool {
    let (Some(c), Some(m)) = (constituent.expression(), mixture.expression()) else {
        // Ambiguous strings: their candidates agree on share-alike but name no one license.
        return false;
    };
    let mixture_ids: Vec<String> = m.requirements().iter().map(|r| r.license.to_string()).collect();
    c.requirements().into_iter().filter(|r| classify_requirement(r).is_ok_and(|k| k.is_share_alike())).any(|r| {
        let own = r.license.to_string();
        let LicenseItem::Spdx { id, or_later } = &r.license else {
            return mixture_ids.contains(&own);
        };
        let name = id.name;
        let later_ok = *or_later || name.ends_with("-or-later");
        let cc_sa = name.starts_with("CC-BY-SA-") || name.starts_with("CC-BY-NC-SA-");
        mixture_ids.iter().any(|mid| {
            *mid == own
                || (later_ok && is_same_or_later(name, mid, false))
                || (cc_sa && is_same_or_later(name, mid, true))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::normalize;

    fn kinds(mixture: &str, constituents: &[&str]) -> Vec<(Option<usize>, &'static str)> {
        let cs: Vec<_> = constituents.iter().map(|s| normalize(s)).collect();
        check_compound(&normalize(mixture), &cs).iter().map(|c| (c.constituent, c.kind.code())).collect()
    }

    #[test]
    fn valid_mixtures() {
        assert!(kinds("CC-BY-4.0", &["CC-BY-4.0", "CC-BY-3.0", "CC0-1.0"]).is_empty());
        assert!(kinds("MIT", &["MIT", "BSD-3-Clause", "Apache-2.0", "CC0-1.0"]).is_empty());
        assert!(kinds("CC-BY-NC-4.0", &["CC-BY-4.0", "MIT", "CC-BY-NC-4.0"]).is_empty());
        assert!(kinds("CC-BY-SA-4.0", &["CC-BY-SA-4.0", "CC-BY-4.0", "MIT"]).is_empty());
        // CC BY-SA 3.0 allows adaptations under later versions with the same elements.
        assert!(kinds("CC-BY-SA-4.0", &["CC-BY-SA-3.0", "CC-BY-SA-3.0-DE"]).is_empty());
        assert!(kinds("GPL-3.0-only", &["GPL-2.0-or-later", "LGPL-2.1-only", "MIT"]).is_empty());
        // The mixture's licensor may offer a choice; each branch constituent is covered.
        assert!(kinds("CC-BY-4.0", &["MIT OR GPL-3.0-only"]).is_empty());
    }

    #[test]
    fn invalid_relicensing() {
        assert_eq!(kinds("CC-BY-4.0", &["CC-BY-NC-4.0"]), [(Some(0), "commercial-use")]);
        assert_eq!(kinds("MIT", &["GPL-2.0-only"]), [(Some(0), "share-alike")]);
        assert_eq!(kinds("MIT", &["MPL-2.0"]), [(Some(0), "weak-copyleft")]);
        assert_eq!(kinds("CC-BY-4.0", &["CC-BY-ND-4.0"]), [(Some(0), "no-derivatives")]);
        assert_eq!(kinds("CC0-1.0", &["MIT"]), [(Some(0), "attribution")]);
        assert_eq!(kinds("CC-BY-4.0", &["CC-BY-NC-SA-4.0"]), [(Some(0), "commercial-use"), (Some(0), "share-alike")]);
        // GPL-2.0-only content cannot be relicensed under GPL-2.0-or-later or GPL-3.0.
        assert_eq!(kinds("GPL-2.0-or-later", &["GPL-2.0-only"]), [(Some(0), "share-alike-mismatch")]);
        assert_eq!(kinds("GPL-3.0-only", &["GPL-2.0-only"]), [(Some(0), "share-alike-mismatch")]);
        // Cross-license compatibility is not modelled: a reviewer decides.
        assert_eq!(kinds("GPL-3.0-only", &["CC-BY-SA-4.0"]), [(Some(0), "share-alike-mismatch")]);
        assert_eq!(kinds("CC-BY-SA-3.0", &["CC-BY-SA-4.0"]), [(Some(0), "share-alike-mismatch")]);
    }

    /// From the Data Provenance Initiative's lineage: Tasksource's `robust_nli-li_li` is declared
    /// `OANC` and lists SNLI (`CC BY-SA 4.0`) and MNLI (`OANC`) under "Derived from Datasets";
    /// Flan's `esnli` is declared `CC BY-SA 4.0` over SNLI. tests/dpi.rs finds the first case in
    /// the real summaries.
    #[test]
    fn dpi_lineage() {
        assert_eq!(kinds("OANC", &["CC BY-SA 4.0", "OANC"]), [(Some(0), "share-alike")]);
        assert!(kinds("CC BY-SA 4.0", &["CC BY-SA 4.0"]).is_empty());
        // Tasksource's `robust_nli-pi_sp` declares both licenses: consistent.
        assert!(kinds("CC-BY-SA-4.0 AND LicenseRef-OANC", &["CC BY-SA 4.0", "OANC"]).is_empty());
        // Flan's `dart` is MIT over WikiSQL (BSD-3-Clause AND Apache-2.0): permissive over permissive.
        assert!(kinds("MIT License", &["BSD-3-Clause AND Apache-2.0"]).is_empty());
    }

    /// The main job's corpus: a mixture naming each constituent's license as an `AND` operand
    /// carries them all, including a `LicenseRef-` without terms.
    #[test]
    fn constituents_carried_by_the_mixture() {
        let mixture = "MIT AND GPL-3.0-or-later AND GPL-2.0-or-later AND LicenseRef-public-domain";
        assert!(kinds(mixture, &["MIT", "GPL-3+", "GPL-2+", "LicenseRef-public-domain"]).is_empty());
        // A constituent that is not carried still needs the mixture's class.
        assert_eq!(kinds(mixture, &["MIT", "CC BY-NC 4.0"]), [(None, "unclassified-mixture")]);
        assert_eq!(kinds(mixture, &["MIT", "public-domain"]), [(None, "unclassified-mixture")]);
        assert_eq!(
            kinds("MIT AND GPL-2.0-only", &["GPL-2.0-only", "GPL-3.0-only"]),
            [(Some(1), "share-alike-mismatch")]
        );
        // `A OR B` as an operand is carried as a whole, not by one branch.
        assert!(kinds("(MIT OR Apache-2.0) AND LicenseRef-X", &["MIT OR Apache-2.0"]).is_empty());
        assert_eq!(kinds("(MIT OR Apache-2.0) AND LicenseRef-X", &["MIT"]), [(None, "unclassified-mixture")]);
    }

    #[test]
    fn unknown_licenses() {
        assert_eq!(kinds("Unspecified", &["MIT"]), [(None, "unclassified-mixture")]);
        assert_eq!(kinds("MIT", &["Custom", "MIT"]), [(Some(0), "unclassified-constituent")]);
        let c = check_compound(&normalize("MIT"), &[normalize("Custom")]);
        assert_eq!(
            c[0].to_string(),
            "constituent 0 (`unknown (not-a-license)`) cannot be checked: license is unknown: \
             not a license: `Custom` (custom terms: read the license text)"
        );
    }

    #[test]
    fn messages() {
        let c = check_compound(&normalize("MIT"), &[normalize("GPL-2+")]);
        assert_eq!(
            c[0].to_string(),
            "constituent 0 (`GPL-2.0-or-later`) is share-alike, so the mixture must carry its license, but it is `MIT`"
        );
    }
}
