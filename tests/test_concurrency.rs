//! Two processes on one store: concurrent runs both succeed and the store verifies; gc
//! refuses to start while a run holds the store.

use std::process::Stdio;

use crate::common::Project;

/// `recipes/other.yaml`: the quickstart under another name, keeping another fraction.
fn write_other_recipe(p: &Project) {
    p.write(
        "recipes/other.yaml",
        &fs_err::read_to_string(p.path("recipes/quickstart.yaml"))
            .unwrap()
            .replace("name: quickstart", "name: other")
            .replace("fraction: 0.5", "fraction: 0.3"),
    );
}

#[test]
fn concurrent_runs_share_a_store_safely() {
    let p = Project::with_recipes();
    write_other_recipe(&p);
    p.prov(&["lock", "recipes/quickstart.yaml"]).success();
    p.prov(&["lock", "recipes/other.yaml"]).success();
    for _ in 0..3 {
        let children: Vec<_> = ["lockfiles/quickstart.lock", "lockfiles/other.lock", "lockfiles/quickstart.lock"]
            .iter()
            .map(|l| p.command(&["run", l]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap())
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
        p.prov(&["verify"]).success();
    }
    p.prov(&["replay", "lockfiles/quickstart.lock"]).success();
    p.prov(&["replay", "lockfiles/other.lock"]).success();
}

#[test]
fn gc_refuses_while_the_store_is_in_use() {
    let p = Project::with_recipes();
    p.write(
        "recipes/slow.yaml",
        "schema: 1\nname: slow\nseed: 1\nallow_commands: true\nstages:\n  wait:\n    kind: external\n    params:\n      command: [sh, -c, \"sleep 3; echo done > out\"]\n      outputs: {out: out}\n",
    );
    let mut child =
        p.command(&["run", "recipes/slow.yaml"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    let r = p.prov(&["gc"]);
    r.exit(1);
    assert!(r.stderr().contains("is in use by another prov process"), "{}", r.describe());
    assert!(child.wait().unwrap().success());
    p.prov(&["gc"]).success();
    p.prov(&["verify"]).success();
}

/// The files of the commit at HEAD under `dir`, and those of the work tree.
fn committed_and_on_disk(p: &Project, dir: &str) -> (Vec<String>, Vec<String>) {
    let committed: Vec<String> =
        p.git(&["ls-tree", "-r", "--name-only", "HEAD", dir]).lines().map(str::to_owned).collect();
    let mut on_disk: Vec<String> = fs_err::read_dir(p.path(dir))
        .map(|d| d.filter_map(Result::ok).map(|e| format!("{dir}/{}", e.file_name().to_string_lossy())).collect())
        .unwrap_or_default();
    on_disk.sort();
    (committed, on_disk)
}

/// Two `prov run --commit`s at once, of two recipes and of one recipe, repeated: each commit
/// is built on the other's, so the branch keeps both lockfiles and both run folders, and a
/// folder is never committed half written. Before the commit lock, the second commit was
/// built on the HEAD both had read and dropped the first one's files from the branch (5 of
/// 10 tries), and two commits of one recipe removed each other's staging folder, one
/// committing `RUN` with 3 of its 9 records (3 of 8 tries), both reporting success.
#[test]
fn concurrent_commits_keep_each_others_files() {
    let p = Project::with_recipes();
    p.git_init("Test Reviewer", "reviewer@example.org");
    write_other_recipe(&p);
    // Cached stages, so that the two commits, not the runs, overlap.
    p.prov(&["run", "recipes/quickstart.yaml"]).success();
    p.prov(&["run", "recipes/other.yaml"]).success();
    for recipes in [["quickstart", "other"]; 4].into_iter().chain([["quickstart", "quickstart"]; 4]) {
        let paths: Vec<String> = recipes.iter().map(|r| format!("recipes/{r}.yaml")).collect();
        p.prov_at_once(&paths.iter().map(|r| vec!["run", "--commit", r]).collect::<Vec<_>>());
        for r in ["quickstart", "other"] {
            let lock = format!("lockfiles/{r}.lock");
            assert_eq!(
                p.git(&["ls-tree", "--name-only", "HEAD", &lock]).trim(),
                lock,
                "{r}'s lockfile left the branch"
            );
            let (committed, on_disk) = committed_and_on_disk(&p, &format!("manifests/{r}"));
            assert_eq!(committed, on_disk, "{r}'s run folder as committed and on disk");
            assert!(committed.len() >= 9, "{r}: {committed:?}");
        }
        assert!(p.git(&["status", "--porcelain", "manifests", "lockfiles"]).trim().is_empty());
    }
    // The committed folder is a whole run: a replay against it finds every record.
    p.prov(&["replay", "lockfiles/quickstart.lock", "--against", "manifests/quickstart"]).success();
}
