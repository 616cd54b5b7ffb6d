//! One-dimensional k-means, as the palettizer runs it on each group of weights: k-means++
//! initialisation from a pinned `SplitMix64` stream, then Lloyd's iterations to a fixed point.
//!
//! The generator is [`SplitMix64`], the one behind every seeded draw that is not libtorch's.
//! Every step is specified so that an independent implementation gives the same centroids:
//! sums in `f64` in input order, nearest centroid with ties to the lower index, an empty
//! cluster keeping its centroid.

pub use prov_dataset::tokens::SplitMix64;

/// The index of the centroid nearest `x` (the first of equally near ones).
pub fn nearest(centroids: &[f64], x: f64) -> usize {
    let mut best = 0;
    let mut best_distance = f64::INFINITY;
    for (i, c) in centroids.iter().enumerate() {
        let d = (x - c).abs();
        if d < best_distance {
            best = i;
            best_distance = d;
        }
    }
    best
}

/// k-means++ (Arthur and Vassilvitskii, 2007) on `values` (not empty; `k` at most their
/// number): the first centroid is `values[floor(u·n)]`; each next one is the first value whose
/// running sum of squared distances to its nearest chosen centroid exceeds `u` times their
/// total (the last value with a positive distance if rounding leaves none). When every
/// distance is zero, the remaining centroids are left out (there are fewer distinct values
/// than `k`; the caller handles that case first).
pub fn plus_plus(values: &[f64], k: usize, rng: &mut SplitMix64) -> Vec<f64> {
    let n = values.len();
    let first = ((rng.next_f64() * n as f64) as usize).min(n - 1);
    let mut centroids = vec![values[first]];
    let mut nearest_sq: Vec<f64> = values.iter().map(|x| (x - values[first]).powi(2)).collect();
    while centroids.len() < k {
        let total: f64 = nearest_sq.iter().sum();
        if total <= 0.0 {
            break;
        }
        let target = rng.next_f64() * total;
        let mut running = 0.0;
        let mut chosen = None;
        for (i, d) in nearest_sq.iter().enumerate() {
            running += d;
            if running > target {
                chosen = Some(i);
                break;
            }
        }
        // Rounding can leave the running sum at or under the target: the last value still apart.
        let Some(chosen) = chosen.or_else(|| nearest_sq.iter().rposition(|d| *d > 0.0)) else { break };
        let c = values[chosen];
        centroids.push(c);
        for (d, x) in nearest_sq.iter_mut().zip(values) {
            *d = d.min((x - c).powi(2));
        }
    }
    centroids
}

/// Lloyd's iterations from `centroids`: assign every value to its nearest centroid, move each
/// centroid to the mean of its values (an empty cluster keeps its centroid), until the
/// assignment no longer changes or `max_iterations` have run. Returns the centroids and the
/// iterations run.
pub fn lloyd(values: &[f64], mut centroids: Vec<f64>, max_iterations: u32) -> (Vec<f64>, u32) {
    let mut assignment: Vec<usize> = values.iter().map(|x| nearest(&centroids, *x)).collect();
    let mut iterations = 0;
    while iterations < max_iterations {
        iterations += 1;
        let mut sums = vec![0.0; centroids.len()];
        let mut counts = vec![0u64; centroids.len()];
        for (x, &a) in values.iter().zip(&assignment) {
            sums[a] += x;
            counts[a] += 1;
        }
        for ((c, s), n) in centroids.iter_mut().zip(&sums).zip(&counts) {
            if *n > 0 {
                *c = s / *n as f64;
            }
        }
        let next: Vec<usize> = values.iter().map(|x| nearest(&centroids, *x)).collect();
        if next == assignment {
            break;
        }
        assignment = next;
    }
    (centroids, iterations)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_clear_clusters_are_found() {
        let values = [0.0, 0.1, -0.1, 5.0, 5.1, 4.9];
        let mut rng = SplitMix64(7);
        let init = plus_plus(&values, 2, &mut rng);
        let (mut centroids, _) = lloyd(&values, init, 100);
        centroids.sort_by(f64::total_cmp);
        assert!((centroids[0] - 0.0).abs() < 1e-12 && (centroids[1] - 5.0).abs() < 1e-12, "{centroids:?}");
    }

    #[test]
    fn ties_go_to_the_lower_index() {
        assert_eq!(nearest(&[1.0, 3.0], 2.0), 0);
        assert_eq!(nearest(&[3.0, 1.0], 2.0), 0);
    }
}
