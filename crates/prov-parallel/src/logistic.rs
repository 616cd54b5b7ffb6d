//! L2-penalised logistic regression with an unpenalised intercept, as scikit-learn's
//! `LogisticRegression(C=1/alpha, fit_intercept=True)` defines it: the weights `w` and
//! intercept `b` that minimise `Σ [log(1 + e^{z_i}) − y_i z_i] + (α/2)‖w‖²`, `z_i = w·x_i + b`.
//!
//! Solved by Newton's method from zero: each step solves `H Δ = g` (the Hessian of the
//! penalised loss and its gradient, by Cholesky), halving the step while it does not lower the
//! loss, until no gradient component exceeds `1e-10 · n`. The loss is strictly convex for
//! `α > 0`, so the minimum is unique and any correct solver finds it: scikit-learn's
//! `newton-cholesky` agrees to rounding (`tests/sklearn_logistic.rs`).

use prov_quality::ridge::cholesky_solve;

/// A fitted classifier.
#[derive(Debug, Clone, PartialEq)]
pub struct LogisticModel {
    /// One weight per feature.
    pub weights: Vec<f64>,
    /// The intercept.
    pub intercept: f64,
}

impl LogisticModel {
    /// The probability of the positive class for a row.
    #[must_use]
    pub fn predict(&self, row: &[f64]) -> f64 {
        sigmoid(self.intercept + dot(&self.weights, row))
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `1 / (1 + e^{-z})`, computed on the side where the exponential cannot overflow. The
/// exponential and logarithm are the `libm` crate's, not the platform's, so that a model and
/// its decisions are the same bits on every machine (the stages are portable).
fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + libm::exp(-z))
    } else {
        let e = libm::exp(z);
        e / (1.0 + e)
    }
}

/// `log(1 + e^z)` without overflow.
fn softplus(z: f64) -> f64 {
    if z > 0.0 { z + libm::log1p(libm::exp(-z)) } else { libm::log1p(libm::exp(z)) }
}

/// Why a classifier could not be fitted.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LogisticError {
    /// No rows, rows of different lengths, labels not one per row or not 0 or 1.
    #[error("{0}")]
    Shape(String),
    /// `alpha` not positive, or a value not finite.
    #[error("{0}")]
    Value(String),
}

/// A class label: exactly 0 or 1.
#[allow(clippy::float_cmp)] // labels are exact values, not measurements
fn is_label(y: f64) -> bool {
    y == 0.0 || y == 1.0
}

/// The penalised loss at `(w, b)`.
fn loss(rows: &[Vec<f64>], labels: &[f64], w: &[f64], b: f64, alpha: f64) -> f64 {
    let data: f64 = rows
        .iter()
        .zip(labels)
        .map(|(x, &y)| {
            let z = b + dot(w, x);
            softplus(z) - y * z
        })
        .sum();
    data + 0.5 * alpha * dot(w, w)
}

/// Fits `rows` (dense, all of one length) to `labels` (0 or 1) with penalty `alpha`.
///
/// # Errors
///
/// [`LogisticError`] for empty or ragged input, labels other than 0 and 1, values that are not
/// finite, or `alpha` not positive.
pub fn fit(rows: &[Vec<f64>], labels: &[f64], alpha: f64) -> Result<LogisticModel, LogisticError> {
    let Some(first) = rows.first() else { return Err(LogisticError::Shape("no rows to fit".into())) };
    let d = first.len();
    if rows.len() != labels.len() || rows.iter().any(|r| r.len() != d) {
        return Err(LogisticError::Shape(format!("{} rows of unequal lengths or {} labels", rows.len(), labels.len())));
    }
    if !labels.iter().all(|&y| is_label(y)) {
        return Err(LogisticError::Shape("labels are 0 or 1".into()));
    }
    if !(alpha.is_finite() && alpha > 0.0) {
        return Err(LogisticError::Value(format!("alpha must be a positive number, got {alpha}")));
    }
    if rows.iter().flatten().any(|v| !v.is_finite()) {
        return Err(LogisticError::Value("a feature value is not finite".into()));
    }
    let n = rows.len() as f64;
    let (mut weights, mut intercept) = (vec![0.0; d], 0.0);
    let mut current = loss(rows, labels, &weights, intercept, alpha);
    for _ in 0..100 {
        // Gradient and Hessian over (w, b); the intercept is the last coordinate.
        let size = d + 1;
        let mut gradient = vec![0.0; size];
        let mut hessian = vec![0.0; size * size];
        for (row, &label) in rows.iter().zip(labels) {
            let prob = sigmoid(intercept + dot(&weights, row));
            let curvature = prob * (1.0 - prob);
            let x_at = |j: usize| if j < d { row[j] } else { 1.0 };
            for j in 0..size {
                gradient[j] += (prob - label) * x_at(j);
                for k in 0..=j {
                    hessian[j * size + k] += curvature * x_at(j) * x_at(k);
                }
            }
        }
        for j in 0..d {
            gradient[j] += alpha * weights[j];
            hessian[j * size + j] += alpha;
        }
        if gradient.iter().all(|v| v.abs() <= 1e-10 * n) {
            break;
        }
        // The intercept's own curvature can vanish when every probability saturates; a tiny
        // ridge keeps the factorisation defined without moving the minimum it converges to.
        hessian[d * size + d] += 1e-12;
        let step = cholesky_solve(&mut hessian, size, gradient);
        let mut scale = 1.0;
        loop {
            let new_weights: Vec<f64> = weights.iter().zip(&step).map(|(w, s)| w - scale * s).collect();
            let new_intercept = intercept - scale * step[d];
            let new_loss = loss(rows, labels, &new_weights, new_intercept, alpha);
            if new_loss <= current || scale < 1e-10 {
                (weights, intercept, current) = (new_weights, new_intercept, new_loss);
                break;
            }
            scale *= 0.5;
        }
    }
    Ok(LogisticModel { weights, intercept })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fit_sets_the_gradient_to_zero() {
        let rows: Vec<Vec<f64>> = (0..40).map(|i| vec![f64::from(i) / 10.0, f64::from(i % 3)]).collect();
        let labels: Vec<f64> = (0..40).map(|i| f64::from(u8::from(i % 7 < 4 || i > 30))).collect();
        let m = fit(&rows, &labels, 0.5).unwrap();
        let mut g = vec![0.0; 3];
        for (x, &y) in rows.iter().zip(&labels) {
            let r = m.predict(x) - y;
            g[0] += r * x[0];
            g[1] += r * x[1];
            g[2] += r;
        }
        g[0] += 0.5 * m.weights[0];
        g[1] += 0.5 * m.weights[1];
        assert!(g.iter().all(|v| v.abs() < 1e-8), "{g:?}");
    }

    #[test]
    fn bad_input_is_refused() {
        assert!(fit(&[], &[], 1.0).is_err());
        assert!(fit(&[vec![1.0]], &[0.5], 1.0).is_err());
        assert!(fit(&[vec![1.0]], &[1.0], 0.0).is_err());
        assert!(fit(&[vec![1.0], vec![1.0, 2.0]], &[1.0, 0.0], 1.0).is_err());
        assert!(fit(&[vec![f64::NAN]], &[1.0], 1.0).is_err());
    }

    #[test]
    #[allow(clippy::float_cmp)] // saturation gives exactly 0 and 1
    fn extreme_scores_do_not_overflow() {
        assert_eq!(sigmoid(1000.0), 1.0);
        assert_eq!(sigmoid(-1000.0), 0.0);
        assert!((softplus(1000.0) - 1000.0).abs() < 1e-9);
        assert!(softplus(-1000.0) >= 0.0);
    }
}
