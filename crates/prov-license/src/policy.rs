//! Which licenses are acceptable: a [`Policy`] value, chosen by the caller, and [`evaluate`].
//!
//! A policy is an allow list of license ids, optionally `license WITH addition` pairs, and a
//! rule for ambiguous strings. Everything not allowed is denied, and the denial names the
//! restriction that keeps it out (non-commercial, share-alike, …) when the license's terms are
//! known ([`crate::classify()`]).
//!
//! # Evaluating an expression
//!
//! - `A OR B` is allowed if either operand is allowed (the licensee may choose it);
//! - `A AND B` is allowed if both are;
//! - `X+` and `X-or-later` are allowed if `X` or any later version of it on the SPDX list is
//!   allowed (the licensee may choose that version): `Apache-1.1+` passes a policy that allows
//!   `Apache-2.0`;
//! - `X WITH E`, for an exception `E` on the SPDX exceptions list, is allowed if `X` is, since
//!   every listed exception only adds permissions; a policy may also allow the pair explicitly
//!   (`GPL-2.0-only WITH Classpath-exception-2.0`) where `X` alone is denied;
//! - `X WITH AdditionRef-…` is denied unless the policy allows that pair: the text is unknown
//!   and may restrict `X` (the "Commons Clause" is written this way);
//! - a string that did not normalise is denied; an ambiguous one is denied too unless the
//!   policy says [`AmbiguousRule::AllowIfEveryCandidateAllowed`].
//!
//! # The permissive preset
//!
//! [`Policy::permissive`] is the Apertus report's rule for code and post-training data:
//! keep only what is permissively licensed, "redistribution and commercial use allowed". It
//! allows MIT, Apache-2.0, the 2- and 3-clause BSD licenses, ISC, Zlib, BSL-1.0, Unlicense,
//! Artistic-2.0, PSF-2.0, CC0-1.0, every CC BY without NC/ND/SA, and the permissive data
//! licenses (ODC-By, PDDL, CDLA-Permissive, O-UDA, OGL-UK-3.0). It denies:
//!
//! - non-commercial (NC) and no-derivatives (ND) licenses: no commercial use, resp. no
//!   redistribution of modified data (filtering, deduplicating and tokenising make derivatives);
//! - strong copyleft / share-alike (GPL, AGPL, CC BY-SA, `ODbL`, CDLA-Sharing): the derivative
//!   would have to carry the same license, which a mixed corpus and the models trained on it
//!   cannot promise;
//! - weak copyleft (LGPL, MPL, EPL, CDDL): the data files themselves stay under their
//!   license, and a redistributed, modified file must be offered under it with its source.
//!   That is share-alike at file level, and the report's rule is "permissive", not "copyleft
//!   at file level is fine";
//! - BSD-4-Clause and Apache-1.0, whose advertising clause binds every downstream product's
//!   advertising, beyond the attribution the other licenses ask for;
//! - anything unknown or ambiguous.

use std::collections::BTreeSet;
use std::fmt;

use prov_manifest::Decision;
use spdx::{AdditionItem, LicenseItem, LicenseReq};

use crate::classify::classify_requirement;
use crate::expression::{ExpressionError, LicenseExpression, Node, exception_id_ci};
use crate::normalize::{Normalized, UnknownReason};
use crate::version::same_or_later_ids;

/// Which licenses are acceptable, as a value the caller chooses and records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    name: String,
    version: String,
    allow: BTreeSet<String>,
    allow_with: BTreeSet<(String, String)>,
    ambiguous: AmbiguousRule,
    verdict_signers: Vec<(String, prov_attest::PublicKey)>,
}

/// What a policy does with a string that could denote several licenses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AmbiguousRule {
    /// Deny it, as any unknown license.
    #[default]
    Deny,
    /// Allow it if every candidate reading is allowed (`BSD` under a policy that allows the 2-,
    /// 3- and 4-clause BSD licenses).
    AllowIfEveryCandidateAllowed,
}

/// Builds a [`Policy`]; the built policy cannot change.
#[derive(Debug, Clone)]
pub struct PolicyBuilder {
    policy: Policy,
}

/// A policy entry that is not a license id or addition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The entry is not valid SPDX.
    #[error("invalid license in policy `{policy}`: {source}")]
    Invalid {
        /// The policy's name.
        policy: String,
        /// The parse error, with the entry underlined.
        source: ExpressionError,
    },
    /// The entry is an expression, or carries `+` or `WITH`.
    #[error("policy `{policy}` may only list single license ids, not `{entry}`")]
    NotASingleLicense {
        /// The policy's name.
        policy: String,
        /// The entry as given.
        entry: String,
    },
    /// The addition is neither an SPDX exception id nor an `AdditionRef-`.
    #[error("policy `{policy}` lists an unknown addition: `{entry}`")]
    UnknownAddition {
        /// The policy's name.
        policy: String,
        /// The entry as given.
        entry: String,
    },
}

impl PolicyBuilder {
    /// Allows one license id (SPDX, matched case-insensitively, or `LicenseRef-…`).
    pub fn allow(mut self, license: &str) -> Result<Self, PolicyError> {
        let id = self.single_license(license)?;
        self.policy.allow.insert(id);
        Ok(self)
    }

    /// Allows a license together with an addition, e.g. `GPL-2.0-only` with
    /// `Classpath-exception-2.0`, or `MIT` with `AdditionRef-Reviewed`.
    pub fn allow_with(mut self, license: &str, addition: &str) -> Result<Self, PolicyError> {
        let id = self.single_license(license)?;
        let addition = addition.trim();
        let addition = if let Some(e) = exception_id_ci(addition) {
            e.name.to_owned()
        } else if addition.starts_with("AdditionRef-")
            && addition.len() > "AdditionRef-".len()
            && addition.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'))
        {
            addition.to_owned()
        } else {
            return Err(PolicyError::UnknownAddition { policy: self.policy.name.clone(), entry: addition.to_owned() });
        };
        self.policy.allow_with.insert((id, addition));
        Ok(self)
    }

    /// Sets what to do with ambiguous strings (default: deny).
    #[must_use]
    pub fn ambiguous(mut self, rule: AmbiguousRule) -> Self {
        self.policy.ambiguous = rule;
        self
    }

    /// Requires every reviewer verdict to be signed by one of the keys given this way (`name`
    /// is how the key is shown: the path a policy file lists it under).
    #[must_use]
    pub fn verdict_signer(mut self, name: impl Into<String>, key: prov_attest::PublicKey) -> Self {
        self.policy.verdict_signers.push((name.into(), key));
        self
    }

    /// Returns the policy.
    pub fn build(self) -> Policy {
        self.policy
    }

    fn single_license(&self, entry: &str) -> Result<String, PolicyError> {
        let e = LicenseExpression::parse(entry)
            .map_err(|source| PolicyError::Invalid { policy: self.policy.name.clone(), source })?;
        let not_single =
            || PolicyError::NotASingleLicense { policy: self.policy.name.clone(), entry: entry.to_owned() };
        match e.root() {
            Node::Req(LicenseReq { license, addition: None }) => match license {
                LicenseItem::Spdx { or_later: true, .. } => Err(not_single()),
                item => Ok(item.to_string()),
            },
            _ => Err(not_single()),
        }
    }
}

/// The ids the permissive preset allows (and [`CC_BY`]; see the module documentation).
const PERMISSIVE_ALLOW: &[&str] = &[
    // MIT and its kin.
    "MIT",
    "MIT-0",
    "X11",
    "ISC",
    "0BSD",
    // BSD, two and three clauses.
    "BSD-2-Clause",
    "BSD-2-Clause-Patent",
    "BSD-2-Clause-Views",
    "BSD-3-Clause",
    "BSD-3-Clause-Clear",
    "BSD-3-Clause-LBNL",
    "Apache-1.1",
    "Apache-2.0",
    "Zlib",
    "zlib-acknowledgement",
    "BSL-1.0",
    "Unlicense",
    "Artistic-2.0",
    "PSF-2.0",
    "Python-2.0",
    "NCSA",
    "PostgreSQL",
    "UPL-1.0",
    // Data.
    "CC0-1.0",
    "PDDL-1.0",
    "ODC-By-1.0",
    "CDLA-Permissive-1.0",
    "CDLA-Permissive-2.0",
    "O-UDA-1.0",
    "OGL-UK-3.0",
];

/// CC BY without NC, ND or SA: every version and port on the SPDX list (both presets allow
/// them).
const CC_BY: &[&str] = &[
    "CC-BY-1.0",
    "CC-BY-2.0",
    "CC-BY-2.5",
    "CC-BY-2.5-AU",
    "CC-BY-3.0",
    "CC-BY-3.0-AT",
    "CC-BY-3.0-AU",
    "CC-BY-3.0-DE",
    "CC-BY-3.0-IGO",
    "CC-BY-3.0-NL",
    "CC-BY-3.0-US",
    "CC-BY-4.0",
];

/// The ids the AFM code preset allows (and [`CC_BY`]): the report's list (§3.1.3: "MIT, Apache, BSD, CC0,
/// CC-BY, Unlicensed, ISC, and Artistic"), each family read as every version and variant on the
/// SPDX list, except Apache-1.0 and BSD-4-Clause, whose advertising clause the report's word
/// "permissive" excludes as [`Policy::permissive`] does.
const AFM_CODE_ALLOW: &[&str] = &[
    "MIT",
    "MIT-0",
    "Apache-1.1",
    "Apache-2.0",
    "0BSD",
    "BSD-2-Clause",
    "BSD-2-Clause-Patent",
    "BSD-2-Clause-Views",
    "BSD-3-Clause",
    "BSD-3-Clause-Clear",
    "BSD-3-Clause-LBNL",
    "CC0-1.0",
    "Unlicense",
    "ISC",
    "Artistic-1.0",
    "Artistic-1.0-Perl",
    "Artistic-1.0-cl8",
    "Artistic-2.0",
];

impl Policy {
    /// Starts a policy with an empty allow list; `name` and `version` go into verdicts.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> PolicyBuilder {
        PolicyBuilder {
            policy: Policy {
                name: name.into(),
                version: version.into(),
                allow: BTreeSet::new(),
                allow_with: BTreeSet::new(),
                ambiguous: AmbiguousRule::Deny,
                verdict_signers: Vec::new(),
            },
        }
    }

    /// Returns the Apertus report's "permissive: redistribution and commercial use allowed"
    /// policy, named `permissive`, version `1` (see the module documentation).
    pub fn permissive() -> Self {
        Self::listed("permissive", PERMISSIVE_ALLOW)
    }

    /// Returns the AFM report's allow list for code (§3.1.3), named `afm-code`, version `1`:
    /// MIT, Apache, BSD, CC0, CC BY, Unlicense, ISC and Artistic (see `AFM_CODE_ALLOW`). It is
    /// narrower than [`Policy::permissive`]: Zlib, BSL-1.0, the Python and PostgreSQL licenses
    /// and the data licenses are permissive but not on the report's list.
    ///
    /// ```
    /// use prov_license::{Policy, evaluate, normalize};
    /// use prov_manifest::Decision;
    /// let afm = Policy::afm_code();
    /// assert_eq!(evaluate(&afm, &normalize("MIT OR Apache-2.0")).decision, Decision::Allow);
    /// assert_eq!(evaluate(&afm, &normalize("Zlib")).decision, Decision::Deny);
    /// assert_eq!(evaluate(&Policy::permissive(), &normalize("Zlib")).decision, Decision::Allow);
    /// ```
    pub fn afm_code() -> Self {
        Self::listed("afm-code", AFM_CODE_ALLOW)
    }

    /// A preset named `name`, version `1`, allowing `ids` and every CC BY license.
    fn listed(name: &str, ids: &[&str]) -> Self {
        let mut policy = Self::builder(name, "1").build();
        policy.allow = ids.iter().chain(CC_BY).map(|s| (*s).to_owned()).collect();
        policy
    }

    /// The names of the presets [`Policy::preset`] knows.
    pub const PRESETS: [&'static str; 2] = ["afm-code", "permissive"];

    /// The preset of that name (one of [`Policy::PRESETS`]), as stage configurations name them.
    pub fn preset(name: &str) -> Option<Self> {
        match name {
            "afm-code" => Some(Self::afm_code()),
            "permissive" => Some(Self::permissive()),
            _ => None,
        }
    }

    /// Returns the policy's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Returns the policy's version, as recorded in verdicts.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The keys one of which must have signed every reviewer verdict, by name; none when the
    /// policy does not require signed verdicts.
    pub fn verdict_signers(&self) -> &[(String, prov_attest::PublicKey)] {
        &self.verdict_signers
    }

    /// Returns the allowed license ids, sorted.
    pub fn allowed(&self) -> impl Iterator<Item = &str> {
        self.allow.iter().map(String::as_str)
    }

    /// Returns the allowed `(license, addition)` pairs, sorted.
    pub fn allowed_with(&self) -> impl Iterator<Item = (&str, &str)> {
        self.allow_with.iter().map(|(l, a)| (l.as_str(), a.as_str()))
    }

    /// Returns the rule for ambiguous strings.
    pub fn ambiguous_rule(&self) -> AmbiguousRule {
        self.ambiguous
    }
}

/// The policy rule that decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum PolicyRule {
    /// The license is in the allow list.
    AllowList,
    /// `X+`: a later version of `X` is in the allow list.
    AllowListLaterVersion,
    /// The `license WITH addition` pair is in the allow list.
    AllowListWith,
    /// The license is not in the allow list.
    NotInAllowList,
    /// An `AdditionRef-` that the policy does not allow.
    UnknownAddition,
    /// The string did not normalise.
    UnknownLicense,
    /// The string is ambiguous and the policy denies ambiguity (or a candidate).
    Ambiguous,
    /// The string is ambiguous and every candidate is allowed.
    AmbiguousEveryCandidateAllowed,
}

impl PolicyRule {
    /// Returns the stable name written into verdicts (`VerdictRecord::rule`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AllowList => "allow-list",
            Self::AllowListLaterVersion => "allow-list-later-version",
            Self::AllowListWith => "allow-list-with",
            Self::NotInAllowList => "not-in-allow-list",
            Self::UnknownAddition => "unknown-addition",
            Self::UnknownLicense => "unknown-license",
            Self::Ambiguous => "ambiguous",
            Self::AmbiguousEveryCandidateAllowed => "ambiguous-every-candidate-allowed",
        }
    }
}

impl fmt::Display for PolicyRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The decision of a policy about a license string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyDecision {
    /// Allow or deny.
    pub decision: Decision,
    /// The rule that decided (for an expression: the rule of the first deciding requirement).
    pub rule: PolicyRule,
    /// Why, in a sentence that names the licenses and the policy.
    pub reason: String,
    /// The decision on every requirement of the expression, in written order (empty for a
    /// string that did not normalise).
    pub requirements: Vec<RequirementDecision>,
}

/// The decision of a policy about one requirement of an expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequirementDecision {
    /// The requirement, e.g. `Apache-2.0 WITH LLVM-exception`.
    pub requirement: String,
    /// Allow or deny.
    pub decision: Decision,
    /// The rule that decided.
    pub rule: PolicyRule,
    /// Why.
    pub reason: String,
}

/// Evaluates a normalised license string against a policy. Never panics.
///
/// ```
/// use prov_license::{Policy, PolicyRule, evaluate, normalize};
/// use prov_manifest::Decision;
/// let policy = Policy::permissive();
/// let d = evaluate(&policy, &normalize("GPL-3.0-only OR MIT"));
/// assert_eq!((d.decision, d.rule), (Decision::Allow, PolicyRule::AllowList));
/// let d = evaluate(&policy, &normalize("CC BY-NC 4.0"));
/// assert_eq!(d.decision, Decision::Deny);
/// assert_eq!(d.reason, "`CC-BY-NC-4.0` is not in the allow list of policy `permissive` (non-commercial)");
/// ```
pub fn evaluate(policy: &Policy, normalized: &Normalized) -> PolicyDecision {
    match normalized {
        Normalized::Spdx { expression, .. } => evaluate_expression(policy, expression),
        Normalized::Unknown { reason: reason @ UnknownReason::Ambiguous { candidates, .. } }
            if policy.ambiguous == AmbiguousRule::AllowIfEveryCandidateAllowed && !candidates.is_empty() =>
        {
            for c in candidates {
                let d = evaluate_expression(policy, c);
                if d.decision == Decision::Deny {
                    return PolicyDecision {
                        decision: Decision::Deny,
                        rule: PolicyRule::Ambiguous,
                        reason: format!("{reason}; the reading `{c}` is denied: {}", d.reason),
                        requirements: vec![],
                    };
                }
            }
            PolicyDecision {
                decision: Decision::Allow,
                rule: PolicyRule::AmbiguousEveryCandidateAllowed,
                reason: format!("{reason}; policy `{}` allows every reading", policy.name),
                requirements: vec![],
            }
        }
        Normalized::Unknown { reason } => PolicyDecision {
            decision: Decision::Deny,
            rule: if matches!(reason, UnknownReason::Ambiguous { .. }) {
                PolicyRule::Ambiguous
            } else {
                PolicyRule::UnknownLicense
            },
            reason: reason.to_string(),
            requirements: vec![],
        },
    }
}

/// Evaluates an SPDX expression against a policy.
pub fn evaluate_expression(policy: &Policy, expression: &LicenseExpression) -> PolicyDecision {
    let requirements: Vec<RequirementDecision> =
        expression.requirements().into_iter().map(|r| evaluate_requirement(policy, r)).collect();
    let mut next = 0;
    let (allowed, deciding) = decide(expression.root(), &requirements, &mut next);
    let first = deciding.first().and_then(|&i| requirements.get(i));
    let reason = deciding.iter().filter_map(|&i| requirements.get(i)).map(|r| r.reason.as_str()).collect::<Vec<_>>();
    PolicyDecision {
        decision: if allowed { Decision::Allow } else { Decision::Deny },
        rule: first.map_or(PolicyRule::UnknownLicense, |r| r.rule),
        reason: reason.join("; "),
        requirements,
    }
}

/// Evaluates the tree; returns the result and the requirements (by index) that decided it.
fn decide(node: &Node, leaves: &[RequirementDecision], next: &mut usize) -> (bool, Vec<usize>) {
    match node {
        Node::Req(_) => {
            let i = *next;
            *next += 1;
            (leaves.get(i).is_some_and(|r| r.decision == Decision::Allow), vec![i])
        }
        Node::And(xs) | Node::Or(xs) => {
            let results: Vec<_> = xs.iter().map(|x| decide(x, leaves, next)).collect();
            let want = matches!(node, Node::Or(_));
            // OR: the first allowed operand decides; AND: the first denied one. Otherwise all.
            match results.iter().find(|(ok, _)| *ok == want) {
                Some((ok, why)) => (*ok, why.clone()),
                None => (!want, results.into_iter().flat_map(|(_, why)| why).collect()),
            }
        }
    }
}

fn evaluate_requirement(policy: &Policy, req: &LicenseReq) -> RequirementDecision {
    let requirement = req.to_string();
    let license = req.license.to_string();
    let decided = |decision, rule, reason: String| RequirementDecision {
        requirement: requirement.clone(),
        decision,
        rule,
        reason,
    };
    let name = &policy.name;
    if let Some(addition) = &req.addition {
        let addition_text = addition.to_string();
        if policy.allow_with.contains(&(license.clone(), addition_text.clone())) {
            return decided(
                Decision::Allow,
                PolicyRule::AllowListWith,
                format!("`{requirement}` is in the allow list of policy `{name}`"),
            );
        }
        if let AdditionItem::Other(_) = addition {
            return decided(
                Decision::Deny,
                PolicyRule::UnknownAddition,
                format!(
                    "`{requirement}`: the addition `{addition_text}` is unknown and may restrict the license, \
                     and policy `{name}` does not allow the pair"
                ),
            );
        }
    }
    let base = evaluate_license(policy, req);
    let reason = match (&req.addition, base.0) {
        (Some(a), Decision::Allow) => format!("{}; the exception `{a}` only adds permissions", base.2),
        _ => base.2,
    };
    decided(base.0, base.1, reason)
}

fn evaluate_license(policy: &Policy, req: &LicenseReq) -> (Decision, PolicyRule, String) {
    let name = &policy.name;
    let license = req.license.to_string();
    if policy.allow.contains(&license) {
        return (
            Decision::Allow,
            PolicyRule::AllowList,
            format!("`{license}` is in the allow list of policy `{name}`"),
        );
    }
    if let LicenseItem::Spdx { id, or_later } = &req.license
        && (*or_later || id.name.ends_with("-or-later"))
        && let Some(later) = same_or_later_ids(id.name).into_iter().find(|l| policy.allow.contains(*l))
    {
        return (
            Decision::Allow,
            PolicyRule::AllowListLaterVersion,
            format!("`{license}` may be used under `{later}`, which is in the allow list of policy `{name}`"),
        );
    }
    let plain = LicenseReq { license: req.license.clone(), addition: None };
    let why = match classify_requirement(&plain) {
        Ok(class) => {
            let r = class.restrictions();
            if r.is_empty() { String::new() } else { format!(" ({})", r.join(", ")) }
        }
        Err(_) => " (terms not tabulated)".to_owned(),
    };
    (
        Decision::Deny,
        PolicyRule::NotInAllowList,
        format!("`{license}` is not in the allow list of policy `{name}`{why}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Class, ShareAlike, classify_expression, normalize};

    fn eval(policy: &Policy, s: &str) -> PolicyDecision {
        evaluate(policy, &normalize(s))
    }

    #[test]
    fn permissive_preset_allow_list_is_permissive() {
        for id in PERMISSIVE_ALLOW {
            let e = LicenseExpression::parse(id).unwrap();
            assert_eq!(e.as_str(), *id, "write the canonical id");
            let class: Class = classify_expression(&e).unwrap_or_else(|err| panic!("{id}: {err}"));
            assert!(class.commercial && class.share_alike == ShareAlike::No && !class.no_derivatives, "{id}: {class}");
        }
    }

    #[test]
    fn permissive_preset_covers_every_cc_by() {
        let policy = Policy::permissive();
        for l in spdx::identifiers::LICENSES {
            let is_plain_cc_by = l.name.starts_with("CC-BY-")
                && !["-NC", "-ND", "-SA"].iter().any(|e| l.name.contains(e))
                && l.flags & spdx::flags::IS_DEPRECATED == 0;
            assert_eq!(is_plain_cc_by, l.name.starts_with("CC-BY-") && policy.allow.contains(l.name), "{}", l.name);
        }
    }

    #[test]
    fn permissive_decisions() {
        let p = Policy::permissive();
        for s in [
            "MIT",
            "Apache-2.0",
            "BSD-3-Clause",
            "BSD-2-Clause",
            "ISC",
            "Zlib",
            "CC0-1.0",
            "CC-BY-4.0",
            "CC BY 3.0",
            "Unlicense",
            "Artistic-2.0",
            "PSF-2.0",
            "BSL-1.0",
            "MIT/Apache-2.0",
            "Expat",
            "MIT OR GPL-3.0-only",
            "MIT AND BSD-3-Clause",
            "Apache-2.0 WITH LLVM-exception",
            "Apache-1.1+",
        ] {
            assert_eq!(eval(&p, s).decision, Decision::Allow, "{s}: {}", eval(&p, s).reason);
        }
        for s in [
            "GPL-2.0-only",
            "GPL-2+",
            "LGPL-2.1-or-later",
            "AGPL-3.0-only",
            "MPL-2.0",
            "EPL-1.0",
            "CC-BY-SA-4.0",
            "CC-BY-NC-4.0",
            "CC-BY-ND-4.0",
            "CC BY-NC-SA 4.0",
            "MIT AND GPL-3.0-only",
            "BSD-4-Clause",
            "Unspecified",
            "BSD",
            "Modified MIT License",
            "",
            "MIT WITH AdditionRef-Commons-Clause",
            "GPL-2.0-only WITH Classpath-exception-2.0",
            "LicenseRef-Llama-2-Community",
        ] {
            assert_eq!(eval(&p, s).decision, Decision::Deny, "{s}");
        }
    }

    #[test]
    fn rules_and_reasons() {
        let p = Policy::permissive();
        let d = eval(&p, "MIT AND GPL-3.0-only");
        assert_eq!(d.rule, PolicyRule::NotInAllowList);
        assert_eq!(d.reason, "`GPL-3.0-only` is not in the allow list of policy `permissive` (share-alike)");
        assert_eq!(d.requirements.len(), 2);
        assert_eq!(d.requirements[0].decision, Decision::Allow);

        let d = eval(&p, "MPL-2.0");
        assert_eq!(d.reason, "`MPL-2.0` is not in the allow list of policy `permissive` (weak copyleft)");

        let d = eval(&p, "Apache-1.1+");
        assert_eq!(d.rule, PolicyRule::AllowListLaterVersion);
        assert_eq!(
            d.reason,
            "`Apache-1.1+` may be used under `Apache-1.1`, which is in the allow list of policy `permissive`"
        );

        let d = eval(&p, "Apache-2.0 WITH LLVM-exception");
        assert_eq!(d.rule, PolicyRule::AllowList);
        assert!(d.reason.ends_with("the exception `LLVM-exception` only adds permissions"), "{}", d.reason);

        let d = eval(&p, "MIT WITH AdditionRef-Commons-Clause");
        assert_eq!(d.rule, PolicyRule::UnknownAddition);

        let d = eval(&p, "GPL-3.0-only OR CC-BY-NC-4.0");
        assert_eq!(d.decision, Decision::Deny);
        assert_eq!(d.reason.matches("not in the allow list").count(), 2, "both operands are named: {}", d.reason);

        assert_eq!(eval(&p, "Unspecified").rule, PolicyRule::UnknownLicense);
        assert_eq!(eval(&p, "BSD").rule, PolicyRule::Ambiguous);
    }

    #[test]
    fn caller_policies() {
        let p = Policy::builder("copyleft-ok", "2024-01").allow("Apache-2.0+").unwrap_err().to_string();
        assert_eq!(p, "policy `copyleft-ok` may only list single license ids, not `Apache-2.0+`");

        let p = Policy::builder("copyleft-ok", "2024-01")
            .allow("gpl-3.0")
            .unwrap()
            .allow("BSD-2-Clause")
            .unwrap()
            .allow("BSD-3-Clause")
            .unwrap()
            .allow("BSD-4-Clause")
            .unwrap()
            .allow_with("GPL-2.0-only", "classpath-exception-2.0")
            .unwrap()
            .ambiguous(AmbiguousRule::AllowIfEveryCandidateAllowed)
            .build();
        assert_eq!(p.allowed().collect::<Vec<_>>(), ["BSD-2-Clause", "BSD-3-Clause", "BSD-4-Clause", "GPL-3.0-only"]);
        assert_eq!(eval(&p, "GPL-2.0-or-later").rule, PolicyRule::AllowListLaterVersion);
        assert_eq!(eval(&p, "GPL-2.0-only").decision, Decision::Deny);
        assert_eq!(eval(&p, "GPL-2.0-only WITH Classpath-exception-2.0").rule, PolicyRule::AllowListWith);
        assert_eq!(eval(&p, "BSD").rule, PolicyRule::AmbiguousEveryCandidateAllowed);
        let d = eval(&p, "GPL");
        assert_eq!((d.decision, d.rule), (Decision::Deny, PolicyRule::Ambiguous));

        let err = Policy::builder("x", "1").allow("MIT OR Foo").unwrap_err();
        assert!(err.to_string().starts_with("invalid license in policy `x`: invalid SPDX expression: unknown term"));
        let err = Policy::builder("x", "1").allow_with("MIT", "Commons Clause").unwrap_err();
        assert_eq!(err.to_string(), "policy `x` lists an unknown addition: `Commons Clause`");
    }
}
