//! The libtorch envelope, owned in one place: which libtorch this build links, pinning the
//! `ATen` CPU capability before libtorch starts and the intra-op thread count before a stage
//! computes, and turning named tensors into bytes in name order (tch's `VarStore` keeps its
//! variables in a `HashMap`, whose order must never reach hashed bytes).
//!
//! The same program gives different weights for 1 and 2 threads, and for each `ATen` CPU
//! capability (`default`, `avx2`, `avx512`): both are part of the determinism envelope of every
//! stage that runs libtorch, recorded by the executor and enforced on replay.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tch::{Kind, Tensor};

/// The libtorch version this binary is linked against (the torch wheel's `version.py`).
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

/// The cuBLAS workspace setting that makes cuBLAS deterministic (NVIDIA's documented
/// requirement, which `torch.use_deterministic_algorithms` checks on CUDA).
pub const CUBLAS_WORKSPACE_CONFIG: (&str, &str) = ("CUBLAS_WORKSPACE_CONFIG", ":4096:8");

/// Sets `CUBLAS_WORKSPACE_CONFIG` unless the user did: cuBLAS reads it when CUDA starts, so
/// it must be in the environment before. Harmless without a GPU.
///
/// # Safety
/// As [`pin_capability`]: call it at the start of `main`, before any thread exists.
#[allow(unsafe_code)] // Writes this process's environment before any thread exists.
pub unsafe fn pin_cuda_workspace() {
    let (name, value) = CUBLAS_WORKSPACE_CONFIG;
    if std::env::var_os(name).is_none() {
        // SAFETY: the caller guarantees no other thread exists yet.
        unsafe { std::env::set_var(name, value) };
    }
}

#[allow(unsafe_code)] // The C++ shim's functions (shim/*.cpp).
mod shim {
    use std::ffi::{c_char, c_void};

    unsafe extern "C" {
        pub safe fn prov_set_deterministic(on: i32, warn_only: i32);
        pub safe fn prov_deterministic_algorithms() -> i32;
        pub safe fn prov_keep_freed_memory() -> i32;
        /// `this` and `other` point to live `at::Tensor`s; `message` to `capacity` writable bytes.
        pub fn prov_add_scaled_(
            this: *mut c_void,
            other: *const c_void,
            alpha: f64,
            message: *mut c_char,
            capacity: usize,
        ) -> i32;
        /// As `prov_add_scaled_`, with two factors.
        pub fn prov_addcmul_(
            this: *mut c_void,
            t1: *const c_void,
            t2: *const c_void,
            value: f64,
            message: *mut c_char,
            capacity: usize,
        ) -> i32;
    }

    /// Calls `f` with a message buffer and turns its status into the message ATen gave.
    pub fn checked(f: impl FnOnce(*mut c_char, usize) -> i32) -> Result<(), String> {
        let mut message = [0 as c_char; 512];
        if f(message.as_mut_ptr(), message.len()) == 0 {
            return Ok(());
        }
        // SAFETY: the shim wrote a NUL-terminated string into the buffer (strncpy, then a NUL
        // in its last byte), and the buffer outlives this borrow.
        let text = unsafe { std::ffi::CStr::from_ptr(message.as_ptr()) };
        Err(text.to_string_lossy().into_owned())
    }
}

/// An in-place operation `ATen` refused: shapes that do not broadcast, mixed dtypes or devices.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{op}: {message}")]
pub struct InPlaceError {
    /// The operation, as `ATen` names it.
    pub op: &'static str,
    /// `ATen`'s message.
    pub message: String,
}

/// `dst += alpha * other` in place, as `ATen`'s `add_(other, alpha=alpha)`: one fused kernel,
/// so the result is rounded once (Python optimizers, Apple's `AdEMAMix` among them, are
/// written this way; tch exposes `add_` without `alpha`).
#[allow(unsafe_code)] // Hands two live tensors to the shim.
pub fn add_scaled_(dst: &mut Tensor, other: &Tensor, alpha: f64) -> Result<(), InPlaceError> {
    let (this, other) = (dst.as_mut_ptr().cast(), other.as_ptr().cast());
    // SAFETY: both pointers come from live tch tensors, which tch's own C API passes to C++
    // as `at::Tensor*`; `checked` provides the message buffer.
    shim::checked(|message, capacity| unsafe { shim::prov_add_scaled_(this, other, alpha, message, capacity) })
        .map_err(|message| InPlaceError { op: "add_", message })
}

/// `dst += value * t1 * t2` in place, as `ATen`'s `addcmul_(t1, t2, value=value)`.
#[allow(unsafe_code)] // Hands three live tensors to the shim.
pub fn addcmul_(dst: &mut Tensor, t1: &Tensor, t2: &Tensor, value: f64) -> Result<(), InPlaceError> {
    let (this, t1, t2) = (dst.as_mut_ptr().cast(), t1.as_ptr().cast(), t2.as_ptr().cast());
    // SAFETY: as in `add_scaled_`.
    shim::checked(|message, capacity| unsafe { shim::prov_addcmul_(this, t1, t2, value, message, capacity) })
        .map_err(|message| InPlaceError { op: "addcmul_", message })
}

/// Tells glibc's `malloc` to keep freed memory in the process (`M_MMAP_THRESHOLD` at its
/// 32 MiB maximum, `M_TRIM_THRESHOLD` at 1 GiB) rather than return it to the kernel after
/// every free. Training frees and re-allocates the same sizes every step; without this, each
/// step faults tens of MiB of fresh pages in again. Changes no computed value. Returns whether
/// glibc accepted both settings. Call it before the first large allocation.
pub fn keep_freed_memory() -> bool {
    shim::prov_keep_freed_memory() == 1
}

/// Turns `ATen`'s deterministic-algorithms mode on or off (as `torch.use_deterministic_algorithms`
/// does, through a small C++ shim: tch does not expose it), with cuDNN deterministic and its
/// benchmark mode off. On, an operation without a deterministic implementation is an error
/// instead of a silent source of run-to-run differences (on CUDA: scatter/index adds, some
/// cuDNN kernels); on CPU the kernels this workbench uses are deterministic either way.
pub fn set_deterministic_algorithms(on: bool) {
    shim::prov_set_deterministic(i32::from(on), 0);
}

/// Whether `ATen`'s deterministic-algorithms mode is on.
pub fn deterministic_algorithms() -> bool {
    shim::prov_deterministic_algorithms() != 0
}

/// Sets libtorch's intra-op threads to `threads` and inter-op threads to 1, for a stage about
/// to compute: the thread count changes reductions' order, so it is part of the envelope.
pub fn pin_threads(threads: usize) {
    // libtorch accepts the inter-op count once per process (a second call is an error), and
    // it is always 1 here: set it on the first stage and never again.
    static INTEROP: std::sync::Once = std::sync::Once::new();
    tch::set_num_threads(i32::try_from(threads.max(1)).unwrap_or(i32::MAX));
    INTEROP.call_once(|| tch::set_num_interop_threads(1));
}

/// A float32 tensor's values in row-major order.
pub fn f32_values(t: &Tensor) -> Vec<f32> {
    let flat = t.detach().to_kind(Kind::Float).contiguous().view(-1);
    Vec::<f32>::try_from(&flat).expect("a contiguous float tensor converts to Vec<f32>")
}

/// A tensor's shape as unsigned sizes.
pub fn shape(t: &Tensor) -> Vec<usize> {
    t.size().iter().map(|&d| usize::try_from(d).expect("tensor sizes are non-negative")).collect()
}

/// Named float32 tensors copied out of libtorch, ordered by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NamedTensors(pub BTreeMap<String, (Vec<usize>, Vec<f32>)>);

impl NamedTensors {
    /// Copies tensors out, ordering them by name whatever order they come in.
    pub fn from_tensors<'a>(tensors: impl IntoIterator<Item = (String, &'a Tensor)>) -> Self {
        Self(tensors.into_iter().map(|(name, t)| (name, (shape(t), f32_values(t)))).collect())
    }

    /// The little-endian bytes of one tensor, as safetensors stores them.
    pub fn le_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// Encodes the tensors as a safetensors file with one metadata entry, `config`.
    pub fn to_safetensors(&self, config: &str) -> Vec<u8> {
        self.to_safetensors_with(&[("config", config)])
    }

    /// Encodes the tensors as a safetensors file with the given metadata entries (`format:
    /// pt` is what transformers requires of a model file).
    ///
    /// The header is written by hand so that its bytes are fixed by the tensors alone:
    /// metadata in the order given, tensors in name order, offsets packed in that order, keys
    /// in a fixed order, and the header padded with spaces to a multiple of 8 bytes (as the
    /// format allows).
    pub fn to_safetensors_with(&self, metadata: &[(&str, &str)]) -> Vec<u8> {
        let entries: Vec<String> = metadata
            .iter()
            .map(|(k, v)| {
                format!(
                    "{}:{}",
                    serde_json::to_string(k).expect("a string serialises"),
                    serde_json::to_string(v).expect("a string serialises")
                )
            })
            .collect();
        let mut header = format!("{{\"__metadata__\":{{{}}}", entries.join(","));
        let mut offset = 0usize;
        for (name, (shape, values)) in &self.0 {
            let len = values.len() * 4;
            let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
            let _ = write!(
                header,
                ",{}:{{\"dtype\":\"F32\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                serde_json::to_string(name).expect("a string serialises"),
                dims.join(","),
                offset,
                offset + len
            );
            offset += len;
        }
        header.push('}');
        while header.len() % 8 != 0 {
            header.push(' ');
        }
        let mut out = Vec::with_capacity(8 + header.len() + offset);
        out.extend_from_slice(&(header.len() as u64).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        for (_, values) in self.0.values() {
            out.extend(Self::le_bytes(values));
        }
        out
    }

    /// Reads a safetensors file of float32 tensors (any writer's); other dtypes and malformed
    /// files are errors that say what is wrong.
    pub fn from_safetensors(bytes: &[u8]) -> Result<Self, String> {
        let file = safetensors::SafeTensors::deserialize(bytes).map_err(|e| format!("not a safetensors file: {e}"))?;
        let mut out = BTreeMap::new();
        for (name, view) in file.tensors() {
            if view.dtype() != safetensors::Dtype::F32 {
                return Err(format!("tensor `{name}` is {:?}, not F32", view.dtype()));
            }
            let values = view.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            out.insert(name, (view.shape().to_vec(), values));
        }
        Ok(Self(out))
    }

    /// The tensor `name` as a libtorch tensor on `device`.
    pub fn tensor(&self, name: &str, device: tch::Device) -> Option<Tensor> {
        self.0.get(name).map(|(shape, values)| {
            let dims: Vec<i64> = shape.iter().map(|&d| i64::try_from(d).expect("a dimension fits in i64")).collect();
            Tensor::from_slice(values).view(dims.as_slice()).to_device(device)
        })
    }

    /// BLAKE3 of each tensor's little-endian bytes, by name (what checkpoint records list).
    pub fn digests(&self) -> BTreeMap<String, blake3::Hash> {
        self.0.iter().map(|(name, (_, values))| (name.clone(), blake3::hash(&Self::le_bytes(values)))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
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

    #[test]
    fn safetensors_bytes_do_not_depend_on_insertion_order() {
        let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]).view([2, 2]);
        let b = Tensor::from_slice(&[5.0f32]);
        let one = NamedTensors::from_tensors([("b".to_owned(), &b), ("a".to_owned(), &a)]).to_safetensors("{}");
        let two = NamedTensors::from_tensors([("a".to_owned(), &a), ("b".to_owned(), &b)]).to_safetensors("{}");
        assert_eq!(one, two);
        let header_len = u64::from_le_bytes(one[..8].try_into().unwrap()) as usize;
        assert_eq!(header_len % 8, 0);
        let header: serde_json::Value = serde_json::from_slice(&one[8..8 + header_len]).unwrap();
        assert_eq!(header["a"]["data_offsets"], serde_json::json!([0, 16]));
        assert_eq!(header["b"]["shape"], serde_json::json!([1]));
        assert_eq!(&one[8 + header_len..8 + header_len + 4], &1.0f32.to_le_bytes());
        assert_eq!(one.len(), 8 + header_len + 20);
    }

    #[test]
    fn safetensors_round_trip_with_metadata() {
        let a = Tensor::from_slice(&[1.5f32, -2.0, 3.25]).view([3, 1]);
        let named = NamedTensors::from_tensors([("w".to_owned(), &a)]);
        // The single-entry form is unchanged: existing checkpoints keep their bytes.
        let plain = named.to_safetensors("{\"x\":1}");
        assert!(plain[8..].starts_with(b"{\"__metadata__\":{\"config\":\"{\\\"x\\\":1}\"},\"w\":"));
        let hf = named.to_safetensors_with(&[("format", "pt")]);
        let parsed = safetensors::SafeTensors::read_metadata(&hf).unwrap().1;
        assert_eq!(parsed.metadata().as_ref().unwrap().get("format").map(String::as_str), Some("pt"));
        assert_eq!(NamedTensors::from_safetensors(&hf).unwrap(), named);
        assert_eq!(NamedTensors::from_safetensors(&plain).unwrap(), named);
        assert!(NamedTensors::from_safetensors(b"garbage!").unwrap_err().contains("not a safetensors file"));
        let back = named.tensor("w", tch::Device::Cpu).unwrap();
        assert_eq!(back.size(), [3, 1]);
        assert_eq!(f32_values(&back), [1.5, -2.0, 3.25]);
    }

    #[test]
    fn threads_can_be_pinned_by_stage_after_stage() {
        pin_threads(1);
        let _ = Tensor::from_slice(&[1.0f32]).sum(Kind::Float);
        pin_threads(2);
        pin_threads(1);
        assert_eq!(tch::get_num_threads(), 1);
    }

    #[test]
    fn the_shim_switches_deterministic_algorithms() {
        set_deterministic_algorithms(true);
        assert!(deterministic_algorithms());
        // Still computes: CPU kernels have deterministic implementations.
        let t = Tensor::from_slice(&[1.0f32, 2.0]).sum(Kind::Float);
        assert!((t.double_value(&[]) - 3.0).abs() < 1e-9);
        set_deterministic_algorithms(false);
        assert!(!deterministic_algorithms());
    }

    #[test]
    fn in_place_operations_compute_and_report_atens_errors() {
        let mut a = Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
        let b = Tensor::from_slice(&[10.0f32, 20.0, 30.0]);
        add_scaled_(&mut a, &b, 0.5).unwrap();
        assert_eq!(f32_values(&a), [6.0, 12.0, 18.0]);
        // Exact in binary: 6 - 100/128, 12 - 400/128, 18 - 900/128.
        addcmul_(&mut a, &b, &b, -1.0 / 128.0).unwrap();
        assert_eq!(f32_values(&a), [5.218_75, 8.875, 10.968_75]);
        let e = add_scaled_(&mut a, &Tensor::from_slice(&[1.0f32, 2.0]), 1.0).unwrap_err();
        assert_eq!(e.op, "add_");
        assert!(e.message.contains("size of tensor a (3) must match"), "{e}");
        let e = addcmul_(&mut a, &b, &Tensor::from_slice(&[1.0f32, 2.0]), 1.0).unwrap_err();
        assert_eq!(e.op, "addcmul_");
        // The tensor is unchanged by a refused operation.
        assert_eq!(f32_values(&a), [5.218_75, 8.875, 10.968_75]);
    }

    #[test]
    fn glibc_accepts_the_allocator_settings() {
        assert!(keep_freed_memory());
    }

    #[test]
    fn the_linked_libtorch_is_the_pinned_one() {
        assert!(LIBTORCH_VERSION.starts_with("2.13.0"), "{LIBTORCH_VERSION}");
        // libtorch loads and computes through the rpath the build script set.
        let t = Tensor::from_slice(&[1.0f32, 2.0]).sum(Kind::Float);
        assert!((t.double_value(&[]) - 3.0).abs() < 1e-9);
    }
}
