//! `prov show` (being written).

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::Ui;

/// Not available yet
#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {}

pub(crate) fn cmd_show(_ui: &mut Ui, _cx: &CommandContext, _args: &ShowArgs) -> Result<(), CommandError> {
    Err(CommandError::input("`prov show` is not available in this build"))
}
