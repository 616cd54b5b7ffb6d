//! `prov explain license`: what a license string means, and what the policy decides.

use prov_license::{Normalized, Policy, evaluate, normalize};
use serde_json::json;

use crate::error::CommandError;
use crate::ui::Ui;

/// Normalise a license string to SPDX and say what the permissive policy decides
///
/// Prints the SPDX expression the string denotes and the normalisation rule that recognised it
/// (or why it is unknown: not a license, ambiguous with its candidate readings, unrecognised),
/// then the decision of the `permissive` policy preset (the Apertus report's "redistribution and
/// commercial use allowed") with the policy rule that fired and the reason.
#[derive(Debug, clap::Args)]
pub(crate) struct LicenseArgs {
    /// The license string as found (`MIT/Apache-2.0`, `GPL-2+`, `CC BY-NC 4.0`, …)
    string: String,
}

pub(crate) fn cmd_explain_license(ui: &mut Ui, args: &LicenseArgs) -> Result<(), CommandError> {
    let normalized = normalize(&args.string);
    let policy = Policy::permissive();
    let decision = evaluate(&policy, &normalized);
    let (expression, rule, unknown) = match &normalized {
        Normalized::Spdx { expression, via } => (Some(expression.to_string()), Some(via.as_str()), None),
        Normalized::Unknown { reason } => (None, None, Some(reason.to_string())),
    };
    let verdict = match decision.decision {
        prov_license::Decision::Allow => "allow",
        prov_license::Decision::Deny => "deny",
    };
    ui.json(
        "license",
        json!({
            "input": args.string,
            "spdx": expression,
            "normalization_rule": rule,
            "unknown": unknown,
            "policy": format!("{} {}", policy.name(), policy.version()),
            "decision": verdict,
            "policy_rule": decision.rule.as_str(),
            "reason": decision.reason,
        }),
    )?;
    match (&expression, &unknown) {
        (Some(e), _) => ui.line(format!("spdx      {e}  (rule: {})", rule.unwrap_or_default()))?,
        (None, Some(u)) => ui.line(format!("unknown   {u}"))?,
        (None, None) => {}
    }
    ui.line(format!("policy    {} {}: {verdict} (rule: {})", policy.name(), policy.version(), decision.rule.as_str()))?;
    ui.line(format!("reason    {}", decision.reason))?;
    Ok(())
}
