//! `prov`: the command-line front end of Provenant.
//!
//! The binary is glue: each subcommand (one file in `commands/`) parses its flags, resolves
//! the store and calls into the libraries (`prov-exec`, `prov-manifest`, `prov-store`, …).
//! Errors are classified once, in [`error`], into the exit codes of the CLI contract:
//! 0 success, 1 usage or input error, 2 integrity failure, 3 replay divergence,
//! 4 an audit claim does not hold.

mod commands;
mod context;
mod env_vars;
mod error;
mod executor;
mod git;
mod render;
mod resolve;
mod ui;

use std::io::Write;

use clap::Parser;

/// jemalloc, not glibc's malloc, for everything `prov` allocates in Rust.
///
/// A data stage works through its shards one after another, each with shard-sized buffers
/// (decoded Parquet columns, the batches and pages being written, the ledger rows). glibc
/// raises its mmap threshold each time a large mapped block is freed, so after the first
/// shards those buffers come from the threads' heaps, and their freed pages stay resident
/// among live blocks: the resident heap grew with the number of shards a process went
/// through (robots on 8 GiB of synthetic corpus: 1.18× to 1.31× its 1 GiB peak, where the
/// live heap grew 1.11×). jemalloc's size classes and page purging keep it at 1.08× (1.04×
/// to 1.07× preloaded into the glibc build), and the stage ran 5% to 10% faster (see the
/// book's Benchmarks page). C libraries
/// (zstd, `SQLite`) keep glibc's malloc: only Rust's global allocator changes, and no output
/// depends on it.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Reproducibility and provenance workbench for LLM training pipelines
///
/// Pin every input of a pipeline by content hash (`prov lock`), run it deterministically
/// with a manifest at every stage boundary (`prov run`), and prove, hash by hash, that a
/// replay gives the same bytes (`prov replay`).
#[derive(Debug, Parser)]
#[command(name = "prov", version, propagate_version = true, max_term_width = 100)]
struct Cli {
    /// Write machine-readable JSON Lines to stdout
    #[arg(long, global = true)]
    json: bool,
    /// Store directory (default: `PROV_STORE`, else the nearest `.prov/` upwards)
    #[arg(long, global = true, value_name = "DIR")]
    store: Option<std::path::PathBuf>,
    /// Worker threads (default: `PROV_THREADS`, else all cores); recorded in every envelope
    #[arg(long, global = true, value_name = "N")]
    threads: Option<usize>,
    #[command(subcommand)]
    command: commands::Command,
}

/// A panic is a bug of `prov`, and is caught (at the stage boundary, else around the command)
/// and reported as an internal error with a hint; the hook only keeps where it happened, for
/// that report, instead of printing Rust's own message.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let location = info.location().map(|l| format!("{}:{}", l.file(), l.line()));
        error::record_panic(location, info.payload_as_str().map(str::to_owned));
    }));
}

fn main() -> std::process::ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return std::process::ExitCode::from(u8::from(e.use_stderr()));
        }
    };
    let mut ui = ui::Ui::new(cli.json);
    let cwd = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("."));
    let cx = context::CommandContext { store_flag: cli.store, threads_flag: cli.threads, cwd };
    install_panic_hook();
    // Before any command, so before libtorch computes anything.
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        context::pin_aten_capability().and_then(|()| commands::dispatch(&mut ui, &cx, &cli.command))
    }))
    .unwrap_or_else(|_| Err(error::CommandError::internal("a panic outside any stage")));
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            if e.message.is_empty() {
                return std::process::ExitCode::from(e.code as u8);
            }
            let mut err = std::io::stderr().lock();
            // What an error quotes (a path, an id, a lockfile's field) reaches the terminal
            // without escape sequences.
            let safe = prov_textfix::shown::terminal_safe;
            let _ = writeln!(err, "error: {}", safe(&e.message));
            if let Some(d) = &e.detail {
                let _ = writeln!(err, "{}", safe(d));
            }
            if let Some(h) = &e.hint {
                let _ = writeln!(err, "\nhint: {}", safe(h));
            }
            std::process::ExitCode::from(e.code as u8)
        }
    }
}
