//! `source`: imports a pinned file or directory into the store.

use prov_manifest::{
    Content, Determinism, LockedSource, OutputRef, OutputType, Record, SCHEMA_VERSION, SourceRecord, put_record,
};
use prov_store::ObjectKind;
use serde_json::Value;

use crate::stage::{ConfigError, InputSpec, Stage, StageContext, StageError, StageOutput, parse_params};
use crate::tree::{TreeError, tree_record};

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
        let path = cx.project_root.join(&locked.path);
        let (actual, files) = match &locked.content {
            Content::File { .. } => {
                let (digest, _) = cx.store.put_file(ObjectKind::Blob, &path)?;
                (digest, 1)
            }
            Content::Tree { .. } => {
                let store = cx.store;
                let tree =
                    tree_record(&path, &mut |p| Ok(store.put_file(ObjectKind::Blob, p)?)).map_err(|e| match e {
                        TreeError::Io(e) => StageError::Io(e),
                        TreeError::Store(e) => StageError::Store(e),
                        other @ TreeError::Unsupported { .. } => {
                            StageError::Input { input: locked.name.to_string(), message: other.to_string() }
                        }
                    })?;
                let files = tree.entries.len() as u64;
                (put_record(cx.store, &Record::Tree(tree))?, files)
            }
        };
        let expected = locked.content.digest();
        if actual != expected {
            return Err(StageError::SourceChanged { path: locked.path.clone(), expected, actual });
        }
        let record = SourceRecord {
            schema: SCHEMA_VERSION,
            name: locked.name,
            origin: locked.path,
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
