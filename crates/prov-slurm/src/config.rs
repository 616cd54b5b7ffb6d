//! The Slurm options of a project: its `slurm.yaml`, then the command line.

use std::path::Path;

use serde::Deserialize;

use crate::SlurmError;

/// The file at the project root that holds the Slurm options.
pub const CONFIG_FILE: &str = "slurm.yaml";

/// Where and how tasks are submitted. None of it enters a stage key or a record: a run on
/// another partition, or with another time limit, is the same run.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmConfig {
    /// `--partition`.
    pub partition: Option<String>,
    /// `--account`.
    pub account: Option<String>,
    /// `--time`, as Slurm writes it (`1:00:00`).
    pub time: Option<String>,
    /// `--mem`, as Slurm writes it (`4G`).
    pub mem: Option<String>,
    /// Any other `sbatch` and `srun` options, each a whole argument (`--qos=high`).
    #[serde(default)]
    pub sbatch_args: Vec<String>,
    /// How many times a task that ended without a result is submitted again (default 2).
    pub retries: Option<u32>,
    /// At most this many tasks of one array run at once (`--array=…%N`).
    pub throttle: Option<usize>,
    /// Arrays stay under this size even where the cluster's `MaxArraySize` is larger.
    pub max_array_size: Option<usize>,
    /// How often the queue is looked at, in seconds (default 1).
    pub poll_seconds: Option<f64>,
}

impl SlurmConfig {
    /// Reads `slurm.yaml` in `root`; a project without one has the defaults.
    pub fn load(root: &Path) -> Result<Self, SlurmError> {
        let path = root.join(CONFIG_FILE);
        let text = match fs_err::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(e.into()),
        };
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        serde_yaml::from_str(&text).map_err(|e| SlurmError::Config {
            line: e.location().map_or(0, |l| l.line()),
            message: e.to_string(),
            path,
        })
    }

    /// This configuration with every option `over` sets taking precedence (the command line
    /// over the file); extra arguments are added after the file's.
    #[must_use]
    pub fn overridden_by(self, over: Self) -> Self {
        let mut sbatch_args = self.sbatch_args;
        sbatch_args.extend(over.sbatch_args);
        Self {
            partition: over.partition.or(self.partition),
            account: over.account.or(self.account),
            time: over.time.or(self.time),
            mem: over.mem.or(self.mem),
            sbatch_args,
            retries: over.retries.or(self.retries),
            throttle: over.throttle.or(self.throttle),
            max_array_size: over.max_array_size.or(self.max_array_size),
            poll_seconds: over.poll_seconds.or(self.poll_seconds),
        }
    }

    /// Refuses what would break the executor: an `sbatch` option it sets itself (its jobs are
    /// found by name and comment, their output goes to the task directory, they are arrays
    /// it cuts, they must requeue and never wait on a dependency or a hold), and numbers out
    /// of range. `origin` names where the options came from.
    pub fn check(&self, origin: &str) -> Result<(), SlurmError> {
        const OWNED: [&str; 22] = [
            "--job-name",
            "-J",
            "--array",
            "-a",
            "--output",
            "-o",
            "--error",
            "-e",
            "--comment",
            "--parsable",
            "--wrap",
            "--open-mode",
            "--requeue",
            "--no-requeue",
            "--cpus-per-task",
            "-c",
            "--ntasks",
            "-n",
            "--dependency",
            "-d",
            "--hold",
            "-H",
        ];
        let bad = |message: String| SlurmError::Config { path: origin.into(), line: 0, message };
        for arg in &self.sbatch_args {
            let flag = arg.split('=').next().unwrap_or(arg);
            let short = OWNED.iter().any(|o| o.len() == 2 && arg.starts_with(o));
            if OWNED.contains(&flag) || short {
                return Err(bad(format!("`{arg}`: the Slurm executor sets `{flag}` itself")));
            }
        }
        if let Some(p) = self.poll_seconds
            && !(0.05..=3600.0).contains(&p)
        {
            return Err(bad(format!("poll_seconds: {p} is not between 0.05 and 3600")));
        }
        if self.throttle == Some(0) || self.max_array_size == Some(0) {
            return Err(bad("throttle and max_array_size must be at least 1".into()));
        }
        Ok(())
    }

    /// The options that say where a job runs (with the extra `sbatch` arguments when
    /// `extra`: `srun` may not take them all).
    pub(crate) fn placement_args(&self, extra: bool) -> Vec<String> {
        let mut args = Vec::new();
        let mut opt = |flag: &str, v: &Option<String>| {
            if let Some(v) = v {
                args.push(format!("--{flag}={v}"));
            }
        };
        opt("partition", &self.partition);
        opt("account", &self.account);
        opt("time", &self.time);
        opt("mem", &self.mem);
        if extra {
            args.extend(self.sbatch_args.iter().cloned());
        }
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_wins_and_a_misspelt_field_is_located() {
        let dir = std::env::temp_dir().join(format!("prov-slurm-config-{}", std::process::id()));
        fs_err::create_dir_all(&dir).unwrap();
        fs_err::write(dir.join(CONFIG_FILE), "partition: debug\ntime: '1:00:00'\nsbatch_args: [--qos=low]\n").unwrap();
        let file = SlurmConfig::load(&dir).unwrap();
        let over = SlurmConfig {
            partition: Some("gpu".into()),
            sbatch_args: vec!["--exclusive".into()],
            ..Default::default()
        };
        let merged = file.overridden_by(over);
        assert_eq!(
            merged.placement_args(true),
            ["--partition=gpu", "--time=1:00:00", "--qos=low", "--exclusive"].map(str::to_owned)
        );
        fs_err::write(dir.join(CONFIG_FILE), "partition: debug\n\nthrotle: 4\n").unwrap();
        let SlurmError::Config { line, message, .. } = SlurmConfig::load(&dir).unwrap_err() else { panic!() };
        assert_eq!(line, 3, "{message}");
        assert!(message.contains("throtle"), "{message}");
        fs_err::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn options_the_executor_sets_and_numbers_out_of_range_are_refused() {
        for args in
            [vec!["--job-name=mine"], vec!["-Jmine"], vec!["--output=x"], vec!["--dependency=afterok:1"], vec!["-H"]]
        {
            let c = SlurmConfig { sbatch_args: args.iter().map(|s| (*s).to_owned()).collect(), ..Default::default() };
            let e = c.check("--sbatch-arg").unwrap_err();
            assert!(e.to_string().contains("sets"), "{e}");
        }
        let ok = SlurmConfig { sbatch_args: vec!["--qos=high".into(), "--exclusive".into()], ..Default::default() };
        ok.check("slurm.yaml").unwrap();
        for c in [
            SlurmConfig { poll_seconds: Some(f64::INFINITY), ..Default::default() },
            SlurmConfig { poll_seconds: Some(0.0), ..Default::default() },
            SlurmConfig { throttle: Some(0), ..Default::default() },
        ] {
            assert!(c.check("slurm.yaml").is_err(), "{c:?}");
        }
    }
}
