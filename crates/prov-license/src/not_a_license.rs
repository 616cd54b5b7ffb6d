//! [`NotALicense`]: what a license string that names no license says instead. Both the
//! normaliser and the Data Provenance Initiative's table (`dpi`) read strings into it.

use std::fmt;

/// What a string that names no license says instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum NotALicense {
    /// No license is stated (`Unspecified`, `Unknown`, `NOASSERTION`).
    Unspecified,
    /// The source states that there is no license (`No License`, SPDX `NONE`); copyright law
    /// then reserves all rights.
    NoLicense,
    /// Custom terms whose text must be read (`Custom`, `Proprietary`, Debian's `permissive`).
    CustomTerms,
    /// A summary of permitted uses rather than a license (`Non Commercial`,
    /// `Academic Research Purposes Only`, `All Uses-Attribution`).
    UsageSummary,
    /// A public-domain claim: it depends on jurisdiction and is not checkable from the string;
    /// a dedication such as `CC0-1.0` or `CC-PDDC` is.
    PublicDomain,
    /// Several licenses, not named (`Various`).
    Several,
    /// The terms of service of a model or API that produced the text (`OpenAI`, `Anthropic`,
    /// `Google Cloud Translation API`), which bind its user, not a license of the text.
    ServiceTerms,
    /// How access is obtained (`Request Form`, `Open Access`), not the terms of use.
    AccessTerms,
}

impl NotALicense {
    /// Returns a stable code for ledgers.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unspecified => "unspecified",
            Self::NoLicense => "no-license",
            Self::CustomTerms => "custom-terms",
            Self::UsageSummary => "usage-summary",
            Self::PublicDomain => "public-domain",
            Self::Several => "several",
            Self::ServiceTerms => "service-terms",
            Self::AccessTerms => "access-terms",
        }
    }
}

impl fmt::Display for NotALicense {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Unspecified => "(no license is stated)",
            Self::NoLicense => "(the source states that it has no license, so all rights are reserved)",
            Self::CustomTerms => "(custom terms: read the license text)",
            Self::UsageSummary => "(a summary of permitted uses, not a license text)",
            Self::PublicDomain => {
                "(a public-domain claim: it depends on jurisdiction; a dedication such as `CC0-1.0` can be checked)"
            }
            Self::Several => "(several licenses, not named)",
            Self::ServiceTerms => "(terms of service of the model or API that produced the text, not a license of it)",
            Self::AccessTerms => "(how access is obtained, not the terms of use)",
        })
    }
}
