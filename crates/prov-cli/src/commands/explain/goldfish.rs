//! `prov explain goldfish`: which labels of a token sequence the Goldfish loss drops.

use std::io::Read as _;

use serde_json::json;

use crate::error::CommandError;
use crate::ui::Ui;

/// Say which positions of a label sequence the Goldfish loss drops
///
/// Reads a JSON array of token ids (the labels of one sample) from stdin and prints the
/// 0-based positions whose label is dropped, as a JSON array on one line. Position `j >= h-1`
/// is dropped when `table[(product of labels j-h+1..=j, wrapping in int64) mod 1000003] < 1/k`,
/// where the table is `torch.rand(1000003)` after `torch.manual_seed(2971215073)` on the CPU
/// (the Apertus report's Algorithm 1 as its released code does it). With `--json`, stdout
/// carries one `goldfish` message: `{"k", "h", "labels", "dropped": [positions]}`.
#[derive(Debug, clap::Args)]
pub(super) struct GoldfishArgs {
    /// Drop one label in `k` (the Apertus default is 50)
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    k: u64,
    /// Width of the hashed context (the Apertus default is 50)
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    h: u64,
}

pub(super) fn cmd_explain_goldfish(ui: &mut Ui, args: &GoldfishArgs) -> Result<(), CommandError> {
    let mut input = String::new();
    std::io::stdin()
        .lock()
        .read_to_string(&mut input)
        .map_err(|e| CommandError::input(format!("reading stdin: {e}")))?;
    let labels: Vec<i64> = serde_json::from_str(&input).map_err(|e| {
        CommandError::input(format!("stdin, line {} column {}: {e}", e.line(), e.column()))
            .with_hint("give a JSON array of integer token ids, e.g. `[17, 4, 230]`")
    })?;
    let mask = prov_train::goldfish::drop_mask(&labels, args.k, args.h);
    let dropped: Vec<usize> = mask.iter().enumerate().filter(|(_, d)| **d).map(|(i, _)| i).collect();
    ui.json("goldfish", json!({ "k": args.k, "h": args.h, "labels": labels.len(), "dropped": dropped }))?;
    ui.line(serde_json::to_string(&dropped).expect("integers encode"))?;
    Ok(())
}
