//! Validated, canonical SPDX license expressions.
//!
//! [`LicenseExpression`] wraps the `spdx` crate's parser with three changes:
//!
//! - license and exception ids match case-insensitively, as the SPDX specification asks
//!   ("License identifiers … should be matched in a case-insensitive manner"), and so do the
//!   operators `AND`, `OR`, `WITH` and the `LicenseRef-` / `DocumentRef-` / `AdditionRef-`
//!   prefixes;
//! - deprecated ids are accepted and rewritten to their replacements (`GPL-2.0` becomes
//!   `GPL-2.0-only`, `GPL-2.0+` becomes `GPL-2.0-or-later`, `GPL-2.0-with-classpath-exception`
//!   becomes `GPL-2.0-only WITH Classpath-exception-2.0`, …);
//! - the crate's "imprecise names" (`apache` → `Apache-2.0`, `gpl` → `GPL-2.0-only`,
//!   `bsd` → `BSD-2-Clause`, `gnu gpl v2` → `GPL-3.0-only`) are *not* accepted: they guess a
//!   version or clause count that the input does not state. [`crate::normalize()`] reports such
//!   strings as ambiguous instead.
//!
//! The canonical text keeps the operands in their input order, flattens `A OR (B OR C)` to
//! `A OR B OR C`, and puts parentheses around every compound operand of another operator, so
//! that `MIT AND BSD-3-Clause OR Apache-2.0` is written `(MIT AND BSD-3-Clause) OR Apache-2.0`.
//! Parsing the canonical text gives the same expression back.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::str::FromStr;
use std::sync::LazyLock;

use spdx::expression::{ExprNode, Operator};
use spdx::{AdditionItem, LicenseId, LicenseItem, LicenseReq, ParseMode};

/// A valid SPDX license expression in canonical form.
///
/// Equality and ordering compare the canonical text.
#[derive(Clone)]
pub struct LicenseExpression {
    text: String,
    root: Node,
}

/// One node of an expression tree.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    /// A license, possibly `+` / `-or-later`, possibly `WITH` an addition.
    Req(LicenseReq),
    /// All operands apply (at least two).
    And(Vec<Node>),
    /// The licensee picks one operand (at least two).
    Or(Vec<Node>),
}

impl LicenseExpression {
    /// Parses an SPDX expression (case-insensitive ids, deprecated ids accepted) into
    /// canonical form.
    pub fn parse(input: &str) -> Result<Self, ExpressionError> {
        parse_with(input, false)
    }

    /// Parses like [`LicenseExpression::parse`], reading `/` as `OR` as Cargo's legacy
    /// `license` field did (`MIT/Apache-2.0`).
    pub fn parse_slash_as_or(input: &str) -> Result<Self, ExpressionError> {
        parse_with(input, true)
    }

    /// Returns the canonical text, e.g. `MIT OR Apache-2.0`.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Returns every license requirement, in the order they are written.
    pub fn requirements(&self) -> Vec<&LicenseReq> {
        let mut out = Vec::new();
        self.root.collect_requirements(&mut out);
        out
    }

    pub(crate) fn root(&self) -> &Node {
        &self.root
    }

    /// Returns the canonical text of each operand of a top-level `AND`, or of the whole
    /// expression when it is not one: the licenses that all apply.
    pub(crate) fn conjuncts(&self) -> Vec<String> {
        match &self.root {
            Node::And(xs) => xs.iter().map(|x| x.render(false)).collect(),
            other => vec![other.render(false)],
        }
    }

    /// Builds an expression from a single requirement (used for candidate lists).
    pub(crate) fn from_node(root: Node) -> Self {
        let text = root.render(false);
        Self { text, root }
    }
}

impl Node {
    fn collect_requirements<'a>(&'a self, out: &mut Vec<&'a LicenseReq>) {
        match self {
            Self::Req(r) => out.push(r),
            Self::And(xs) | Self::Or(xs) => xs.iter().for_each(|x| x.collect_requirements(out)),
        }
    }

    fn render(&self, nested: bool) -> String {
        match self {
            Self::Req(r) => r.to_string(),
            Self::And(xs) | Self::Or(xs) => {
                let op = if matches!(self, Self::And(_)) { " AND " } else { " OR " };
                let inner = xs.iter().map(|x| x.render(true)).collect::<Vec<_>>().join(op);
                if nested { format!("({inner})") } else { inner }
            }
        }
    }

    fn combine(op: Operator, a: Node, b: Node) -> Node {
        let mut operands = Vec::new();
        for x in [a, b] {
            match (op, x) {
                (Operator::And, Self::And(xs)) | (Operator::Or, Self::Or(xs)) => operands.extend(xs),
                (_, x) => operands.push(x),
            }
        }
        match op {
            Operator::And => Self::And(operands),
            Operator::Or => Self::Or(operands),
        }
    }
}

impl fmt::Display for LicenseExpression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for LicenseExpression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LicenseExpression({:?})", self.text)
    }
}

impl PartialEq for LicenseExpression {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for LicenseExpression {}

impl PartialOrd for LicenseExpression {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for LicenseExpression {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.text.cmp(&other.text)
    }
}

impl std::hash::Hash for LicenseExpression {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

impl FromStr for LicenseExpression {
    type Err = ExpressionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// An SPDX expression that does not parse, with the span of the offending term.
///
/// Displays as the reason, then the input with the span underlined:
///
/// ```text
/// invalid SPDX expression: unknown term
///     MIT OR Foo-1.0
///            ^^^^^^^
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid SPDX expression: {reason}\n{}", underline(input, span))]
pub struct ExpressionError {
    /// The text that was parsed.
    pub input: String,
    /// Byte range of `input` that the reason is about.
    pub span: Range<usize>,
    /// What is wrong there, in the `spdx` crate's words (e.g. `unknown term`).
    pub reason: String,
}

/// Renders `input` indented on one line and `^` under `span` on the next, counting characters
/// (not bytes) so that the carets line up under non-ASCII input.
pub(crate) fn underline(input: &str, span: &Range<usize>) -> String {
    let one_line: String = input.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let start = span.start.min(input.len());
    let end = span.end.clamp(start, input.len());
    let col = input.get(..start).map_or(0, |s| s.chars().count());
    let width = input.get(start..end).map_or(1, |s| s.chars().count()).max(1);
    format!("    {one_line}\n    {}{}", " ".repeat(col), "^".repeat(width))
}

/// Every SPDX license and exception id, by its lowercase spelling.
static IDS: LazyLock<HashMap<String, &'static str>> = LazyLock::new(|| {
    let licenses = spdx::identifiers::LICENSES.iter().map(|l| l.name);
    let exceptions = spdx::identifiers::EXCEPTIONS.iter().map(|e| e.name);
    licenses.chain(exceptions).map(|name| (name.to_ascii_lowercase(), name)).collect()
});

/// Looks up a license id case-insensitively (a trailing `+` is not part of the id).
pub(crate) fn license_id_ci(name: &str) -> Option<LicenseId> {
    IDS.get(&name.to_ascii_lowercase()).and_then(|n| spdx::license_id(n))
}

/// Looks up an exception id case-insensitively.
pub(crate) fn exception_id_ci(name: &str) -> Option<spdx::ExceptionId> {
    IDS.get(&name.to_ascii_lowercase()).and_then(|n| spdx::exception_id(n))
}

/// Characters the `spdx` lexer reads as one term.
fn is_term_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | ':' | '+')
}

/// Rewrites ids, operators and ref prefixes to their canonical case. Only ASCII letters change,
/// so every byte offset stays valid for the original input.
fn fix_case(input: &str) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(start) = rest.find(is_term_char) {
        out.push_str(&rest[..start]);
        let term_len = rest[start..].find(|c| !is_term_char(c)).unwrap_or(rest.len() - start);
        let term = &rest[start..start + term_len];
        let bare = term.trim_end_matches('+');
        let plus = &term[bare.len()..];
        out.push_str(&fix_term(bare));
        out.push_str(plus);
        rest = &rest[start + term_len..];
    }
    out.push_str(rest);
    out
}

fn fix_term(term: &str) -> String {
    if let Some(&name) = IDS.get(&term.to_ascii_lowercase()) {
        return name.to_owned();
    }
    for op in ["AND", "OR", "WITH"] {
        if term.eq_ignore_ascii_case(op) {
            return op.to_owned();
        }
    }
    // `DocumentRef-a:LicenseRef-b`: fix the case of each prefix.
    term.split(':')
        .map(|part| {
            for prefix in ["DocumentRef-", "LicenseRef-", "AdditionRef-"] {
                if part.len() >= prefix.len()
                    && part.is_char_boundary(prefix.len())
                    && part[..prefix.len()].eq_ignore_ascii_case(prefix)
                {
                    return format!("{prefix}{}", &part[prefix.len()..]);
                }
            }
            part.to_owned()
        })
        .collect::<Vec<_>>()
        .join(":")
}

fn parse_with(input: &str, slash_as_or: bool) -> Result<LicenseExpression, ExpressionError> {
    let mode = ParseMode {
        allow_slash_as_or_operator: slash_as_or,
        // Deliberately off: the crate's imprecise names guess versions (see the module docs).
        allow_imprecise_license_names: false,
        allow_postfix_plus_on_gpl: true,
        allow_deprecated: true,
        allow_unknown: false,
    };
    let fixed = fix_case(input);
    let parsed = spdx::Expression::parse_mode(&fixed, mode).map_err(|e| ExpressionError {
        input: input.to_owned(),
        span: e.span.clone(),
        reason: e.reason.to_string(),
    })?;
    let internal = |what: &str| ExpressionError {
        input: input.to_owned(),
        span: 0..input.len(),
        reason: format!("internal error: {what}"),
    };
    let mut stack: Vec<Node> = Vec::new();
    for node in parsed.iter() {
        match node {
            ExprNode::Req(r) => stack.push(canonical_req(&r.req)),
            ExprNode::Op(op) => {
                let (Some(b), Some(a)) = (stack.pop(), stack.pop()) else {
                    return Err(internal("operator without operands"));
                };
                stack.push(Node::combine(*op, a, b));
            }
        }
    }
    let (Some(root), true) = (stack.pop(), stack.is_empty()) else {
        return Err(internal("unbalanced expression"));
    };
    Ok(LicenseExpression::from_node(root))
}

/// Deprecated GNU ids that fold an exception into the id, and their SPDX replacements.
const DEPRECATED_WITH_EXCEPTION: &[(&str, &str, &str)] = &[
    ("GPL-2.0-with-GCC-exception", "GPL-2.0-only", "GCC-exception-2.0"),
    ("GPL-2.0-with-autoconf-exception", "GPL-2.0-only", "Autoconf-exception-2.0"),
    ("GPL-2.0-with-bison-exception", "GPL-2.0-only", "Bison-exception-2.2"),
    ("GPL-2.0-with-classpath-exception", "GPL-2.0-only", "Classpath-exception-2.0"),
    ("GPL-2.0-with-font-exception", "GPL-2.0-only", "Font-exception-2.0"),
    ("GPL-3.0-with-GCC-exception", "GPL-3.0-only", "GCC-exception-3.1"),
    ("GPL-3.0-with-autoconf-exception", "GPL-3.0-only", "Autoconf-exception-3.0"),
    ("eCos-2.0", "GPL-2.0-or-later", "eCos-exception-2.0"),
    ("wxWindows", "LGPL-2.0-or-later", "WxWindows-exception-3.1"),
];

/// Other deprecated ids and the ids SPDX names as their replacements.
const DEPRECATED_RENAMED: &[(&str, &str)] = &[
    ("BSD-2-Clause-FreeBSD", "BSD-2-Clause"),
    ("BSD-2-Clause-NetBSD", "BSD-2-Clause"),
    ("Nunit", "zlib-acknowledgement"),
    ("StandardML-NJ", "SMLNJ"),
    ("bzip2-1.0.5", "bzip2-1.0.6"),
];

/// Rewrites one requirement to canonical ids: GNU ids always carry `-only` / `-or-later`,
/// deprecated ids become their replacements. Requirements that cannot be rewritten are kept.
fn canonical_req(req: &LicenseReq) -> Node {
    let LicenseItem::Spdx { id, or_later } = &req.license else {
        return Node::Req(req.clone());
    };
    let (id, or_later) = (*id, *or_later);
    if req.addition.is_none()
        && let Some((_, base, exception)) = DEPRECATED_WITH_EXCEPTION.iter().find(|(old, ..)| *old == id.name)
        && let (Some(base), Some(exception)) = (spdx::license_id(base), spdx::exception_id(exception))
    {
        let base = if or_later && base.is_gnu() {
            spdx::gnu_license_id(base.name.trim_end_matches("-only"), true).unwrap_or(base)
        } else {
            base
        };
        return Node::Req(LicenseReq {
            license: LicenseItem::Spdx { id: base, or_later: or_later && !base.is_gnu() },
            addition: Some(AdditionItem::Spdx(exception)),
        });
    }
    let renamed = DEPRECATED_RENAMED.iter().find(|(old, _)| *old == id.name).and_then(|(_, new)| spdx::license_id(new));
    let id = renamed.unwrap_or(id);
    let (id, or_later) = if id.is_gnu() && !id.name.ends_with("-only") && !id.name.ends_with("-or-later") {
        match spdx::gnu_license_id(id.name, or_later) {
            Some(gnu) => (gnu, false),
            None => (id, or_later),
        }
    } else {
        (id, or_later)
    };
    Node::Req(LicenseReq { license: LicenseItem::Spdx { id, or_later }, addition: req.addition.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        LicenseExpression::parse(s).unwrap().to_string()
    }

    #[test]
    fn canonical_text() {
        assert_eq!(canon("MIT OR Apache-2.0"), "MIT OR Apache-2.0");
        assert_eq!(canon("mit or apache-2.0"), "MIT OR Apache-2.0");
        assert_eq!(canon("(MIT OR (Apache-2.0))"), "MIT OR Apache-2.0");
        assert_eq!(canon("MIT AND BSD-3-Clause OR Apache-2.0"), "(MIT AND BSD-3-Clause) OR Apache-2.0");
        assert_eq!(canon("MIT AND (BSD-3-Clause OR Apache-2.0)"), "MIT AND (BSD-3-Clause OR Apache-2.0)");
    }

    #[test]
    fn deprecated_ids_are_rewritten() {
        assert_eq!(canon("GPL-2.0"), "GPL-2.0-only");
        assert_eq!(canon("GPL-2.0+"), "GPL-2.0-or-later");
        assert_eq!(canon("gpl-3.0+"), "GPL-3.0-or-later");
        assert_eq!(canon("LGPL-2.1+"), "LGPL-2.1-or-later");
        assert_eq!(canon("GPL-2.0-only+"), "GPL-2.0-or-later");
        assert_eq!(canon("GPL-2.0-with-classpath-exception"), "GPL-2.0-only WITH Classpath-exception-2.0");
        assert_eq!(canon("BSD-2-Clause-FreeBSD"), "BSD-2-Clause");
        assert_eq!(canon("AGPL-3.0"), "AGPL-3.0-only");
        assert_eq!(canon("Apache-2.0+"), "Apache-2.0+");
        assert_eq!(canon("apache-2.0 with llvm-exception"), "Apache-2.0 WITH LLVM-exception");
        assert_eq!(canon("licenseref-foo AND MIT"), "LicenseRef-foo AND MIT");
    }

    #[test]
    fn canonical_text_reparses_to_itself() {
        for s in ["MIT AND BSD-3-Clause OR Apache-2.0", "GPL-2.0+ WITH Classpath-exception-2.0 AND (ISC OR 0BSD)"] {
            let once = canon(s);
            assert_eq!(canon(&once), once);
        }
    }

    #[test]
    fn imprecise_names_are_refused() {
        for s in ["apache", "gpl", "bsd", "gnu gpl v2", "MIT/Apache-2.0"] {
            assert!(LicenseExpression::parse(s).is_err(), "{s}");
        }
        assert_eq!(LicenseExpression::parse_slash_as_or("MIT/Apache-2.0").unwrap().as_str(), "MIT OR Apache-2.0");
    }

    #[test]
    fn errors_quote_and_underline() {
        let e = LicenseExpression::parse("MIT OR Foo-1.0").unwrap_err();
        assert_eq!(e.span, 7..14);
        assert_eq!(e.to_string(), "invalid SPDX expression: unknown term\n    MIT OR Foo-1.0\n           ^^^^^^^");
        let e = LicenseExpression::parse("Ünïcode OR MIT").unwrap_err();
        assert!(e.to_string().ends_with("    Ünïcode OR MIT\n    ^^^^^^^^^^^^^^"), "{e}");
    }
}
