//! The Goldfish loss's mask (the Apertus report's Algorithm 1, as its released code does it):
//! a label is dropped from the loss when a hash of the `h` labels ending at it falls below
//! `1/k` in a fixed table of random numbers. The same context always drops the same label, in
//! every sample and every epoch, so a passage seen many times is never learned verbatim.
//!
//! The table is `torch.rand(1_000_003)` after `torch.manual_seed(2971215073)` on the CPU: the
//! released code's table, drawn here from libtorch's own generator so that both agree to the bit.

use std::sync::OnceLock;

use tch::{Device, Kind, Tensor};

/// Entries in the hash table (a prime).
pub const TABLE_SIZE: i64 = 1_000_003;

/// The seed of the table's generator.
pub const TABLE_SEED: i64 = 2_971_215_073;

static TABLE: OnceLock<Vec<f32>> = OnceLock::new();

/// The table of uniform `[0, 1)` float32 values.
///
/// The first call reseeds libtorch's global CPU generator to draw it. Callers that draw
/// random numbers of their own (model initialisation) call this first and seed afterwards:
/// the trainer does (`Trainer::new`).
pub fn table() -> &'static [f32] {
    TABLE.get_or_init(|| {
        tch::manual_seed(TABLE_SEED);
        let t = Tensor::rand([TABLE_SIZE], (Kind::Float, Device::Cpu));
        prov_torch::f32_values(&t)
    })
}

/// The hash key of the window ending at each position `j >= h - 1`: the product of the
/// window's labels in wrapping `i64` arithmetic (as `torch.prod` on int64 does), floor-modulo
/// the table size.
pub fn key(window: &[i64]) -> usize {
    let product = window.iter().fold(1i64, |acc, &t| acc.wrapping_mul(t));
    // `rem_euclid` by a positive divisor is Python's and torch's floor modulo.
    product.rem_euclid(TABLE_SIZE) as usize
}

/// For each label of one sample, whether Goldfish drops it: positions before `h - 1` never
/// are; position `j` is when `table[key(labels[j-h+1..=j])] < 1/k` (compared in float32, as
/// torch compares a float32 tensor with a Python number).
pub fn drop_mask(labels: &[i64], k: u64, h: u64) -> Vec<bool> {
    let table = table();
    let threshold = (1.0 / k as f64) as f32;
    let h = h as usize;
    let mut mask = vec![false; labels.len()];
    if h == 0 || labels.len() < h {
        return mask;
    }
    for (j, dropped) in mask.iter_mut().enumerate().skip(h - 1) {
        *dropped = table[key(&labels[j + 1 - h..=j])] < threshold;
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_torch_rand_after_the_seed() {
        let t = table();
        assert_eq!(t.len(), TABLE_SIZE as usize);
        assert!(t.iter().all(|&v| (0.0..1.0).contains(&v)));
        // Drawing again from the same seed gives the same values: the table is libtorch's
        // generator, not something that merely looks uniform.
        tch::manual_seed(TABLE_SEED);
        let again = prov_torch::f32_values(&Tensor::rand([16], (Kind::Float, Device::Cpu)));
        assert_eq!(&t[..16], again.as_slice());
        let mean = t.iter().map(|&v| f64::from(v)).sum::<f64>() / t.len() as f64;
        assert!((mean - 0.5).abs() < 1e-3, "mean {mean}");
    }

    #[test]
    fn keys_wrap_and_floor() {
        assert_eq!(key(&[2, 3]), 6);
        assert_eq!(key(&[TABLE_SIZE + 5]), 5);
        // Python: (-7) % 1000003 == 999996.
        assert_eq!(key(&[-7]), 999_996);
        // 2^63 wraps to i64::MIN; Python on int64 tensors gives the same residue.
        let wrapped = i64::MIN.rem_euclid(TABLE_SIZE) as usize;
        assert_eq!(key(&[1 << 62, 2]), wrapped);
    }

    #[test]
    fn about_one_label_in_k_is_dropped_beyond_the_first_window() {
        let labels: Vec<i64> = (0..200_000i64).map(|i| i.wrapping_mul(2_654_435_761).rem_euclid(4096)).collect();
        let mask = drop_mask(&labels, 50, 50);
        assert!(mask[..49].iter().all(|&d| !d));
        let dropped = mask.iter().filter(|&&d| d).count() as f64 / (labels.len() - 49) as f64;
        assert!((dropped - 0.02).abs() < 0.002, "dropped {dropped}");
    }

    #[test]
    fn the_same_context_drops_the_same_label() {
        let a: Vec<i64> = (1..=300).collect();
        let mut b = vec![9999, 9998, 9997];
        b.extend(&a);
        let (ma, mb) = (drop_mask(&a, 4, 3), drop_mask(&b, 4, 3));
        // Positions with the same 3-label window agree.
        assert_eq!(ma[2..], mb[5..]);
        assert!(ma.iter().any(|&d| d));
    }

    #[test]
    fn short_samples_drop_nothing() {
        assert_eq!(drop_mask(&[1, 2, 3], 2, 5), vec![false; 3]);
        assert!(drop_mask(&[], 50, 50).is_empty());
    }
}
