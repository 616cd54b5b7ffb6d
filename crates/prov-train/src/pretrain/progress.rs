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
    /// The store's temporary directory, where a new version of the file is written before it
    /// replaces the old: a process killed between the two leaves its half-written file where
    /// `prov gc` cleans, never beside the progress files.
    tmp: std::path::PathBuf,
}

/// Where a stage with this key keeps its progress.
pub fn progress_path(store: &Store, key: &Digest) -> std::path::PathBuf {
    store.root().join("progress").join(format!("{}.json", key.to_hex()))
}

impl Progress {
    /// The progress of the stage with key `key`.
    pub fn new(store: &Store, key: &Digest) -> Self {
        Self { path: progress_path(store, key), tmp: store.root().join("tmp") }
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
        fs_err::create_dir_all(dir).map_err(prov_store::StoreError::from)?;
        let bytes = serde_json::to_vec(so_far).expect("digests encode");
        prov_store::write_atomically(&self.tmp, &self.path, &bytes)?;
        Ok(())
    }

    /// Forgets the progress of a stage that finished.
    pub fn clear(&self) {
        // A leftover file only costs a verified resume that ends where the run ended.
        let _ = fs_err::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A save that stops between writing the new file and moving it into place (here: the
    /// move fails) leaves nothing in the progress directory but what was there; the
    /// half-done file is in the store's temporary directory, which `prov gc` empties.
    #[test]
    fn an_interrupted_save_leaves_no_file_beside_the_progress_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(&dir.path().join(".prov")).unwrap();
        let key = prov_store::Digest::of(b"stage");
        let progress = Progress::new(&store, &key);
        progress.save(&[prov_store::Digest::of(b"a")]).unwrap();
        assert_eq!(progress.load(&store), Vec::<Digest>::new(), "no record of `a` is in the store");
        let listing = |d: &std::path::Path| -> Vec<String> {
            let mut v: Vec<String> =
                fs_err::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
            v.sort();
            v
        };
        let progress_dir = store.root().join("progress");
        assert_eq!(listing(&progress_dir), [format!("{}.json", key.to_hex())]);
        // Block the move: a directory where the file goes.
        let other = prov_store::Digest::of(b"other stage");
        fs_err::create_dir_all(progress_path(&store, &other)).unwrap();
        assert!(Progress::new(&store, &other).save(&[]).is_err());
        assert_eq!(listing(&progress_dir), [format!("{}.json", key.to_hex()), format!("{}.json", other.to_hex())]);
        assert_eq!(store.clean_tmp().unwrap(), 1, "the half-done file is where gc cleans");
    }
}
