//! `external`: runs a command with declared inputs and outputs, hashing what it produces.
//!
//! The command runs in a fresh directory under the store's `tmp/`, with its inputs copied
//! into `inputs/<name>` (a file, or a directory for trees and datasets), an environment
//! cleared down to a fixed set, inside a sandbox ([`crate::sandbox`]: read-only system
//! directories, only its scratch directory writable, no network unless the config says so,
//! its own PID namespace, time, memory and file-size limits), and must leave each declared
//! output at its declared path. Only lockfiles with `allow_commands: true` may run it.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use prov_manifest::{
    Content, DatasetRecord, Determinism, OutputRef, OutputType, Record, RelPath, TreeRecord, get_record, get_typed,
    put_record,
};
use prov_store::{Digest, ObjectKind, Store};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::stage::{ConfigError, InputSpec, Stage, StageContext, StageError, StageInput, StageOutput, parse_params};
use crate::tree::{TreeError, tree_record};

/// `PATH` given to commands unless the recipe sets one.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The resolved configuration of an `external` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalConfig {
    /// Program and arguments; the program is looked up on the command's `PATH`.
    pub command: Vec<String>,
    /// Output name -> path relative to the working directory; a trailing `/` declares a
    /// directory.
    pub outputs: BTreeMap<String, String>,
    /// Extra environment variables (they override the fixed ones).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Determinism class the recipe author claims for the command.
    #[serde(default = "default_determinism")]
    pub determinism: Determinism,
    /// Whether the command may use the network (default: no; it gets its own empty network
    /// namespace).
    #[serde(default)]
    pub network: bool,
    /// Wall-clock limit in seconds, after which the command and everything it started are
    /// killed and the stage fails.
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
    /// Address-space limit of the command (and of each process it starts), in MiB.
    #[serde(default = "default_memory")]
    pub memory_mib: u64,
    /// Largest file the command may write, in MiB: what it writes lands in the store's
    /// scratch space, which must not fill without bound.
    #[serde(default = "default_file_size")]
    pub max_file_mib: u64,
}

fn default_determinism() -> Determinism {
    Determinism::Portable
}

fn default_timeout() -> u64 {
    86_400
}

fn default_memory() -> u64 {
    16_384
}

fn default_file_size() -> u64 {
    16_384
}

impl ExternalConfig {
    fn output_paths(&self) -> Result<Vec<(String, RelPath, bool)>, ConfigError> {
        self.outputs
            .iter()
            .map(|(name, path)| {
                name.parse::<prov_manifest::Name>().map_err(|e| ConfigError::at(&["outputs", name], e.to_string()))?;
                let is_dir = path.ends_with('/');
                let rel: RelPath = path
                    .trim_end_matches('/')
                    .parse()
                    .map_err(|e: prov_manifest::NameError| ConfigError::at(&["outputs", name], e.to_string()))?;
                Ok((name.clone(), rel, is_dir))
            })
            .collect()
    }
}

/// Runs a declared command.
pub struct ExternalStage;

impl Stage for ExternalStage {
    fn kind(&self) -> &'static str {
        "external"
    }
    // 2: commands run in a bubblewrap sandbox with the limits of the config.
    fn version(&self) -> u32 {
        2
    }
    fn summary(&self) -> &'static str {
        "run a command with declared inputs and outputs in a sandbox (bubblewrap; needs allow_commands)"
    }
    fn resolve_config(&self, params: &Value) -> Result<Value, ConfigError> {
        let config: ExternalConfig = parse_params(params)?;
        if config.command.is_empty() || config.command[0].is_empty() {
            return Err(ConfigError::at(&["command"], "the command cannot be empty"));
        }
        if config.outputs.is_empty() {
            return Err(ConfigError::at(&["outputs"], "declare at least one output")
                .with_hint("outputs map a name to a path the command writes, e.g. `report: report.json`"));
        }
        config.output_paths()?;
        // What the operating system cannot pass is refused here, not when the command starts:
        // an environment name with `=` split into another variable, and a NUL ended a string.
        if let Some(i) = config.command.iter().position(|a| a.contains('\0')) {
            return Err(ConfigError::at(&["command"], format!("argument {i} holds a NUL character")));
        }
        for (name, value) in &config.env {
            if name.is_empty() || name.contains(['=', '\0']) {
                return Err(ConfigError::at(&["env"], format!("{name:?} is not an environment variable name"))
                    .with_hint("a name is not empty and holds no `=` or NUL"));
            }
            if value.contains('\0') {
                return Err(ConfigError::at(&["env", name.as_str()], "the value holds a NUL character"));
            }
        }
        for (field, value) in [
            ("timeout_seconds", config.timeout_seconds),
            ("memory_mib", config.memory_mib),
            ("max_file_mib", config.max_file_mib),
        ] {
            if value == 0 || value > 1 << 40 {
                return Err(ConfigError::at(&[field], format!("`{field}` must be between 1 and 2^40, got {value}")));
            }
        }
        Ok(serde_json::to_value(&config).expect("the config holds only strings and integers"))
    }
    fn determinism(&self, config: &Value) -> Determinism {
        config.get("determinism").and_then(|v| serde_json::from_value(v.clone()).ok()).unwrap_or(Determinism::Portable)
    }
    fn inputs(&self) -> InputSpec {
        InputSpec::Any
    }
    fn outputs(&self, config: &Value) -> Vec<(String, OutputType)> {
        let Ok(config) = serde_json::from_value::<ExternalConfig>(config.clone()) else {
            return vec![];
        };
        config
            .outputs
            .iter()
            .map(|(name, path)| (name.clone(), if path.ends_with('/') { OutputType::Tree } else { OutputType::File }))
            .collect()
    }
    fn seed_names(&self) -> &'static [&'static str] {
        &["command"]
    }
    fn runs_commands(&self) -> bool {
        true
    }

    fn run(&self, cx: &StageContext<'_>) -> Result<StageOutput, StageError> {
        if !cx.allow_commands {
            return Err(StageError::Config(ConfigError::at(&[], "this lockfile does not allow commands")));
        }
        let config: ExternalConfig = parse_params(cx.config).map_err(StageError::Config)?;
        let outputs = config.output_paths()?;
        let scratch = cx.scratch_dir()?;
        let work = scratch.join("work");
        fs_err::create_dir_all(work.join("inputs"))?;
        for (name, input) in cx.inputs {
            materialize(cx.store, input, &work.join("inputs").join(name))
                .map_err(|e| StageError::Input { input: name.clone(), message: e.to_string() })?;
        }
        let mut env: BTreeMap<String, String> = BTreeMap::from([
            ("PATH".into(), DEFAULT_PATH.into()),
            // The paths the command sees in its sandbox.
            ("HOME".into(), format!("{}/work", crate::sandbox::SCRATCH)),
            ("TMPDIR".into(), crate::sandbox::SCRATCH.into()),
            ("LC_ALL".into(), "C.UTF-8".into()),
            ("TZ".into(), "UTC".into()),
            ("SOURCE_DATE_EPOCH".into(), "0".into()),
            ("PYTHONHASHSEED".into(), "0".into()),
            ("PROV_SEED".into(), cx.seed("command")?.to_string()),
            ("PROV_THREADS".into(), cx.pool.current_num_threads().to_string()),
        ]);
        env.extend(config.env.clone());
        let command_line = config.command.join(" ");
        let status = run_sandboxed(&config, &scratch, &work, &env, &command_line)?;
        let mut out = StageOutput::default();
        for (name, rel, is_dir) in outputs {
            let path = work.join(rel.as_str());
            let missing = |what: &str| StageError::Command {
                command: command_line.clone(),
                status: format!("succeeded but did not write {what} `{rel}` declared as output `{name}`"),
                stderr: String::new(),
            };
            // A link would make the store take bytes from wherever it points.
            if fs_err::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(StageError::Command {
                    command: command_line.clone(),
                    status: format!("wrote its output `{name}` (`{rel}`) as a symbolic link, which is not followed"),
                    stderr: String::new(),
                });
            }
            let output = if is_dir {
                if !path.is_dir() {
                    return Err(missing("the directory"));
                }
                let store = cx.store;
                let tree = tree_record(&path, &mut |p| Ok(store.put_file(ObjectKind::Blob, p)?))
                    .map_err(|e| StageError::Input { input: name.clone(), message: e.to_string() })?;
                OutputRef { output_type: OutputType::Tree, digest: put_record(cx.store, &Record::Tree(tree))? }
            } else {
                if !path.is_file() {
                    return Err(missing("the file"));
                }
                OutputRef { output_type: OutputType::File, digest: cx.store.put_file(ObjectKind::Blob, &path)?.0 }
            };
            out.outputs.insert(name, output);
        }
        out.stats.insert("exit_code".into(), Value::from(status.code().unwrap_or(0)));
        out.stats.insert("sandbox".into(), Value::from(crate::sandbox::KIND));
        // The scratch directory held copies only; a failure above keeps it for debugging.
        let _ = fs_err::remove_dir_all(&scratch);
        Ok(out)
    }
}

/// Runs the command in its sandbox, its output in `scratch`'s `stdout.log` and `stderr.log`;
/// returns its exit status when it succeeded.
fn run_sandboxed(
    config: &ExternalConfig,
    scratch: &Path,
    work: &Path,
    env: &BTreeMap<String, String>,
    command_line: &str,
) -> Result<std::process::ExitStatus, StageError> {
    let failed =
        |status: String, stderr: String| StageError::Command { command: command_line.to_owned(), status, stderr };
    let stdout = fs_err::File::create(scratch.join("stdout.log"))?;
    let stderr = fs_err::File::create(scratch.join("stderr.log"))?;
    let program = resolve_program(&config.command[0], &env["PATH"]);
    // Never unconfined: if the sandbox cannot start, neither does the command.
    let limits = crate::sandbox::Limits {
        network: config.network,
        memory_mib: config.memory_mib,
        max_file_mib: config.max_file_mib,
    };
    let sandbox = crate::sandbox::Sandbox::new(&limits, scratch, work).map_err(StageError::Sandbox)?;
    let child = sandbox
        .command(&program, &config.command[1..])
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(stdout.into_parts().0)
        .stderr(stderr.into_parts().0)
        .spawn()
        .map_err(|e| failed(format!("could not start: {e}"), String::new()))?;
    let Some(status) = crate::sandbox::wait(child, config.timeout_seconds)? else {
        return Err(failed(
            format!(
                "was killed after {} s, its `timeout_seconds`, with every process it started",
                config.timeout_seconds
            ),
            String::new(),
        ));
    };
    if !status.success() {
        let err = fs_err::read_to_string(scratch.join("stderr.log")).unwrap_or_default();
        let tail: Vec<&str> = err.lines().rev().take(20).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(failed(format!("failed ({status})"), tail.join("\n")));
    }
    Ok(status)
}

fn resolve_program(program: &str, path: &str) -> std::path::PathBuf {
    if program.contains('/') {
        return program.into();
    }
    path.split(':').map(|dir| Path::new(dir).join(program)).find(|p| p.is_file()).unwrap_or_else(|| program.into())
}

/// Copies an input out of the store to `dest` (a file or a directory).
fn materialize(store: &Store, input: &StageInput, dest: &Path) -> Result<(), StageError> {
    match input.output_type {
        OutputType::File => copy_object(store, &input.digest, dest),
        OutputType::Tree => materialize_tree(store, &input.digest, dest),
        OutputType::Source => match get_record(store, &input.digest)? {
            Record::Source(s) => match s.content {
                Content::File { digest, .. } => copy_object(store, &digest, dest),
                Content::Tree { digest, .. } => materialize_tree(store, &digest, dest),
            },
            other => Err(not_a(other.kind_name(), "source")),
        },
        // Datasets and ledgers arrive as a directory of their Parquet shards.
        OutputType::Dataset | OutputType::Ledger => {
            let shards = match get_record(store, &input.digest)? {
                Record::Dataset(DatasetRecord { shards, .. }) => shards,
                Record::Ledger(_) => prov_dataset::read_ledger(store, &input.digest)?.shard_refs(),
                other => return Err(not_a(other.kind_name(), "dataset or ledger")),
            };
            fs_err::create_dir_all(dest)?;
            for (i, shard) in shards.iter().enumerate() {
                copy_object(store, &shard.digest, &dest.join(format!("shard-{i:05}.parquet")))?;
            }
            Ok(())
        }
        OutputType::Checkpoint => Err(StageError::Input {
            input: dest.display().to_string(),
            message: "checkpoints cannot be handed to external commands yet".into(),
        }),
    }
}

fn not_a(found: &str, expected: &str) -> StageError {
    StageError::Input { input: String::new(), message: format!("expected a {expected} record, found a {found} record") }
}

fn materialize_tree(store: &Store, digest: &Digest, dest: &Path) -> Result<(), StageError> {
    let TreeRecord { entries, .. } = get_typed(store, digest)?;
    fs_err::create_dir_all(dest)?;
    for e in entries {
        let target = dest.join(e.path.as_str());
        if let Some(parent) = target.parent() {
            fs_err::create_dir_all(parent)?;
        }
        copy_object(store, &e.digest, &target)?;
        if e.executable {
            use std::os::unix::fs::PermissionsExt;
            fs_err::set_permissions(&target, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    Ok(())
}

fn copy_object(store: &Store, digest: &Digest, dest: &Path) -> Result<(), StageError> {
    let mut reader = store.open_verified(digest)?;
    let mut file = fs_err::File::create(dest)?;
    std::io::copy(&mut reader, &mut file)?;
    Ok(())
}

impl From<TreeError> for StageError {
    fn from(e: TreeError) -> Self {
        match e {
            TreeError::Io(e) => Self::Io(e),
            TreeError::Store(e) => Self::Store(e),
            other @ (TreeError::Unsupported { .. } | TreeError::Sparse { .. }) => {
                Self::Input { input: String::new(), message: other.to_string() }
            }
        }
    }
}
