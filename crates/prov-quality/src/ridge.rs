//! Ridge regression with an unpenalised intercept, as scikit-learn's
//! `Ridge(alpha, fit_intercept=True)` defines it: the weights `w` and intercept `b` that
//! minimise `Σ (y_i − b − w·x_i)² + α‖w‖²`.
//!
//! The intercept is removed by centring: with `x̄` the mean row and `ȳ` the mean label, `w`
//! solves `(XᵀX − n·x̄x̄ᵀ + αI) w = Xᵀy − n·x̄·ȳ` (the normal equations of the centred data)
//! and `b = ȳ − x̄·w`. The matrix is symmetric positive definite for `α > 0`; it is solved by
//! a Cholesky factorisation. Rows are sparse (`(column, value)` in column order); the
//! matrix is dense, `F × F` for `F` features, so `F` is kept to a few thousand.
//!
//! scikit-learn sums in BLAS order, so the two agree to rounding, not to the bit
//! (`tests/sklearn_reference.rs` bounds the difference of the predictions).

/// A fitted model.
#[derive(Debug, Clone, PartialEq)]
pub struct RidgeModel {
    /// One weight per feature.
    pub weights: Vec<f64>,
    /// The intercept.
    pub intercept: f64,
}

impl RidgeModel {
    /// The prediction for a sparse row.
    pub fn predict(&self, row: &[(u32, f64)]) -> f64 {
        let mut sum = self.intercept;
        for &(j, v) in row {
            sum += self.weights[j as usize] * v;
        }
        sum
    }
}

/// Why a model could not be fitted.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RidgeError {
    /// No rows, or labels not one per row.
    #[error("{rows} rows and {labels} labels: a fit needs at least one row and one label per row")]
    Shape {
        /// Rows given.
        rows: usize,
        /// Labels given.
        labels: usize,
    },
    /// A feature index at or past the feature count.
    #[error("row {row} has feature {feature}, but there are {features} features")]
    Feature {
        /// The row.
        row: usize,
        /// Its feature index.
        feature: u32,
        /// The feature count.
        features: usize,
    },
    /// `alpha` not positive, or a value or label not finite.
    #[error("{0}")]
    Value(String),
}

/// The sums a fit needs, gathered one row at a time, so that the rows need not be held: the
/// lower triangle of `XᵀX`, `Xᵀy`, the column sums and the label sum (`F² + 2F` numbers for
/// `F` features, whatever the row count).
#[derive(Debug, Clone)]
pub struct Accumulator {
    features: usize,
    rows: usize,
    sums: Vec<f64>,
    gram: Vec<f64>,
    xy: Vec<f64>,
    y_sum: f64,
}

impl Accumulator {
    /// Empty sums for `features` columns.
    pub fn new(features: usize) -> Self {
        Self {
            features,
            rows: 0,
            sums: vec![0.0; features],
            gram: vec![0.0; features * features],
            xy: vec![0.0; features],
            y_sum: 0.0,
        }
    }

    /// Rows added so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Adds one sparse row (columns ascending) with its label.
    pub fn add(&mut self, row: &[(u32, f64)], y: f64) -> Result<(), RidgeError> {
        let features = self.features;
        if !y.is_finite() {
            return Err(RidgeError::Value(format!("label {} is not a finite number", self.rows)));
        }
        if let Some(&(j, _)) = row.iter().find(|(j, _)| *j as usize >= features) {
            return Err(RidgeError::Feature { row: self.rows, feature: j, features });
        }
        if row.iter().any(|(_, v)| !v.is_finite()) {
            return Err(RidgeError::Value(format!("row {} has a value that is not a finite number", self.rows)));
        }
        for &(j, v) in row {
            let j = j as usize;
            self.sums[j] += v;
            self.xy[j] += v * y;
            // The lower triangle only: the matrix is symmetric.
            let line = &mut self.gram[j * features..(j + 1) * features];
            for &(k, u) in row {
                if (k as usize) <= j {
                    line[k as usize] += v * u;
                }
            }
        }
        self.y_sum += y;
        self.rows += 1;
        Ok(())
    }

    /// The fit with penalty `alpha`.
    pub fn finish(mut self, alpha: f64) -> Result<RidgeModel, RidgeError> {
        if self.rows == 0 {
            return Err(RidgeError::Shape { rows: 0, labels: 0 });
        }
        if !(alpha.is_finite() && alpha > 0.0) {
            return Err(RidgeError::Value(format!("alpha must be a positive number, got {alpha}")));
        }
        let (n, f) = (self.rows as f64, self.features);
        let mean: Vec<f64> = self.sums.iter().map(|s| s / n).collect();
        let y_mean = self.y_sum / n;
        for j in 0..f {
            for k in 0..=j {
                self.gram[j * f + k] -= n * mean[j] * mean[k];
            }
            self.gram[j * f + j] += alpha;
            self.xy[j] -= n * mean[j] * y_mean;
        }
        let weights = cholesky_solve(&mut self.gram, f, self.xy);
        let intercept = y_mean - mean.iter().zip(&weights).map(|(m, w)| m * w).sum::<f64>();
        Ok(RidgeModel { weights, intercept })
    }
}

/// Fits `rows` (sparse, `features` columns) to `labels` with penalty `alpha`.
pub fn fit(rows: &[Vec<(u32, f64)>], labels: &[f64], features: usize, alpha: f64) -> Result<RidgeModel, RidgeError> {
    if rows.is_empty() || rows.len() != labels.len() {
        return Err(RidgeError::Shape { rows: rows.len(), labels: labels.len() });
    }
    let mut sums = Accumulator::new(features);
    for (row, &y) in rows.iter().zip(labels) {
        sums.add(row, y)?;
    }
    sums.finish(alpha)
}

/// Solves `A x = b` for a symmetric positive definite `A` given by its lower triangle
/// (row-major `n × n`, overwritten by its Cholesky factor). Other fits with normal equations
/// of their own (the pair classifier's Newton steps) use it too.
pub fn cholesky_solve(a: &mut [f64], n: usize, mut b: Vec<f64>) -> Vec<f64> {
    for j in 0..n {
        let (done, rest) = a.split_at_mut(j * n);
        let row_j = &mut rest[..n];
        for k in 0..j {
            let row_k = &done[k * n..k * n + n];
            let dot: f64 = row_j[..k].iter().zip(&row_k[..k]).map(|(x, y)| x * y).sum();
            row_j[k] = (row_j[k] - dot) / row_k[k];
        }
        let dot: f64 = row_j[..j].iter().map(|x| x * x).sum();
        // Positive: the matrix is the Gram matrix of centred data plus alpha on the diagonal.
        row_j[j] = (row_j[j] - dot).sqrt();
    }
    // L y = b, then Lᵀ x = y.
    for i in 0..n {
        let dot: f64 = a[i * n..i * n + i].iter().zip(&b[..i]).map(|(l, y)| l * y).sum();
        b[i] = (b[i] - dot) / a[i * n + i];
    }
    for i in (0..n).rev() {
        let mut sum = b[i];
        for k in i + 1..n {
            sum -= a[k * n + i] * b[k];
        }
        b[i] = sum / a[i * n + i];
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tiny_fit_has_the_closed_form() {
        // One feature, x = 0, 1, 2, y = 1, 3, 5, alpha 1: centred x -1, 0, 1, centred y -2,
        // 0, 2; w = Σxy / (Σx² + α) = 4 / 3; b = 3 - 1 · 4/3.
        let rows = vec![vec![(0, 0.0)], vec![(0, 1.0)], vec![(0, 2.0)]];
        let m = fit(&rows, &[1.0, 3.0, 5.0], 1, 1.0).unwrap();
        assert!((m.weights[0] - 4.0 / 3.0).abs() < 1e-12, "{m:?}");
        assert!((m.intercept - (3.0 - 4.0 / 3.0)).abs() < 1e-12, "{m:?}");
        assert!((m.predict(&[(0, 2.0)]) - (3.0 + 4.0 / 3.0)).abs() < 1e-12);
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(matches!(fit(&[], &[], 2, 1.0), Err(RidgeError::Shape { .. })));
        assert!(matches!(fit(&[vec![(2, 1.0)]], &[1.0], 2, 1.0), Err(RidgeError::Feature { .. })));
        assert!(matches!(fit(&[vec![(0, 1.0)]], &[1.0], 2, 0.0), Err(RidgeError::Value(_))));
        assert!(matches!(fit(&[vec![(0, f64::NAN)]], &[1.0], 2, 1.0), Err(RidgeError::Value(_))));
    }
}
