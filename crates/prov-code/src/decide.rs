//! Whether a package's code may be used: its declared license and the license files it ships,
//! combined into one SPDX expression and evaluated against a `prov-license` policy.
//!
//! A license text a package ships binds its code whatever the metadata says, so the
//! expression a package is judged by is the declared one **and** every license file's license
//! that the declaration does not already name:
//!
//! 1. The declared string is normalised by `prov-license` (`MIT/Apache-2.0`, `GPL-2+`, …).
//! 2. Each license file at the package root (a name `prov_license::detect::is_license_file`
//!    accepts, and the file Cargo's `license-file` names) is matched against the SPDX license
//!    texts. A file whose best match's family the declaration names, or whose candidate of a
//!    declared family scores within [`DECLARED_MARGIN`] of the best when the best is under
//!    [`VERBATIM`], is that declared license and adds nothing (an Apache-2.0 file without its
//!    appendix scores higher against `Pixar`, Apache-2.0 with one section changed; an AGPL
//!    text under a `GPL-3.0` declaration is verbatim AGPL and is added). "Declared" compares
//!    license families (`GPL-2.0-only` and `GPL-2.0-or-later` are one family: the text does not
//!    say which). Any other matching file adds its matches, joined by `AND` (a file tied
//!    between several is one of them, and only if all are allowed is it allowed whichever).
//!    A file that matches nothing adds nothing when it is a short notice, and an unrecognised
//!    reference when it is longer (below).
//! 3. The parts are joined by `AND` and evaluated ([`prov_license::evaluate_expression`]).
//!
//! | rule | decision | when |
//! | --- | --- | --- |
//! A license file that matches no text and holds more than [`NOTICE_WORDS`] words adds
//! `LicenseRef-unrecognised-<path>`, which no policy allows: terms nobody has read are not
//! permission. npm's `UNLICENSED` denies the package outright.
//!
//! | `code:allowed` | allow | the expression is allowed |
//! | `code:denied` | deny | the expression is denied; `excluded_by` lists the denied requirements |
//! | `code:unknown-license` | deny | the declared string does not normalise (or is ambiguous) and no license file matches |
//! | `code:no-license` | deny | nothing is declared and no license file matches |
//!
//! A declared string that does not normalise is not an error: the license files may still say
//! what the license is (PyPI's `License: Dual License` beside two license texts), and the
//! verdict records why the string was not read.

use prov_license::detect::{LicenseTexts, TextMatch};

/// How far below the best match a declared license's text may score and still be the file's
/// license (an Apache-2.0 file without its appendix: `Pixar` 0.983, `Apache-2.0` 0.946).
pub const DECLARED_MARGIN: f32 = 0.05;

/// A best match at or above this is the file's text verbatim: it is that license, whatever the
/// declaration names (an AGPL-3.0 text scores 1.0 as AGPL and 0.918 as GPL-3.0).
pub const VERBATIM: f32 = 0.99;

/// A license file that matches no license text and holds more words than this is terms of its
/// own, not a notice (`This project is dual-licensed under…`): the package is not allowed on
/// them unread.
pub const NOTICE_WORDS: usize = 60;

/// npm's declaration that a package grants no license at all.
pub const UNLICENSED: &str = "UNLICENSED";
use prov_license::{Decision, LicenseExpression, Normalized, Policy, evaluate_expression, normalize};
use serde::Serialize;

/// A license file of a package and what its text matches.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LicenseFileMatch {
    /// Its path in the package.
    pub path: String,
    /// The licenses whose text it is, tied at the best score (empty when none reaches the
    /// threshold).
    pub licenses: Vec<String>,
    /// Every license whose text scores at or above the match threshold, best first, with its
    /// score rounded to 3 decimals.
    pub candidates: Vec<(String, f64)>,
    /// The declared license the file's text is taken to be (one of its candidates at or above
    /// the match threshold whose family the declared expression names), if any.
    pub declared: Option<String>,
    /// The nearest text and its score, rounded to 3 decimals (how close a non-match came).
    pub nearest: (String, f64),
}

/// The decision about one package.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PackageVerdict {
    /// Allow or deny.
    #[serde(serialize_with = "decision_text")]
    pub decision: Decision,
    /// The rule (see the module documentation).
    pub rule: &'static str,
    /// The declared string, as written.
    pub declared: Option<String>,
    /// Its SPDX normalisation.
    pub spdx: Option<String>,
    /// Why it does not normalise, when it does not.
    pub unknown: Option<String>,
    /// The license files.
    pub files: Vec<LicenseFileMatch>,
    /// The expression evaluated: the declared one and the files' licenses it does not name.
    pub license: Option<String>,
    /// The requirements the policy denies, each with its reason (empty when allowed).
    pub excluded_by: Vec<(String, String)>,
    /// The policy's reason, or why there was nothing to evaluate.
    pub reason: String,
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's `serialize_with` passes a reference")]
fn decision_text<S: serde::Serializer>(d: &Decision, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match d {
        Decision::Allow => "allow",
        Decision::Deny => "deny",
    })
}

/// A license file as the package holds it: its path and text.
pub struct LicenseFile<'a> {
    /// Its path in the package.
    pub path: &'a str,
    /// Its text.
    pub text: &'a str,
}

/// Decides a package from its declared string and its license files, in path order.
pub fn decide(
    declared: Option<&str>,
    files: &[LicenseFile<'_>],
    texts: &LicenseTexts,
    policy: &Policy,
) -> PackageVerdict {
    let (expression, spdx, unknown) = match declared.map(normalize) {
        Some(Normalized::Spdx { expression, .. }) => {
            let text = expression.to_string();
            (Some(expression), Some(text), None)
        }
        Some(Normalized::Unknown { reason }) => (None, None, Some(reason.to_string())),
        None => (None, None, None),
    };
    let families: Vec<String> = expression
        .as_ref()
        .map_or_else(Vec::new, |e| e.requirements().iter().map(|r| family(&r.license.to_string())).collect());
    let mut parts: Vec<String> = spdx.iter().map(|s| format!("({s})")).collect();
    let mut matches = Vec::with_capacity(files.len());
    for file in files {
        let TextMatch { licenses, candidates, nearest, .. } = texts.matches(file.text);
        let best = candidates.first().map_or(0.0, |c| c.1);
        let named = candidates
            .iter()
            .enumerate()
            .find(|(i, (l, score))| {
                families.contains(&family(l)) && (*i == 0 || (best < VERBATIM && best - score <= DECLARED_MARGIN))
            })
            .map(|(_, (l, _))| l.clone());
        if named.is_none() {
            parts.extend(licenses.iter().cloned());
        }
        if licenses.is_empty() && file.text.split_whitespace().count() > NOTICE_WORDS {
            parts.push(unrecognised(file.path));
        }
        matches.push(LicenseFileMatch {
            path: file.path.to_owned(),
            licenses,
            candidates: candidates
                .into_iter()
                .map(|(l, score)| (l, (f64::from(score) * 1000.0).round() / 1000.0))
                .collect(),
            declared: named,
            nearest: (nearest.0, (f64::from(nearest.1) * 1000.0).round() / 1000.0),
        });
    }
    let verdict = |decision, rule, license: Option<String>, excluded_by, reason| PackageVerdict {
        decision,
        rule,
        declared: declared.map(str::to_owned),
        spdx: spdx.clone(),
        unknown: unknown.clone(),
        files: matches.clone(),
        license,
        excluded_by,
        reason,
    };
    if declared.is_some_and(|d| d.trim() == UNLICENSED) {
        let reason = "npm's `UNLICENSED`: the package grants no license to use it".to_owned();
        return verdict(Decision::Deny, "code:denied", None, vec![(UNLICENSED.to_owned(), reason.clone())], reason);
    }
    if parts.is_empty() {
        return match &unknown {
            Some(why) => verdict(
                Decision::Deny,
                "code:unknown-license",
                None,
                vec![],
                format!("the declared license does not normalise ({why}) and no license file matches a license text"),
            ),
            None => verdict(
                Decision::Deny,
                "code:no-license",
                None,
                vec![],
                "the package declares no license and no license file matches a license text".into(),
            ),
        };
    }
    let joined = parts.join(" AND ");
    let combined = match LicenseExpression::parse(&joined) {
        Ok(e) => e,
        // Every part is a canonical expression or an id from the SPDX list, so this does not
        // happen; if it did, the package is denied with the reason rather than allowed.
        Err(e) => {
            return verdict(
                Decision::Deny,
                "code:unknown-license",
                Some(joined.clone()),
                vec![],
                format!("`{joined}` does not parse: {e}"),
            );
        }
    };
    let d = evaluate_expression(policy, &combined);
    let excluded_by: Vec<(String, String)> = d
        .requirements
        .iter()
        .filter(|r| r.decision == Decision::Deny)
        .map(|r| (r.requirement.clone(), r.reason.clone()))
        .collect();
    match d.decision {
        Decision::Allow => verdict(Decision::Allow, "code:allowed", Some(combined.to_string()), vec![], d.reason),
        Decision::Deny => verdict(Decision::Deny, "code:denied", Some(combined.to_string()), excluded_by, d.reason),
    }
}

/// The reference a license file with unrecognised terms adds to the expression:
/// `LicenseRef-unrecognised-<path>`, the path's characters other than ASCII letters, digits and
/// `.` as `-`. No policy allows it, so the package is denied, naming the file.
fn unrecognised(path: &str) -> String {
    let id: String = path.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '-' }).collect();
    format!("LicenseRef-unrecognised-{id}")
}

/// A license's family: its id without `-only`, `-or-later` or `+`, so that a GNU license
/// file (whose text does not say which) is named by either form.
fn family(license: &str) -> String {
    let id = license.trim_end_matches('+');
    id.strip_suffix("-only").or_else(|| id.strip_suffix("-or-later")).unwrap_or(id).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIT: &str = "Permission is hereby granted, free of charge, to any person obtaining a copy of this \
        software and associated documentation files (the \"Software\"), to deal in the Software without \
        restriction, including without limitation the rights to use, copy, modify, merge, publish, distribute, \
        sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is furnished \
        to do so, subject to the following conditions:\n\nThe above copyright notice and this permission notice \
        shall be included in all copies or substantial portions of the Software.\n\nTHE SOFTWARE IS PROVIDED \
        \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES \
        OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR \
        COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, \
        TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS \
        IN THE SOFTWARE.";

    fn texts() -> LicenseTexts {
        LicenseTexts::load().unwrap()
    }

    #[test]
    fn the_declared_license_decides_when_the_files_agree() {
        let texts = texts();
        let afm = Policy::afm_code();
        let v = decide(Some("MIT/Apache-2.0"), &[LicenseFile { path: "LICENSE-MIT", text: MIT }], &texts, &afm);
        assert_eq!((v.decision, v.rule), (Decision::Allow, "code:allowed"));
        assert_eq!(v.license.as_deref(), Some("MIT OR Apache-2.0"));
        assert_eq!(v.files[0].declared.as_deref(), Some("MIT"));
        let v = decide(Some("(MIT OR Apache-2.0) AND Unicode-DFS-2016"), &[], &texts, &afm);
        assert_eq!((v.decision, v.rule), (Decision::Deny, "code:denied"));
        assert_eq!(v.excluded_by.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(), ["Unicode-DFS-2016"]);
        assert!(v.reason.contains("Unicode-DFS-2016"), "{}", v.reason);
    }

    /// A license text the metadata does not name binds the code too: a package that declares
    /// only Apache-2.0 but ships the MIT text is judged by both.
    #[test]
    fn a_license_file_the_declaration_does_not_name_is_added() {
        let texts = texts();
        let v = decide(Some("Apache-2.0"), &[LicenseFile { path: "COPYING", text: MIT }], &texts, &Policy::afm_code());
        assert_eq!(v.license.as_deref(), Some("Apache-2.0 AND MIT"));
        assert_eq!(v.files[0].declared, None);
        let only_apache = Policy::builder("a", "1").allow("Apache-2.0").unwrap().build();
        let v = decide(Some("Apache-2.0"), &[LicenseFile { path: "COPYING", text: MIT }], &texts, &only_apache);
        assert_eq!((v.decision, v.excluded_by[0].0.as_str()), (Decision::Deny, "MIT"));
    }

    #[test]
    fn files_decide_when_nothing_readable_is_declared() {
        let texts = texts();
        let afm = Policy::afm_code();
        let mit = [LicenseFile { path: "LICENSE", text: MIT }];
        let v = decide(None, &mit, &texts, &afm);
        assert_eq!((v.decision, v.license.as_deref()), (Decision::Allow, Some("MIT")));
        let v = decide(Some("Dual License"), &mit, &texts, &afm);
        assert_eq!((v.decision, v.spdx.as_ref(), v.unknown.is_some()), (Decision::Allow, None, true));
        let notice = [LicenseFile { path: "NOTICE", text: "Copyright 2020 someone. All rights reserved." }];
        let v = decide(Some("Dual License"), &notice, &texts, &afm);
        assert_eq!((v.decision, v.rule), (Decision::Deny, "code:unknown-license"));
        let v = decide(None, &notice, &texts, &afm);
        assert_eq!((v.decision, v.rule), (Decision::Deny, "code:no-license"));
        assert_eq!(v.files[0].licenses, Vec::<String>::new());
    }

    #[test]
    fn gnu_families_ignore_only_and_or_later() {
        assert_eq!(family("GPL-2.0-or-later"), "GPL-2.0");
        assert_eq!(family("GPL-2.0-only"), "GPL-2.0");
        assert_eq!(family("GPL-2.0+"), "GPL-2.0");
        assert_eq!(family("MIT"), "MIT");
    }
}
