//! Palettizing a checkpoint's weights (the AFM report, §5.2): every projection matrix of the
//! attention and feed-forward blocks quantized with k-means to a lookup table of `2^b` values
//! shared by each group of `group_rows` rows, `b` chosen per layer (2 or 4 bits) to reach a
//! target bits per weight; both embeddings as 8-bit integers with one scale per row; every
//! other tensor (norms, xIELU's slopes) kept as it is.
//!
//! The result is a checkpoint whose weights are the dequantized values (so that it evaluates,
//! exports and takes adapters like any other) and a description of the palette ([`Palette`]),
//! which the checkpoint record names: the scheme of every tensor, the bits of every layer and
//! the bits per weight. The book's "The AFM recipe" specifies every step.

use std::collections::BTreeMap;

use half::f16;
use serde::{Deserialize, Serialize};

use crate::kmeans::{SplitMix64, lloyd, nearest, plus_plus};

/// The settings of a palettization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaletteConfig {
    /// The bits per weight the projection matrices may average at most, lookup tables included
    /// (the report's 3.7).
    #[serde(default = "default_target")]
    pub target_bits_per_weight: f64,
    /// The rows that share one lookup table (the report's 16).
    #[serde(default = "default_group_rows")]
    pub group_rows: u32,
    /// A layer's bits when it is kept fine.
    #[serde(default = "default_high_bits")]
    pub high_bits: u32,
    /// A layer's bits when it is lowered.
    #[serde(default = "default_low_bits")]
    pub low_bits: u32,
    /// Lloyd's iterations at most, per run of k-means.
    #[serde(default = "default_max_iterations")]
    pub max_iterations: u32,
    /// Runs of k-means per group, each from its own k-means++ initialisation; the run that
    /// leaves the least squared error wins (scikit-learn's `n_init`).
    #[serde(default = "default_restarts")]
    pub restarts: u32,
}

fn default_target() -> f64 {
    3.7
}
fn default_group_rows() -> u32 {
    16
}
fn default_high_bits() -> u32 {
    4
}
fn default_low_bits() -> u32 {
    2
}
fn default_max_iterations() -> u32 {
    100
}
fn default_restarts() -> u32 {
    10
}

/// Bits a lookup-table entry or a row scale costs (they are half-precision floats).
pub const TABLE_ENTRY_BITS: u32 = 16;

/// What became of one tensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "scheme", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Scheme {
    /// k-means lookup tables of `2^bits` half-precision values, one per group of rows.
    Palette {
        /// Index bits per weight.
        bits: u32,
        /// Row groups (lookup tables).
        groups: u64,
        /// Sum of squared differences from the float weights.
        squared_error: f64,
    },
    /// Signed 8-bit integers times one half-precision scale per row.
    Linear8 {
        /// Sum of squared differences from the float weights.
        squared_error: f64,
    },
    /// Kept as stored (32-bit floats).
    Float,
}

impl Scheme {
    /// The bits the tensor of `n` values and `rows` rows takes under the scheme.
    pub fn bits(&self, n: u64, rows: u64) -> u64 {
        match self {
            Self::Palette { bits, groups, .. } => {
                n * u64::from(*bits) + groups * (1 << bits) * u64::from(TABLE_ENTRY_BITS)
            }
            Self::Linear8 { .. } => n * 8 + rows * u64::from(TABLE_ENTRY_BITS),
            Self::Float => n * 32,
        }
    }
}

/// The description of a palettized checkpoint, stored as canonical JSON beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Palette {
    /// `prov-palette`.
    pub format: String,
    /// 1.
    pub version: u32,
    /// The float checkpoint it was made from.
    pub source: String,
    /// The settings.
    pub config: PaletteConfig,
    /// The seed of the k-means initialisation.
    pub seed: u64,
    /// Each layer's bits, by layer index.
    pub layers: Vec<u32>,
    /// Bits per weight over the projection matrices, lookup tables included.
    pub bits_per_weight: f64,
    /// Bits per weight over every tensor of the model (floats at 32 bits).
    pub model_bits_per_weight: f64,
    /// Every tensor's scheme, by name.
    pub tensors: BTreeMap<String, Scheme>,
}

/// The format name [`Palette`] files carry.
pub const FORMAT: &str = "prov-palette";

/// A tensor to palettize: its name, shape `[rows, columns]` (a 1-dimensional tensor is one row)
/// and values in row-major order.
pub struct Tensor<'a> {
    /// The name.
    pub name: &'a str,
    /// Rows.
    pub rows: usize,
    /// Values, row-major.
    pub values: &'a [f32],
}

/// Rounds a finite `x` to the nearest half-precision value (ties to the even one), back in
/// `f64`: one correct rounding, on every machine. Neither of `half`'s conversions is that: its
/// run-time-detected hardware path (x86's F16C) goes through `f32` and rounds twice, its
/// software path drops the low 32 bits of the mantissa before rounding. Their result is off by
/// at most one half-precision step, so the nearest of it and its two neighbours is the answer.
fn half(x: f64) -> f64 {
    let guess = f16::from_f64_const(x).to_bits();
    let mut best: Option<(f64, u16)> = None;
    for bits in [guess.wrapping_sub(1), guess, guess.wrapping_add(1)] {
        let candidate = f16::from_bits(bits);
        if !candidate.is_finite() {
            continue;
        }
        let value = candidate.to_f64_const();
        // Distances compared exactly: a tie is a true midpoint, which goes to the even one.
        let better = best.is_none_or(|(b, b_bits)| match (value - x).abs().total_cmp(&(b - x).abs()) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Equal => bits % 2 == 0 && b_bits % 2 == 1,
            std::cmp::Ordering::Greater => false,
        });
        if better {
            best = Some((value, bits));
        }
    }
    best.map_or(x, |(v, _)| v)
}

/// The squared error `centroids` leave on `values` (each value at its nearest centroid).
fn error_of(values: &[f64], centroids: &[f64]) -> f64 {
    values.iter().map(|x| (centroids[nearest(centroids, *x)] - x).powi(2)).sum()
}

/// Palettizes `values` (`rows` rows) with `bits`-bit tables over groups of `group_rows` rows,
/// drawing initialisations from `rng`: for each group in order, `restarts` runs of k-means
/// (k-means++, then Lloyd for at most `max_iterations`), the run leaving the least squared
/// error kept (the first on a tie), unless the group holds at most `2^bits` distinct values
/// (then those values are its table); the table rounded to half precision; each value replaced
/// by its nearest table entry. Returns the new values and the sum of squared differences.
pub fn palettize(
    values: &[f32],
    rows: usize,
    bits: u32,
    group_rows: usize,
    (max_iterations, restarts): (u32, u32),
    rng: &mut SplitMix64,
) -> (Vec<f32>, f64) {
    let columns = values.len() / rows.max(1);
    let k = 1usize << bits;
    let mut out = Vec::with_capacity(values.len());
    let mut squared_error = 0.0;
    for group in values.chunks(group_rows * columns) {
        let xs: Vec<f64> = group.iter().map(|v| f64::from(*v)).collect();
        let mut distinct = xs.clone();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        let centroids = if distinct.len() <= k {
            distinct
        } else {
            let mut best: Option<(f64, Vec<f64>)> = None;
            for _ in 0..restarts.max(1) {
                let init = plus_plus(&xs, k, rng);
                let (centroids, _) = lloyd(&xs, init, max_iterations);
                let error = error_of(&xs, &centroids);
                if best.as_ref().is_none_or(|(e, _)| error < *e) {
                    best = Some((error, centroids));
                }
            }
            best.expect("at least one run").1
        };
        let table: Vec<f64> = centroids.iter().map(|c| half(*c)).collect();
        for x in &xs {
            let q = table[nearest(&table, *x)];
            squared_error += (q - x).powi(2);
            out.push(q as f32);
        }
    }
    (out, squared_error)
}

/// Signed 8-bit integers per row: the scale is `max |w| / 127` rounded to half precision,
/// each value `round(w / scale)` (ties to even) clamped to `±127`, times the scale; a row of
/// zeros (or whose scale rounds to zero) stays zero. Returns the new values and the sum of
/// squared differences.
pub fn linear8(values: &[f32], rows: usize) -> (Vec<f32>, f64) {
    let columns = values.len() / rows.max(1);
    let mut out = Vec::with_capacity(values.len());
    let mut squared_error = 0.0;
    for row in values.chunks(columns.max(1)) {
        let largest = row.iter().map(|v| f64::from(v.abs())).fold(0.0, f64::max);
        let scale = half(largest / 127.0);
        for v in row {
            let x = f64::from(*v);
            let q = if scale == 0.0 { 0.0 } else { (x / scale).round_ties_even().clamp(-127.0, 127.0) * scale };
            squared_error += (q - x).powi(2);
            out.push(q as f32);
        }
    }
    (out, squared_error)
}

/// The layer a projection matrix belongs to (`model.layers.3.mlp.up_proj.weight` is in 3).
pub fn layer_of(name: &str) -> Option<usize> {
    name.strip_prefix("model.layers.")?.split('.').next()?.parse().ok()
}

/// The embeddings (input and output), quantized to 8 bits.
pub fn is_embedding(name: &str) -> bool {
    name == "model.embed_tokens.weight" || name == "lm_head.weight"
}

/// Why a palettization cannot be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PaletteError {
    /// Even every layer at the low bits exceeds the target.
    #[error(
        "with every layer at {low} bits the projections take {floor:.4} bits per weight, above the target {target}"
    )]
    TargetTooLow {
        /// The low bits.
        low: u32,
        /// Their bits per weight.
        floor: f64,
        /// The target.
        target: f64,
    },
    /// A tensor's shape does not fit the scheme.
    #[error("tensor `{0}`: {1}")]
    Shape(String, String),
    /// A weight is NaN or infinite (a diverged model), or too large for a half-precision scale.
    #[error("tensor `{0}` holds {1} at index {2}: palettize a checkpoint of finite weights")]
    NotFinite(String, f32, usize),
}

/// A palettized model: every tensor's new values, each layer's bits, every tensor's scheme.
#[derive(Debug, Clone)]
pub struct Palettized {
    /// The new values, by tensor name.
    pub values: BTreeMap<String, Vec<f32>>,
    /// Each layer's bits, by layer index.
    pub layers: Vec<u32>,
    /// Every tensor's scheme, by name.
    pub schemes: BTreeMap<String, Scheme>,
}

/// A projection palettized at both widths, until the layers' bits are chosen.
struct Candidate<'a> {
    layer: usize,
    name: &'a str,
    values: u64,
    rows: u64,
    high: (Vec<f32>, f64),
    low: (Vec<f32>, f64),
}

/// Palettizes every tensor (`tensors` in name order; `is_projection` says which are the
/// layers' projection matrices): see the module documentation and the book. Returns the new
/// values by name, each layer's bits, and the schemes.
///
/// The layers' bits: every projection is palettized at the high and at the low bits (the
/// initialisations drawn in that order from one stream seeded with `seed`, tensor by tensor
/// in name order); all layers start high; while the projections' bits per weight exceed the
/// target, the layer whose lowering adds the least squared error per weight it covers (the
/// lowest index on a tie) is lowered.
pub fn palettize_model(
    tensors: &[Tensor<'_>],
    is_projection: impl Fn(&str) -> bool,
    config: &PaletteConfig,
    seed: u64,
) -> Result<Palettized, PaletteError> {
    let mut rng = SplitMix64(seed);
    let group_rows = config.group_rows as usize;
    let mut candidates: Vec<Candidate<'_>> = Vec::new();
    let mut out = BTreeMap::new();
    let mut schemes = BTreeMap::new();
    for t in tensors {
        if t.rows == 0 || t.values.len() % t.rows != 0 {
            return Err(PaletteError::Shape(
                t.name.to_owned(),
                format!("{} values in {} rows", t.values.len(), t.rows),
            ));
        }
        // Half precision's largest value: a larger weight has no table entry or 8-bit scale.
        let bound = 65_504.0;
        if let Some(i) = t.values.iter().position(|v| !v.is_finite() || v.abs() > bound) {
            return Err(PaletteError::NotFinite(t.name.to_owned(), t.values[i], i));
        }
        if is_projection(t.name) {
            let layer = layer_of(t.name)
                .ok_or_else(|| PaletteError::Shape(t.name.to_owned(), "a projection outside a layer".into()))?;
            let runs = (config.max_iterations, config.restarts);
            let high = palettize(t.values, t.rows, config.high_bits, group_rows, runs, &mut rng);
            let low = palettize(t.values, t.rows, config.low_bits, group_rows, runs, &mut rng);
            candidates.push(Candidate {
                layer,
                name: t.name,
                values: t.values.len() as u64,
                rows: t.rows as u64,
                high,
                low,
            });
        } else if is_embedding(t.name) {
            let (values, squared_error) = linear8(t.values, t.rows);
            out.insert(t.name.to_owned(), values);
            schemes.insert(t.name.to_owned(), Scheme::Linear8 { squared_error });
        } else {
            out.insert(t.name.to_owned(), t.values.to_vec());
            schemes.insert(t.name.to_owned(), Scheme::Float);
        }
    }
    let layers = candidates.iter().map(|c| c.layer + 1).max().unwrap_or(0);
    let groups = |rows: u64| rows.div_ceil(u64::from(config.group_rows));
    let scheme =
        |bits: u32, rows: u64, squared_error: f64| Scheme::Palette { bits, groups: groups(rows), squared_error };
    let total_bits = |low: &[bool]| -> (u64, u64) {
        candidates.iter().fold((0, 0), |(bits, n), c| {
            let b = if low[c.layer] { config.low_bits } else { config.high_bits };
            (bits + scheme(b, c.rows, 0.0).bits(c.values, c.rows), n + c.values)
        })
    };
    let mut low = vec![false; layers];
    let per_weight = |(bits, n): (u64, u64)| if n == 0 { 0.0 } else { bits as f64 / n as f64 };
    let floor = per_weight(total_bits(&vec![true; layers]));
    if floor > config.target_bits_per_weight {
        return Err(PaletteError::TargetTooLow { low: config.low_bits, floor, target: config.target_bits_per_weight });
    }
    // The cost of lowering each layer: added squared error per weight of its projections.
    let mut cost = vec![(0.0, 0u64); layers];
    for c in &candidates {
        cost[c.layer].0 += c.low.1 - c.high.1;
        cost[c.layer].1 += c.values;
    }
    let mut order: Vec<usize> = (0..layers).filter(|l| cost[*l].1 > 0).collect();
    order.sort_by(|a, b| (cost[*a].0 / cost[*a].1 as f64).total_cmp(&(cost[*b].0 / cost[*b].1 as f64)).then(a.cmp(b)));
    for l in order {
        if per_weight(total_bits(&low)) <= config.target_bits_per_weight {
            break;
        }
        low[l] = true;
    }
    let bits: Vec<u32> = low.iter().map(|&l| if l { config.low_bits } else { config.high_bits }).collect();
    for c in candidates {
        let ((values, squared_error), b) =
            if low[c.layer] { (c.low, config.low_bits) } else { (c.high, config.high_bits) };
        out.insert(c.name.to_owned(), values);
        schemes.insert(c.name.to_owned(), scheme(b, c.rows, squared_error));
    }
    Ok(Palettized { values: out, layers: bits, schemes })
}

/// Bits per weight over the tensors `schemes` names that `pick` selects (`sizes` gives each
/// tensor's values and rows).
pub fn bits_per_weight(
    schemes: &BTreeMap<String, Scheme>,
    sizes: &BTreeMap<String, (u64, u64)>,
    pick: impl Fn(&str, &Scheme) -> bool,
) -> f64 {
    let (bits, n) = schemes.iter().filter(|(name, s)| pick(name, s)).fold((0u64, 0u64), |(bits, n), (name, s)| {
        let (values, rows) = sizes.get(name).copied().unwrap_or((0, 0));
        (bits + s.bits(values, rows), n + values)
    });
    if n == 0 { 0.0 } else { bits as f64 / n as f64 }
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // exact values are the point: tables and scales are exact
mod tests {
    use super::*;

    /// Rounding to half precision is one correct rounding of the `f64`, on every machine: a
    /// value just above the midpoint between two halves whose `f32` rounding lands on it.
    #[test]
    fn half_rounds_once() {
        // 1 + 2^-11 is the midpoint between 1 and the next half (1 + 2^-10); a little more
        // rounds up, but rounding to f32 first (or dropping the mantissa's low bits) lands
        // exactly on the midpoint, which ties to 1.
        let step = 2f64.powi(-10);
        assert_eq!(half(1.0 + step / 2.0 + 2f64.powi(-40)), 1.0 + step);
        assert_eq!(half(1.0 + step / 2.0), 1.0, "a tie goes to the even one");
        assert_eq!(half(1.0 + 1.5 * step), 1.0 + 2.0 * step, "a tie goes to the even one");
        assert_eq!(half(-(1.0 + step / 2.0 + 2f64.powi(-40))), -(1.0 + step));
        assert_eq!(half(3e-8), 2f64.powi(-24), "subnormals round too");
        assert_eq!(half(0.0), 0.0);
    }

    #[test]
    fn a_group_with_few_values_keeps_them_exactly() {
        let values = [0.5f32, -0.25, 0.5, 0.125, -0.25, 0.125, 0.5, 0.5];
        let (out, err) = palettize(&values, 2, 2, 16, (100, 10), &mut SplitMix64(1));
        assert_eq!((out.as_slice(), err), (&values[..], 0.0));
    }

    #[test]
    fn each_group_of_rows_has_at_most_its_table() {
        let values: Vec<f32> = (0..64 * 8).map(|i| ((i * 37 % 101) as f32 - 50.0) / 100.0).collect();
        let (out, _) = palettize(&values, 64, 2, 16, (100, 10), &mut SplitMix64(3));
        for group in out.chunks(16 * 8) {
            let mut d: Vec<u32> = group.iter().map(|v| v.to_bits()).collect();
            d.sort_unstable();
            d.dedup();
            assert!(d.len() <= 4, "{} values", d.len());
            assert!(group.iter().all(|v| f16::from_f32(*v).to_f32() == *v), "table entries are half precision");
        }
    }

    #[test]
    fn linear8_is_integers_times_a_row_scale() {
        let values = [1.0f32, -0.5, 0.25, 0.0, 0.0, 0.0];
        let (out, _) = linear8(&values, 2);
        let scale = half(1.0 / 127.0) as f32;
        assert_eq!(out[0], 127.0 * scale);
        assert_eq!(out[1], (-0.5f64 / f64::from(scale)).round_ties_even() as f32 * scale);
        assert_eq!(&out[3..], &[0.0, 0.0, 0.0]);
    }

    #[test]
    fn layers_are_lowered_until_the_target_is_met() {
        let a: Vec<f32> = (0..32 * 16).map(|i| ((i * 13 % 97) as f32) / 97.0).collect();
        let b: Vec<f32> = (0..32 * 16).map(|i| ((i * 29 % 89) as f32) / 89.0).collect();
        let tensors = [
            Tensor { name: "model.layers.0.mlp.up_proj.weight", rows: 32, values: &a },
            Tensor { name: "model.layers.1.mlp.up_proj.weight", rows: 32, values: &b },
        ];
        let config = |target| PaletteConfig { target_bits_per_weight: target, ..serde_json::from_str("{}").unwrap() };
        assert_eq!(palettize_model(&tensors, |_| true, &config(5.0), 1).unwrap().layers, [4, 4]);
        let Palettized { layers: bits, schemes, .. } = palettize_model(&tensors, |_| true, &config(4.0), 1).unwrap();
        assert_eq!(bits.iter().filter(|b| **b == 2).count(), 1, "{bits:?}");
        let sizes = tensors.iter().map(|t| (t.name.to_owned(), (t.values.len() as u64, t.rows as u64))).collect();
        assert!(bits_per_weight(&schemes, &sizes, |_, _| true) <= 4.0);
        let e = palettize_model(&tensors, |_| true, &config(2.0), 1).unwrap_err();
        assert!(matches!(e, PaletteError::TargetTooLow { low: 2, .. }), "{e}");
        let nan = [0.5f32, f32::NAN];
        let diverged = [Tensor { name: "model.layers.0.mlp.up_proj.weight", rows: 1, values: &nan }];
        let e = palettize_model(&diverged, |_| true, &config(4.0), 1).unwrap_err();
        assert!(matches!(e, PaletteError::NotFinite(_, _, 1)), "{e}");
    }
}
