//! What Slurm says of a stage's jobs: `squeue` for those queued or running, `scontrol show job`
//! for why one ended.

use std::collections::BTreeMap;
use std::path::Path;

use prov_exec::{Task, TaskDir, TaskResult};

use crate::{Failure, SlurmError, Submission, slurm, submissions};

/// The comment of a stage's one job (a stage without map tasks).
pub(crate) const WHOLE_COMMENT: &str = "prov:whole";
/// The comment of a map task array: this, then the base task index.
pub(crate) const BASE_COMMENT: &str = "prov:base=";

/// Whether a Slurm job state is one of a job still queued or running.
pub(crate) fn is_live(state: &str) -> bool {
    matches!(
        state,
        "PENDING"
            | "RUNNING"
            | "CONFIGURING"
            | "COMPLETING"
            | "REQUEUED"
            | "REQUEUE_HOLD"
            | "REQUEUE_FED"
            | "SUSPENDED"
            | "RESIZING"
            | "STAGE_OUT"
            | "SIGNALING"
    )
}

/// A task in the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedTask {
    /// Its job id as Slurm writes it (`123_4` for an array element).
    pub job: String,
    /// `PENDING`, `RUNNING`, `COMPLETING`, …
    pub state: String,
    /// The node it runs on, when running.
    pub node: String,
    /// Why it is pending.
    pub reason: String,
    /// Its comment: which tasks it runs ([`WHOLE_COMMENT`], [`BASE_COMMENT`]).
    pub comment: String,
}

/// Parses `squeue -r -o '%i|%T|%N|%r'` lines into (job id, array index) and the rest.
fn parse_squeue(printed: &str) -> Vec<(String, Option<usize>, QueuedTask)> {
    let mut out = Vec::new();
    for line in printed.lines() {
        let mut fields = line.split('|');
        let (Some(id), Some(state)) = (fields.next(), fields.next()) else { continue };
        let node = fields.next().unwrap_or_default().trim().to_owned();
        let reason = fields.next().unwrap_or_default().trim().to_owned();
        let comment = fields.next().unwrap_or_default().trim().to_owned();
        let id = id.trim();
        let q = |job: String| QueuedTask {
            job,
            state: state.trim().to_owned(),
            node: node.clone(),
            reason: reason.clone(),
            comment: comment.clone(),
        };
        match id.split_once('_') {
            None => out.push((id.to_owned(), None, q(id.to_owned()))),
            Some((job, element)) => {
                // `123_[5-7%2]`: elements not yet expanded (older squeue): each of them.
                let element = element.trim_start_matches('[').trim_end_matches(']');
                let element = element.split('%').next().unwrap_or_default();
                for part in element.split(',') {
                    let bounds = part.split_once('-').map_or((part, part), |(a, b)| (a, b));
                    if let (Ok(a), Ok(b)) = (bounds.0.parse::<usize>(), bounds.1.parse::<usize>()) {
                        for i in a..=b {
                            out.push((job.to_owned(), Some(i), q(format!("{job}_{i}"))));
                        }
                    }
                }
            }
        }
    }
    out
}

/// The tasks of a stage (jobs named `name`) that are queued or running, by task: known from
/// the submissions written down, or from a job's comment (a job submitted by a coordinator
/// killed before it could write it down). `squeue` is asked again a few times when it fails
/// (a controller busy or restarting), before the failure is the run's.
pub(crate) fn tasks_in_queue(name: &str, known: &[Submission]) -> Result<BTreeMap<Task, QueuedTask>, SlurmError> {
    let args = ["-h".into(), "-r".into(), format!("--name={name}"), "-o".into(), "%i|%T|%N|%r|%k".into()];
    let mut attempt = 0;
    let printed = loop {
        match slurm("squeue", &args) {
            Ok(p) => break p,
            Err(e @ SlurmError::Spawn { .. }) => return Err(e),
            Err(e) if attempt >= 4 => return Err(e),
            Err(_) => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(500 << attempt));
            }
        }
    };
    let mut out = BTreeMap::new();
    for (job, index, queued) in parse_squeue(&printed) {
        let by_comment = match (queued.comment.as_str(), index) {
            (WHOLE_COMMENT, None) => Some(Task::Whole),
            (c, Some(i)) => {
                c.strip_prefix(BASE_COMMENT).and_then(|b| b.parse::<usize>().ok()).map(|b| Task::Map(b + i))
            }
            _ => None,
        };
        let task = known.iter().filter(|s| s.job == job).find_map(|s| s.task(index)).or(by_comment);
        if let Some(task) = task {
            out.insert(task, queued);
        }
    }
    Ok(out)
}

/// The Slurm job id of a task's latest submission (`123_4`, or `123`).
pub(crate) fn job_of(known: &[Submission], task: Task) -> Option<String> {
    known.iter().rev().find_map(|s| match (task, s.base) {
        (Task::Whole, None) => Some(s.job.clone()),
        (Task::Map(i), Some(base)) if s.tasks.contains(&i) => Some(format!("{}_{}", s.job, i - base)),
        _ => None,
    })
}

/// Why a job ended, from `scontrol show job` while Slurm still remembers it.
pub(crate) fn why_ended(job: &str) -> Failure {
    let mut failure =
        Failure { task: String::new(), job: job.to_owned(), state: None, reason: None, node: None, retried: false };
    if job.is_empty() {
        return failure;
    }
    if let Ok(shown) = slurm("scontrol", &["-o".into(), "show".into(), "job".into(), job.to_owned()]) {
        for field in shown.split_whitespace() {
            match field.split_once('=') {
                Some(("JobState", v)) => failure.state = Some(v.to_owned()),
                Some(("Reason", v)) if v != "None" => failure.reason = Some(v.to_owned()),
                Some(("NodeList", v)) if v != "(null)" => failure.node = Some(v.to_owned()),
                _ => {}
            }
        }
    }
    failure
}

/// A stage whose tasks are in the store, as `prov status` shows it.
#[derive(Debug, Clone)]
pub struct StageJobs {
    /// The task directory.
    pub dir: TaskDir,
    /// Stage name, from the spec.
    pub stage: Option<String>,
    /// Tasks in all.
    pub tasks: usize,
    /// Tasks with a result.
    pub done: usize,
    /// Tasks whose result is a failure.
    pub failed: usize,
    /// Jobs submitted.
    pub submissions: Vec<Submission>,
    /// Tasks queued or running now (empty when `squeue` cannot be asked).
    pub queued: BTreeMap<Task, QueuedTask>,
    /// Whether `squeue` answered.
    pub queue_known: bool,
    /// Tasks that ended without a result, and why.
    pub failures: Vec<Failure>,
}

/// Every stage of the store at `store_root` that has tasks in flight or left behind, with what
/// Slurm says of their jobs.
pub fn stage_jobs(store_root: &Path) -> Result<Vec<StageJobs>, SlurmError> {
    let dirs = TaskDir::all(store_root).map_err(|e| SlurmError::Io(std::io::Error::other(e.to_string())))?;
    let mut out = Vec::new();
    for dir in dirs {
        let spec = dir.read_spec().ok();
        let tasks = spec.as_ref().map_or_else(Vec::new, prov_exec::TaskSpec::tasks);
        let results: Vec<Option<TaskResult>> = tasks.iter().map(|t| dir.read_result(*t).ok().flatten()).collect();
        let known = submissions(&dir);
        let queued = tasks_in_queue(&crate::job_name(&dir.key()), &known);
        let failures = crate::read_lines(&dir.path().join("failures.jsonl"));
        out.push(StageJobs {
            stage: spec.map(|s| s.stage.stage),
            tasks: tasks.len(),
            done: results
                .iter()
                .filter(|r| matches!(r, Some(TaskResult::Map { .. } | TaskResult::Whole { .. })))
                .count(),
            failed: results.iter().filter(|r| matches!(r, Some(TaskResult::Failed { .. }))).count(),
            submissions: known,
            queue_known: queued.is_ok(),
            queued: queued.unwrap_or_default(),
            failures,
            dir,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_lines_become_tasks() {
        let printed = "41_3|RUNNING|n2|None|prov:base=10\n41_[5-6%2]|PENDING||JobArrayTaskLimit|prov:base=10\n42|PENDING||Resources|prov:whole\n";
        let parsed = parse_squeue(printed);
        let ids: Vec<(String, Option<usize>)> = parsed.iter().map(|(j, i, _)| (j.clone(), *i)).collect();
        assert_eq!(ids, [("41".into(), Some(3)), ("41".into(), Some(5)), ("41".into(), Some(6)), ("42".into(), None)]);
        assert_eq!(parsed[0].2.node, "n2");
        assert_eq!(parsed[1].2.job, "41_5");
        assert_eq!(parsed[3].2.comment, WHOLE_COMMENT);
        let known = [Submission { job: "41".into(), base: Some(10), tasks: vec![13, 15, 16] }];
        assert_eq!(known[0].task(Some(3)), Some(Task::Map(13)));
        assert_eq!(known[0].task(Some(4)), None, "an element that is not ours");
        assert_eq!(job_of(&known, Task::Map(16)).as_deref(), Some("41_6"));
    }
}
