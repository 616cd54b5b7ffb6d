//! Gives the worker executable and this crate's tests an rpath to libtorch (see
//! `.cargo/config.toml`); `prov` itself links no libtorch and needs none.

fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    let Ok(libtorch) = std::env::var("LIBTORCH") else { return };
    println!("cargo:rustc-link-arg-bin=prov-worker=-Wl,-rpath,{libtorch}/lib");
    println!("cargo:rustc-link-arg-tests=-Wl,-rpath,{libtorch}/lib");
}
