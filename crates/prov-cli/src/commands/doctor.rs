//! `prov doctor`.

use std::path::{Path, PathBuf};

use prov_manifest::Envelope;
use serde_json::json;

use crate::context::{CommandContext, registry};
use crate::env_vars;
use crate::error::CommandError;
use crate::ui::{Ui, count, table};

/// Check this machine: the envelope a run would record, the store, libtorch and tools
///
/// Prints the determinism envelope this process would record (workbench version, OS, CPU
/// model and features, thread count), whether a store was found, the libtorch of the
/// project's `.venv` and the `ATen` and MKL settings that govern it, the helper tools (`b3sum`,
/// `mdbook`), every stage kind this build knows, and the environment variables prov reads.
/// For each missing piece it says what to do. Exits 0 even when optional pieces are missing.
#[derive(Debug, clap::Args)]
pub(crate) struct DoctorArgs {}

/// The libtorch found in a project's virtual environment.
struct Torch {
    version: String,
    lib_dir: PathBuf,
    has_libtorch: bool,
}

/// Finds `.venv/lib/python3*/site-packages/torch/version.py` under `dir` and reads its
/// `__version__`.
fn find_torch(dir: &Path) -> Option<Torch> {
    let lib = dir.join(".venv").join("lib");
    let mut pythons: Vec<PathBuf> = fs_err::read_dir(&lib)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .map(|e| e.path())
        .collect();
    pythons.sort();
    pythons.into_iter().find_map(|p| {
        let torch = p.join("site-packages").join("torch");
        let text = fs_err::read_to_string(torch.join("version.py")).ok()?;
        let version = parse_version(&text)?;
        let lib_dir = torch.join("lib");
        let has_libtorch = lib_dir.join("libtorch.so").is_file();
        Some(Torch { version, lib_dir, has_libtorch })
    })
}

/// Reads `__version__ = '2.13.0+cu130'` (either quote) from torch's `version.py`.
fn parse_version(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("__version__")?.trim_start().strip_prefix('=')?.trim();
        let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"')?;
        let inner = &rest[1..];
        inner.find(quote).map(|end| inner[..end].to_owned())
    })
}

/// Everything `prov doctor` found, rendered both as JSON and for people.
struct Report {
    envelope: Envelope,
    threads_error: Option<String>,
    avx2: bool,
    avx512f: bool,
    store_dir: Option<PathBuf>,
    store_found: bool,
    root: PathBuf,
    torch: Option<Torch>,
    /// The worker executable.
    worker_path: PathBuf,
    /// What the worker says it links, or why it cannot be asked.
    worker: Result<prov_exec::TorchClaim, String>,
    aten: Option<String>,
    mkl: Option<String>,
    onednn: Option<String>,
    b3sum: Option<PathBuf>,
    mdbook: Option<PathBuf>,
    /// `(kind, version, summary)`, sorted by kind.
    kinds: Vec<(&'static str, u32, &'static str)>,
    /// `(name, meaning, value)`.
    vars: Vec<(&'static str, &'static str, Option<String>)>,
    /// `(what is wrong, what to do)`.
    problems: Vec<(String, String)>,
}

fn gather(cx: &CommandContext) -> Report {
    let mut problems: Vec<(String, String)> = Vec::new();
    let (threads, threads_error) = match cx.threads() {
        Ok(t) => (t, None),
        Err(e) => {
            let fallback = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
            problems
                .push((e.message.clone(), format!("set {} to a positive integer or unset it", env_vars::PROV_THREADS)));
            (fallback, Some(e.message))
        }
    };
    let envelope = CommandContext::envelope(threads);
    let has_flag = |f: &str| envelope.cpu_flags.iter().any(|x| x == f);
    let (avx2, avx512f) = (has_flag("avx2"), has_flag("avx512f"));

    // Store and project root.
    let store_dir = cx.store_dir().ok();
    let store_found = store_dir.as_ref().is_some_and(|d| d.join("VERSION").is_file());
    if !store_found {
        problems.push(("no store found".to_owned(), "run `prov init` in the project root".to_owned()));
    }
    let root = match (&store_dir, store_found) {
        (Some(d), true) => d.parent().map_or_else(|| cx.cwd.clone(), Path::to_path_buf),
        _ => cx.cwd.clone(),
    };

    // libtorch and the settings that govern it.
    let torch = find_torch(&root).or_else(|| if root == cx.cwd { None } else { find_torch(&cx.cwd) });
    match &torch {
        None => problems.push(("libtorch not found in `.venv`".to_owned(), "run `scripts/setup`".to_owned())),
        Some(t) if !t.has_libtorch => problems.push((
            format!("torch {} has no `libtorch.so` in {}", t.version, t.lib_dir.display()),
            "run `scripts/setup` again".to_owned(),
        )),
        Some(_) => {}
    }

    // The worker, which runs every libtorch computation: it must start and link the libtorch
    // the envelope will record.
    let worker_path = CommandContext::worker();
    let worker = prov_exec::worker::facts(&worker_path).map_err(|e| e.to_string());
    match &worker {
        Err(e) => {
            problems.push((e.clone(), "build it with `cargo build` (beside `prov`), or set PROV_WORKER".to_owned()));
        }
        Ok(f) if f.libtorch.as_deref() != Some(prov_exec::aten::LIBTORCH_VERSION) => problems.push((
            format!(
                "the worker links libtorch {}, prov records {}",
                f.libtorch.as_deref().unwrap_or("none"),
                prov_exec::aten::LIBTORCH_VERSION
            ),
            "rebuild both with `cargo build` against the same `.venv`".to_owned(),
        )),
        Ok(_) => {}
    }

    // Tools.
    let b3sum = env_vars::find_program("b3sum");
    if b3sum.is_none() {
        problems.push(("b3sum not on PATH".to_owned(), "run `scripts/setup` (or `apt-get install b3sum`)".to_owned()));
    }
    let mdbook = [&root, &cx.cwd].into_iter().map(|d| d.join(".venv/bin/mdbook")).find(|p| p.is_file());
    if mdbook.is_none() {
        problems.push(("mdbook not found in `.venv/bin`".to_owned(), "run `scripts/setup`".to_owned()));
    }

    Report {
        envelope,
        threads_error,
        avx2,
        avx512f,
        store_dir,
        store_found,
        root,
        torch,
        worker_path,
        worker,
        aten: env_vars::get(env_vars::ATEN_CPU_CAPABILITY),
        mkl: env_vars::get(env_vars::MKL_CBWR),
        onednn: env_vars::get(env_vars::ONEDNN_MAX_CPU_ISA),
        b3sum,
        mdbook,
        kinds: registry().kinds().map(|k| (k.kind(), k.version(), k.summary())).collect(),
        vars: env_vars::ALL.iter().map(|(name, what)| (*name, *what, env_vars::get(name))).collect(),
        problems,
    }
}

pub(crate) fn cmd_doctor(ui: &mut Ui, cx: &CommandContext, _args: &DoctorArgs) -> Result<(), CommandError> {
    let r = gather(cx);
    ui.json("doctor", to_json(&r))?;
    render_machine(ui, &r)?;
    render_tools(ui, &r)?;
    if r.problems.is_empty() {
        ui.line("no problems found")?;
    } else {
        ui.line(format!("{} to look at:", count(r.problems.len(), "thing")))?;
        for (p, h) in &r.problems {
            ui.line(format!("  {p}; {h}"))?;
        }
    }
    Ok(())
}

fn to_json(r: &Report) -> serde_json::Value {
    let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
    json!({
        "envelope": r.envelope,
        "threads_error": r.threads_error,
        "cpu": { "avx2": r.avx2, "avx512f": r.avx512f, "flags": r.envelope.cpu_flags.len() },
        "store": { "found": r.store_found, "path": path(&r.store_dir) },
        "project_root": r.root.display().to_string(),
        "libtorch": r.torch.as_ref().map(|t| json!({
            "version": t.version,
            "lib_dir": t.lib_dir.display().to_string(),
            "libtorch_so": t.has_libtorch,
        })),
        "aten_cpu_capability": r.aten,
        "libtorch_linked": r.worker.as_ref().ok().and_then(|f| f.libtorch.clone()),
        "worker": { "path": r.worker_path.display().to_string(), "error": r.worker.as_ref().err() },
        "mkl_cbwr": r.mkl,
        "onednn_max_cpu_isa": r.onednn,
        "tools": { "b3sum": path(&r.b3sum), "mdbook": path(&r.mdbook) },
        "stage_kinds": r.kinds.iter().map(|(k, v, s)| json!({"kind": k, "version": v, "summary": s})).collect::<Vec<_>>(),
        "env": r.vars.iter().map(|(n, w, v)| json!({"name": n, "description": w, "value": v})).collect::<Vec<_>>(),
        "problems": r.problems.iter().map(|(p, h)| json!({"problem": p, "hint": h})).collect::<Vec<_>>(),
    })
}

fn show(v: Option<&String>) -> String {
    v.cloned().unwrap_or_else(|| "unset".to_owned())
}

/// The envelope, the store and libtorch.
fn render_machine(ui: &mut Ui, r: &Report) -> Result<(), CommandError> {
    let e = &r.envelope;
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    ui.line(format!("prov {}", e.workbench_version))?;
    ui.line(format!("  os        {}", e.os))?;
    ui.line(format!("  arch      {}", e.arch))?;
    ui.line(format!("  cpu       {}", e.cpu_model))?;
    ui.line(format!(
        "  features  {} flags; avx2 {}, avx512f {}",
        e.cpu_flags.len(),
        yes_no(r.avx2),
        yes_no(r.avx512f)
    ))?;
    let threads_note = r.threads_error.as_ref().map_or_else(String::new, |err| format!(" ({err}; using all cores)"));
    ui.line(format!("  threads   {}{threads_note}", e.threads))?;
    ui.line(format!("  device    {}", e.device))?;

    match (&r.store_dir, r.store_found) {
        (Some(d), true) => ui.line(format!("store       {}", d.display()))?,
        _ => ui.line("store       not found; run `prov init` in the project root")?,
    }
    ui.line(format!("project     {}", r.root.display()))?;

    match &r.torch {
        Some(t) => {
            let so = if t.has_libtorch { "" } else { " (no libtorch.so there; run `scripts/setup`)" };
            ui.line(format!("libtorch    {} in {}{so}", t.version, t.lib_dir.display()))?;
        }
        None => ui.line("libtorch    not found in .venv; run `scripts/setup`")?,
    }
    match &r.worker {
        Ok(f) => {
            ui.line(format!(
                "worker      {} (libtorch {})",
                r.worker_path.display(),
                f.libtorch.as_deref().unwrap_or("none")
            ))?;
        }
        Err(e) => ui.line(format!("worker      {e}"))?,
    }
    let pins = [
        (
            env_vars::ATEN_CPU_CAPABILITY,
            &r.aten,
            "pinned before libtorch starts: as set if this CPU runs it, else the best it runs",
        ),
        (
            env_vars::MKL_CBWR,
            &r.mkl,
            "pinned to COMPATIBLE unless set: the one branch that is the same on Intel and other CPUs",
        ),
        (env_vars::ONEDNN_MAX_CPU_ISA, &r.onednn, "pinned with the ATen capability's instruction set unless set"),
    ];
    let rows: Vec<Vec<String>> =
        pins.iter().map(|(n, v, note)| vec![(*n).to_owned(), show(v.as_ref()), (*note).to_owned()]).collect();
    for l in table(&["setting", "now", "note"], &rows).lines().skip(1) {
        ui.line(format!("  {l}"))?;
    }
    Ok(())
}

/// Helper programs, stage kinds and environment variables.
fn render_tools(ui: &mut Ui, r: &Report) -> Result<(), CommandError> {
    let found =
        |p: &Option<PathBuf>, missing: &str| p.as_ref().map_or_else(|| missing.to_owned(), |p| p.display().to_string());
    ui.line("tools")?;
    ui.line(format!("  b3sum     {}", found(&r.b3sum, "not found; run `scripts/setup` (or `apt-get install b3sum`)")))?;
    ui.line(format!("  mdbook    {}", found(&r.mdbook, "not found in .venv/bin; run `scripts/setup`")))?;

    ui.line("stage kinds")?;
    let rows: Vec<Vec<String>> =
        r.kinds.iter().map(|(k, v, s)| vec![(*k).to_owned(), format!("v{v}"), (*s).to_owned()]).collect();
    for l in table(&["kind", "version", "summary"], &rows).lines() {
        ui.line(format!("  {l}"))?;
    }

    ui.line("environment")?;
    let rows: Vec<Vec<String>> =
        r.vars.iter().map(|(n, w, v)| vec![(*n).to_owned(), show(v.as_ref()), (*w).to_owned()]).collect();
    for l in table(&["variable", "value", "meaning"], &rows).lines() {
        ui.line(format!("  {l}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_version;

    #[test]
    fn torch_versions_are_read_from_version_py() {
        let text = "from typing import Optional\n__version__ = '2.13.0+cu130'\ndebug = False\n";
        assert_eq!(parse_version(text).as_deref(), Some("2.13.0+cu130"));
        assert_eq!(parse_version("__version__=\"2.1\"").as_deref(), Some("2.1"));
        assert_eq!(parse_version("version = '1'"), None);
    }
}
