//! `prov explain batch`: which documents a training step saw.

use prov_manifest::StageRecord;
use prov_store::Access;
use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::resolve::load_lockfile;
use crate::ui::Ui;

/// Say which samples and documents were in the batch of a training step
///
/// RUN is a lockfile path or run id whose run is recorded in this store. For the `pretrain`
/// stage (or the one `--stage` names), step STEP (from 1) trained on the samples
/// `order[(STEP-1)·B .. STEP·B)` of its data order, `B` its batch size. Prints each sample's
/// index and the documents it covers, with the token range of each document (BOS and EOS
/// count as the document's first and last tokens). With `--json`, one `batch` message:
/// `{"stage", "step", "batch_size", "samples": [{"sample", "documents": [{"id", "from",
/// "to"}]}]}`.
#[derive(Debug, clap::Args)]
pub(super) struct BatchArgs {
    /// Lockfile path or run id
    run: String,
    /// Training step, from 1
    step: u64,
    /// The training stage (default: the run's only `pretrain` stage)
    #[arg(long, value_name = "STAGE")]
    stage: Option<String>,
}

pub(super) fn cmd_explain_batch(ui: &mut Ui, cx: &CommandContext, args: &BatchArgs) -> Result<(), CommandError> {
    let (store, _) = cx.open_store(Access::Shared, true)?;
    let loaded = load_lockfile(&store, &args.run)?;
    let run_id = prov_manifest::run_id(&loaded.bytes);
    let run = prov_exec::load_recorded_run(&store, &run_id)?.ok_or_else(|| {
        CommandError::input(format!("run {run_id} is not recorded in this store"))
            .with_hint("run it with `prov run` first")
    })?;
    let mut candidates: Vec<&StageRecord> = run
        .stages_of_kind("pretrain")
        .map(|s| &s.record)
        .filter(|r| args.stage.as_deref().is_none_or(|want| want == r.name.as_str()))
        .collect();
    let stage = match candidates.len() {
        1 => candidates.remove(0),
        0 => {
            return Err(CommandError::input(format!(
                "run {run_id} has no pretrain stage{}",
                args.stage.as_ref().map(|s| format!(" named `{s}`")).unwrap_or_default()
            )));
        }
        _ => {
            return Err(CommandError::input("the run has several pretrain stages").with_hint("name one with `--stage`"));
        }
    };
    let batch = stage.config["batch_size"]
        .as_u64()
        .ok_or_else(|| CommandError::integrity("the pretrain stage record has no batch_size"))?;
    let steps = stage.config["steps"].as_u64().unwrap_or(0);
    if args.step == 0 || args.step > steps {
        return Err(CommandError::input(format!(
            "step {} is not a step of this run: it trained steps 1 to {steps}",
            args.step
        )));
    }
    let (Some(tokens), Some(order)) = (stage.inputs.get("tokens"), stage.inputs.get("order")) else {
        return Err(CommandError::integrity("the pretrain stage record lacks its `tokens` or `order` input"));
    };
    let data = prov_dataset::tokens::TokenData::open(&store, tokens).map_err(|e| CommandError::input(e.to_string()))?;
    let order = prov_dataset::tokens::read_order(&store, order).map_err(|e| CommandError::input(e.to_string()))?;
    let start = usize::try_from((args.step - 1) * batch).unwrap_or(usize::MAX);
    let indices = order
        .get(start..start + batch as usize)
        .ok_or_else(|| CommandError::integrity("the data order is shorter than the run's steps"))?;
    ui.line(format!("step {} of stage `{}`: {batch} samples", args.step, stage.name))?;
    let mut samples = Vec::new();
    for &i in indices {
        let docs = data.sample_documents(i).map_err(|e| CommandError::input(e.to_string()))?;
        let list: Vec<String> = docs.iter().map(|(id, a, b)| format!("{id} [{a}..{b})")).collect();
        ui.line(format!("  sample {i}: {}", list.join(", ")))?;
        samples.push(json!({
            "sample": i,
            "documents": docs.iter().map(|(id, a, b)| json!({"id": id, "from": a, "to": b})).collect::<Vec<_>>(),
        }));
    }
    ui.json(
        "batch",
        json!({ "stage": stage.name.to_string(), "step": args.step, "batch_size": batch, "samples": samples }),
    )?;
    Ok(())
}
