//! The sandbox an `external` command runs in: bubblewrap (`bwrap`, Debian's `bubblewrap`).
//!
//! The command sees the system directories (`/usr`, `/bin`, `/sbin`, `/lib*`) read-only, the
//! few files of `/etc` that programs need to start (the dynamic linker's cache, Debian's
//! `alternatives`), a private `/proc`, `/dev` and `/tmp`, and its scratch directory (its
//! inputs, its working directory, `TMPDIR`) read-write, as `/scratch` (the working directory
//! is `/scratch/work`). Nothing else of the machine exists for it: not the project, not the
//! store, not `$HOME`. It has
//! its own PID, IPC, UTS and network namespaces: no network at all unless the config says
//! `network: true` (then also `/etc/resolv.conf`, `/etc/hosts` and the CA certificates).
//! `prlimit` (util-linux) sets its address-space and file-size limits; a wall-clock limit
//! kills it and everything it started.
//!
//! If the sandbox cannot start (bubblewrap missing, user namespaces disabled), the stage
//! fails with a message and a hint. It never runs the command unconfined.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// What the stage statistics say the command ran in.
pub const KIND: &str = "bubblewrap";

/// Where the scratch directory is inside the sandbox.
pub const SCRATCH: &str = "/scratch";

/// System directories bound read-only (those that exist).
const SYSTEM_DIRS: [&str; 6] = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32"];

/// Files and directories of `/etc` a program needs to start (bound read-only if present).
const ETC: [&str; 4] = ["/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives"];

/// What a command that may use the network also needs.
const ETC_NETWORK: [&str; 6] =
    ["/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf", "/etc/ssl", "/etc/ca-certificates"];

/// A command's confinement, ready to wrap the command.
pub(crate) struct Sandbox {
    bwrap: PathBuf,
    prlimit: PathBuf,
    args: Vec<String>,
    memory_bytes: u64,
    file_bytes: u64,
}

/// Finds a program on the `PATH` of this process.
fn find(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file())
}

/// What a command may use: the network, and how much memory and file size.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Share the host's network (and its resolver files).
    pub network: bool,
    /// Address-space limit, in MiB.
    pub memory_mib: u64,
    /// Largest file the command may write, in MiB.
    pub max_file_mib: u64,
}

impl Sandbox {
    /// Prepares the sandbox of a command whose scratch directory is `scratch` and working
    /// directory `work`; checks that bubblewrap can start one here.
    pub(crate) fn new(config: &Limits, scratch: &Path, work: &Path) -> Result<Self, String> {
        let bwrap = find("bwrap").ok_or_else(|| {
            "bubblewrap (`bwrap`) is not on PATH: commands run only in its sandbox, never unconfined".to_owned()
        })?;
        let prlimit = find("prlimit").ok_or_else(|| "`prlimit` (util-linux) is not on PATH".to_owned())?;
        let mut args: Vec<String> = ["--unshare-all", "--die-with-parent", "--new-session"].map(str::to_owned).into();
        if config.network {
            args.push("--share-net".into());
        }
        let mut bind_try = |path: &str| {
            if Path::new(path).exists() {
                args.extend(["--ro-bind".to_owned(), path.to_owned(), path.to_owned()]);
            }
        };
        let network: &[&str] = if config.network { &ETC_NETWORK } else { &[] };
        for path in SYSTEM_DIRS.iter().chain(&ETC).chain(network) {
            bind_try(path);
        }
        args.extend(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"].map(str::to_owned));
        // At a fixed path: no path of the machine (the project's, the store's) shows inside,
        // nor in anything the command writes about where it ran.
        let inside = Path::new(SCRATCH).join(
            work.strip_prefix(scratch)
                .map_err(|_| "the working directory is not in the scratch directory".to_owned())?,
        );
        args.extend(["--bind".to_owned(), scratch.display().to_string(), SCRATCH.to_owned()]);
        args.extend(["--chdir".to_owned(), inside.display().to_string()]);
        let mib = |n: u64| n.saturating_mul(1 << 20);
        let sandbox =
            Self { bwrap, prlimit, args, memory_bytes: mib(config.memory_mib), file_bytes: mib(config.max_file_mib) };
        sandbox.check()?;
        Ok(sandbox)
    }

    /// Starts `true` in the sandbox: bubblewrap reports what keeps it from building one
    /// (no user namespaces, a mount refused) before the command is trusted to it.
    fn check(&self) -> Result<(), String> {
        let out = Command::new(&self.bwrap)
            .args(&self.args)
            .arg("--")
            .arg(&self.prlimit)
            .arg("--")
            .arg("true")
            .env_clear()
            .output()
            .map_err(|e| format!("bubblewrap (`{}`) cannot be started: {e}", self.bwrap.display()))?;
        if out.status.success() {
            return Ok(());
        }
        Err(format!(
            "bubblewrap cannot build the sandbox here ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }

    /// The command line that runs `program` with `args` in the sandbox, under its limits.
    pub(crate) fn command(&self, program: &Path, args: &[String]) -> Command {
        let mut c = Command::new(&self.bwrap);
        c.args(&self.args)
            .arg("--")
            .arg(&self.prlimit)
            .arg(format!("--as={}", self.memory_bytes))
            .arg(format!("--fsize={}", self.file_bytes))
            .arg("--")
            .arg(program)
            .args(args);
        c
    }
}

/// Waits for `child` at most `timeout_seconds`; `None` when it was killed for taking longer.
/// Killing bubblewrap kills the sandbox's first process (`--die-with-parent`), and with it
/// every process of its PID namespace.
pub(crate) fn wait(mut child: Child, timeout_seconds: u64) -> std::io::Result<Option<ExitStatus>> {
    let deadline = Instant::now() + Duration::from_secs(timeout_seconds);
    let mut pause = Duration::from_millis(5);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            child.kill()?;
            child.wait()?;
            return Ok(None);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}
