//! What every command needs: where the store is, the project root, threads, the clock, the
//! registry of stage kinds and the envelope.

use std::path::{Path, PathBuf};

use prov_exec::{ExecOptions, Registry, TorchFacts};
use prov_manifest::Envelope;
use prov_store::{Access, STORE_DIR_NAME, Store};

use crate::env_vars;
use crate::error::CommandError;
use crate::ui::{StageProgress, Ui};

/// Global options, resolved.
pub(crate) struct CommandContext {
    pub store_flag: Option<PathBuf>,
    pub threads_flag: Option<usize>,
    pub cwd: PathBuf,
}

impl CommandContext {
    /// Returns the store directory: `--store`, then `PROV_STORE`, then the nearest `.prov/`
    /// from the current directory upwards.
    pub fn store_dir(&self) -> Result<PathBuf, CommandError> {
        if let Some(s) = &self.store_flag {
            return Ok(prov_exec::absolute(s));
        }
        if let Some(s) = env_vars::get(env_vars::PROV_STORE) {
            return Ok(prov_exec::absolute(Path::new(&s)));
        }
        let mut dir = Some(self.cwd.as_path());
        while let Some(d) = dir {
            let candidate = d.join(STORE_DIR_NAME);
            if candidate.join("VERSION").is_file() {
                return Ok(candidate);
            }
            dir = d.parent();
        }
        Err(CommandError::input(format!(
            "no `{STORE_DIR_NAME}` store in `{}` or any parent directory",
            self.cwd.display()
        ))
        .with_hint("run `prov init` in the project root, or pass `--store DIR` or set PROV_STORE"))
    }

    /// Opens the store; returns it with the project root (the store directory's parent).
    /// Writes a file a command produces (`--out`), relative to the working directory,
    /// atomically beside its destination: a killed command leaves no half file. `what` names
    /// it in the error.
    pub fn write_output(&self, out: &Path, bytes: &[u8], what: &str) -> Result<(), CommandError> {
        let dest = self.cwd.join(out);
        let dir = dest.parent().map_or_else(|| self.cwd.clone(), Path::to_path_buf);
        prov_store::write_atomically(&dir, &dest, bytes)
            .map_err(|e| CommandError::input(format!("writing the {what}: {e}")))
    }

    pub fn open_store(&self, access: Access, wait: bool) -> Result<(Store, PathBuf), CommandError> {
        let dir = self.store_dir()?;
        let store = Store::open(&dir, access, wait)?;
        let root = dir.parent().map_or_else(|| self.cwd.clone(), Path::to_path_buf);
        Ok((store, root))
    }

    /// Returns the worker thread count: `--threads`, then `PROV_THREADS`, then all cores;
    /// from 1 to [`prov_exec::MAX_THREADS`], as a stage's `threads` (`PROV_THREADS=100000`
    /// started as many OS threads and failed after seconds with `EAGAIN`; 2^32 aborted).
    pub fn threads(&self) -> Result<usize, CommandError> {
        let bounded = |t: usize, what: &str| {
            if (1..=prov_exec::MAX_THREADS).contains(&(t as u64)) {
                Ok(t)
            } else {
                Err(CommandError::input(format!("{what}: from 1 to {} threads, got {t}", prov_exec::MAX_THREADS)))
            }
        };
        if let Some(t) = self.threads_flag {
            return bounded(t, "--threads");
        }
        if let Some(s) = env_vars::get(env_vars::PROV_THREADS) {
            let t = s.parse::<usize>().map_err(|_| {
                CommandError::input(format!("{}: expected a positive integer, got `{s}`", env_vars::PROV_THREADS))
            })?;
            return bounded(t, env_vars::PROV_THREADS);
        }
        Ok(std::thread::available_parallelism().map_or(1, std::num::NonZero::get).min(prov_exec::MAX_THREADS as usize))
    }

    /// Builds the options of an execution (threads, envelope, clock, progress bar, where the
    /// stages run) and runs `f` with them: for `run`, `replay` and `audit --replay`. With
    /// `--executor slurm` the envelope is a compute node's.
    pub fn with_exec_options<T>(
        &self,
        ui: &Ui,
        root: &std::path::Path,
        lockfile_display: &str,
        executor: &crate::executor::ExecutorArgs,
        f: impl FnOnce(&ExecOptions<'_>) -> Result<T, prov_exec::ExecError>,
    ) -> Result<T, CommandError> {
        let threads = self.threads()?;
        let registry = registry();
        let clock = CommandContext::clock();
        let worker = Self::worker();
        let remote = executor.dispatcher(root, threads)?;
        let (envelope, dispatcher) = match &remote {
            Some((d, envelope)) => (envelope.clone(), Some(d as &dyn prov_exec::Dispatcher)),
            None => (CommandContext::envelope(threads), None),
        };
        let progress = StageProgress::new(ui);
        let opts = ExecOptions {
            registry: &registry,
            threads,
            envelope,
            project_root: root,
            lockfile_display,
            clock: &*clock,
            observer: &progress,
            worker: &worker,
            dispatcher,
        };
        let result = f(&opts);
        progress.finish();
        Ok(result?)
    }

    /// Returns the worker executable: `PROV_WORKER`, else `prov-worker` beside `prov`.
    pub fn worker() -> PathBuf {
        env_vars::get(env_vars::PROV_WORKER)
            .map_or_else(prov_exec::worker::beside_this_executable, |p| prov_exec::absolute(Path::new(&p)))
    }

    /// Returns the clock for the execution log.
    pub fn clock() -> Box<dyn Fn() -> i64 + Send + Sync> {
        match env_vars::get(env_vars::PROV_TIMESTAMP).and_then(|s| s.parse::<i64>().ok()) {
            Some(fixed) => Box::new(move || fixed),
            None => Box::new(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            }),
        }
    }

    /// Returns the envelope of this process with `threads` threads.
    pub fn envelope(threads: usize) -> Envelope {
        prov_exec::capture_envelope(u32::try_from(threads).unwrap_or(u32::MAX), &torch_facts())
    }
}

/// libtorch facts: the version the worker links (which it checks before a stage computes), and
/// the `ATen` CPU capability, MKL branch and oneDNN instruction set that `main` pinned for the
/// worker.
pub(crate) fn torch_facts() -> TorchFacts {
    TorchFacts {
        libtorch: Some(prov_exec::aten::LIBTORCH_VERSION.to_owned()),
        aten_cpu_capability: env_vars::get(env_vars::ATEN_CPU_CAPABILITY),
        mkl_cbwr: env_vars::get(env_vars::MKL_CBWR),
        onednn_max_cpu_isa: env_vars::get(env_vars::ONEDNN_MAX_CPU_ISA),
    }
}

/// Decides the `ATen` CPU capability and pins it in this process's environment, which every
/// worker it starts inherits before libtorch loads: the user's `ATEN_CPU_CAPABILITY` if this
/// CPU can run it, else the portable default. Pinning it explicitly makes the envelope record
/// what libtorch really uses (the worker refuses to compute under another). MKL's branch
/// (`COMPATIBLE`, the same on every x86 CPU) and oneDNN's instruction set (the capability's)
/// are pinned with it, unless the user set them.
pub(crate) fn pin_aten_capability() -> Result<(), CommandError> {
    let flags = prov_exec::capture_envelope(1, &TorchFacts::default()).cpu_flags;
    let requested = env_vars::get(env_vars::ATEN_CPU_CAPABILITY);
    let capability = prov_exec::aten::resolve_capability(requested.as_deref(), &flags).map_err(|e| {
        CommandError::input(e.to_string()).with_hint(format!(
            "unset {} to use the best this CPU runs, or set one of {}",
            env_vars::ATEN_CPU_CAPABILITY,
            prov_exec::aten::CAPABILITIES.join(", ")
        ))
    })?;
    // SAFETY: called first thing in `main`, before any thread is spawned.
    #[allow(unsafe_code)]
    unsafe {
        prov_exec::aten::pin_capability(capability);
        prov_exec::aten::pin_math_libraries(capability);
        prov_exec::aten::pin_cuda_workspace();
    }
    Ok(())
}

/// Returns every stage kind this build knows.
pub(crate) fn registry() -> Registry {
    let mut r = Registry::with_builtins();
    prov_prep::register(&mut r);
    prov_robots::register(&mut r);
    prov_pii::register(&mut r);
    prov_dedup::register(&mut r);
    prov_heuristics::register(&mut r);
    prov_terms::register(&mut r);
    prov_code::register(&mut r);
    prov_palette::register(&mut r);
    prov_ngram::register(&mut r);
    prov_langid::register(&mut r);
    prov_quality::register(&mut r);
    prov_parallel::register(&mut r);
    prov_toxicity::register(&mut r);
    prov_tokenizer::register(&mut r);
    prov_train::register(&mut r);
    prov_reward::register(&mut r);
    r
}
