//! Reading a checkpoint record and checking its tensors against the digests it lists, without
//! libtorch: what `prov` and replay forensics need of a checkpoint. Loading one into a model
//! is the worker's.

use prov_manifest::{CheckpointRecord, NamedTensors, Record};
use prov_store::{Digest, Store, StoreError};

/// Why a checkpoint cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The store could not give an object (missing, damaged).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The digest names a record of another kind, or no record.
    #[error("{digest} is not a checkpoint: {found}")]
    NotACheckpoint {
        /// The object.
        digest: Digest,
        /// What it is instead.
        found: String,
    },
    /// The checkpoint's `config.json` does not describe this model.
    #[error("the checkpoint's config.json ({digest}): {message}")]
    Config {
        /// The config object.
        digest: Digest,
        /// What is wrong.
        message: String,
    },
    /// A tensor is missing, extra, misshapen or not the bytes the record lists.
    #[error("the checkpoint's weights ({digest}): {message}")]
    Weights {
        /// The weights object.
        digest: Digest,
        /// What is wrong.
        message: String,
    },
    /// A tensor's bytes are not those the record lists: the weights object was replaced or
    /// the record edited.
    #[error("tensor `{name}` of {weights} has digest {actual}, the checkpoint record lists {expected}")]
    TensorDigest {
        /// The weights object.
        weights: Digest,
        /// The tensor.
        name: String,
        /// Its digest now.
        actual: Digest,
        /// The digest the record lists.
        expected: Digest,
    },
    /// The checkpoint records no tokenizer, which text in or out needs.
    #[error("checkpoint {0} records no tokenizer")]
    NoTokenizer(Digest),
    /// The tokenizer the checkpoint records is not a Hugging Face `tokenizer.json`.
    #[error("the checkpoint's tokenizer ({digest}) is not a tokenizer.json: {message}")]
    NotATokenizer {
        /// The tokenizer object.
        digest: Digest,
        /// What is wrong.
        message: String,
    },
}

impl CheckpointError {
    /// True when stored bytes do not match their digests (exit code 2), as opposed to a wrong
    /// or unusable argument.
    pub fn is_integrity_failure(&self) -> bool {
        match self {
            Self::Store(e) => e.is_integrity_failure(),
            Self::TensorDigest { .. } => true,
            _ => false,
        }
    }
}

/// Reads the checkpoint record `digest`.
pub fn read_record(store: &Store, digest: &Digest) -> Result<CheckpointRecord, CheckpointError> {
    let bytes = store.read(digest)?;
    match Record::from_bytes(&bytes) {
        Ok(Record::Checkpoint(c)) => Ok(c),
        Ok(other) => {
            Err(CheckpointError::NotACheckpoint { digest: *digest, found: format!("a {} record", other.kind_name()) })
        }
        Err(e) => Err(CheckpointError::NotACheckpoint { digest: *digest, found: format!("not a record ({e})") }),
    }
}

/// Every tensor the record lists is there with the listed digest, and no other.
pub fn check_tensors(record: &CheckpointRecord, weights: &NamedTensors) -> Result<(), CheckpointError> {
    let err = |message: String| CheckpointError::Weights { digest: record.weights, message };
    for (name, expected) in &record.tensors {
        let (_, values) = weights.0.get(name).ok_or_else(|| err(format!("tensor `{name}` is listed but missing")))?;
        let actual = Digest::of(&NamedTensors::le_bytes(values));
        if actual != *expected {
            return Err(CheckpointError::TensorDigest {
                weights: record.weights,
                name: name.clone(),
                actual,
                expected: *expected,
            });
        }
    }
    if let Some(extra) = weights.0.keys().find(|n| !record.tensors.contains_key(*n)) {
        return Err(err(format!("tensor `{extra}` is not listed in the record")));
    }
    Ok(())
}
