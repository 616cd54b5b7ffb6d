//! Files a stage's map tasks leave for its reduce step, in the stage's work directory
//! ([`crate::StageContext::work_dir`]): what a map task computes that is not an output (dedup's
//! sorted buckets and signatures of one shard) but that the reduce step, perhaps on another
//! machine, must read.
//!
//! A map task writes such a file with a [`WorkFile`], which hashes the bytes as they go and
//! gives the file its name by an atomic rename at the end: a task killed half-way leaves no
//! file under the name, and two runs of the same task (a requeued one) write the same bytes.
//! The task's result names each file with its [`WorkFileRef`] (name, size, digest). The
//! reduce step opens each through [`WorkFileRef::check`], which hashes the file again and
//! refuses one that is not what the task wrote ([`StageError::WorkFile`], an integrity
//! failure of that task: a run on a cluster drops the task's result, and the next run runs
//! the task again).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use prov_store::{Digest, Hasher};
use serde::{Deserialize, Serialize};

use crate::stage::StageError;

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A file of the work directory being written (see the module doc).
pub struct WorkFile {
    tmp: PathBuf,
    path: PathBuf,
    name: String,
    out: BufWriter<fs_err::File>,
    hasher: Hasher,
    size: u64,
}

impl WorkFile {
    /// Starts file `name` (one path component: letters, digits, `-`, `_` and `.`) in `dir`.
    ///
    /// # Errors
    ///
    /// A name that is not one plain component, and the file system's.
    pub fn create(dir: &Path, name: &str) -> Result<Self, StageError> {
        let plain = !name.is_empty()
            && !name.starts_with('.')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !plain {
            return Err(StageError::Worker(format!("`{name}` is not a plain work file name")));
        }
        let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.{}-{n}.tmp", std::process::id()));
        let out = BufWriter::with_capacity(64 * 1024, fs_err::File::create(&tmp)?);
        Ok(Self { path: dir.join(name), tmp, name: name.to_owned(), out, hasher: Hasher::new(), size: 0 })
    }

    /// Ends the file: flushes it, gives it its name, and returns what a result says of it.
    ///
    /// # Errors
    ///
    /// The file system's.
    pub fn finish(self) -> Result<WorkFileRef, StageError> {
        let Self { tmp, path, name, out, hasher, size } = self;
        out.into_inner().map_err(std::io::IntoInnerError::into_error)?;
        fs_err::rename(&tmp, &path)?;
        Ok(WorkFileRef { name, size, digest: hasher.finalize() })
    }
}

impl Write for WorkFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// A work file as a map task's result names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkFileRef {
    /// Its name in the work directory.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// BLAKE3 of its bytes.
    pub digest: Digest,
}

impl WorkFileRef {
    /// [`Self::check`], once the file is known to have the name the reduce step reads it by
    /// (`expected`): a result that names another task's file is a bad result of its task.
    ///
    /// # Errors
    ///
    /// [`StageError::MapResult`] for another name, and [`Self::check`]'s.
    pub fn check_named(&self, dir: &Path, task: usize, expected: &str) -> Result<PathBuf, StageError> {
        if self.name != expected {
            return Err(StageError::MapResult {
                task,
                message: format!("it names work file `{}` where `{expected}` belongs", self.name),
            });
        }
        self.check(dir, task)
    }

    /// The file's path in `dir`, once its bytes are checked to be what map task `task` wrote.
    ///
    /// # Errors
    ///
    /// [`StageError::WorkFile`] for a file that is missing, of another size or of other
    /// bytes, or a name that is not one plain component.
    pub fn check(&self, dir: &Path, task: usize) -> Result<PathBuf, StageError> {
        let fail = |message: String| StageError::WorkFile { task, name: self.name.clone(), message };
        if self.name.is_empty() || self.name.contains('/') || self.name.starts_with('.') {
            return Err(fail("not a plain file name".into()));
        }
        let path = dir.join(&self.name);
        let (digest, size) = crate::tree::hash_file(&path).map_err(|e| fail(e.to_string()))?;
        if size != self.size || digest != self.digest {
            return Err(fail(format!(
                "the task wrote {} bytes with digest {}, the file has {size} bytes with digest {digest}",
                self.size, self.digest
            )));
        }
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(dir: &Path, name: &str, bytes: &[u8]) -> WorkFileRef {
        let mut f = WorkFile::create(dir, name).unwrap();
        f.write_all(bytes).unwrap();
        f.finish().unwrap()
    }

    #[test]
    fn a_finished_file_has_its_name_and_the_digest_of_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let r = written(dir.path(), "sig-000003.bin", b"twelve bytes");
        assert_eq!(r, WorkFileRef { name: "sig-000003.bin".into(), size: 12, digest: Digest::of(b"twelve bytes") });
        assert_eq!(r.check(dir.path(), 3).unwrap(), dir.path().join("sig-000003.bin"));
        let names: Vec<_> = fs_err::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["sig-000003.bin"], "no temporary file is left");
    }

    #[test]
    fn an_unfinished_file_has_no_name() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = WorkFile::create(dir.path(), "run.bin").unwrap();
        f.write_all(b"half").unwrap();
        drop(f);
        assert!(!dir.path().join("run.bin").exists());
    }

    /// Every way a file can differ from what the task wrote is refused, as the task's
    /// integrity failure: other bytes of the same size, other bytes with the size and digest
    /// recomputed into a forged reference (not the task's, so the file still differs from
    /// the task's), a shorter file, a missing one, a name that leaves the directory.
    #[test]
    fn a_file_that_is_not_what_the_task_wrote_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let r = written(dir.path(), "ids-000001.bin", b"abcdef");
        let refused = |r: &WorkFileRef| match r.check(dir.path(), 1) {
            Err(e @ StageError::WorkFile { task: 1, .. }) => assert!(e.is_integrity_failure()),
            other => panic!("{other:?}"),
        };
        fs_err::write(dir.path().join("ids-000001.bin"), b"abcdeX").unwrap();
        refused(&r);
        fs_err::write(dir.path().join("ids-000001.bin"), b"abc").unwrap();
        refused(&r);
        fs_err::remove_file(dir.path().join("ids-000001.bin")).unwrap();
        refused(&r);
        for name in ["../ids-000001.bin", ".hidden", ""] {
            refused(&WorkFileRef { name: name.into(), ..r.clone() });
        }
        assert!(WorkFile::create(dir.path(), "../escape").is_err());
    }
}
