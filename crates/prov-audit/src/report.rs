//! Audit reports: the claims' results with the run and policy they are about, rendered as
//! text, Markdown or HTML from the one [`Report`] value (the CLI's `--json` serialises it).

use prov_textfix::html::escape;
use std::fmt::Write as _;

use prov_store::Digest;
use serde::Serialize;

use crate::claims::{ClaimResult, Outcome};

/// An audit of one run against one policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The policy's name.
    pub policy: String,
    /// BLAKE3 of the policy file's bytes.
    pub policy_digest: Digest,
    /// The recipe's name.
    pub recipe: String,
    /// The run record audited.
    pub run_manifest: Digest,
    /// The run's root.
    pub run_root: Digest,
    /// One result per claim, in policy order.
    pub claims: Vec<ClaimResult>,
}

impl Report {
    /// True when every claim holds.
    pub fn all_hold(&self) -> bool {
        self.claims.iter().all(|c| c.outcome == Outcome::Holds)
    }

    /// Returns the number of claims with each outcome: (holds, fails, cannot be decided).
    pub fn counts(&self) -> (usize, usize, usize) {
        let n = |o| self.claims.iter().filter(|c| c.outcome == o).count();
        (n(Outcome::Holds), n(Outcome::Fails), n(Outcome::CannotBeDecided))
    }

    fn summary(&self) -> String {
        let (h, f, u) = self.counts();
        format!("{h} of {} claims hold, {f} fail, {u} cannot be decided", self.claims.len())
    }

    /// Renders the report as plain text.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "audit of run {} (recipe `{}`, root {})\npolicy `{}` ({})\n",
            self.run_manifest, self.recipe, self.run_root, self.policy, self.policy_digest
        );
        for c in &self.claims {
            let _ = write!(s, "\n{}: {}\n  {}\n", c.kind, c.outcome.as_str().to_uppercase(), c.statement);
            for r in &c.reasons {
                let _ = writeln!(s, "  ! {r}");
            }
            for e in &c.evidence {
                let _ = writeln!(s, "  {}: {}", e.name, e.value);
            }
            for r in &c.rechecked {
                let _ = writeln!(s, "  re-checked: {r}");
            }
        }
        let _ = write!(s, "\n{}\n", self.summary());
        s
    }

    /// Renders the report as Markdown.
    pub fn to_markdown(&self) -> String {
        let mut s = format!(
            "# Audit of `{}`\n\n- run manifest: `{}`\n- run root: `{}`\n- policy: `{}` (`{}`)\n- result: {}\n",
            self.recipe,
            self.run_manifest,
            self.run_root,
            self.policy,
            self.policy_digest,
            self.summary()
        );
        for c in &self.claims {
            let _ = write!(s, "\n## {}: **{}**\n\n{}\n\n", c.kind, c.outcome.as_str(), c.statement);
            for r in &c.reasons {
                let _ = writeln!(s, "- **{}**", md_escape(r));
            }
            if !c.reasons.is_empty() {
                s.push('\n');
            }
            s.push_str("| evidence | value |\n| --- | --- |\n");
            for e in &c.evidence {
                let _ = writeln!(s, "| {} | {} |", md_escape(&e.name), md_escape(&e.value));
            }
            if !c.rechecked.is_empty() {
                s.push_str("\nRe-checked:\n\n");
                for r in &c.rechecked {
                    let _ = writeln!(s, "- {}", md_escape(r));
                }
            }
        }
        s
    }

    /// Renders the report as a self-contained HTML page.
    pub fn to_html(&self) -> String {
        let mut s = format!(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Audit of {}</title></head><body>\n<h1>Audit of <code>{}</code></h1>\n<ul><li>run manifest: <code>{}</code></li><li>run root: <code>{}</code></li><li>policy: <code>{}</code> (<code>{}</code>)</li><li>result: {}</li></ul>\n",
            escape(&self.recipe),
            escape(&self.recipe),
            self.run_manifest,
            self.run_root,
            escape(&self.policy),
            self.policy_digest,
            self.summary()
        );
        for c in &self.claims {
            let _ = write!(
                s,
                "<h2>{}: <strong>{}</strong></h2>\n<p>{}</p>\n",
                escape(&c.kind),
                c.outcome.as_str(),
                escape(&c.statement)
            );
            if !c.reasons.is_empty() {
                s.push_str("<ul>");
                for r in &c.reasons {
                    let _ = write!(s, "<li><strong>{}</strong></li>", escape(r));
                }
                s.push_str("</ul>\n");
            }
            s.push_str("<table><tr><th>evidence</th><th>value</th></tr>\n");
            for e in &c.evidence {
                let _ = writeln!(s, "<tr><td>{}</td><td><code>{}</code></td></tr>", escape(&e.name), escape(&e.value));
            }
            s.push_str("</table>\n");
            if !c.rechecked.is_empty() {
                s.push_str("<p>Re-checked:</p><ul>");
                for r in &c.rechecked {
                    let _ = write!(s, "<li>{}</li>", escape(r));
                }
                s.push_str("</ul>\n");
            }
        }
        s.push_str("</body></html>\n");
        s
    }
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}
