//! `prov explain ngram-decontaminate`: which benchmark n-grams a text holds, with their corpus
//! counts, and whether AFM's decontamination removes it.

use std::path::{Path, PathBuf};

use prov_dataset::{InputFormat, read_documents_as};
use prov_dedup::common_usage::{BenchmarkGrams, CountsFile, Decontaminator};
use serde_json::{Value, json};

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::ui::Ui;

/// Say which benchmark n-grams a text from stdin holds, their corpus counts, and whether AFM's
/// decontamination removes it
///
/// Reads one document's UTF-8 text from stdin, the benchmark the `ngram-decontaminate` stage
/// read (one JSON Lines or Parquet file of `{"id", "text"}` examples) and the `counts` file of
/// the `benchmark-ngrams` stage that counted it. Prints every benchmark n-gram the text holds
/// (its first position in tokens, its length, its corpus count, `common` or `rare` against
/// `--threshold`, and the example that names it), then the rule the stage writes:
/// `ngram-decontaminate:clean`, `:common-usage` (only common n-grams; kept) or
/// `:contaminated` (a rare one; removed). With `--json`, one `ngram-decontaminate` message:
/// `{"held": [{"ngram", "n", "benchmark", "corpus_count", "position", "common"}], "rule",
/// "decision", "evidence"}`, the rule and evidence as in the ledger.
#[derive(Debug, clap::Args)]
pub(super) struct NgramDecontaminateArgs {
    /// The benchmark file (`.jsonl`, `.jsonl.gz` or `.parquet`)
    #[arg(long, value_name = "FILE")]
    benchmark: PathBuf,
    /// The `counts` file of the benchmark-ngrams stage
    #[arg(long, value_name = "FILE")]
    counts: PathBuf,
    /// The stage's `threshold`: an n-gram counted at least this often is common usage
    #[arg(long, value_name = "N", default_value_t = 1000)]
    threshold: u64,
}

fn read_benchmark(path: &Path, grams: &mut BenchmarkGrams) -> Result<(), CommandError> {
    let format = InputFormat::from_path(path).ok_or_else(|| {
        CommandError::input(format!("{}: not a `.jsonl`, `.jsonl.gz` or `.parquet` file", path.display()))
    })?;
    let docs = read_documents_as(path, format, path)
        .map_err(|e| CommandError::input(format!("reading the benchmark: {e}")))?;
    for doc in docs {
        let doc = doc.map_err(|e| CommandError::input(format!("reading the benchmark: {e}")))?;
        grams.add(&doc.id, &doc.text).map_err(|m| CommandError::input(format!("{}: {m}", path.display())))?;
    }
    Ok(())
}

pub(super) fn cmd_explain_ngram_decontaminate(
    ui: &mut Ui,
    cx: &CommandContext,
    args: &NgramDecontaminateArgs,
) -> Result<(), CommandError> {
    if args.threshold == 0 {
        return Err(CommandError::input("`--threshold` must be at least 1"));
    }
    let counts_path = cx.cwd.join(&args.counts);
    let bytes = prov_store::read_named_file(counts_path.as_ref(), super::MAX_MODEL_FILE_BYTES, "the counts")
        .map_err(|e| CommandError::input(format!("reading the counts: {e}")))?;
    let file = CountsFile::parse(&bytes).map_err(|m| {
        CommandError::input(format!("{}: {m}", args.counts.display()))
            .with_hint("give the `counts` output of a benchmark-ngrams stage")
    })?;
    let mut grams = BenchmarkGrams::new(file.min_n, file.max_n);
    read_benchmark(&cx.cwd.join(&args.benchmark), &mut grams)?;
    if grams.examples() as u64 != file.benchmark_examples {
        return Err(CommandError::input(format!(
            "{}: the counts are of a benchmark of {} examples, {} holds {}",
            args.counts.display(),
            file.benchmark_examples,
            args.benchmark.display(),
            grams.examples()
        ))
        .with_hint("give the benchmark these counts were taken against"));
    }
    let decontaminator = Decontaminator::new(grams, &file, args.threshold).map_err(|m| {
        CommandError::input(format!("{}: {m}", args.counts.display()))
            .with_hint("give the benchmark these counts were taken against")
    })?;
    let text = super::stdin_text()?;
    let a = decontaminator.assess(&text);
    let held = decontaminator.held(&text);
    if ui.is_json() {
        let held: Vec<Value> = held
            .iter()
            .map(|h| {
                json!({"ngram": h.ngram, "n": h.n, "benchmark": h.benchmark, "corpus_count": h.corpus_count,
                       "position": h.position, "common": h.common})
            })
            .collect();
        ui.json(
            "ngram-decontaminate",
            json!({"held": held, "rule": a.rule, "decision": a.decision.as_str(), "evidence": a.evidence}),
        )?;
        return Ok(());
    }
    for h in &held {
        let kind = if h.common { "common" } else { "rare" };
        ui.line(format!(
            "at {} ({}-gram, {kind}, counted {}; from {}): {}",
            h.position, h.n, h.corpus_count, h.benchmark, h.ngram
        ))?;
    }
    let why = match &a.evidence {
        Some(e) => format!(
            " by `{}` (counted {}, threshold {}; from {})",
            e["ngram"].as_str().unwrap_or_default(),
            e["corpus_count"],
            args.threshold,
            e["benchmark"].as_str().unwrap_or_default()
        ),
        None => String::new(),
    };
    ui.line(format!("{}: {}{why}", a.rule, a.decision.as_str()))?;
    Ok(())
}
