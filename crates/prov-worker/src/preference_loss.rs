//! The preference losses of alignment, on per-sequence log-probabilities: DPO (Rafailov et
//! al. 2023) and QRPO (Matrenok et al. 2025, "Quantile Reward Policy Optimization"; the
//! Apertus report's section 3.4 and appendix), and the log-probabilities of completion tokens
//! they start from. The book's chapter "Alignment" writes the formulas out.
//!
//! - [`completion_log_probs`]: from logits, labels and a completion mask, each sequence's
//!   summed and mean log-probability of its completion tokens, and their count `|y|`.
//! - [`dpo_loss`]: `-log sigmoid(beta_w (log pi(y_w|x) - log ref(y_w|x)) - beta_l (log
//!   pi(y_l|x) - log ref(y_l|x)))`, with `beta_w = beta_l = beta`, or `beta / |y|` per
//!   completion when length-normalised; libtorch's `log_sigmoid` (`min(m, 0) - log1p(exp(-|m|))`,
//!   the negated softplus of `-m`) keeps it finite for any margin.
//! - [`qrpo_loss`]: `(R_q - beta log Z_q(beta) - beta (log pi(y|x) - log ref(y|x)))^2`
//!   averaged over completions, `Z_q(beta) = beta (exp(1/beta) - 1)`; length-normalised,
//!   `beta / |y|` replaces `beta` in both places. [`log_z`] is computed in `f64` in log space,
//!   so that a 5,000-token completion (`exp(1000)`) is finite and exact.
//!
//! Reference implementations read, not copied: the QRPO authors' `QRPOTrainer.qrpo_loss`
//! (CLAIRE-Labo/quantile-reward-policy-optimization) and Apertus' post-training
//! `qrpo_loss` (swiss-ai/posttraining). Two differences from the latter, on purpose: `log Z`
//! here is exact where Apertus approximates `beta log Z` by `beta log beta + 1` for
//! `beta <= 0.2` (it drops `beta log(1 - exp(-1/beta))`: 1.4e-3 at `beta = 0.2`, 4.5e-6 at
//! 0.1, below 1e-15 from 0.03 down), and `beta / |y|` is not clamped to at most 0.1 (Apertus
//! clamps to bound its gradient norm; a recipe wanting that can say so later).

use prov_train::alignment::{DpoConfig, QrpoConfig};
use tch::{Kind, Tensor};

/// What prevents a loss.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AlignError {
    /// A tensor has the wrong shape.
    #[error("{op}: `{what}` has shape {actual:?}, expected {expected}")]
    Shape {
        /// The operation.
        op: &'static str,
        /// The argument.
        what: &'static str,
        /// The shape expected, in words.
        expected: String,
        /// The shape found.
        actual: Vec<i64>,
    },
    /// A sequence has no completion token.
    #[error("{op}: sequence {row} has no completion token")]
    EmptyCompletion {
        /// The operation.
        op: &'static str,
        /// The sequence, from 0.
        row: usize,
    },
    /// An argument has a different number of entries than the batch.
    #[error("{op}: `{what}` has {actual} entries for a batch of {expected}")]
    Length {
        /// The operation.
        op: &'static str,
        /// The argument.
        what: &'static str,
        /// The batch size.
        expected: usize,
        /// Entries found.
        actual: usize,
    },
    /// `beta` is not a finite number above 0.
    #[error("{op}: beta must be finite and above 0: {beta}")]
    Beta {
        /// The operation.
        op: &'static str,
        /// The value found.
        beta: f64,
    },
    /// A quantile reward outside `[0, 1]`.
    #[error("{op}: quantile reward {row} is outside [0, 1]: {value}")]
    Quantile {
        /// The operation.
        op: &'static str,
        /// The completion, from 0.
        row: usize,
        /// The value found.
        value: f64,
    },
}

/// Each sequence's log-probability of its completion tokens.
#[derive(Debug)]
pub struct CompletionLogProbs {
    /// `[B]`: the sum over completion tokens of `log p(token | tokens before)`.
    pub sum: Tensor,
    /// `[B]`: `sum / tokens`.
    pub mean: Tensor,
    /// Completion tokens per sequence, `|y|`.
    pub tokens: Vec<i64>,
}

/// The log-probabilities of the completion tokens: `logits[b, t]` predicts `labels[b, t]`
/// (labels already shifted by one, as the trainer shifts them), and `mask[b, t]` (bool, or
/// any numeric kind, non-zero meaning true) says whether `labels[b, t]` is a completion
/// token. Prompt tokens and padding are masked out; a masked label may hold anything
/// (`IGNORE_INDEX`).
///
/// The log-softmax runs in `f32` for `f16`/`bf16`/`f32` logits and in `f64` for `f64` ones,
/// and the results keep that kind.
pub fn completion_log_probs(logits: &Tensor, labels: &Tensor, mask: &Tensor) -> Result<CompletionLogProbs, AlignError> {
    const OP: &str = "completion_log_probs";
    let size = logits.size();
    let [b, t, _] = size[..] else {
        return Err(AlignError::Shape {
            op: OP,
            what: "logits",
            expected: "[batch, time, vocab]".into(),
            actual: size,
        });
    };
    for (what, tensor) in [("labels", labels), ("mask", mask)] {
        if tensor.size() != [b, t] {
            return Err(AlignError::Shape {
                op: OP,
                what,
                expected: format!("[{b}, {t}] as the logits"),
                actual: tensor.size(),
            });
        }
    }
    let kind = if logits.kind() == Kind::Double { Kind::Double } else { Kind::Float };
    let mask = if mask.kind() == Kind::Bool { mask.shallow_clone() } else { mask.ne(0) };
    let outside = mask.logical_not();
    let labels = labels.masked_fill(&outside, 0);
    let per_token = logits.log_softmax(-1, kind).gather(2, &labels.unsqueeze(-1), false).squeeze_dim(-1);
    // `masked_fill`, not a product with the mask: a masked position's log-probability may be
    // -inf, and -inf * 0 is NaN.
    let sum = per_token.masked_fill(&outside, 0.0).sum_dim_intlist([-1i64].as_slice(), false, kind);
    let counts = mask.sum_dim_intlist([-1i64].as_slice(), false, Kind::Int64);
    let tokens: Vec<i64> = Vec::try_from(&counts.to_device(tch::Device::Cpu)).expect("a 1-d int64 tensor");
    if let Some(row) = tokens.iter().position(|&n| n == 0) {
        return Err(AlignError::EmptyCompletion { op: OP, row });
    }
    let mean = &sum / counts.to_kind(kind);
    Ok(CompletionLogProbs { sum, mean, tokens })
}

/// A batch of completions' summed log-probabilities under the policy (`[B]`, with gradient)
/// and the reference model (`[B]`, without), and their token counts `|y|`.
#[derive(Debug, Clone, Copy)]
pub struct Completions<'a> {
    /// `log pi(y|x)`, summed over the completion's tokens.
    pub policy: &'a Tensor,
    /// `log ref(y|x)`, summed over the completion's tokens.
    pub reference: &'a Tensor,
    /// `|y|`: the completion tokens summed over (as [`CompletionLogProbs::tokens`]).
    pub tokens: &'a [i64],
}

impl Completions<'_> {
    /// The batch size, after checking that every part agrees on it.
    fn check(&self, op: &'static str, side: &'static str) -> Result<usize, AlignError> {
        let n = self.tokens.len();
        for tensor in [self.policy, self.reference] {
            if tensor.size() != [i64::try_from(n).expect("a batch size fits in i64")] {
                return Err(AlignError::Shape {
                    op,
                    what: side,
                    expected: format!("[{n}] as `tokens`"),
                    actual: tensor.size(),
                });
            }
        }
        if let Some(row) = self.tokens.iter().position(|&t| t <= 0) {
            return Err(AlignError::EmptyCompletion { op, row });
        }
        Ok(n)
    }

    /// The per-completion `beta`: `beta / |y|` when length-normalised, else `beta`.
    fn betas(&self, beta: f64, length_normalised: bool) -> Vec<f64> {
        self.tokens.iter().map(|&n| if length_normalised { beta / n as f64 } else { beta }).collect()
    }

    /// `log pi(y|x) - log ref(y|x)`.
    fn log_ratio(&self) -> Tensor {
        self.policy - self.reference
    }
}

/// A loss and its parts.
#[derive(Debug)]
pub struct Loss {
    /// The mean over the batch: what to call `backward` on.
    pub mean: Tensor,
    /// `[B]`: each pair's (DPO) or completion's (QRPO) loss.
    pub per_item: Tensor,
}

fn check_beta(op: &'static str, beta: f64) -> Result<(), AlignError> {
    if beta.is_finite() && beta > 0.0 { Ok(()) } else { Err(AlignError::Beta { op, beta }) }
}

/// A 1-d tensor of `values` in the kind and on the device of `like`.
fn constants(values: &[f64], like: &Tensor) -> Tensor {
    Tensor::from_slice(values).to_kind(like.kind()).to_device(like.device())
}

/// The DPO loss of `chosen[i]` preferred over `rejected[i]`:
/// `-log sigmoid(beta_w (log pi(y_w|x) - log ref(y_w|x)) - beta_l (log pi(y_l|x) - log ref(y_l|x)))`.
pub fn dpo_loss(config: &DpoConfig, chosen: &Completions, rejected: &Completions) -> Result<Loss, AlignError> {
    const OP: &str = "dpo_loss";
    check_beta(OP, config.beta)?;
    let n = chosen.check(OP, "chosen")?;
    let m = rejected.check(OP, "rejected")?;
    if m != n {
        return Err(AlignError::Length { op: OP, what: "rejected", expected: n, actual: m });
    }
    let beta_w = constants(&chosen.betas(config.beta, config.length_normalised), chosen.policy);
    let beta_l = constants(&rejected.betas(config.beta, config.length_normalised), rejected.policy);
    let margin = beta_w * chosen.log_ratio() - beta_l * rejected.log_ratio();
    let per_item = -margin.log_sigmoid();
    Ok(Loss { mean: per_item.mean(per_item.kind()), per_item })
}

/// `log Z_q(beta) = log(beta (exp(1/beta) - 1))`, the log partition function of the quantile
/// reward (uniform on `[0, 1]` under the reference policy), in `f64`, finite for any
/// `beta > 0`: with `x = 1/beta`, `log(expm1(x))` for `x <= 1` (no cancellation), and
/// `x + log1p(-exp(-x))` above (no overflow: `exp(x)` is never formed).
pub fn log_z(beta: f64) -> f64 {
    let x = 1.0 / beta;
    let log_expm1 = if x <= 1.0 { x.exp_m1().ln() } else { x + (-(-x).exp()).ln_1p() };
    beta.ln() + log_expm1
}

/// The QRPO loss: the mean over completions of
/// `(R_q - beta_y log Z_q(beta_y) - beta_y (log pi(y|x) - log ref(y|x)))^2`, with
/// `beta_y = beta / |y|` when length-normalised, else `beta`. `quantile_rewards[i]` is
/// `R_q` of completion `i` (`prov_reward::preference::quantile_reward`). The target
/// `R_q - beta_y log Z_q(beta_y)` is computed in `f64` and then takes the log-probabilities'
/// kind.
pub fn qrpo_loss(config: &QrpoConfig, completions: &Completions, quantile_rewards: &[f64]) -> Result<Loss, AlignError> {
    const OP: &str = "qrpo_loss";
    check_beta(OP, config.beta)?;
    let n = completions.check(OP, "completions")?;
    if quantile_rewards.len() != n {
        return Err(AlignError::Length {
            op: OP,
            what: "quantile_rewards",
            expected: n,
            actual: quantile_rewards.len(),
        });
    }
    if let Some((row, &value)) = quantile_rewards.iter().enumerate().find(|(_, q)| !(0.0..=1.0).contains(*q)) {
        return Err(AlignError::Quantile { op: OP, row, value });
    }
    let betas = completions.betas(config.beta, config.length_normalised);
    let targets: Vec<f64> = quantile_rewards.iter().zip(&betas).map(|(&q, &b)| q - b * log_z(b)).collect();
    let residual =
        constants(&targets, completions.policy) - constants(&betas, completions.policy) * completions.log_ratio();
    let per_item = residual.square();
    Ok(Loss { mean: per_item.mean(per_item.kind()), per_item })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use tch::Device;

    use super::*;

    fn f64s(t: &Tensor) -> Vec<f64> {
        Vec::try_from(&t.to_kind(Kind::Double).reshape([-1])).unwrap()
    }

    fn leaf(values: &[f64]) -> Tensor {
        Tensor::from_slice(values).set_requires_grad(true)
    }

    /// `-log sigmoid(m)` in f64 by cases, each without overflow.
    fn neg_log_sigmoid(m: f64) -> f64 {
        if m >= 0.0 { (-m).exp().ln_1p() } else { -m + m.exp().ln_1p() }
    }

    #[test]
    fn log_z_is_the_definition_where_that_is_finite_and_finite_beyond() {
        for beta in [1e3_f64, 50.0, 5.0, 1.0, 0.7, 0.3, 0.05] {
            let direct = (beta * (1.0 / beta).exp_m1()).ln();
            assert!((log_z(beta) - direct).abs() <= 1e-14 * direct.abs().max(1.0), "beta {beta}");
        }
        // 5,000 tokens at beta = 5: exp(1000) overflows even f64, log Z does not.
        let beta = 5.0_f64 / 5000.0;
        assert!((1.0 / beta).exp().is_infinite());
        assert!((log_z(beta) - (1000.0 + beta.ln())).abs() < 1e-12);
        // f32 overflows beyond 443 tokens: exp(|y| / 5) > f32::MAX from |y| = 444 on.
        assert!((443.0f32 / 5.0).exp().is_finite() && (444.0f32 / 5.0).exp().is_infinite());
    }

    #[test]
    fn dpo_equals_the_closed_form_with_its_gradient() {
        let (mut pw, pl) = (leaf(&[-12.0, -30.5, -7.25, -100.0]), leaf(&[-15.0, -29.0, -9.0, -1.0]));
        let (rw, rl) =
            (Tensor::from_slice(&[-13.0, -30.0, -7.0, -2.0]), Tensor::from_slice(&[-14.0, -31.0, -9.5, -300.0]));
        let (tw, tl) = ([3i64, 40, 5, 700], [4i64, 39, 6, 2]);
        for (beta, normalised) in [(0.1, false), (2.0, true), (50.0, false)] {
            let cfg = DpoConfig { beta, length_normalised: normalised };
            let chosen = Completions { policy: &pw, reference: &rw, tokens: &tw };
            let rejected = Completions { policy: &pl, reference: &rl, tokens: &tl };
            let loss = dpo_loss(&cfg, &chosen, &rejected).unwrap();
            let (pw_, pl_, rw_, rl_) = (f64s(&pw), f64s(&pl), f64s(&rw), f64s(&rl));
            let mut want = 0.0;
            let mut grad_w = Vec::new();
            for i in 0..4 {
                let bw = if normalised { beta / tw[i] as f64 } else { beta };
                let bl = if normalised { beta / tl[i] as f64 } else { beta };
                let m = bw * (pw_[i] - rw_[i]) - bl * (pl_[i] - rl_[i]);
                want += neg_log_sigmoid(m) / 4.0;
                // d/dm -log sigmoid(m) = -sigmoid(-m); d m / d pi_w = bw.
                grad_w.push(-bw / (1.0 + m.exp()) / 4.0);
            }
            let got = loss.mean.double_value(&[]);
            assert!((got - want).abs() <= 1e-14 * want.abs().max(1.0), "beta {beta}: {got} vs {want}");
            pw.zero_grad();
            loss.mean.backward();
            for (g, w) in f64s(&pw.grad()).iter().zip(&grad_w) {
                assert!((g - w).abs() <= 1e-15 + 1e-13 * w.abs(), "{g} vs {w}");
            }
        }
    }

    #[test]
    fn dpo_gradient_at_a_zero_margin_is_half() {
        // Policy == reference, as at the start of training: the margin is exactly 0.
        let p = leaf(&[-3.0]);
        let r = Tensor::from_slice(&[-3.0]);
        let c = Completions { policy: &p, reference: &r, tokens: &[1] };
        let loss = dpo_loss(
            &DpoConfig { beta: 1.0, length_normalised: false },
            &c,
            &Completions { policy: &r, reference: &r, tokens: &[1] },
        )
        .unwrap();
        loss.mean.backward();
        assert!((loss.mean.double_value(&[]) - std::f64::consts::LN_2).abs() < 1e-15);
        assert!((p.grad().double_value(&[0]) + 0.5).abs() < 1e-15);
    }

    #[test]
    fn qrpo_equals_the_closed_form_with_its_gradient_at_5000_tokens() {
        let tokens = [5000i64, 10_000, 444, 445, 3, 1];
        let policy_values = [-9000.0, -25_000.5, -800.0, -801.0, -4.0, -0.5];
        let reference_values = [-9100.0, -25_000.0, -790.0, -805.0, -4.5, -0.25];
        let quantiles = [1.0, 0.0, 0.3, 0.7, 0.5, 0.9];
        for kind in [Kind::Double, Kind::Float] {
            let policy = Tensor::from_slice(&policy_values).to_kind(kind).set_requires_grad(true);
            let reference = Tensor::from_slice(&reference_values).to_kind(kind);
            let batch = Completions { policy: &policy, reference: &reference, tokens: &tokens };
            let loss = qrpo_loss(&QrpoConfig::default(), &batch, &quantiles).unwrap();
            loss.mean.backward();
            let grads = f64s(&policy.grad());
            let n = tokens.len() as f64;
            let mut want = 0.0;
            for i in 0..tokens.len() {
                let beta = 5.0 / tokens[i] as f64;
                // From 444 tokens on exp(-1/beta) < 1e-38: log Z = 1/beta + log beta to the last bit.
                let log_z_exact =
                    if tokens[i] >= 444 { 1.0 / beta + beta.ln() } else { (beta * (1.0 / beta).exp_m1()).ln() };
                let residual = quantiles[i] - beta * log_z_exact - beta * (policy_values[i] - reference_values[i]);
                want += residual * residual / n;
                let grad = -2.0 * beta * residual / n;
                let tol = if kind == Kind::Double { 1e-15 + 1e-12 * grad.abs() } else { 1e-6 * (1.0 + grad.abs()) };
                assert!((grads[i] - grad).abs() <= tol, "{kind:?} row {i}: {} vs {grad}", grads[i]);
            }
            let got = loss.mean.double_value(&[]);
            assert!(got.is_finite());
            let tol = if kind == Kind::Double { 1e-14 } else { 1e-6 };
            assert!((got - want).abs() <= tol * want.max(1.0), "{kind:?}: {got} vs {want}");
        }
    }

    #[test]
    fn completion_log_probs_sum_the_masked_tokens() {
        // One sequence, vocab 3: logits give log-softmax rows computed by hand.
        let logits = Tensor::from_slice(&[0.0f64, 0.0, 0.0, 1.0, 2.0, 3.0, 5.0, 0.0, -5.0]).view([1, 3, 3]);
        let labels = Tensor::from_slice(&[-100i64, 2, 0]).view([1, 3]);
        let mask = Tensor::from_slice(&[false, true, true]).view([1, 3]);
        let lp = completion_log_probs(&logits, &labels, &mask).unwrap();
        let lse = |v: [f64; 3]| v.iter().map(|x| x.exp()).sum::<f64>().ln();
        let want = (3.0 - lse([1.0, 2.0, 3.0])) + (5.0 - lse([5.0, 0.0, -5.0]));
        assert!((lp.sum.double_value(&[0]) - want).abs() < 1e-14);
        assert!((lp.mean.double_value(&[0]) - want / 2.0).abs() < 1e-14);
        assert_eq!(lp.tokens, vec![2]);
        assert_eq!(lp.sum.kind(), Kind::Double);
        // bfloat16 logits are upcast: the log-softmax and the sums run in float32.
        let lp16 = completion_log_probs(&logits.to_kind(Kind::BFloat16), &labels, &mask).unwrap();
        assert_eq!((lp16.sum.kind(), lp16.mean.kind()), (Kind::Float, Kind::Float));
        assert!((lp16.sum.double_value(&[0]) - want).abs() < 1e-5, "these logits are exact in bfloat16");
        // A masked position whose label has probability 0 does not make the sum NaN.
        let inf = Tensor::from_slice(&[f32::NEG_INFINITY, 0.0, 0.0, 0.0]).view([1, 2, 2]);
        let lp = completion_log_probs(
            &inf,
            &Tensor::from_slice(&[0i64, 1]).view([1, 2]),
            &Tensor::from_slice(&[0i64, 1]).view([1, 2]),
        )
        .unwrap();
        assert!((lp.sum.double_value(&[0]) + std::f64::consts::LN_2).abs() < 1e-6);
    }

    #[test]
    fn bad_arguments_are_named_errors() {
        let x = Tensor::zeros([2, 3, 4], (Kind::Float, Device::Cpu));
        let labels = Tensor::zeros([2, 3], (Kind::Int64, Device::Cpu));
        let err = completion_log_probs(&x, &labels, &Tensor::zeros([2, 2], (Kind::Bool, Device::Cpu))).unwrap_err();
        assert_eq!(err.to_string(), "completion_log_probs: `mask` has shape [2, 2], expected [2, 3] as the logits");
        let mask = Tensor::from_slice(&[true, true, false, false, false, false]).view([2, 3]);
        assert_eq!(
            completion_log_probs(&x, &labels, &mask).unwrap_err(),
            AlignError::EmptyCompletion { op: "completion_log_probs", row: 1 }
        );
        let p = Tensor::zeros([2], (Kind::Float, Device::Cpu));
        let c = Completions { policy: &p, reference: &p, tokens: &[3, 4] };
        assert!(matches!(
            qrpo_loss(&QrpoConfig::default(), &c, &[0.5]),
            Err(AlignError::Length { what: "quantile_rewards", .. })
        ));
        assert!(matches!(qrpo_loss(&QrpoConfig::default(), &c, &[0.5, 1.5]), Err(AlignError::Quantile { row: 1, .. })));
        assert!(matches!(
            qrpo_loss(&QrpoConfig { beta: 0.0, length_normalised: true }, &c, &[0.5, 0.5]),
            Err(AlignError::Beta { .. })
        ));
        let empty = Completions { policy: &p, reference: &p, tokens: &[3, 0] };
        assert!(matches!(dpo_loss(&DpoConfig::default(), &c, &empty), Err(AlignError::EmptyCompletion { row: 1, .. })));
        let short = Completions { policy: &p, reference: &p, tokens: &[3] };
        assert!(matches!(dpo_loss(&DpoConfig::default(), &c, &short), Err(AlignError::Shape { what: "rejected", .. })));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn swapping_chosen_and_rejected_changes_dpo_by_the_margin(
            pw in -2000.0f64..0.0, rw in -2000.0f64..0.0, pl in -2000.0f64..0.0, rl in -2000.0f64..0.0,
            tw in 1i64..5000, tl in 1i64..5000, beta in 0.01f64..10.0, normalised: bool,
        ) {
            // -log sigmoid(m) - (-log sigmoid(-m)) = -m, for any margin.
            let t = |v: f64| Tensor::from_slice(&[v]);
            let (pw, rw, pl, rl) = (t(pw), t(rw), t(pl), t(rl));
            let w = Completions { policy: &pw, reference: &rw, tokens: &[tw] };
            let l = Completions { policy: &pl, reference: &rl, tokens: &[tl] };
            let cfg = DpoConfig { beta, length_normalised: normalised };
            let forward = dpo_loss(&cfg, &w, &l).unwrap().mean.double_value(&[]);
            let backward = dpo_loss(&cfg, &l, &w).unwrap().mean.double_value(&[]);
            let (bw, bl) = if normalised { (beta / tw as f64, beta / tl as f64) } else { (beta, beta) };
            let margin = bw * (f64s(&pw)[0] - f64s(&rw)[0]) - bl * (f64s(&pl)[0] - f64s(&rl)[0]);
            prop_assert!(forward.is_finite() && backward.is_finite() && forward >= 0.0);
            prop_assert!((forward - backward + margin).abs() <= 1e-12 * (1.0 + margin.abs()), "{forward} {backward} {margin}");
        }

        #[test]
        fn the_optimal_policy_has_zero_qrpo_loss(
            q in 0.0f64..=1.0, tokens in 1i64..50_000, beta in 0.1f64..10.0, reference in -1e4f64..0.0,
        ) {
            // pi* = ref exp(R_q / beta_y) / Z_q(beta_y): its log-ratio is (R_q - beta_y log Z_q) / beta_y.
            let beta_y = beta / tokens as f64;
            let ratio = (q - beta_y * log_z(beta_y)) / beta_y;
            let (policy, reference) = (Tensor::from_slice(&[reference + ratio]), Tensor::from_slice(&[reference]));
            let c = Completions { policy: &policy, reference: &reference, tokens: &[tokens] };
            let loss = qrpo_loss(&QrpoConfig { beta, length_normalised: true }, &c, &[q]).unwrap();
            prop_assert!(loss.mean.double_value(&[]) < 1e-18, "{}", loss.mean.double_value(&[]));
        }
    }
}
