//! A hermetic environment for running the `prov` binary: a private project directory, a
//! cleared environment, a fixed clock, no progress bars.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const PROV: &str = env!("CARGO_BIN_EXE_prov");

pub use prov_testkit::repo_root;

thread_local! {
    /// `PROV_THREADS` for every `prov` this test thread starts, when set: see
    /// [`with_threads`].
    static THREADS: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with every `prov` it starts pinned to `threads` worker threads. The thread count
/// is part of the envelope that every stage record holds, so this stands in for another
/// machine: the records, and with them every digest that covers them, differ, as they do on
/// a CPU other than the one a snapshot was recorded on.
pub fn with_threads<T>(threads: usize, f: impl FnOnce() -> T) -> T {
    struct Reset(Option<usize>);
    impl Drop for Reset {
        fn drop(&mut self) {
            THREADS.with(|t| t.set(self.0));
        }
    }
    let _reset = Reset(THREADS.with(|t| t.replace(Some(threads))));
    f()
}

pub struct Project {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
}

impl Project {
    /// An empty project directory with a store.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().join("project");
        fs_err::create_dir_all(&root).unwrap();
        let p = Self { _dir: dir, root };
        p.prov(&["init"]).success();
        p
    }

    /// A project holding a copy of the repository's recipes and the quickstart's data (not the
    /// main job's fetched data: 38 MB in 4,000 files, which only its own test copies).
    pub fn with_recipes() -> Self {
        let p = Self::new();
        let from = repo_root().join("recipes");
        fs_err::create_dir_all(p.root.join("recipes")).unwrap();
        for e in fs_err::read_dir(&from).unwrap() {
            let e = e.unwrap();
            if e.path().is_file() {
                fs_err::copy(e.path(), p.root.join("recipes").join(e.file_name())).unwrap();
            }
        }
        copy_dir(&from.join("data/quickstart"), &p.root.join("recipes/data/quickstart"));
        p
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path(rel);
        if let Some(d) = p.parent() {
            fs_err::create_dir_all(d).unwrap();
        }
        fs_err::write(&p, text).unwrap();
        p
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(PROV);
        c.args(args)
            .current_dir(&self.root)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.root.parent().unwrap())
            .env("PROV_TIMESTAMP", "1795310000000")
            .env("PROV_NO_PROGRESS", "1");
        if let Some(n) = THREADS.with(std::cell::Cell::get) {
            c.env("PROV_THREADS", n.to_string());
        }
        c
    }

    pub fn prov(&self, args: &[&str]) -> Run {
        let output = self.command(args).output().expect("prov starts");
        Run { args: args.iter().map(|s| (*s).to_owned()).collect(), output }
    }

    /// Runs `prov` with `args` and `input` on stdin.
    pub fn prov_with_stdin(&self, args: &[&str], input: impl AsRef<[u8]>) -> Run {
        use std::io::Write as _;
        let mut child = self
            .command(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("prov starts");
        // A command refused for its flags exits before it reads its input: the pipe is then
        // closed under the writer, and what counts is the exit, not the write.
        match child.stdin.take().unwrap().write_all(input.as_ref()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            other => other.unwrap(),
        }
        let output = child.wait_with_output().unwrap();
        Run { args: args.iter().map(|s| (*s).to_owned()).collect(), output }
    }

    /// Runs `--json` and parses every stdout line.
    pub fn json(&self, args: &[&str]) -> Vec<serde_json::Value> {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let r = self.prov(&a);
        r.stdout()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{}", r.describe())))
            .collect()
    }

    /// The store file of the object `digest` (`blake3:<hex>`).
    pub fn object_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("blake3:").expect("a `blake3:` digest");
        self.path(&format!(".prov/objects/{}/{}", &hex[..2], &hex[2..]))
    }

    /// Runs git in the project directory and returns its standard output; fails the test if
    /// git does.
    /// Starts every command at once and waits for all; each must succeed.
    pub fn prov_at_once(&self, commands: &[Vec<&str>]) {
        let children: Vec<_> = commands
            .iter()
            .map(|args| {
                self.command(args)
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for (c, args) in children.into_iter().zip(commands) {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "prov {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
    }

    pub fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git").args(args).current_dir(&self.root).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// Makes the project a git repository with a committer, as `prov run --commit` needs.
    pub fn git_init(&self, name: &str, email: &str) {
        self.git(&["init", "-q"]);
        self.git(&["config", "user.name", name]);
        self.git(&["config", "user.email", email]);
    }

    /// Every object file in the store, sorted.
    pub fn object_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for prefix in fs_err::read_dir(self.path(".prov/objects")).unwrap() {
            for f in fs_err::read_dir(prefix.unwrap().path()).unwrap() {
                out.push(f.unwrap().path());
            }
        }
        out.sort();
        out
    }
}

pub struct Run {
    pub args: Vec<String>,
    pub output: Output,
}

impl Run {
    pub fn code(&self) -> i32 {
        self.output.status.code().unwrap_or(-1)
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    pub fn describe(&self) -> String {
        format!(
            "prov {}\nexit: {}\n--- stdout\n{}--- stderr\n{}",
            self.args.join(" "),
            self.code(),
            self.stdout(),
            self.stderr()
        )
    }
    #[track_caller]
    pub fn success(&self) -> &Self {
        assert_eq!(self.code(), 0, "{}", self.describe());
        self
    }
    #[track_caller]
    pub fn exit(&self, code: i32) -> &Self {
        assert_eq!(self.code(), code, "{}", self.describe());
        assert!(!self.stderr().contains("panicked"), "{}", self.describe());
        self
    }
}

pub fn copy_dir(from: &Path, to: &Path) {
    fs_err::create_dir_all(to).unwrap();
    for e in fs_err::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            fs_err::copy(e.path(), &target).unwrap();
        }
    }
}

/// Flips one bit of a file in place (objects are read-only; make it writable first).
pub fn flip_byte(path: &Path, at: usize) {
    use std::os::unix::fs::PermissionsExt;
    fs_err::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut bytes = fs_err::read(path).unwrap();
    let at = at % bytes.len().max(1);
    bytes[at] ^= 0x01;
    fs_err::write(path, bytes).unwrap();
}

/// The shared real data and the project's Python, with the CI-fails / elsewhere-skips rule.
pub use prov_testkit::{shared_data, venv_python};

/// Writes to `to` a copy of the committed run in `from` (a `manifests/<recipe>/` folder that
/// `prov run --commit` wrote) whose stage records `edit` changed: each changed record is
/// encoded again and named by its new digest, and the run record (its stages and root) and
/// `RUN` follow, so that the copy is as well-formed as the original. Returns the new `RUN`.
///
/// This is how the tests make a run "recorded elsewhere" (another CPU, another kernel) or a
/// forged one that hashes correctly everywhere.
pub fn recommit(from: &Path, to: &Path, edit: impl Fn(&mut prov_manifest::StageRecord)) -> prov_store::Digest {
    use prov_manifest::{Record, RunRecord};
    use prov_store::Digest;
    fs_err::create_dir_all(to).unwrap();
    let name = |d: &Digest| format!("{}.json", d.to_hex());
    let mut renamed: std::collections::BTreeMap<Digest, Digest> = std::collections::BTreeMap::new();
    let mut runs = Vec::new();
    let mut paths: Vec<PathBuf> = fs_err::read_dir(from).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    for path in paths.iter().filter(|p| p.extension().is_some_and(|e| e == "json")) {
        let bytes = fs_err::read(path).unwrap();
        let digest = Digest::of(&bytes);
        match Record::from_bytes(&bytes).unwrap() {
            Record::Stage(mut s) => {
                edit(&mut s);
                let again = Record::Stage(s).to_bytes().unwrap();
                let new = Digest::of(&again);
                renamed.insert(digest, new);
                fs_err::write(to.join(name(&new)), again).unwrap();
            }
            Record::Run(r) => runs.push((digest, r)),
            _ => {
                fs_err::write(to.join(name(&digest)), bytes).unwrap();
            }
        }
    }
    let committed: Digest = fs_err::read_to_string(from.join("RUN")).unwrap().trim().parse().unwrap();
    let mut run = None;
    for (digest, r) in runs {
        let mut stages = r.stages.clone();
        for s in &mut stages {
            s.manifest = renamed.get(&s.manifest).copied().unwrap_or(s.manifest);
        }
        let bytes = Record::Run(RunRecord::new(&r.recipe, r.lockfile, stages)).to_bytes().unwrap();
        let new = Digest::of(&bytes);
        fs_err::write(to.join(name(&new)), bytes).unwrap();
        if digest == committed {
            run = Some(new);
        }
    }
    let run = run.expect("RUN names a run record of the folder");
    fs_err::write(to.join("RUN"), format!("{run}\n")).unwrap();
    run
}

/// The envelope of a machine unlike any the tests run on: another CPU model without AVX-512,
/// another kernel, another core count. The fields that decide what libtorch computes (arch,
/// device, libtorch, `ATen` capability, MKL path) stay as recorded.
pub fn on_another_machine(stage: &mut prov_manifest::StageRecord) {
    let e = &mut stage.envelope;
    e.cpu_model = "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz (recorded elsewhere)".into();
    e.cpu_flags.retain(|f| !f.starts_with("avx512"));
    e.cpu_flags.push("x-recorded-elsewhere".into());
    e.cpu_flags.sort();
    e.os = "Linux 5.10.0-33-cloud-amd64".into();
    e.threads += 6;
    // The key of a stage whose class keys on the envelope is what that machine computed.
    let key_envelope = prov_exec::key_envelope(stage.determinism, &stage.envelope);
    stage.key = prov_exec::stage_key(
        &stage.stage_kind,
        stage.version,
        &stage.config,
        &stage.inputs,
        &stage.seeds,
        &key_envelope,
    );
}

/// Rewrites the run record that `dir/RUN` names (a folder `recommit` or `prov run --commit`
/// wrote): `edit` changes its list of stages, the root is recomputed, the record is renamed to
/// its new digest and `RUN` follows. Returns the new `RUN`.
pub fn rewrite_run_stages(dir: &Path, edit: impl Fn(&mut Vec<prov_manifest::RunStage>)) -> prov_store::Digest {
    use prov_manifest::{Record, RunRecord};
    let run: prov_store::Digest = fs_err::read_to_string(dir.join("RUN")).unwrap().trim().parse().unwrap();
    let path = dir.join(format!("{}.json", run.to_hex()));
    let Record::Run(r) = Record::from_bytes(&fs_err::read(&path).unwrap()).unwrap() else { panic!("a run record") };
    let mut stages = r.stages.clone();
    edit(&mut stages);
    // Encoded as a writer would, whatever the reader then thinks of it.
    let bytes = prov_manifest::encode_value(
        &serde_json::to_value(Record::Run(RunRecord::new(&r.recipe, r.lockfile, stages))).unwrap(),
    );
    let new = prov_store::Digest::of(&bytes);
    fs_err::remove_file(&path).unwrap();
    fs_err::write(dir.join(format!("{}.json", new.to_hex())), bytes).unwrap();
    fs_err::write(dir.join("RUN"), format!("{new}\n")).unwrap();
    new
}

/// Whether the main job's data (fetched by scripts/setup from npm, `PyPI` and Debian) is in
/// `recipes/data/mini-apertus`; when it is not, fails under `CI=true` and otherwise says the
/// test is skipped.
pub fn main_job_data_fetched() -> bool {
    let data = repo_root().join("recipes/data/mini-apertus");
    if data.join("corpus/debian.jsonl").is_file() {
        return true;
    }
    let msg = format!("{} missing: run `scripts/setup` (it runs scripts/fetch-main-data)", data.display());
    assert!(!std::env::var("CI").is_ok_and(|v| v == "true"), "{msg}");
    eprintln!("skipping: {msg}");
    false
}

/// The ledger rows of a ledger record of `p`'s store, in ledger order.
pub fn ledger_rows(p: &Project, ledger: &str) -> Vec<prov_dataset::LedgerRow> {
    let store = prov_store::Store::open(&p.path(".prov"), prov_store::Access::Shared, true).unwrap();
    let l = prov_dataset::read_ledger(&store, &ledger.parse().unwrap()).unwrap();
    l.shards.iter().flat_map(|s| prov_dataset::read_ledger_shard(&store, &s.digest).unwrap()).collect()
}

/// A reference recipe's committed run reproduced in an empty store: a project with the
/// repository's recipes and `manifests/<name>`, whose lockfile `prov lock` must write byte for
/// byte as committed, then `prov replay --against manifests/<name>`, which must not diverge
/// and must replay `stages` stages (sources included). Returns the project and the replay's
/// JSON lines.
pub fn replay_reference_recipe(name: &str, stages: usize) -> (Project, Vec<serde_json::Value>) {
    let p = Project::new();
    copy_dir(&repo_root().join("recipes"), &p.path("recipes"));
    copy_dir(&repo_root().join(format!("manifests/{name}")), &p.path(&format!("manifests/{name}")));
    fs_err::create_dir_all(p.path("lockfiles")).unwrap();
    let lockfile = format!("lockfiles/{name}.lock");
    fs_err::copy(repo_root().join(&lockfile), p.path(&lockfile)).unwrap();
    let committed = fs_err::read_to_string(p.path(&lockfile)).unwrap();
    p.prov(&["lock", &format!("recipes/{name}.yaml")]).success();
    let locked = fs_err::read_to_string(p.path(&lockfile)).unwrap();
    assert_eq!(locked, committed, "the committed lockfile is stale: run `prov run recipes/{name}.yaml --commit`");
    let lines = p.json(&["replay", &lockfile, "--against", &format!("manifests/{name}")]);
    let run = lines.iter().find(|l| l["type"] == "run").expect("a run summary");
    assert_eq!(run["data"]["diverged"], false, "{run}");
    let replayed = lines.iter().filter(|l| l["type"] == "stage" && l["data"]["status"] == "replayed").count();
    assert_eq!(replayed, stages, "every stage, the sources included");
    (p, lines)
}
