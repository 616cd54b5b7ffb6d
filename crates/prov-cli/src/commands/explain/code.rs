//! `prov explain code-packages`: whether a registry package's code may be used under a license
//! policy, and which license excludes it.

use std::path::{Path, PathBuf};

use prov_code::{PackageDir, judge};
use prov_license::Policy;
use prov_license::detect::LicenseTexts;
use prov_manifest::TreeEntry;
use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::Ui;

/// Say whether a package's code is kept under a license policy, and which license excludes it
///
/// Reads an unpacked package directory (a crate, an npm tarball's `package/`, a PyPI sdist) as
/// the `code-packages` stage does: its metadata file (`Cargo.toml`, `package.json` or
/// `PKG-INFO`), the license it declares and the license files at its root, each matched
/// against the SPDX license texts. Prints the package, the declared string and its SPDX
/// reading, each license file's match, the expression the package is judged by (the declared
/// one and every file's license it does not name), the rule (`code:allowed`, `code:denied`,
/// `code:unknown-license`, `code:no-license`) and, for a denied package, each license that
/// excludes it with the policy's reason. With `--json`, one `code-packages` message:
/// `{"package", "declared_field", "verdict"}`, the verdict as in the stage's `packages`
/// statistics.
#[derive(Debug, clap::Args)]
pub(super) struct CodePackagesArgs {
    /// The unpacked package directory
    #[arg(long, value_name = "DIR")]
    package: PathBuf,
    /// The license policy preset (`afm-code`, `permissive`), as the stage's `policy`
    #[arg(long, value_name = "NAME", default_value = "permissive")]
    policy: String,
}

/// The files under `dir`, as the tree a source import of it would record (sorted; symbolic
/// links and names that are not UTF-8 refused, as the import refuses them).
fn entries(dir: &Path) -> Result<Vec<TreeEntry>, CommandError> {
    let tree = prov_exec::tree_record(dir, &mut |path| Ok(prov_exec::hash_file(path)?))
        .map_err(|e| CommandError::input(format!("{}: {e}", dir.display())))?;
    Ok(tree.entries)
}

pub(super) fn cmd_explain_code_packages(
    ui: &mut Ui,
    cx: &CommandContext,
    args: &CodePackagesArgs,
) -> Result<(), CommandError> {
    let policy = Policy::preset(&args.policy).ok_or_else(|| {
        CommandError::input(format!("unknown policy `{}`", args.policy))
            .with_hint(format!("known: {}", Policy::PRESETS.join(", ")))
    })?;
    let dir = cx.cwd.join(&args.package);
    if !dir.is_dir() {
        return Err(CommandError::input(format!("{}: not a directory", args.package.display()))
            .with_hint("give an unpacked package: a crate, an npm tarball's `package/`, a PyPI sdist"));
    }
    let name = dir.file_name().map_or_else(|| ".".into(), |n| n.to_string_lossy().into_owned());
    let package = PackageDir { dir: name, files: entries(&dir)? };
    let read = |e: &TreeEntry| fs_err::read(dir.join(e.path.as_str())).map_err(|err| err.to_string());
    let texts = LicenseTexts::load().map_err(|e| CommandError::input(e.to_string()))?;
    let judged = judge(&package, &read, &texts, &policy).map_err(|m| {
        CommandError::input(m).with_hint("give an unpacked package: a crate, an npm tarball's `package/`, a PyPI sdist")
    })?;
    let package_id = judged.metadata.package_id();
    let v = &judged.verdict;
    if ui.is_json() {
        ui.json(
            "code-packages",
            json!({"package": package_id, "declared_field": judged.metadata.declared_field, "verdict": v}),
        )?;
        return Ok(());
    }
    ui.line(format!("package: {package_id}"))?;
    match (&v.declared, &v.spdx, &v.unknown) {
        (Some(d), Some(s), _) => ui.line(format!(
            "declared: `{d}` ({}), read as `{s}`",
            judged.metadata.declared_field.unwrap_or("license")
        ))?,
        (Some(d), None, Some(why)) => ui.line(format!("declared: `{d}`, not a license expression: {why}"))?,
        _ => ui.line("declared: nothing")?,
    }
    for f in &v.files {
        let matched = if f.licenses.is_empty() {
            format!("matches no license text (nearest {} at {:.3})", f.nearest.0, f.nearest.1)
        } else if let Some(declared) = &f.declared {
            format!("the text of {declared} (declared; best match {})", f.licenses.join(", "))
        } else {
            format!("the text of {} (not declared: added)", f.licenses.join(", "))
        };
        ui.line(format!("license file {}: {matched}", f.path))?;
    }
    if let Some(license) = &v.license {
        ui.line(format!("judged by: {license}"))?;
    }
    let decision = if v.rule == "code:allowed" { "kept" } else { "removed" };
    ui.line(format!("{}: {decision} under policy `{} {}`", v.rule, policy.name(), policy.version()))?;
    for (requirement, reason) in &v.excluded_by {
        ui.line(format!("excluded by {requirement}: {reason}"))?;
    }
    if v.excluded_by.is_empty() && v.rule != "code:allowed" {
        ui.line(format!("why: {}", v.reason))?;
    }
    Ok(())
}
