//! The document files of a source input: what a stage that reads documents from a pinned
//! source (a file or a directory) is given.

use std::path::PathBuf;

use prov_dataset::{InputFormat, SourceShapeError};
use prov_exec::StageError;
use prov_store::{Digest, Store};

/// The document files of a source given as input `input` (`what` names it in messages: "a
/// benchmark source"), in path order: (object path, format, display name). In a directory,
/// the license files beside the data (`LICENSE`, `COPYING`, …, see
/// [`prov_license::detect::is_license_file`]) are not documents and are passed over; the license
/// review reads them.
pub fn source_files(
    store: &Store,
    source: &Digest,
    input: &str,
    what: &str,
) -> Result<Vec<(PathBuf, InputFormat, String)>, StageError> {
    let listed = prov_dataset::source_files(store, source, &prov_license::detect::is_license_file)?;
    let files = listed.map_err(|e| StageError::Input {
        input: input.into(),
        message: match e {
            SourceShapeError::NotDocuments(_) => format!("{e}; {what} holds only those"),
            _ => e.to_string(),
        },
    })?;
    Ok(files.into_iter().map(|f| (f.path, f.format, f.display)).collect())
}
