//! `prov doctor` (being written).

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::Ui;

/// Not available yet
#[derive(Debug, clap::Args)]
pub(crate) struct DoctorArgs {}

pub(crate) fn cmd_doctor(_ui: &mut Ui, _cx: &CommandContext, _args: &DoctorArgs) -> Result<(), CommandError> {
    Err(CommandError::input("`prov doctor` is not available in this build"))
}
