//! Two processes on one store: concurrent runs both succeed and the store verifies; gc
//! refuses to start while a run holds the store.

use std::process::Stdio;

use crate::common::Project;

#[test]
fn concurrent_runs_share_a_store_safely() {
    let p = Project::with_recipes();
    p.write(
        "recipes/other.yaml",
        &fs_err::read_to_string(p.path("recipes/quickstart.yaml"))
            .unwrap()
            .replace("name: quickstart", "name: other")
            .replace("fraction: 0.5", "fraction: 0.3"),
    );
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
