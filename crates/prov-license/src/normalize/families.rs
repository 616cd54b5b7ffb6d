//! Families, versions and candidates: the SPDX ids a family name and a version denote, and
//! the members an unversioned family name leaves open (what an ambiguity lists).

use crate::expression::{LicenseExpression, license_id_ci};

/// Every non-deprecated SPDX id `<family>-<version>[-only|-or-later]`, in list order.
pub(super) fn family_candidates(family: &str) -> Vec<LicenseExpression> {
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
pub(super) const VERSIONED_FAMILIES: &[(&str, &str)] = &[
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
pub(super) fn family_version(name: &str, version: &str, plus: bool) -> Option<String> {
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
