//! Reading a file the user named: a recipe, a policy, a proof, a model, a robots.txt.
//!
//! A path on the command line or in a recipe may name something that is not a file of
//! bounded size: `/dev/zero` (read until memory runs out), a FIFO (the read waits forever),
//! a directory, or a symbolic link to one of those. [`read_named_file`] looks at what the path
//! names before opening it, refuses anything but a regular file, and reads at most a stated
//! number of bytes.

use std::io::{self, Read as _};
use std::path::Path;

/// The most a YAML document the user writes (a recipe, an audit or license policy) may hold:
/// 16 MiB, far above any real one, far below what a mistaken path could feed the parser.
pub const MAX_DOCUMENT_BYTES: u64 = 16 << 20;

/// Reads the file at `path` (symbolic links followed) when it is a regular file of at most
/// `max_bytes`; `what` names it in errors ("the policy", "the proof").
///
/// # Errors
///
/// An [`io::ErrorKind::InvalidInput`] error naming the path when it is not a regular file or
/// is larger than `max_bytes` (also when it grew past it while being read); the error of
/// reading it otherwise.
pub fn read_named_file(path: &Path, max_bytes: u64, what: &str) -> io::Result<Vec<u8>> {
    let refuse =
        |why: String| io::Error::new(io::ErrorKind::InvalidInput, format!("{what} `{}` {why}", path.display()));
    // Worded as opening it would be: a missing file reads as it always has.
    let meta = std::fs::metadata(path)
        .map_err(|e| io::Error::new(e.kind(), format!("failed to open file `{}`: {e}", path.display())))?;
    if !meta.is_file() {
        let kind = if meta.is_dir() { "a directory" } else { "a device, FIFO or socket" };
        return Err(refuse(format!("is {kind}, not a regular file")));
    }
    if meta.len() > max_bytes {
        return Err(refuse(format!("is {} bytes; at most {max_bytes} are read", meta.len())));
    }
    // Opened without blocking, checked again on the open file: the path may have been
    // swapped for a FIFO since it was looked at, and opening a FIFO waits for a writer.
    // (Reads of a regular file do not heed the flag.)
    let file = open_nonblocking(path, false)?;
    if !file.metadata()?.is_file() {
        return Err(refuse("is not a regular file".to_owned()));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max_bytes + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(refuse(format!("grew past {max_bytes} bytes while it was read")));
    }
    Ok(bytes)
}

/// Opens `path` for reading with `O_NONBLOCK` (and `O_NOFOLLOW` when `no_follow`), so that a
/// FIFO does not make the open wait for a writer.
///
/// # Errors
///
/// The error of opening it.
pub fn open_nonblocking(path: &Path, no_follow: bool) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut flags = rustix::fs::OFlags::NONBLOCK;
    if no_follow {
        flags |= rustix::fs::OFlags::NOFOLLOW;
    }
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(i32::try_from(flags.bits()).unwrap_or(0))
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("failed to open file `{}`: {e}", path.display())))
}

/// [`read_named_file`], as UTF-8 text.
///
/// # Errors
///
/// As [`read_named_file`], and an [`io::ErrorKind::InvalidData`] error when the bytes are
/// not UTF-8.
pub fn read_named_text(path: &Path, max_bytes: u64, what: &str) -> io::Result<String> {
    String::from_utf8(read_named_file(path, max_bytes, what)?).map_err(|_| {
        io::Error::new(io::ErrorKind::InvalidData, format!("{what} `{}` is not UTF-8 text", path.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_of_bounded_size_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("policy.yaml");
        fs_err::write(&file, "schema: 1\n").unwrap();
        assert_eq!(read_named_text(&file, 100, "the policy").unwrap(), "schema: 1\n");
        let err = read_named_file(&file, 4, "the policy").unwrap_err();
        assert!(err.to_string().contains("at most 4 are read"), "{err}");
        let fifo = dir.path().join("fifo.yaml");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        // A FIFO is refused before it is opened: opening it would wait for a writer.
        for (path, kind) in [(Path::new("/dev/zero"), "device"), (&fifo, "FIFO"), (dir.path(), "directory")] {
            let err = read_named_file(path, 1 << 20, "the policy").unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
            assert!(err.to_string().contains(kind) && err.to_string().contains("the policy"), "{err}");
        }
        let link = dir.path().join("zero.yaml");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(read_named_file(&link, 1 << 20, "the recipe").unwrap_err().to_string().contains("device"));
        fs_err::write(&file, [0xFF, 0xFE]).unwrap();
        assert_eq!(read_named_text(&file, 100, "the policy").unwrap_err().kind(), io::ErrorKind::InvalidData);
    }
}
