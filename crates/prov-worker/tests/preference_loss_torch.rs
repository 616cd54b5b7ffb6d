//! DPO and QRPO losses and their gradients against independent computations:
//!
//! - `losses_and_gradients_equal_pytorch`: the `.venv`'s `PyTorch`, written from the
//!   formulas (`log_softmax` + `gather` + a masked sum, `F.logsigmoid`, `log Z` by its
//!   definition `log(beta * expm1(1/beta))`), on random logits with prompt, completion and
//!   padding positions; loss, per-sequence log-probabilities and the gradient with respect to
//!   every logit, in `f64` and `f32`.
//! - `qrpo_at_5000_tokens_equals_high_precision`: QRPO with completions of 5,000, 20,000,
//!   444 and 445 tokens (length-normalised, beta 5) against `mpmath` at 50 digits, loss and
//!   gradient, where `exp(|y|/beta)` overflows `f32` (from 444 tokens on) and `f64` (5,000).
//!
//! Without `.venv` the tests fail under `CI=true` and are skipped (with a message) elsewhere.

#![allow(clippy::unwrap_used, clippy::print_stderr, clippy::cast_possible_wrap, missing_docs)]

use prov_train::alignment::{DpoConfig, QrpoConfig};
use prov_worker::preference_loss::{Completions, completion_log_probs, dpo_loss, qrpo_loss};
use serde_json::{Value, json};
use tch::{Kind, Tensor};

/// Runs `script` on `input` (JSON on stdin) and parses its JSON output.
fn python(script: &str, input: &Value) -> Option<Value> {
    let python = prov_testkit::venv_python()?;
    Some(serde_json::from_slice(&prov_testkit::run_python(&python, script, input.to_string().as_bytes())).unwrap())
}

fn f64s(t: &Tensor) -> Vec<f64> {
    Vec::try_from(&t.to_kind(Kind::Double).reshape([-1])).unwrap()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

/// The largest `|a - b| / max(1, |b|)`.
fn max_rel_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs() / y.abs().max(1.0)).fold(0.0, f64::max)
}

const TORCH: &str = r#"
import json, sys, torch
import torch.nn.functional as F
torch.set_num_threads(1)
c = json.load(sys.stdin)
dtype = {"f64": torch.float64, "f32": torch.float32}[c["kind"]]
B, T, V = c["shape"]
labels = torch.tensor(c["labels"]).view(B, T)
mask = torch.tensor(c["mask"]).view(B, T).bool()

def seq_logps(logits):
    lp = torch.log_softmax(logits, dim=-1)
    picked = torch.gather(lp, 2, torch.where(mask, labels, 0).unsqueeze(-1)).squeeze(-1)
    s = torch.where(mask, picked, torch.zeros_like(picked)).sum(-1)
    return s, s / mask.sum(-1)

ref_sum, _ = seq_logps(torch.tensor(c["reference_logits"], dtype=dtype).view(B, T, V))
tokens = mask.sum(-1).double()
out = []
for case in c["cases"]:
    logits = torch.tensor(c["logits"], dtype=dtype).view(B, T, V).requires_grad_(True)
    s, mean = seq_logps(logits)
    beta = torch.full((B,), case["beta"], dtype=torch.float64)
    if case["length_normalised"]:
        beta = beta / tokens
    ratio = s - ref_sum
    if case["loss"] == "dpo":
        h = B // 2
        b = beta.to(dtype)
        loss = (-F.logsigmoid(b[:h] * ratio[:h] - b[h:] * ratio[h:])).mean()
    else:
        log_z = torch.log(beta * torch.expm1(1 / beta))
        target = (torch.tensor(case["quantile_rewards"], dtype=torch.float64) - beta * log_z).to(dtype)
        loss = ((target - beta.to(dtype) * ratio) ** 2).mean()
    loss.backward()
    out.append({"loss": loss.item(), "sum": s.tolist(), "mean": mean.tolist(), "grad": logits.grad.flatten().tolist()})
print(json.dumps(out))
"#;

/// A deterministic stream of values in `[-scale, scale)`.
fn values(n: usize, seed: u64, scale: f64) -> Vec<f64> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * scale
        })
        .collect()
}

#[test]
fn losses_and_gradients_equal_pytorch() {
    let (b, t, v) = (6usize, 9usize, 13usize);
    // Per sequence: prompt tokens (masked), completion tokens, padding (masked).
    let layout = [(2, 5), (0, 9), (4, 1), (3, 3), (1, 7), (6, 2)];
    let mut mask = Vec::new();
    let mut labels = Vec::new();
    let label_values = values(b * t, 7, 1.0);
    for (row, &(prompt, completion)) in layout.iter().enumerate() {
        for i in 0..t {
            let inside = i >= prompt && i < prompt + completion;
            mask.push(inside);
            let label = (f64::midpoint(label_values[row * t + i], 1.0) * v as f64) as i64;
            labels.push(if inside { label.min(v as i64 - 1) } else { -100 });
        }
    }
    let cases = [
        json!({"loss": "dpo", "beta": 0.1, "length_normalised": false}),
        json!({"loss": "dpo", "beta": 0.5, "length_normalised": true}),
        json!({"loss": "qrpo", "beta": 5.0, "length_normalised": true, "quantile_rewards": [0.0, 0.2, 0.5, 0.5, 0.8, 1.0]}),
        json!({"loss": "qrpo", "beta": 0.3, "length_normalised": false, "quantile_rewards": [1.0, 0.9, 0.1, 0.0, 0.4, 0.6]}),
    ];
    for (kind, name, tolerance) in [(Kind::Double, "f64", 1e-12), (Kind::Float, "f32", 2e-5)] {
        // Values representable in the kind, so that both sides start from the same bits.
        let round = |x: Vec<f64>| -> Vec<f64> { f64s(&Tensor::from_slice(&x).to_kind(kind)) };
        let logits_values = round(values(b * t * v, 11, 4.0));
        let reference_values = round(values(b * t * v, 13, 4.0));
        let shape = [b as i64, t as i64, v as i64];
        let labels_t = Tensor::from_slice(&labels).view([b as i64, t as i64]);
        let mask_t = Tensor::from_slice(&mask).view([b as i64, t as i64]);
        let reference_logits = Tensor::from_slice(&reference_values).to_kind(kind).view(shape);
        let reference = tch::no_grad(|| completion_log_probs(&reference_logits, &labels_t, &mask_t).unwrap());

        let mut ours = Vec::new();
        for case in &cases {
            let mut logits = Tensor::from_slice(&logits_values).to_kind(kind).view(shape).set_requires_grad(true);
            logits.zero_grad();
            let policy = completion_log_probs(&logits, &labels_t, &mask_t).unwrap();
            let beta = case["beta"].as_f64().unwrap();
            let length_normalised = case["length_normalised"].as_bool().unwrap();
            let loss = if case["loss"] == "dpo" {
                let h = b as i64 / 2;
                let (pw, pl) = (policy.sum.narrow(0, 0, h), policy.sum.narrow(0, h, h));
                let (rw, rl) = (reference.sum.narrow(0, 0, h), reference.sum.narrow(0, h, h));
                let (tw, tl) = policy.tokens.split_at(b / 2);
                let chosen = Completions { policy: &pw, reference: &rw, tokens: tw };
                let rejected = Completions { policy: &pl, reference: &rl, tokens: tl };
                dpo_loss(&DpoConfig { beta, length_normalised }, &chosen, &rejected).unwrap()
            } else {
                let q = floats(&case["quantile_rewards"]);
                let all = Completions { policy: &policy.sum, reference: &reference.sum, tokens: &policy.tokens };
                qrpo_loss(&QrpoConfig { beta, length_normalised }, &all, &q).unwrap()
            };
            loss.mean.backward();
            assert_eq!(loss.mean.kind(), kind);
            ours.push((loss.mean.double_value(&[]), f64s(&policy.sum), f64s(&policy.mean), f64s(&logits.grad())));
        }

        let input = json!({
            "kind": name, "shape": [b, t, v], "labels": labels, "mask": mask,
            "logits": logits_values, "reference_logits": reference_values, "cases": cases,
        });
        let Some(theirs) = python(TORCH, &input) else { return };
        let mut worst = [0.0f64; 4];
        for ((loss, sum, mean, grad), (case, py)) in ours.iter().zip(cases.iter().zip(theirs.as_array().unwrap())) {
            let diffs = [
                max_rel_diff(&[*loss], &[py["loss"].as_f64().unwrap()]),
                max_rel_diff(sum, &floats(&py["sum"])),
                max_rel_diff(mean, &floats(&py["mean"])),
                max_rel_diff(grad, &floats(&py["grad"])),
            ];
            for (w, d) in worst.iter_mut().zip(diffs) {
                *w = w.max(d);
            }
            assert!(diffs.iter().all(|&d| d <= tolerance), "{name} {case}: loss, sum, mean, grad differ by {diffs:?}");
            assert!(grad.iter().any(|&g| g != 0.0));
        }
        eprintln!(
            "{name}: largest relative differences from PyTorch: loss {:e}, log-prob sums {:e}, means {:e}, gradients {:e}",
            worst[0], worst[1], worst[2], worst[3]
        );
    }
}

const MPMATH: &str = r#"
import json, sys, torch
from mpmath import mp, mpf, exp, log
mp.dps = 50
c = json.load(sys.stdin)
n = len(c["tokens"])
loss = mpf(0)
grad = []
for y, pi, ref, q in zip(c["tokens"], c["policy"], c["reference"], c["quantile_rewards"]):
    beta = mpf(c["beta"]) / y
    log_z = log(beta * (exp(1 / beta) - 1))
    r = q - beta * log_z - beta * (mpf(pi) - mpf(ref))
    loss += r * r / n
    grad.append(float(-2 * beta * r / n))
# The naive float32 log Z overflows from 444 tokens on (exp(444 / 5) > float32 max).
naive = lambda y: torch.log(torch.tensor(5.0 / y) * (torch.exp(torch.tensor(y / 5.0)) - 1)).item()
finite = lambda x: x not in (float("inf"), float("-inf")) and x == x
print(json.dumps({"loss": float(loss), "grad": grad, "naive_443_finite": finite(naive(443)), "naive_444_finite": finite(naive(444))}))
"#;

#[test]
fn qrpo_at_5000_tokens_equals_high_precision() {
    let tokens = [5000i64, 20_000, 444, 445, 4000, 7];
    let policy_values = [-9000.25, -30_000.5, -700.0, -701.5, -6000.0, -3.5];
    let reference_values = [-9010.0, -30_000.0, -690.25, -705.0, -6000.0, -4.0];
    let quantile_rewards = [1.0, 0.0, 0.3, 0.7, 0.5, 0.9];
    let input = json!({
        "beta": 5.0, "tokens": tokens, "policy": policy_values, "reference": reference_values,
        "quantile_rewards": quantile_rewards,
    });
    let Some(exact) = python(MPMATH, &input) else { return };
    assert_eq!(
        (&exact["naive_443_finite"], &exact["naive_444_finite"]),
        (&json!(true), &json!(false)),
        "the naive f32 log Z"
    );
    let want_loss = exact["loss"].as_f64().unwrap();
    let want_grad = floats(&exact["grad"]);
    for (kind, tolerance) in [(Kind::Double, 1e-13), (Kind::Float, 1e-6)] {
        let policy = Tensor::from_slice(&policy_values).to_kind(kind).set_requires_grad(true);
        let reference = Tensor::from_slice(&reference_values).to_kind(kind);
        let c = Completions { policy: &policy, reference: &reference, tokens: &tokens };
        let loss = qrpo_loss(&QrpoConfig::default(), &c, &quantile_rewards).unwrap();
        loss.mean.backward();
        let got = loss.mean.double_value(&[]);
        let grad = f64s(&policy.grad());
        assert!(got.is_finite() && grad.iter().all(|g| g.is_finite()));
        let (dl, dg) = (max_rel_diff(&[got], &[want_loss]), max_rel_diff(&grad, &want_grad));
        eprintln!(
            "{kind:?}, |y| up to 20,000: loss {got} (mpmath {want_loss}), relative differences: loss {dl:e}, gradient {dg:e}"
        );
        assert!(dl <= tolerance && dg <= tolerance, "{kind:?}: loss {dl:e}, gradient {dg:e}");
    }
}
