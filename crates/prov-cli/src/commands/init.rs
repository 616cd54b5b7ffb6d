//! `prov init`.

use std::path::PathBuf;

use prov_store::{STORE_DIR_NAME, Store};
use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::Ui;

/// Create a store (`.prov/`) in a directory, which becomes the project root
///
/// The store holds every object by its BLAKE3 (`.prov/objects/`) and an index of objects,
/// references, the stage cache and executions (`.prov/index.sqlite`). A new store is readable
/// by its owner only, unless `--shared`. Running it again on an existing store changes
/// nothing.
#[derive(Debug, clap::Args)]
pub(crate) struct InitArgs {
    /// Project root to create the store in (default: the current directory, or `--store`)
    dir: Option<PathBuf>,
    /// Make a new store readable by everyone (default: by its owner only, since objects are
    /// copies of sources that may be private)
    #[arg(long)]
    shared: bool,
}

pub(crate) fn cmd_init(ui: &mut Ui, cx: &CommandContext, args: &InitArgs) -> Result<(), CommandError> {
    let store_dir = match (&args.dir, &cx.store_flag) {
        (Some(d), _) => prov_exec::absolute(d).join(STORE_DIR_NAME),
        (None, Some(s)) => prov_exec::absolute(s),
        (None, None) => cx.cwd.join(STORE_DIR_NAME),
    };
    let existed = store_dir.join("VERSION").is_file();
    if args.shared {
        Store::init_shared(&store_dir)?;
    } else {
        Store::init(&store_dir)?;
    }
    ui.json("init", json!({ "store": store_dir.display().to_string(), "created": !existed }))?;
    if existed {
        ui.line(format!("store already exists at {}", store_dir.display()))?;
    } else {
        ui.line(format!("initialised store at {}", store_dir.display()))?;
    }
    Ok(())
}
