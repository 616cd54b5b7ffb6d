//! `--executor local|slurm` and the Slurm options of `prov run` and `prov replay`: where
//! stages run. None of it enters a lockfile, a stage key or a record.

use prov_manifest::Envelope;
use prov_slurm::{SlurmConfig, SlurmDispatcher};

use crate::error::CommandError;

/// Where stages run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ExecutorKind {
    /// In this process.
    #[default]
    Local,
    /// As Slurm jobs, this process coordinating (see the book's "Running on Slurm").
    Slurm,
}

/// The options that say where a run's stages run.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ExecutorArgs {
    /// Where stages run: here, or as Slurm jobs (map tasks as job arrays) on nodes that share
    /// the store's file system; the outputs and records are the same either way
    #[arg(long, value_enum, default_value_t = ExecutorKind::Local)]
    executor: ExecutorKind,
    /// Slurm partition (overrides `partition` in the project's slurm.yaml)
    #[arg(long, value_name = "NAME")]
    partition: Option<String>,
    /// Slurm account
    #[arg(long, value_name = "NAME")]
    account: Option<String>,
    /// Slurm time limit of each task (`1:00:00`)
    #[arg(long, value_name = "TIME")]
    time: Option<String>,
    /// Slurm memory of each task (`4G`)
    #[arg(long, value_name = "SIZE")]
    mem: Option<String>,
    /// Another `sbatch` option, whole (`--sbatch-arg=--qos=high`); may be repeated
    #[arg(long = "sbatch-arg", value_name = "ARG", allow_hyphen_values = true)]
    sbatch_args: Vec<String>,
    /// How many times a task that ended without a result is submitted again (default 2)
    #[arg(long, value_name = "N")]
    retries: Option<u32>,
    /// At most N tasks of a stage's array run at once
    #[arg(long, value_name = "N")]
    throttle: Option<usize>,
}

impl ExecutorArgs {
    /// Whether a Slurm option was given with the local executor: a mistake worth saying.
    fn slurm_options_given(&self) -> bool {
        self.partition.is_some()
            || self.account.is_some()
            || self.time.is_some()
            || self.mem.is_some()
            || !self.sbatch_args.is_empty()
            || self.retries.is_some()
            || self.throttle.is_some()
    }

    /// The dispatcher and the envelope the run records, for `--executor slurm`; `None` for the
    /// local executor.
    pub(crate) fn dispatcher(
        &self,
        root: &std::path::Path,
        threads: usize,
    ) -> Result<Option<(SlurmDispatcher, Envelope)>, CommandError> {
        if self.executor == ExecutorKind::Local {
            if self.slurm_options_given() {
                return Err(CommandError::input("the Slurm options take effect only with `--executor slurm`"));
            }
            return Ok(None);
        }
        let file = SlurmConfig::load(root).map_err(|e| slurm_error(&e))?;
        let over = SlurmConfig {
            partition: self.partition.clone(),
            account: self.account.clone(),
            time: self.time.clone(),
            mem: self.mem.clone(),
            sbatch_args: self.sbatch_args.clone(),
            retries: self.retries,
            throttle: self.throttle,
            ..SlurmConfig::default()
        };
        let prov = std::env::current_exe().map_err(CommandError::from)?;
        let dispatcher =
            SlurmDispatcher::connect(file.overridden_by(over), prov, threads).map_err(|e| slurm_error(&e))?;
        let envelope = dispatcher.probe_envelope().map_err(|e| slurm_error(&e))?;
        Ok(Some((dispatcher, envelope)))
    }
}

pub(crate) fn slurm_error(e: &prov_slurm::SlurmError) -> CommandError {
    let hint = e.hint();
    let mut err = CommandError::input(e.to_string());
    if let Some(h) = hint {
        err = err.with_hint(h);
    }
    err
}
