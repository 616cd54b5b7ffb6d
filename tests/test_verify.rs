//! `prov verify`: a flipped byte in any object or manifest is found, named, and traced to
//! the runs that depend on it; `prov gc` keeps exactly what runs reference.

use std::os::unix::fs::PermissionsExt;

use crate::common::{Project, flip_byte};

#[test]
fn flipping_any_byte_of_any_object_is_named_with_its_runs() {
    let p = Project::with_recipes();
    let lines = p.json(&["run", "recipes/quickstart.yaml"]);
    let run_id = lines.iter().find(|l| l["type"] == "run").unwrap()["data"]["run_id"].as_str().unwrap().to_owned();
    p.prov(&["verify"]).success();
    let objects = p.object_files();
    assert!(objects.len() >= 15, "{objects:?}");
    for (i, path) in objects.iter().enumerate() {
        let original = fs_err::read(path).unwrap();
        let name = {
            let prefix = path.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned();
            format!("blake3:{prefix}{}", path.file_name().unwrap().to_string_lossy())
        };
        flip_byte(path, i * 7919);
        for threads in ["1", "2"] {
            let r = p.prov(&["--threads", threads, "verify"]);
            r.exit(2);
            let err = r.stderr();
            assert!(err.contains(&format!("object {name}: corrupt")), "{}", r.describe());
            assert!(err.contains(&format!("run {run_id} (quickstart) depends on it")), "{}", r.describe());
        }
        let json = p.json(&["verify"]);
        let damage: Vec<&serde_json::Value> = json.iter().filter(|l| l["type"] == "damage").collect();
        assert_eq!(damage.len(), 1, "{json:?}");
        assert_eq!(damage[0]["data"]["object"], name.as_str());
        // Restore for the next object.
        fs_err::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
        fs_err::write(path, &original).unwrap();
    }
    p.prov(&["verify"]).success();
}

#[test]
fn a_deleted_object_is_reported_missing_with_its_referrers() {
    let p = Project::with_recipes();
    p.prov(&["run", "recipes/quickstart.yaml"]).success();
    // Delete a shard: the largest objects are the Parquet files.
    let shard = p.object_files().into_iter().find(|f| fs_err::read(f).unwrap().starts_with(b"PAR1")).unwrap();
    fs_err::remove_file(&shard).unwrap();
    let r = p.prov(&["verify"]);
    r.exit(2);
    assert!(r.stderr().contains(": missing"), "{}", r.describe());
    assert!(r.stderr().contains("referenced by manifest"), "{}", r.describe());
    // A run re-executes what cannot be verified rather than trusting the cache.
    let lines = p.json(&["run", "lockfiles/quickstart.lock"]);
    assert!(lines.iter().any(|l| l["type"] == "stage" && l["data"]["status"] == "executed"), "{lines:?}");
    p.prov(&["verify"]).success();
}

#[test]
fn a_corrupt_cached_output_is_recomputed_not_reused() {
    let p = Project::with_recipes();
    p.prov(&["run", "recipes/quickstart.yaml"]).success();
    let shard = p.object_files().into_iter().find(|f| fs_err::read(f).unwrap().starts_with(b"PAR1")).unwrap();
    flip_byte(&shard, 40);
    let lines = p.json(&["run", "lockfiles/quickstart.lock"]);
    assert!(lines.iter().any(|l| l["type"] == "stage" && l["data"]["status"] == "executed"), "{lines:?}");
    // Re-executing wrote the good bytes over the corrupt copy.
    p.prov(&["verify"]).success();
}

/// A cached re-run re-hashes only the outputs whose files changed since they were last hashed
/// (one `stat` each otherwise): an edit in place that keeps the file's size, modification
/// time and permissions still changes its status-change time, and is found.
#[test]
fn a_hidden_edit_of_a_cached_output_is_found_too() {
    let p = Project::with_recipes();
    p.prov(&["run", "recipes/quickstart.yaml"]).success();
    // The first cached re-run hashes in full and stamps; the second trusts the stamps.
    for _ in 0..2 {
        let lines = p.json(&["run", "lockfiles/quickstart.lock"]);
        assert!(lines.iter().filter(|l| l["type"] == "stage").all(|l| l["data"]["status"] == "cached"), "{lines:?}");
    }
    let shard = p.object_files().into_iter().find(|f| fs_err::read(f).unwrap().starts_with(b"PAR1")).unwrap();
    let meta = fs_err::metadata(&shard).unwrap();
    flip_byte(&shard, 40);
    std::fs::File::options().write(true).open(&shard).unwrap().set_modified(meta.modified().unwrap()).unwrap();
    fs_err::set_permissions(&shard, meta.permissions()).unwrap();
    assert_eq!(fs_err::metadata(&shard).unwrap().len(), meta.len());
    let lines = p.json(&["run", "lockfiles/quickstart.lock"]);
    assert!(lines.iter().any(|l| l["type"] == "stage" && l["data"]["status"] == "executed"), "{lines:?}");
    p.prov(&["verify"]).success();
}

#[test]
fn gc_removes_only_what_no_run_references() {
    let p = Project::with_recipes();
    p.prov(&["run", "recipes/quickstart.yaml"]).success();
    let before = p.object_files().len();
    // An object nobody references, and a partial write left by a killed process.
    p.write(".prov/tmp/12345-0-0.tmp", "partial");
    let orphan = {
        let text = "orphan bytes";
        let d = prov_store::Digest::of(text.as_bytes()).to_hex();
        p.write(&format!(".prov/objects/{}/{}", &d[..2], &d[2..]), text)
    };
    let dry = p.json(&["gc", "--dry-run"]);
    assert_eq!(dry[0]["data"]["removed"], 1, "{dry:?}");
    assert!(orphan.exists());
    let r = p.json(&["gc"]);
    assert_eq!(r[0]["data"]["removed"], 1);
    assert_eq!(r[0]["data"]["tmp_cleaned"], 1);
    assert!(!orphan.exists());
    assert_eq!(p.object_files().len(), before);
    p.prov(&["verify"]).success();
    let again = p.json(&["run", "lockfiles/quickstart.lock"]);
    assert!(again.iter().filter(|l| l["type"] == "stage").all(|l| l["data"]["status"] == "cached"), "{again:?}");
}

#[test]
fn a_lost_index_loses_no_run() {
    // The index is never the only copy of a fact: with index.sqlite deleted, gc keeps every
    // run (found from the run records themselves). Which run is the lockfile's recorded one
    // is the log's to say, though: without it, a run record in the store could be anyone's
    // (data whose bytes are a run record, a folder's records imported by a refused replay),
    // so replay asks for a recording, and running the lockfile again records the same run.
    let p = Project::with_recipes();
    let first = p.json(&["run", "recipes/quickstart.yaml"]);
    let manifest = |lines: &[serde_json::Value]| {
        lines.iter().find(|l| l["type"] == "run").map(|l| l["data"]["run_manifest"].clone()).expect("a run")
    };
    let before = p.object_files().len();
    for f in ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm"] {
        let _ = fs_err::remove_file(p.path(&format!(".prov/{f}")));
    }
    let r = p.json(&["gc"]);
    assert_eq!(r[0]["data"]["removed"], 0, "{r:?}");
    assert_eq!(p.object_files().len(), before);
    p.prov(&["verify"]).success();
    let r = p.prov(&["replay", "lockfiles/quickstart.lock"]);
    r.exit(1);
    assert!(r.stderr().contains("has no completed recording in this store"), "{}", r.describe());
    let again = p.json(&["run", "lockfiles/quickstart.lock"]);
    assert_eq!(manifest(&again), manifest(&first), "the same run, recorded again");
    assert_eq!(p.object_files().len(), before);
    p.prov(&["replay", "lockfiles/quickstart.lock"]).success();
}

/// A deleted run record used to leave `prov verify` at exit 0, and the next `prov gc`
/// deleted the whole run: the record was a root that nothing references.
#[test]
fn a_deleted_run_record_is_reported_and_stops_gc() {
    let p = Project::with_recipes();
    let lines = p.json(&["run", "recipes/quickstart.yaml"]);
    let run = &lines.iter().find(|l| l["type"] == "run").unwrap()["data"];
    let manifest = run["run_manifest"].as_str().unwrap().to_owned();
    let before = p.object_files().len();
    fs_err::remove_file(p.object_file(&manifest)).unwrap();
    let r = p.prov(&["verify"]);
    r.exit(2);
    assert!(r.stderr().contains(&format!("object {manifest}: missing")), "{}", r.describe());
    assert!(r.stderr().contains("(quickstart) depends on it"), "{}", r.describe());
    let r = p.prov(&["gc"]);
    r.exit(2);
    assert!(r.stderr().contains("the record of a logged run, is missing"), "{}", r.describe());
    assert_eq!(p.object_files().len(), before - 1, "gc removed nothing");
    // Running again writes the record again; then all is well.
    p.prov(&["run", "recipes/quickstart.yaml"]).success();
    p.prov(&["verify"]).success();
    p.prov(&["gc"]).success();
    assert_eq!(p.object_files().len(), before);
}

/// An auditor's copy of a store is often read-only: the commands that only read work on it.
/// The store is mounted read-only with bubblewrap (root ignores file modes, a mount does not).
#[test]
fn read_only_commands_work_on_a_read_only_store() {
    let p = Project::with_recipes();
    let lines = p.json(&["run", "recipes/quickstart.yaml"]);
    let manifest =
        lines.iter().find(|l| l["type"] == "run").unwrap()["data"]["run_manifest"].as_str().unwrap().to_owned();
    let store = p.path(".prov");
    let read_only = |args: &[&str]| {
        let mut c = std::process::Command::new("bwrap");
        c.args(["--dev-bind", "/", "/", "--ro-bind"]).arg(&store).arg(&store).arg("--").arg(crate::common::PROV);
        c.args(args)
            .current_dir(&p.root)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("PROV_NO_PROGRESS", "1");
        let output = c.output().expect("bwrap starts");
        crate::common::Run { args: args.iter().map(|s| (*s).to_owned()).collect(), output }
    };
    // The mount is read-only indeed: a run cannot write.
    read_only(&["run", "recipes/quickstart.yaml"]).exit(1);
    for args in [
        vec!["verify"],
        vec!["status"],
        vec!["log"],
        vec!["show", manifest.as_str()],
        vec!["lineage", manifest.as_str()],
    ] {
        read_only(&args).success();
    }
    p.write("replay.yaml", "schema: 1\nname: r\nclaims:\n  - kind: replay\n");
    p.prov(&["replay", "lockfiles/quickstart.lock"]).success();
    let audit = read_only(&["audit", "lockfiles/quickstart.lock", "--policy", "replay.yaml"]);
    audit.success();
    assert!(audit.stdout().contains("replay: HOLDS"), "{}", audit.describe());
}
