//! Directories as tree records: walked in sorted order, each file hashed (and optionally
//! stored), symlinks and non-UTF-8 names refused rather than silently skipped.

use std::io;
use std::path::Path;

use prov_manifest::{Record, RelPath, SCHEMA_VERSION, TreeEntry, TreeRecord};
use prov_store::{Digest, Hasher};

/// An error walking a directory.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// A filesystem operation failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// An entry cannot be represented.
    #[error("`{path}`: {reason}")]
    Unsupported {
        /// The entry.
        path: String,
        /// Why.
        reason: &'static str,
    },
    /// Storing failed.
    #[error(transparent)]
    Store(#[from] prov_store::StoreError),
    /// A source file with holes ([`refuse_sparse`]).
    #[error(
        "`{path}` is a sparse file: it reads as {len} bytes but has a hole from byte {hole}; the store would keep \
         every byte"
    )]
    Sparse {
        /// The file.
        path: String,
        /// Where its first hole starts.
        hole: u64,
        /// Its length.
        len: u64,
    },
}

/// Refuses a sparse source file: one with holes, ranges that read as zeros but take no disk
/// space. The store keeps every object densely, so a file of a few hundred bytes on disk,
/// shipped in a tarball made with `tar --sparse`, could pin gigabytes (ext4 allows 16 TiB)
/// that locking hashes and running copies into the store. `lseek(SEEK_HOLE)` finds the first
/// hole; every file has one at its end, and no other when it is dense. A file system that
/// cannot tell says there is none.
///
/// # Errors
///
/// [`TreeError::Sparse`] naming the file and where its first hole starts; I/O errors.
pub fn refuse_sparse(path: &Path) -> Result<(), TreeError> {
    let file = fs_err::File::open(path)?;
    let len = file.metadata()?.len();
    // An empty file has no byte for `SEEK_HOLE` to start from (it says `ENXIO`), and no hole.
    if len == 0 {
        return Ok(());
    }
    let hole = rustix::fs::seek(&file, rustix::fs::SeekFrom::Hole(0)).map_err(io::Error::from)?;
    if hole < len {
        return Err(TreeError::Sparse { path: path.display().to_string(), hole, len });
    }
    Ok(())
}

/// Hashes a file by streaming it.
pub fn hash_file(path: &Path) -> io::Result<(Digest, u64)> {
    let mut f = fs_err::File::open(path)?;
    let mut h = Hasher::new();
    let size = io::copy(&mut f, &mut h)?;
    Ok((h.finalize(), size))
}

/// Hashes (and may store) one file, returning its digest and size.
pub type FileVisitor<'a> = dyn FnMut(&Path) -> Result<(Digest, u64), TreeError> + 'a;

/// Builds the tree record of `dir`; `file` hashes (and may store) each file.
pub fn tree_record(dir: &Path, file: &mut FileVisitor<'_>) -> Result<TreeRecord, TreeError> {
    let mut entries = Vec::new();
    walk(dir, "", file, &mut entries)?;
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(TreeRecord { schema: SCHEMA_VERSION, entries })
}

fn walk(dir: &Path, prefix: &str, file: &mut FileVisitor<'_>, out: &mut Vec<TreeEntry>) -> Result<(), TreeError> {
    let mut children: Vec<_> = fs_err::read_dir(dir)?.collect::<Result<_, _>>()?;
    children.sort_by_key(fs_err::DirEntry::file_name);
    for child in children {
        let name = child.file_name();
        let Some(name) = name.to_str() else {
            return Err(TreeError::Unsupported {
                path: child.path().display().to_string(),
                reason: "file names must be valid UTF-8",
            });
        };
        let rel = if prefix.is_empty() { name.to_owned() } else { format!("{prefix}/{name}") };
        let meta = fs_err::symlink_metadata(child.path())?;
        if meta.file_type().is_symlink() {
            return Err(TreeError::Unsupported { path: rel, reason: "symbolic links are not supported in sources" });
        }
        if meta.is_dir() {
            walk(&child.path(), &rel, file, out)?;
        } else if meta.is_file() {
            use std::os::unix::fs::PermissionsExt;
            let (digest, size) = file(&child.path())?;
            let path: RelPath = rel
                .parse()
                .map_err(|_| TreeError::Unsupported { path: rel.clone(), reason: "not a valid relative path" })?;
            out.push(TreeEntry { path, digest, size, executable: meta.permissions().mode() & 0o111 != 0 });
        } else {
            return Err(TreeError::Unsupported {
                path: rel,
                reason: "only regular files and directories are supported",
            });
        }
    }
    Ok(())
}

/// Returns the canonical bytes and digest of a tree record.
pub fn tree_digest(tree: &TreeRecord) -> (Vec<u8>, Digest) {
    let bytes = Record::Tree(tree.clone()).to_bytes().expect("tree records hold no floats");
    let digest = Digest::of(&bytes);
    (bytes, digest)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// An empty file and a written one are dense; a file extended by `set_len` has a hole.
    /// (`SEEK_HOLE` from byte 0 of an empty file is `ENXIO`, which refused the main job's
    /// empty robots.txt files before this case was handled.)
    #[test]
    fn only_files_with_holes_are_sparse() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        fs_err::write(&empty, b"").unwrap();
        let dense = dir.path().join("dense");
        fs_err::write(&dense, vec![0u8; 1 << 20]).unwrap();
        let sparse = dir.path().join("sparse");
        fs_err::File::create(&sparse).unwrap().set_len(16 << 20).unwrap();
        assert!(refuse_sparse(&empty).is_ok() && refuse_sparse(&dense).is_ok());
        assert!(matches!(refuse_sparse(&sparse), Err(TreeError::Sparse { hole: 0, len, .. }) if len == 16 << 20));
    }
}
