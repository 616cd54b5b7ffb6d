//! `source`: imports a pinned file or directory into the store.

use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};

use prov_manifest::{
    Content, Determinism, LockedSource, OutputRef, OutputType, Record, RelPath, SCHEMA_VERSION, SourceRecord,
    put_record,
};
use prov_store::ObjectKind;
use serde_json::Value;

use crate::stage::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use crate::tree::{TreeError, tree_digest, tree_record};

/// Why a source path cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SourcePathError {
    /// The path cannot be resolved or read.
    #[error("cannot read source `{path}`: {source}")]
    Io {
        /// The path, relative to the project root.
        path: String,
        /// What the file system said.
        source: std::io::Error,
    },
    /// A symbolic link on the way leads outside the project root.
    #[error("source `{path}` leads outside the project (to `{resolved}`)")]
    Outside {
        /// The path, relative to the project root.
        path: String,
        /// Where it leads.
        resolved: String,
    },
    /// Not a regular file or a directory (a FIFO or a device would block or never end).
    #[error("source `{path}` is {what}, not a regular file or a directory")]
    NotFileOrDirectory {
        /// The path, relative to the project root.
        path: String,
        /// What it is.
        what: &'static str,
    },
}

/// Resolves a source path inside the project root. Symbolic links are followed, and where they
/// lead must be inside the root too; the path must name a regular file or a directory.
/// Returns the resolved path and whether it is a directory.
pub fn confine_source(project_root: &Path, path: &RelPath) -> Result<(PathBuf, bool), SourcePathError> {
    let io = |source| SourcePathError::Io { path: path.to_string(), source };
    let root = fs_err::canonicalize(project_root).map_err(io)?;
    let resolved = fs_err::canonicalize(project_root.join(path.as_str())).map_err(io)?;
    if !resolved.starts_with(&root) {
        return Err(SourcePathError::Outside { path: path.to_string(), resolved: resolved.display().to_string() });
    }
    let meta = fs_err::metadata(&resolved).map_err(io)?;
    let kind = meta.file_type();
    if kind.is_dir() || kind.is_file() {
        return Ok((resolved, kind.is_dir()));
    }
    let what = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "neither"
    };
    Err(SourcePathError::NotFileOrDirectory { path: path.to_string(), what })
}

/// Imports a pinned source, checking its bytes against the pin.
pub struct SourceStage;

impl Stage for SourceStage {
    fn kind(&self) -> &'static str {
        "source"
    }
    fn version(&self) -> u32 {
        1
    }
    fn summary(&self) -> &'static str {
        "import a pinned file or directory (as a Merkle tree of its files) into the store"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        // The config of a source stage is its lockfile entry, made by the locker.
        let _: LockedSource = parse_params(params)?;
        Ok(params.clone())
    }
    fn determinism(&self, _config: &Value) -> Determinism {
        Determinism::Portable
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Named(vec![])
    }
    fn outputs(&self, _config: &Value) -> Vec<(String, OutputType)> {
        vec![("source".into(), OutputType::Source)]
    }
    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        let locked: LockedSource = parse_params(cx.config).map_err(StageError::Config)?;
        let input_error = |message: String| StageError::Input { input: locked.name.to_string(), message };
        let (path, is_dir) = confine_source(cx.project_root, &locked.path).map_err(|e| input_error(e.to_string()))?;
        let expected = locked.content.digest();
        let changed = |actual| StageError::SourceChanged { path: locked.path.to_string(), expected, actual };
        // Each file is hashed while it streams to the store's tmp/, and enters the store only
        // once the whole source is known to be the pinned one.
        let files = match (&locked.content, is_dir) {
            (Content::File { size, .. }, false) => {
                // Another size is other bytes: hash them in place rather than copying a file
                // that may be far larger than the pinned one into tmp/.
                if fs_err::metadata(&path)?.len() != *size {
                    let (actual, len) = crate::tree::hash_file(&path)?;
                    if actual == expected {
                        // The pinned bytes, with another size: the lockfile contradicts itself.
                        return Err(input_error(format!(
                            "the lockfile pins `{expected}` as {size} bytes, but those bytes are {len}: its size was \
                             edited"
                        )));
                    }
                    return Err(changed(actual));
                }
                crate::tree::refuse_sparse(&path).map_err(|e| input_error(e.to_string()))?;
                let sealed = cx.store.seal_file(ObjectKind::Blob, &path)?;
                if sealed.digest() != expected {
                    return Err(changed(sealed.digest()));
                }
                sealed.commit()?;
                1
            }
            (Content::Tree { .. }, true) => {
                let store = cx.store;
                let mut sealed = Vec::new();
                let tree = tree_record(&path, &mut |p| {
                    crate::tree::refuse_sparse(p)?;
                    let object = store.seal_file(ObjectKind::Blob, p)?;
                    let pinned = (object.digest(), object.size());
                    sealed.push(object);
                    Ok(pinned)
                })
                .map_err(|e| match e {
                    TreeError::Io(e) => StageError::Io(e),
                    TreeError::Store(e) => StageError::Store(e),
                    other @ (TreeError::Unsupported { .. } | TreeError::Sparse { .. }) => {
                        input_error(other.to_string())
                    }
                })?;
                let (_, actual) = tree_digest(&tree);
                if actual != expected {
                    return Err(changed(actual));
                }
                for object in sealed {
                    object.commit()?;
                }
                put_record(cx.store, &Record::Tree(tree.clone()))?;
                tree.entries.len() as u64
            }
            (_, is_dir) => {
                let (now, then) = if is_dir { ("a directory", "a file") } else { ("a file", "a directory") };
                return Err(input_error(format!("`{}` is {now} but was {then} when it was locked", locked.path)));
            }
        };
        let record = SourceRecord {
            schema: SCHEMA_VERSION,
            name: locked.name,
            origin: locked.path.to_string(),
            content: locked.content.clone(),
            license: locked.license,
            retrieved: locked.retrieved,
        };
        let digest = put_record(cx.store, &Record::Source(record))?;
        let mut out = StageOutput::default();
        out.outputs.insert("source".into(), OutputRef { output_type: OutputType::Source, digest });
        out.stats.insert("files".into(), Value::from(files));
        out.stats.insert("bytes".into(), Value::from(locked.content.size()));
        Ok(out)
    }
}
