//! Every environment variable `prov` reads, in one place. Libraries read none: the CLI
//! resolves these and passes values down, so that each one can be recorded.

/// Store directory to use instead of the nearest `.prov/` upwards.
pub(crate) const PROV_STORE: &str = "PROV_STORE";
/// Worker threads (default: all available cores). Recorded in every stage's envelope.
pub(crate) const PROV_THREADS: &str = "PROV_THREADS";
/// Fixed clock for the execution log, in milliseconds since the Unix epoch (tests).
/// Never enters a hashed record.
pub(crate) const PROV_TIMESTAMP: &str = "PROV_TIMESTAMP";
/// Disables progress bars when set to anything.
pub(crate) const PROV_NO_PROGRESS: &str = "PROV_NO_PROGRESS";
/// The worker executable that runs libtorch stages (default: `prov-worker` beside `prov`).
pub(crate) const PROV_WORKER: &str = "PROV_WORKER";
/// `ATen` CPU capability libtorch will use: pinned by `prov` at start (for the worker it
/// starts) and recorded in every envelope.
pub(crate) const ATEN_CPU_CAPABILITY: &str = "ATEN_CPU_CAPABILITY";
/// MKL conditional numerical reproducibility branch: pinned by `prov` at start to the one that
/// goes with the `ATen` capability (unless set), and recorded in every envelope.
pub(crate) const MKL_CBWR: &str = "MKL_CBWR";
/// oneDNN's most capable instruction set: pinned and recorded like `MKL_CBWR`.
pub(crate) const ONEDNN_MAX_CPU_ISA: &str = "ONEDNN_MAX_CPU_ISA";

/// Directories searched for helper programs (`b3sum`) by `prov doctor`. Not a setting of
/// prov, so not listed in [`ALL`].
pub(crate) const PATH: &str = "PATH";

/// The documented variables, for `prov doctor` and the book.
pub(crate) const ALL: &[(&str, &str)] = &[
    (PROV_STORE, "store directory instead of the nearest `.prov/` upwards"),
    (PROV_THREADS, "worker threads (default: all cores); recorded in envelopes"),
    (PROV_TIMESTAMP, "fixed clock for the execution log, ms since the epoch (tests)"),
    (PROV_NO_PROGRESS, "disable progress bars"),
    (PROV_WORKER, "the worker that runs libtorch stages (default: prov-worker beside prov)"),
    (ATEN_CPU_CAPABILITY, "ATen CPU capability for libtorch stages"),
    (MKL_CBWR, "MKL conditional numerical reproducibility branch for libtorch stages"),
    (ONEDNN_MAX_CPU_ISA, "oneDNN's most capable instruction set for libtorch stages"),
];

pub(crate) fn get(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Returns the first executable file called `name` in the directories of `PATH`.
pub(crate) fn find_program(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os(PATH)?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file())
}
