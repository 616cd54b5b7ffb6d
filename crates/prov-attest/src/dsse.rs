//! DSSE, the Dead Simple Signing Envelope (secure-systems-lab/dsse, protocol v1): a payload,
//! its type, and signatures over the pre-authentication encoding (PAE) of both, so that a
//! signature can never be taken for one over another type of payload.

use serde::{Deserialize, Serialize};

use crate::keys::{PublicKey, SigningKey, b64, b64_decode};

/// The payload type of an in-toto Statement.
pub const IN_TOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// `PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`, lengths in ASCII
/// decimal, as the DSSE protocol defines it.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!("DSSEv1 {} {payload_type} {} ", payload_type.len(), payload.len()).into_bytes();
    out.extend_from_slice(payload);
    out
}

/// A DSSE envelope in its JSON form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// The payload, base64.
    pub payload: String,
    /// What the payload is (a media type).
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    /// The signatures.
    pub signatures: Vec<EnvelopeSignature>,
}

/// One signature of an envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvelopeSignature {
    /// Which key signed: a hint for finding the key, never trusted on its own.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub keyid: String,
    /// The signature, base64.
    pub sig: String,
}

/// Why an envelope is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// Not a DSSE envelope.
    #[error("not a DSSE envelope: {0}")]
    Shape(String),
    /// No signature verifies with any of the keys given.
    #[error("no signature verifies with the key{} given ({keys}); the envelope lists {listed}", if keys.contains(',') { "s" } else { "" })]
    NotSigned {
        /// The key ids tried.
        keys: String,
        /// The key ids its signatures state.
        listed: String,
    },
}

/// What a verified envelope says, and who said it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The payload type.
    pub payload_type: String,
    /// The payload bytes.
    pub payload: Vec<u8>,
    /// The keys, of those given, whose signature verifies, by key id, in the order given,
    /// each once.
    pub signers: Vec<String>,
}

impl Envelope {
    /// Signs `payload` with each key, in order.
    pub fn sign(payload_type: &str, payload: &[u8], keys: &[&SigningKey]) -> Self {
        let message = pae(payload_type, payload);
        let signatures =
            keys.iter().map(|k| EnvelopeSignature { keyid: k.public().keyid(), sig: b64(&k.sign(&message)) }).collect();
        Self { payload: b64(payload), payload_type: payload_type.to_owned(), signatures }
    }

    /// Parses an envelope's JSON.
    pub fn parse(bytes: &[u8]) -> Result<Self, EnvelopeError> {
        let envelope: Self = serde_json::from_slice(bytes).map_err(|e| EnvelopeError::Shape(e.to_string()))?;
        if envelope.signatures.is_empty() {
            return Err(EnvelopeError::Shape("it has no signature".into()));
        }
        if b64_decode(&envelope.payload).is_none() {
            return Err(EnvelopeError::Shape("`payload` is not base64".into()));
        }
        Ok(envelope)
    }

    /// The envelope as JSON with a final newline, as `prov attest` writes it.
    pub fn to_json(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("an envelope serialises");
        bytes.push(b'\n');
        bytes
    }

    /// The payload's bytes, unverified: only for saying what an envelope claims before its
    /// signature is checked.
    pub fn unverified_payload(&self) -> Option<Vec<u8>> {
        b64_decode(&self.payload)
    }

    /// Checks the signatures against `keys`: the envelope is accepted when at least one
    /// signature verifies with one of them. The signatures' key ids are only hints and are not
    /// used to decide (DSSE's rule): every signature is tried against every key.
    pub fn verify(&self, keys: &[PublicKey]) -> Result<Verified, EnvelopeError> {
        let payload =
            b64_decode(&self.payload).ok_or_else(|| EnvelopeError::Shape("`payload` is not base64".into()))?;
        let message = pae(&self.payload_type, &payload);
        let signatures: Vec<Vec<u8>> = self.signatures.iter().filter_map(|s| b64_decode(&s.sig)).collect();
        let mut signers: Vec<String> = Vec::new();
        for key in keys {
            // The same key given twice (as PEM and as an OpenSSH line, say) is one signer.
            let id = key.keyid();
            if !signers.contains(&id) && signatures.iter().any(|sig| key.verifies(&message, sig)) {
                signers.push(id);
            }
        }
        if signers.is_empty() {
            return Err(EnvelopeError::NotSigned {
                keys: keys.iter().map(|k| short(&k.keyid())).collect::<Vec<_>>().join(", "),
                listed: self.stated_keyids().iter().map(|k| short(k)).collect::<Vec<_>>().join(", "),
            });
        }
        Ok(Verified { payload_type: self.payload_type.clone(), payload, signers })
    }

    /// The key ids the signatures state (unverified).
    pub fn stated_keyids(&self) -> Vec<String> {
        self.signatures
            .iter()
            .map(|s| if s.keyid.is_empty() { "(no key id)".to_owned() } else { s.keyid.clone() })
            .collect()
    }
}

/// A key id shortened for messages.
pub fn short(keyid: &str) -> String {
    keyid.chars().take(16).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::KeyAlgorithm;

    /// The example of the DSSE protocol document (secure-systems-lab/dsse, protocol.md).
    #[test]
    fn pae_matches_the_specification_example() {
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
        );
    }

    #[test]
    fn an_envelope_verifies_with_its_key_and_not_with_another_or_after_a_change() {
        let key = SigningKey::generate(KeyAlgorithm::Ed25519);
        let other = SigningKey::generate(KeyAlgorithm::Ed25519);
        let envelope = Envelope::sign(IN_TOTO_PAYLOAD_TYPE, b"{}", &[&key]);
        let parsed = Envelope::parse(&envelope.to_json()).unwrap();
        let verified = parsed.verify(&[key.public()]).unwrap();
        assert_eq!(verified.payload, b"{}");
        assert_eq!(verified.signers, vec![key.public().keyid()]);
        assert!(matches!(parsed.verify(&[other.public()]), Err(EnvelopeError::NotSigned { .. })));
        // The type is signed too: the same payload under another type does not verify.
        let mut retyped = parsed.clone();
        retyped.payload_type = "application/json".into();
        assert!(retyped.verify(&[key.public()]).is_err());
        let mut changed = parsed;
        changed.payload = b64(b"{ }");
        assert!(changed.verify(&[key.public()]).is_err());
    }
}
