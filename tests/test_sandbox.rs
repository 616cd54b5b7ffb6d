//! `external` commands run in a bubblewrap sandbox (issue 13, item 4): each test's command
//! tries to leave it, and the stage fails instead (or, for the network, succeeds only when the
//! stage asks for it); a lockfile from elsewhere needs `--allow-commands`; without bubblewrap
//! nothing runs.

use std::io::Read as _;

use crate::common::{Project, Run};

/// A recipe with one `external` stage running `sh -c SCRIPT`, with extra params.
fn recipe(script: &str, params: &str) -> String {
    format!(
        "schema: 1\nname: box\nseed: 1\nallow_commands: true\nsources:\n  udhr:\n    path: data/quickstart/udhr-sample.jsonl\n\
         stages:\n  cmd:\n    kind: external\n    inputs: {{docs: udhr}}\n    params:\n      command: [sh, -c, {}]\n      outputs: {{out: out.txt}}\n{params}",
        serde_json::Value::from(script)
    )
}

fn run(p: &Project, script: &str, params: &str) -> Run {
    p.write("recipes/box.yaml", &recipe(script, params));
    p.prov(&["run", "recipes/box.yaml"])
}

#[test]
fn a_command_sees_its_inputs_and_the_system_only() {
    let p = Project::with_recipes();
    run(&p, "wc -l < inputs/docs > out.txt", "").success();
    let secret = p.write("secret.txt", "the project's own file");
    let r = run(&p, &format!("cat {} > out.txt", secret.display()), "");
    r.exit(1);
    assert!(r.stderr().contains("No such file or directory"), "{}", r.describe());
    // Nor the store, nor the home directory of whoever runs prov.
    for path in [p.path(".prov/index.sqlite"), p.root.parent().unwrap().to_path_buf()] {
        let r = run(&p, &format!("ls {} > out.txt", path.display()), "");
        r.exit(1);
    }
}

#[test]
fn a_command_writes_only_in_its_scratch_directory() {
    let p = Project::with_recipes();
    let target = p.path("escaped.txt");
    let r = run(&p, &format!("echo out > {} && echo in > out.txt", target.display()), "");
    r.exit(1);
    assert!(!target.exists(), "the command wrote into the project");
    // Within the scratch directory, a file may not grow past `max_file_mib`.
    let r = run(&p, "head -c 3000000 /dev/zero > out.txt", "      max_file_mib: 1\n");
    r.exit(1);
    assert!(r.stderr().contains("failed"), "{}", r.describe());
}

#[test]
fn no_network_unless_the_stage_asks_for_it() {
    let p = Project::with_recipes();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let script = format!("bash -c 'echo hello > /dev/tcp/127.0.0.1/{port}' && echo sent > out.txt");
    let r = run(&p, &script, "");
    r.exit(1);
    assert!(listener.accept().is_err(), "a connection reached the listener");
    // The control: with `network: true` the same command reaches it.
    let r = run(&p, &script, "      network: true\n");
    r.success();
    let (mut conn, _) = listener.accept().expect("the command connected");
    let mut got = String::new();
    conn.read_to_string(&mut got).unwrap();
    assert_eq!(got, "hello\n");
}

#[test]
fn time_and_memory_are_limited() {
    let p = Project::with_recipes();
    let r = run(&p, "sleep 600; echo late > out.txt", "      timeout_seconds: 1\n");
    r.exit(1);
    assert!(r.stderr().contains("was killed after 1 s, its `timeout_seconds`"), "{}", r.describe());
    let r = run(&p, "python3 -c 'bytearray(1 << 30)' && echo big > out.txt", "      memory_mib: 256\n");
    r.exit(1);
    assert!(r.stderr().contains("MemoryError"), "{}", r.describe());
    // The limits are in the config, so in the stage key and the stage record.
    let lock = fs_err::read_to_string(p.path("lockfiles/box.lock")).unwrap();
    assert!(lock.contains(r#""memory_mib":256"#) && lock.contains(r#""network":false"#), "{lock}");
}

#[test]
fn an_output_that_is_a_link_is_not_followed() {
    let p = Project::with_recipes();
    let r = run(&p, "ln -s /usr/share/common-licenses/GPL-3 out.txt", "");
    r.exit(1);
    assert!(r.stderr().contains("as a symbolic link, which is not followed"), "{}", r.describe());
}

/// A lockfile from elsewhere asks to run commands: its own `allow_commands: true` is not
/// enough, the user must say so.
#[test]
fn commands_of_a_lockfile_from_elsewhere_need_the_users_consent() {
    let elsewhere = Project::with_recipes();
    elsewhere.write("recipes/box.yaml", &recipe("echo from elsewhere > out.txt", ""));
    elsewhere.prov(&["lock", "recipes/box.yaml"]).success();
    let p = Project::with_recipes();
    fs_err::create_dir_all(p.path("lockfiles")).unwrap();
    fs_err::copy(elsewhere.path("lockfiles/box.lock"), p.path("lockfiles/box.lock")).unwrap();
    let r = p.prov(&["run", "lockfiles/box.lock"]);
    r.exit(1);
    assert!(r.stderr().contains("runs commands (stage `cmd`"), "{}", r.describe());
    assert!(
        r.stderr().contains("hint: read its commands first; `prov lock recipes/box.yaml` adopts them"),
        "{}",
        r.describe()
    );
    p.prov(&["run", "lockfiles/box.lock", "--allow-commands"]).success();
    let r = p.prov(&["replay", "lockfiles/box.lock"]);
    r.exit(1);
    p.prov(&["replay", "lockfiles/box.lock", "--allow-commands"]).success();
    // A recipe on disk that locks to these bytes is not consent; locking it is.
    p.write("recipes/box.yaml", &recipe("echo from elsewhere > out.txt", ""));
    p.prov(&["run", "lockfiles/box.lock"]).exit(1);
    p.prov(&["lock", "recipes/box.yaml"]).success();
    p.prov(&["run", "lockfiles/box.lock"]).success();
}

/// A file on disk is no consent: a lockfile's commands run only when locking a recipe in
/// this store adopted exactly them, with what they read. Handed a lockfile with its data and
/// a recipe that locks to it (inside the pinned directory, or beside a pinned file), or a
/// lockfile that runs the project's own command on another script, the user is asked; after
/// `prov lock` of the recipe they trust, the lockfile runs. Found by two adversarial reviews:
/// each of the three ran its command without `--allow-commands` before.
#[test]
fn commands_are_adopted_by_locking_a_recipe_not_by_files_on_disk() {
    let evil = |source: &str| {
        format!(
            "schema: 1\nname: evil\nseed: 1\nallow_commands: true\nsources:\n  docs:\n    path: {source}\n\
             stages:\n  cmd:\n    kind: external\n    inputs: {{docs: docs}}\n    params:\n      command: [sh, -c, \
             \"echo ran > out.txt\"]\n      outputs: {{out: out.txt}}\n"
        )
    };
    for (source, pinned) in [(".", "inside the pinned directory"), ("docs.jsonl", "beside the pinned file")] {
        let elsewhere = Project::with_recipes();
        elsewhere.write("data/evil/recipe.yaml", &evil(source));
        elsewhere.write("data/evil/docs.jsonl", "{\"id\": \"a\", \"text\": \"x\"}\n");
        elsewhere.prov(&["lock", "data/evil/recipe.yaml"]).success();
        let p = Project::with_recipes();
        for file in ["lockfiles/evil.lock", "data/evil/recipe.yaml", "data/evil/docs.jsonl"] {
            p.write(file, &fs_err::read_to_string(elsewhere.path(file)).unwrap());
        }
        // The author's store came along too, with its adoption records (an adversarial
        // review's handover): they are the author's, keyed with the author's consent key.
        for record in fs_err::read_dir(elsewhere.path(".prov/consent")).unwrap() {
            let record = record.unwrap().path();
            p.write(
                &format!(".prov/consent/{}", record.file_name().unwrap().to_string_lossy()),
                &fs_err::read_to_string(&record).unwrap(),
            );
        }
        let r = p.prov(&["run", "lockfiles/evil.lock"]);
        r.exit(1);
        assert!(r.stderr().contains("that were not adopted in this store"), "{pinned}: {}", r.describe());
        assert!(r.stderr().contains("`prov lock data/evil/recipe.yaml` adopts them"), "{pinned}: {}", r.describe());
        p.prov(&["replay", "lockfiles/evil.lock"]).exit(1);
        p.prov(&["run", "lockfiles/evil.lock", "--allow-commands"]).success();
    }

    // The project's own recipe runs its own script; a lockfile points the same command at
    // another script.
    let recipe = |script: &str| {
        format!(
            "schema: 1\nname: tools\nseed: 1\nallow_commands: true\nsources:\n  script:\n    path: {script}\n\
             stages:\n  cmd:\n    kind: external\n    inputs: {{script: script}}\n    params:\n      command: [sh, \
             inputs/script]\n      outputs: {{out: out.txt}}\n"
        )
    };
    let p = Project::with_recipes();
    p.write("scripts/count.sh", "echo counted > out.txt\n");
    p.write("data/evil/payload.sh", "echo payload > out.txt\n");
    p.write("recipes/tools.yaml", &recipe("../data/evil/payload.sh"));
    p.prov(&["lock", "recipes/tools.yaml", "--out", "handed.lock"]).success();
    // `prov lock` adopted that closure; a store of its own stands for the victim's.
    fs_err::remove_dir_all(p.path(".prov")).unwrap();
    p.prov(&["init"]).success();
    p.write("recipes/tools.yaml", &recipe("../scripts/count.sh"));
    // Locking says what it adopted, once: the user reads the command when it is adopted.
    let locked = p.prov(&["lock", "recipes/tools.yaml"]);
    locked.success();
    let said = "adopted the command of stage `cmd` in this store: [\"sh\",\"inputs/script\"]";
    assert!(locked.stderr().contains(said), "{}", locked.describe());
    let again = p.prov(&["lock", "recipes/tools.yaml"]);
    assert!(!again.stderr().contains("adopted"), "{}", again.describe());
    p.prov(&["run", "lockfiles/tools.lock"]).success();
    let r = p.prov(&["run", "handed.lock"]);
    r.exit(1);
    assert!(r.stderr().contains("that were not adopted in this store"), "{}", r.describe());
}

/// Without bubblewrap the command does not run at all: never unconfined.
#[test]
fn without_the_sandbox_nothing_runs() {
    let p = Project::with_recipes();
    let marker = p.path("ran.txt");
    p.write("recipes/box.yaml", &recipe(&format!("touch {}; echo x > out.txt", marker.display()), ""));
    let output = p.command(&["run", "recipes/box.yaml"]).env("PATH", "/nonexistent").output().unwrap();
    let r = Run { args: vec!["run".into()], output };
    r.exit(1);
    assert!(
        r.stderr().contains("the command sandbox cannot start: bubblewrap (`bwrap`) is not on PATH"),
        "{}",
        r.describe()
    );
    assert!(r.stderr().contains("hint: install bubblewrap"), "{}", r.describe());
    assert!(!marker.exists());
}
