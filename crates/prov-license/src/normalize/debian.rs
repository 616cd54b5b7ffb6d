//! The `debian` rule: Debian `copyright` short names (`GPL-2+`, `Expat`, `Apache-2`) joined
//! by `or` / `and`, with `with … exception`.

use super::families::{VERSIONED_FAMILIES, family_candidates, family_version};
use super::{Ambiguity, NotALicense, Outcome};
use crate::expression::{LicenseExpression, exception_id_ci, license_id_ci};

/// One license term of a Debian expression.
enum Term {
    Text(String),
    Choice { term: String, why: Ambiguity, candidates: Vec<LicenseExpression> },
    NotALicense(NotALicense),
}

/// Debian short names (<https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/#license-specification>)
/// that are not `<family>-<version>[+]` and not SPDX ids.
fn debian_special(token: &str) -> Option<Term> {
    let text = |t: &str| Some(Term::Text(t.to_owned()));
    match token.to_ascii_lowercase().as_str() {
        "expat" => text("MIT"),
        // Perl's license as SPDX writes it.
        "perl" => text("(Artistic-1.0-Perl OR GPL-1.0-or-later)"),
        "public-domain" => Some(Term::NotALicense(NotALicense::PublicDomain)),
        "permissive" => Some(Term::NotALicense(NotALicense::CustomTerms)),
        "artistic" => Some(Term::Choice {
            term: token.to_owned(),
            why: Ambiguity::SeveralTexts,
            candidates: ["Artistic-1.0", "Artistic-1.0-Perl", "Artistic-1.0-cl8"]
                .iter()
                .filter_map(|t| LicenseExpression::parse(t).ok())
                .collect(),
        }),
        "bsd" => Some(Term::Choice {
            term: token.to_owned(),
            why: Ambiguity::NoClauseCount,
            candidates: family_candidates("BSD"),
        }),
        _ => None,
    }
}

fn debian_term(token: &str) -> Option<Term> {
    if let Some(t) = debian_special(token) {
        return Some(t);
    }
    let bare = token.strip_suffix('+');
    let plus = bare.is_some();
    let bare = bare.unwrap_or(token);
    if let Some(id) = license_id_ci(bare) {
        return Some(Term::Text(if plus { format!("{}+", id.name) } else { id.name.to_owned() }));
    }
    // `<family>-<version>`: split at the last `-` that precedes a digit.
    if let Some(dash) = bare.rfind('-').filter(|&i| bare[i + 1..].starts_with(|c: char| c.is_ascii_digit())) {
        return family_version(&bare[..dash], &bare[dash + 1..], plus).map(Term::Text);
    }
    let lower = bare.to_ascii_lowercase();
    VERSIONED_FAMILIES.iter().find(|(k, _)| *k == lower).map(|(_, family)| Term::Choice {
        term: token.to_owned(),
        why: Ambiguity::NoVersion,
        candidates: family_candidates(family),
    })
}

/// The most readings an expression with several ambiguous terms may have.
const MAX_READINGS: usize = 64;

pub(super) fn debian(input: &str) -> Option<Outcome> {
    // Debian's comma binds loosest: `A or B, and C` is `(A or B) and C`.
    let mut pieces: Vec<Term> = Vec::new();
    for (i, segment) in input.split(',').enumerate() {
        let mut tokens = segment.split_whitespace().peekable();
        if i > 0 {
            let op = tokens.next()?;
            let op = if op.eq_ignore_ascii_case("and") {
                "AND"
            } else if op.eq_ignore_ascii_case("or") {
                "OR"
            } else {
                return None;
            };
            pieces.insert(0, Term::Text("(".into()));
            pieces.push(Term::Text(format!(") {op}")));
        }
        while let Some(token) = tokens.next() {
            let (open, token) = split_parens_front(token);
            let (token, close) = split_parens_back(token);
            pieces.push(Term::Text(open.to_owned()));
            if token.eq_ignore_ascii_case("or") || token.eq_ignore_ascii_case("and") {
                pieces.push(Term::Text(token.to_ascii_uppercase()));
            } else if token.eq_ignore_ascii_case("with") {
                let mut words = Vec::new();
                let close_after = loop {
                    let (w, c) = split_parens_back(tokens.next()?);
                    if w.eq_ignore_ascii_case("exception") {
                        break c;
                    }
                    words.push(w);
                };
                pieces.push(Term::Text(format!("WITH {}", debian_exception(&words)?)));
                pieces.push(Term::Text(close_after.to_owned()));
            } else if !token.is_empty() {
                pieces.push(debian_term(token)?);
            }
            pieces.push(Term::Text(close.to_owned()));
        }
    }
    if let Some(kind) = pieces.iter().find_map(|p| if let Term::NotALicense(k) = p { Some(*k) } else { None }) {
        return Some(Outcome::NotALicense(kind));
    }
    // Expand ambiguous terms into every reading.
    let mut readings = vec![String::new()];
    let mut first_choice: Option<(String, Ambiguity)> = None;
    for piece in &pieces {
        match piece {
            Term::Text(t) => readings.iter_mut().for_each(|r| {
                r.push(' ');
                r.push_str(t);
            }),
            Term::Choice { term, why, candidates } => {
                first_choice.get_or_insert_with(|| (term.clone(), *why));
                if readings.len() * candidates.len() > MAX_READINGS || candidates.is_empty() {
                    return None;
                }
                readings = readings.iter().flat_map(|r| candidates.iter().map(move |c| format!("{r} ({c})"))).collect();
            }
            Term::NotALicense(_) => {}
        }
    }
    let mut parsed = readings.iter().map(|r| LicenseExpression::parse(r).ok()).collect::<Option<Vec<_>>>()?;
    match first_choice {
        None => parsed.pop().map(Outcome::Expr),
        Some((term, why)) => Some(Outcome::Ambiguous { term, why, candidates: parsed }),
    }
}

fn split_parens_front(s: &str) -> (&str, &str) {
    let n = s.len() - s.trim_start_matches('(').len();
    s.split_at(n)
}

fn split_parens_back(s: &str) -> (&str, &str) {
    let n = s.trim_end_matches(')').len();
    s.split_at(n)
}

/// `with OpenSSL exception`: an SPDX exception whose id starts with the words, or an
/// `AdditionRef-` naming them.
fn debian_exception(words: &[&str]) -> Option<String> {
    if words.is_empty() {
        return None;
    }
    let stem = format!("{}-exception", words.join("-"));
    if let Some(e) = exception_id_ci(&stem) {
        return Some(e.name.to_owned());
    }
    let lower = stem.to_ascii_lowercase();
    let by_prefix = spdx::identifiers::EXCEPTIONS
        .iter()
        .filter(|e| e.name.to_ascii_lowercase().starts_with(&lower))
        .min_by_key(|e| e.name.len());
    if let Some(e) = by_prefix {
        return Some(e.name.to_owned());
    }
    let sanitized: String = stem.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.')).collect();
    Some(format!("AdditionRef-{sanitized}"))
}
