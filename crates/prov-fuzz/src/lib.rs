//! Fuzzing the readers of untrusted input: recipes, audit and license policies, lockfiles
//! (decoded and checked against the stage kinds), records, robots.txt, SPDX expressions,
//! document proofs, and Parquet dataset and ledger shards.
//!
//! `prov-fuzz` owns a mutation fuzzer that needs no nightly compiler and no coverage
//! instrumentation: it starts from a seed corpus of valid (and some invalid) inputs and
//! applies byte mutations (bit flips, interesting bytes, insertions, deletions, duplicated
//! and repeated chunks, splices of two seeds), all drawn from one seeded generator, so a
//! campaign is reproduced by its seed and execution count. Each execution runs one reader
//! on one input and fails the campaign when the reader
//!
//! - panics (caught and reported with the input);
//! - takes longer than a bound ([`Limits::max_millis`]); a watchdog aborts the process, naming
//!   the execution, when one never returns;
//! - allocates more than a bound ([`Limits::max_bytes`]) at once, counted by
//!   [`CountingAllocator`], which the binary and the tests install as the global allocator.
//!
//! `scripts/fuzz` runs the long campaign (10^6 executions per target) and prints the counts;
//! the test in `tests/short_campaign.rs` runs a short one in CI.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub mod targets;

/// Bytes currently allocated, the peak since [`reset_peak`], and the hard cap past which the
/// process aborts (an allocation that large is a finding, and may not be survivable).
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static CAP: AtomicUsize = AtomicUsize::new(usize::MAX);
/// The execution running now, for the messages of an abort.
static EXECUTION: AtomicU64 = AtomicU64::new(0);

/// A global allocator that counts the bytes allocated, so that a campaign can report the
/// largest allocation an input caused, and aborts past a hard cap.
pub struct CountingAllocator;

// A global allocator is unsafe by its trait; this one only counts and forwards to `System`.
#[allow(unsafe_code)]
unsafe impl std::alloc::GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        count_up(layout.size());
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator, which allocated `ptr`.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            count_up(new_size - layout.size());
        } else {
            CURRENT.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged to the system allocator, which allocated `ptr`.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}

fn count_up(size: usize) {
    let now = CURRENT.fetch_add(size, Ordering::Relaxed) + size;
    PEAK.fetch_max(now, Ordering::Relaxed);
    if now > CAP.load(Ordering::Relaxed) {
        abort_with("allocation cap exceeded");
    }
}

/// Writes `what` and the execution number to stderr without allocating, then aborts.
fn abort_with(what: &str) -> ! {
    use std::io::Write as _;
    let mut digits = [0u8; 20];
    let mut n = EXECUTION.load(Ordering::Relaxed);
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(b"prov-fuzz: ");
    let _ = err.write_all(what.as_bytes());
    let _ = err.write_all(b" at execution ");
    let _ = err.write_all(&digits[i..]);
    let _ = err.write_all(b"\n");
    std::process::abort()
}

/// Bytes allocated now (by a counting allocator; 0 if none is installed).
fn allocated() -> usize {
    CURRENT.load(Ordering::Relaxed)
}

/// A small, fast, seeded generator (xorshift64*): the same seed gives the same campaign.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed (0 is replaced by a fixed odd constant).
    pub fn new(seed: u64) -> Self {
        Self(if seed == 0 { 0x9E37_79B9_7F4A_7C15 } else { seed })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Bytes that parsers treat specially, tried more often than random ones.
const INTERESTING: &[u8] = b"\0\xff\x7f\x80{}[]\"':,\n\r\t -#&*!%/\\$?0123456789.eE";

/// Returns a mutation of `input`; `other` is a second seed for splices.
pub fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    // One to four mutations, most inputs change a little.
    for _ in 0..=rng.below(4) {
        let len = out.len();
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                out[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                out[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            2 => {
                let i = rng.below(len + 1);
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| INTERESTING[rng.below(INTERESTING.len())]).collect();
                out.splice(i..i, bytes);
            }
            3 if len > 1 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(64));
                out.drain(i..i + n);
            }
            4 if len > 1 => {
                // Duplicate a chunk in place.
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(256));
                let chunk = out[i..i + n].to_vec();
                out.splice(i..i, chunk);
            }
            5 if len > 0 => {
                // Repeat a short chunk many times: deep nesting, long runs.
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(4));
                let chunk = out[i..i + n].to_vec();
                let times = 1 + rng.below(2_000);
                let repeated: Vec<u8> = chunk.iter().copied().cycle().take(n * times).collect();
                out.splice(i..i, repeated);
            }
            6 if !other.is_empty() && len > 0 => {
                // Splice: this input's head, the other's tail.
                let i = rng.below(len);
                let j = rng.below(other.len());
                out.truncate(i);
                out.extend_from_slice(&other[j..]);
            }
            7 if len > 0 => {
                out.truncate(rng.below(len));
            }
            _ if len > 1 => {
                // Swap two bytes.
                let (i, j) = (rng.below(len), rng.below(len));
                out.swap(i, j);
            }
            _ => out.push(INTERESTING[rng.below(INTERESTING.len())]),
        }
    }
    out
}

/// What one reader is fuzzed with.
pub struct Target {
    /// Its name (`recipe`, `lockfile`, …).
    pub name: &'static str,
    /// The seed inputs.
    pub corpus: Vec<Vec<u8>>,
    /// Runs the reader on one input; its result is ignored, only panics, time and memory
    /// count.
    pub run: Reader,
}

/// A reader under test: runs on one input.
pub type Reader = Box<dyn Fn(&[u8]) + Sync>;

/// The bounds an execution must stay within.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Wall time of one execution, in milliseconds, past which it is a finding.
    pub max_millis: u64,
    /// Bytes one execution may hold allocated at once, past which it is a finding.
    pub max_bytes: usize,
    /// Seconds after which a single execution is taken to hang: the process aborts.
    pub hang_seconds: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_millis: 2_000, max_bytes: 256 << 20, hang_seconds: 60 }
    }
}

/// Something an input made a reader do that it must not.
#[derive(Debug, Clone)]
pub struct Finding {
    /// The execution (1-based) that found it.
    pub execution: u64,
    /// `panic`, `slow` or `memory`.
    pub kind: &'static str,
    /// The panic's message, the time or the bytes.
    pub detail: String,
    /// The input.
    pub input: Vec<u8>,
}

/// The outcome of a campaign on one target.
#[derive(Debug, Clone)]
pub struct Report {
    /// The target.
    pub target: &'static str,
    /// Executions run.
    pub executions: u64,
    /// What went wrong (empty when nothing did).
    pub findings: Vec<Finding>,
    /// The longest execution.
    pub slowest: Duration,
    /// The most bytes one execution held allocated at once (0 without the counting
    /// allocator).
    pub peak_bytes: usize,
    /// Wall time of the campaign.
    pub elapsed: Duration,
}

/// Runs `executions` mutated inputs through `target`, drawn from `seed`. The seed corpus
/// itself runs first.
pub fn campaign(target: &Target, executions: u64, seed: u64, limits: Limits) -> Report {
    let mut rng = Rng::new(seed ^ fxhash(target.name.as_bytes()));
    let started = Instant::now();
    let mut report = Report {
        target: target.name,
        executions: 0,
        findings: Vec::new(),
        slowest: Duration::ZERO,
        peak_bytes: 0,
        elapsed: Duration::ZERO,
    };
    let watchdog = Watchdog::start(limits.hang_seconds);
    // Panics are findings, reported with their input: keep the default hook from printing.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    for n in 1..=executions {
        let input = if (n as usize) <= target.corpus.len() {
            target.corpus[n as usize - 1].clone()
        } else {
            let a = &target.corpus[rng.below(target.corpus.len())];
            let b = &target.corpus[rng.below(target.corpus.len())];
            mutate(&mut rng, a, b)
        };
        EXECUTION.store(n, Ordering::Relaxed);
        watchdog.arm();
        let before = allocated();
        PEAK.store(before, Ordering::Relaxed);
        CAP.store(before.saturating_add(limits.max_bytes.saturating_mul(4)), Ordering::Relaxed);
        let start = Instant::now();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (target.run)(&input)));
        let took = start.elapsed();
        CAP.store(usize::MAX, Ordering::Relaxed);
        watchdog.disarm();
        let held = PEAK.load(Ordering::Relaxed).saturating_sub(before);
        report.executions = n;
        report.slowest = report.slowest.max(took);
        report.peak_bytes = report.peak_bytes.max(held);
        let mut find = |kind, detail: String| {
            report.findings.push(Finding { execution: n, kind, detail, input: input.clone() });
        };
        if let Err(payload) = outcome {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_owned());
            find("panic", message);
        }
        if took > Duration::from_millis(limits.max_millis) {
            find("slow", format!("{} ms", took.as_millis()));
        }
        if held > limits.max_bytes {
            find("memory", format!("{held} bytes held at once"));
        }
    }
    std::panic::set_hook(hook);
    report.elapsed = started.elapsed();
    report
}

fn fxhash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h: u64, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// Aborts the process when one execution runs longer than its bound: a hang does not
/// return to be reported.
struct Watchdog {
    armed_at: std::sync::Arc<AtomicU64>,
}

impl Watchdog {
    fn start(hang_seconds: u64) -> Self {
        let armed_at = std::sync::Arc::new(AtomicU64::new(0));
        let watched = std::sync::Arc::clone(&armed_at);
        let origin = *PROCESS_START.get_or_init(Instant::now);
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(250));
                let at = watched.load(Ordering::Relaxed);
                if at == u64::MAX {
                    return;
                }
                if at > 0 && origin.elapsed().as_secs() >= at + hang_seconds {
                    abort_with("an execution hangs");
                }
            }
        });
        // Seconds since `origin`, +1 so that 0 means disarmed.
        let watchdog = Self { armed_at };
        watchdog.disarm();
        watchdog
    }

    fn arm(&self) {
        // Coarse seconds are enough for a bound of many seconds.
        let now = PROCESS_START.get_or_init(Instant::now).elapsed().as_secs() + 1;
        self.armed_at.store(now, Ordering::Relaxed);
    }

    fn disarm(&self) {
        self.armed_at.store(0, Ordering::Relaxed);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.armed_at.store(u64::MAX, Ordering::Relaxed);
    }
}

static PROCESS_START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// The repository root, from this crate's manifest directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Reads every file of `dir` whose name ends with one of `suffixes` (sorted by name); none
/// when the directory is missing.
pub fn files(dir: &Path, suffixes: &[&str]) -> Vec<Vec<u8>> {
    let Ok(entries) = fs_err::read_dir(dir) else { return Vec::new() };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && suffixes.iter().any(|s| p.to_string_lossy().ends_with(s)))
        .collect();
    paths.sort();
    paths.into_iter().filter_map(|p| fs_err::read(p).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_reproduced_by_the_seed() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let seed = b"schema: 1\nname: x\n";
        for _ in 0..100 {
            assert_eq!(mutate(&mut a, seed, b"other"), mutate(&mut b, seed, b"other"));
        }
    }

    #[test]
    fn a_panicking_reader_is_a_finding_with_its_input() {
        let target = Target {
            name: "panics-on-a-brace",
            corpus: vec![b"abc".to_vec()],
            run: Box::new(|input| assert!(!input.contains(&b'{'), "found a brace")),
        };
        let report = campaign(&target, 2_000, 1, Limits::default());
        assert_eq!(report.executions, 2_000);
        let panic = report.findings.iter().find(|f| f.kind == "panic").expect("some mutation adds a brace");
        assert!(panic.input.contains(&b'{') && panic.detail == "found a brace", "{panic:?}");
    }
}
