//! The post-training learning-rate schedules against transformers itself (pinned in
//! lockfiles/requirements.txt): `get_linear_schedule_with_warmup` and
//! `get_cosine_schedule_with_warmup` driving a PyTorch optimizer, whose rate at every step must
//! equal Provenant's to the bit. Without `.venv` the test fails under `CI=true` and is skipped
//! elsewhere.

#![allow(clippy::unwrap_used, missing_docs)]

use prov_train::schedule::{Cosine, Linear};

/// Python's side: for each `[kind, peak, steps, warmup]` of argv[1], the optimizer's rate
/// before each of the `steps` steps.
const SCRIPT: &str = r#"
import json, sys, torch
from transformers import get_cosine_schedule_with_warmup, get_linear_schedule_with_warmup
out = []
for kind, peak, steps, warmup in json.loads(sys.argv[1]):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=peak)
    make = get_cosine_schedule_with_warmup if kind == "cosine" else get_linear_schedule_with_warmup
    schedule = make(opt, warmup, steps)
    rates = []
    for _ in range(steps):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        schedule.step()
    out.append(rates)
print(json.dumps(out))
"#;

#[test]
fn post_training_schedules_equal_transformers_to_the_bit() {
    let Some(python) = prov_testkit::venv_python() else { return };
    let cases = [
        ("cosine", 2e-5, 120_u64, 12_u64),
        ("cosine", 1e-3, 7, 0),
        ("cosine", 3e-4, 50, 49),
        ("linear", 1e-3, 40, 4),
        ("linear", 7e-6, 9, 0),
    ];
    let arg = serde_json::to_string(&cases).unwrap();
    let out = prov_testkit::pipe(&python, &["-c", SCRIPT, &arg], b"");
    let theirs: Vec<Vec<f64>> = serde_json::from_slice(&out).unwrap();
    for ((kind, peak, steps, warmup), rates) in cases.iter().zip(&theirs) {
        let ours: Vec<f64> = (1..=*steps)
            .map(|step| match *kind {
                "cosine" => Cosine::new(*peak, *steps, *warmup).lr(step),
                _ => Linear::new(*peak, *steps, *warmup).lr(step),
            })
            .collect();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&ours),
            bits(rates),
            "{kind} peak {peak}, {steps} steps, {warmup} warmup: {ours:?} vs {rates:?}"
        );
    }
}
