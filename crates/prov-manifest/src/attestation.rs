//! [`AttestationRecord`]: a signed statement about a recorded run, kept beside the run.
//!
//! The signed bytes (a DSSE envelope, `prov-attest` writes and checks them) are a file object
//! of their own; the record only attaches them to the run and says what they claim to be.
//! Nothing in the record is trusted: whether the envelope is signed, by whom, and whether its
//! statement is about this run's outputs is decided by verifying the envelope with a key.

use prov_store::Digest;
use serde::{Deserialize, Serialize};

/// What an attestation's statement says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttestationRole {
    /// "I ran this lockfile and these outputs came out" (`prov attest`).
    Run,
    /// "I re-executed this lockfile and got these outputs" (`prov replay --attest`).
    Replay,
}

impl AttestationRole {
    /// The role as written in records and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Run => "run",
            Self::Replay => "replay",
        }
    }
}

/// A signed statement attached to a recorded run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttestationRecord {
    /// Always [`crate::SCHEMA_VERSION`].
    pub schema: u32,
    /// The DSSE envelope, byte for byte as signed and written.
    pub envelope: Digest,
    /// The run record the statement is about (for a replay: the recording it reproduced).
    pub run: Digest,
    /// What the statement says it is.
    pub role: AttestationRole,
    /// The key ids the envelope's signatures state, sorted: hints for finding keys, not
    /// proof of who signed.
    pub keyids: Vec<String>,
}

impl AttestationRecord {
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.keyids.windows(2).any(|w| w[0] >= w[1]) {
            return Err("`keyids` must be sorted and without duplicates".into());
        }
        Ok(())
    }
}
