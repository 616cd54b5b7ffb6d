//! The license strings of the Data Provenance Initiative and what each one denotes.
//!
//! ```text
//! Source: Data Provenance Initiative, data-provenance-collection (Apache-2.0), as copied to
//!   ../shared/data/licenses/data-provenance-collection/:
//!   - every distinct `Licenses[].License` of data_summaries/*.json (49 strings; the file
//!     `_template.json` is a template, not a data set, and is left out), and
//!   - every key of constants/license_classes.json (66 strings),
//!   67 strings in all.
//! Left column: generated; do not edit it by hand. Regenerate it with
//!   cd data-provenance-collection
//!   { jq -r '.[] | .Licenses[]?.License' data_summaries/[!_]*.json
//!     jq -r 'keys[]' constants/license_classes.json; } | LC_ALL=C sort -u
//! Right column: reviewed by hand; the reasons for the non-obvious entries are in the comments.
//! tests/dpi.rs fails when the data holds a string that is missing here, and checks the
//! classification of every entry against license_classes.json.
//! ```
//!
//! Strings are matched exactly (after trimming); variants go through the other rules of
//! [`crate::normalize()`].

use crate::not_a_license::NotALicense;

/// What a DPI string denotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DpiTarget {
    /// An SPDX expression (may use a `LicenseRef-` this crate defines, see [`mod@crate::classify`]).
    Spdx(&'static str),
    /// Not a license.
    NotALicense(NotALicense),
    /// A Creative Commons family without a version (ambiguous; the family is the argument).
    CcUnversioned(&'static str),
}

use DpiTarget::{CcUnversioned, NotALicense as Not, Spdx};

/// The table, sorted by the DPI string (byte order).
const TABLE: &[(&str, DpiTarget)] = &[
    // Not on the SPDX list: https://allenai.org/licenses/impact-lr
    ("AI2 ImpACT License - Low Risk", Spdx("LicenseRef-AI2-ImpACT-LR")),
    ("Academic Free License v3.0", Spdx("AFL-3.0")),
    ("Academic Research Purposes Only", Not(NotALicense::UsageSummary)),
    ("All Uses-Attribution", Not(NotALicense::UsageSummary)),
    ("Anthropic", Not(NotALicense::ServiceTerms)),
    ("Apache 2.0", Spdx("Apache-2.0")),
    ("Apache License 2.0", Spdx("Apache-2.0")),
    ("Artistic License 2.0", Spdx("Artistic-2.0")),
    ("BSD 2-Clause License", Spdx("BSD-2-Clause")),
    ("BSD 3-Clause License", Spdx("BSD-3-Clause")),
    // Not on the SPDX list: https://huggingface.co/spaces/bigscience/license
    ("BigScience OpenRAIL-M", Spdx("LicenseRef-BigScience-OpenRAIL-M")),
    // C-UDA has one version, 1.0.
    ("C-UDA", Spdx("C-UDA-1.0")),
    ("CC BY", CcUnversioned("CC-BY")),
    ("CC BY 2.0", Spdx("CC-BY-2.0")),
    ("CC BY 2.5", Spdx("CC-BY-2.5")),
    ("CC BY 3.0", Spdx("CC-BY-3.0")),
    ("CC BY 4.0", Spdx("CC-BY-4.0")),
    ("CC BY SA", CcUnversioned("CC-BY-SA")),
    ("CC BY-NC 2.0", Spdx("CC-BY-NC-2.0")),
    ("CC BY-NC 3.0", Spdx("CC-BY-NC-3.0")),
    ("CC BY-NC 4.0", Spdx("CC-BY-NC-4.0")),
    ("CC BY-NC-ND", CcUnversioned("CC-BY-NC-ND")),
    ("CC BY-NC-ND 3.0", Spdx("CC-BY-NC-ND-3.0")),
    ("CC BY-NC-ND 4.0", Spdx("CC-BY-NC-ND-4.0")),
    ("CC BY-NC-SA", CcUnversioned("CC-BY-NC-SA")),
    ("CC BY-NC-SA 3.0", Spdx("CC-BY-NC-SA-3.0")),
    ("CC BY-NC-SA 4.0", Spdx("CC-BY-NC-SA-4.0")),
    ("CC BY-ND 4.0", Spdx("CC-BY-ND-4.0")),
    ("CC BY-SA", CcUnversioned("CC-BY-SA")),
    ("CC BY-SA 2.0", Spdx("CC-BY-SA-2.0")),
    ("CC BY-SA 3.0", Spdx("CC-BY-SA-3.0")),
    ("CC BY-SA 4.0", Spdx("CC-BY-SA-4.0")),
    // CC0 has one version, 1.0.
    ("CC0", Spdx("CC0-1.0")),
    ("CC0 1.0", Spdx("CC0-1.0")),
    ("CDLA Permissive 1.0", Spdx("CDLA-Permissive-1.0")),
    ("CDLA Permissive 2.0", Spdx("CDLA-Permissive-2.0")),
    ("CDLA Sharing 1.0", Spdx("CDLA-Sharing-1.0")),
    // The Center for Spoken Language Understanding's corpus agreement; not on the SPDX list.
    ("CSLU Agreement", Spdx("LicenseRef-CSLU-Agreement")),
    ("Custom", Not(NotALicense::CustomTerms)),
    ("EPL 1.0", Spdx("EPL-1.0")),
    // GitHub's names for SPDX's deprecated `GPL-2.0` / `GPL-3.0`, which SPDX defines as "only".
    ("GNU General Public License v2.0", Spdx("GPL-2.0-only")),
    ("GNU General Public License v3.0", Spdx("GPL-3.0-only")),
    ("Google Cloud Translation API", Not(NotALicense::ServiceTerms)),
    ("ISC License", Spdx("ISC")),
    // The Linguistic Data Consortium's user agreement; not on the SPDX list.
    ("LDC User Agreement", Spdx("LicenseRef-LDC-User-Agreement")),
    // The DPI's spelling of GitHub's `lgpl-2.1` / `lgpl-3.0` (SPDX: deprecated, "only").
    ("LGPL 2.1", Spdx("LGPL-2.1-only")),
    ("LGPL 3.0", Spdx("LGPL-3.0-only")),
    // Not on the SPDX list: https://huggingface.co/datasets/lmsys/lmsys-chat-1m
    ("LMSYS-Chat-1M Dataset License", Spdx("LicenseRef-LMSYS-Chat-1M")),
    // The Llama 2 Community License Agreement; not on the SPDX list.
    ("Llama 2", Spdx("LicenseRef-Llama-2-Community")),
    ("MIT", Spdx("MIT")),
    ("MIT License", Spdx("MIT")),
    ("MPL 2.0", Spdx("MPL-2.0")),
    // The Meta Llama 3 Community License Agreement; not on the SPDX list.
    ("Meta Llama3 Community License", Spdx("LicenseRef-Llama-3-Community")),
    // The Microsoft Research Data License Agreement; not on the SPDX list.
    ("Microsoft Data Licensing Agreement", Spdx("LicenseRef-MSR-Data-License")),
    ("No License", Not(NotALicense::NoLicense)),
    ("Non Commercial", Not(NotALicense::UsageSummary)),
    // The Open American National Corpus license; not on the SPDX list.
    ("OANC", Spdx("LicenseRef-OANC")),
    ("ODC BY 1.0", Spdx("ODC-By-1.0")),
    // The UK's Open Government Licence v3.0 (Canada's is 2.0; no other OGL has a 3.0).
    ("OGL 3.0", Spdx("OGL-UK-3.0")),
    ("Open Access", Not(NotALicense::AccessTerms)),
    ("OpenAI", Not(NotALicense::ServiceTerms)),
    ("Public Domain", Not(NotALicense::PublicDomain)),
    ("Request Form", Not(NotALicense::AccessTerms)),
    // The Skywork Community License; not on the SPDX list.
    ("Skywork Community License", Spdx("LicenseRef-Skywork-Community")),
    ("Unclear", Not(NotALicense::Unspecified)),
    ("Unspecified", Not(NotALicense::Unspecified)),
    ("Various", Not(NotALicense::Several)),
];

/// Looks up an exact DPI string.
pub(crate) fn lookup(input: &str) -> Option<DpiTarget> {
    TABLE.binary_search_by(|(k, _)| (*k).cmp(input)).ok().map(|i| TABLE[i].1)
}

/// Returns every DPI string in the table, in byte order.
pub fn strings() -> impl Iterator<Item = &'static str> {
    TABLE.iter().map(|(k, _)| *k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LicenseExpression, Normalized, Rule, normalize};

    #[test]
    fn table_is_sorted_and_unique() {
        assert!(TABLE.windows(2).all(|w| w[0].0 < w[1].0), "TABLE must be sorted by key, without duplicates");
        assert_eq!(TABLE.len(), 67);
    }

    #[test]
    fn targets_parse_and_are_canonical() {
        for (k, target) in TABLE {
            if let Spdx(text) = target {
                let e = LicenseExpression::parse(text).unwrap_or_else(|e| panic!("{k}: {e}"));
                assert_eq!(e.as_str(), *text, "{k}: write the canonical form");
            }
        }
    }

    fn target_text(t: DpiTarget) -> Option<&'static str> {
        if let Spdx(text) = t { Some(text) } else { None }
    }

    /// The table and the general rules agree wherever a general rule also recognises a string.
    #[test]
    fn general_rules_agree_with_the_table() {
        for (k, target) in TABLE {
            // Perturb the spelling so that the exact DPI lookup does not apply.
            let variant = k.to_lowercase();
            let Normalized::Spdx { expression, via } = normalize(&variant) else { continue };
            assert_ne!(via, Rule::DpiTable);
            assert_eq!(Some(expression.as_str()), target_text(*target), "{k}: table and rule `{via}` disagree");
        }
    }
}
