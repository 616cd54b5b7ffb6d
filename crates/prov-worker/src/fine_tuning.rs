//! What the post-training runs share: loading the checkpoint a stage starts from (every tensor
//! checked against its record), the chat template of the tokenizer it records, and writing the
//! checkpoint it ends with.

use std::collections::BTreeMap;

use prov_exec::{StageContext, StageError, StageOutput};
use prov_manifest::{OutputRef, OutputType, Record, encode_value, put_record};
use prov_store::{Digest, ObjectKind, Store};
use prov_tokenizer::chat::ChatTemplate;
use prov_train::checkpoint::CheckpointError;
use serde_json::{Value, json};
use tokenizers::Tokenizer;

use crate::checkpoint::{CheckpointWriter, LoadedCheckpoint};
use crate::trainer::Trainer;

/// Loads the checkpoint of input `input`; a damaged checkpoint is an integrity failure.
pub fn load_checkpoint(cx: &StageContext<'_>, input: &str) -> Result<LoadedCheckpoint, StageError> {
    let digest = cx.input(input)?.digest;
    crate::checkpoint::load(cx.store, &digest).map_err(|e| checkpoint_error(input, e))
}

/// A checkpoint error as a stage error: the store's own errors keep their kind (and exit code).
pub fn checkpoint_error(input: &str, e: CheckpointError) -> StageError {
    match e {
        CheckpointError::Store(e) => StageError::Store(e),
        other => StageError::Input { input: input.to_owned(), message: other.to_string() },
    }
}

/// The tokenizer checkpoint `checkpoint` (input `input`) records, and its chat template.
pub fn chat_template(
    store: &Store,
    input: &str,
    checkpoint: &LoadedCheckpoint,
) -> Result<(Digest, Tokenizer, ChatTemplate), StageError> {
    let bad = |message: String| StageError::Input { input: input.to_owned(), message };
    let digest = checkpoint.record.tokenizer.ok_or_else(|| bad("the checkpoint records no tokenizer".into()))?;
    let tokenizer = prov_tokenizer::load_tokenizer(store, &digest)?;
    let template = ChatTemplate::new(tokenizer.clone()).map_err(|e| bad(e.to_string()))?;
    Ok((digest, tokenizer, template))
}

/// Stores `trainer`'s final state as a checkpoint (with `hf_config` as its `config.json`) and
/// returns the `model` and `log` outputs with the loop's statistics.
pub fn finish(
    store: &Store,
    trainer: &Trainer,
    hf_config: &Value,
    tokenizer: Digest,
    rng: Value,
    batch_size: u64,
) -> Result<StageOutput, StageError> {
    let config = store.put_bytes(ObjectKind::Blob, &encode_value(hf_config))?;
    let writer = CheckpointWriter { store, config, tokenizer, rng };
    let model = put_record(store, &Record::Checkpoint(writer.record(trainer, batch_size)?))?;
    let log = store.put_bytes(ObjectKind::Blob, &trainer.log_bytes())?;
    let steps = trainer.log();
    let mut out = StageOutput::default();
    out.outputs.insert("model".into(), OutputRef { output_type: OutputType::Checkpoint, digest: model });
    out.outputs.insert("log".into(), OutputRef { output_type: OutputType::File, digest: log });
    out.stats = BTreeMap::from([
        ("steps".into(), json!(trainer.step())),
        ("first_loss".into(), json!(steps[0].loss)),
        ("final_loss".into(), json!(steps[steps.len() - 1].loss)),
        ("tokens_trained".into(), json!(steps.iter().map(|l| l.tokens).sum::<u64>())),
    ]);
    Ok(out)
}
