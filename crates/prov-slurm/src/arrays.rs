//! Cutting a stage's map tasks into Slurm job arrays.
//!
//! Slurm refuses an array index at or above `MaxArraySize` (datatrove's executor fails there).
//! A chunk is a run of pending tasks whose indices differ by less than `MaxArraySize`: it is
//! submitted with the first task's index as its base, each element's index being its task's
//! offset from the base, so that every index Slurm sees is below the limit whatever the
//! number of tasks.

/// Tasks submitted as one array job: `base + offset` for each offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The first task's index.
    pub base: usize,
    /// Offsets from it, increasing, each below the array size limit.
    pub offsets: Vec<usize>,
}

impl Chunk {
    /// The task indices.
    pub fn tasks(&self) -> impl Iterator<Item = usize> + '_ {
        self.offsets.iter().map(|o| self.base + o)
    }

    /// The `--array` value: the offsets as ranges (`0-5,7,9-12`), with `%throttle` when given.
    pub fn array_spec(&self, throttle: Option<usize>) -> String {
        let mut parts: Vec<String> = Vec::new();
        let mut i = 0;
        while i < self.offsets.len() {
            let start = self.offsets[i];
            let mut end = start;
            while i + 1 < self.offsets.len() && self.offsets[i + 1] == end + 1 {
                i += 1;
                end += 1;
            }
            parts.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
            i += 1;
        }
        let spec = parts.join(",");
        match throttle {
            Some(t) => format!("{spec}%{}", t.max(1)),
            None => spec,
        }
    }
}

/// Cuts `tasks` (any order, duplicates ignored) into chunks whose offsets are all below
/// `max_array_size`.
pub fn chunks(tasks: &[usize], max_array_size: usize) -> Vec<Chunk> {
    let mut sorted = tasks.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let limit = max_array_size.max(1);
    let mut out: Vec<Chunk> = Vec::new();
    for t in sorted {
        match out.last_mut() {
            Some(c) if t - c.base < limit => c.offsets.push(t - c.base),
            _ => out.push(Chunk { base: t, offsets: vec![0] }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_index_stays_below_the_limit_and_every_task_is_submitted_once() {
        let tasks: Vec<usize> = (0..200).filter(|t| t % 7 != 3).collect();
        for limit in [1, 2, 10, 64, 1001] {
            let cut = chunks(&tasks, limit);
            let mut seen: Vec<usize> = cut.iter().flat_map(|c| c.tasks().collect::<Vec<_>>()).collect();
            assert!(cut.iter().all(|c| c.offsets.iter().all(|o| *o < limit)), "limit {limit}");
            seen.sort_unstable();
            assert_eq!(seen, tasks, "limit {limit}");
        }
        assert_eq!(chunks(&[5, 1, 1, 70, 64], 64).len(), 2);
    }

    #[test]
    fn array_specs_are_ranges_with_the_throttle() {
        let c = Chunk { base: 100, offsets: vec![0, 1, 2, 3, 5, 7, 8] };
        assert_eq!(c.array_spec(None), "0-3,5,7-8");
        assert_eq!(c.array_spec(Some(4)), "0-3,5,7-8%4");
        assert_eq!(Chunk { base: 0, offsets: vec![9] }.array_spec(Some(0)), "9%1");
    }
}
