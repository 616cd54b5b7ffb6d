//! The Goldfish loss's mask (the Apertus report's Algorithm 1, as its released code does it):
//! a label is dropped from the loss when a hash of the `h` labels ending at it falls below
//! `1/k` in a fixed table of random numbers. The same context always drops the same label, in
//! every sample and every epoch, so a passage seen many times is never learned verbatim.
//!
//! The table is `torch.rand(1_000_003)` after `torch.manual_seed(2971215073)` on the CPU: the
//! released code's table. It is drawn here as libtorch's CPU generator draws it (an MT19937
//! seeded with the 32-bit seed, each float32 from the low 24 bits of one 32-bit output), so
//! that `prov` computes masks without loading libtorch; the worker's tests check the table
//! against libtorch's own `rand`, and `tests/test_goldfish.rs` the masks against the released
//! code in `PyTorch`.

use std::sync::OnceLock;

/// Entries in the hash table (a prime).
pub const TABLE_SIZE: i64 = 1_000_003;

/// The seed of the table's generator.
pub const TABLE_SEED: i64 = 2_971_215_073;

static TABLE: OnceLock<Vec<f32>> = OnceLock::new();

/// The table of uniform `[0, 1)` float32 values.
pub fn table() -> &'static [f32] {
    TABLE.get_or_init(|| {
        let seed = u32::try_from(TABLE_SEED).expect("the table's seed fits in 32 bits");
        torch_cpu_rand(seed, usize::try_from(TABLE_SIZE).expect("the table size fits in usize"))
    })
}

/// `torch.rand(n)` on the CPU after `torch.manual_seed(seed)`: `ATen`'s
/// `uniform_real_distribution<float>` over its `mt19937`, `(x & (2^24 - 1)) / 2^24` for each
/// 32-bit output `x`, drawn serially.
pub fn torch_cpu_rand(seed: u32, n: usize) -> Vec<f32> {
    let mut mt = Mt19937::new(seed);
    (0..n).map(|_| (mt.next_u32() & 0x00FF_FFFF) as f32 / (1u32 << 24) as f32).collect()
}

/// The 32-bit Mersenne Twister (Matsumoto and Nishimura 1998), as `ATen`'s `at::mt19937`
/// seeds and draws it.
struct Mt19937 {
    state: [u32; 624],
    next: usize,
}

impl Mt19937 {
    fn new(seed: u32) -> Self {
        let mut state = [0u32; 624];
        state[0] = seed;
        for i in 1..624 {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32.wrapping_mul(prev ^ (prev >> 30)).wrapping_add(i as u32);
        }
        Self { state, next: 624 }
    }

    fn twist(&mut self) {
        for i in 0..624 {
            let y = (self.state[i] & 0x8000_0000) | (self.state[(i + 1) % 624] & 0x7FFF_FFFF);
            let mag = if y & 1 == 0 { 0 } else { 0x9908_B0DF };
            self.state[i] = self.state[(i + 397) % 624] ^ (y >> 1) ^ mag;
        }
        self.next = 0;
    }

    fn next_u32(&mut self) -> u32 {
        if self.next >= 624 {
            self.twist();
        }
        let mut y = self.state[self.next];
        self.next += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9D2C_5680;
        y ^= (y << 15) & 0xEFC6_0000;
        y ^ (y >> 18)
    }
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
    fn the_generator_is_the_published_mersenne_twister() {
        // The reference implementation's 10000th output for the default seed 5489 (the C++
        // standard's check of `std::mt19937`).
        let mut mt = Mt19937::new(5489);
        let tenth_thousand = (0..10_000).map(|_| mt.next_u32()).last();
        assert_eq!(tenth_thousand, Some(4_123_659_995));
    }

    #[test]
    fn the_table_is_uniform() {
        // That it is libtorch's `rand` bit for bit is the worker's test (`prov-worker`'s
        // `goldfish_table_is_libtorch_rand`), which links libtorch.
        let t = table();
        assert_eq!(t.len(), TABLE_SIZE as usize);
        assert!(t.iter().all(|&v| (0.0..1.0).contains(&v)));
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
