//! `prov replay`.

use std::fmt::Write as _;

use prov_exec::{Divergence, ReplayRange};
use prov_store::Access;
use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::render;
use crate::resolve::load_lockfile;
use crate::ui::Ui;

/// Re-execute a recorded run, ignoring the cache, and compare every output with the recording
///
/// Exits 0 when every re-executed stage produced exactly the recorded bytes, and 3 at the
/// first divergence, naming the stage, the output and, for datasets, the first differing
/// shard, row and column. A stage of class `envelope` refuses to claim equality when the
/// envelope differs from the recorded one, and says which fields differ.
#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// Run id (or a prefix of at least 6 hex digits) or lockfile path
    run: String,
    /// Re-execute from this stage on; earlier stages reuse the recorded outputs (verified)
    #[arg(long, value_name = "STAGE")]
    from: Option<String>,
    /// Stop after this stage
    #[arg(long, value_name = "STAGE")]
    until: Option<String>,
    /// Replay against committed manifests (a `manifests/<recipe>/` folder written by
    /// `prov run --commit`) instead of a run recorded in this store: each `<hex>.json` must
    /// hash to its name, `RUN` names the run, which every stage is compared with, whatever
    /// this store holds. Envelopes are compared on the fields that
    /// decide results (arch, device, libtorch, `ATen` capability, MKL path), so a run recorded
    /// on one machine can be reproduced on another. With `--from`, the stages before it reuse
    /// outputs this store already holds (verified), as after replaying a run they share: a
    /// variant of a replayed recipe is reproduced by re-executing only what it adds.
    #[arg(long, value_name = "DIR")]
    against: Option<std::path::PathBuf>,
    /// Re-execute `envelope` stages even in a different envelope and compare anyway, to see
    /// where (which step, which tensor) a different thread count or ATen capability diverges
    #[arg(long)]
    ignore_envelope: bool,
    /// Run the commands of a lockfile whose commands were not adopted in this store (a
    /// lockfile from elsewhere), or that would read outputs a handed-over recording names
    /// (`--against` with `--from`); they run in the sandbox either way
    #[arg(long)]
    allow_commands: bool,
    /// When the replay reproduces every stage, sign the statement "I re-executed this lockfile
    /// and got these outputs" with this private key (as `prov attest` does) and keep it beside
    /// the recording; `prov audit` counts it as a signed replay
    #[arg(long, value_name = "KEY", conflicts_with_all = ["from", "until", "ignore_envelope"])]
    attest: Option<std::path::PathBuf>,
    /// Also write the replay attestation (JSON) to FILE, to hand to an auditor
    #[arg(long, value_name = "FILE", requires = "attest")]
    attest_out: Option<std::path::PathBuf>,
    #[command(flatten)]
    executor: crate::executor::ExecutorArgs,
}

pub(crate) fn cmd_replay(ui: &mut Ui, cx: &CommandContext, args: &ReplayArgs) -> Result<(), CommandError> {
    // The key is read first: a replay of hours should not end in a key that cannot sign.
    let key = args
        .attest
        .as_ref()
        .map(|k| prov_attest::SigningKey::read(&cx.cwd.join(k)))
        .transpose()
        .map_err(CommandError::from)?;
    let (store, root) = cx.open_store(Access::Shared, true)?;
    let loaded = load_lockfile(&store, &args.run)?;
    crate::resolve::check_command_consent(
        &loaded,
        &store,
        args.allow_commands,
        args.against.is_some() && args.from.is_some(),
    )?;
    let recording = match &args.against {
        Some(dir) => {
            // `RUN` must name a run of this lockfile before anything of the folder is stored.
            let run_id = prov_manifest::run_id(&loaded.bytes);
            let run = prov_manifest::import_committed_run(&store, dir, &run_id)?;
            ui.status(format!("imported the manifests of run {run} from {}", dir.display()));
            Some(run)
        }
        None => None,
    };
    let range = ReplayRange {
        from: args.from.clone(),
        until: args.until.clone(),
        across_machines: args.against.is_some(),
        ignore_envelope: args.ignore_envelope,
        recording,
    };
    let result = cx.with_exec_options(ui, &root, &loaded.display, &args.executor, |opts| {
        prov_exec::replay(&store, &loaded.lockfile, &loaded.bytes, &range, opts)
    });
    let report = result?;
    render::execution_report(ui, &report, "replay")?;
    let Some(d) = &report.divergence else {
        let replayed = report.stages.iter().filter(|s| s.status == prov_exec::StageStatus::Replayed).count();
        let reused = report.stages.len() - replayed;
        let reused =
            if reused > 0 { format!(" ({reused} earlier stages reused from the recording)") } else { String::new() };
        ui.line(format!(
            "replay identical: {replayed} stages re-executed, every output equal to the recording{reused}"
        ))?;
        if let Some(key) = &key {
            attest_replay(ui, cx, &store, &report, key, args.attest_out.as_deref())?;
        }
        return Ok(());
    };
    let (summary, detail, data) = describe(d);
    ui.json("divergence", data)?;
    Err(CommandError::divergence(summary).with_detail(detail))
}

/// Signs and keeps the replay's attestation.
fn attest_replay(
    ui: &mut Ui,
    cx: &CommandContext,
    store: &prov_store::Store,
    report: &prov_exec::RunReport,
    key: &prov_attest::SigningKey,
    out: Option<&std::path::Path>,
) -> Result<(), CommandError> {
    let Some(replay_digest) = report.replay_record else {
        return Err(CommandError::internal("an identical replay wrote no replay record"));
    };
    let replay = prov_manifest::get_typed::<prov_manifest::ReplayRecord>(store, &replay_digest)?;
    let recording = prov_manifest::LoadedRun::load(store, replay.recording)?;
    let statement = prov_attest::replay_statement(store, &recording, &replay_digest, &replay)?;
    let envelope = prov_attest::sign_statement(&statement, key);
    let bytes = envelope.to_json();
    let record =
        prov_attest::attach(store, &bytes, &envelope, recording.manifest, prov_manifest::AttestationRole::Replay)?;
    if let Some(out) = out {
        cx.write_output(out, &bytes, "attestation")?;
    }
    let public = key.public();
    ui.json(
        "attestation",
        json!({
            "record": record.to_string(),
            "run_manifest": recording.manifest.to_string(),
            "replay_record": replay_digest.to_string(),
            "role": "replay",
            "keyid": public.keyid(),
            "algorithm": public.algorithm().name(),
            "subjects": statement.subject.len(),
            "file": out.map(|o| o.display().to_string()),
        }),
    )?;
    ui.line(format!(
        "attested the replay: {} outputs, signed by {} key {}, kept as attestation {record}",
        statement.subject.len(),
        public.algorithm().name(),
        public.keyid()
    ))?;
    Ok(())
}

/// Returns a one-line summary, detail lines, and the JSON form of a divergence.
fn describe(d: &Divergence) -> (String, String, serde_json::Value) {
    match d {
        Divergence::Output { stage, output, expected, actual, dataset, located, envelope, .. } => {
            let show =
                |o: &Option<prov_manifest::OutputRef>| o.map_or_else(|| "(none)".to_owned(), |o| o.digest.to_string());
            let mut detail = format!("  recorded: {}\n  replayed: {}", show(expected), show(actual));
            if let Some(dd) = dataset {
                let _ = write!(detail, "\n  first difference: shard {}", dd.shard);
                if let Some(r) = dd.row {
                    let _ = write!(detail, ", row {r} (row {} of the dataset)", dd.global_row.unwrap_or(r));
                }
                if let Some(c) = &dd.column {
                    let _ = write!(detail, ", column `{c}`");
                }
                let _ = write!(detail, "\n    recorded: {}\n    replayed: {}", dd.expected, dd.actual);
            }
            if let Some(l) = located {
                for line in &l.lines {
                    let _ = write!(detail, "\n  {line}");
                }
            }
            for (f, a, b) in envelope {
                let _ = write!(detail, "\n  (envelope ignored: {f} recorded `{a}`, now `{b}`)");
            }
            let data = json!({
                "located": located.as_ref().map(|l| l.data.clone()),
                "envelope_ignored": envelope.iter().map(|(f, a, b)| json!({"field": f, "recorded": a, "current": b})).collect::<Vec<_>>(),
                "kind": "output",
                "stage": stage.to_string(),
                "output": output,
                "expected": expected.map(|o| o.digest.to_string()),
                "actual": actual.map(|o| o.digest.to_string()),
                "dataset": dataset.as_ref().map(|dd| json!({
                    "shard": dd.shard, "row": dd.row, "global_row": dd.global_row, "column": dd.column,
                    "expected": dd.expected, "actual": dd.actual,
                })),
            });
            (format!("replay diverged at stage `{stage}`, output `{output}`"), detail, data)
        }
        Divergence::Stats { stage, field, expected, actual, envelope, .. } => {
            let show =
                |v: &Option<serde_json::Value>| v.as_ref().map_or_else(|| "(none)".to_owned(), ToString::to_string);
            let mut detail = format!("  recorded: {}\n  replayed: {}", show(expected), show(actual));
            for (f, a, b) in envelope {
                let _ = write!(detail, "\n  (envelope ignored: {f} recorded `{a}`, now `{b}`)");
            }
            (
                format!("replay diverged at stage `{stage}`: statistic `{field}` differs"),
                detail,
                json!({
                    "kind": "stats", "stage": stage.to_string(), "field": field, "expected": expected, "actual": actual,
                    "envelope_ignored": envelope.iter().map(|(f, a, b)| json!({"field": f, "recorded": a, "current": b})).collect::<Vec<_>>(),
                }),
            )
        }
        Divergence::Envelope { stage, differences } => {
            let lines: Vec<String> =
                differences.iter().map(|(f, a, b)| format!("  {f}: recorded `{a}`, now `{b}`")).collect();
            (
                format!(
                    "stage `{stage}` is of class `envelope` and the envelope differs from the recording: equality cannot be claimed"
                ),
                lines.join("\n"),
                json!({
                    "kind": "envelope",
                    "stage": stage.to_string(),
                    "differences": differences.iter().map(|(f, a, b)| json!({"field": f, "recorded": a, "current": b})).collect::<Vec<_>>(),
                }),
            )
        }
    }
}
