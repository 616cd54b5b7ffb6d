//! `prov` writes inside the project only: a committed symbolic link named `lockfiles` or
//! `manifests` that leads out of it is refused before anything is written or deleted there.

use crate::common::Project;

#[test]
fn a_lockfiles_link_out_of_the_project_is_not_followed() {
    let p = Project::with_recipes();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), p.path("lockfiles")).unwrap();
    let r = p.prov(&["lock", "recipes/quickstart.yaml"]);
    r.exit(1);
    assert!(r.stderr().contains("lockfiles` is a symbolic link"), "{}", r.describe());
    assert!(fs_err::read_dir(outside.path()).unwrap().next().is_none(), "nothing written outside");
}

/// `prov run --commit` replaces `manifests/<recipe>/`: through a link, that deleted a
/// directory outside the repository.
#[test]
fn a_manifests_link_out_of_the_project_is_not_followed_or_emptied() {
    let p = Project::with_recipes();
    p.git_init("Committer", "committer@example.org");
    let outside = tempfile::tempdir().unwrap();
    let keep = outside.path().join("quickstart/keep.txt");
    fs_err::create_dir_all(keep.parent().unwrap()).unwrap();
    fs_err::write(&keep, "not prov's").unwrap();
    std::os::unix::fs::symlink(outside.path(), p.path("manifests")).unwrap();
    let r = p.prov(&["run", "recipes/quickstart.yaml", "--commit"]);
    r.exit(1);
    assert!(r.stderr().contains("manifests` is a symbolic link"), "{}", r.describe());
    assert_eq!(fs_err::read_to_string(&keep).unwrap(), "not prov's");
    assert_eq!(fs_err::read_dir(outside.path()).unwrap().count(), 1);
}

/// A source readable by its owner only must not become an object everyone can read: the
/// store is created readable by its owner only, unless `prov init --shared`.
#[test]
fn the_store_is_readable_by_its_owner_only_unless_shared() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| fs_err::metadata(p).unwrap().permissions().mode() & 0o777;
    let p = Project::with_recipes();
    assert_eq!(mode(&p.path(".prov")), 0o700);
    let secret = p.write("recipes/data/secret.jsonl", "{\"id\":\"s\",\"text\":\"private\"}\n");
    fs_err::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    p.write(
        "recipes/secret.yaml",
        "schema: 1\nname: secret\nseed: 1\nsources:\n  s: {path: data/secret.jsonl}\nstages: {}\n",
    );
    p.prov(&["run", "recipes/secret.yaml"]).success();
    let digest = prov_store::Digest::of(&fs_err::read(&secret).unwrap()).to_string();
    assert!(p.object_file(&digest).is_file());
    assert_eq!(mode(&p.path(".prov")), 0o700, "others cannot reach the object");

    let shared = tempfile::tempdir().unwrap();
    p.prov(&["init", "--shared", shared.path().to_str().unwrap()]).success();
    assert_eq!(mode(&shared.path().join(".prov")), 0o755);
}

/// A lockfile written elsewhere may name a recipe outside the project; `prov status` does
/// not read it (its lines would have been quoted in the re-lock's error).
#[test]
fn status_does_not_read_a_recipe_outside_the_project() {
    let p = Project::with_recipes();
    p.prov(&["lock", "recipes/quickstart.yaml"]).success();
    let mut lock: serde_json::Value =
        serde_json::from_slice(&fs_err::read(p.path("lockfiles/quickstart.lock")).unwrap()).unwrap();
    for (name, path) in [("absolute", "/etc/passwd"), ("climbing", "../../etc/passwd")] {
        lock["recipe"]["path"] = path.into();
        fs_err::write(p.path(&format!("lockfiles/{name}.lock")), prov_manifest::encode_value(&lock)).unwrap();
    }
    let r = p.prov(&["status"]);
    r.success();
    assert!(r.stdout().contains("recipe path: invalid path `/etc/passwd`: paths are relative"), "{}", r.describe());
    assert!(r.stdout().contains("path components cannot be empty, `.` or `..`"), "{}", r.describe());
    assert!(!r.stdout().contains("root:") && !r.stderr().contains("root:"), "{}", r.describe());
}
