//! Signed evidence: who stands behind a run, a replay, a verdict or a model.
//!
//! `prov-attest` owns the formats in which Provenant's evidence leaves the store signed, so
//! that auditors and downstream users check it with the tools they already have:
//!
//! - keys ([`SigningKey`], [`PublicKey`]): Ed25519 and ECDSA P-256, read from PKCS#8, SEC1,
//!   SPKI PEM and OpenSSH files, named by the key id `securesystemslib` gives them;
//! - DSSE envelopes ([`Envelope`]): the signature over the pre-authentication encoding of a
//!   payload and its type;
//! - in-toto Statements v1 with SLSA Provenance v1 predicates ([`Statement`], [`Provenance`]):
//!   what a run or a replay attestation says, built from the store's records
//!   ([`run_statement`], [`replay_statement`]) and checked against a run
//!   ([`check_about_run`]);
//! - attaching a signed envelope to a run in the store ([`attach`]), as a file object and an
//!   [`prov_manifest::AttestationRecord`];
//! - reviewer verdicts signed beside their files ([`sign_verdict`],
//!   [`check_verdict_signature`]);
//! - model folders signed in the `OpenSSF` model signing format ([`sign_model_folder`],
//!   [`verify_model_signature`]): a Sigstore bundle verified offline with a public key.
//!
//! It trusts nothing it reads: a stored attestation says who claims to have signed it, and
//! only [`verify_statement`] with a key says who did.
//!
//! # Example
//!
//! ```
//! use prov_attest::{Envelope, KeyAlgorithm, SigningKey, pae};
//! assert_eq!(pae("http://example.com/HelloWorld", b"hello world"),
//!            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world");
//! let key = SigningKey::generate(KeyAlgorithm::Ed25519);
//! let envelope = Envelope::sign("text/plain", b"hello", &[&key]);
//! assert_eq!(envelope.verify(&[key.public()])?.payload, b"hello");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

mod dsse;
mod keys;
mod model_signing;
mod openssh;
mod provenance;
mod statement;
mod verdict;

pub use dsse::{Envelope, EnvelopeError, EnvelopeSignature, IN_TOTO_PAYLOAD_TYPE, Verified, pae, short as short_keyid};
pub use keys::{KeyAlgorithm, KeyError, PublicKey, SigningKey, public_path_of};
pub use model_signing::{
    FolderFile, HashedFile, MODEL_SIGNATURE_PREDICATE, ModelSigningError, ModelVerified, SIGNATURE_FILE,
    SIGSTORE_BUNDLE_MEDIA_TYPE, hash_folder, is_sigstore_bundle, sign_model_folder, verify_model_signature,
};
use prov_manifest::{AttestationRecord, AttestationRole, Record, SCHEMA_VERSION, StoredError, put_record};
use prov_store::{Digest, ObjectKind, Store};
pub use provenance::{
    BUILDER_ID, ProvenanceError, RECORD_MEDIA_TYPE, REPLAY_BUILD_TYPE, RUN_BUILD_TYPE, RunProvenance, check_about_run,
    check_about_run_with, read_provenance, replay_statement, run_statement, run_subjects,
};
pub use statement::{
    BuildDefinition, BuildMetadata, Builder, Provenance, ResourceDescriptor, RunDetails, SLSA_PROVENANCE_V1,
    STATEMENT_TYPE, Statement,
};
pub use verdict::{VERDICT_PREDICATE, check_verdict_signature, sign_verdict, verdict_signature_path};

/// An error of attesting or verifying.
#[derive(Debug, thiserror::Error)]
pub enum AttestError {
    /// A key file cannot be used.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The envelope is malformed or not signed by the keys given.
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
    /// The signed payload is not an in-toto Statement.
    #[error("the signed payload is not an in-toto Statement v1: {0}")]
    Statement(String),
    /// The statement cannot be made, or is not about the run.
    #[error(transparent)]
    Provenance(#[from] ProvenanceError),
    /// A record cannot be read or written.
    #[error(transparent)]
    Stored(#[from] StoredError),
    /// A signed statement is about other bytes than the ones it is checked against.
    #[error("{0}")]
    OtherBytes(String),
    /// A model folder cannot be signed, or does not verify.
    #[error(transparent)]
    Model(#[from] ModelSigningError),
}

impl AttestError {
    /// True when the evidence is forged or damaged: a signature that does not verify, a
    /// statement about other outputs, stored bytes that do not match their digest.
    pub fn is_integrity_failure(&self) -> bool {
        match self {
            Self::Provenance(e) => e.is_integrity_failure(),
            Self::Stored(e) => e.is_integrity_failure(),
            Self::Envelope(EnvelopeError::NotSigned { .. })
            | Self::OtherBytes(_)
            | Self::Model(
                ModelSigningError::Mismatch(_) | ModelSigningError::Envelope(EnvelopeError::NotSigned { .. }),
            ) => true,
            Self::Model(_) | Self::Key(_) | Self::Envelope(EnvelopeError::Shape(_)) | Self::Statement(_) => false,
        }
    }

    /// What to do about it, when there is something to say.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            Self::Key(e) => e.hint(),
            Self::Model(ModelSigningError::KeyAlgorithm(_)) => {
                Some("make an ECDSA P-256 key with `prov attest --generate-key FILE --key-type ecdsa-p256`")
            }
            Self::Envelope(EnvelopeError::NotSigned { .. })
            | Self::OtherBytes(_)
            | Self::Model(ModelSigningError::Envelope(EnvelopeError::NotSigned { .. })) => Some(
                "the envelope was changed after signing, or signed by another key: check that the key is the signer's",
            ),
            _ => None,
        }
    }
}

/// Signs a statement: a DSSE envelope of type [`IN_TOTO_PAYLOAD_TYPE`].
pub fn sign_statement(statement: &Statement, key: &SigningKey) -> Envelope {
    Envelope::sign(IN_TOTO_PAYLOAD_TYPE, &statement.to_payload(), &[key])
}

/// Checks an envelope's signatures with `keys` first, and only then reads its payload as an
/// in-toto Statement. Gives the statement and the key ids, of those given, that signed it.
pub fn verify_statement(envelope: &Envelope, keys: &[PublicKey]) -> Result<(Statement, Vec<String>), AttestError> {
    let verified = envelope.verify(keys)?;
    if verified.payload_type != IN_TOTO_PAYLOAD_TYPE {
        return Err(AttestError::Statement(format!(
            "the payload type is `{}`, not `{IN_TOTO_PAYLOAD_TYPE}`",
            verified.payload_type
        )));
    }
    let statement = Statement::parse(&verified.payload).map_err(AttestError::Statement)?;
    Ok((statement, verified.signers))
}

/// Keeps a signed envelope with the run it is about: the bytes as given, as a file object, and
/// an attestation record naming it, the run and the role. Attaching the same bytes twice
/// gives the same record.
pub fn attach(
    store: &Store,
    bytes: &[u8],
    envelope: &Envelope,
    run: Digest,
    role: AttestationRole,
) -> Result<Digest, StoredError> {
    let blob = store.put_bytes(ObjectKind::Blob, bytes)?;
    let mut keyids: Vec<String> = envelope.signatures.iter().map(|s| s.keyid.clone()).collect();
    keyids.sort();
    keyids.dedup();
    let record = AttestationRecord { schema: SCHEMA_VERSION, envelope: blob, run, role, keyids };
    put_record(store, &Record::Attestation(record))
}
