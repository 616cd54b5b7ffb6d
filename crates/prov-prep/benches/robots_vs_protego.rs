//! Benchmark: the robots.txt matcher against Protego 0.7.0, side by side on the same work.
//!
//! The work is the main job's: parse the 4,231 real robots.txt files of the snapshot, then
//! check each of the 16,308 document URLs against its host's file for the 14 Apertus agents.
//! Both sides run on one core; best of 5. The target is at least 20x Protego.
//!
//! Run with `cargo bench -p prov-prep --bench robots_vs_protego` after `scripts/setup`
//! (which fetches the data and installs Protego into `.venv`).

#![allow(clippy::print_stdout, clippy::unwrap_used, missing_docs)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use prov_prep::APERTUS_AGENTS;
use prov_prep::robots::{CheckOptions, RobotsTxt, request_path};

const RUNS: usize = 5;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let data = root.join("recipes/data/mini-apertus");
    let python = root.join(".venv/bin/python");
    if !data.join("udhr.jsonl").is_file() || !python.is_file() {
        println!("skipping: {} or {} missing; run scripts/setup", data.display(), python.display());
        return;
    }
    let mut bodies = BTreeMap::new();
    for e in fs_err::read_dir(data.join("robots")).unwrap() {
        let e = e.unwrap();
        bodies.insert(e.file_name().to_string_lossy().into_owned(), fs_err::read(e.path()).unwrap());
    }
    let urls: Vec<(String, String)> = fs_err::read_to_string(data.join("udhr.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let url = v["url"].as_str().unwrap().to_owned();
            (url.split('/').nth(2).unwrap().to_owned(), url)
        })
        .collect();

    let (mut best_parse, mut best_check) = (f64::INFINITY, f64::INFINITY);
    let (mut checks, mut disallowed) = (0u64, 0u64);
    for _ in 0..RUNS {
        let t = Instant::now();
        let parsed: BTreeMap<&str, RobotsTxt> = bodies.iter().map(|(h, b)| (h.as_str(), RobotsTxt::parse(b))).collect();
        best_parse = best_parse.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        (checks, disallowed) = (0, 0);
        for (host, url) in &urls {
            let Some(rp) = parsed.get(host.as_str()) else { continue };
            // As the robots stage does: the request path once per URL, then each agent.
            let path = request_path(url);
            for agent in APERTUS_AGENTS {
                checks += 1;
                if !rp.is_allowed(agent, &path, CheckOptions::default()) {
                    disallowed += 1;
                }
            }
        }
        best_check = best_check.min(t.elapsed().as_secs_f64());
    }

    let out = std::process::Command::new(&python)
        .arg(root.join("scripts/bench_robots_protego.py"))
        .arg(&data)
        .arg(RUNS.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "protego side failed: {}", String::from_utf8_lossy(&out.stderr));
    let peer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (p_parse, p_check) = (peer["parse_s"].as_f64().unwrap(), peer["check_s"].as_f64().unwrap());

    println!("robots.txt: {} files, {} URL x agent checks, one core, best of {RUNS}", bodies.len(), checks);
    println!("{:<22} {:>12} {:>12}", "", "prov-prep", "Protego 0.7.0");
    println!("{:<22} {:>10.1}ms {:>10.1}ms", "parse all files", best_parse * 1e3, p_parse * 1e3);
    println!("{:<22} {:>10.1}ms {:>10.1}ms", "check all URLs", best_check * 1e3, p_check * 1e3);
    println!("{:<22} {:>12} {:>12}", "disallowed checks", disallowed, peer["disallowed"]);
    let total = |a: f64, b: f64| a + b;
    let ratio = total(p_parse, p_check) / total(best_parse, best_check);
    println!(
        "speed-up: parse {:.1}x, check {:.1}x, total {ratio:.1}x (target >= 20x: {})",
        p_parse / best_parse,
        p_check / best_check,
        if ratio >= 20.0 { "met" } else { "NOT met" }
    );
}
