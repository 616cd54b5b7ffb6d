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

    // The determinism shim: ATen's deterministic-algorithms switch, which tch does not expose.
    println!("cargo:rerun-if-changed=shim/determinism.cpp");
    let abi = std::env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| "1".to_owned());
    cc::Build::new()
        .cpp(true)
        .file("shim/determinism.cpp")
        .include(format!("{libtorch}/include"))
        .include(format!("{libtorch}/include/torch/csrc/api/include"))
        .flag("-std=c++17")
        .define("_GLIBCXX_USE_CXX11_ABI", abi.as_str())
        .warnings(false)
        .compile("prov_determinism");
    println!("cargo:rustc-link-search=native={libtorch}/lib");
    println!("cargo:rustc-link-lib=dylib=torch_cpu");
    println!("cargo:rustc-link-lib=dylib=c10");
}
