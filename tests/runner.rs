//! End-to-end tests of the `prov` binary: one test binary, one module per command or theme.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr, missing_docs)]

mod common;

mod test_adapters;
mod test_afm;
mod test_afm_alignment;
mod test_afm_code;
mod test_attest;
mod test_audit;
mod test_card;
mod test_cli_output;
mod test_concurrency;
mod test_decontaminate;
mod test_dedup;
mod test_exit_codes;
mod test_explain;
mod test_explain_pii;
mod test_extends;
mod test_goldfish;
mod test_heuristics;
mod test_house;
mod test_kill;
mod test_langid;
mod test_license;
mod test_license_review;
mod test_lockfile_edits;
mod test_main_job;
mod test_mini_afm;
mod test_mini_eurollm;
mod test_ngram;
mod test_palette;
mod test_parallel;
mod test_pii;
mod test_post_training;
mod test_project_paths;
mod test_prove;
mod test_quality;
mod test_quickstart;
mod test_real_data;
mod test_recipe_errors;
mod test_replay;
mod test_robots;
mod test_sandbox;
mod test_serve;
mod test_serve_review;
mod test_slurm;
mod test_tokenizer;
mod test_toxicity;
mod test_train;
mod test_verify;
mod test_worker;

/// Fails when a `test_*.rs` file exists in tests/ without being listed above.
#[test]
fn every_test_file_is_listed() {
    let runner = include_str!("runner.rs");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests");
    for entry in fs_err::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if let Some(module) = name.strip_prefix("test_").and_then(|n| n.strip_suffix(".rs")) {
            assert!(runner.contains(&format!("mod test_{module};")), "tests/{name} is not listed in tests/runner.rs");
        }
    }
}
