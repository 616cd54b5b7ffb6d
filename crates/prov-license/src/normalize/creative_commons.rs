//! The `creative-commons` rule: Creative Commons spellings (`CC BY 4.0`, `cc-by-nc-4.0`,
//! `CC0 1.0`, `Attribution-ShareAlike 4.0 International`).

use super::families::family_candidates;
use super::{Ambiguity, Outcome, expr};
use crate::expression::license_id_ci;

/// The versions Creative Commons published (2.1 only as jurisdiction ports).
const CC_VERSIONS: &[&str] = &["1.0", "2.0", "2.1", "2.5", "3.0", "4.0"];

pub(super) fn creative_commons(input: &str) -> Option<Outcome> {
    let mut s = input.to_lowercase();
    let starts_with_attribution = s.starts_with("attribution");
    if !(s.contains("cc") || s.contains("creative commons") || starts_with_attribution) {
        return None;
    }
    for (from, to) in [
        ("creative commons", " cc "),
        ("attribution", " by "),
        ("non-commercial", " nc "),
        ("noncommercial", " nc "),
        ("non commercial", " nc "),
        ("share-alike", " sa "),
        ("sharealike", " sa "),
        ("share alike", " sa "),
        ("noderivatives", " nd "),
        ("no-derivatives", " nd "),
        ("no derivatives", " nd "),
        ("noderivs", " nd "),
        ("zero", " 0 "),
    ] {
        s = s.replace(from, to);
    }
    let filler = ["license", "licence", "international", "unported", "generic", "universal", "public", "domain"];
    let filler2 = ["dedication", "deed", "the", "version"];
    let tokens: Vec<String> = s
        .split(|c: char| !(c.is_alphanumeric() || c == '.'))
        .filter(|t| !t.is_empty() && !filler.contains(t) && !filler2.contains(t))
        .map(|t| t.strip_prefix('v').filter(|r| r.starts_with(|c: char| c.is_ascii_digit())).unwrap_or(t).to_owned())
        .collect();
    let mut it = tokens.iter().map(String::as_str).peekable();
    match it.next()? {
        "cc0" => return it.all(|t| t == "1.0" || t == "1").then(|| expr("CC0-1.0")).flatten(),
        "cc" if it.peek() == Some(&"0") => {
            it.next();
            return it.all(|t| t == "1.0" || t == "1").then(|| expr("CC0-1.0")).flatten();
        }
        "cc" => {}
        "by" if starts_with_attribution => {
            // "Attribution-NonCommercial 4.0 International": the deed title without "CC".
            return cc_elements(input, std::iter::once("by").chain(it));
        }
        _ => return None,
    }
    cc_elements(input, it)
}

/// Reads `by [nc] [nd|sa] [version [port]]` after the `cc`.
fn cc_elements<'a>(input: &str, tokens: impl Iterator<Item = &'a str>) -> Option<Outcome> {
    let (mut by, mut nc, mut nd, mut sa) = (false, false, false, false);
    let mut version: Option<String> = None;
    let mut port: Option<String> = None;
    for t in tokens {
        match t {
            "by" if version.is_none() => by = true,
            "nc" if version.is_none() => nc = true,
            "nd" if version.is_none() => nd = true,
            "sa" if version.is_none() => sa = true,
            v if version.is_none() && v.starts_with(|c: char| c.is_ascii_digit()) => {
                let v = if v.contains('.') { v.to_owned() } else { format!("{v}.0") };
                if !CC_VERSIONS.contains(&v.as_str()) {
                    return None;
                }
                version = Some(v);
            }
            p if version.is_some()
                && port.is_none()
                && (p.len() == 2 || p == "igo")
                && p.chars().all(|c| c.is_ascii_alphabetic()) =>
            {
                port = Some(p.to_ascii_uppercase());
            }
            _ => return None,
        }
    }
    if !by || (nd && sa) {
        return None;
    }
    let family = format!(
        "CC-BY{}{}",
        if nc { "-NC" } else { "" },
        if nd {
            "-ND"
        } else if sa {
            "-SA"
        } else {
            ""
        }
    );
    let Some(version) = version else {
        return Some(Outcome::Ambiguous {
            term: input.to_owned(),
            why: Ambiguity::NoVersion,
            candidates: family_candidates(&family),
        });
    };
    let id = match &port {
        Some(p) => format!("{family}-{version}-{p}"),
        None => format!("{family}-{version}"),
    };
    match license_id_ci(&id) {
        Some(found) => expr(found.name),
        // A real version or jurisdiction port that the SPDX list does not carry.
        None => expr(&format!("LicenseRef-{id}")),
    }
}
