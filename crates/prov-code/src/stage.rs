//! `code-packages`: the source files of registry packages as documents, kept only when the
//! package's license is allowed (AFM §3.1.3), with a ledger row for every source file.
//!
//! The `packages` input is a source directory holding one directory per package, as the
//! registry's archive unpacks (`itoa-1.0.11/`, an npm tarball's `package/` renamed to
//! `pako-2.1.0/`). Each package root holds a metadata file ([`crate::package`]); license and
//! readme files beside the package directories are passed over, any other file there is an
//! error. Each package is one map task and one output shard, in directory order.
//!
//! A package is decided once ([`crate::decide`]); then each of its files whose extension is in
//! `extensions` is a candidate document, with the id `<registry>/<name>@<version>/<path>`:
//!
//! | rule | decision | when |
//! | --- | --- | --- |
//! | `code:vendored` | removed | the file is in a directory that holds another package (its own license file, or metadata naming another package): a bundled dependency |
//! | `code:allowed` | kept | the package is allowed, and the file is UTF-8 and at most `max_bytes` long |
//! | `code:denied`, `code:unknown-license`, `code:no-license` | removed | the package's rule (every file of the package) |
//! | `code:too-large` | removed | the package is allowed, the file is longer than `max_bytes` |
//! | `code:not-utf8` | removed | the package is allowed, the file is not UTF-8 |
//!
//! Every row's evidence names the package (`package`) and the expression it was judged by
//! (`license`, absent when there was none); a denied package's rows add `excluded_by`, the
//! denied requirements. A document's metadata holds `package`, `path` and `license`. The
//! statistics add `packages`: every package's full verdict by directory, the declared string,
//! each license file's match and the policy's reason included (what `prov explain
//! code-packages` prints for one).

use std::collections::BTreeMap;
use std::sync::Arc;

use prov_dataset::{Document, LedgerDecision, LedgerRow, ShardWriter};
use prov_exec::{
    ConfigError, InputSpec, MapResultText, MapResults, Stage, StageContext, StageError, StageOutput, map_result_text,
    parse_params,
};
use prov_license::Policy;
use prov_license::detect::{LicenseTexts, is_license_file};
use prov_manifest::{
    Content, Determinism, OutputType, Record, SourceRecord, TreeEntry, TreeRecord, get_record, get_typed,
};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::decide::{LicenseFile, PackageVerdict, decide};
use crate::package::{METADATA_FILES, Metadata, parse_metadata};

/// The extensions of source files taken as code by default: the languages of the usual code
/// corpora, no documentation, data or build files.
pub const DEFAULT_EXTENSIONS: [&str; 28] = [
    "c", "cc", "cjs", "cpp", "cs", "cxx", "go", "h", "hpp", "java", "js", "jsx", "kt", "lua", "m", "mjs", "php", "pl",
    "py", "r", "rb", "rs", "scala", "sh", "sql", "swift", "ts", "tsx",
];

/// The resolved configuration of a `code-packages` stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodePackagesConfig {
    /// The license policy preset (`afm-code`, `permissive`).
    #[serde(default = "default_policy")]
    pub policy: String,
    /// The file extensions (lower case, without the dot) whose files are code; sorted when
    /// resolved.
    #[serde(default = "default_extensions")]
    pub extensions: Vec<String>,
    /// The longest file kept, in bytes (longer ones are generated or data, not code to learn
    /// from).
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
}

fn default_policy() -> String {
    "permissive".into()
}
fn default_extensions() -> Vec<String> {
    DEFAULT_EXTENSIONS.iter().map(|e| (*e).to_owned()).collect()
}
fn default_max_bytes() -> u64 {
    1_000_000
}

impl CodePackagesConfig {
    fn policy(&self) -> Result<Policy, ConfigError> {
        Policy::preset(&self.policy).ok_or_else(|| {
            ConfigError::at(&["policy"], format!("unknown policy `{}`", self.policy))
                .with_hint(format!("known: {}", Policy::PRESETS.join(", ")))
        })
    }

    /// Whether a path in a package is a candidate code file.
    pub fn is_code(&self, path: &str) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        name.rsplit_once('.')
            .is_some_and(|(stem, ext)| !stem.is_empty() && self.extensions.iter().any(|e| e.eq_ignore_ascii_case(ext)))
    }
}

/// One package directory of the input: its name and its files, in path order, with paths
/// relative to it.
#[derive(Debug, Clone)]
pub struct PackageDir {
    /// The directory's name.
    pub dir: String,
    /// Its files.
    pub files: Vec<TreeEntry>,
}

/// Groups a source tree's files into package directories, in path order. Loose license and
/// readme files at the top are passed over; any other loose file is an error.
///
/// # Errors
///
/// A message naming the loose file.
pub fn package_dirs(entries: &[TreeEntry]) -> Result<Vec<PackageDir>, String> {
    let mut dirs: BTreeMap<&str, Vec<TreeEntry>> = BTreeMap::new();
    for e in entries {
        let path = e.path.as_str();
        match path.split_once('/') {
            Some((dir, rest)) => {
                let mut entry = e.clone();
                entry.path = rest.parse().map_err(|err| format!("`{path}`: {err}"))?;
                dirs.entry(dir).or_default().push(entry);
            }
            None if is_license_file(path) || path.to_ascii_lowercase().starts_with("readme") => {}
            None => {
                return Err(format!(
                    "`{path}` is not in a package directory; the input holds one directory per package (and license \
                     or readme files)"
                ));
            }
        }
    }
    Ok(dirs
        .into_iter()
        .map(|(dir, mut files)| {
            files.sort_by(|a, b| a.path.as_str().cmp(b.path.as_str()));
            PackageDir { dir: dir.to_owned(), files }
        })
        .collect())
}

/// A package read and decided: what [`judge`] returns.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The package's metadata.
    pub metadata: Metadata,
    /// The verdict.
    pub verdict: PackageVerdict,
    /// Directories inside the package that hold another package (a license file of their
    /// own, or metadata naming another package): bundled dependencies, whose code is not the
    /// package's to license. Sorted.
    pub vendored: Vec<String>,
}

impl Judged {
    /// The vendored directory that holds `path`, if any.
    pub fn vendored_dir(&self, path: &str) -> Option<&str> {
        self.vendored.iter().map(String::as_str).find(|d| path.strip_prefix(d).is_some_and(|r| r.starts_with('/')))
    }
}

/// Reads a package's metadata and license files through `read` (a path relative to the
/// package, to its bytes) and decides it.
///
/// # Errors
///
/// A message when the package has no metadata file, the metadata does not parse, or a file
/// cannot be read.
pub fn judge(
    package: &PackageDir,
    read: &dyn Fn(&TreeEntry) -> Result<Vec<u8>, String>,
    texts: &LicenseTexts,
    policy: &Policy,
) -> Result<Judged, String> {
    let at_root = |name: &str| package.files.iter().find(|f| f.path.as_str() == name);
    let mut all = Vec::new();
    for name in METADATA_FILES {
        if let Some(entry) = at_root(name) {
            all.push(parse_metadata(name, &read(entry)?).map_err(|e| format!("`{}/{e}", package.dir))?);
        }
    }
    let file = METADATA_FILES.iter().find(|name| at_root(name).is_some()).copied().unwrap_or_default();
    let Some(mut metadata) = all.first().cloned() else {
        return Err(format!("`{}` holds none of {}", package.dir, METADATA_FILES.join(", ")));
    };
    // Every declaration at the root binds the package (an sdist that also ships a
    // `package.json`): their strings joined by `AND`; one alone is itself; npm's `UNLICENSED`
    // in any of them denies.
    let declaring: Vec<&Metadata> = all.iter().filter(|m| m.declared.is_some()).collect();
    let unlicensed = declaring.iter().find(|m| m.declared.as_deref().map(str::trim) == Some(crate::decide::UNLICENSED));
    (metadata.declared, metadata.declared_field) = match (unlicensed, declaring.as_slice()) {
        (Some(m), _) | (None, [m]) => (m.declared.clone(), m.declared_field),
        (None, []) => (None, None),
        (None, [first, ..]) => (
            Some(
                declaring
                    .iter()
                    .filter_map(|m| m.declared.as_deref())
                    .map(|d| format!("({d})"))
                    .collect::<Vec<_>>()
                    .join(" AND "),
            ),
            first.declared_field,
        ),
    };
    if metadata.license_file.is_none() {
        metadata.license_file = all.iter().find_map(|m| m.license_file.clone());
    }
    let vendored = vendored_dirs(package, read, &metadata)?;
    let mut license_files: Vec<(String, String)> = Vec::new();
    for f in &package.files {
        let path = f.path.as_str();
        let named = metadata.license_file.as_deref().is_some_and(|l| l.trim_start_matches("./") == path);
        if named || (!path.contains('/') && is_license_file(path)) {
            let bytes = read(f)?;
            license_files.push((path.to_owned(), String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    if let Some(named) = &metadata.license_file
        && !license_files.iter().any(|(p, _)| p == named.trim_start_matches("./"))
    {
        return Err(format!("`{}`: the license file `{named}` that {file} names is not in the package", package.dir));
    }
    let files: Vec<LicenseFile<'_>> = license_files.iter().map(|(path, text)| LicenseFile { path, text }).collect();
    let verdict = decide(metadata.declared.as_deref(), &files, texts, policy);
    Ok(Judged { metadata, verdict, vendored })
}

/// The directories below the root that hold a license file, or a metadata file naming another
/// package than `own` (a copy of the package's own metadata, as an sdist's `*.egg-info/PKG-INFO`,
/// is not another package; a metadata file that does not parse as a package, as a
/// `package.json` that only sets a module type, names none).
fn vendored_dirs(
    package: &PackageDir,
    read: &dyn Fn(&TreeEntry) -> Result<Vec<u8>, String>,
    own: &Metadata,
) -> Result<Vec<String>, String> {
    let mut dirs = Vec::new();
    for f in &package.files {
        let Some((dir, name)) = f.path.as_str().rsplit_once('/') else { continue };
        let another = if is_license_file(name) {
            true
        } else if METADATA_FILES.contains(&name) {
            parse_metadata(name, &read(f)?)
                .is_ok_and(|m| (m.registry, &m.name, &m.version) != (own.registry, &own.name, &own.version))
        } else {
            false
        };
        if another {
            dirs.push(dir.to_owned());
        }
    }
    dirs.sort();
    dirs.dedup();
    // A directory inside another vendored one adds nothing.
    let outer: Vec<String> = dirs
        .iter()
        .filter(|d| !dirs.iter().any(|o| d.strip_prefix(o.as_str()).is_some_and(|r| r.starts_with('/'))))
        .cloned()
        .collect();
    Ok(outer)
}

/// What every task shares: the packages, the license texts and the policy.
struct Prepared {
    packages: Vec<PackageDir>,
    texts: LicenseTexts,
    policy: Policy,
}

fn prepare(cx: &StageContext<'_>, config: &CodePackagesConfig) -> Result<Prepared, StageError> {
    let bad = |message: String| StageError::Input { input: "packages".into(), message };
    let input = cx.input("packages")?;
    let tree = match get_record(cx.store, &input.digest)? {
        Record::Source(SourceRecord { content: Content::Tree { digest, .. }, .. }) => {
            get_typed::<TreeRecord>(cx.store, &digest).map_err(|e| StageError::of_input("packages", e))?
        }
        _ => return Err(bad("a file, not a directory of packages".into())),
    };
    let packages = package_dirs(&tree.entries).map_err(bad)?;
    let texts = LicenseTexts::load().map_err(|e| StageError::Worker(e.to_string()))?;
    Ok(Prepared { packages, texts, policy: config.policy()? })
}

fn package_task(
    cx: &StageContext<'_>,
    config: &CodePackagesConfig,
    prepared: &Prepared,
    task: usize,
) -> Result<prov_filter::FilteredShard, StageError> {
    let package = prepared.packages.get(task).ok_or_else(|| StageError::MapResult {
        task,
        message: format!("the input has {} packages", prepared.packages.len()),
    })?;
    let read = |e: &TreeEntry| cx.store.read(&e.digest).map_err(|err| err.to_string());
    let judged = judge(package, &read, &prepared.texts, &prepared.policy)
        .map_err(|message| StageError::Input { input: "packages".into(), message })?;
    let package_id = judged.metadata.package_id();
    let mut base = Map::new();
    base.insert("package".into(), json!(package_id));
    if let Some(license) = &judged.verdict.license {
        base.insert("license".into(), json!(license));
    }
    let allowed = judged.verdict.rule == "code:allowed";
    let mut out = ShardWriter::new(cx.store)?;
    let mut rows = Vec::new();
    for f in package.files.iter().filter(|f| config.is_code(f.path.as_str())) {
        let path = f.path.as_str();
        let id = format!("{package_id}/{path}");
        let mut evidence = base.clone();
        let bytes = cx.store.read(&f.digest)?;
        let text = String::from_utf8(bytes);
        let (decision, rule) = if let Some(dir) = judged.vendored_dir(path) {
            evidence.insert("vendored".into(), json!(dir));
            (LedgerDecision::Removed, "code:vendored")
        } else if !allowed {
            let excluded: Vec<&str> = judged.verdict.excluded_by.iter().map(|(r, _)| r.as_str()).collect();
            if !excluded.is_empty() {
                evidence.insert("excluded_by".into(), json!(excluded));
            }
            (LedgerDecision::Removed, judged.verdict.rule)
        } else if f.size > config.max_bytes {
            evidence.insert("bytes".into(), json!(f.size));
            (LedgerDecision::Removed, "code:too-large")
        } else if text.is_err() {
            (LedgerDecision::Removed, "code:not-utf8")
        } else {
            (LedgerDecision::Kept, "code:allowed")
        };
        let mut doc = Document::new(id, text.unwrap_or_default());
        let mut metadata = Map::new();
        metadata.insert("package".into(), json!(package_id));
        metadata.insert("path".into(), json!(path));
        if let Some(license) = &judged.verdict.license {
            metadata.insert("license".into(), json!(license));
        }
        doc.metadata = Some(
            String::from_utf8(prov_manifest::to_canonical_bytes(&metadata).expect("strings encode"))
                .expect("canonical JSON is UTF-8"),
        );
        rows.push(LedgerRow::of_document(&doc, decision, rule, Some(evidence)));
        if decision == LedgerDecision::Kept {
            out.push(doc)?;
        }
    }
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    let verdict = json!({
        "package": package_id,
        "declared_field": judged.metadata.declared_field,
        "verdict": judged.verdict,
    });
    prov_filter::filtered_shard(cx, out.finish()?, rows, verdict)
}

/// Turns the allowed packages' source files into documents.
pub struct CodePackagesStage;

impl Stage for CodePackagesStage {
    fn kind(&self) -> &'static str {
        "code-packages"
    }
    fn version(&self) -> u32 {
        // 2: vendored directories, every root metadata file declaring, unrecognised license
        // files, verbatim texts, `UNLICENSED` and `SEE LICENSE IN`.
        2
    }
    fn summary(&self) -> &'static str {
        "the source files of registry packages (crates.io, npm, PyPI) as documents, kept only when the package's \
         declared license and license files are allowed by the policy (AFM's license-filtered code)"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let mut config: CodePackagesConfig = parse_params(params)?;
        config.policy()?;
        for (i, e) in config.extensions.iter().enumerate() {
            if e.is_empty() || !e.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) {
                return Err(ConfigError::at(&["extensions", &i.to_string()], format!("`{e}` is not an extension"))
                    .with_hint("write extensions in lower case without the dot: `rs`, `py`"));
            }
        }
        if config.extensions.is_empty() {
            return Err(ConfigError::at(&["extensions"], "is empty").with_hint("with no extension no file is code"));
        }
        if config.max_bytes == 0 {
            return Err(ConfigError::at(&["max_bytes"], "must be at least 1"));
        }
        config.extensions.sort();
        config.extensions.dedup();
        Ok(serde_json::to_value(config).expect("strings and numbers encode"))
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![("packages", vec![OutputType::Source])])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        prov_filter::outputs()
    }
    fn map_tasks(&self, cx: &StageContext<'_>) -> Result<Option<usize>, StageError> {
        let config: CodePackagesConfig = parse_params(cx.config).map_err(StageError::Config)?;
        Ok(Some(cx.prepared(|| prepare(cx, &config))?.packages.len()))
    }
    fn map(&self, cx: &StageContext<'_>, tasks: &[usize]) -> Result<Vec<MapResultText>, StageError> {
        let config: CodePackagesConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let prepared: Arc<Prepared> = cx.prepared(|| prepare(cx, &config))?;
        cx.pool.install(|| {
            tasks.par_iter().map(|&t| map_result_text(t, &package_task(cx, &config, &prepared, t)?)).collect()
        })
    }
    fn reduce(&self, cx: &StageContext<'_>, results: MapResults<'_>) -> Result<StageOutput, StageError> {
        let config: CodePackagesConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let prepared: Arc<Prepared> = cx.prepared(|| prepare(cx, &config))?;
        let mut packages = Map::new();
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        let mut out = prov_filter::reduce_filtered(cx, results, |task, verdict| {
            let dir = prepared.packages.get(task).map_or_else(|| task.to_string(), |p| p.dir.clone());
            // Two directories of one package would give their files the same document ids.
            let id = verdict["package"].as_str().unwrap_or_default().to_owned();
            if let Some(first) = seen.insert(id.clone(), dir.clone()) {
                return Err(StageError::Input {
                    input: "packages".into(),
                    message: format!("`{first}` and `{dir}` both hold package `{id}`; keep one version of it"),
                });
            }
            packages.insert(dir, verdict);
            Ok(())
        })?;
        out.stats.insert("packages".into(), Value::Object(packages));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str) -> TreeEntry {
        TreeEntry {
            path: path.parse().unwrap(),
            digest: prov_store::Digest::of(path.as_bytes()),
            size: 1,
            executable: false,
        }
    }

    #[test]
    fn configuration_is_explicit_and_checked() {
        let stage = CodePackagesStage;
        let resolved = stage.resolve_config(&json!({"policy": "afm-code", "extensions": ["rs", "py", "rs"]})).unwrap();
        assert_eq!(resolved, json!({"policy": "afm-code", "extensions": ["py", "rs"], "max_bytes": 1_000_000}));
        let e = stage.resolve_config(&json!({"policy": "gpl-ok"})).unwrap_err();
        assert_eq!(
            (e.path.as_slice(), e.hint.as_deref()),
            (&["policy".to_owned()][..], Some("known: afm-code, permissive"))
        );
        let e = stage.resolve_config(&json!({"extensions": [".rs"]})).unwrap_err();
        assert_eq!(e.path, ["extensions", "0"]);
        assert!(stage.resolve_config(&json!({"extensions": []})).is_err());
        assert!(stage.resolve_config(&json!({"max_bytes": 0})).is_err());
    }

    #[test]
    fn code_files_by_extension() {
        let config: CodePackagesConfig = parse_params(&json!({})).unwrap();
        assert!(config.is_code("src/lib.rs") && config.is_code("a/b/c.PY") && config.is_code("x.min.js"));
        assert!(!config.is_code("README.md") && !config.is_code(".rs") && !config.is_code("Makefile"));
    }

    #[test]
    fn packages_are_the_top_directories() {
        let dirs = package_dirs(&[
            entry("b-1.0/src/lib.rs"),
            entry("a-2.0/Cargo.toml"),
            entry("LICENSE"),
            entry("b-1.0/Cargo.toml"),
            entry("README.md"),
        ])
        .unwrap();
        let got: Vec<(&str, Vec<&str>)> =
            dirs.iter().map(|d| (d.dir.as_str(), d.files.iter().map(|f| f.path.as_str()).collect())).collect();
        assert_eq!(got, [("a-2.0", vec!["Cargo.toml"]), ("b-1.0", vec!["Cargo.toml", "src/lib.rs"])]);
        let e = package_dirs(&[entry("lib.rs")]).unwrap_err();
        assert!(e.starts_with("`lib.rs` is not in a package directory"), "{e}");
    }
}
