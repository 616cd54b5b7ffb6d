//! Licenses for Provenant: declared license strings to SPDX expressions, caller-chosen
//! policies, license classes and compound-data-set consistency.
//!
//! `prov-license` owns what a license string means: it normalises the strings that data sets
//! and packages declare ("Apache License 2.0", `GPL-2+`, `MIT/Apache-2.0`, `CC BY-NC-SA 4.0`)
//! to canonical SPDX expressions with the [`spdx`] crate, says why when a string does not
//! denote one license, evaluates expressions against a [`Policy`] the caller passes in,
//! classifies licenses by what they allow (commercial use, attribution, share-alike,
//! derivatives), and checks that a mixture's declared license does not re-license its
//! constituents invalidly.
//!
//! It deliberately does not:
//!
//! - decide which licenses are acceptable: that is a [`Policy`] value chosen, versioned and
//!   recorded by the caller (`prov-prep`'s license filter, `prov-audit`);
//!   [`Policy::permissive`] is a preset, not a default;
//! - fetch anything, or read environment variables or files the caller does not name:
//!   [`detect`] matches the text of a license file the caller has read, and the review
//!   [`queue`] reads the store and the verdicts directory it is given;
//! - write verdicts or ledgers: a [`PolicyDecision`] carries the decision, rule and reason that
//!   the caller puts into a `prov_manifest::VerdictRecord`, whose [`Decision`] it shares; a
//!   reviewer's verdict is built by [`reviewer_verdict`] and stored and committed by the caller;
//! - give legal advice: the tables say which reading was chosen and why, so that a reviewer can
//!   disagree with a specific line.
//!
//! # Brief overview
//!
//! - [`normalize()`] → [`Normalized`]: an SPDX [`LicenseExpression`] and the [`Rule`] that
//!   recognised it, or [`UnknownReason`] (empty, not a license, ambiguous with candidates,
//!   unrecognised with the input underlined).
//! - [`Policy`], [`PolicyBuilder`], [`evaluate`] → [`PolicyDecision`]: allow or deny, the
//!   [`PolicyRule`] that fired, the reason, and a decision per requirement.
//! - [`classify()`] → [`Class`]: commercial, attribution, [`ShareAlike`], no-derivatives.
//! - [`check_compound`] → [`Conflict`]s: where a mixture is more permissive than a constituent.
//! - [`dpi`]: the Data Provenance Initiative's license strings and their readings.
//! - [`detect`]: which SPDX license texts a license file's text matches ([`detect::LicenseTexts`]).
//! - [`review`]: [`Status`] (allow, deny, review), reviewer verdicts and their
//!   [`ReviewedVerdicts`] index, license policy files ([`parse_policy`]) and [`diff`].
//! - [`queue`]: the license review queue of a recorded run ([`queue::gather`]): what its
//!   `license` stages left to a reviewer, with the evidence, and the subject a reviewer names.
//!
//! # Files
//!
//! | module | holds |
//! | --- | --- |
//! | `expression.rs` | [`LicenseExpression`]: case-insensitive SPDX parsing, deprecated ids rewritten, canonical text |
//! | `normalize/` | the normalisation rules in their order and their tables (not-a-license words; Creative Commons, Debian, prose names and families in a module each) |
//! | `dpi.rs` | the DPI table (generated left column, reviewed right column) |
//! | `detect.rs` | license files and their matching against the SPDX license texts |
//! | `classify.rs` | license terms and [`classify()`] |
//! | `policy.rs` | [`Policy`], the permissive preset, [`evaluate`] |
//! | `compound.rs` | [`check_compound`] |
//! | `review.rs` | reviewer verdicts, policy files, policy diffs |
//! | `version.rs` | license families and later versions |
//!
//! # Example
//!
//! ```
//! use prov_license::{Normalized, Policy, PolicyRule, Rule, check_compound, classify, evaluate, normalize};
//! use prov_manifest::Decision;
//!
//! let declared = normalize("MIT/Apache-2.0");
//! let Normalized::Spdx { expression, via } = &declared else { panic!("normalises") };
//! assert_eq!((expression.as_str(), *via), ("MIT OR Apache-2.0", Rule::CargoSlash));
//!
//! let policy = Policy::permissive();
//! let decision = evaluate(&policy, &declared);
//! assert_eq!((decision.decision, decision.rule), (Decision::Allow, PolicyRule::AllowList));
//!
//! let nc = normalize("CC BY-NC 4.0");
//! assert!(!classify(&nc)?.commercial);
//! assert_eq!(evaluate(&policy, &nc).decision, Decision::Deny);
//!
//! // A CC BY mixture may not contain non-commercial data.
//! let conflicts = check_compound(&normalize("CC-BY-4.0"), &[declared, nc]);
//! assert_eq!(conflicts[0].to_string(),
//!     "constituent 1 (`CC-BY-NC-4.0`) forbids commercial use, which the mixture's `CC-BY-4.0` allows");
//!
//! // Strings that name no single license say why.
//! let Normalized::Unknown { reason } = normalize("BSD") else { panic!("ambiguous") };
//! assert_eq!(reason.code(), "ambiguous");
//! # Ok::<(), prov_license::Unclassified>(())
//! ```

#![deny(missing_docs)]

pub mod classify;
pub mod compound;
pub mod detect;
pub mod dpi;
pub mod expression;
pub mod normalize;
mod not_a_license;
pub mod policy;
pub mod queue;
pub mod review;
mod version;

pub use classify::{Class, ShareAlike, Unclassified, classify, classify_expression};
pub use compound::{Conflict, ConflictKind, check_compound};
pub use expression::{ExpressionError, LicenseExpression};
pub use normalize::{Ambiguity, Normalized, NotALicense, Rule, UnknownReason, normalize};
pub use policy::{
    AmbiguousRule, Policy, PolicyBuilder, PolicyDecision, PolicyError, PolicyRule, RequirementDecision, evaluate,
    evaluate_expression,
};
pub use prov_manifest::Decision;
pub use review::{
    Comparison, MANUAL_RULE, Review, ReviewError, Reviewed, ReviewedVerdicts, Side, Signed, Status, VerdictFileError,
    diff, encode_file_name, license_key, parse_policy, reviewer_verdict, status, verdict_path,
};
pub use spdx;

/// Returns the version of the SPDX license list the ids come from (e.g. `3.29.0`); record it
/// beside verdicts, since a later list may add ids that change a normalisation.
pub fn spdx_list_version() -> &'static str {
    spdx::license_version()
}
