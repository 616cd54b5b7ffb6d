//! `AdEMAMix` against the reference implementation's arithmetic in `PyTorch`, bit for bit.
//!
//! The Python side below is Apple's published update rule written out with the same `PyTorch`
//! operations in the same order (in-place `mul_`/`add_(alpha=…)`/`addcmul_(value=…)`, the
//! warmups in plain Python floats), run by the project's `.venv` torch, which is the libtorch
//! this crate links. Both sides start from the same parameter bits and see the same gradient
//! bits at every step; every parameter and every optimizer state must come out with the same
//! bits after each step.

#![allow(clippy::unwrap_used, clippy::print_stderr, missing_docs)]

use prov_train::optimizer::AdEMAMixConfig;
use prov_worker::ademamix::AdEMAMix;
mod common;

use common::bits;
use tch::Tensor;

const REFERENCE: &str = r#"
import json, math, struct, sys, torch

torch.set_num_threads(1)
case = json.load(sys.stdin)
b1, b2, b3_final = case["betas"]
alpha_final, eps, wd = case["alpha"], case["eps"], case["weight_decay"]
alpha_warmup, beta3_warmup = case["alpha_warmup"], case["beta3_warmup"]

def floats(bits):
    return torch.tensor(struct.unpack(f"<{len(bits)}f", struct.pack(f"<{len(bits)}I", *bits)), dtype=torch.float32)

def bits(t):
    values = t.flatten().tolist()
    return list(struct.unpack(f"<{len(values)}I", struct.pack(f"<{len(values)}f", *values)))

def alpha_at(step):
    if step < alpha_warmup:
        a = step / float(alpha_warmup)
        return (1.0 - a) * 0 + a * alpha_final
    return alpha_final

def beta3_at(step):
    f = lambda beta: math.log(0.5) / math.log(beta + 1e-8) - 1
    f_inv = lambda x: math.pow(0.5, 1 / (x + 1))
    if step < beta3_warmup:
        a = step / float(beta3_warmup)
        return f_inv((1.0 - a) * f(b1) + a * f(b3_final))
    return b3_final

params = [(floats(p["bits"]), p["decay"]) for p in case["params"]]
state = [[torch.zeros_like(p) for _ in range(3)] for p, _ in params]
out = []
for step, (lr, grads) in enumerate(zip(case["lrs"], case["grads"]), start=1):
    alpha, b3 = alpha_at(step), beta3_at(step)
    bias_correction1 = 1 - b1 ** step
    bias_correction2 = 1 - b2 ** step
    for (p, decay), (fast, slow, sq), g in zip(params, state, grads):
        grad = floats(g)
        fast.mul_(b1).add_(grad, alpha=1 - b1)
        slow.mul_(b3).add_(grad, alpha=1 - b3)
        sq.mul_(b2).addcmul_(grad, grad, value=1 - b2)
        denom = (sq.sqrt() / math.sqrt(bias_correction2)).add_(eps)
        update = (fast.div(bias_correction1) + alpha * slow) / denom
        if decay:
            update.add_(p, alpha=wd)
        p.add_(update, alpha=-lr)
    out.append([[bits(p)] + [bits(s) for s in st] for (p, _), st in zip(params, state)])
json.dump(out, sys.stdout)
"#;

#[test]
fn steps_equal_the_reference_bit_for_bit() {
    let Some(python) = prov_testkit::venv_python() else { return };
    // Shapes that exercise ATen's vectorised loops and their scalar remainders; one parameter
    // without weight decay.
    let shapes: [(&[i64], bool); 3] = [(&[7, 5], true), (&[13], false), (&[64, 3], true)];
    let steps = 7;
    let mut config = AdEMAMixConfig { alpha_warmup: Some(5), beta3_warmup: Some(4), ..AdEMAMixConfig::default() };
    config.resolve(steps).unwrap();
    let lrs: Vec<f64> = (0..steps).map(|s| 3e-3 * (1.0 + s as f64) / 3.0).collect();

    let params: Vec<Tensor> = shapes
        .iter()
        .enumerate()
        .map(|(i, (shape, _))| {
            let n = shape.iter().product::<i64>() as usize;
            Tensor::from_slice(&prov_testkit::varied_f32(i as u64, n, 0.02)).view(*shape).set_requires_grad(true)
        })
        .collect();
    let grads: Vec<Vec<Vec<f32>>> = (0..steps)
        .map(|s| {
            params
                .iter()
                .enumerate()
                .map(|(i, p)| prov_testkit::varied_f32(1000 + 10 * s + i as u64, p.numel(), 0.5))
                .collect()
        })
        .collect();
    let case = serde_json::json!({
        "betas": config.betas, "alpha": config.alpha, "eps": config.eps, "weight_decay": config.weight_decay,
        "alpha_warmup": config.alpha_warmup, "beta3_warmup": config.beta3_warmup, "lrs": lrs,
        "params": params.iter().zip(&shapes).map(|(p, (_, decay))| serde_json::json!({"bits": bits(p), "decay": decay})).collect::<Vec<_>>(),
        "grads": grads.iter().map(|step| step.iter().map(|g| g.iter().map(|v| v.to_bits()).collect::<Vec<_>>()).collect::<Vec<_>>()).collect::<Vec<_>>(),
    });

    let stdout = prov_testkit::run_python(&python, REFERENCE, case.to_string().as_bytes());
    let reference: Vec<Vec<Vec<Vec<u32>>>> = serde_json::from_slice(&stdout).unwrap();

    let named =
        params.iter().zip(&shapes).enumerate().map(|(i, (p, (_, decay)))| (format!("p{i}"), p.shallow_clone(), *decay));
    let mut optimizer = AdEMAMix::new(config, named.collect());
    let state_names = ["exp_avg_fast", "exp_avg_slow", "exp_avg_sq"];
    for (step, (lr, step_grads)) in lrs.iter().zip(&grads).enumerate() {
        common::set_gradients(&params, step_grads);
        optimizer.step(*lr).unwrap();
        let state = optimizer.state();
        for (i, p) in params.iter().enumerate() {
            let want = &reference[step][i];
            assert_eq!(bits(p), want[0], "parameter p{i} after step {}", step + 1);
            for (k, name) in state_names.iter().enumerate() {
                let got: Vec<u32> = state.0[&format!("p{i}.{name}")].1.iter().map(|v| v.to_bits()).collect();
                assert_eq!(got, want[k + 1], "p{i}.{name} after step {}", step + 1);
            }
        }
    }
}
