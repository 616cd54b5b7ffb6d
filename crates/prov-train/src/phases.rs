//! Phased pretraining, as the EuroLLM report trains (§2.2): consecutive phases of one run, each
//! with its own learning-rate segment, its own data mixture, and optionally a new RoPE base
//! and a longer context. The `pretrain` stage takes them as `phases`; this module owns what
//! they mean without libtorch: their configuration ([`PhaseParams`]), the learning rate of each
//! step ([`PhaseLr`]), how a phase's samples are drawn from its sources ([`blend`]), and which
//! sample of which source every slot of every step reads ([`Plan`]).
//!
//! EuroLLM was trained with Megatron-LM, so each phase follows Megatron-LM's own rules, with
//! its step count restarted at the phase's start:
//! - the learning rate is `OptimizerParamScheduler`'s (`init_lr` 0, `max_lr` the phase's start,
//!   `min_lr` its end, `lr_decay_steps` the phase's steps, style `constant` or `linear`);
//! - the mixture is `BlendedDataset`'s: weights normalised as `numpy` sums them, and each slot
//!   given to the source furthest below its share (`build_blending_indices`).
//!
//! `crates/prov-train/tests/phases_megatron.rs` holds both to megatron-core itself.
//!
//! A source's samples are read in its own data order, continuing across phases: a source that
//! two phases draw from never repeats a sample before its order is used up.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One phase of a phased `pretrain` stage, as the lockfile states it (every default explicit
/// once resolved).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseParams {
    /// The phase's name (shown by `prov explain batch`).
    pub name: String,
    /// Optimizer steps in this phase.
    pub steps: u64,
    /// Steps of linear warm-up from 0 to `lr_start` at the phase's start: by default a tenth
    /// of the first phase (the report's warm-up), none in later phases.
    #[serde(default)]
    pub warmup_steps: Option<u64>,
    /// Share of the peak learning rate (above 0, at most 1) the phase starts from after
    /// warm-up: by default 1 in the first phase and the previous phase's `lr_end` after, so the rate is continuous.
    #[serde(default)]
    pub lr_start: Option<f64>,
    /// Share of the peak the phase decays to linearly by its end (reached the step after its
    /// last, as Megatron-LM decays): by default `lr_start`, a constant phase.
    #[serde(default)]
    pub lr_end: Option<f64>,
    /// The sources this phase draws from and their weights (any positive numbers; they are
    /// normalised). Source `S` is the stage's inputs `S-tokens` and `S-order`.
    pub mixture: BTreeMap<String, f64>,
    /// RoPE's base from this phase on: by default the previous phase's (the model's in the
    /// first).
    #[serde(default)]
    pub rope_theta: Option<f64>,
}

impl PhaseParams {
    /// A phase of `steps` steps drawing from `mixture` (source, weight), with every other field
    /// left to its default.
    pub fn new(name: &str, steps: u64, mixture: &[(&str, f64)]) -> Self {
        Self {
            name: name.into(),
            steps,
            warmup_steps: None,
            lr_start: None,
            lr_end: None,
            mixture: mixture.iter().map(|(s, w)| ((*s).to_owned(), *w)).collect(),
            rope_theta: None,
        }
    }
}

/// What is wrong with a phase list: the field (below `phases`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseError {
    /// Path below `phases`, as `["1", "mixture"]`.
    pub path: Vec<String>,
    /// What is wrong.
    pub message: String,
}

fn phase_error(index: usize, field: &str, message: impl Into<String>) -> PhaseError {
    PhaseError { path: vec![index.to_string(), field.to_owned()], message: message.into() }
}

/// Makes every default of `phases` explicit and checks them; returns the run's total steps.
/// `model_theta` is the model's RoPE base, the first phase's by default.
pub fn resolve(phases: &mut [PhaseParams], model_theta: f64) -> Result<u64, PhaseError> {
    if phases.is_empty() {
        return Err(PhaseError { path: vec![], message: "a phased run needs at least one phase".into() });
    }
    let mut names = std::collections::BTreeSet::new();
    let (mut share, mut theta, mut total) = (1.0_f64, model_theta, 0_u64);
    for (i, p) in phases.iter_mut().enumerate() {
        if !is_name(&p.name) {
            return Err(phase_error(i, "name", format!("`{}` is not a name: use a-z, 0-9 and `-`", p.name)));
        }
        if !names.insert(p.name.clone()) {
            return Err(phase_error(i, "name", format!("a phase named `{}` comes earlier", p.name)));
        }
        if p.steps == 0 {
            return Err(phase_error(i, "steps", "must be at least 1"));
        }
        let warmup = *p.warmup_steps.get_or_insert(if i == 0 { p.steps / 10 } else { 0 });
        if warmup >= p.steps {
            return Err(phase_error(i, "warmup_steps", format!("must be below the phase's {} steps", p.steps)));
        }
        let start = *p.lr_start.get_or_insert(share);
        let end = *p.lr_end.get_or_insert(start);
        if !(start > 0.0 && start <= 1.0) {
            return Err(phase_error(
                i,
                "lr_start",
                format!("must be a share of the peak above 0 and at most 1, got {start}"),
            ));
        }
        if !(end.is_finite() && (0.0..=start).contains(&end)) {
            return Err(phase_error(i, "lr_end", format!("must be from 0 to lr_start ({start}), got {end}")));
        }
        theta = *p.rope_theta.get_or_insert(theta);
        if !(theta.is_finite() && theta > 1.0) {
            return Err(phase_error(i, "rope_theta", format!("must be a number above 1, got {theta}")));
        }
        if p.mixture.is_empty() {
            return Err(phase_error(
                i,
                "mixture",
                "names no source: give `mixture: {SOURCE: WEIGHT}`, with inputs SOURCE-tokens and SOURCE-order",
            ));
        }
        if p.mixture.len() > usize::from(u16::MAX) {
            return Err(phase_error(i, "mixture", "has too many sources"));
        }
        for (source, &w) in &p.mixture {
            if !is_name(source) {
                return Err(phase_error(i, "mixture", format!("`{source}` is not a name: use a-z, 0-9 and `-`")));
            }
            if !(w.is_finite() && w > 0.0) {
                return Err(phase_error(i, "mixture", format!("the weight of `{source}` must be positive, got {w}")));
            }
        }
        let weights: Vec<f64> = p.mixture.values().copied().collect();
        if !numpy_sum(&weights).is_finite() || normalise(&weights).iter().any(|&w| w <= 0.0) {
            return Err(phase_error(
                i,
                "mixture",
                "the weights are too far apart: each must be a finite share of their sum",
            ));
        }
        share = end;
        total = total.checked_add(p.steps).ok_or_else(|| phase_error(i, "steps", "the phases' steps overflow"))?;
    }
    Ok(total)
}

fn is_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Every source the phases name, sorted.
pub fn sources(phases: &[PhaseParams]) -> Vec<String> {
    let set: std::collections::BTreeSet<&String> = phases.iter().flat_map(|p| p.mixture.keys()).collect();
    set.into_iter().cloned().collect()
}

/// The stage input that holds source `source`'s token tree.
pub fn tokens_input(source: &str) -> String {
    format!("{source}-tokens")
}

/// The stage input that holds source `source`'s data order.
pub fn order_input(source: &str) -> String {
    format!("{source}-order")
}

/// One phase's learning-rate segment, in absolute rates, as Megatron-LM's
/// `OptimizerParamScheduler` computes it with `init_lr` 0: with `t` the steps taken in the
/// phase before the one asked (`num_steps`), `W` the warm-up, `N` the phase's steps,
///
/// ```text
/// W > 0 and t <= W   lr = max * t / W
/// max == min         lr = max                                   (style `constant`)
/// otherwise          lr = min + (1 - (t - W) / (N - W)) * (max - min)   (style `linear`)
/// ```
///
/// in Megatron-LM's order of operations, so that the rates are its rates to the bit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseLr {
    /// The phase's steps (`lr_decay_steps`).
    pub steps: u64,
    /// Warm-up steps (`lr_warmup_steps`).
    pub warmup: u64,
    /// The rate after warm-up (`max_lr`).
    pub max: f64,
    /// The rate the phase decays towards (`min_lr`).
    pub min: f64,
}

impl PhaseLr {
    /// The rate of the phase's step `t + 1` (`t` steps taken in the phase before it).
    pub fn lr(&self, t: u64) -> f64 {
        let init = 0.0_f64;
        if self.warmup > 0 && t <= self.warmup {
            return init + (self.max - init) * t as f64 / self.warmup as f64;
        }
        #[allow(clippy::float_cmp)] // Megatron-LM's style choice: exactly equal rates are constant
        if self.max == self.min {
            return self.max;
        }
        if t > self.steps {
            return self.min;
        }
        let ratio = (t - self.warmup) as f64 / (self.steps - self.warmup) as f64;
        let coeff = 1.0 - ratio;
        self.min + coeff * (self.max - self.min)
    }
}

/// The learning-rate segments of resolved `phases` for peak rate `peak`.
pub fn rates(phases: &[PhaseParams], peak: f64) -> Vec<PhaseLr> {
    phases
        .iter()
        .map(|p| PhaseLr {
            steps: p.steps,
            warmup: p.warmup_steps.unwrap_or(0),
            max: peak * p.lr_start.unwrap_or(1.0),
            min: peak * p.lr_end.or(p.lr_start).unwrap_or(1.0),
        })
        .collect()
}

/// The sum `numpy.sum` gives for a contiguous float64 array: numpy's pairwise summation
/// (below eight elements one after another from 0; up to 128 in eight running sums combined as
/// a tree, the rest added after; above that, the two halves, split at a multiple of eight).
pub fn numpy_sum(values: &[f64]) -> f64 {
    fn pairwise(a: &[f64]) -> f64 {
        let n = a.len();
        if n < 8 {
            let mut res = 0.0;
            for x in a {
                res += x;
            }
            res
        } else if n <= 128 {
            let mut r = [a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]];
            let whole = n - n % 8;
            for block in a[8..whole].chunks_exact(8) {
                for (acc, x) in r.iter_mut().zip(block) {
                    *acc += x;
                }
            }
            let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
            for x in &a[whole..] {
                res += x;
            }
            res
        } else {
            let mut half = n / 2;
            half -= half % 8;
            pairwise(&a[..half]) + pairwise(&a[half..])
        }
    }
    pairwise(values)
}

/// Weights scaled to sum to one as `megatron.core.datasets.utils.normalize` scales them:
/// each divided by their `numpy.sum`.
pub fn normalise(weights: &[f64]) -> Vec<f64> {
    let total = numpy_sum(weights);
    weights.iter().map(|w| w / total).collect()
}

/// Megatron-LM's blend of `size` samples from sources of weights `weights` (normalised as
/// `megatron.core.datasets.utils.normalize` does, [`normalise`]): slot `i` goes to the source
/// whose share `weight · max(i, 1)` is furthest above the samples it has had, the first such
/// source on a tie. Yields each slot's source and the source's sample count before it, one
/// slot at a time: what it holds is a count per source, whatever `size` is.
#[derive(Debug, Clone)]
pub struct Blend {
    weights: Vec<f64>,
    taken: Vec<u64>,
    slot: u64,
    size: u64,
}

impl Blend {
    /// The blend of `size` slots; `weights` must be positive numbers with a finite sum.
    pub fn new(weights: &[f64], size: u64) -> Self {
        Self { weights: normalise(weights), taken: vec![0; weights.len()], slot: 0, size }
    }
}

impl Iterator for Blend {
    type Item = (u16, u64);

    fn next(&mut self) -> Option<(u16, u64)> {
        if self.slot >= self.size {
            return None;
        }
        let at = (self.slot as f64).max(1.0);
        let mut best = 0;
        let mut best_error = self.weights[0] * at - self.taken[0] as f64;
        for (d, w) in self.weights.iter().enumerate().skip(1) {
            let error = w * at - self.taken[d] as f64;
            if error > best_error {
                best_error = error;
                best = d;
            }
        }
        let before = self.taken[best];
        self.taken[best] += 1;
        self.slot += 1;
        Some((u16::try_from(best).expect("a phase has at most u16::MAX sources"), before))
    }
}

/// The whole blend of `size` slots ([`Blend`]), for tests and small runs.
pub fn blend(weights: &[f64], size: u64) -> Vec<(u16, u64)> {
    Blend::new(weights, size).collect()
}

/// Where one slot of a batch reads: a source, and the position in that source's data order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// The source's name.
    pub source: String,
    /// Index into the source's data order (the order's entry there is the sample).
    pub position: u64,
}

/// The slots of one phase, one at a time ([`Plan::phase_slots`]).
#[derive(Debug, Clone)]
pub struct PhaseSlots {
    /// The phase's sources, sorted, each with the positions earlier phases used.
    sources: Vec<(String, u64)>,
    blend: Blend,
}

impl Iterator for PhaseSlots {
    type Item = Slot;

    fn next(&mut self) -> Option<Slot> {
        let (d, n) = self.blend.next()?;
        let (source, offset) = &self.sources[usize::from(d)];
        Some(Slot { source: source.clone(), position: offset + n })
    }
}

/// Which sample each slot of each step of a phased run reads.
#[derive(Debug, Clone)]
pub struct Plan {
    phases: Vec<PhaseParams>,
    batch_size: u64,
    /// Per phase, per source: the positions earlier phases used.
    offsets: Vec<BTreeMap<String, u64>>,
    /// Per source: the positions all phases use.
    needed: BTreeMap<String, u64>,
}

impl Plan {
    /// The plan of resolved `phases` with `batch_size` samples a step.
    pub fn new(phases: &[PhaseParams], batch_size: u64) -> Self {
        let mut used: BTreeMap<String, u64> = BTreeMap::new();
        let mut offsets = Vec::with_capacity(phases.len());
        for p in phases {
            offsets.push(used.clone());
            let names: Vec<&String> = p.mixture.keys().collect();
            let weights: Vec<f64> = p.mixture.values().copied().collect();
            let mut counts = vec![0_u64; names.len()];
            for (d, _) in Blend::new(&weights, p.steps * batch_size) {
                counts[usize::from(d)] += 1;
            }
            for (name, n) in names.into_iter().zip(counts) {
                *used.entry(name.clone()).or_default() += n;
            }
        }
        Self { phases: phases.to_vec(), batch_size, offsets, needed: used }
    }

    /// The phases.
    pub fn phases(&self) -> &[PhaseParams] {
        &self.phases
    }

    /// How many positions of each source's data order the run reads.
    pub fn needed(&self) -> &BTreeMap<String, u64> {
        &self.needed
    }

    /// The phase of step `step` (from 1) and the step it starts after; `None` past the end.
    pub fn phase_of(&self, step: u64) -> Option<(usize, u64)> {
        let mut before = 0;
        for (i, p) in self.phases.iter().enumerate() {
            if step > before && step <= before + p.steps {
                return Some((i, before));
            }
            before += p.steps;
        }
        None
    }

    /// Every slot of phase `phase`, step after step, one at a time.
    pub fn phase_slots(&self, phase: usize) -> PhaseSlots {
        let p = &self.phases[phase];
        let sources: Vec<(String, u64)> =
            p.mixture.keys().map(|n| (n.clone(), self.offsets[phase].get(n).copied().unwrap_or(0))).collect();
        let weights: Vec<f64> = p.mixture.values().copied().collect();
        PhaseSlots { sources, blend: Blend::new(&weights, p.steps * self.batch_size) }
    }

    /// The slots of step `step` (from 1); `None` past the end.
    pub fn step_slots(&self, step: u64) -> Option<Vec<Slot>> {
        let (phase, before) = self.phase_of(step)?;
        let b = usize::try_from(self.batch_size).ok()?;
        let from = usize::try_from(step - before - 1).ok()?.checked_mul(b)?;
        Some(self.phase_slots(phase).skip(from).take(b).collect())
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp, clippy::unwrap_used)] // exact rates are the point
mod tests {
    use super::*;

    fn phase(name: &str, steps: u64, mixture: &[(&str, f64)]) -> PhaseParams {
        PhaseParams::new(name, steps, mixture)
    }

    fn eurollm() -> Vec<PhaseParams> {
        let mut p = vec![
            phase("one", 20, &[("web", 3.0), ("top", 1.0)]),
            phase("two", 10, &[("web", 1.0), ("top", 1.0)]),
            phase("three", 5, &[("long", 1.0)]),
        ];
        p[1].lr_end = Some(0.1);
        p[2].lr_end = Some(0.0);
        p[2].rope_theta = Some(1e6);
        p
    }

    #[test]
    fn defaults_follow_the_report() {
        let mut p = eurollm();
        assert_eq!(resolve(&mut p, 1e4).unwrap(), 35);
        assert_eq!((p[0].warmup_steps, p[0].lr_start, p[0].lr_end), (Some(2), Some(1.0), Some(1.0)));
        assert_eq!((p[1].warmup_steps, p[1].lr_start, p[1].lr_end), (Some(0), Some(1.0), Some(0.1)));
        assert_eq!((p[2].lr_start, p[2].lr_end), (Some(0.1), Some(0.0)));
        assert_eq!(p.iter().map(|q| q.rope_theta.unwrap()).collect::<Vec<_>>(), vec![1e4, 1e4, 1e6]);
        assert_eq!(sources(&p), vec!["long", "top", "web"]);
    }

    #[test]
    fn the_three_segments_warm_hold_anneal_and_decay() {
        let mut p = eurollm();
        resolve(&mut p, 1e4).unwrap();
        let r = rates(&p, 2.0);
        // Warm-up over 2 steps from 0, then the peak.
        assert_eq!((0..4).map(|t| r[0].lr(t)).collect::<Vec<_>>(), vec![0.0, 1.0, 2.0, 2.0]);
        // Linear from the peak towards 0.2 over 10 steps: the first step at the peak.
        assert_eq!(r[1].lr(0), 2.0);
        assert!((r[1].lr(5) - (0.2 + 0.5 * 1.8)).abs() < 1e-15);
        // Then from 0.2 towards 0 over 5 steps.
        assert!((r[2].lr(0) - 0.2).abs() < 1e-15);
        assert!((r[2].lr(4) - 0.04).abs() < 1e-15);
        assert_eq!(r[2].lr(5), 0.0);
    }

    #[test]
    fn resolve_names_the_bad_field() {
        let mut p = eurollm();
        p[1].lr_end = Some(1.5);
        assert_eq!(resolve(&mut p, 1e4).unwrap_err().path, vec!["1", "lr_end"]);
        let mut p = eurollm();
        p[2].mixture.insert("Web".into(), 1.0);
        assert_eq!(resolve(&mut p, 1e4).unwrap_err().path, vec!["2", "mixture"]);
        let mut p = eurollm();
        p[0].warmup_steps = Some(20);
        assert_eq!(resolve(&mut p, 1e4).unwrap_err().path, vec!["0", "warmup_steps"]);
        let mut p = eurollm();
        p[2].name = "one".into();
        assert_eq!(resolve(&mut p, 1e4).unwrap_err().path, vec!["2", "name"]);
        assert!(resolve(&mut [], 1e4).is_err());
        // Weights whose sum overflows, or one so small its share rounds to 0.
        let mut p = eurollm();
        p[0].mixture = [("a".to_owned(), 1e308), ("b".to_owned(), 1e308)].into();
        assert_eq!(resolve(&mut p, 1e4).unwrap_err().path, vec!["0", "mixture"]);
        let mut p = eurollm();
        p[0].mixture = [("a".to_owned(), 1e300), ("b".to_owned(), 1e-300)].into();
        assert_eq!(resolve(&mut p, 1e4).unwrap_err().path, vec!["0", "mixture"]);
        let mut p = eurollm();
        p[0].lr_start = Some(1.5);
        assert_eq!(resolve(&mut p, 1e4).unwrap_err().path, vec!["0", "lr_start"]);
    }

    #[test]
    fn a_blend_keeps_every_source_within_one_sample_of_its_share() {
        let weights = [0.5, 0.3, 0.2];
        let slots = blend(&weights, 1000);
        let mut taken = [0_u64; 3];
        for (i, &(d, n)) in slots.iter().enumerate() {
            assert_eq!(n, taken[usize::from(d)], "slot {i}");
            taken[usize::from(d)] += 1;
            for (k, w) in weights.iter().enumerate() {
                assert!((w * (i + 1) as f64 - taken[k] as f64).abs() <= 1.0, "slot {i} source {k}");
            }
        }
        assert_eq!(taken, [500, 300, 200]);
    }

    #[test]
    fn numpy_sum_pairs_as_numpy_does() {
        // Eight running sums, then a tree: ((1e16 + 1) + (-1e16 + 1)) + … is 0 in numpy
        // (`numpy.sum` of this array prints 0.0); one after another it would be 1.
        assert_eq!(numpy_sum(&[1e16, 1.0, -1e16, 1.0, 0.0, 0.0, 0.0, 0.0]), 0.0);
        let many: Vec<f64> = (1..=300).map(f64::from).collect();
        assert_eq!(numpy_sum(&many), 45150.0);
        assert_eq!(numpy_sum(&[]), 0.0);
    }

    #[test]
    fn sources_continue_across_phases() {
        let mut p = eurollm();
        resolve(&mut p, 1e4).unwrap();
        let plan = Plan::new(&p, 4);
        // Phase one: 80 slots, 60 web and 20 top; phase two: 40 slots, 20 each.
        assert_eq!(plan.needed()["web"], 80);
        assert_eq!(plan.needed()["top"], 40);
        assert_eq!(plan.needed()["long"], 20);
        let mut two = plan.phase_slots(1);
        let first_top = two.find(|s| s.source == "top").unwrap();
        assert_eq!(first_top.position, 20);
        assert_eq!(plan.phase_of(20), Some((0, 0)));
        assert_eq!(plan.phase_of(21), Some((1, 20)));
        assert_eq!(plan.phase_of(36), None);
        assert_eq!(
            plan.step_slots(31).unwrap(),
            vec![
                Slot { source: "long".into(), position: 0 },
                Slot { source: "long".into(), position: 1 },
                Slot { source: "long".into(), position: 2 },
                Slot { source: "long".into(), position: 3 },
            ]
        );
    }
}
