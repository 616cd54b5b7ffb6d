//! Signed reviewer verdicts: a license reviewer's verdict file, signed so that who decided is
//! shown by a key rather than by what `git config user.name` says.
//!
//! The signature of `licenses/MIT.json` is `licenses/MIT.json.sig` beside it: a DSSE envelope
//! holding an in-toto Statement whose one subject is the verdict file (its path in the verdicts
//! directory, with the BLAKE3 and SHA-256 of its bytes) and whose predicate
//! ([`VERDICT_PREDICATE`]) is the verdict record itself.

use prov_manifest::{Record, VerdictRecord};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use crate::dsse::Envelope;
use crate::keys::{PublicKey, SigningKey};
use crate::statement::{ResourceDescriptor, STATEMENT_TYPE, Statement};
use crate::{AttestError, sign_statement, verify_statement};

/// The predicate type of a signed reviewer verdict.
pub const VERDICT_PREDICATE: &str = "https://provenant.dev/attestation/license-verdict/v1";

/// The file holding the signature of the verdict file at `path`.
pub fn verdict_signature_path(path: &str) -> String {
    format!("{path}.sig")
}

/// Signs a verdict file: `path` is its place in the verdicts directory, `bytes` its content
/// (the canonical verdict record). Gives the signature file's bytes.
pub fn sign_verdict(path: &str, bytes: &[u8], verdict: &VerdictRecord, key: &SigningKey) -> Vec<u8> {
    let digest = [
        ("blake3".to_owned(), blake3::hash(bytes).to_hex().to_string()),
        ("sha256".to_owned(), hex::encode(Sha256::digest(bytes))),
    ];
    let Value::Object(record) = serde_json::to_value(Record::Verdict(verdict.clone())).expect("a verdict serialises")
    else {
        unreachable!("a record is a JSON object")
    };
    let mut predicate = Map::new();
    predicate.insert("verdict".into(), Value::Object(record));
    let statement = Statement {
        statement_type: STATEMENT_TYPE.into(),
        subject: vec![ResourceDescriptor {
            name: path.to_owned(),
            digest: digest.into(),
            ..ResourceDescriptor::default()
        }],
        predicate_type: VERDICT_PREDICATE.into(),
        predicate,
    };
    sign_statement(&statement, key).to_json()
}

/// Checks the signature of the verdict file at `path` with content `bytes` against `keys`:
/// the envelope verifies with one of them, and its statement is a verdict statement about
/// exactly these bytes at this path. Gives the key ids that signed.
pub fn check_verdict_signature(
    path: &str,
    bytes: &[u8],
    signature: &[u8],
    keys: &[PublicKey],
) -> Result<Vec<String>, AttestError> {
    let envelope = Envelope::parse(signature)?;
    let (statement, signers) = verify_statement(&envelope, keys)?;
    let wrong = |why: String| AttestError::Statement(format!("not the signature of verdict `{path}`: {why}"));
    if statement.predicate_type != VERDICT_PREDICATE {
        return Err(wrong(format!("predicate type `{}`", statement.predicate_type)));
    }
    let [subject] = statement.subject.as_slice() else {
        return Err(wrong(format!("{} subjects", statement.subject.len())));
    };
    if subject.name != path {
        return Err(wrong(format!("it signs `{}`", subject.name)));
    }
    let blake3 = blake3::hash(bytes).to_hex().to_string();
    if subject.digest.get("blake3") != Some(&blake3)
        || subject.digest.get("sha256") != Some(&hex::encode(Sha256::digest(bytes)))
    {
        return Err(AttestError::OtherBytes(format!(
            "the signature of verdict `{path}` signs other bytes: the verdict was changed after it was signed"
        )));
    }
    Ok(signers)
}
