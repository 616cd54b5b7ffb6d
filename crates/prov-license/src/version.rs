//! License families and versions: which SPDX ids are "the same license, a later version".

use std::cmp::Ordering;

/// An SPDX id split into family prefix, version and suffix:
/// `CC-BY-SA-3.0-DE` is (`CC-BY-SA`, 3.0, `DE`); `GPL-2.0-or-later` is (`GPL`, 2.0, empty).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Versioned<'a> {
    pub prefix: &'a str,
    pub version: Vec<u32>,
    pub suffix: &'a str,
}

/// Splits an id at its first version component; `None` for unversioned ids and for clause
/// counts (`BSD-3-Clause` is not version 3 of BSD).
pub(crate) fn split(name: &str) -> Option<Versioned<'_>> {
    let base = name.strip_suffix("-or-later").or_else(|| name.strip_suffix("-only")).unwrap_or(name);
    let mut start = 0;
    for (i, part) in base.split('-').enumerate() {
        let end = start + part.len();
        if i > 0
            && part.starts_with(|c: char| c.is_ascii_digit())
            && part.chars().all(|c| c.is_ascii_digit() || c == '.')
        {
            let suffix = base.get(end..).unwrap_or("").trim_start_matches('-');
            if suffix.starts_with("Clause") {
                return None;
            }
            let version = part.split('.').map(|p| p.parse::<u32>().ok()).collect::<Option<Vec<_>>>()?;
            let prefix = base.get(..start.saturating_sub(1)).filter(|p| !p.is_empty())?;
            return Some(Versioned { prefix, version, suffix });
        }
        start = end + 1;
    }
    None
}

/// Compares versions numerically, padding with zeros (`2` equals `2.0`).
pub(crate) fn cmp_versions(a: &[u32], b: &[u32]) -> Ordering {
    let n = a.len().max(b.len());
    (0..n).map(|i| a.get(i).unwrap_or(&0).cmp(b.get(i).unwrap_or(&0))).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
}

/// Returns true if `later` is the same family as `base` at the same or a later version.
/// With `ignore_suffix`, jurisdiction ports count as the same family (`CC-BY-SA-3.0-DE`).
pub(crate) fn is_same_or_later(base: &str, later: &str, ignore_suffix: bool) -> bool {
    match (split(base), split(later)) {
        (Some(b), Some(l)) => {
            b.prefix == l.prefix
                && (ignore_suffix || b.suffix == l.suffix)
                && cmp_versions(&l.version, &b.version) != Ordering::Less
        }
        _ => base == later,
    }
}

/// Every non-deprecated SPDX id of the same family as `name` at the same or a later version
/// (for GNU ids: both `-only` and `-or-later`), in list order.
pub(crate) fn same_or_later_ids(name: &str) -> Vec<&'static str> {
    if split(name).is_none() {
        return vec![];
    }
    spdx::identifiers::LICENSES
        .iter()
        .filter(|l| l.flags & spdx::flags::IS_DEPRECATED == 0)
        .map(|l| l.name)
        .filter(|n| is_same_or_later(name, n, false))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits() {
        assert_eq!(split("CC-BY-SA-3.0-DE"), Some(Versioned { prefix: "CC-BY-SA", version: vec![3, 0], suffix: "DE" }));
        assert_eq!(split("GPL-2.0-or-later"), Some(Versioned { prefix: "GPL", version: vec![2, 0], suffix: "" }));
        assert_eq!(
            split("GFDL-1.3-no-invariants-only"),
            Some(Versioned { prefix: "GFDL", version: vec![1, 3], suffix: "no-invariants" })
        );
        assert_eq!(split("BSD-3-Clause"), None);
        assert_eq!(split("MIT"), None);
        assert_eq!(split("-1"), None);
    }

    #[test]
    fn later_versions() {
        assert_eq!(same_or_later_ids("Apache-1.1"), ["Apache-1.1", "Apache-2.0"]);
        assert_eq!(
            same_or_later_ids("GPL-2.0-or-later"),
            ["GPL-2.0-only", "GPL-2.0-or-later", "GPL-3.0-only", "GPL-3.0-or-later"]
        );
        assert_eq!(same_or_later_ids("CC-BY-SA-3.0"), ["CC-BY-SA-3.0", "CC-BY-SA-4.0"]);
        assert!(same_or_later_ids("BSD-3-Clause").is_empty());
        assert!(is_same_or_later("CC-BY-SA-3.0-DE", "CC-BY-SA-4.0", true));
        assert!(!is_same_or_later("CC-BY-SA-3.0-DE", "CC-BY-SA-4.0", false));
        assert!(!is_same_or_later("CC-BY-SA-4.0", "CC-BY-NC-SA-4.0", true));
    }
}
