//! The deterministic executor of Provenant.
//!
//! `prov-exec` owns how a pipeline runs: the [`Stage`] trait that stage kinds implement, the
//! [`Registry`] of kinds, locking a recipe into a lockfile ([`lock_recipe`]), planning (a
//! topological order with ties broken by name), stage keys ([`stage_key`]), the cache, running
//! ([`run`]) and replaying ([`replay`]) with divergence reports, capturing the determinism
//! envelope ([`capture_envelope`]), whether a project's lockfiles still match their recipes
//! ([`lockfile_status`]), which commands the user adopted ([`consent`]), and the store-wide
//! checks that need to know what references what ([`check_store`], [`gc`]).
//!
//! It implements two kinds itself, `source` and `external`; data kinds live in the stage crates (`prov-prep`, `prov-robots`, …)
//! and are registered by the CLI. The executor never names them. Kinds whose computation
//! links libtorch run in the worker process ([`worker`]), so that `prov` never loads
//! libtorch; the `ATen` capability and libtorch version of the envelope are decided here
//! without it ([`aten`]).
//!
//! # Example
//!
//! ```no_run
//! use prov_exec::{ExecOptions, Registry, Silent, TorchFacts, capture_envelope, lock_recipe, run};
//! use std::path::Path;
//! let store = prov_store::Store::init(Path::new(".prov"))?;
//! let registry = Registry::with_builtins();
//! let locked = lock_recipe(&registry, Path::new("recipes/quickstart.yaml"), Path::new("."))?;
//! let opts = ExecOptions {
//!     registry: &registry,
//!     threads: 2,
//!     envelope: capture_envelope(2, &TorchFacts::default()),
//!     project_root: Path::new("."),
//!     lockfile_display: "lockfiles/quickstart.lock",
//!     clock: &|| 0,
//!     observer: &Silent,
//!     worker: Path::new("target/debug/prov-worker"),
//!     dispatcher: None,
//! };
//! let report = run(&store, &locked.lockfile, &locked.bytes, &opts)?;
//! println!("run {}", report.run_id);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod aten;
mod boundary;
mod builtin;
mod check;
pub mod consent;
mod device;
mod dispatch;
mod envelope;
mod error;
mod key;
mod lock;
mod maintenance;
mod run;
mod sandbox;
mod stage;
mod staleness;
pub mod tasks;
pub mod testing;
mod tree;
mod work;
pub mod worker;

pub use tasks::{DispatchError, Dispatcher, Task, TaskCounts, TaskDir, TaskResult, TaskSpec, run_task};
pub use worker::{StageRun, TorchClaim, run_in_worker};

pub use boundary::adopt_closure;
pub use builtin::{ExternalConfig, ExternalStage, SourcePathError, SourceStage, confine_source};
pub use check::check_lockfile;
pub use device::{ComputeDevice, DeviceError};
pub use envelope::{TorchFacts, WORKBENCH_VERSION, capture as capture_envelope, key_envelope};
pub use error::ExecError;
pub use key::stage_key;
pub use lock::{Locked, absolute, lock_recipe, lock_text, lockfile_bytes, plan_order, relative_to};
pub use maintenance::{AffectedRun, Damage, GcError, GcReport, Problem, StoreCheck, check_store, gc};
pub use run::{
    Divergence, ExecOptions, Observer, ReplayRange, RunReport, Silent, StageReport, StageStatus, load_recorded_run,
    recorded_run, replay, run, verify_closure,
};
pub use stage::{
    ConfigError, InputSpec, Located, MAP_BATCH, MAX_THREADS, MapResultText, MapResults, Prepared, Registry, Scratch,
    Stage, StageContext, StageError, StageInput, StageOutput, check_threads, map_result_text, parse_params,
};
pub use staleness::{LockState, LockfileStatus, lockfile_status, project_lockfiles};
pub use tree::{TreeError, hash_file, tree_digest, tree_record};
pub use work::{WorkFile, WorkFileRef};
