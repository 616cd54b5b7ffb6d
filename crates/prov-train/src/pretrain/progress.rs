//! Resuming a killed `pretrain` stage: the checkpoints it wrote so far, kept beside the
//! store.

use prov_exec::StageError;
use prov_store::{Digest, Store};

/// The checkpoints a `pretrain` stage has written so far, kept in the store directory
/// (`progress/<stage key hex>.json`, a JSON array of checkpoint record digests) so that a run
/// killed mid-training continues from its last checkpoint when run again, with the bytes of a
/// run that never stopped. The file is a hint, never trusted: each record is read verified
/// and must be the checkpoint this configuration writes at its step ([`super::train`] checks).
pub struct Progress {
    path: std::path::PathBuf,
}

/// Where a stage with this key keeps its progress.
pub fn progress_path(store: &Store, key: &Digest) -> std::path::PathBuf {
    store.root().join("progress").join(format!("{}.json", key.to_hex()))
}

impl Progress {
    /// The progress of the stage with key `key`.
    pub fn new(store: &Store, key: &Digest) -> Self {
        Self { path: progress_path(store, key) }
    }

    /// The checkpoints written so far whose records are in the store, in order.
    pub fn load(&self, store: &Store) -> Vec<Digest> {
        let Ok(bytes) = fs_err::read(&self.path) else { return Vec::new() };
        let digests: Vec<Digest> = serde_json::from_slice(&bytes).unwrap_or_default();
        // Only a prefix whose records are all in the store is usable.
        digests.into_iter().take_while(|d| store.contains(d)).collect()
    }

    /// Records the checkpoints written so far (atomically).
    pub fn save(&self, so_far: &[Digest]) -> Result<(), StageError> {
        let dir = self.path.parent().expect("the progress file has a directory");
        let bytes = serde_json::to_vec(so_far).expect("digests encode");
        prov_store::write_atomically(dir, &self.path, &bytes)?;
        Ok(())
    }

    /// Forgets the progress of a stage that finished.
    pub fn clear(&self) {
        // A leftover file only costs a verified resume that ends where the run ended.
        let _ = fs_err::remove_file(&self.path);
    }
}
