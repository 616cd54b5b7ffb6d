//! `prov card`: a data card for a run's output, from its manifests.

use std::path::PathBuf;

use prov_card::{CardError, CardOptions, Format};
use prov_manifest::{RunRecord, get_typed};
use prov_store::{Access, Digest, Store};
use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::resolve::{load_lockfile, resolve_object};
use crate::ui::Ui;

/// Write a data card for a run's output dataset, from its manifests alone
///
/// `--format hf` writes a Hugging Face dataset card, `README.md` with YAML front matter
/// (license, languages, size category, source datasets, tags) and sections for the sources,
/// the processing stages, the compliance filters' measured numbers and known limitations, and
/// the plots it shows (`plots/*.svg` and `plots/*.png`: documents per language, toxicity score
/// distributions with the removal threshold, the filter funnel, the license breakdown).
/// `--format croissant` writes `croissant.json`, Croissant 1.0 JSON-LD with the Responsible AI
/// fields; the SHA-256 of each output shard is computed from the store, the only bytes read
/// beside the records. Every number names the manifest it comes from (format: the book's
/// "Data cards" chapter).
#[derive(Debug, clap::Args)]
pub(crate) struct CardArgs {
    /// Run manifest (`blake3:…` or a prefix of at least 6 hex digits), run id, or lockfile path
    run: String,
    /// The card to write
    #[arg(long, value_enum, default_value = "hf")]
    format: CardFormat,
    /// Directory to write into (created if missing)
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Languages shown in the language plot, the largest first, from 1 to 100 (its title
    /// says how many there are; a plot of every language of a corpus grew with the corpus)
    #[arg(long, value_name = "N", default_value_t = 25, value_parser = clap::value_parser!(u64).range(1..=100))]
    top_languages: u64,
    /// With `--format croissant`, also copy the output's shards to `DIR/data/`, where the
    /// Croissant `contentUrl`s point
    #[arg(long)]
    with_data: bool,
    /// The stage whose `dataset` output the card describes (default: the run's last dataset
    /// output, in plan order)
    #[arg(long, value_name = "STAGE")]
    dataset: Option<String>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum CardFormat {
    /// Hugging Face dataset card (README.md) and plots
    Hf,
    /// Croissant 1.0 JSON-LD with RAI fields (croissant.json)
    Croissant,
}

impl From<CardError> for CommandError {
    fn from(e: CardError) -> Self {
        if e.is_integrity_failure() {
            CommandError::integrity(e.to_string())
        } else {
            CommandError::input(e.to_string())
        }
    }
}

/// Resolves the argument to a run manifest: a run record by digest or prefix, else a run id or
/// lockfile whose recorded run is taken.
fn run_manifest(store: &Store, arg: &str) -> Result<Digest, CommandError> {
    if let Ok(d) = resolve_object(store, arg)
        && get_typed::<RunRecord>(store, &d).is_ok()
    {
        return Ok(d);
    }
    let loaded = load_lockfile(store, arg)?;
    let run_id = prov_manifest::run_id(&loaded.bytes);
    match prov_exec::recorded_run(store, &run_id)? {
        Some((m, _)) => Ok(m),
        None => Err(CommandError::input(format!("no completed run of `{}` in this store", loaded.display))
            .with_hint("run it with `prov run` first; a card is written from a recorded run")),
    }
}

pub(crate) fn cmd_card(ui: &mut Ui, cx: &CommandContext, args: &CardArgs) -> Result<(), CommandError> {
    let (store, _) = cx.open_store(Access::ReadOnly, true)?;
    let manifest = run_manifest(&store, &args.run)?;
    let options = CardOptions {
        format: match args.format {
            CardFormat::Hf => Format::Hf,
            CardFormat::Croissant => Format::Croissant,
        },
        top_languages: usize::try_from(args.top_languages).unwrap_or(25),
        with_data: args.with_data,
        dataset: args.dataset.clone(),
    };
    let dir = cx.cwd.join(&args.out);
    let written = prov_card::write_card(&store, &manifest, &dir, &options)?;
    for w in &written {
        ui.json("file", json!({ "path": args.out.join(&w.path).display().to_string(), "bytes": w.bytes }))?;
        ui.status(format!("wrote {} ({} bytes)", args.out.join(&w.path).display(), w.bytes));
    }
    ui.json("card", json!({ "run_manifest": manifest.to_string(), "files": written.len() }))?;
    Ok(())
}
