//! Phased pretraining against Megatron-LM itself (megatron-core, pinned in
//! lockfiles/requirements.txt), the trainer EuroLLM used:
//! - each phase's learning rates equal those `OptimizerParamScheduler` sets on a PyPI
//!   optimizer, step after step, to the bit;
//! - each phase's weights normalise to `megatron.core.datasets.utils.normalize`'s bits, and
//!   its blend equals `build_blending_indices` (megatron-core's compiled helper) on them, slot
//!   for slot.
//!
//! Without `.venv` the test fails under `CI=true` and is skipped elsewhere.

#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::BTreeMap;

use prov_train::phases::{self, PhaseParams, Plan};

/// Python's side. argv[1]: `{"rates": [[max, min, warmup, steps]...], "blends": [[weights,
/// size]...]}`. Prints the rates of each segment (`OptimizerParamScheduler` from `num_steps`
/// 0, stepped once per optimizer step) and each blend's `(dataset_index,
/// dataset_sample_index)`.
const SCRIPT: &str = r#"
import json, sys, logging, warnings
logging.disable(logging.CRITICAL)
warnings.filterwarnings("ignore")
import numpy, torch
from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler
from megatron.core.datasets import helpers
from megatron.core.datasets.utils import normalize
job = json.loads(sys.argv[1])
rates = []
for top, bottom, warmup, steps in job["rates"]:
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=top)
    style = "constant" if top == bottom else "linear"
    s = OptimizerParamScheduler(opt, init_lr=0.0, max_lr=top, min_lr=bottom, lr_warmup_steps=warmup,
        lr_decay_steps=steps, lr_decay_style=style, start_wd=0.0, end_wd=0.0, wd_incr_steps=steps,
        wd_incr_style="constant")
    seen = []
    for _ in range(steps):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        s.step(1)
    rates.append(seen)
blends = []
for weights, size in job["blends"]:
    index = numpy.zeros(size, dtype=numpy.int16)
    sample = numpy.zeros(size, dtype=numpy.int64)
    helpers.build_blending_indices(index, sample, normalize(weights), len(weights), size, False)
    blends.append([index.tolist(), sample.tolist(), normalize(weights)])
print(json.dumps({"rates": rates, "blends": blends}))
"#;

fn phase(name: &str, steps: u64, mixture: &[(&str, f64)]) -> PhaseParams {
    PhaseParams::new(name, steps, mixture)
}

/// Weights a test draws: not round numbers, some far apart, so normalisation rounds.
fn odd_weights(n: usize, seed: u64) -> Vec<f64> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((x >> 11) as f64 / (1u64 << 53) as f64) * 10f64.powi(i32::try_from(x % 4).unwrap()) + 1e-3
        })
        .collect()
}

#[test]
fn phased_rates_and_blends_equal_megatron_core() {
    let Some(python) = prov_testkit::venv_python() else { return };
    // EuroLLM's three phases, then segments that exercise every rule: a long warm-up, a later
    // phase with its own warm-up, a one-step phase, an explicit restart of the rate.
    let mut eurollm = vec![
        phase("one", 300, &[("web", 0.7), ("code", 0.1), ("parallel", 0.2)]),
        phase("two", 70, &[("web", 0.4), ("top", 0.5), ("parallel", 0.1)]),
        phase("three", 30, &[("top", 0.8), ("long", 0.2)]),
    ];
    eurollm[1].lr_end = Some(0.1);
    eurollm[2].lr_end = Some(0.0);
    phases::resolve(&mut eurollm, 1e4).unwrap();
    let mut odd = vec![phase("a", 9, &[("x", 1.0)]), phase("b", 17, &[("x", 1.0)]), phase("c", 1, &[("x", 1.0)])];
    odd[0].warmup_steps = Some(8);
    odd[0].lr_end = Some(0.3);
    odd[1].warmup_steps = Some(5);
    odd[1].lr_start = Some(0.75);
    odd[1].lr_end = Some(0.125);
    phases::resolve(&mut odd, 1e4).unwrap();
    let segments: Vec<_> =
        phases::rates(&eurollm, 3e-4).into_iter().chain(phases::rates(&odd, 7.3e-3)).collect::<Vec<_>>();

    let blends: Vec<(Vec<f64>, u64)> = vec![
        (vec![0.7, 0.1, 0.2], 2400),
        (vec![1.0], 10),
        (vec![1.0, 1.0], 101),
        (odd_weights(3, 1), 5000),
        (odd_weights(7, 2), 3001),
        (odd_weights(8, 3), 2048),
        (odd_weights(13, 4), 4099),
        (odd_weights(40, 5), 7000),
        (odd_weights(300, 6), 9000),
    ];
    let job = serde_json::json!({
        "rates": segments.iter().map(|s| serde_json::json!([s.max, s.min, s.warmup, s.steps])).collect::<Vec<_>>(),
        "blends": blends.iter().map(|(w, n)| serde_json::json!([w, n])).collect::<Vec<_>>(),
    });
    let out = prov_testkit::pipe(&python, &["-c", SCRIPT, &job.to_string()], b"");
    let theirs: serde_json::Value = serde_json::from_slice(&out).unwrap();

    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for (i, (segment, rates)) in segments.iter().zip(theirs["rates"].as_array().unwrap()).enumerate() {
        let rates: Vec<f64> = serde_json::from_value(rates.clone()).unwrap();
        let ours: Vec<f64> = (0..segment.steps).map(|t| segment.lr(t)).collect();
        assert_eq!(bits(&ours), bits(&rates), "segment {i} {segment:?}: {ours:?} vs {rates:?}");
    }
    // The whole run's schedule is the segments one after another.
    let run = prov_train::schedule::Phased::new(phases::rates(&eurollm, 3e-4));
    let first: Vec<f64> = serde_json::from_value(theirs["rates"][0].clone()).unwrap();
    let second: Vec<f64> = serde_json::from_value(theirs["rates"][1].clone()).unwrap();
    assert_eq!(run.lr(300).to_bits(), first[299].to_bits());
    assert_eq!(run.lr(301).to_bits(), second[0].to_bits());

    for ((weights, size), blend) in blends.iter().zip(theirs["blends"].as_array().unwrap()) {
        let (index, sample, normalised): (Vec<u16>, Vec<u64>, Vec<f64>) =
            serde_json::from_value(blend.clone()).unwrap();
        assert_eq!(bits(&phases::normalise(weights)), bits(&normalised), "{} weights normalised", weights.len());
        let ours = phases::blend(weights, *size);
        let (our_index, our_sample): (Vec<u16>, Vec<u64>) = ours.into_iter().unzip();
        let first_difference = our_index.iter().zip(&index).position(|(a, b)| a != b);
        assert_eq!(first_difference, None, "{} weights, {size} slots", weights.len());
        assert_eq!(our_sample, sample);
    }

    // A plan's slots are the blends of its phases, each source continuing its own order.
    let plan = Plan::new(&eurollm, 8);
    let mut next: BTreeMap<String, u64> = BTreeMap::new();
    for (p, params) in eurollm.iter().enumerate() {
        let names: Vec<&String> = params.mixture.keys().collect();
        let weights: Vec<f64> = params.mixture.values().copied().collect();
        for (slot, (d, _)) in plan.phase_slots(p).zip(phases::blend(&weights, params.steps * 8)) {
            let source = names[usize::from(d)];
            assert_eq!(&slot.source, source);
            let at = next.entry(source.clone()).or_default();
            assert_eq!(slot.position, *at);
            *at += 1;
        }
    }
    assert_eq!(&next, plan.needed());
}
