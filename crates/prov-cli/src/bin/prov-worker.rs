//! `prov-worker`: the process in which Provenant computes with libtorch. `prov` starts it with
//! one request; see `prov_worker` (the library) and `prov_exec::worker` (the protocol).

fn main() -> std::process::ExitCode {
    prov_worker::main()
}
