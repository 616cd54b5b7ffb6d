//! The worker's checkpoint verbs, `eval`, `sample` and `export`: the computations behind
//! `prov eval`, `prov sample` and `prov export` (requests and replies in
//! `prov_train::checkpoint_tasks`).

use prov_exec::worker::Reply;
use prov_store::{Access, Digest, Store};
use prov_train::checkpoint_tasks::{
    EvalReply, EvalRequest, ExportReply, ExportRequest, SampleRequest, ScoredSequence, TaskFailure, check_ids,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::checkpoint::{self, LoadedCheckpoint};

/// Parses a request, answers it with `task`, and returns the reply line; a panic is a failure
/// that says so.
pub(crate) fn answer<Req: DeserializeOwned, T: Serialize>(
    input: &[u8],
    task: impl FnOnce(&Req) -> Result<T, TaskFailure>,
) -> String {
    let reply = match serde_json::from_slice::<Req>(input) {
        Ok(request) => match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task(&request))) {
            Ok(Ok(value)) => Reply::Ok(value),
            Ok(Err(failure)) => Reply::Err(failure),
            Err(payload) => {
                let what = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".to_owned());
                let at = crate::panic_place().map_or_else(String::new, |p| format!(" (at {p})"));
                Reply::Err(TaskFailure::internal(format!("the worker panicked: {what}{at}")))
            }
        },
        Err(e) => Reply::Err(TaskFailure::input(format!("the worker cannot read its request: {e}"))),
    };
    let mut line = serde_json::to_string(&reply).expect("replies encode");
    line.push('\n');
    line
}

fn open(store: &std::path::Path) -> Result<Store, TaskFailure> {
    Store::open(store, Access::Shared, true).map_err(|e| TaskFailure {
        integrity: e.is_integrity_failure(),
        internal: false,
        message: e.to_string(),
        hint: None,
    })
}

/// Loads the checkpoint with libtorch pinned to `threads`.
fn load(store: &Store, digest: &Digest, threads: usize) -> Result<LoadedCheckpoint, TaskFailure> {
    prov_torch::pin_threads(threads);
    checkpoint::load(store, digest).map_err(|e| TaskFailure::from(&e))
}

/// Scores each sequence: its per-token log-probabilities and, when asked, its logits.
pub(crate) fn eval(request: &EvalRequest) -> Result<EvalReply, TaskFailure> {
    let store = open(&request.store)?;
    let mut loaded = load(&store, &request.checkpoint, request.threads)?;
    if let Some(digest) = &request.adapter {
        let adapter = crate::lora::Adapter::read(&store, digest).map_err(TaskFailure::input)?;
        // A `lora` stage names its base checkpoint by digest: an adapter trained on another
        // checkpoint would be scored on a model it was not made for.
        if let Some(base) = adapter.base.as_deref().filter(|b| b.starts_with("blake3:"))
            && base != request.checkpoint.to_string()
        {
            return Err(TaskFailure::input(format!(
                "adapter `{digest}` was trained on checkpoint {base}, not `{}`",
                request.checkpoint
            )));
        }
        loaded.attach_adapter(&adapter).map_err(TaskFailure::input)?;
    }
    let mut scored = Vec::new();
    for (what, ids) in &request.sequences {
        if let Err(failure) = check_ids(ids, loaded.config.vocab_size, what) {
            return Ok(EvalReply { scored, stopped: Some(failure) });
        }
        let log_probs = loaded.log_probs(ids);
        let logits = (request.logits && ids.len() > 1).then(|| {
            let logits = loaded.logits(&ids[..ids.len() - 1]);
            (0..logits.size()[0]).map(|r| prov_torch::f32_values(&logits.get(r))).collect()
        });
        scored.push(ScoredSequence::new(&log_probs, logits));
    }
    Ok(EvalReply { scored, stopped: None })
}

/// The new tokens after the prompt.
pub(crate) fn sample(request: &SampleRequest) -> Result<Vec<i64>, TaskFailure> {
    let store = open(&request.store)?;
    let loaded = load(&store, &request.checkpoint, request.threads)?;
    check_ids(&request.prompt, loaded.config.vocab_size, "--prompt-ids")?;
    let stop = loaded.hf_config.get("eos_token_id").and_then(Value::as_i64);
    Ok(loaded.sample(&request.prompt, request.max_tokens, request.temperature, request.seed, stop))
}

/// Writes the Hugging Face folder; each file replaces an existing one atomically.
pub(crate) fn export(request: &ExportRequest) -> Result<ExportReply, TaskFailure> {
    let store = open(&request.store)?;
    let files = checkpoint::hf_folder(&store, &request.checkpoint).map_err(|e| TaskFailure::from(&e))?;
    let io = |e: std::io::Error| TaskFailure::input(e.to_string());
    fs_err::create_dir_all(&request.out).map_err(io)?;
    let mut written = Vec::new();
    for (name, bytes) in &files {
        // The temp file sits in DIR itself, so the rename never crosses a file system.
        prov_store::write_atomically(&request.out, &request.out.join(name), bytes)
            .map_err(|e| TaskFailure::input(e.to_string()))?;
        written.push(((*name).to_owned(), Digest::of(bytes)));
    }
    Ok(written)
}
