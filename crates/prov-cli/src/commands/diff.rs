//! `prov diff` (being written).

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::Ui;

/// Not available yet
#[derive(Debug, clap::Args)]
pub(crate) struct DiffArgs {}

pub(crate) fn cmd_diff(_ui: &mut Ui, _cx: &CommandContext, _args: &DiffArgs) -> Result<(), CommandError> {
    Err(CommandError::input("`prov diff` is not available in this build"))
}
