//! Running a run's stages on a Slurm cluster: `prov run --executor slurm`.
//!
//! The coordinating `prov` process stays where the user started it (a login node, or a job of
//! its own) and is the only one that opens the store's `SQLite` index. Each stage that is not a
//! source becomes Slurm jobs through [`SlurmDispatcher`], an implementation of `prov-exec`'s
//! [`Dispatcher`]:
//!
//! - a stage with map tasks (one per input shard: the filters) is one or more job arrays, cut
//!   under the cluster's `MaxArraySize` ([`arrays`]) with an optional throttle (`%N`); any
//!   other stage (training, dedup) is one job with the run's thread count as its CPUs;
//! - each task runs `prov task run` on a node: it opens the store detached, writes objects by
//!   atomic rename and leaves one result file ([`prov_exec::tasks`]);
//! - the coordinator watches the jobs with `squeue` (by job name, `prov-<stage key>`) and the
//!   result files: a task that left the queue without a result (cancelled, its node lost, out
//!   of time) is submitted again, up to `retries` times, and why it ended is kept from
//!   `scontrol show job` in `failures.jsonl` for `prov status`. Jobs are submitted with
//!   `--requeue`, so that Slurm itself requeues a task whose node fails.
//!
//! A stage's key depends on its inputs' digests, which are known only once the stage before it
//! is recorded; so the coordinator submits a stage when the one before it is done rather than
//! chaining them with `--dependency=afterok` up front, and a cancelled task never leaves a
//! dependent job pending for ever (`DependencyNeverSatisfied`). Every job of a stage records
//! its id in the stage's `jobs.jsonl`: a coordinator that was killed and started again waits
//! for the tasks still queued or running instead of submitting them twice.
//!
//! Partition, account, time limit, memory and any other `sbatch` options come from the
//! project's `slurm.yaml` ([`SlurmConfig`]) or the command line, never from the lockfile: they
//! enter no stage key and no record. The envelope a run records is the compute nodes' (probed
//! with `srun prov task envelope`), and every task of a stage whose class keys on the envelope
//! refuses to compute on a node whose envelope differs.

pub mod arrays;
mod config;
mod queue;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use prov_exec::{DispatchError, Dispatcher, Task, TaskDir};
use prov_manifest::Envelope;
use serde::{Deserialize, Serialize};

pub use config::{CONFIG_FILE, SlurmConfig};
pub use queue::{QueuedTask, StageJobs, stage_jobs};

/// What went wrong talking to Slurm, or reading its configuration.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    /// A Slurm command could not be started.
    #[error("cannot run `{command}`: {error}")]
    Spawn {
        /// The command.
        command: String,
        /// Why.
        error: std::io::Error,
    },
    /// A Slurm command failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// How it ended.
        status: String,
        /// What it printed on standard error.
        stderr: String,
    },
    /// A Slurm command printed what it should not.
    #[error("`{command}` printed {found:?}, expected {expected}")]
    Unexpected {
        /// The command.
        command: String,
        /// What it printed.
        found: String,
        /// What was expected.
        expected: &'static str,
    },
    /// The project's `slurm.yaml` is not valid.
    #[error("{}{}: {message}", path.display(), if *line > 0 { format!(":{line}") } else { String::new() })]
    Config {
        /// The file.
        path: PathBuf,
        /// Line, 1-based (0 when unknown).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A file under the store's `tasks/` could not be written or read.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl SlurmError {
    /// What to do about it.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::Spawn { .. } => Some(
                "the Slurm client commands (sbatch, squeue, scontrol, srun) must be on PATH, with SLURM_CONF naming \
                 the cluster's slurm.conf where it is not the default"
                    .to_owned(),
            ),
            Self::Config { .. } => {
                Some(format!("`{CONFIG_FILE}` takes the fields the book's \"Running on Slurm\" lists"))
            }
            _ => None,
        }
    }
}

impl From<SlurmError> for DispatchError {
    fn from(e: SlurmError) -> Self {
        Self { hint: e.hint(), message: e.to_string() }
    }
}

/// Runs a Slurm client command and returns its standard output.
pub(crate) fn slurm(program: &str, args: &[String]) -> Result<String, SlurmError> {
    let command = std::iter::once(program.to_owned()).chain(args.iter().cloned()).collect::<Vec<_>>().join(" ");
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|error| SlurmError::Spawn { command: command.clone(), error })?;
    if !out.status.success() {
        return Err(SlurmError::Failed {
            command,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One submission of tasks, as `jobs.jsonl` keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submission {
    /// The Slurm job id (of the array, for an array).
    pub job: String,
    /// `None` for the one job of a stage without map tasks; else the base task index.
    pub base: Option<usize>,
    /// The map tasks, by index.
    pub tasks: Vec<usize>,
}

impl Submission {
    /// The task of array element `index` (`None`: the job is not an array).
    fn task(&self, index: Option<usize>) -> Option<Task> {
        match (self.base, index) {
            (None, None) => Some(Task::Whole),
            (Some(base), Some(i)) if self.tasks.contains(&(base + i)) => Some(Task::Map(base + i)),
            _ => None,
        }
    }
}

/// Why a task ended without a result, as `failures.jsonl` keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    /// The task (`map task 3`).
    pub task: String,
    /// Its Slurm job id (`123_3`).
    pub job: String,
    /// Its final state (`CANCELLED`, `NODE_FAIL`, `TIMEOUT`), when Slurm still knew it.
    pub state: Option<String>,
    /// Slurm's reason.
    pub reason: Option<String>,
    /// The node it ran on.
    pub node: Option<String>,
    /// Whether it is submitted again.
    pub retried: bool,
}

/// The Slurm job name of a stage's jobs: `squeue --name` finds them by it.
pub fn job_name(key: &prov_store::Digest) -> String {
    format!("prov-{}", &key.to_hex()[..16])
}

/// Runs stages' tasks as Slurm jobs.
pub struct SlurmDispatcher {
    config: SlurmConfig,
    prov: PathBuf,
    cpus: usize,
    max_array_size: usize,
}

impl SlurmDispatcher {
    /// Connects to the cluster (`scontrol show config`: it answers, and says its
    /// `MaxArraySize`) for tasks that run `prov` (an executable every node can run at this
    /// path) with `cpus` threads.
    pub fn connect(config: SlurmConfig, prov: PathBuf, cpus: usize) -> Result<Self, SlurmError> {
        config.check(&format!("{CONFIG_FILE} or the command line"))?;
        let shown = slurm("scontrol", &["show".into(), "config".into()])?;
        let cluster_max = shown
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == "MaxArraySize").then(|| v.trim().parse::<usize>().ok()).flatten()
            })
            .unwrap_or(1001);
        let max_array_size = config.max_array_size.map_or(cluster_max, |m| m.min(cluster_max)).max(1);
        Ok(Self { config, prov, cpus: cpus.max(1), max_array_size })
    }

    /// The array size chunks stay under.
    pub fn max_array_size(&self) -> usize {
        self.max_array_size
    }

    /// The envelope of a compute node, for `threads` threads: `prov task envelope` run there
    /// with `srun`, with the partition and account the tasks get.
    pub fn probe_envelope(&self) -> Result<Envelope, SlurmError> {
        let mut args = vec!["--nodes=1".to_owned(), "--ntasks=1".to_owned(), format!("--cpus-per-task={}", self.cpus)];
        // Only where the job runs: the extra arguments are `sbatch`'s, which `srun` may not take.
        args.extend(self.config.placement_args(false));
        args.push("--job-name=prov-envelope".into());
        args.push(self.prov.display().to_string());
        args.extend(["task".into(), "envelope".into(), "--threads".into(), self.cpus.to_string()]);
        let out = slurm("srun", &args)?;
        serde_json::from_str(out.trim()).map_err(|_| SlurmError::Unexpected {
            command: "srun prov task envelope".into(),
            found: out.chars().take(200).collect(),
            expected: "an envelope as JSON",
        })
    }

    fn script(&self, dir: &TaskDir) -> Result<PathBuf, SlurmError> {
        let path = dir.path().join("task.sh");
        let quote = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', r"'\''"));
        let text = format!(
            "#!/bin/sh\n# Written by prov: runs one task of this stage on a Slurm node.\nexec {} task run {} \"$@\"\n",
            quote(&self.prov),
            quote(dir.path())
        );
        prov_store::write_atomically(&dir.path().join("tmp"), &path, text.as_bytes())
            .map_err(|e| SlurmError::Io(std::io::Error::other(e.to_string())))?;
        Ok(path)
    }

    /// Submits `tasks`: map tasks as arrays, the whole stage as one job. Returns the
    /// submissions, each already appended to `jobs.jsonl`.
    fn submit(&self, dir: &TaskDir, tasks: &BTreeSet<Task>) -> Result<Vec<Submission>, SlurmError> {
        let script = self.script(dir)?;
        let name = job_name(&dir.key());
        let logs = dir.logs();
        let mut base_args = vec![
            "--parsable".to_owned(),
            format!("--job-name={name}"),
            "--ntasks=1".to_owned(),
            "--requeue".to_owned(),
            "--open-mode=append".to_owned(),
        ];
        base_args.extend(self.config.placement_args(true));
        let mut out = Vec::new();
        // Each submission is written down as soon as Slurm accepts it, and carries its base in
        // its comment: a coordinator killed at any point leaves no job it cannot account for.
        let record = |s: Submission, out: &mut Vec<Submission>| -> Result<(), SlurmError> {
            append_line(&dir.path().join("jobs.jsonl"), &serde_json::to_string(&s).expect("a submission encodes"))?;
            out.push(s);
            Ok(())
        };
        if tasks.contains(&Task::Whole) {
            // The whole stage computes with the run's threads.
            let mut args = base_args.clone();
            args.push(format!("--cpus-per-task={}", self.cpus));
            args.push(format!("--comment={}", queue::WHOLE_COMMENT));
            args.push(format!("--output={}", logs.join("%j.out").display()));
            args.push(script.display().to_string());
            args.push("--whole".into());
            let job = parse_job_id(&slurm("sbatch", &args)?)?;
            record(Submission { job, base: None, tasks: Vec::new() }, &mut out)?;
        }
        let maps: Vec<usize> =
            tasks.iter().filter_map(|t| if let Task::Map(i) = t { Some(*i) } else { None }).collect();
        for chunk in arrays::chunks(&maps, self.max_array_size) {
            // A map task reads and writes one shard on one thread: one CPU, as datatrove's
            // tasks default to, so that a node runs as many tasks at once as it has CPUs.
            let mut args = base_args.clone();
            args.push("--cpus-per-task=1".to_owned());
            args.push(format!("--array={}", chunk.array_spec(self.config.throttle)));
            args.push(format!("--comment={}{}", queue::BASE_COMMENT, chunk.base));
            args.push(format!("--output={}", logs.join("%A_%a.out").display()));
            args.push(script.display().to_string());
            args.extend(["--base".into(), chunk.base.to_string()]);
            let job = parse_job_id(&slurm("sbatch", &args)?)?;
            record(Submission { job, base: Some(chunk.base), tasks: chunk.tasks().collect() }, &mut out)?;
        }
        Ok(out)
    }
}

/// `sbatch --parsable` prints `JOBID` or `JOBID;CLUSTER`.
fn parse_job_id(printed: &str) -> Result<String, SlurmError> {
    let id = printed.trim().split(';').next().unwrap_or_default().to_owned();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SlurmError::Unexpected {
            command: "sbatch --parsable".into(),
            found: printed.into(),
            expected: "a job id",
        });
    }
    Ok(id)
}

fn append_line(path: &Path, line: &str) -> Result<(), SlurmError> {
    use std::io::Write as _;
    let mut f = fs_err::OpenOptions::new().create(true).append(true).open(path)?;
    writeln!(f, "{line}")?;
    f.sync_all()?;
    Ok(())
}

/// Reads `jobs.jsonl`.
pub(crate) fn submissions(dir: &TaskDir) -> Vec<Submission> {
    read_lines(&dir.path().join("jobs.jsonl"))
}

/// The JSON lines of an append-only file of the task directory; a missing file is empty, and
/// a line that does not parse (a write cut short) is skipped.
pub(crate) fn read_lines<T: serde::de::DeserializeOwned>(path: &Path) -> Vec<T> {
    fs_err::read_to_string(path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Slurm's reasons for a pending job that will never start by itself.
const HOPELESS: [&str; 7] = [
    "BadConstraints",
    "PartitionConfig",
    "PartitionNodeLimit",
    "InvalidAccount",
    "InvalidQOS",
    "DependencyNeverSatisfied",
    "AssocMaxJobsLimit",
];

impl Dispatcher for SlurmDispatcher {
    fn finished(&self, key: &prov_store::Digest) {
        // The stage is recorded: a job of it still queued (a duplicate from a coordinator
        // that was killed, or a requeued task whose result came first) has nothing to do.
        let _ = slurm("scancel", &[format!("--name={}", job_name(key))]);
    }

    fn dispatch(&self, dir: &TaskDir, _stage: &str, tasks: &[Task]) -> Result<(), DispatchError> {
        let name = job_name(&dir.key());
        let mut known = submissions(dir);
        let mut outstanding: BTreeSet<Task> = tasks.iter().copied().collect();
        let mut runs: BTreeMap<Task, u32> = BTreeMap::new();
        let poll = Duration::from_secs_f64(self.config.poll_seconds.unwrap_or(1.0).max(0.05));
        let allowed_reruns = self.config.retries.unwrap_or(2);
        // Tasks a coordinator before this one submitted and that are still queued or running
        // are waited for, not submitted twice.
        let queued = queue::tasks_in_queue(&name, &known)?;
        let to_submit: BTreeSet<Task> =
            outstanding.iter().filter(|t| !queued.contains_key(t) && !dir.result_path(**t).exists()).copied().collect();
        for t in &to_submit {
            *runs.entry(*t).or_default() += 1;
        }
        if !to_submit.is_empty() {
            known.extend(self.submit(dir, &to_submit)?);
        }
        loop {
            let queued = queue::tasks_in_queue(&name, &known)?;
            outstanding.retain(|t| !dir.result_path(*t).exists());
            if outstanding.is_empty() {
                return Ok(());
            }
            if let Some((task, q)) = queued.iter().find(|(t, q)| {
                outstanding.contains(t) && q.state == "PENDING" && HOPELESS.iter().any(|r| q.reason.contains(r))
            }) {
                // The whole job: every element of an array waits on the same reason.
                let job = q.job.split('_').next().unwrap_or(&q.job).to_owned();
                let _ = slurm("scancel", &[job]);
                return Err(DispatchError {
                    message: format!("{task} cannot start: Slurm says `{}`", q.reason),
                    hint: Some(format!(
                        "check the partition, account and limits in `{CONFIG_FILE}` or on the command line"
                    )),
                });
            }
            let lost: BTreeSet<Task> = outstanding
                .iter()
                .filter(|t| !queued.contains_key(t) && !dir.result_path(**t).exists())
                .copied()
                .collect();
            let mut again = BTreeSet::new();
            for task in lost {
                let job = queue::job_of(&known, task).unwrap_or_default();
                let mut failure = queue::why_ended(&job);
                // Not in this stage's queue listing, yet Slurm says it is queued or running
                // (a listing taken as it changed): it is not lost.
                if failure.state.as_deref().is_some_and(queue::is_live) {
                    continue;
                }
                let n = runs.entry(task).or_default();
                let retried = *n <= allowed_reruns;
                failure.task = task.to_string();
                failure.retried = retried;
                let line = serde_json::to_string(&failure).expect("a failure encodes");
                append_line(&dir.path().join("failures.jsonl"), &line)?;
                if !retried {
                    return Err(DispatchError {
                        message: format!(
                            "{task} ended without a result {} time(s), the last as job {job}{}",
                            *n,
                            failure
                                .state
                                .map(|s| format!(
                                    " ({s}{})",
                                    failure.reason.map(|r| format!(", {r}")).unwrap_or_default()
                                ))
                                .unwrap_or_default()
                        ),
                        hint: Some(format!(
                            "its output is under `{}`; `prov run` again resumes with the tasks that have no result",
                            dir.logs().display()
                        )),
                    });
                }
                *n += 1;
                again.insert(task);
            }
            if !again.is_empty() {
                known.extend(self.submit(dir, &again)?);
            }
            std::thread::sleep(poll);
        }
    }
}
