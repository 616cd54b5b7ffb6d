//! CUDA for a stage whose configuration asks for `cuda:N`: loading libtorch's CUDA library,
//! choosing the device, and reading the facts of its envelope from the libraries themselves.
//!
//! tch links `libtorch_cuda` only as a library it does not call, and the linker drops such a
//! library (`--as-needed`): a tch binary that never names a CUDA symbol sees no GPU, however
//! many the machine has. The worker loads `libtorch_cuda` itself, and only for a CUDA stage,
//! so that a CPU stage neither pays for loading it nor depends on it.
//!
//! The versions recorded are what the loaded libraries say of themselves
//! (`cudaRuntimeGetVersion`, `cudnnGetProperty`, `cublasGetProperty`), not what the build
//! was compiled against; the GPU's model and the driver's version come from NVML, the
//! driver's own management library, whose device order is the PCI bus order that `prov`
//! pins for CUDA (`CUDA_DEVICE_ORDER=PCI_BUS_ID`).

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

use prov_manifest::CudaEnvelope;

/// The device every libtorch computation of this process uses: CPU unless [`use_device`]
/// chose a GPU for the stage this worker runs.
static DEVICE: OnceLock<tch::Device> = OnceLock::new();

/// The device this process computes on ([`use_device`], else the CPU).
pub fn device() -> tch::Device {
    DEVICE.get().copied().unwrap_or(tch::Device::Cpu)
}

/// Chooses the device for this process, once: a worker runs one stage.
///
/// # Errors
///
/// When another device was chosen before.
pub fn use_device(device: tch::Device) -> Result<(), String> {
    let chosen = *DEVICE.get_or_init(|| device);
    if chosen == device { Ok(()) } else { Err(format!("this worker already computes on {chosen:?}, not {device:?}")) }
}

/// A loaded shared library, by `dlopen` handle. Never closed: libtorch keeps pointers into
/// the CUDA libraries for the life of the process.
struct Library {
    path: String,
    handle: *mut c_void,
}

#[allow(unsafe_code)] // dlopen and dlsym: the C interface of the dynamic loader.
impl Library {
    /// Opens `path` (`RTLD_NOW | RTLD_GLOBAL`, plus `extra`).
    fn open(path: &str, extra: c_int) -> Result<Self, String> {
        let c_path = CString::new(path).map_err(|_| format!("`{path}` holds a NUL byte"))?;
        // SAFETY: a NUL-terminated path; dlopen runs the library's initialisers, which for
        // the CUDA libraries register libtorch's CUDA backend and touch no Rust state.
        let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL | extra) };
        if handle.is_null() {
            return Err(format!("cannot load `{path}`: {}", loader_error()));
        }
        Ok(Self { path: path.to_owned(), handle })
    }

    /// The address of `name`.
    fn symbol(&self, name: &str) -> Result<*mut c_void, String> {
        let c_name = CString::new(name).expect("symbol names hold no NUL");
        // SAFETY: a live handle and a NUL-terminated name.
        let found = unsafe { libc::dlsym(self.handle, c_name.as_ptr()) };
        if found.is_null() { Err(format!("`{}` has no symbol `{name}`", self.path)) } else { Ok(found) }
    }
}

/// The dynamic loader's last error message.
#[allow(unsafe_code)]
fn loader_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string owned by the loader.
    let message = unsafe { libc::dlerror() };
    if message.is_null() {
        "no reason given".to_owned()
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(message) }.to_string_lossy().into_owned()
    }
}

/// Loads libtorch's CUDA library from the directory of the libtorch this process mapped (the
/// one the worker checked against its build), once.
///
/// # Errors
///
/// A sentence when this libtorch has no CUDA library (a CPU-only build) or it cannot load.
pub fn load() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let (root, _) = crate::loaded_libtorch()?;
            let path = root.join("lib").join("libtorch_cuda.so");
            if !path.exists() {
                return Err(format!(
                    "the libtorch at `{}` is built without CUDA (no lib/libtorch_cuda.so)",
                    root.display()
                ));
            }
            Library::open(&path.to_string_lossy(), 0).map(|_| ())
        })
        .clone()
}

/// An already loaded library, by the prefix of its file name.
fn loaded_library(prefix: &str) -> Result<Library, String> {
    let path = crate::mapped_library(prefix)?
        .ok_or_else(|| format!("no `{prefix}*` library is loaded (is libtorch's CUDA library loaded?)"))?;
    Library::open(&path.to_string_lossy(), libc::RTLD_NOLOAD)
}

/// `major.minor.patch` from a library's `…GetProperty(type, &value)`: `MAJOR_VERSION` = 0,
/// `MINOR_VERSION` = 1, `PATCH_LEVEL` = 2 (CUDA's `libraryPropertyType`).
#[allow(unsafe_code)]
fn property_version(library: &Library, function: &str) -> Result<String, String> {
    let f = library.symbol(function)?;
    // SAFETY: cudnnGetProperty and cublasGetProperty both have this C signature, returning a
    // status (0 = success).
    let get: extern "C" fn(c_int, *mut c_int) -> c_int = unsafe { std::mem::transmute(f) };
    let mut parts = [0 as c_int; 3];
    for (kind, value) in (0..).zip(parts.iter_mut()) {
        let status = get(kind, value);
        if status != 0 {
            return Err(format!("{function}({kind}) in `{}` failed with status {status}", library.path));
        }
    }
    Ok(format!("{}.{}.{}", parts[0], parts[1], parts[2]))
}

/// The versions of the CUDA runtime, cuDNN and cuBLAS that libtorch's CUDA library loaded,
/// asked of each library. Needs no GPU.
///
/// # Errors
///
/// A sentence when [`load`] fails or a library does not answer.
#[allow(unsafe_code)]
pub fn library_versions() -> Result<(String, String, String), String> {
    load()?;
    let cudart = loaded_library("libcudart.so")?;
    let f = cudart.symbol("cudaRuntimeGetVersion")?;
    // SAFETY: `cudaError_t cudaRuntimeGetVersion(int*)`.
    let get: extern "C" fn(*mut c_int) -> c_int = unsafe { std::mem::transmute(f) };
    let mut v: c_int = 0;
    let status = get(&raw mut v);
    if status != 0 {
        return Err(format!("cudaRuntimeGetVersion failed with status {status}"));
    }
    // CUDA encodes 13.0 as 13000: 1000 × major + 10 × minor.
    let runtime = format!("{}.{}", v / 1000, (v % 1000) / 10);
    let cudnn = property_version(&loaded_library("libcudnn.so")?, "cudnnGetProperty")?;
    let cublas = property_version(&loaded_library("libcublas.so")?, "cublasGetProperty")?;
    Ok((runtime, cudnn, cublas))
}

/// The GPU's model and the driver's version from NVML, for CUDA device `index` as this
/// process numbers it: through `CUDA_VISIBLE_DEVICES` when set (indices or `GPU-…` UUIDs, as
/// Slurm and users set it), else NVML's own index.
///
/// # Errors
///
/// A sentence when there is no NVIDIA driver (NVML cannot load) or no such device.
#[allow(unsafe_code)]
pub fn gpu(index: u32) -> Result<(String, String), String> {
    let nvml = Library::open("libnvidia-ml.so.1", 0).map_err(|e| format!("no NVIDIA driver: {e}"))?;
    let check = |what: &str, status: c_int| {
        if status == 0 { Ok(()) } else { Err(format!("NVML {what} failed with status {status}")) }
    };
    // SAFETY: each transmute gives the symbol the C signature NVML's header declares.
    unsafe {
        let init: extern "C" fn() -> c_int = std::mem::transmute(nvml.symbol("nvmlInit_v2")?);
        check("nvmlInit_v2", init())?;
        let mut text = [0 as c_char; 96];
        let driver: extern "C" fn(*mut c_char, c_uint) -> c_int =
            std::mem::transmute(nvml.symbol("nvmlSystemGetDriverVersion")?);
        check("nvmlSystemGetDriverVersion", driver(text.as_mut_ptr(), 96))?;
        let driver_version = CStr::from_ptr(text.as_ptr()).to_string_lossy().into_owned();
        let mut handle: *mut c_void = std::ptr::null_mut();
        match visible_device(index)? {
            Visible::Index(i) => {
                let by_index: extern "C" fn(c_uint, *mut *mut c_void) -> c_int =
                    std::mem::transmute(nvml.symbol("nvmlDeviceGetHandleByIndex_v2")?);
                check("nvmlDeviceGetHandleByIndex_v2", by_index(i, &raw mut handle))?;
            }
            Visible::Uuid(uuid) => {
                let by_uuid: extern "C" fn(*const c_char, *mut *mut c_void) -> c_int =
                    std::mem::transmute(nvml.symbol("nvmlDeviceGetHandleByUUID")?);
                let c_uuid = CString::new(uuid).map_err(|_| "a UUID with a NUL byte".to_owned())?;
                check("nvmlDeviceGetHandleByUUID", by_uuid(c_uuid.as_ptr(), &raw mut handle))?;
            }
        }
        let name: extern "C" fn(*mut c_void, *mut c_char, c_uint) -> c_int =
            std::mem::transmute(nvml.symbol("nvmlDeviceGetName")?);
        check("nvmlDeviceGetName", name(handle, text.as_mut_ptr(), 96))?;
        let model = CStr::from_ptr(text.as_ptr()).to_string_lossy().into_owned();
        Ok((model, driver_version))
    }
}

/// How NVML names the device CUDA calls `index`.
#[derive(Debug, PartialEq, Eq)]
enum Visible {
    Index(u32),
    Uuid(String),
}

fn visible_device(index: u32) -> Result<Visible, String> {
    let Some(list) = std::env::var("CUDA_VISIBLE_DEVICES").ok().filter(|v| !v.trim().is_empty()) else {
        return Ok(Visible::Index(index));
    };
    visible_in(&list, index)
}

/// The `index`th entry of a `CUDA_VISIBLE_DEVICES` list.
fn visible_in(list: &str, index: u32) -> Result<Visible, String> {
    let entry = list
        .split(',')
        .map(str::trim)
        .nth(index as usize)
        .ok_or_else(|| format!("CUDA_VISIBLE_DEVICES={list} has no device {index}"))?;
    if entry.starts_with("GPU-") || entry.starts_with("MIG-") {
        return Ok(Visible::Uuid(entry.to_owned()));
    }
    entry
        .parse::<u32>()
        .map(Visible::Index)
        .map_err(|_| format!("CUDA_VISIBLE_DEVICES={list}: `{entry}` is neither an index nor a GPU UUID"))
}

/// The deterministic settings in force, as the envelope records them: read back from `ATen`
/// and the environment.
pub fn deterministic_settings() -> String {
    let flags = crate::cudnn_flags();
    let workspace = std::env::var("CUBLAS_WORKSPACE_CONFIG").unwrap_or_else(|_| "(unset)".into());
    let on_off = |b: bool| if b { "on" } else { "off" };
    format!(
        "CUBLAS_WORKSPACE_CONFIG={workspace} cudnn_benchmark={} cudnn_deterministic={} deterministic_algorithms={}",
        on_off(flags & 2 != 0),
        on_off(flags & 1 != 0),
        on_off(crate::deterministic_algorithms()),
    )
}

/// The envelope facts of CUDA device `index`: loads CUDA, checks that libtorch sees the
/// device, and reads the GPU, the driver, the libraries and the deterministic settings.
///
/// # Errors
///
/// A sentence naming what is missing: CUDA in this libtorch, the device, the driver.
pub fn facts(index: u32) -> Result<CudaEnvelope, String> {
    load()?;
    let count = tch::Cuda::device_count();
    if i64::from(index) >= count {
        return Err(format!("the stage asks for cuda:{index}, but libtorch sees {count} CUDA device(s) here"));
    }
    let (cuda_runtime, cudnn, cublas) = library_versions()?;
    let (gpu_model, driver) = gpu(index)?;
    Ok(CudaEnvelope { gpu_model, driver, cuda_runtime, cudnn, cublas, deterministic: deterministic_settings() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The version a wheel's `*.dist-info` directory names (`nvidia_cudnn_cu13-9.20.0.48`).
    fn wheel_version(site: &std::path::Path, prefix: &str) -> Option<String> {
        let entries = fs_err::read_dir(site).ok()?;
        entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find_map(|n| n.strip_prefix(prefix).and_then(|rest| rest.strip_suffix(".dist-info")).map(str::to_owned))
    }

    /// The versions read from the loaded libraries agree with pip's record of the NVIDIA
    /// wheels that torch installed (an independent source: the wheels' metadata, not the
    /// libraries). Needs no GPU, only the CUDA build of torch that `scripts/setup` pins.
    #[test]
    fn library_versions_are_the_installed_wheels() {
        let (root, _) = crate::loaded_libtorch().unwrap();
        let site = root.parent().unwrap();
        let (runtime, cudnn, cublas) = library_versions().unwrap();
        let wheel = |p: &str| wheel_version(site, p).unwrap_or_else(|| panic!("no {p}* wheel in {}", site.display()));
        // Wheel versions have a fourth part (the build); the libraries report three.
        let runtime_wheel = wheel("nvidia_cuda_runtime-");
        assert!(runtime_wheel.starts_with(&format!("{runtime}.")), "runtime {runtime}, wheel {runtime_wheel}");
        let cudnn_wheel = wheel("nvidia_cudnn_cu");
        assert!(cudnn_wheel.contains(&format!("-{cudnn}.")), "cuDNN {cudnn}, wheel {cudnn_wheel}");
        let cublas_wheel = wheel("nvidia_cublas-");
        assert!(cublas_wheel.starts_with(&format!("{cublas}.")), "cuBLAS {cublas}, wheel {cublas_wheel}");
    }

    /// Without a GPU the facts say so, naming the device asked for; with one they name it.
    #[test]
    fn a_missing_gpu_is_named() {
        load().unwrap();
        let count = tch::Cuda::device_count();
        let e = facts(u32::try_from(count).unwrap()).unwrap_err();
        assert!(e.contains(&format!("cuda:{count}")) && e.contains(&format!("{count} CUDA device")), "{e}");
        if count > 0 {
            let here = facts(0).unwrap();
            assert!(!here.gpu_model.is_empty() && !here.driver.is_empty(), "{here:?}");
        }
    }

    #[test]
    fn visible_devices_map_cuda_indices_to_nvml() {
        assert_eq!(visible_in("2,0", 0).unwrap(), Visible::Index(2));
        assert_eq!(visible_in("2, 0", 1).unwrap(), Visible::Index(0));
        assert_eq!(
            visible_in("GPU-8a3e1d4c-0000-1111-2222-333344445555", 0).unwrap(),
            Visible::Uuid("GPU-8a3e1d4c-0000-1111-2222-333344445555".into())
        );
        assert!(visible_in("0", 1).unwrap_err().contains("no device 1"));
        assert!(visible_in("gpu0", 0).unwrap_err().contains("neither"));
    }

    #[test]
    fn a_device_is_chosen_once() {
        assert_eq!(device(), tch::Device::Cpu);
        use_device(tch::Device::Cpu).unwrap();
        assert!(use_device(tch::Device::Cuda(0)).is_err());
        assert_eq!(device(), tch::Device::Cpu);
    }
}
