//! The in-toto Statement v1 (in-toto/attestation, `spec/v1`) and the SLSA Provenance v1
//! predicate (slsa.dev/provenance/v1), as JSON.
//!
//! Field names and shapes follow the specifications' protobuf definitions, which the
//! reference Python package (`in-toto-attestation`) parses strictly: the interoperability
//! tests feed every statement Provenant writes to it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `_type` of an in-toto Statement v1.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";

/// `predicateType` of SLSA Provenance v1.
pub const SLSA_PROVENANCE_V1: &str = "https://slsa.dev/provenance/v1";

/// An in-toto Statement v1: the subjects, and what the predicate says of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Statement {
    /// Always [`STATEMENT_TYPE`].
    #[serde(rename = "_type")]
    pub statement_type: String,
    /// The artifacts the predicate is about, each with at least one digest.
    pub subject: Vec<ResourceDescriptor>,
    /// What kind of predicate follows (a URI).
    #[serde(rename = "predicateType")]
    pub predicate_type: String,
    /// The predicate, any JSON object.
    pub predicate: Map<String, Value>,
}

/// A resource descriptor (in-toto attestation v1): an artifact named, located and digested.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceDescriptor {
    /// A name for the artifact.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Where it is identified.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uri: String,
    /// Algorithm -> lowercase hex digest.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub digest: BTreeMap<String, String>,
    /// The artifact's bytes, base64, for small ones.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub content: String,
    /// Where it can be downloaded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub download_location: String,
    /// Its media type.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub media_type: String,
    /// Anything else worth saying of it.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub annotations: Map<String, Value>,
}

/// Digest lengths in hex digits of the algorithms Provenant checks; others are carried as
/// given.
fn hex_len(algorithm: &str) -> Option<usize> {
    match algorithm {
        "sha256" | "blake3" | "sha512_256" | "sha3_256" => Some(64),
        "sha384" | "sha3_384" => Some(96),
        "sha512" | "sha3_512" => Some(128),
        _ => None,
    }
}

impl Statement {
    /// Parses a statement and checks what the in-toto specification requires of it: the type,
    /// at least one subject, a digest in every subject (lowercase hex of the algorithm's
    /// length, for the algorithms whose length is known), and a predicate type.
    pub fn parse(payload: &[u8]) -> Result<Self, String> {
        let statement: Self = serde_json::from_slice(payload).map_err(|e| format!("not an in-toto Statement: {e}"))?;
        if statement.statement_type != STATEMENT_TYPE {
            return Err(format!("`_type` is `{}`, not `{STATEMENT_TYPE}`", statement.statement_type));
        }
        if statement.subject.is_empty() {
            return Err("the statement has no subject".into());
        }
        for (i, s) in statement.subject.iter().enumerate() {
            if s.digest.is_empty() {
                return Err(format!("subject {i} (`{}`) has no digest", s.name));
            }
            for (alg, value) in &s.digest {
                let well_formed = value.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                    && hex_len(alg).is_none_or(|n| n == value.len());
                if !well_formed {
                    return Err(format!(
                        "subject `{}`: `{alg}` digest `{value}` is not lowercase hex of its length",
                        s.name
                    ));
                }
            }
        }
        if statement.predicate_type.is_empty() {
            return Err("the statement has no predicate type".into());
        }
        Ok(statement)
    }

    /// The statement as the bytes a DSSE envelope carries: compact JSON, fields in a fixed
    /// order, so that the same statement is always the same payload.
    pub fn to_payload(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a statement serialises")
    }
}

/// The SLSA Provenance v1 predicate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Provenance {
    /// What was asked for.
    pub build_definition: BuildDefinition,
    /// Who did it, and what else came out.
    pub run_details: RunDetails,
}

/// SLSA's `buildDefinition`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BuildDefinition {
    /// What kind of build: a URI naming the template of the parameters.
    pub build_type: String,
    /// The parameters the user controls.
    pub external_parameters: Map<String, Value>,
    /// The parameters the builder set.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub internal_parameters: Map<String, Value>,
    /// The artifacts the build read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resolved_dependencies: Vec<ResourceDescriptor>,
}

/// SLSA's `runDetails`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RunDetails {
    /// Who built.
    pub builder: Builder,
    /// About this execution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BuildMetadata>,
    /// What else came out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub byproducts: Vec<ResourceDescriptor>,
}

/// SLSA's `builder`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Builder {
    /// The builder's identity (a URI).
    pub id: String,
    /// Component -> version.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub version: BTreeMap<String, String>,
    /// What the builder ran on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub builder_dependencies: Vec<ResourceDescriptor>,
}

/// SLSA's `metadata`. Provenant sets no times: an attestation is bytes derived from the
/// run's records, and the same run signed by the same key gives the same attestation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BuildMetadata {
    /// Identifies this execution.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub invocation_id: String,
    /// When it started (RFC 3339).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub started_on: String,
    /// When it finished (RFC 3339).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub finished_on: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_must_have_typed_digested_subjects() {
        let good = br#"{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"a","digest":{"sha256":"0000000000000000000000000000000000000000000000000000000000000000"}}],"predicateType":"x","predicate":{}}"#;
        assert!(Statement::parse(good).is_ok());
        let text = std::str::from_utf8(good).unwrap();
        for (from, to, says) in [
            ("Statement/v1", "Statement/v0.1", "`_type`"),
            (
                "\"digest\":{\"sha256\":\"0000000000000000000000000000000000000000000000000000000000000000\"}",
                "\"digest\":{}",
                "no digest",
            ),
            ("\"sha256\":\"00", "\"sha256\":\"0", "lowercase hex"),
            ("\"sha256\":\"00", "\"sha256\":\"A0", "lowercase hex"),
            ("\"predicateType\":\"x\"", "\"predicateType\":\"\"", "predicate type"),
            ("\"name\":\"a\",", "\"name\":\"a\",\"extra\":1,", "unknown field"),
        ] {
            let e = Statement::parse(text.replace(from, to).as_bytes()).unwrap_err();
            assert!(e.contains(says), "{from} -> {to}: {e}");
        }
    }
}
