//! Code from package registries (the AFM report, §3.1.3: "we only use code from repositories
//! with permissive licenses"): what a package declares about itself ([`package`]: its
//! `Cargo.toml`, `package.json` or `PKG-INFO`), whether its license is allowed ([`decide`]:
//! the declared string and the license files it ships, combined into one SPDX expression and
//! evaluated against a `prov-license` policy, naming the requirements that exclude it), and
//! the `code-packages` stage ([`stage`]), which turns the source files of the allowed packages
//! into documents with a ledger row for every file.
//!
//! It owns the reading of registry metadata and the rule that combines metadata with license
//! files. What a license string means, which licenses a policy allows and what a license
//! file's text matches are `prov-license`'s; deduplication, PII and decontamination of the
//! code are the text stages', applied to this stage's dataset.

pub mod decide;
pub mod package;
pub mod stage;

pub use decide::{LicenseFile, LicenseFileMatch, PackageVerdict, decide};
pub use package::{METADATA_FILES, Metadata, MetadataError, Registry, parse_metadata};
pub use stage::{CodePackagesConfig, CodePackagesStage, Judged, PackageDir, judge, package_dirs};

/// Registers the `code-packages` stage kind.
pub fn register(registry: &mut prov_exec::Registry) {
    registry.register(std::sync::Arc::new(CodePackagesStage));
}
