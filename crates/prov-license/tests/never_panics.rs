//! Property tests: no input makes normalisation, evaluation, classification or the compound
//! check panic, and canonical expressions are fixed points.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use proptest::prelude::*;
use prov_license::{
    AmbiguousRule, LicenseExpression, Normalized, Policy, Rule, check_compound, classify, evaluate, normalize,
};

/// Pieces of real license strings, so that random combinations reach the deeper rules.
const TOKENS: &[&str] = &[
    "MIT",
    "mit",
    "Apache-2.0",
    "Apache",
    "2.0",
    "2",
    "GPL",
    "GPL-2",
    "GPL-2+",
    "gpl-3.0",
    "LGPL-2.1+",
    "BSD",
    "3-Clause",
    "License",
    "license",
    "CC",
    "BY",
    "by",
    "NC",
    "SA",
    "ND",
    "4.0",
    "3.0",
    "CC0",
    "cc-by-sa-4.0",
    "OR",
    "or",
    "AND",
    "and",
    "WITH",
    "with",
    "exception",
    "Classpath",
    "LLVM-exception",
    "(",
    ")",
    "+",
    "/",
    ",",
    "Expat",
    "Artistic",
    "Perl",
    "public-domain",
    "LicenseRef-",
    "AdditionRef-x",
    "DocumentRef-a:",
    "NOASSERTION",
    "GNU",
    "General",
    "Public",
    "v3.0",
    "Creative",
    "Commons",
    "Attribution",
    "-",
    "Unspecified",
    "é",
    "\u{0}",
];

fn token_soup() -> impl Strategy<Value = String> {
    prop::collection::vec((prop::sample::select(TOKENS), prop::sample::select(&[" ", "", "-", "  ", "\t"][..])), 0..10)
        .prop_map(|parts| {
            parts.into_iter().fold(String::new(), |mut s, (t, sep)| {
                s.push_str(t);
                s.push_str(sep);
                s
            })
        })
}

fn exercise(s: &str) {
    let n = normalize(s);
    let _ = n.to_string();
    if let Normalized::Unknown { reason } = &n {
        let _ = reason.to_string();
    }
    for policy in [
        Policy::permissive(),
        Policy::builder("p", "1").allow("MIT").unwrap().ambiguous(AmbiguousRule::AllowIfEveryCandidateAllowed).build(),
    ] {
        let d = evaluate(&policy, &n);
        assert!(!d.reason.is_empty() || matches!(n, Normalized::Unknown { .. }));
    }
    let _ = classify(&n).map_err(|e| e.to_string());
    for c in check_compound(&n, &[n.clone(), normalize("MIT"), normalize("GPL-2.0-only")]) {
        let _ = c.to_string();
    }
    for c in check_compound(&normalize("CC-BY-4.0"), std::slice::from_ref(&n)) {
        let _ = c.to_string();
    }
    // Canonical text is a fixed point: parsing it gives the same expression back.
    if let Normalized::Spdx { expression, .. } = &n {
        let again = LicenseExpression::parse(expression.as_str()).expect("canonical text parses");
        assert_eq!(&again, expression);
        match normalize(expression.as_str()) {
            Normalized::Spdx { expression: e, via } => {
                assert_eq!(&e, expression);
                assert_eq!(via, Rule::SpdxParse);
            }
            Normalized::Unknown { reason } => panic!("canonical {expression} did not normalise: {reason}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_strings(s in any::<String>()) {
        exercise(&s);
    }

    #[test]
    fn printable_strings(s in "\\PC{0,40}") {
        exercise(&s);
    }

    #[test]
    fn license_token_soup(s in token_soup()) {
        exercise(&s);
    }
}
