//! `prov license`: the license review workflow. `queue` lists what a reviewer still has to
//! decide in a recorded run, `decide` records a reviewer's verdict (a manifest in the store, a
//! file in the repository and a git commit), `diff` shows which decisions change between two
//! license policies.

mod decide;
mod diff;
mod queue;
mod resolve;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::Ui;

/// Review license decisions: the queue, reviewer verdicts, policy changes
///
/// The `license` stage decides each document by its declared license and a policy; what the
/// policy cannot judge (unknown or ambiguous strings), denies, or what a declared lineage
/// contradicts, waits in the queue for a person. A reviewer's verdict is a verdict record,
/// committed under `verdicts/` of the repository; a recipe whose `license` stage takes that
/// directory as its `verdicts` input uses it on the next run.
#[derive(Debug, clap::Args)]
pub(crate) struct LicenseArgs {
    #[command(subcommand)]
    command: LicenseCommand,
}

#[derive(Debug, clap::Subcommand)]
enum LicenseCommand {
    Queue(queue::QueueArgs),
    Decide(decide::DecideArgs),
    Diff(diff::DiffArgs),
}

pub(crate) fn cmd_license(ui: &mut Ui, cx: &CommandContext, args: &LicenseArgs) -> Result<(), CommandError> {
    match &args.command {
        LicenseCommand::Queue(a) => queue::cmd_license_queue(ui, cx, a),
        LicenseCommand::Decide(a) => decide::cmd_license_decide(ui, cx, a),
        LicenseCommand::Diff(a) => diff::cmd_license_diff(ui, cx, a),
    }
}
