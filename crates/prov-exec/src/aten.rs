//! The `ATen` CPU capability and libtorch version of the determinism envelope, decided without
//! loading libtorch: `prov` pins the capability in its environment at start, which the worker
//! that runs libtorch inherits, and records both in every envelope.
//!
//! The same program gives different weights for each `ATen` CPU capability (`default`, `avx2`,
//! `avx512`), so the capability is part of the envelope of every stage that runs libtorch.

/// The libtorch version this build's worker links (the torch wheel's `version.py`, read by the
/// build script). The worker refuses a stage whose envelope claims another.
pub const LIBTORCH_VERSION: &str = env!("PROV_LIBTORCH_VERSION");

/// The environment variable `ATen` reads, once, to choose its CPU kernels.
pub const ATEN_CPU_CAPABILITY: &str = "ATEN_CPU_CAPABILITY";

/// The capabilities `ATen` accepts on x86-64, from least to most capable.
pub const CAPABILITIES: [&str; 3] = ["default", "avx2", "avx512"];

/// An `ATen` CPU capability that this machine cannot run or `ATen` does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{ATEN_CPU_CAPABILITY}={requested}: {reason}")]
pub struct CapabilityError {
    /// The value asked for.
    pub requested: String,
    /// Why it cannot be used.
    pub reason: String,
}

/// Returns the most capable kernels this CPU runs, by the rule `ATen` applies to its flags:
/// `avx512` needs AVX-512 F, BW, VL and DQ (and FMA), `avx2` needs AVX2 and FMA.
pub fn best_capability(cpu_flags: &[String]) -> &'static str {
    let has = |f: &str| cpu_flags.iter().any(|x| x == f);
    if ["avx512f", "avx512bw", "avx512vl", "avx512dq", "fma"].iter().all(|f| has(f)) {
        "avx512"
    } else if has("avx2") && has("fma") {
        "avx2"
    } else {
        "default"
    }
}

/// The capability used when the user names none: `avx2`, which every x86-64 machine of the
/// last decade runs, so that a run recorded on one machine replays on another. `avx512` is
/// an explicit choice (`ATEN_CPU_CAPABILITY=avx512`).
pub const PORTABLE_CAPABILITY: &str = "avx2";

/// Decides the capability libtorch will use: `requested` (the user's `ATEN_CPU_CAPABILITY`)
/// when this CPU can run it; else [`PORTABLE_CAPABILITY`], or the best this CPU runs when it
/// lacks that. Refuses a capability the CPU lacks, since `ATen` would silently fall back and
/// the recorded envelope would lie.
pub fn resolve_capability(requested: Option<&str>, cpu_flags: &[String]) -> Result<&'static str, CapabilityError> {
    let best = best_capability(cpu_flags);
    let Some(requested) = requested else {
        return Ok(if best == "default" { best } else { PORTABLE_CAPABILITY });
    };
    let wanted = requested.trim().to_ascii_lowercase();
    let Some(pos) = CAPABILITIES.iter().position(|c| *c == wanted) else {
        return Err(CapabilityError {
            requested: requested.to_owned(),
            reason: format!("unknown; expected one of {}", CAPABILITIES.join(", ")),
        });
    };
    let best_pos = CAPABILITIES.iter().position(|c| *c == best).unwrap_or(0);
    if pos > best_pos {
        return Err(CapabilityError {
            requested: requested.to_owned(),
            reason: format!("this CPU runs at most `{best}`"),
        });
    }
    Ok(CAPABILITIES[pos])
}

/// Pins the capability for this process by setting `ATEN_CPU_CAPABILITY`.
///
/// # Safety
/// Call it at the start of `main`, before any thread exists and before libtorch computes
/// anything: `ATen` reads the variable once, at its first kernel dispatch, and changing the
/// environment while other threads run is undefined behaviour.
#[allow(unsafe_code)] // The one place the workbench writes its own environment.
pub unsafe fn pin_capability(capability: &str) {
    // SAFETY: the caller guarantees no other thread exists yet.
    unsafe { std::env::set_var(ATEN_CPU_CAPABILITY, capability) };
}

/// The environment variable MKL reads to fix its code branch (conditional numerical
/// reproducibility): with it, MKL takes one branch and reduces in a fixed order.
pub const MKL_CBWR: &str = "MKL_CBWR";

/// The environment variable oneDNN reads for the most capable instruction set its JIT may
/// generate code for.
pub const ONEDNN_MAX_CPU_ISA: &str = "ONEDNN_MAX_CPU_ISA";

/// MKL's branch, the same on every CPU: `COMPATIBLE`, the one branch Intel documents as
/// computing the same results on Intel and non-Intel processors. Any other branch (`AVX2`,
/// `AVX512`) holds only on Intel CPUs: on others MKL runs its `AUTO` branch whatever the
/// variable says, so a run recorded on an AMD CPU under `AVX2` did not reproduce on an Intel
/// one under `AVX2` (the toxicity classifier's first epoch differed in its ninth digit).
pub const MKL_BRANCH: &str = "COMPATIBLE";

/// The MKL branch ([`MKL_BRANCH`], whatever the capability) and the oneDNN instruction set
/// that go with an `ATen` capability (the same instruction set).
pub fn math_library_pins(capability: &str) -> (&'static str, &'static str) {
    let onednn = match capability {
        "avx512" => "AVX512_CORE",
        "avx2" => "AVX2",
        _ => "SSE41",
    };
    (MKL_BRANCH, onednn)
}

/// Pins `MKL_CBWR` and `ONEDNN_MAX_CPU_ISA` for this process (and the workers it starts) to
/// the values that go with `capability` ([`math_library_pins`]), each unless the user set
/// it: a user's value is kept, and recorded like the default.
///
/// # Safety
/// As [`pin_capability`]: call it at the start of `main`, before any thread exists.
#[allow(unsafe_code)] // Writes this process's environment before any thread exists.
pub unsafe fn pin_math_libraries(capability: &str) {
    let (mkl, onednn) = math_library_pins(capability);
    for (name, value) in [(MKL_CBWR, mkl), (ONEDNN_MAX_CPU_ISA, onednn)] {
        if std::env::var_os(name).is_none_or(|v| v.is_empty()) {
            // SAFETY: the caller guarantees no other thread exists yet.
            unsafe { std::env::set_var(name, value) };
        }
    }
}

/// The cuBLAS workspace setting that makes cuBLAS deterministic (NVIDIA's documented
/// requirement, which `torch.use_deterministic_algorithms` checks on CUDA).
pub const CUBLAS_WORKSPACE_CONFIG: (&str, &str) = ("CUBLAS_WORKSPACE_CONFIG", ":4096:8");

/// The CUDA device order that numbers devices as NVML and `nvidia-smi` do (by PCI bus), so
/// that `cuda:N` in a recipe and the GPU whose facts the envelope records are the same one.
/// CUDA's own default orders by speed.
pub const CUDA_DEVICE_ORDER: (&str, &str) = ("CUDA_DEVICE_ORDER", "PCI_BUS_ID");

/// Sets `CUBLAS_WORKSPACE_CONFIG` and `CUDA_DEVICE_ORDER`, each unless the user did: CUDA
/// reads them when it starts, so they must be in the environment before. Harmless without a
/// GPU.
///
/// # Safety
/// As [`pin_capability`]: call it at the start of `main`, before any thread exists.
#[allow(unsafe_code)] // Writes this process's environment before any thread exists.
pub unsafe fn pin_cuda_workspace() {
    for (name, value) in [CUBLAS_WORKSPACE_CONFIG, CUDA_DEVICE_ORDER] {
        if std::env::var_os(name).is_none() {
            // SAFETY: the caller guarantees no other thread exists yet.
            unsafe { std::env::set_var(name, value) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn onednn_follows_the_capability_and_mkl_is_compatible_everywhere() {
        assert_eq!(math_library_pins("avx2"), ("COMPATIBLE", "AVX2"));
        assert_eq!(math_library_pins("avx512"), ("COMPATIBLE", "AVX512_CORE"));
        assert_eq!(math_library_pins("default"), ("COMPATIBLE", "SSE41"));
        // Every capability `ATen` knows has a pair.
        for c in CAPABILITIES {
            assert!(!math_library_pins(c).0.is_empty());
        }
    }

    #[test]
    fn capability_follows_the_cpu_flags() {
        assert_eq!(best_capability(&flags("sse2 avx")), "default");
        assert_eq!(best_capability(&flags("avx2 fma")), "avx2");
        assert_eq!(best_capability(&flags("avx2 fma avx512f avx512bw avx512vl avx512dq")), "avx512");
        assert_eq!(best_capability(&flags("avx2 fma avx512f")), "avx2");
    }

    #[test]
    fn a_capability_the_cpu_lacks_is_refused() {
        let cpu = flags("avx2 fma");
        assert_eq!(resolve_capability(None, &cpu).unwrap(), "avx2");
        // Unasked, a CPU with AVX-512 still runs the portable kernels.
        let big = flags("avx2 fma avx512f avx512bw avx512vl avx512dq");
        assert_eq!(resolve_capability(None, &big).unwrap(), "avx2");
        assert_eq!(resolve_capability(Some("avx512"), &big).unwrap(), "avx512");
        assert_eq!(resolve_capability(None, &flags("sse2")).unwrap(), "default");
        assert_eq!(resolve_capability(Some("DEFAULT"), &cpu).unwrap(), "default");
        let e = resolve_capability(Some("avx512"), &cpu).unwrap_err();
        assert!(e.to_string().contains("at most `avx2`"), "{e}");
        let e = resolve_capability(Some("sse9"), &cpu).unwrap_err();
        assert!(e.to_string().contains("expected one of default, avx2, avx512"), "{e}");
    }
}
