//! `prov status` (being written).

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::Ui;

/// Not available yet
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {}

pub(crate) fn cmd_status(_ui: &mut Ui, _cx: &CommandContext, _args: &StatusArgs) -> Result<(), CommandError> {
    Err(CommandError::input("`prov status` is not available in this build"))
}
