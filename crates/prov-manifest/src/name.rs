//! Validated names: stage, source and output names, and relative paths inside trees.

use std::fmt;
use std::str::FromStr;

/// Longest name accepted.
pub const MAX_NAME_LEN: usize = 64;

/// A stage, source or output name: 1 to 64 ASCII letters, digits, `_` or `-`, starting with a
/// letter or digit. Names appear in file names and in `stage.output` references, so nothing
/// else is allowed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(String);

/// A string that is not a valid [`Name`] or [`RelPath`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} `{value}`: {reason}")]
pub struct NameError {
    /// `name` or `path`.
    pub what: &'static str,
    /// The rejected input.
    pub value: String,
    /// Why.
    pub reason: &'static str,
}

impl Name {
    /// Returns the name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for Name {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason| NameError { what: "name", value: s.to_owned(), reason };
        if s.is_empty() {
            return Err(err("names cannot be empty"));
        }
        if s.len() > MAX_NAME_LEN {
            return Err(err("names are at most 64 characters"));
        }
        if !s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return Err(err("names use only ASCII letters, digits, `_` and `-`"));
        }
        if !s.as_bytes()[0].is_ascii_alphanumeric() {
            return Err(err("names start with a letter or digit"));
        }
        Ok(Self(s.to_owned()))
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for Name {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Name {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A relative path inside a tree: `/`-separated components, none empty, `.` or `..`, no NUL,
/// no leading `/`, valid UTF-8.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelPath(String);

impl RelPath {
    /// Returns the path.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for RelPath {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason| NameError { what: "path", value: s.to_owned(), reason };
        if s.is_empty() {
            return Err(err("paths cannot be empty"));
        }
        if s.contains('\0') {
            return Err(err("paths cannot contain NUL"));
        }
        if s.starts_with('/') {
            return Err(err("paths are relative"));
        }
        if s.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
            return Err(err("path components cannot be empty, `.` or `..`"));
        }
        Ok(Self(s.to_owned()))
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for RelPath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for RelPath {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_reject_what_cannot_go_in_paths_or_references() {
        for ok in ["a", "shard", "mini-apertus", "stage_2", "0x"] {
            assert!(ok.parse::<Name>().is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a.b", "-a", "_a", "a\0", "é", &"x".repeat(65)] {
            assert!(bad.parse::<Name>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn paths_stay_inside_their_tree() {
        for ok in ["a", "a/b.txt", "dir/.hidden"] {
            assert!(ok.parse::<RelPath>().is_ok(), "{ok}");
        }
        for bad in ["", "/a", "a//b", "a/./b", "../a", "a/..", "a/", "a\0b"] {
            assert!(bad.parse::<RelPath>().is_err(), "{bad:?}");
        }
    }
}
