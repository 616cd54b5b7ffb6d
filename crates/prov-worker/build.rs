//! Gives this crate's test binaries an rpath to libtorch (see `.cargo/config.toml`).

fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    let Ok(libtorch) = std::env::var("LIBTORCH") else { return };
    println!("cargo:rustc-link-arg=-Wl,-rpath,{libtorch}/lib");
}
