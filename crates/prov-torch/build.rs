//! Gives this crate's test binaries an rpath to libtorch (see `.cargo/config.toml`), and
//! records the libtorch version the crate is built against.

#[allow(clippy::disallowed_methods)] // A build script has no fs-err; its errors end the build anyway.
fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    let Ok(libtorch) = std::env::var("LIBTORCH") else { return };
    println!("cargo:rustc-link-arg=-Wl,-rpath,{libtorch}/lib");
    let version_file = format!("{libtorch}/version.py");
    println!("cargo:rerun-if-changed={version_file}");
    let version = std::fs::read_to_string(&version_file)
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("__version__ = ").map(|v| v.trim().trim_matches('\'').trim_matches('"').to_owned())
            })
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=PROV_LIBTORCH_VERSION={version}");

    // The shim: what tch does not expose (ATen's deterministic-algorithms switch, in-place
    // operations with their scalar argument) and glibc's allocator setting.
    let shim = ["shim/determinism.cpp", "shim/inplace.cpp", "shim/memory.cpp"];
    for file in shim {
        println!("cargo:rerun-if-changed={file}");
    }
    let abi = std::env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| "1".to_owned());
    cc::Build::new()
        .cpp(true)
        .files(shim)
        .include(format!("{libtorch}/include"))
        .include(format!("{libtorch}/include/torch/csrc/api/include"))
        .flag("-std=c++17")
        .define("_GLIBCXX_USE_CXX11_ABI", abi.as_str())
        .warnings(false)
        .compile("prov_torch_shim");
    println!("cargo:rustc-link-search=native={libtorch}/lib");
    println!("cargo:rustc-link-lib=dylib=torch_cpu");
    println!("cargo:rustc-link-lib=dylib=c10");
}
