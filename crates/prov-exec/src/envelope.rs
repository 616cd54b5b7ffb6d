//! Capturing the determinism envelope, and deciding what part of it enters a stage key.

use prov_manifest::{Determinism, Envelope};
use serde_json::Value;

/// The workbench version recorded in every envelope.
pub const WORKBENCH_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Facts about libtorch that a caller (the CLI, which links it) supplies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TorchFacts {
    /// libtorch version.
    pub libtorch: Option<String>,
    /// `ATen` CPU capability in force.
    pub aten_cpu_capability: Option<String>,
    /// MKL conditional numerical reproducibility mode in force.
    pub mkl_cbwr: Option<String>,
    /// oneDNN's most capable instruction set in force.
    pub onednn_max_cpu_isa: Option<String>,
}

/// Captures the envelope of this machine for a run with `threads` worker threads.
///
/// Reads `/proc/cpuinfo` and the kernel's `ostype`/`osrelease`; where they are missing
/// (not Linux) the fields say `unknown` rather than failing.
pub fn capture(threads: u32, torch: &TorchFacts) -> Envelope {
    let cpuinfo = fs_err::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        cpuinfo
            .lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_owned())
    };
    let mut flags: Vec<String> = field("flags")
        .or_else(|| field("Features"))
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    flags.sort();
    flags.dedup();
    let read = |p: &str| fs_err::read_to_string(p).map_or_else(|_| "unknown".into(), |s| s.trim().to_owned());
    Envelope {
        workbench_version: WORKBENCH_VERSION.to_owned(),
        os: format!("{} {}", read("/proc/sys/kernel/ostype"), read("/proc/sys/kernel/osrelease")),
        arch: std::env::consts::ARCH.to_owned(),
        cpu_model: field("model name").unwrap_or_else(|| "unknown".into()),
        cpu_flags: flags,
        threads,
        device: "cpu".to_owned(),
        libtorch: torch.libtorch.clone(),
        aten_cpu_capability: torch.aten_cpu_capability.clone(),
        mkl_cbwr: torch.mkl_cbwr.clone(),
        onednn_max_cpu_isa: torch.onednn_max_cpu_isa.clone(),
        cuda: None,
    }
}

/// Returns the part of the envelope that enters the stage key of a stage of this class.
///
/// A `portable` stage promises the same bytes anywhere, so no envelope field enters its key
/// and its cached outputs are shared across machines and thread counts. `envelope` and
/// `tolerance` stages key on the whole envelope.
pub fn key_envelope(class: Determinism, envelope: &Envelope) -> Value {
    match class {
        Determinism::Portable => Value::Null,
        Determinism::Envelope | Determinism::Tolerance => {
            serde_json::to_value(envelope).expect("an envelope holds only strings and integers")
        }
    }
}
