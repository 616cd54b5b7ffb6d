//! What a license lets a data user do: [`classify`].
//!
//! A [`Class`] has the four properties that decide whether data may enter a training mixture
//! and under which license the mixture may be released: commercial use, attribution,
//! share-alike (copyleft) and no-derivatives. They are the columns of the Data Provenance
//! Initiative's `license_classes.json` (use category, attribution, share-alike) plus
//! no-derivatives, which the DPI folds into its other columns.
//!
//! # How an expression is classified
//!
//! - A license id: from the terms tabulated in this module (Creative Commons ids are read
//!   from their elements, GNU ids from their family). Ids that are not tabulated are
//!   [`Unclassified::NoTerms`] rather than guessed.
//! - `A AND B`: both apply; commercial use only if both allow it, attribution, share-alike and
//!   no-derivatives if either requires them (share-alike: the stronger of the two).
//! - `A OR B`: the licensee picks; the class is that of the most permissive operand, ordered
//!   by commercial use, then no-derivatives, then share-alike, then attribution.
//! - `X+` / `-or-later`: the class of the named version (every tabulated family keeps its
//!   class across versions).
//! - `X WITH exception`: the class of `X`. Every exception on the SPDX exceptions list grants
//!   permissions beyond the license (that is what SPDX lists as an exception); none adds a
//!   restriction, so the base license bounds what may be done. An `AdditionRef-` is text SPDX
//!   does not know and could restrict (the "Commons Clause" is written this way):
//!   [`Unclassified::UnknownAddition`].
//! - An ambiguous string: the class its candidates share, if they all have the same one (every
//!   version of CC BY-SA is commercial, attributed and share-alike); otherwise unclassified.
//!
//! # Share-alike levels
//!
//! [`ShareAlike::Strong`] licenses (GPL, AGPL, CC BY-SA, CDLA-Sharing, `ODbL`) require a
//! derivative work as a whole to carry the same license. [`ShareAlike::Weak`] licenses (LGPL,
//! MPL, EPL, CDDL) keep the licensed files under their license but let a larger work that
//! contains them be licensed otherwise. The DPI's share-alike column marks exactly the strong
//! ones (it lists LGPL, MPL and EPL with share-alike `0`).

use std::fmt;

use spdx::{AdditionItem, LicenseItem, LicenseReq};

use crate::expression::{LicenseExpression, Node};
use crate::normalize::{Normalized, UnknownReason};

/// What a license lets a data user do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Class {
    /// Commercial use is allowed.
    pub commercial: bool,
    /// Redistribution must credit the licensor (keep notices, name the author).
    pub attribution: bool,
    /// How far the license binds derivatives.
    pub share_alike: ShareAlike,
    /// Derivatives (adaptations) may not be distributed.
    pub no_derivatives: bool,
}

/// How far a license binds derivatives to its own terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ShareAlike {
    /// Derivatives may be licensed freely.
    No,
    /// The licensed files keep their license; a larger work may be licensed otherwise
    /// (LGPL, MPL, EPL, CDDL).
    Weak,
    /// A derivative as a whole must carry the same license (GPL, AGPL, CC BY-SA, `ODbL`).
    Strong,
}

impl Class {
    const fn new(commercial: bool, attribution: bool, share_alike: ShareAlike, no_derivatives: bool) -> Self {
        Self { commercial, attribution, share_alike, no_derivatives }
    }

    /// Returns true for strong share-alike: the sense of the DPI's share-alike column.
    pub fn is_share_alike(&self) -> bool {
        self.share_alike == ShareAlike::Strong
    }

    /// Orders classes from permissive to restrictive (what a licensee offered `A OR B` picks).
    fn restrictiveness(self) -> (bool, bool, ShareAlike, bool) {
        (!self.commercial, self.no_derivatives, self.share_alike, self.attribution)
    }

    fn and(self, other: Self) -> Self {
        Self {
            commercial: self.commercial && other.commercial,
            attribution: self.attribution || other.attribution,
            share_alike: self.share_alike.max(other.share_alike),
            no_derivatives: self.no_derivatives || other.no_derivatives,
        }
    }

    /// Returns the words that say why a permissive policy would refuse this class, if any.
    pub(crate) fn restrictions(self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if !self.commercial {
            out.push("non-commercial");
        }
        if self.no_derivatives {
            out.push("no derivatives");
        }
        match self.share_alike {
            ShareAlike::Strong => out.push("share-alike"),
            ShareAlike::Weak => out.push("weak copyleft"),
            ShareAlike::No => {}
        }
        out
    }
}

impl fmt::Display for Class {
    /// Writes e.g. `commercial, attribution, share-alike`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = vec![if self.commercial { "commercial" } else { "non-commercial" }];
        if self.attribution {
            parts.push("attribution");
        }
        match self.share_alike {
            ShareAlike::Strong => parts.push("share-alike"),
            ShareAlike::Weak => parts.push("weak copyleft"),
            ShareAlike::No => {}
        }
        if self.no_derivatives {
            parts.push("no derivatives");
        }
        f.write_str(&parts.join(", "))
    }
}

/// Why a license has no class.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unclassified {
    /// The string did not normalise.
    #[error("license is unknown: {0}")]
    Unknown(UnknownReason),
    /// An ambiguous string whose candidates differ in class.
    #[error(
        "the candidates of an ambiguous license differ in class: `{first}` is {first_class}, `{other}` is {other_class}"
    )]
    CandidatesDisagree {
        /// One candidate.
        first: String,
        /// Its class.
        first_class: Class,
        /// A candidate with another class.
        other: String,
        /// Its class.
        other_class: Class,
    },
    /// A license whose terms this crate does not tabulate.
    #[error("no terms are tabulated for license `{license}`")]
    NoTerms {
        /// The license id.
        license: String,
    },
    /// An `AdditionRef-`, which may restrict the license.
    #[error("unknown addition `{addition}` may restrict the license")]
    UnknownAddition {
        /// The addition.
        addition: String,
    },
}

/// Classifies a normalised license string.
///
/// ```
/// use prov_license::{ShareAlike, classify, normalize};
/// let class = classify(&normalize("CC BY-SA 4.0")).unwrap();
/// assert!(class.commercial && class.attribution && class.share_alike == ShareAlike::Strong);
/// let class = classify(&normalize("CC-BY-NC-4.0 OR MIT")).unwrap();
/// assert!(class.commercial); // the licensee may pick MIT
/// ```
pub fn classify(normalized: &Normalized) -> Result<Class, Unclassified> {
    match normalized {
        Normalized::Spdx { expression, .. } => classify_expression(expression),
        Normalized::Unknown { reason: UnknownReason::Ambiguous { candidates, .. } } => {
            let mut classes = candidates.iter().map(|c| (c, classify_expression(c)));
            let Some((first, first_class)) = classes.next() else {
                return Err(Unclassified::Unknown(unknown_of(normalized)));
            };
            let first_class = first_class?;
            for (other, other_class) in classes {
                let other_class = other_class?;
                if other_class != first_class {
                    return Err(Unclassified::CandidatesDisagree {
                        first: first.to_string(),
                        first_class,
                        other: other.to_string(),
                        other_class,
                    });
                }
            }
            Ok(first_class)
        }
        Normalized::Unknown { reason } => Err(Unclassified::Unknown(reason.clone())),
    }
}

fn unknown_of(n: &Normalized) -> UnknownReason {
    match n {
        Normalized::Unknown { reason } => reason.clone(),
        Normalized::Spdx { .. } => UnknownReason::Empty,
    }
}

/// Classifies an SPDX expression.
pub fn classify_expression(expression: &LicenseExpression) -> Result<Class, Unclassified> {
    classify_node(expression.root())
}

fn classify_node(node: &Node) -> Result<Class, Unclassified> {
    match node {
        Node::Req(req) => classify_requirement(req),
        Node::And(xs) => {
            let mut acc: Option<Class> = None;
            for x in xs {
                let c = classify_node(x)?;
                acc = Some(acc.map_or(c, |a| a.and(c)));
            }
            acc.ok_or_else(|| Unclassified::NoTerms { license: String::new() })
        }
        Node::Or(xs) => {
            // The licensee may pick any operand whose terms are known.
            let mut best: Option<Class> = None;
            let mut first_err = None;
            for x in xs {
                match classify_node(x) {
                    Ok(c) => {
                        if best.is_none_or(|b| c.restrictiveness() < b.restrictiveness()) {
                            best = Some(c);
                        }
                    }
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
            best.ok_or_else(|| first_err.unwrap_or(Unclassified::NoTerms { license: String::new() }))
        }
    }
}

/// Classifies one requirement (a license, `+`, `WITH`).
pub(crate) fn classify_requirement(req: &LicenseReq) -> Result<Class, Unclassified> {
    if let Some(AdditionItem::Other(a)) = &req.addition {
        return Err(Unclassified::UnknownAddition { addition: a.to_string() });
    }
    let name = match &req.license {
        LicenseItem::Spdx { id, .. } => id.name.to_owned(),
        LicenseItem::Other(r) => r.to_string(),
    };
    license_terms(&name).ok_or(Unclassified::NoTerms { license: name })
}

use ShareAlike::{No, Strong, Weak};

/// Commercial, attribution, no share-alike.
const PERMISSIVE: Class = Class::new(true, true, No, false);
/// Commercial, no attribution (public-domain dedications and their kin).
const UNCONDITIONAL: Class = Class::new(true, false, No, false);
const WEAK: Class = Class::new(true, true, Weak, false);
const STRONG: Class = Class::new(true, true, Strong, false);

/// The terms of a license id (SPDX id or one of the `LicenseRef-`s this crate coins).
pub(crate) fn license_terms(name: &str) -> Option<Class> {
    if let Some(c) = creative_commons_terms(name.strip_prefix("LicenseRef-").unwrap_or(name)) {
        return Some(c);
    }
    for (prefix, class) in [("GPL-", STRONG), ("AGPL-", STRONG), ("GFDL-", STRONG), ("LGPL-", WEAK)] {
        if name.starts_with(prefix) {
            return Some(class);
        }
    }
    TERMS.iter().find(|(n, _)| *n == name).map(|(_, c)| *c)
}

/// Reads `CC-BY[-NC][-ND|-SA]-<version>[-<port>]`, `CC0-1.0` and `CC-PDDC`.
fn creative_commons_terms(name: &str) -> Option<Class> {
    if name == "CC0-1.0" || name == "CC-PDDC" {
        return Some(UNCONDITIONAL);
    }
    let rest = name.strip_prefix("CC-BY-")?;
    let parts: Vec<&str> = rest.split('-').collect();
    let version_at = parts.iter().position(|p| p.starts_with(|c: char| c.is_ascii_digit()))?;
    let elements = &parts[..version_at];
    if elements.iter().any(|e| !matches!(*e, "NC" | "ND" | "SA")) {
        return None;
    }
    let has = |e: &str| elements.contains(&e);
    Some(Class::new(!has("NC"), true, if has("SA") { Strong } else { No }, has("ND")))
}

/// The terms of the license ids that data-set metadata uses, beyond the Creative Commons and
/// GNU families (read from their names above). Sources: the license texts; for the
/// `LicenseRef-`s, the Data Provenance Initiative's `license_classes.json` as well.
const TERMS: &[(&str, Class)] = &[
    // Permissive, with a notice to keep.
    ("MIT", PERMISSIVE),
    ("X11", PERMISSIVE),
    ("ISC", PERMISSIVE),
    ("BSD-2-Clause", PERMISSIVE),
    ("BSD-2-Clause-Patent", PERMISSIVE),
    ("BSD-2-Clause-Views", PERMISSIVE),
    ("BSD-3-Clause", PERMISSIVE),
    ("BSD-3-Clause-Clear", PERMISSIVE),
    ("BSD-3-Clause-LBNL", PERMISSIVE),
    ("BSD-3-Clause-Attribution", PERMISSIVE),
    ("BSD-4-Clause", PERMISSIVE),
    ("BSD-4-Clause-UC", PERMISSIVE),
    ("Apache-1.0", PERMISSIVE),
    ("Apache-1.1", PERMISSIVE),
    ("Apache-2.0", PERMISSIVE),
    ("Zlib", PERMISSIVE),
    ("zlib-acknowledgement", PERMISSIVE),
    ("Artistic-1.0", PERMISSIVE),
    ("Artistic-1.0-Perl", PERMISSIVE),
    ("Artistic-1.0-cl8", PERMISSIVE),
    ("Artistic-2.0", PERMISSIVE),
    ("PSF-2.0", PERMISSIVE),
    ("Python-2.0", PERMISSIVE),
    ("Python-2.0.1", PERMISSIVE),
    ("BSL-1.0", PERMISSIVE),
    ("AFL-1.1", PERMISSIVE),
    ("AFL-1.2", PERMISSIVE),
    ("AFL-2.0", PERMISSIVE),
    ("AFL-2.1", PERMISSIVE),
    ("AFL-3.0", PERMISSIVE),
    ("NCSA", PERMISSIVE),
    ("PostgreSQL", PERMISSIVE),
    ("UPL-1.0", PERMISSIVE),
    ("ECL-2.0", PERMISSIVE),
    ("W3C", PERMISSIVE),
    ("HPND", PERMISSIVE),
    ("curl", PERMISSIVE),
    ("Libpng", PERMISSIVE),
    ("libpng-2.0", PERMISSIVE),
    ("Unicode-3.0", PERMISSIVE),
    ("Unicode-DFS-2016", PERMISSIVE),
    ("BlueOak-1.0.0", PERMISSIVE),
    ("ODC-By-1.0", PERMISSIVE),
    ("OGL-UK-1.0", PERMISSIVE),
    ("OGL-UK-2.0", PERMISSIVE),
    ("OGL-UK-3.0", PERMISSIVE),
    ("OGL-Canada-2.0", PERMISSIVE),
    ("CDLA-Permissive-1.0", PERMISSIVE),
    ("CDLA-Permissive-2.0", PERMISSIVE),
    ("O-UDA-1.0", PERMISSIVE),
    // Permissive without conditions.
    ("0BSD", UNCONDITIONAL),
    ("MIT-0", UNCONDITIONAL),
    ("Unlicense", UNCONDITIONAL),
    ("WTFPL", UNCONDITIONAL),
    ("PDDL-1.0", UNCONDITIONAL),
    // Weak copyleft: the licensed files keep their license.
    ("MPL-1.0", WEAK),
    ("MPL-1.1", WEAK),
    ("MPL-2.0", WEAK),
    ("MPL-2.0-no-copyleft-exception", WEAK),
    ("EPL-1.0", WEAK),
    ("EPL-2.0", WEAK),
    ("CDDL-1.0", WEAK),
    ("CDDL-1.1", WEAK),
    ("CPL-1.0", WEAK),
    ("MS-PL", WEAK),
    ("MS-RL", WEAK),
    ("OFL-1.0", WEAK),
    ("OFL-1.1", WEAK),
    ("CECILL-C", WEAK),
    ("APSL-2.0", WEAK),
    // Strong copyleft / share-alike.
    ("OSL-1.0", STRONG),
    ("OSL-1.1", STRONG),
    ("OSL-2.0", STRONG),
    ("OSL-2.1", STRONG),
    ("OSL-3.0", STRONG),
    ("EUPL-1.0", STRONG),
    ("EUPL-1.1", STRONG),
    ("EUPL-1.2", STRONG),
    ("CECILL-1.0", STRONG),
    ("CECILL-1.1", STRONG),
    ("CECILL-2.0", STRONG),
    ("CECILL-2.1", STRONG),
    ("ODbL-1.0", STRONG),
    ("CDLA-Sharing-1.0", STRONG),
    // Data may be redistributed only under C-UDA itself; results of computation are free.
    ("C-UDA-1.0", STRONG),
    ("Sleepycat", STRONG),
    ("SSPL-1.0", STRONG),
    ("RPL-1.1", STRONG),
    ("RPL-1.5", STRONG),
    // Non-commercial.
    ("PolyForm-Noncommercial-1.0.0", Class::new(false, true, No, false)),
    ("NCGL-UK-2.0", Class::new(false, true, No, false)),
    // LicenseRef-s coined by this crate for licenses the SPDX list lacks (see crate::dpi).
    // Use-based restrictions must be passed on to every derivative (DPI: share-alike).
    ("LicenseRef-AI2-ImpACT-LR", STRONG),
    ("LicenseRef-BigScience-OpenRAIL-M", STRONG),
    ("LicenseRef-CSLU-Agreement", Class::new(false, true, No, false)),
    ("LicenseRef-LDC-User-Agreement", Class::new(false, true, No, false)),
    // DPI: all uses, no attribution, no share-alike.
    ("LicenseRef-LMSYS-Chat-1M", UNCONDITIONAL),
    // Commercial use allowed below 700 million monthly active users; keep the notice.
    ("LicenseRef-Llama-2-Community", PERMISSIVE),
    // "Built with Meta Llama 3" must be displayed.
    ("LicenseRef-Llama-3-Community", PERMISSIVE),
    // Non-commercial research; DPI: academic only, attribution, share-alike.
    ("LicenseRef-MSR-Data-License", Class::new(false, true, Strong, false)),
    ("LicenseRef-OANC", PERMISSIVE),
    ("LicenseRef-Skywork-Community", PERMISSIVE),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::normalize;

    fn class(s: &str) -> Result<Class, Unclassified> {
        classify(&normalize(s))
    }

    #[test]
    fn terms_table_names_real_ids() {
        for (name, _) in TERMS {
            if !name.starts_with("LicenseRef-") {
                let id = spdx::license_id(name).unwrap_or_else(|| panic!("{name} is not an SPDX id"));
                assert!(!id.is_deprecated(), "{name} is deprecated");
            }
        }
        let mut names: Vec<_> = TERMS.iter().map(|(n, _)| n).collect();
        names.sort_unstable();
        assert!(names.windows(2).all(|w| w[0] != w[1]), "duplicate entry in TERMS");
    }

    #[test]
    fn creative_commons_elements() {
        assert_eq!(class("CC-BY-4.0").unwrap(), PERMISSIVE);
        assert_eq!(class("CC-BY-NC-SA-3.0-DE").unwrap(), Class::new(false, true, Strong, false));
        assert_eq!(class("CC-BY-ND-4.0").unwrap(), Class::new(true, true, No, true));
        assert_eq!(class("CC BY-SA 3.0 ES").unwrap(), STRONG);
        assert_eq!(class("CC0-1.0").unwrap(), UNCONDITIONAL);
    }

    #[test]
    fn expressions() {
        // AND: both apply.
        assert_eq!(class("MIT AND CC-BY-NC-4.0").unwrap(), Class::new(false, true, No, false));
        assert_eq!(class("MPL-2.0 AND GPL-3.0-only").unwrap(), STRONG);
        // OR: the most permissive branch.
        assert_eq!(class("GPL-3.0-only OR MIT").unwrap(), PERMISSIVE);
        assert_eq!(class("CC-BY-NC-4.0 OR GPL-2.0-only").unwrap(), STRONG);
        // An unknown branch of an OR is not needed when a known one exists.
        assert_eq!(class("LicenseRef-whatever OR MIT").unwrap(), PERMISSIVE);
        assert!(matches!(class("LicenseRef-whatever AND MIT"), Err(Unclassified::NoTerms { .. })));
        // WITH an SPDX exception: the base license.
        assert_eq!(class("GPL-2.0-only WITH Classpath-exception-2.0").unwrap(), STRONG);
        assert!(matches!(class("MIT WITH AdditionRef-Commons-Clause"), Err(Unclassified::UnknownAddition { .. })));
        // Or-later: the named version.
        assert_eq!(class("LGPL-2.1-or-later").unwrap(), WEAK);
        assert_eq!(class("Apache-1.1+").unwrap(), PERMISSIVE);
    }

    #[test]
    fn ambiguous_strings_take_their_shared_class() {
        assert_eq!(class("CC BY-SA").unwrap(), STRONG);
        assert_eq!(class("GPL").unwrap(), STRONG);
        assert_eq!(class("BSD").unwrap(), PERMISSIVE);
        // EPL-1.0 and EPL-2.0 are both weak copyleft.
        assert_eq!(class("EPL").unwrap(), WEAK);
        assert!(matches!(class("Unspecified"), Err(Unclassified::Unknown(_))));
        assert!(matches!(class("Artistic License"), Ok(PERMISSIVE)));
    }
}
