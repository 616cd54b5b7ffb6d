//! The directories `prov` writes into in a project (`lockfiles/`, `manifests/<recipe>/`,
//! `verdicts/`) are reached without following a symbolic link: a committed symlink named
//! `manifests` must not make `prov run --commit` write, or delete, outside the repository.

use std::path::{Component, Path, PathBuf};

use crate::error::CommandError;

/// Returns `base/rel` as a directory inside `base`, creating what is missing. `rel` is taken
/// lexically (`a/../b` is `b`) and must stay inside `base`; every component that exists must
/// be a directory, not a symbolic link.
pub(crate) fn project_dir(base: &Path, rel: &Path) -> Result<PathBuf, CommandError> {
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(p) => parts.push(p),
            Component::CurDir => {}
            Component::ParentDir if parts.pop().is_some() => {}
            _ => {
                return Err(CommandError::input(format!(
                    "`{}` is outside `{}`: prov writes only inside the project",
                    rel.display(),
                    base.display()
                )));
            }
        }
    }
    let mut dir = base.to_path_buf();
    for part in parts {
        dir.push(part);
        match fs_err::symlink_metadata(&dir) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs_err::read_link(&dir).map(|t| t.display().to_string()).unwrap_or_default();
                return Err(CommandError::input(format!(
                    "`{}` is a symbolic link (to `{target}`): prov does not write through links out of the project",
                    dir.display()
                ))
                .with_hint("replace the link by a directory"));
            }
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(CommandError::input(format!("`{}` is not a directory", dir.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => fs_err::create_dir(&dir)?,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(dir)
}
