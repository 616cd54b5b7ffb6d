//! AFM's distillation loss (§3.2.1) against `PyTorch`, bit for bit: the loss and its gradient
//! with respect to the student's logits.
//!
//! `tests/python/distillation_reference.py` was written by a helper from the book's "The AFM
//! recipe" (Distillation) alone, without reading the worker or an earlier script: a
//! transcription of the report's one-sentence rule as that page states it (no released
//! implementation exists). What it shows is that the worker computes the stated rule on the
//! same libtorch: argmax ties go to the first index, targets that coincide with the label sum
//! to one, and the gradient is `softmax(student) - q` as ATen computes it.

#![allow(clippy::unwrap_used, clippy::print_stderr, missing_docs)]

use tch::{Kind, Tensor};

/// The float32 bit patterns of a tensor's values.
fn bits(t: &Tensor) -> Vec<u32> {
    prov_torch::f32_values(t).iter().map(|v| v.to_bits()).collect()
}

const N: usize = 37;
const VOCAB: usize = 53;
const SHAPE: [i64; 2] = [37, 53];

#[test]
fn the_distillation_loss_and_its_gradient_equal_pytorch_bit_for_bit() {
    let Some(python) = prov_testkit::venv_python() else { return };
    let (n, vocab) = (N, VOCAB);
    let student_values = prov_testkit::varied_f32(7, n * vocab, 6.0);
    let mut teacher_values = prov_testkit::varied_f32(8, n * vocab, 6.0);
    // Ties: two positions whose teacher has two equal largest logits (the first index wins).
    for row in [3usize, 20] {
        let at = row * vocab;
        let top = teacher_values[at..at + vocab].iter().copied().fold(f32::MIN, f32::max) + 1.0;
        teacher_values[at + 5] = top;
        teacher_values[at + 40] = top;
    }
    let teacher = Tensor::from_slice(&teacher_values).view(SHAPE);
    let top1: Vec<i64> = Vec::try_from(teacher.argmax(-1, false)).unwrap();
    assert_eq!((top1[3], top1[20]), (5, 5), "the first of two equal maxima");
    // Labels: mostly other than the teacher's choice, every fourth the same.
    let labels: Vec<i64> =
        (0..SHAPE[0]).zip(&top1).map(|(i, &t)| if i % 4 == 0 { t } else { (i * 11 + 3) % SHAPE[1] }).collect();
    for w in [0.9, 0.5, 1.0] {
        let student = Tensor::from_slice(&student_values).view(SHAPE).set_requires_grad(true);
        let loss = prov_worker::trainer::distillation_loss(&student, &Tensor::from_slice(&labels), &teacher, w);
        loss.backward();
        let case = serde_json::json!({
            "n": n, "vocab": vocab, "w": w, "labels": labels,
            "student": student_values.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "teacher": teacher_values.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        });
        let script = prov_testkit::repo_root().join("crates/prov-worker/tests/python/distillation_reference.py");
        let out = prov_testkit::pipe(&python, &[script.to_str().unwrap()], case.to_string().as_bytes());
        let reference: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(loss.kind(), Kind::Float);
        assert_eq!(u64::from(bits(&loss)[0]), reference["loss"].as_u64().unwrap(), "loss, w = {w}");
        let grad: Vec<u64> = reference["grad"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        let ours: Vec<u64> = bits(&student.grad()).into_iter().map(u64::from).collect();
        assert_eq!(ours, grad, "gradient, w = {w}");
        eprintln!("w = {w}: loss {}", loss.double_value(&[]));
    }
}

/// The loss is the weighted sum of the two cross-entropies it mixes (checked in double
/// precision, against the definition rather than the operation list).
#[test]
fn the_loss_mixes_the_label_and_the_teacher_cross_entropies() {
    let student = Tensor::from_slice(&prov_testkit::varied_f32(1, 9 * 11, 3.0)).view([9, 11]);
    let teacher = Tensor::from_slice(&prov_testkit::varied_f32(2, 9 * 11, 3.0)).view([9, 11]);
    let labels = Tensor::from_slice(&(0..9i64).map(|i| (i * 5) % 11).collect::<Vec<_>>());
    let w = 0.9;
    let got = prov_worker::trainer::distillation_loss(&student, &labels, &teacher, w).double_value(&[]);
    let logp = student.to_kind(Kind::Double).log_softmax(-1, Kind::Double);
    let nll = |targets: &Tensor| -logp.gather(1, &targets.view([-1, 1]), false).mean(Kind::Double).double_value(&[]);
    let want = (1.0 - w) * nll(&labels) + w * nll(&teacher.argmax(-1, false));
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");
}
