//! Trains a model from stdin (one sentence per line, tokens separated by spaces) and writes
//! its ARPA text to stdout, with the time of each step on stderr: `train_arpa ORDER [fallback]`.
#![allow(clippy::print_stdout, clippy::print_stderr, clippy::unwrap_used, missing_docs)]
use std::io::Read as _;
use std::time::Instant;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let order: usize = args[1].parse().unwrap();
    let fallback = args.get(2).map(|_| prov_ngram::Discounts([0.5, 1.0, 1.5]));
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).unwrap();
    let t0 = Instant::now();
    let mut t = prov_ngram::Trainer::new(order).unwrap();
    for line in text.lines() {
        t.add_sentence(line.split([' ', '\t', '\r', '\0']));
    }
    let t1 = Instant::now();
    let arpa = t.estimate(fallback).unwrap();
    let t2 = Instant::now();
    let out = arpa.write();
    let t3 = Instant::now();
    print!("{out}");
    eprintln!("count {:?} estimate {:?} write {:?}", t1 - t0, t2 - t1, t3 - t2);
}
