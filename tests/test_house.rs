//! The house rules of the workspace, checked from the sources: crates import only crates
//! below them in the order the book's "How Provenant is built" gives, no two modules of a
//! crate import each other (directly or around a circle), no `prov` command imports
//! another, every crate has its section in `crates/README.md`, and the book's table of
//! stage kinds gives the versions this build registers. A change that breaks one names the
//! files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::common::repo_root;

/// Each crate's layer: a crate may depend only on crates of a lower layer.
const LAYERS: &[(&str, u32)] = &[
    ("prov-store", 0),
    ("prov-testkit", 0),
    ("prov-extsort", 0),
    ("prov-textfix", 0),
    ("prov-manifest", 1),
    ("prov-git", 1),
    ("prov-torch", 2),
    ("prov-dataset", 2),
    ("prov-attest", 2),
    ("prov-exec", 3),
    ("prov-license", 3),
    ("prov-review", 4),
    ("prov-tokenizer", 4),
    ("prov-reward", 4),
    ("prov-filter", 4),
    ("prov-slurm", 4),
    ("prov-prep", 5),
    ("prov-robots", 5),
    ("prov-pii", 5),
    ("prov-dedup", 5),
    ("prov-heuristics", 5),
    ("prov-terms", 5),
    ("prov-code", 5),
    ("prov-ngram", 5),
    ("prov-langid", 5),
    ("prov-quality", 5),
    ("prov-train", 6),
    ("prov-parallel", 6),
    ("prov-toxicity", 6),
    ("prov-worker", 7),
    ("prov-palette", 7),
    ("prov-audit", 7),
    ("prov-card", 7),
    ("prov-fuzz", 8),
    ("prov-serve", 8),
    ("prov-cli", 9),
];

fn crates() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs_err::read_dir(repo_root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    out.sort();
    out
}

/// The `prov-*` crates in a manifest's `[dependencies]` (not dev-dependencies: tests may use
/// anything).
fn normal_dependencies(manifest: &Path) -> Vec<String> {
    let text = fs_err::read_to_string(manifest).unwrap();
    let mut in_deps = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps && let Some(name) = line.split(['.', ' ', '=']).next().filter(|n| n.starts_with("prov-")) {
            out.push(name.to_owned());
        }
    }
    out
}

#[test]
fn crates_import_only_crates_below_them() {
    let layer: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let mut wrong = Vec::new();
    for dir in crates() {
        let name = dir.file_name().unwrap().to_str().unwrap().to_owned();
        let Some(&own) = layer.get(name.as_str()) else {
            panic!("crate `{name}` has no layer in LAYERS: give it one, and a row in the book's crate table");
        };
        for dep in normal_dependencies(&dir.join("Cargo.toml")) {
            let theirs = layer.get(dep.as_str()).copied().unwrap_or(u32::MAX);
            if theirs >= own {
                wrong.push(format!("{name} (layer {own}) depends on {dep} (layer {theirs})"));
            }
        }
    }
    assert!(wrong.is_empty(), "imports that do not run downwards:\n{}", wrong.join("\n"));
}

/// `crates/README.md` says what each crate owns: a crate without its section there is a
/// concept without a home a reader can find.
#[test]
fn every_crate_has_its_section_in_the_crates_readme() {
    let readme = fs_err::read_to_string(repo_root().join("crates/README.md")).unwrap();
    let sections: BTreeSet<&str> = readme.lines().filter_map(|l| l.strip_prefix("## ")).collect();
    let missing: Vec<String> = crates()
        .iter()
        .map(|dir| dir.file_name().unwrap().to_str().unwrap().to_owned())
        .filter(|name| !sections.contains(name.as_str()))
        .collect();
    assert!(missing.is_empty(), "crates without a `## <crate>` section in crates/README.md: {missing:?}");
}

/// The source of a file without comments and without its `#[cfg(test)]` module (tests may
/// reach anywhere).
fn code_of(path: &Path) -> String {
    let text = fs_err::read_to_string(path).unwrap();
    let text = text.find("#[cfg(test)]").map_or(text.as_str(), |i| &text[..i]);
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs_err::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level modules of a crate's `src/` and which others each refers to by `crate::`.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let reference = regex::Regex::new(r"crate::([a-z_][a-z0-9_]*)").unwrap();
    for f in &files {
        let rel = f.strip_prefix(src).unwrap();
        let top = rel.components().next().unwrap().as_os_str().to_str().unwrap().trim_end_matches(".rs").to_owned();
        if top == "lib" || top == "main" {
            continue;
        }
        let refs = graph.entry(top.clone()).or_default();
        for c in reference.captures_iter(&code_of(f)) {
            refs.insert(c[1].to_owned());
        }
    }
    let names: BTreeSet<String> = graph.keys().cloned().collect();
    for (m, refs) in &mut graph {
        refs.retain(|r| names.contains(r) && r != m);
    }
    graph
}

/// A circle of the graph, if it has one.
fn find_circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        g: &BTreeMap<String, BTreeSet<String>>,
        node: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == node) {
            let mut circle = path[i..].to_vec();
            circle.push(node.to_owned());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in g.get(node).into_iter().flatten() {
            if let Some(c) = visit(g, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|start| visit(graph, start, &mut Vec::new(), &mut done))
}

#[test]
fn no_two_modules_of_a_crate_import_each_other() {
    let mut circles = Vec::new();
    for dir in crates() {
        if let Some(circle) = find_circle(&module_graph(&dir.join("src"))) {
            circles.push(format!("{}: {}", dir.file_name().unwrap().to_str().unwrap(), circle.join(" -> ")));
        }
    }
    assert!(circles.is_empty(), "module circles:\n{}", circles.join("\n"));
}

#[test]
fn the_circle_finder_finds_a_circle() {
    // The check above must be able to fail.
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["c".to_owned()])),
        ("c".to_owned(), BTreeSet::from(["a".to_owned()])),
        ("d".to_owned(), BTreeSet::new()),
    ]
    .into();
    assert_eq!(find_circle(&g).unwrap(), ["a", "b", "c", "a"]);
    let line: BTreeMap<String, BTreeSet<String>> =
        [("a".to_owned(), BTreeSet::from(["b".to_owned()])), ("b".to_owned(), BTreeSet::new())].into();
    assert_eq!(find_circle(&line), None);
}

#[test]
fn no_command_imports_another() {
    let commands = repo_root().join("crates/prov-cli/src/commands");
    let mut files = Vec::new();
    rust_files(&commands, &mut files);
    let offenders: Vec<String> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "mod.rs") || f.parent() != Some(commands.as_path()))
        .filter(|f| code_of(f).contains("crate::commands::"))
        .map(|f| f.strip_prefix(repo_root()).unwrap().display().to_string())
        .collect();
    assert!(offenders.is_empty(), "commands that import another command: {offenders:?}");
}

/// No code chooses its device by what the machine has: the envelope says where a stage
/// computed (see `prov_torch::DEVICE`).
#[test]
fn no_stage_picks_its_device_by_what_the_machine_has() {
    let mut files = Vec::new();
    for c in crates() {
        rust_files(&c.join("src"), &mut files);
    }
    let needle = ["cuda", "_if_available"].concat();
    let offenders: Vec<String> = files
        .iter()
        .filter(|f| code_of(f).contains(&needle))
        .map(|f| f.strip_prefix(repo_root()).unwrap().display().to_string())
        .collect();
    assert!(!files.is_empty());
    assert!(offenders.is_empty(), "device chosen by the machine in: {offenders:?}");
}

/// The book's table of stage kinds gives each kind the version this build registers (a
/// version is bumped whenever a kind's bytes change, and the table is where a reader
/// learns which bytes a recorded run was made with), and lists every kind.
#[test]
fn the_books_stage_kind_table_gives_every_kind_at_its_version() {
    let p = crate::common::Project::new();
    let doctor = p.json(&["doctor"]);
    let kinds = doctor.iter().find_map(|l| l["data"]["stage_kinds"].as_array()).expect("doctor lists stage kinds");
    let registered: BTreeMap<String, u64> =
        kinds.iter().map(|k| (k["kind"].as_str().unwrap().to_owned(), k["version"].as_u64().unwrap())).collect();
    let book = fs_err::read_to_string(repo_root().join("book/src/stage-kinds.md")).unwrap();
    let row = regex::Regex::new(r"(?m)^\| \[?`([a-z-]+)`\]?(?:\([^)]*\))? \| (\d+) \|").unwrap();
    let listed: BTreeMap<String, u64> =
        row.captures_iter(&book).map(|c| (c[1].to_owned(), c[2].parse().unwrap())).collect();
    assert_eq!(listed, registered, "book/src/stage-kinds.md against `prov doctor`");
}
