//! A lockfile is read, not trusted (issue 13, item 3): every execution checks it against the
//! stage kinds as `prov lock` does, and confines its sources to the project. Each case below
//! is a well-formed lockfile (canonical JSON, valid record) edited by hand: before these
//! checks, a `shards` count of 0 panicked mid-stage with the execution left `running`, a dedup
//! config whose bands × rows differed from its permutations indexed past a table, and a source
//! path could leave the project, follow a symlink to `/dev/zero` or open a FIFO and hang.

use serde_json::{Value, json};

use crate::common::{Project, Run};

const RECIPE: &str = "\
schema: 1
name: edits
seed: 1
sources:
  udhr: {path: data/quickstart/udhr-sample.jsonl}
stages:
  shards: {kind: shard, inputs: {docs: udhr}, params: {shards: 2}}
  dedup: {kind: dedup, inputs: {docs: shards}}
  half: {kind: sample, inputs: {docs: dedup.dataset}, params: {fraction: 0.5}}
";

fn locked() -> (Project, Value) {
    let p = Project::with_recipes();
    p.write("recipes/edits.yaml", RECIPE);
    p.prov(&["lock", "recipes/edits.yaml"]).success();
    let lock: Value = serde_json::from_slice(&fs_err::read(p.path("lockfiles/edits.lock")).unwrap()).unwrap();
    (p, lock)
}

/// Writes `lock` canonically (as a hand edit that keeps the file well-formed would) and runs it.
fn run_edited(p: &Project, lock: &Value) -> Run {
    fs_err::write(p.path("lockfiles/edited.lock"), prov_manifest::encode_value(lock)).unwrap();
    p.prov(&["run", "lockfiles/edited.lock"])
}

/// An edit of a lockfile's JSON.
type Edit = fn(&mut Value);

fn stage<'v>(lock: &'v mut Value, name: &str) -> &'v mut Value {
    lock["stages"].as_array_mut().unwrap().iter_mut().find(|s| s["name"] == name).unwrap()
}

#[test]
fn edited_stage_entries_are_refused_naming_stage_and_field() {
    let (p, lock) = locked();
    run_edited(&p, &lock).success();
    let cases: [(Edit, &str); 10] = [
        (
            |l| stage(l, "shards")["config"]["shards"] = json!(0),
            "stage `shards`, field `config.shards`: `shards` must be between 1 and 1000000, got 0",
        ),
        (|l| stage(l, "shards")["config"]["shards"] = json!(2_000_000), "must be between 1 and 1000000, got 2000000"),
        (|l| stage(l, "dedup")["config"]["bands"] = json!(16), "bands × rows must equal permutations: 16 × 8 ≠ 112"),
        (
            |l| {
                stage(l, "dedup")["config"].as_object_mut().unwrap().remove("verify_jaccard");
            },
            "stage `dedup`, field `config`: not the config `prov lock` resolves from it (`verify_jaccard` is missing; it resolves to 0.8)",
        ),
        (
            |l| {
                let inputs = stage(l, "dedup")["inputs"].as_object_mut().unwrap();
                let docs = inputs.remove("docs").unwrap();
                inputs.insert("documents".into(), docs);
            },
            "stage `dedup`, field `inputs`: `dedup` needs input `docs`",
        ),
        (
            |l| stage(l, "half")["inputs"]["docs"]["output"] = json!("ledger"),
            "stage `half`, field `inputs.docs`: `dedup.ledger` is a ledger, but input `docs` of `sample` takes",
        ),
        (
            |l| stage(l, "half")["inputs"]["docs"]["output"] = json!("nothing"),
            "stage `half`, field `inputs.docs`: `dedup` has no output `nothing`",
        ),
        (
            |l| {
                stage(l, "dedup")["seeds"].as_object_mut().unwrap().clear();
            },
            "stage `dedup`, field `seeds`: none, but `dedup` takes `minhash`",
        ),
        (
            |l| stage(l, "dedup")["determinism"] = json!("envelope"),
            "stage `dedup`, field `determinism`: `envelope`, but `dedup` with this config is `portable`",
        ),
        (
            |l| {
                stage(l, "half")["stage_kind"] = json!("external");
                stage(l, "half")["version"] = json!(2);
            },
            "stage `half`, field `stage_kind`: `external` runs commands, and the lockfile does not allow commands",
        ),
    ];
    for (edit, expected) in cases {
        let mut edited = lock.clone();
        edit(&mut edited);
        let r = run_edited(&p, &edited);
        r.exit(1);
        assert!(r.stderr().contains(expected), "{expected}\n{}", r.describe());
        assert!(r.stderr().contains("hint:"), "{}", r.describe());
    }
    // Refused before anything ran: no execution was logged for them, none is left `running`.
    let log = p.json(&["log"]);
    assert_eq!(log.iter().filter(|l| l["type"] == "log").count(), 1, "{log:?}");
}

/// Runs `prov` and kills it after `seconds`: a source that blocks must not hang the test.
fn run_within(p: &Project, args: &[&str], seconds: u64) -> Run {
    let mut child =
        p.command(args).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("prov {args:?} still running after {seconds} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Run { args: args.iter().map(|s| (*s).to_owned()).collect(), output: child.wait_with_output().unwrap() }
}

#[test]
fn sources_stay_in_the_project_and_are_regular_files_or_directories() {
    let (p, lock) = locked();
    let outside = tempfile::tempdir().unwrap();
    fs_err::write(outside.path().join("secret.jsonl"), "{\"id\":\"s\",\"text\":\"outside the project\"}\n").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.jsonl"), p.path("recipes/data/escape.jsonl")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", p.path("recipes/data/zero.jsonl")).unwrap();
    let fifo = p.path("recipes/data/fifo.jsonl");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());

    let with_path = |path: &str| {
        let mut edited = lock.clone();
        edited["sources"][0]["path"] = json!(path);
        fs_err::write(p.path("lockfiles/edited.lock"), prov_manifest::encode_value(&edited)).unwrap();
        run_within(&p, &["run", "lockfiles/edited.lock"], 30)
    };
    for (path, expected) in [
        ("../secret.jsonl", "path components cannot be empty, `.` or `..`"),
        ("/etc/passwd", "paths are relative"),
        ("recipes/data/escape.jsonl", "source `recipes/data/escape.jsonl` leads outside the project"),
        ("recipes/data/zero.jsonl", "source `recipes/data/zero.jsonl` leads outside the project"),
        ("recipes/data/fifo.jsonl", "source `recipes/data/fifo.jsonl` is a FIFO, not a regular file or a directory"),
    ] {
        let r = with_path(path);
        r.exit(1);
        assert!(r.stderr().contains(expected), "{path}: {expected}\n{}", r.describe());
    }
    // `prov lock` refuses the same paths in a recipe.
    for (path, expected) in [
        ("data/escape.jsonl", "leads outside the project"),
        ("data/fifo.jsonl", "is a FIFO"),
        ("../../secret.jsonl", "is outside the project root"),
    ] {
        p.write("recipes/bad.yaml", &RECIPE.replace("data/quickstart/udhr-sample.jsonl", path));
        let r = run_within(&p, &["lock", "recipes/bad.yaml"], 30);
        r.exit(1);
        assert!(r.stderr().contains(expected), "{path}: {expected}\n{}", r.describe());
    }
}

/// A sparse source file (a tarball made with `tar --sparse` unpacks one: a few hundred bytes
/// on disk that read as gigabytes of zeros) is refused by `prov lock`, as a file or inside a
/// directory, and by a lockfile that pins it (its author hashed it): the store would keep
/// every byte (an adversarial review's 264-byte tarball made a 2.1 GiB store).
#[test]
fn sparse_source_files_are_refused() {
    let (p, lock) = locked();
    let sparse = p.path("recipes/data/holes/big.jsonl");
    fs_err::create_dir_all(sparse.parent().unwrap()).unwrap();
    let file = fs_err::File::create(&sparse).unwrap();
    file.set_len(64 << 20).unwrap();
    drop(file);
    let blocks = std::os::unix::fs::MetadataExt::blocks(&fs_err::metadata(&sparse).unwrap());
    assert!(blocks < 64, "the file system made a sparse file ({blocks} blocks)");
    for path in ["data/holes/big.jsonl", "data/holes"] {
        p.write("recipes/bad.yaml", &RECIPE.replace("data/quickstart/udhr-sample.jsonl", path));
        let r = run_within(&p, &["lock", "recipes/bad.yaml"], 30);
        r.exit(1);
        assert!(r.stderr().contains("is a sparse file: it reads as 67108864 bytes"), "{path}\n{}", r.describe());
    }
    // A lockfile that pins it, as its author's `prov lock` would have without the check.
    let mut edited = lock.clone();
    edited["sources"][0]["path"] = json!("recipes/data/holes/big.jsonl");
    edited["sources"][0]["content"] =
        json!({"digest": prov_exec::hash_file(&sparse).unwrap().0.to_string(), "size": 64u64 << 20, "type": "file"});
    fs_err::write(p.path("lockfiles/edited.lock"), prov_manifest::encode_value(&edited)).unwrap();
    let r = run_within(&p, &["run", "lockfiles/edited.lock"], 60);
    assert!(r.stderr().contains("is a sparse file"), "{}", r.describe());
    assert!(
        fs_err::read_dir(p.path(".prov/tmp")).unwrap().all(|e| e.unwrap().metadata().unwrap().len() < 1 << 20),
        "nothing of it in tmp/"
    );
}

/// A source whose bytes changed since it was locked is refused (exit 2) without its new
/// bytes entering the store: they are hashed on their way to tmp/ and dropped there.
#[test]
fn changed_source_bytes_never_enter_the_store() {
    let (p, _) = locked();
    let source = p.path("recipes/data/quickstart/udhr-sample.jsonl");
    let original = fs_err::read_to_string(&source).unwrap();
    // One byte changed (streamed to tmp/, hashed, dropped), then a line added (another size:
    // hashed in place, never copied).
    let same_size = original.replacen("Universal", "universal", 1);
    let longer = format!("{original}{{\"id\":\"added\",\"text\":\"a line added after locking\"}}\n");
    for text in [same_size, longer] {
        fs_err::write(&source, &text).unwrap();
        let r = p.prov(&["run", "lockfiles/edits.lock"]);
        r.exit(2);
        assert!(r.stderr().contains("changed since it was locked"), "{}", r.describe());
        let new = prov_store::Digest::of(text.as_bytes());
        assert!(r.stderr().contains(&new.to_string()), "{}", r.describe());
        assert!(!p.object_file(&new.to_string()).exists(), "the changed bytes were stored");
        assert!(fs_err::read_dir(p.path(".prov/tmp")).unwrap().next().is_none(), "nothing is left in tmp/");
    }
}

/// A lockfile whose source size was edited, its digest left alone, contradicts itself: it is
/// refused as such (exit 1), not as a source that changed with the same digest on both sides.
#[test]
fn an_edited_source_size_is_named_as_an_edit() {
    let (p, mut lock) = locked();
    let source = lock["sources"][0]["content"].clone();
    let size = source["size"].as_u64().unwrap();
    for edited in [size + 1, 1_000_000_000_000_000_000] {
        lock["sources"][0]["content"]["size"] = json!(edited);
        let r = run_edited(&p, &lock);
        r.exit(1);
        let says =
            format!("pins `{}` as {edited} bytes, but those bytes are {size}", source["digest"].as_str().unwrap());
        assert!(r.stderr().contains(&says), "{}", r.describe());
    }
}
