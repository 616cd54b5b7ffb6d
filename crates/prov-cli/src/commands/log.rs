//! `prov log` (being written).

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::Ui;

/// Not available yet
#[derive(Debug, clap::Args)]
pub(crate) struct LogArgs {}

pub(crate) fn cmd_log(_ui: &mut Ui, _cx: &CommandContext, _args: &LogArgs) -> Result<(), CommandError> {
    Err(CommandError::input("`prov log` is not available in this build"))
}
