//! The short campaign CI runs: every target, a few thousand mutated inputs each, no panic,
//! no execution over the time bound, no allocation over the memory bound. The long campaign
//! (10^6 executions per target) is `scripts/fuzz`; its figures are in the book's reliability
//! page.

#![allow(clippy::print_stderr)]

use prov_fuzz::{CountingAllocator, Limits, campaign, targets};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[test]
fn every_reader_survives_a_short_campaign() {
    for target in targets::all() {
        assert!(!target.corpus.is_empty(), "{}: no seeds", target.name);
        let report = campaign(&target, 3_000, 1, Limits::default());
        assert_eq!(report.executions, 3_000);
        eprintln!("{}: {} executions in {:?}", report.target, report.executions, report.elapsed);
        for f in &report.findings {
            eprintln!(
                "{} {} at {}: {} ({} bytes of input)",
                report.target,
                f.kind,
                f.execution,
                f.detail,
                f.input.len()
            );
        }
        assert!(report.findings.is_empty(), "{}: {} findings", report.target, report.findings.len());
    }
}
