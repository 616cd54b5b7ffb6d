//! `prov lineage` (being written).

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::Ui;

/// Not available yet
#[derive(Debug, clap::Args)]
pub(crate) struct LineageArgs {}

pub(crate) fn cmd_lineage(_ui: &mut Ui, _cx: &CommandContext, _args: &LineageArgs) -> Result<(), CommandError> {
    Err(CommandError::input("`prov lineage` is not available in this build"))
}
