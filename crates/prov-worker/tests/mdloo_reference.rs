//! AFM's MDLOO (§4.3.3, Appendix E.2) against `PyTorch`, bit for bit: the leave-one-out
//! advantages (f64), the mirror-descent loss and its gradient with respect to the policy's
//! logits.
//!
//! `tests/python/mdloo_reference.py` was written by a helper from the book's "The AFM recipe"
//! (MDLOO) alone, without reading this code: a transcription of the report's description as
//! that page makes it precise (the report releases no implementation, and leaves the form of
//! the KL term open; the page says which form Provenant uses).

#![allow(clippy::unwrap_used, clippy::print_stderr, clippy::cast_possible_wrap, missing_docs)]

use tch::{Kind, Tensor};

fn bits(t: &Tensor) -> Vec<u64> {
    prov_torch::f32_values(t).iter().map(|v| u64::from(v.to_bits())).collect()
}

#[test]
fn mdloo_advantages_loss_and_gradient_equal_pytorch_bit_for_bit() {
    let Some(python) = prov_testkit::venv_python() else { return };
    let (rows, time, vocab, k) = (8usize, 6usize, 29usize, 4usize);
    let shape = [rows as i64, time as i64, vocab as i64];
    let policy_values = prov_testkit::varied_f32(21, rows * time * vocab, 3.0);
    let labels: Vec<i64> = (0..(rows * time) as i64).map(|i| (i * 13 + 5) % vocab as i64).collect();
    // Completions of different lengths after prompts of different lengths; padding after.
    let mask: Vec<bool> = (0..rows).flat_map(|r| (0..time).map(move |t| t > r % 2 && t < 3 + r % 4)).collect();
    let scores: Vec<f64> = (0..rows).map(|r| 0.3 * r as f64 - 1.0).collect();
    let old_logp: Vec<f64> = (0..rows).map(|r| -10.0 - r as f64 * 0.7).collect();
    let ref_logp: Vec<f64> = (0..rows).map(|r| -9.5 - (r % 3) as f64).collect();
    for (case_name, old_values, beta, gamma) in [
        ("at the iteration's policy", policy_values.clone(), 0.1, 0.05),
        ("after a step", prov_testkit::varied_f32(22, rows * time * vocab, 3.0), 0.5, 0.2),
    ] {
        let rewards: Vec<f64> = (0..rows).map(|i| scores[i] - beta * (old_logp[i] - ref_logp[i])).collect();
        let advantages: Vec<f64> = rewards.chunks(k).flat_map(prov_train::mdloo::leave_one_out).collect();
        let adv32: Vec<f32> = advantages.iter().map(|&a| a as f32).collect();
        let policy = Tensor::from_slice(&policy_values).view(shape).set_requires_grad(true);
        let old = Tensor::from_slice(&old_values).view(shape);
        let loss = prov_worker::mdloo::mdloo_loss(
            &policy,
            &old,
            &Tensor::from_slice(&labels).view([rows as i64, time as i64]),
            &Tensor::from_slice(&mask).view([rows as i64, time as i64]),
            &Tensor::from_slice(&adv32),
            gamma,
        );
        loss.backward();
        let case = serde_json::json!({
            "rows": rows, "time": time, "vocab": vocab, "k": k, "beta": beta, "gamma": gamma,
            "policy": policy_values.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "old": old_values.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "labels": labels, "mask": mask.iter().map(|&m| u8::from(m)).collect::<Vec<_>>(),
            "scores": scores, "old_logp": old_logp, "ref_logp": ref_logp,
        });
        let script = prov_testkit::repo_root().join("crates/prov-worker/tests/python/mdloo_reference.py");
        let out = prov_testkit::pipe(&python, &[script.to_str().unwrap()], case.to_string().as_bytes());
        let reference: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let theirs: Vec<u64> =
            reference["advantages"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap().to_bits()).collect();
        assert_eq!(advantages.iter().map(|a| a.to_bits()).collect::<Vec<_>>(), theirs, "advantages, {case_name}");
        assert_eq!(loss.kind(), Kind::Float);
        assert_eq!(bits(&loss)[0], reference["loss"].as_u64().unwrap(), "loss, {case_name}");
        let grad: Vec<u64> = reference["grad"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        assert_eq!(bits(&policy.grad().view([-1])), grad, "gradient, {case_name}");
        eprintln!("{case_name}: loss {}", loss.double_value(&[]));
    }
}

/// At the iteration's policy the ratio is 1 and the KL 0: the loss is minus the mean
/// advantage, which leave-one-out makes 0 per prompt (checked against the definition).
#[test]
fn at_the_iterations_policy_the_loss_is_minus_the_mean_advantage() {
    let logits = Tensor::from_slice(&prov_testkit::varied_f32(5, 2 * 3 * 7, 2.0)).view([2, 3, 7]);
    let labels = Tensor::from_slice(&[1i64, 2, 3, 4, 5, 6]).view([2, 3]);
    let mask = Tensor::from_slice(&[false, true, true, false, true, false]).view([2, 3]);
    let adv = Tensor::from_slice(&[0.75f32, -0.25]);
    let loss = prov_worker::mdloo::mdloo_loss(&logits, &logits, &labels, &mask, &adv, 3.0).double_value(&[]);
    assert!((loss - (-0.25)).abs() < 1e-7, "{loss}");
    let a = prov_train::mdloo::leave_one_out(&[2.0, -1.0, 0.5]);
    assert!(a.iter().sum::<f64>().abs() < 1e-12);
}
