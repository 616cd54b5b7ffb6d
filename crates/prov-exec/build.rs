//! Records the libtorch version the worker is built against (the torch wheel's `version.py`,
//! found through `LIBTORCH`, see `.cargo/config.toml`), for the envelope `prov` records
//! without loading libtorch.

#[allow(clippy::disallowed_methods)] // A build script has no fs-err; its errors end the build anyway.
fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    let version = std::env::var("LIBTORCH")
        .ok()
        .and_then(|libtorch| {
            let version_file = format!("{libtorch}/version.py");
            println!("cargo:rerun-if-changed={version_file}");
            std::fs::read_to_string(&version_file).ok()
        })
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("__version__ = ").map(|v| v.trim().trim_matches('\'').trim_matches('"').to_owned())
            })
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=PROV_LIBTORCH_VERSION={version}");
}
