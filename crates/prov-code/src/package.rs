//! What a registry package says about itself: its name, version and declared license, read
//! from the metadata file at the root of the package as the registry ships it.
//!
//! | registry | metadata file | name, version | declared license |
//! | --- | --- | --- | --- |
//! | crates.io | `Cargo.toml` (as `cargo package` normalises it) | `package.name`, `package.version` | `package.license`; `package.license-file` names a license file instead |
//! | PyPI | `PKG-INFO` (an sdist's core metadata) | `Name`, `Version` | `License-Expression` (metadata 2.4); else `License`, unless it is empty or `UNKNOWN` |
//! | npm | `package.json` | `name`, `version` | `license` (a string, or the legacy `{"type": …}`); else the legacy `licenses` list, read as its types joined by `OR` |
//!
//! When a package root holds more than one of these files, the first in this order names the
//! package ([`METADATA_FILES`]) and every one's declaration binds it (`crate::stage::judge`
//! joins them with `AND`). npm's `SEE LICENSE IN <file>` names a license file, as Cargo's
//! `license-file` does; its `UNLICENSED` is read as written (and denies). Names and versions
//! must be ones a registry accepts (no white space, a `/` only in an npm scope). A declared string is taken as written: what it means is
//! `prov-license`'s normalisation, decided later ([`crate::decide`]). PyPI's trove
//! classifiers (`License :: OSI Approved :: …`) are not read: several of them do not say
//! whether they are alternatives or all apply.

use std::fmt;

/// The metadata files a package root may hold, in the order that decides between them.
pub const METADATA_FILES: [&str; 3] = ["Cargo.toml", "PKG-INFO", "package.json"];

/// The registry a package comes from, known by its metadata file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Registry {
    /// crates.io (`Cargo.toml`).
    Crates,
    /// npm (`package.json`).
    Npm,
    /// PyPI (`PKG-INFO`).
    PyPi,
}

impl Registry {
    /// The registry of a metadata file name (one of [`METADATA_FILES`]).
    pub fn of_metadata_file(name: &str) -> Option<Self> {
        match name {
            "Cargo.toml" => Some(Self::Crates),
            "package.json" => Some(Self::Npm),
            "PKG-INFO" => Some(Self::PyPi),
            _ => None,
        }
    }

    /// The name written into ledgers and document ids: `crates.io`, `npm`, `pypi`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Crates => "crates.io",
            Self::Npm => "npm",
            Self::PyPi => "pypi",
        }
    }
}

impl fmt::Display for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A package's identity and what it declares about its license.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// The registry.
    pub registry: Registry,
    /// The package name.
    pub name: String,
    /// The version.
    pub version: String,
    /// The declared license string, as written; `None` when the package declares none.
    pub declared: Option<String>,
    /// The metadata field the declared string came from (`license`, `License-Expression`, …).
    pub declared_field: Option<&'static str>,
    /// A license file the metadata names (Cargo's `license-file`), relative to the package root.
    pub license_file: Option<String>,
}

impl Metadata {
    /// The package as ledgers name it: `crates.io/itoa@1.0.11`.
    pub fn package_id(&self) -> String {
        format!("{}/{}@{}", self.registry, self.name, self.version)
    }
}

/// A metadata file that cannot be read as its registry writes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct MetadataError {
    /// The metadata file.
    pub file: &'static str,
    /// What is wrong.
    pub message: String,
}

/// Reads a metadata file (`file` is one of [`METADATA_FILES`]).
///
/// # Errors
///
/// [`MetadataError`] when the file is not UTF-8, does not parse, or lacks the name or version.
pub fn parse_metadata(file: &str, bytes: &[u8]) -> Result<Metadata, MetadataError> {
    let Some(registry) = Registry::of_metadata_file(file) else {
        return Err(MetadataError { file: "metadata", message: format!("`{file}` is not a metadata file") });
    };
    let file = match registry {
        Registry::Crates => "Cargo.toml",
        Registry::Npm => "package.json",
        Registry::PyPi => "PKG-INFO",
    };
    let error = |message: String| MetadataError { file, message };
    let text = std::str::from_utf8(bytes).map_err(|e| error(format!("not UTF-8 (at byte {})", e.valid_up_to())))?;
    let metadata = match registry {
        Registry::Crates => cargo_toml(text),
        Registry::Npm => package_json(text),
        Registry::PyPi => pkg_info(text),
    }
    .map_err(error)?;
    check_identity(&metadata).map_err(error)?;
    Ok(metadata)
}

/// Names and versions that make one document id per file: no white space or control
/// characters, no `@` in a version, and a `/` only in an npm scope (`@scope/name`).
fn check_identity(m: &Metadata) -> Result<(), String> {
    let plain = |s: &str| !s.is_empty() && !s.chars().any(|c| c.is_whitespace() || c.is_control());
    let name_ok = plain(&m.name)
        && match m.registry {
            Registry::Npm => match m.name.split_once('/') {
                Some((scope, name)) => {
                    scope.len() > 1 && scope.starts_with('@') && !name.is_empty() && !name.contains(['/', '@'])
                }
                None => !m.name.contains('@'),
            },
            Registry::Crates | Registry::PyPi => !m.name.contains(['/', '@']),
        };
    if !name_ok {
        return Err(format!("the package name `{}` is not one a registry accepts", m.name.escape_debug()));
    }
    if !plain(&m.version) || m.version.contains(['/', '@']) {
        return Err(format!("the version `{}` is not one a registry accepts", m.version.escape_debug()));
    }
    Ok(())
}

/// A declared string that says nothing: empty, or a placeholder.
fn declared(value: &str) -> Option<String> {
    let value = value.trim();
    (!value.is_empty() && !value.eq_ignore_ascii_case("UNKNOWN")).then(|| value.to_owned())
}

fn cargo_toml(text: &str) -> Result<Metadata, String> {
    let doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        let at = e.span().map(|s| format!(" at byte {}", s.start)).unwrap_or_default();
        format!("does not parse as TOML{at}: {}", e.message())
    })?;
    let package = doc.get("package").and_then(toml_edit::Item::as_table_like).ok_or("has no `[package]` table")?;
    let string = |key: &str| -> Result<Option<String>, String> {
        match package.get(key) {
            None => Ok(None),
            Some(item) => item.as_str().map(|s| Some(s.to_owned())).ok_or_else(|| {
                format!("`package.{key}` is not a string (a manifest as `cargo package` writes it has one)")
            }),
        }
    };
    let name = string("name")?.ok_or("has no `package.name`")?;
    let version = string("version")?.ok_or("has no `package.version`")?;
    let license = string("license")?.as_deref().and_then(declared);
    Ok(Metadata {
        registry: Registry::Crates,
        name,
        version,
        declared_field: license.as_ref().map(|_| "license"),
        declared: license,
        license_file: string("license-file")?,
    })
}

fn package_json(text: &str) -> Result<Metadata, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("does not parse as JSON at line {}: {e}", e.line()))?;
    let field = |key: &str| value.get(key).and_then(serde_json::Value::as_str).map(str::to_owned);
    let name = field("name").ok_or("has no string `name`")?;
    let version = field("version").ok_or("has no string `version`")?;
    // `license` is a string; older packages wrote `{"type": "MIT", "url": …}`, or a
    // `licenses` list of those, which npm's documentation calls a choice between them.
    let type_of = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Object(o) => o.get("type").and_then(serde_json::Value::as_str).map(str::to_owned),
        _ => None,
    };
    let (declared_field, license) = match (value.get("license"), value.get("licenses")) {
        // npm's `SEE LICENSE IN <file>`: the terms are that file's.
        (Some(l), _) if type_of(l).is_some_and(|t| t.trim_start().starts_with("SEE LICENSE IN ")) => {
            let file = type_of(l).unwrap_or_default().trim_start()["SEE LICENSE IN ".len()..].trim().to_owned();
            return Ok(Metadata {
                registry: Registry::Npm,
                name,
                version,
                declared: None,
                declared_field: None,
                license_file: Some(file),
            });
        }
        (Some(l), _) => ("license", type_of(l).as_deref().and_then(declared)),
        (None, Some(serde_json::Value::Array(list))) => {
            let types: Vec<String> = list.iter().filter_map(type_of).filter_map(|t| declared(&t)).collect();
            let joined = match types.len() {
                0 => None,
                1 => types.into_iter().next(),
                _ => Some(types.iter().map(|t| format!("({t})")).collect::<Vec<_>>().join(" OR ")),
            };
            ("licenses", joined)
        }
        _ => ("license", None),
    };
    Ok(Metadata {
        registry: Registry::Npm,
        name,
        version,
        declared_field: license.as_ref().map(|_| declared_field),
        declared: license,
        license_file: None,
    })
}

/// Core metadata (PEP 566 and its predecessors): `Key: value` header lines up to the first
/// empty line, a line starting with white space continuing the one before.
fn pkg_info(text: &str) -> Result<Metadata, String> {
    let mut fields: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            if let Some((_, value)) = fields.last_mut() {
                value.push('\n');
                value.push_str(line.trim());
            }
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(format!("header line `{}` has no `:`", line.chars().take(60).collect::<String>()));
        };
        fields.push((key.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let first = |key: &str| fields.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let name = first("name").ok_or("has no `Name` header")?;
    let version = first("version").ok_or("has no `Version` header")?;
    let (declared_field, license) = match first("license-expression").as_deref().and_then(declared) {
        Some(e) => (Some("License-Expression"), Some(e)),
        None => match first("license").as_deref().and_then(declared) {
            Some(l) => (Some("License"), Some(l)),
            None => (None, None),
        },
    };
    Ok(Metadata { registry: Registry::PyPi, name, version, declared: license, declared_field, license_file: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_toml_as_cargo_package_writes_it() {
        let m = parse_metadata(
            "Cargo.toml",
            b"[package]\nedition = \"2018\"\nname = \"itoa\"\nversion = \"1.0.11\"\nlicense = \"MIT OR Apache-2.0\"\n",
        )
        .unwrap();
        assert_eq!(m.package_id(), "crates.io/itoa@1.0.11");
        assert_eq!((m.declared.as_deref(), m.declared_field), (Some("MIT OR Apache-2.0"), Some("license")));
        let m =
            parse_metadata("Cargo.toml", b"[package]\nname = \"f\"\nversion = \"0.1.1\"\nlicense-file = \"LICENSE\"\n")
                .unwrap();
        assert_eq!((m.declared, m.license_file.as_deref()), (None, Some("LICENSE")));
        let e = parse_metadata("Cargo.toml", b"[package]\nname = \"f\"\nversion.workspace = true\n").unwrap_err();
        assert!(e.to_string().starts_with("Cargo.toml: `package.version` is not a string"), "{e}");
        assert!(parse_metadata("Cargo.toml", b"[package\n").unwrap_err().message.contains("TOML"));
    }

    #[test]
    fn package_json_in_its_three_shapes() {
        let m =
            parse_metadata("package.json", br#"{"name":"pako","version":"2.1.0","license":"(MIT AND Zlib)"}"#).unwrap();
        assert_eq!((m.package_id().as_str(), m.declared.as_deref()), ("npm/pako@2.1.0", Some("(MIT AND Zlib)")));
        let m = parse_metadata("package.json", br#"{"name":"a","version":"1.0.0","license":{"type":"BSD"}}"#).unwrap();
        assert_eq!(m.declared.as_deref(), Some("BSD"));
        let m = parse_metadata(
            "package.json",
            br#"{"name":"a","version":"1.0.0","licenses":[{"type":"MIT"},{"type":"GPL-2.0"}]}"#,
        )
        .unwrap();
        assert_eq!((m.declared.as_deref(), m.declared_field), (Some("(MIT) OR (GPL-2.0)"), Some("licenses")));
        let m = parse_metadata("package.json", br#"{"name":"a","version":"1.0.0"}"#).unwrap();
        assert_eq!((m.declared, m.declared_field), (None, None));
        let m =
            parse_metadata("package.json", br#"{"name":"@s/a","version":"1.0.0","license":"SEE LICENSE IN TERMS.md"}"#)
                .unwrap();
        assert_eq!((m.package_id().as_str(), m.license_file.as_deref()), ("npm/@s/a@1.0.0", Some("TERMS.md")));
        for bad in
            [r#"{"name":"a/b","version":"1"}"#, r#"{"name":"a","version":"1/2"}"#, r#"{"name":"a b","version":"1"}"#]
        {
            assert!(parse_metadata("package.json", bad.as_bytes()).is_err(), "{bad}");
        }
        assert!(parse_metadata("PKG-INFO", b"Name: a@1/b\nVersion: 1\n").is_err());
    }

    #[test]
    fn pkg_info_headers_and_placeholders() {
        let text = "Metadata-Version: 2.1\nName: six\nVersion: 1.16.0\nLicense: MIT\nClassifier: License :: OSI Approved :: MIT License\n\nbody: not a header\n";
        let m = parse_metadata("PKG-INFO", text.as_bytes()).unwrap();
        assert_eq!((m.package_id().as_str(), m.declared.as_deref()), ("pypi/six@1.16.0", Some("MIT")));
        let text = "Name: x\nVersion: 1\nLicense: UNKNOWN\n";
        assert_eq!(parse_metadata("PKG-INFO", text.as_bytes()).unwrap().declared, None);
        let text = "Name: x\nVersion: 1\nLicense: Copyright (c) someone\n        All rights reserved.\nLicense-Expression: MIT\n";
        let m = parse_metadata("PKG-INFO", text.as_bytes()).unwrap();
        assert_eq!((m.declared.as_deref(), m.declared_field), (Some("MIT"), Some("License-Expression")));
        let text = "Name: x\nVersion: 1\nLicense: Copyright (c) someone\n        All rights reserved.\n";
        assert_eq!(
            parse_metadata("PKG-INFO", text.as_bytes()).unwrap().declared.as_deref(),
            Some("Copyright (c) someone\nAll rights reserved.")
        );
        assert!(parse_metadata("PKG-INFO", b"Version: 1\n").unwrap_err().message.contains("Name"));
    }
}
