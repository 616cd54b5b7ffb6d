//! AFM's RMSProp with momentum against an independent `PyTorch` implementation, bit for bit.
//!
//! `tests/python/rmsprop_momentum_reference.py` was written from the book's specification
//! ("The AFM recipe", "The optimizer: RMSProp with momentum"), which gives the update as a list
//! of `PyTorch` operations, without the Rust code. It is a transcription of that page (the
//! report gives prose, not code; AXLearn, which AFM ran, is JAX and cannot run here), so what it
//! shows is that the worker computes exactly the rule the book states, reading by reading:
//! both clip measures and both weight-decay scalings, over steps whose learning rate rises and
//! falls. Both sides start from the same parameter bits and see the same gradient bits at every
//! step; every parameter and both state tensors must come out with the same bits after each
//! step.

#![allow(clippy::unwrap_used, clippy::print_stderr, missing_docs)]

use prov_train::optimizer::{RmsPropMomentumConfig, UpdateClip, WeightDecayScale};
use prov_worker::rmsprop::RmsPropMomentum;
mod common;

use common::bits;
use tch::Tensor;

/// Runs `steps` steps of `config` on both sides and compares after each.
fn compare(python: &std::path::Path, config: &RmsPropMomentumConfig, steps: u64) {
    // Shapes that exercise ATen's vectorised loops and their scalar remainders; one parameter
    // without weight decay; gradients whose size varies over the steps (a few blocks clip).
    let shapes: [(&[i64], bool); 3] = [(&[7, 5], true), (&[13], false), (&[64, 3], true)];
    // Named as a model names them: two projection matrices, which μParam (simple) scales in a
    // model of width 64, and a norm, which it does not.
    let names = [
        "model.layers.0.self_attn.q_proj.weight",
        "model.layers.0.input_layernorm.weight",
        "model.layers.0.mlp.down_proj.weight",
    ];
    let scale = config.linear_update_scale(64);
    let scales: Vec<f64> =
        names.iter().map(|n| if prov_worker::model::is_linear_projection(n) { scale } else { 1.0 }).collect();
    let peak = 2e-2;
    let lrs: Vec<f64> = (0..steps).map(|s| peak * [0.25, 0.5, 1.0, 1.0, 0.75, 0.5, 0.3, 0.1][s as usize % 8]).collect();
    let params: Vec<Tensor> = shapes
        .iter()
        .enumerate()
        .map(|(i, (shape, _))| {
            let n = shape.iter().product::<i64>() as usize;
            Tensor::from_slice(&prov_testkit::varied_f32(i as u64, n, 0.05)).view(*shape).set_requires_grad(true)
        })
        .collect();
    let grads: Vec<Vec<Vec<f32>>> = (0..steps)
        .map(|s| {
            let scale = if s % 3 == 2 { 40.0 } else { 0.5 };
            params
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    // One parameter sees a zero gradient at step 4: `eps_square` keeps 0/0 away.
                    if s == 3 && i == 1 {
                        vec![0.0; p.numel()]
                    } else {
                        prov_testkit::varied_f32(1000 + 10 * s + i as u64, p.numel(), scale)
                    }
                })
                .collect()
        })
        .collect();
    let case = serde_json::json!({
        "betas": config.betas, "eps_square": config.eps_square, "eps": config.eps,
        "update_clip": config.update_clip, "clip": config.clip, "weight_decay": config.weight_decay,
        "weight_decay_scale": config.weight_decay_scale, "peak_lr": peak, "lrs": lrs,
        "params": params.iter().zip(&shapes).zip(&scales).map(|((p, (shape, decay)), mu)| serde_json::json!({"bits": bits(p), "shape": shape, "decay": decay, "update_scale": mu})).collect::<Vec<_>>(),
        "grads": grads.iter().map(|step| step.iter().map(|g| g.iter().map(|v| v.to_bits()).collect::<Vec<_>>()).collect::<Vec<_>>()).collect::<Vec<_>>(),
    });
    let script = prov_testkit::repo_root().join("crates/prov-worker/tests/python/rmsprop_momentum_reference.py");
    let stdout = prov_testkit::pipe(python, &[script.to_str().unwrap()], case.to_string().as_bytes());
    let reference: Vec<Vec<Vec<Vec<u32>>>> = serde_json::from_slice(&stdout).unwrap();

    let slots =
        params.iter().zip(&shapes).zip(names).map(|((p, (_, decay)), n)| (n.to_owned(), p.shallow_clone(), *decay));
    let mut optimizer = RmsPropMomentum::new(config.clone(), peak, slots.collect()).with_linear_update_scale(scale);
    for (step, (lr, step_grads)) in lrs.iter().zip(&grads).enumerate() {
        common::set_gradients(&params, step_grads);
        optimizer.step(*lr).unwrap();
        let state = optimizer.state();
        for (i, p) in params.iter().enumerate() {
            let want = &reference[step][i];
            let at = format!(
                "{:?}/{:?} (betas {:?}, eps {}, clip at {}, μ {}), p{i} after step {}",
                config.clip,
                config.weight_decay_scale,
                config.betas,
                config.eps,
                config.update_clip,
                scales[i],
                step + 1
            );
            assert_eq!(bits(p), want[0], "parameter: {at}");
            for (k, name) in ["gradient_square_ema", "update_ema"].iter().enumerate() {
                let got: Vec<u32> = state.0[&format!("{}.{name}", names[i])].1.iter().map(|v| v.to_bits()).collect();
                assert_eq!(got, want[k + 1], "{name}: {at}");
            }
        }
    }
}

#[test]
fn every_reading_equals_the_independent_implementation_bit_for_bit() {
    let Some(python) = prov_testkit::venv_python() else { return };
    let defaults: RmsPropMomentumConfig =
        serde_json::from_value(serde_json::json!({"kind": "rmsprop-momentum", "weight_decay": 0.05})).unwrap();
    for clip in [UpdateClip::Rms, UpdateClip::Norm] {
        for weight_decay_scale in [WeightDecayScale::Schedule, WeightDecayScale::LearningRate] {
            compare(&python, &RmsPropMomentumConfig { clip, weight_decay_scale, ..defaults.clone() }, 9);
        }
    }
    // Other constants reach the same operations: an `eps`, other decays, a tighter clip.
    let other = RmsPropMomentumConfig { betas: [0.9, 0.99], eps: 1e-8, update_clip: 0.5, ..defaults.clone() };
    compare(&python, &other, 6);
    // μParam (simple) with a base of width 16 in a model of width 64: the projections' updates
    // are scaled by 1/4 before the learning rate, under both weight-decay readings.
    for weight_decay_scale in [WeightDecayScale::Schedule, WeightDecayScale::LearningRate] {
        let mup = RmsPropMomentumConfig { mup_base_hidden_size: Some(16), weight_decay_scale, ..defaults.clone() };
        assert!((mup.linear_update_scale(64) - 0.25).abs() < f64::EPSILON);
        compare(&python, &mup, 6);
    }
}
