//! libtorch itself, for the worker process that links it: which libtorch this build links,
//! the intra-op thread count pinned before a stage computes, `ATen`'s deterministic-algorithms
//! switch and the in-place operations tch lacks (a small C++ shim), and named tensors copied
//! out of libtorch in name order (tch's `VarStore` keeps its variables in a `HashMap`, whose
//! order must never reach hashed bytes).
//!
//! The same program gives different weights for 1 and 2 threads, and for each `ATen` CPU
//! capability: both are part of the determinism envelope of every stage that runs libtorch.
//! The capability is decided and pinned by `prov` without libtorch (`prov_exec::aten`); only
//! the worker links this crate.

use tch::{Kind, Tensor};

pub mod cuda;

/// The device this worker computes on: the CPU, or the GPU its stage's configuration names
/// ([`cuda::use_device`]). Never picked by what the machine has (`Device::cuda_if_available`):
/// on a machine with a GPU a stage would compute there under an envelope that says CPU.
pub fn device() -> tch::Device {
    cuda::device()
}

/// The libtorch version this binary is linked against (the torch wheel's `version.py`).
pub const LIBTORCH_VERSION: &str = env!("PROV_LIBTORCH_VERSION");

/// The version of the libtorch this process has loaded, and the directory it was loaded
/// from: the package around the mapped `libtorch_cpu` library (`lib/`'s parent), whose
/// `version.py` (a torch wheel) or `build-version` (a libtorch archive) names it. The dynamic
/// loader, not the build, decides which library a process maps (`LD_LIBRARY_PATH`, another
/// torch on the rpath), so [`LIBTORCH_VERSION`] alone cannot say what computes.
///
/// # Errors
///
/// A sentence when no libtorch is mapped or its package names no version.
pub fn loaded_libtorch() -> Result<(std::path::PathBuf, String), String> {
    let lib = mapped_library("libtorch_cpu.")?
        .ok_or_else(|| "no libtorch_cpu library is mapped into this process".to_owned())?;
    let root =
        lib.parent().and_then(std::path::Path::parent).ok_or_else(|| format!("`{}` has no package", lib.display()))?;
    Ok((root.to_path_buf(), package_version(root)?))
}

/// The path of the first library mapped into this process whose file name starts with
/// `prefix` (`/proc/self/maps`), or none.
///
/// # Errors
///
/// A sentence when the map cannot be read.
pub fn mapped_library(prefix: &str) -> Result<Option<std::path::PathBuf>, String> {
    let maps = fs_err::read_to_string("/proc/self/maps").map_err(|e| format!("cannot read /proc/self/maps: {e}"))?;
    Ok(maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(std::path::Path::new)
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(prefix)))
        .map(std::path::Path::to_path_buf))
}

/// The libtorch version a package directory names: `__version__` of its `version.py`, else
/// its `build-version` file.
///
/// # Errors
///
/// A sentence naming the directory when neither names a version.
pub fn package_version(root: &std::path::Path) -> Result<String, String> {
    if let Ok(text) = fs_err::read_to_string(root.join("version.py")) {
        let found = text.lines().find_map(|l| {
            l.strip_prefix("__version__ = ").map(|v| v.trim().trim_matches('\'').trim_matches('"').to_owned())
        });
        if let Some(v) = found.filter(|v| !v.is_empty()) {
            return Ok(v);
        }
    }
    match fs_err::read_to_string(root.join("build-version")) {
        Ok(v) if !v.trim().is_empty() => Ok(v.trim().to_owned()),
        _ => Err(format!("`{}` names no libtorch version (no version.py or build-version)", root.display())),
    }
}

#[allow(unsafe_code)] // The C++ shim's functions (shim/*.cpp).
mod shim {
    use std::ffi::{c_char, c_void};

    unsafe extern "C" {
        pub safe fn prov_set_deterministic(on: i32, warn_only: i32);
        pub safe fn prov_deterministic_algorithms() -> i32;
        pub safe fn prov_cudnn_flags() -> i32;
        pub safe fn prov_keep_freed_memory() -> i32;
        pub safe fn prov_die_with_parent(parent: i32) -> i32;
        /// `out` points to `capacity` writable bytes.
        pub fn prov_cpu_capability(out: *mut c_char, capacity: usize);
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

/// The CPU kernels `ATen` dispatches to, as `torch.backends.cpu.get_cpu_capability()` says
/// them, lower-cased: `default`, `avx2` or `avx512`.
pub fn cpu_capability() -> String {
    let mut out = [0 as std::ffi::c_char; 64];
    // SAFETY: the buffer is 64 writable bytes, which the shim NUL-terminates.
    #[allow(unsafe_code)]
    let text = unsafe {
        shim::prov_cpu_capability(out.as_mut_ptr(), out.len());
        std::ffi::CStr::from_ptr(out.as_ptr())
    };
    text.to_string_lossy().to_ascii_lowercase()
}

/// Has the kernel kill this process when the process `parent` that started it dies
/// (`PR_SET_PDEATHSIG`); returns false when `parent` is already gone (this process was
/// re-parented), which the caller treats as its parent's death.
pub fn die_with_parent(parent: u32) -> bool {
    shim::prov_die_with_parent(i32::try_from(parent).unwrap_or(-1)) == 1
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

/// cuDNN's flags as `ATen` holds them: bit 0 deterministic, bit 1 benchmark.
pub fn cudnn_flags() -> i32 {
    shim::prov_cudnn_flags()
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

/// Named tensors as the store keeps them; see [`TorchTensors`] for libtorch's side.
pub use prov_manifest::NamedTensors;

/// [`NamedTensors`] to and from libtorch tensors. `NamedTensors` itself is libtorch-free (it
/// lives in `prov-manifest`), so that `prov` reads checkpoints without linking libtorch.
pub trait TorchTensors {
    /// Copies tensors out, ordering them by name whatever order they come in.
    fn from_tensors<'a>(tensors: impl IntoIterator<Item = (String, &'a Tensor)>) -> Self;

    /// The tensor `name` as a libtorch tensor on `device`.
    fn tensor(&self, name: &str, device: tch::Device) -> Option<Tensor>;
}

impl TorchTensors for NamedTensors {
    fn from_tensors<'a>(tensors: impl IntoIterator<Item = (String, &'a Tensor)>) -> Self {
        NamedTensors(tensors.into_iter().map(|(name, t)| (name, (shape(t), f32_values(t)))).collect())
    }

    fn tensor(&self, name: &str, device: tch::Device) -> Option<Tensor> {
        self.0.get(name).map(|(shape, values)| {
            let dims: Vec<i64> = shape.iter().map(|&d| i64::try_from(d).expect("a dimension fits in i64")).collect();
            Tensor::from_slice(values).view(dims.as_slice()).to_device(device)
        })
    }
}

#[cfg(test)]
mod package_tests {
    use super::package_version;

    #[test]
    fn a_package_names_its_version_in_version_py_or_build_version() {
        let dir = tempfile::tempdir().unwrap();
        assert!(package_version(dir.path()).unwrap_err().contains("names no libtorch version"));
        fs_err::write(dir.path().join("build-version"), "2.13.0+cpu\n").unwrap();
        assert_eq!(package_version(dir.path()).unwrap(), "2.13.0+cpu");
        fs_err::write(dir.path().join("version.py"), "from x import y\n__version__ = '2.12.1+cu126'\n").unwrap();
        assert_eq!(package_version(dir.path()).unwrap(), "2.12.1+cu126");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // This test binary links libtorch: the library mapped is the one it was built for.
        let (root, loaded) = loaded_libtorch().expect("libtorch is mapped");
        assert_eq!(loaded, LIBTORCH_VERSION, "loaded from {}", root.display());
        // libtorch loads and computes through the rpath the build script set.
        let t = Tensor::from_slice(&[1.0f32, 2.0]).sum(Kind::Float);
        assert!((t.double_value(&[]) - 3.0).abs() < 1e-9);
    }
}
