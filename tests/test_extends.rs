//! A recipe that `extends` another: a variant with the base's sources, stages and seed, some
//! stages replaced or added. Its stages that equal the base's lock to the same stage keys, so
//! a variant run reuses the base run's outputs.

use serde_json::Value;

use crate::common::Project;

const VARIANT: &str = "\
schema: 1
name: quickstart-quarter
extends: quickstart.yaml
stages:
  half:
    kind: sample
    inputs: {docs: shards}
    params:
      fraction: 0.25
  quarter-sums:
    kind: external
    inputs: {sample: half}
    params:
      command: [sh, -c, \"cat inputs/sample/*.parquet | wc -c > BYTES\"]
      outputs:
        bytes: BYTES
";

fn lockfile(p: &Project, name: &str) -> Value {
    serde_json::from_str(&fs_err::read_to_string(p.path(&format!("lockfiles/{name}.lock"))).unwrap()).unwrap()
}

fn locked_stage<'a>(lock: &'a Value, name: &str) -> &'a Value {
    lock["stages"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("{name}"))
}

#[test]
fn a_variant_inherits_replaces_and_adds_and_reuses_the_base_run() {
    let p = Project::with_recipes();
    p.write("recipes/quickstart-quarter.yaml", VARIANT);
    p.prov(&["lock", "recipes/quickstart.yaml"]).success();
    p.prov(&["lock", "recipes/quickstart-quarter.yaml"]).success();
    let (base, variant) = (lockfile(&p, "quickstart"), lockfile(&p, "quickstart-quarter"));
    assert_eq!(variant["recipe"]["name"], "quickstart-quarter");
    assert_eq!(variant["recipe"]["path"], "recipes/quickstart-quarter.yaml");
    assert_eq!((&variant["seed"], &variant["allow_commands"]), (&base["seed"], &base["allow_commands"]), "inherited");
    assert_eq!(variant["sources"], base["sources"], "paths relative to the base's directory");
    for same in ["shards", "checksums"] {
        assert_eq!(locked_stage(&variant, same), locked_stage(&base, same), "{same}");
    }
    assert_eq!(locked_stage(&variant, "half")["config"]["fraction"], 0.25);
    assert_eq!(locked_stage(&variant, "half")["seeds"], locked_stage(&base, "half")["seeds"], "same master seed");
    assert!(locked_stage(&base, "half")["config"]["fraction"] == 0.5);
    assert_eq!(variant["stages"].as_array().unwrap().len(), base["stages"].as_array().unwrap().len() + 1);

    p.prov(&["run", "lockfiles/quickstart.lock"]).success();
    let run = p.json(&["run", "lockfiles/quickstart-quarter.lock"]);
    let status = |name: &str| -> String {
        let s = run.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == name).unwrap();
        s["data"]["status"].as_str().unwrap().to_owned()
    };
    assert_eq!(status("shards"), "cached", "the base run's outputs are reused");
    assert_eq!(status("half"), "executed");
    assert_eq!(status("quarter-sums"), "executed");
    p.prov(&["replay", "lockfiles/quickstart-quarter.lock"]).success();
}

#[test]
fn errors_in_a_base_name_the_base_file() {
    let p = Project::with_recipes();
    p.write("recipes/base.yaml", "schema: 1\nname: base\nseed: 1\nstages:\n  s:\n    kind: shardd\n");
    p.write("recipes/child.yaml", "schema: 1\nname: child\nextends: base.yaml\n");
    let r = p.prov(&["lock", "recipes/child.yaml"]);
    r.exit(1);
    assert!(
        r.stderr().contains("recipes/base.yaml:6:5: stages.s.kind: unknown stage kind `shardd`"),
        "{}",
        r.describe()
    );
    // A stage of the variant may not take a name the base gives a source.
    p.write(
        "recipes/base.yaml",
        "schema: 1\nname: base\nseed: 1\nsources:\n  s: {path: data/quickstart/udhr-sample.jsonl}\n",
    );
    p.write(
        "recipes/child.yaml",
        "schema: 1\nname: child\nextends: base.yaml\nstages:\n  s: {kind: shard, inputs: {docs: s}}\n",
    );
    let r = p.prov(&["lock", "recipes/child.yaml"]);
    r.exit(1);
    assert!(
        r.stderr().contains("recipes/child.yaml:5:3: stages.s: `s` names both a source and a stage"),
        "{}",
        r.describe()
    );
    // Two recipes that extend each other.
    p.write("recipes/base.yaml", "schema: 1\nname: base\nextends: child.yaml\n");
    let r = p.prov(&["lock", "recipes/child.yaml"]);
    r.exit(1);
    assert!(
        r.stderr().contains("recipes/base.yaml:3:1: extends: `child.yaml` extends, directly or not, this recipe"),
        "{}",
        r.describe()
    );
}

/// `extends` reads a recipe file of the project, as sources are confined to it: a recipe
/// handed over could name a private key outside the project, whose text a parse error would
/// quote (and `prov status` re-locks every lockfile's recipe), `/dev/zero`, or a FIFO that
/// never ends. Each is refused without reading it (an adversarial review's inputs).
#[test]
fn extends_reads_only_recipe_files_of_the_project() {
    let p = Project::with_recipes();
    let secret = p.root.parent().unwrap().join("id_ed25519");
    fs_err::write(&secret, "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n").unwrap();
    let fifo = p.path("recipes/pipe.yaml");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    p.write("recipes/big.yaml", &format!("schema: 1\n#{}\n", "x".repeat(2 << 20)));
    for (base, why) in [
        (secret.display().to_string(), "is outside the project"),
        ("../../id_ed25519".to_owned(), "is outside the project"),
        ("/dev/zero".to_owned(), "is outside the project"),
        ("pipe.yaml".to_owned(), "not a regular file"),
        ("big.yaml".to_owned(), "at most 1048576 are read"),
    ] {
        p.write("recipes/child.yaml", &format!("schema: 1\nname: child\nextends: {base}\n"));
        for args in [&["lock", "recipes/child.yaml"][..], &["run", "recipes/child.yaml"]] {
            let r = p.prov(args);
            r.exit(1);
            assert!(r.stderr().contains(why) && !r.stderr().contains("PRIVATE KEY"), "{base}: {}", r.describe());
        }
    }
    // A key inside the project (where `prov attest --generate-key` may put one): read, as a
    // recipe of the project, but no error quotes it (a review of the fix found the parse
    // error quoting the whole key).
    p.write(
        "keys/signing.key",
        "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIKeyMaterialKeyMaterialXYZ\n-----END PRIVATE KEY-----\n",
    );
    p.write("recipes/child.yaml", "schema: 1\nname: child\nextends: ../keys/signing.key\n");
    let r = p.prov(&["lock", "recipes/child.yaml"]);
    r.exit(1);
    assert!(!r.stderr().contains("KeyMaterial") && r.stderr().contains("is not a recipe file"), "{}", r.describe());
    // Nor a `.env`, or a YAML file of the project that is no recipe (a review found both
    // quoted: the first by its source line, the second by serde's "invalid type").
    p.write(".env", "HF_TOKEN=hf_TOPSECRET\n");
    p.write("config/db.yaml", "schema: TOPSECRET-db-password\nuser: admin\n");
    for (base, why) in [("../.env", "is not a recipe file"), ("../config/db.yaml", "is not a recipe (a YAML mapping")] {
        p.write("recipes/child.yaml", &format!("schema: 1\nname: child\nextends: {base}\n"));
        let r = p.prov(&["lock", "recipes/child.yaml"]);
        r.exit(1);
        assert!(!r.stderr().contains("TOPSECRET") && r.stderr().contains(why), "{base}: {}", r.describe());
    }
    p.write("recipes/child.yaml", "schema: 1\nname: child\nextends: ../keys/signing.key\n");
    // A lockfile of the child, locked while it extended a recipe of the project: `prov status`
    // re-locks it against the key and says the recipe changed, quoting nothing of the key.
    p.write("recipes/base.yaml", "schema: 1\nname: base\nseed: 1\n");
    p.write("recipes/child.yaml", "schema: 1\nname: child\nextends: base.yaml\n");
    p.prov(&["lock", "recipes/child.yaml"]).success();
    p.write("recipes/child.yaml", "schema: 1\nname: child\nextends: ../../id_ed25519\n");
    let r = p.prov(&["status"]);
    assert!(!r.stdout().contains("PRIVATE KEY") && !r.stderr().contains("PRIVATE KEY"), "{}", r.describe());
    assert!(r.stdout().contains("is outside the project"), "{}", r.describe());
    p.write("recipes/child.yaml", "schema: 1\nname: child\nextends: ../keys/signing.key\n");
    let r = p.prov(&["status"]);
    let said = format!("{}{}", r.stdout(), r.stderr());
    assert!(!said.contains("KeyMaterial") && said.contains("is not a recipe file"), "{}", r.describe());
}

/// A base recipe that starts with a byte order mark is read as one that does not (it was
/// refused as "not a recipe", though it locks on its own).
#[test]
fn a_base_recipe_with_a_byte_order_mark_is_read() {
    let p = Project::with_recipes();
    let base = fs_err::read_to_string(p.path("recipes/quickstart.yaml")).unwrap();
    p.write("recipes/bom-base.yaml", &format!("\u{feff}{base}"));
    p.write("recipes/child.yaml", "schema: 1\nname: child\nextends: bom-base.yaml\n");
    p.prov(&["lock", "recipes/child.yaml"]).success();
}
