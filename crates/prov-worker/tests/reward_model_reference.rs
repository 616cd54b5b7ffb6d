//! AFM's reward model loss (Appendix E.1) against `PyTorch`, bit for bit: the loss and its
//! gradients with respect to the scores and every grade head's logits.
//!
//! `tests/python/reward_model_reference.py` was written by a helper from the book's "The AFM
//! recipe" (The model and its loss) alone, without reading this code: a transcription of the
//! report's equations as that page states them (the report releases no implementation). What
//! it shows is that the worker computes the stated loss, with the report's soft labels for
//! all four levels, on the same libtorch.

#![allow(clippy::unwrap_used, clippy::print_stderr, clippy::cast_possible_wrap, missing_docs)]

use prov_train::preference_data::Level;
use tch::{Kind, Tensor};

fn bits(t: &Tensor) -> Vec<u64> {
    prov_torch::f32_values(t).iter().map(|v| u64::from(v.to_bits())).collect()
}

fn expected(v: &serde_json::Value) -> Vec<u64> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect()
}

#[test]
fn the_reward_model_loss_and_its_gradients_equal_pytorch_bit_for_bit() {
    const B: usize = 9;
    let Some(python) = prov_testkit::venv_python() else { return };
    let levels: Vec<Level> = (0..B).map(|i| Level::ALL[i % 4]).collect();
    let score_values = prov_testkit::varied_f32(3, 2 * B, 4.0);
    let logit_values: Vec<Vec<f32>> = (0..4).map(|h| prov_testkit::varied_f32(10 + h, 2 * B * 3, 5.0)).collect();
    let grades: Vec<Vec<i64>> = (0..4).map(|h| (0..2 * B as i64).map(|i| (i * 7 + h) % 3).collect()).collect();
    for lam in [1.0, 0.25, 0.0] {
        let scores = Tensor::from_slice(&score_values).set_requires_grad(true);
        let logits: Vec<Tensor> = logit_values
            .iter()
            .map(|v| Tensor::from_slice(v).view([2 * B as i64, 3]).set_requires_grad(true))
            .collect();
        let grade_tensors: Vec<Tensor> = grades.iter().map(|g| Tensor::from_slice(g)).collect();
        let p: Vec<f32> = levels.iter().map(|l| l.probability() as f32).collect();
        let loss = prov_worker::reward_model::reward_model_loss(
            &scores,
            &logits,
            &grade_tensors,
            &Tensor::from_slice(&p),
            lam,
        );
        loss.backward();
        let case = serde_json::json!({
            "pairs": B,
            "levels": levels.iter().map(|l| l.name()).collect::<Vec<_>>(),
            "lambda": lam,
            "scores": score_values.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "grade_logits": logit_values.iter().map(|l| l.iter().map(|v| v.to_bits()).collect::<Vec<_>>()).collect::<Vec<_>>(),
            "grades": grades,
        });
        let script = prov_testkit::repo_root().join("crates/prov-worker/tests/python/reward_model_reference.py");
        let out = prov_testkit::pipe(&python, &[script.to_str().unwrap()], case.to_string().as_bytes());
        let reference: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(loss.kind(), Kind::Float);
        assert_eq!(bits(&loss)[0], reference["loss"].as_u64().unwrap(), "loss, lambda = {lam}");
        assert_eq!(bits(&scores.grad()), expected(&reference["grad_scores"]), "score gradient, lambda = {lam}");
        for (h, l) in logits.iter().enumerate() {
            assert_eq!(
                bits(&l.grad().view([-1])),
                expected(&reference["grad_logits"][h]),
                "head {h}'s gradient, lambda = {lam}"
            );
        }
        eprintln!("lambda = {lam}: loss {}", loss.double_value(&[]));
    }
}

/// The ranking term is the soft-label binary cross-entropy of the score difference (checked in
/// double precision against the definition rather than the operation list): with equal scores
/// it is log 2 whatever the level, and a pair scored the right way round costs less than the
/// same pair reversed.
#[test]
fn the_ranking_term_is_the_soft_label_cross_entropy() {
    let p = Tensor::from_slice(&[0.95f32, 0.65]);
    // One grade head, weighted 0: only the ranking term counts.
    let logits = [Tensor::zeros([4, 3], (Kind::Float, tch::Device::Cpu))];
    let grades = [Tensor::from_slice(&[0i64, 1, 2, 0])];
    let loss = |s: [f32; 4]| {
        prov_worker::reward_model::reward_model_loss(&Tensor::from_slice(&s), &logits, &grades, &p, 0.0)
            .double_value(&[])
    };
    assert!((loss([1.0, 2.0, 1.0, 2.0]) - std::f64::consts::LN_2).abs() < 1e-6);
    let d: f64 = 1.5;
    let want = |p: f64| -(p * (1.0 / (1.0 + (-d).exp())).ln() + (1.0 - p) * (1.0 / (1.0 + d.exp())).ln());
    let got = loss([1.5, 1.5, 0.0, 0.0]);
    assert!((got - f64::midpoint(want(0.95), want(0.65))).abs() < 1e-6, "{got}");
    assert!(loss([1.5, 1.5, 0.0, 0.0]) < loss([0.0, 0.0, 1.5, 1.5]));
}
