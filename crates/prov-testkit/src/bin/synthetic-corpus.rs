//! `synthetic-corpus --size SIZE --out DIR [--seed N] [--from CORPUS_DIR] [--robots ROBOTS_DIR]`:
//! writes a deterministic synthetic corpus of SIZE bytes (`500M`, `20G`) under `DIR/corpus/`
//! (see `prov_testkit::synthetic`). The defaults read the main job's data in this repository.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

fn parse_size(s: &str) -> Option<u64> {
    let (digits, unit) = s.trim().split_at(s.trim().find(|c: char| !c.is_ascii_digit()).unwrap_or(s.trim().len()));
    let n: u64 = digits.parse().ok()?;
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => return None,
    };
    n.checked_mul(1 << shift)
}

fn main() -> ExitCode {
    let data = prov_testkit::repo_root().join("recipes/data/mini-apertus");
    let (mut size, mut out, mut seed) = (None, None, 20_250_131u64);
    let (mut corpus, mut robots) = (data.join("corpus"), data.join("robots"));
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next();
        match (flag.as_str(), value) {
            ("--size", Some(v)) => size = parse_size(&v),
            ("--out", Some(v)) => out = Some(PathBuf::from(v)),
            ("--seed", Some(v)) => seed = v.parse().unwrap_or(seed),
            ("--from", Some(v)) => corpus = PathBuf::from(v),
            ("--robots", Some(v)) => robots = PathBuf::from(v),
            _ => {
                eprintln!(
                    "usage: synthetic-corpus --size SIZE --out DIR [--seed N] [--from CORPUS_DIR] [--robots ROBOTS_DIR]"
                );
                return ExitCode::from(1);
            }
        }
    }
    let (Some(size), Some(out)) = (size, out) else {
        eprintln!("synthetic-corpus: --size (like 500M or 20G) and --out are required");
        return ExitCode::from(1);
    };
    let material = match prov_testkit::synthetic::Material::load(&corpus, &robots) {
        Ok(m) => m,
        Err(e) => {
            eprintln!(
                "synthetic-corpus: {e} (corpus {}, robots {}; scripts/setup fetches them)",
                corpus.display(),
                robots.display()
            );
            return ExitCode::from(1);
        }
    };
    match prov_testkit::synthetic::write_corpus(&material, size, seed, &out) {
        Ok((docs, bytes)) => {
            println!("{docs} documents, {bytes} bytes in {}", out.join("corpus").display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("synthetic-corpus: {e}");
            ExitCode::from(1)
        }
    }
}
