//! `prov task`: what a Slurm job runs on a node (not for people; hidden from `--help`).

use std::path::PathBuf;

use prov_exec::{Task, TaskDir, TaskResult};

use crate::context::{CommandContext, registry};
use crate::error::CommandError;
use crate::ui::Ui;

/// Run one task of a stage, or print this node's envelope (used by `--executor slurm`)
#[derive(Debug, clap::Args)]
pub(crate) struct TaskArgs {
    #[command(subcommand)]
    verb: TaskVerb,
}

#[derive(Debug, clap::Subcommand)]
enum TaskVerb {
    /// Runs a task of the stage whose task directory is DIR and leaves its result there
    Run {
        /// The stage's task directory (`.prov/tasks/<stage key>`)
        dir: PathBuf,
        /// Map task BASE + `SLURM_ARRAY_TASK_ID`
        #[arg(long, conflicts_with = "whole", required_unless_present = "whole")]
        base: Option<usize>,
        /// The stage's one task (a stage without map tasks)
        #[arg(long)]
        whole: bool,
    },
    /// Prints this machine's envelope for THREADS threads, as JSON
    Envelope {
        /// Threads
        #[arg(long)]
        threads: usize,
    },
}

pub(crate) fn cmd_task(ui: &mut Ui, _cx: &CommandContext, args: &TaskArgs) -> Result<(), CommandError> {
    match &args.verb {
        TaskVerb::Envelope { threads } => {
            let envelope = CommandContext::envelope(*threads);
            ui.line(serde_json::to_string(&envelope).expect("an envelope encodes"))?;
            Ok(())
        }
        TaskVerb::Run { dir, base, whole } => {
            let task = match (base, whole) {
                (_, true) => Task::Whole,
                (Some(base), false) => {
                    let id = std::env::var("SLURM_ARRAY_TASK_ID")
                        .ok()
                        .and_then(|v| v.parse::<usize>().ok())
                        .ok_or_else(|| {
                            CommandError::input(
                                "`--base` takes the task's offset from SLURM_ARRAY_TASK_ID, which is not set",
                            )
                        })?;
                    Task::Map(base + id)
                }
                (None, false) => return Err(CommandError::input("give `--base` or `--whole`")),
            };
            let task_dir = TaskDir::at(dir)
                .ok_or_else(|| CommandError::input(format!("`{}` is not a task directory", dir.display())))?;
            let spec = task_dir.read_spec().map_err(|e| CommandError::input(e.to_string()))?;
            let here = CommandContext::envelope(spec.stage.threads);
            let result = prov_exec::run_task(&registry(), &spec, task, &here, &CommandContext::worker());
            task_dir.write_result(task, &result)?;
            if let TaskResult::Failed { error: prov_exec::worker::RemoteStageError::Panic { message }, .. } = &result {
                return Err(CommandError::internal(format!("{task} of stage `{}`: {message}", spec.stage.stage)));
            }
            if let TaskResult::Failed { error, .. } = result {
                let stage =
                    spec.stage.stage.parse().map_err(|_| CommandError::input("the spec's stage name is not a name"))?;
                return Err(CommandError::from(prov_exec::ExecError::Stage {
                    stage,
                    kind: spec.stage.kind.clone(),
                    source: error.into_stage_error(),
                }));
            }
            ui.line(format!("{task} of stage `{}` done", spec.stage.stage))?;
            Ok(())
        }
    }
}
