//! `prov-fuzz`: runs the mutation fuzzer's campaigns and prints, per target, the executions
//! run, what was found, the slowest execution and the largest allocation held.
//!
//! ```text
//! prov-fuzz [--executions N] [--seed S] [TARGET …]
//! ```
//!
//! Without targets, every target runs. Exits 1 when anything was found, writing each input to
//! `fuzz-findings/<target>-<execution>.bin`.

use prov_fuzz::{CountingAllocator, Limits, campaign, targets};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[allow(clippy::print_stdout, clippy::print_stderr)]
fn main() -> std::process::ExitCode {
    let mut executions: u64 = 10_000;
    let mut seed: u64 = 1;
    let mut names = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let number = |v: Option<String>| v.and_then(|v| v.replace('_', "").parse::<u64>().ok());
        match arg.as_str() {
            "--executions" => executions = number(args.next()).unwrap_or(executions),
            "--seed" => seed = number(args.next()).unwrap_or(seed),
            name => names.push(name.to_owned()),
        }
    }
    let chosen = if names.is_empty() {
        targets::all()
    } else {
        let mut chosen = Vec::new();
        for n in &names {
            let Some(t) = targets::named(n) else {
                eprintln!("prov-fuzz: no target `{n}`");
                return std::process::ExitCode::from(1);
            };
            chosen.push(t);
        }
        chosen
    };
    println!("target     seeds  executions  findings  slowest ms  peak MiB  seconds  exec/s");
    let mut found = false;
    for target in &chosen {
        let report = campaign(target, executions, seed, Limits::default());
        println!(
            "{:<10} {:>5}  {:>10}  {:>8}  {:>10.1}  {:>8.1}  {:>7.1}  {:>6.0}",
            report.target,
            target.corpus.len(),
            report.executions,
            report.findings.len(),
            report.slowest.as_secs_f64() * 1000.0,
            report.peak_bytes as f64 / f64::from(1 << 20),
            report.elapsed.as_secs_f64(),
            report.executions as f64 / report.elapsed.as_secs_f64().max(1e-9),
        );
        for f in &report.findings {
            found = true;
            let path = format!("fuzz-findings/{}-{}.bin", report.target, f.execution);
            let _ = fs_err::create_dir_all("fuzz-findings");
            let _ = fs_err::write(&path, &f.input);
            println!("  {} at execution {}: {} (input: {path})", f.kind, f.execution, f.detail);
        }
    }
    println!("seed {seed}");
    if found { std::process::ExitCode::from(1) } else { std::process::ExitCode::SUCCESS }
}
