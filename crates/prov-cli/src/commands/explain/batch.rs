//! `prov explain batch`: which documents a training step saw.

use std::collections::BTreeMap;

use prov_dataset::tokens::TokenData;
use prov_manifest::StageRecord;
use prov_store::Access;
use prov_train::phases::{Plan, Slot};
use prov_train::pretrain::PretrainConfig;
use serde_json::{Value, json};

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
/// count as the document's first and last tokens). A phased run (EuroLLM's schedule) first
/// names the step's phase, its mixture, RoPE base and learning rate, and each sample's source.
/// With `--json`, one `batch` message: `{"stage", "step", "batch_size", "samples": [{"sample",
/// "documents": [{"id", "from", "to"}]}]}`, with `"source"` in each sample and
/// `"phase": {"index", "name", "first_step", "last_step", "mixture", "rope_theta", "lr"}` for a
/// phased run.
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
    let config: PretrainConfig = serde_json::from_value(stage.config.clone())
        .map_err(|e| CommandError::integrity(format!("the pretrain stage record's configuration: {e}")))?;
    let batch = config.batch_size;
    if args.step == 0 || args.step > config.steps {
        return Err(CommandError::input(format!(
            "step {} is not a step of this run: it trained steps 1 to {}",
            args.step, config.steps
        )));
    }
    let (phase, slots) = step_slots(ui, &config, args.step)?;
    let mut sources: BTreeMap<String, (TokenData<'_>, Vec<u64>)> = BTreeMap::new();
    for Slot { source, .. } in &slots {
        if sources.contains_key(source) {
            continue;
        }
        let (tokens_name, order_name) = if source.is_empty() {
            ("tokens".to_owned(), "order".to_owned())
        } else {
            (prov_train::phases::tokens_input(source), prov_train::phases::order_input(source))
        };
        let (Some(tokens), Some(order)) = (stage.inputs.get(&tokens_name), stage.inputs.get(&order_name)) else {
            return Err(CommandError::integrity(format!(
                "the pretrain stage record lacks its `{tokens_name}` or `{order_name}` input"
            )));
        };
        let data = TokenData::open(&store, tokens).map_err(|e| CommandError::input(e.to_string()))?;
        let order = prov_dataset::tokens::read_order(&store, order).map_err(|e| CommandError::input(e.to_string()))?;
        sources.insert(source.clone(), (data, order));
    }
    ui.line(format!("step {} of stage `{}`: {batch} samples", args.step, stage.name))?;
    let mut samples = Vec::new();
    for Slot { source, position } in &slots {
        let (data, order) = &sources[source];
        let &i = usize::try_from(*position)
            .ok()
            .and_then(|p| order.get(p))
            .ok_or_else(|| CommandError::integrity("the data order is shorter than the run's steps"))?;
        let docs = data.sample_documents(i).map_err(|e| CommandError::input(e.to_string()))?;
        let list: Vec<String> = docs.iter().map(|(id, a, b)| format!("{id} [{a}..{b})")).collect();
        let from = if source.is_empty() { String::new() } else { format!(" of {source}") };
        ui.line(format!("  sample {i}{from}: {}", list.join(", ")))?;
        let mut sample = json!({
            "sample": i,
            "documents": docs.iter().map(|(id, a, b)| json!({"id": id, "from": a, "to": b})).collect::<Vec<_>>(),
        });
        if !source.is_empty() {
            sample["source"] = json!(source);
        }
        samples.push(sample);
    }
    let mut message =
        json!({ "stage": stage.name.to_string(), "step": args.step, "batch_size": batch, "samples": samples });
    if let Some(phase) = phase {
        message["phase"] = phase;
    }
    ui.json("batch", message)?;
    Ok(())
}

/// The slots of step `step` (from 1, within the run): each a source (`""` in an unphased run)
/// and the position in its data order; for a phased run also the step's phase, said on `ui`
/// and returned for the JSON message.
fn step_slots(ui: &mut Ui, config: &PretrainConfig, step: u64) -> Result<(Option<Value>, Vec<Slot>), CommandError> {
    let batch = config.batch_size;
    if config.phases.is_empty() {
        let start = (step - 1) * batch;
        return Ok((None, (start..start + batch).map(|position| Slot { source: String::new(), position }).collect()));
    }
    let plan = Plan::new(&config.phases, batch);
    let outside = || CommandError::integrity(format!("the stage record's phases do not reach step {step}"));
    let (index, before) = plan.phase_of(step).ok_or_else(outside)?;
    let p = &config.phases[index];
    let slots = plan.step_slots(step).ok_or_else(outside)?;
    let lr = prov_train::phases::rates(&config.phases, config.lr)[index].lr(step - before - 1);
    let theta = p.rope_theta.unwrap_or(config.model.rope_theta);
    let mixture: Vec<String> = p.mixture.iter().map(|(s, w)| format!("{s} {w}")).collect();
    ui.line(format!(
        "phase {} `{}` (steps {} to {}): mixture {}, RoPE base {theta}, learning rate {lr}",
        index + 1,
        p.name,
        before + 1,
        before + p.steps,
        mixture.join(", "),
    ))?;
    let phase = json!({
        "index": index + 1, "name": p.name, "first_step": before + 1, "last_step": before + p.steps,
        "mixture": p.mixture, "rope_theta": theta, "lr": lr,
    });
    Ok((Some(phase), slots))
}
