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
//!    texts. A file that matches no text (a notice, a text with changes) adds nothing. A file
//!    whose text is close to a declared license's (any text at or above the match threshold,
//!    not only the best: an Apache-2.0 file without its appendix scores higher against the
//!    `Pixar` license, which is Apache-2.0 with one section changed) is that license and adds
//!    nothing; "declared" compares license families (`GPL-2.0-only` and `GPL-2.0-or-later`
//!    are one family: the text does not say which). Any other matching file adds its best
//!    license; a file that matches several texts equally adds all of them, joined by `AND`:
//!    the file is one of them, and only if all are allowed is it allowed whichever.
//! 3. The parts are joined by `AND` and evaluated ([`prov_license::evaluate_expression`]).
//!
//! | rule | decision | when |
//! | --- | --- | --- |
//! | `code:allowed` | allow | the expression is allowed |
//! | `code:denied` | deny | the expression is denied; `excluded_by` lists the denied requirements |
//! | `code:unknown-license` | deny | the declared string does not normalise (or is ambiguous) and no license file matches |
//! | `code:no-license` | deny | nothing is declared and no license file matches |
//!
//! A declared string that does not normalise is not an error: the license files may still say
//! what the license is (PyPI's `License: Dual License` beside two license texts), and the
//! verdict records why the string was not read.

use prov_license::detect::{LicenseTexts, TextMatch};
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
    /// Every license whose text scores at or above the match threshold, best first.
    pub candidates: Vec<String>,
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
        let named = candidates.iter().map(|c| &c.0).find(|l| families.contains(&family(l))).cloned();
        if named.is_none() {
            parts.extend(licenses.iter().cloned());
        }
        matches.push(LicenseFileMatch {
            path: file.path.to_owned(),
            licenses,
            candidates: candidates.into_iter().map(|c| c.0).collect(),
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
