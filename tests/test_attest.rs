//! Signed run attestations (`prov attest`, `prov verify-attestation`), checked against the
//! in-toto reference implementations from `PyPI` (pinned by hash in `lockfiles/requirements.txt`;
//! `tests/python/intoto_reference.py` drives them): `securesystemslib` verifies Provenant's
//! DSSE signatures and computes key ids, `in-toto-attestation` parses its Statements and SLSA
//! predicates with their protobuf schemas, `cryptography` and `ssh-keygen` write the keys
//! Provenant signs with. The other direction too: Provenant verifies what `securesystemslib`
//! signs. Every forgery (a flipped byte in a subject, the payload or the signature, another
//! key, a re-signed statement about other outputs) is refused by both sides where both can
//! judge it.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::Value;

use crate::common::{Project, flip_byte, repo_root, venv_python};

/// A change made to a statement before it is signed again.
type Lie = Box<dyn Fn(&mut Value)>;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// The reference implementations, or `None` (skipped, or failing under CI) without the venv.
struct Reference {
    python: PathBuf,
}

impl Reference {
    fn get() -> Option<Self> {
        venv_python().map(|python| Self { python })
    }

    fn call(&self, cwd: &Path, args: &[&str]) -> std::process::Output {
        std::process::Command::new(&self.python)
            .arg(repo_root().join("tests/python/intoto_reference.py"))
            .args(args)
            .current_dir(cwd)
            .output()
            .expect("the project's Python starts")
    }

    /// What the reference prints when it accepts; panics when it refuses.
    fn accepts(&self, cwd: &Path, args: &[&str]) -> Value {
        let out = self.call(cwd, args);
        assert!(out.status.success(), "the reference refused {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    /// The reference's reason for refusing; panics when it accepts.
    fn refuses(&self, cwd: &Path, args: &[&str]) -> String {
        let out = self.call(cwd, args);
        assert!(!out.status.success(), "the reference accepted {args:?}: {}", String::from_utf8_lossy(&out.stdout));
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn text(&self, cwd: &Path, args: &[&str]) -> String {
        let out = self.call(cwd, args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }
}

/// A project with the quickstart run recorded.
fn recorded() -> Project {
    let p = Project::with_recipes();
    p.prov(&["run", "recipes/quickstart.yaml"]).success();
    p
}

/// The run's outputs as `STAGE/OUTPUT` -> (BLAKE3 hex, SHA-256 hex of the object's bytes).
fn run_outputs(p: &Project) -> std::collections::BTreeMap<String, (String, String)> {
    use sha2::Digest as _;
    let mut out = std::collections::BTreeMap::new();
    for line in p.json(&["show", "lockfiles/quickstart.lock"]) {
        let Some("stage") = line["data"]["kind"].as_str() else { continue };
        let record = &line["data"]["record"];
        for (name, o) in record["outputs"].as_object().unwrap() {
            let digest = o["digest"].as_str().unwrap();
            let bytes = fs_err::read(p.object_file(digest)).unwrap();
            out.insert(
                format!("{}/{name}", record["name"].as_str().unwrap()),
                (digest["blake3:".len()..].to_owned(), hex::encode(sha2::Sha256::digest(&bytes))),
            );
        }
    }
    out
}

fn keyid_of(p: &Project, key: &str) -> String {
    let out = p.json(&["attest", "--generate-key", key]);
    out.iter().find(|l| l["type"] == "key").unwrap()["data"]["keyid"].as_str().unwrap().to_owned()
}

fn read_envelope(path: &Path) -> Value {
    serde_json::from_slice(&fs_err::read(path).unwrap()).unwrap()
}

fn write_envelope(path: &Path, envelope: &Value) {
    fs_err::write(path, serde_json::to_vec_pretty(envelope).unwrap()).unwrap();
}

fn payload_of(envelope: &Value) -> Vec<u8> {
    B64.decode(envelope["payload"].as_str().unwrap()).unwrap()
}

#[test]
fn the_in_toto_reference_verifies_provenants_attestations_with_both_algorithms() {
    let Some(reference) = Reference::get() else { return };
    let p = recorded();
    let outputs = run_outputs(&p);
    assert_eq!(outputs.len(), 4, "{outputs:?}");
    for alg in ["ed25519", "ecdsa-p256"] {
        let key = format!("{alg}.key");
        p.prov(&["attest", "--generate-key", &key, "--key-type", alg]).success();
        let keyid = p
            .json(&["attest", "lockfiles/quickstart.lock", "--key", &key, "--out", "a.json"])
            .into_iter()
            .find(|l| l["type"] == "attestation")
            .unwrap()["data"]["keyid"]
            .as_str()
            .unwrap()
            .to_owned();
        // securesystemslib gives the public key the same id Provenant does.
        assert_eq!(reference.accepts(&p.root, &["keyid", &format!("{key}.pub")])["keyid"], keyid.as_str());
        let seen = reference.accepts(&p.root, &["verify", "a.json", &format!("{key}.pub")]);
        assert_eq!(seen["verified_keyids"], serde_json::json!([keyid]), "{alg}");
        assert_eq!(seen["predicate_type"], "https://slsa.dev/provenance/v1");
        assert_eq!(seen["build_type"], "https://provenant.dev/attestation/run/v1");
        let run_manifest = p
            .json(&["show", "lockfiles/quickstart.lock"])
            .into_iter()
            .find(|l| l["type"] == "record" && l["data"]["kind"] == "run")
            .unwrap()["data"]["digest"]
            .clone();
        assert_eq!(seen["invocation_id"], run_manifest);
        // The subjects are the run's outputs, each with its BLAKE3 and the SHA-256 of its bytes.
        let subjects: std::collections::BTreeMap<String, (String, String)> = seen["subjects"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), (v["blake3"].as_str().unwrap().into(), v["sha256"].as_str().unwrap().into())))
            .collect();
        assert_eq!(subjects, outputs, "{alg}");
        // Deterministic: the same run signed by the same key is the same file.
        let first = fs_err::read(p.path("a.json")).unwrap();
        p.prov(&["attest", "lockfiles/quickstart.lock", "--key", &key, "--out", "b.json"]).success();
        assert_eq!(first, fs_err::read(p.path("b.json")).unwrap(), "{alg}");
        p.prov(&["verify-attestation", "a.json", "--key", &format!("{key}.pub"), "--run", "lockfiles/quickstart.lock"])
            .success();
    }
}

#[test]
fn keys_written_by_cryptography_and_ssh_keygen_sign_for_provenant() {
    let Some(reference) = Reference::get() else { return };
    let p = recorded();
    let mut keys: Vec<String> = Vec::new();
    for (alg, format) in [
        ("ed25519", "pkcs8"),
        ("ed25519", "openssh"),
        ("ecdsa-p256", "pkcs8"),
        ("ecdsa-p256", "sec1"),
        ("ecdsa-p256", "openssh"),
    ] {
        let name = format!("{alg}-{format}.key");
        reference.text(&p.root, &["keygen", alg, format, &name]);
        keys.push(name);
    }
    let mut fingerprints = std::collections::BTreeMap::new();
    for (t, name) in [("ed25519", "ssh-ed25519.key"), ("ecdsa", "ssh-ecdsa.key")] {
        let mut c = std::process::Command::new("ssh-keygen");
        c.args(["-q", "-t", t, "-N", "", "-C", "tester", "-f", name]).current_dir(&p.root);
        if t == "ecdsa" {
            c.args(["-b", "256"]);
        }
        assert!(c.status().expect("ssh-keygen runs (Debian openssh-client)").success());
        keys.push(name.to_owned());
        // Provenant names the key as `ssh-keygen -l` does.
        let listed = std::process::Command::new("ssh-keygen")
            .args(["-l", "-f", &format!("{name}.pub")])
            .current_dir(&p.root)
            .output()
            .unwrap();
        let fingerprint = String::from_utf8(listed.stdout).unwrap().split_whitespace().nth(1).unwrap().to_owned();
        fingerprints.insert(format!("{name}.pub"), fingerprint);
    }
    for key in &keys {
        let out = format!("{key}.att.json");
        p.prov(&["attest", "lockfiles/quickstart.lock", "--key", key, "--out", &out]).success();
        let public = format!("{key}.pub");
        let id = reference.accepts(&p.root, &["keyid", &public])["keyid"].as_str().unwrap().to_owned();
        assert_eq!(reference.accepts(&p.root, &["verify", &out, &public])["verified_keyids"], serde_json::json!([id]));
        // Provenant reads the public half in the same format (OpenSSH `.pub` lines included).
        let said = p.json(&["verify-attestation", &out, "--key", &public, "--run", "lockfiles/quickstart.lock"]);
        let signers = &said.iter().find(|l| l["type"] == "attestation").unwrap()["data"]["signers"];
        let signer = &signers[0];
        assert_eq!(signer["keyid"], id.as_str());
        if let Some(f) = fingerprints.get(&public) {
            assert_eq!(signer["openssh_fingerprint"], f.as_str(), "named as ssh-keygen -l names it");
        }
        // The same key given twice is one signer.
        let twice = p.json(&["verify-attestation", &out, "--key", &public, "--key", &public]);
        let signers = &twice.iter().find(|l| l["type"] == "attestation").unwrap()["data"]["signers"];
        assert_eq!(signers.as_array().unwrap().len(), 1, "{signers}");
    }
}

#[test]
fn provenant_verifies_what_securesystemslib_signs() {
    let Some(reference) = Reference::get() else { return };
    let p = recorded();
    p.prov(&["attest", "--generate-key", "mine.key"]).success();
    p.prov(&["attest", "lockfiles/quickstart.lock", "--key", "mine.key", "--out", "mine.json"]).success();
    fs_err::write(p.path("statement.json"), payload_of(&read_envelope(&p.path("mine.json")))).unwrap();
    for (alg, format) in [("ed25519", "pkcs8"), ("ecdsa-p256", "pkcs8")] {
        let key = format!("theirs-{alg}.key");
        reference.text(&p.root, &["keygen", alg, format, &key]);
        let signed = reference.text(&p.root, &["sign", "statement.json", &key]);
        fs_err::write(p.path("theirs.json"), &signed).unwrap();
        let public = format!("{key}.pub");
        let ok = p.prov(&["verify-attestation", "theirs.json", "--key", &public, "--run", "lockfiles/quickstart.lock"]);
        ok.success();
        assert!(ok.stdout().contains("signature valid"), "{}", ok.describe());
        // Their envelope under our key: not signed by it.
        p.prov(&["verify-attestation", "theirs.json", "--key", "mine.key.pub"]).exit(2);
        // One flipped payload byte: refused by both.
        let mut envelope = read_envelope(&p.path("theirs.json"));
        let mut payload = payload_of(&envelope);
        let at = payload.len() / 2;
        payload[at] ^= 0x01;
        envelope["payload"] = Value::String(B64.encode(&payload));
        write_envelope(&p.path("flipped.json"), &envelope);
        reference.refuses(&p.root, &["verify", "flipped.json", &public]);
        p.prov(&["verify-attestation", "flipped.json", "--key", &public]).exit(2);
    }
}

/// Every way of changing a signed attestation is refused, by Provenant and (where the change is
/// in what the reference checks) by securesystemslib.
#[test]
fn forged_attestations_are_refused_by_both_sides() {
    let Some(reference) = Reference::get() else { return };
    let p = recorded();
    let a = keyid_of(&p, "a.key");
    keyid_of(&p, "b.key");
    p.prov(&["attest", "lockfiles/quickstart.lock", "--key", "a.key", "--out", "good.json"]).success();
    p.prov(&["attest", "lockfiles/quickstart.lock", "--key", "b.key", "--out", "by-b.json"]).success();
    let good = read_envelope(&p.path("good.json"));
    let verify =
        |file: &str| p.prov(&["verify-attestation", file, "--key", "a.key.pub", "--run", "lockfiles/quickstart.lock"]);
    verify("good.json").success();

    // A flipped byte in a subject's digest.
    let mut forged = good.clone();
    let text = String::from_utf8(payload_of(&good)).unwrap();
    let statement: Value = serde_json::from_str(&text).unwrap();
    let digest = statement["subject"][1]["digest"]["sha256"].as_str().unwrap();
    let flipped = format!("{}{}", if digest.starts_with('0') { "1" } else { "0" }, &digest[1..]);
    forged["payload"] = Value::String(B64.encode(text.replace(digest, &flipped)));
    write_envelope(&p.path("subject.json"), &forged);
    reference.refuses(&p.root, &["verify", "subject.json", "a.key.pub"]);
    assert!(verify("subject.json").exit(2).stderr().contains("no signature verifies"));

    // A flipped bit in the signature.
    let mut forged = good.clone();
    let mut sig = B64.decode(good["signatures"][0]["sig"].as_str().unwrap()).unwrap();
    sig[10] ^= 0x01;
    forged["signatures"][0]["sig"] = Value::String(B64.encode(&sig));
    write_envelope(&p.path("sig.json"), &forged);
    reference.refuses(&p.root, &["verify", "sig.json", "a.key.pub"]);
    verify("sig.json").exit(2);

    // Signed by b, with a's key id written over b's: the key id is not trusted.
    let mut forged = read_envelope(&p.path("by-b.json"));
    forged["signatures"][0]["keyid"] = Value::String(a.clone());
    write_envelope(&p.path("keyid.json"), &forged);
    reference.refuses(&p.root, &["verify", "keyid.json", "a.key.pub"]);
    verify("keyid.json").exit(2);
    verify("by-b.json").exit(2);

    // The payload type changed: the signature covers it.
    let mut forged = good.clone();
    forged["payloadType"] = Value::String("application/json".into());
    write_envelope(&p.path("type.json"), &forged);
    reference.refuses(&p.root, &["verify", "type.json", "a.key.pub"]);
    verify("type.json").exit(2);

    // Statements signed by the right key that lie about the run: the signature holds, so only
    // the check against the store can refuse them. Each is re-signed by `a` through
    // securesystemslib, so the envelope is as well-formed as a real one.
    let a_pem = p.path("a.key");
    let lies: Vec<(&str, Lie)> = vec![
        (
            "a subject's digest",
            Box::new(move |s: &mut Value| s["subject"][1]["digest"]["sha256"] = Value::String(flipped.clone())),
        ),
        (
            "a dropped subject",
            Box::new(|s: &mut Value| {
                s["subject"].as_array_mut().unwrap().pop();
            }),
        ),
        (
            "an added subject",
            Box::new(|s: &mut Value| {
                let extra = serde_json::json!({"name": "extra/out", "digest": {"sha256": "00".repeat(32)}});
                s["subject"].as_array_mut().unwrap().push(extra);
            }),
        ),
        ("a renamed subject", Box::new(|s: &mut Value| s["subject"][0]["name"] = Value::String("udhr/renamed".into()))),
        (
            "another lockfile",
            Box::new(|s: &mut Value| {
                s["predicate"]["buildDefinition"]["externalParameters"]["lockfile"]["blake3"] =
                    Value::String("ab".repeat(32));
            }),
        ),
        (
            "another run record",
            Box::new(|s: &mut Value| {
                s["predicate"]["runDetails"]["metadata"]["invocationId"] =
                    Value::String(format!("blake3:{}", "cd".repeat(32)));
            }),
        ),
    ];
    for (what, lie) in lies {
        let mut s = statement.clone();
        lie(&mut s);
        fs_err::write(p.path("lie.statement"), serde_json::to_vec(&s).unwrap()).unwrap();
        let signed = reference.text(&p.root, &["sign", "lie.statement", a_pem.to_str().unwrap()]);
        fs_err::write(p.path("lie.json"), signed).unwrap();
        // Signed by a: the signature holds, for the reference and for Provenant.
        reference.accepts(&p.root, &["verify", "lie.json", "a.key.pub"]);
        if what == "no lockfile parameter" {
            // A Provenant build type without its parameters does not read: refused as input.
            let r = p.prov(&["verify-attestation", "lie.json", "--key", "a.key.pub"]);
            assert!(r.exit(1).stderr().contains("externalParameters.lockfile"), "{}", r.describe());
            continue;
        }
        p.prov(&["verify-attestation", "lie.json", "--key", "a.key.pub"]).success();
        let run = verify("lie.json");
        run.exit(2);
        assert!(run.stderr().contains("not about this run"), "{what}: {}", run.describe());
    }

    // The store's copy of an output damaged after attesting: the subjects no longer check.
    let half = run_outputs(&p).remove("half/dataset").unwrap().0;
    flip_byte(&p.object_file(&format!("blake3:{half}")), 5);
    verify("good.json").exit(2);
}

#[test]
fn show_lists_a_runs_attestations_and_gc_keeps_them() {
    let p = recorded();
    keyid_of(&p, "producer.key");
    keyid_of(&p, "auditor.key");
    p.prov(&["attest", "lockfiles/quickstart.lock", "--key", "producer.key"]).success();
    // A second party's attestation, checked and then kept with `--add`.
    let other = Project::with_recipes();
    other.prov(&["run", "recipes/quickstart.yaml"]).success();
    fs_err::copy(p.path("auditor.key"), other.path("auditor.key")).unwrap();
    other.prov(&["attest", "lockfiles/quickstart.lock", "--key", "auditor.key", "--out", "theirs.json"]).success();
    fs_err::copy(other.path("theirs.json"), p.path("theirs.json")).unwrap();
    // Without `--run` there is nothing to keep it with.
    p.prov(&["verify-attestation", "theirs.json", "--key", "auditor.key.pub", "--add"]).exit(1);
    p.prov(&[
        "verify-attestation",
        "theirs.json",
        "--key",
        "auditor.key.pub",
        "--run",
        "lockfiles/quickstart.lock",
        "--add",
    ])
    .success();
    p.prov(&["gc"]).success();
    let shown = p.json(&["show", "lockfiles/quickstart.lock"]);
    let listed: Vec<&Value> = shown.iter().filter(|l| l["type"] == "attestation").collect();
    assert_eq!(listed.len(), 2, "{shown:?}");
    for a in &listed {
        // The envelope survived gc and reads back as an envelope that verifies.
        let envelope = a["data"]["envelope"].as_str().unwrap();
        fs_err::copy(p.object_file(envelope), p.path("kept.json")).unwrap();
        let run = p.prov(&["verify-attestation", "kept.json", "--key", "producer.key.pub", "--key", "auditor.key.pub"]);
        run.success();
    }
    let text = p.prov(&["show", "lockfiles/quickstart.lock"]).success().stdout();
    assert!(text.contains("attestations (2, signatures not checked here"), "{text}");
}

#[test]
fn unusable_keys_are_input_errors_with_a_hint() {
    let p = recorded();
    p.prov(&["attest", "--generate-key", "k"]).success();
    // Never overwrites a key.
    assert!(p.prov(&["attest", "--generate-key", "k"]).exit(1).stderr().contains("refusing to overwrite"));
    let mode = std::os::unix::fs::PermissionsExt::mode(&fs_err::metadata(p.path("k")).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "the private key is its owner's only");
    // The public half where the private key is needed, and back.
    let e = p.prov(&["attest", "lockfiles/quickstart.lock", "--key", "k.pub"]).exit(1).stderr();
    assert!(e.contains("this is a public key") && e.contains("hint:"), "{e}");
    p.prov(&["attest", "lockfiles/quickstart.lock", "--key", "k", "--out", "a.json"]).success();
    assert!(p.prov(&["verify-attestation", "a.json", "--key", "k"]).exit(1).stderr().contains("this is a private key"));
    // An encrypted key: refused, saying how to get an unencrypted copy.
    let status = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "secret", "-f", "enc"])
        .current_dir(&p.root)
        .status()
        .expect("ssh-keygen runs");
    assert!(status.success());
    let e = p.prov(&["attest", "lockfiles/quickstart.lock", "--key", "enc"]).exit(1).stderr();
    assert!(e.contains("encrypted") && e.contains("ssh-keygen -p"), "{e}");
    // Not a key; not an envelope.
    p.write("junk", "hello");
    assert!(p.prov(&["attest", "lockfiles/quickstart.lock", "--key", "junk"]).exit(1).stderr().contains("hint:"));
    p.prov(&["verify-attestation", "junk", "--key", "k.pub"]).exit(1);
}

#[test]
fn a_replay_that_reproduces_the_run_is_signed_and_the_reference_verifies_it() {
    let Some(reference) = Reference::get() else { return };
    let p = recorded();
    keyid_of(&p, "r.key");
    let out = p.json(&["replay", "lockfiles/quickstart.lock", "--attest", "r.key", "--attest-out", "replay.json"]);
    let said = &out.iter().find(|l| l["type"] == "attestation").unwrap()["data"];
    assert_eq!(said["role"], "replay");
    let seen = reference.accepts(&p.root, &["verify", "replay.json", "r.key.pub"]);
    assert_eq!(seen["build_type"], "https://provenant.dev/attestation/replay/v1");
    assert_eq!(seen["invocation_id"], said["replay_record"]);
    assert_eq!(seen["subjects"].as_object().unwrap().len(), run_outputs(&p).len());
    let checked =
        p.prov(&["verify-attestation", "replay.json", "--key", "r.key.pub", "--run", "lockfiles/quickstart.lock"]);
    assert!(checked.success().stdout().contains("(replay attestation)"), "{}", checked.describe());
    // A partial replay is not evidence of the whole run: refused before anything runs.
    p.prov(&["replay", "lockfiles/quickstart.lock", "--from", "half", "--attest", "r.key"]).exit(1);
    // A key that cannot sign is refused before the replay starts.
    let r = p.prov(&["--json", "replay", "lockfiles/quickstart.lock", "--attest", "r.key.pub"]);
    r.exit(1);
    assert!(!r.stdout().contains("\"stage\""), "no stage ran: {}", r.describe());
}

/// `prov audit`'s replay claim counts the listed replayers who signed a replay that reproduced
/// the run; it does not count unlisted keys, counts a replayer once, and fails on a listed
/// replayer's signed statement of other outputs, even one planted in the store well-formed.
#[test]
fn the_audit_counts_independent_signed_replays() {
    let Some(reference) = Reference::get() else { return };
    let producer = recorded();
    producer.write(
        "policy/replay.yaml",
        "schema: 1\nname: r\nclaims:\n  - kind: replay\n    replayers: [keys/alice.pub, keys/bob.pub]\n    min_signed_replays: 1\n",
    );
    // Two replayers with their own stores and keys; a third party not in the policy.
    let mut files = Vec::new();
    for who in ["alice", "bob", "mallory"] {
        let r = recorded();
        r.prov(&["attest", "--generate-key", who]).success();
        fs_err::create_dir_all(producer.path("policy/keys")).unwrap();
        fs_err::copy(r.path(&format!("{who}.pub")), producer.path(&format!("policy/keys/{who}.pub"))).unwrap();
        r.prov(&["replay", "lockfiles/quickstart.lock", "--attest", who, "--attest-out", "replay.json"]).success();
        let file = format!("{who}-replay.json");
        fs_err::copy(r.path("replay.json"), producer.path(&file)).unwrap();
        if who == "alice" {
            fs_err::copy(r.path(who), producer.path("alice.key")).unwrap();
        }
        files.push(file);
    }
    let audit = || producer.prov(&["audit", "lockfiles/quickstart.lock", "--policy", "policy/replay.yaml"]);
    // No replay in this store, no signed replay: cannot be decided.
    let r = audit();
    r.exit(4);
    assert!(r.stdout().contains("asks for signed replays by 1 of its replayers"), "{}", r.describe());
    let add = |file: &str, who: &str| {
        let key = format!("policy/keys/{who}.pub");
        producer
            .prov(&["verify-attestation", file, "--key", &key, "--run", "lockfiles/quickstart.lock", "--add"])
            .success();
    };
    // Mallory's replay is real and verifies, but mallory is not listed: not counted.
    add(&files[2], "mallory");
    let r = audit();
    r.exit(4);
    assert!(r.stdout().contains("not signed by a listed replayer (not counted): 1"), "{}", r.describe());
    // Alice's: the claim holds, every stage reproduced by her signed replay. The same envelope
    // in other bytes (compact JSON) is a second attestation record of the same replayer: still
    // one replayer.
    add(&files[0], "alice");
    let compact = serde_json::to_vec(&read_envelope(&producer.path(&files[0]))).unwrap();
    fs_err::write(producer.path("alice-again.json"), compact).unwrap();
    add("alice-again.json", "alice");
    let listed =
        producer.json(&["show", "lockfiles/quickstart.lock"]).iter().filter(|l| l["type"] == "attestation").count();
    assert_eq!(listed, 3, "mallory's and alice's two");
    let r = audit();
    r.success();
    assert!(
        r.stdout().contains("signed replays by listed replayers (distinct keys): 1 of 2 listed: keys/alice.pub"),
        "{}",
        r.describe()
    );
    // Bob's too: two independent parties.
    add(&files[1], "bob");
    let r = audit();
    r.success();
    assert!(r.stdout().contains("2 of 2 listed: keys/alice.pub, keys/bob.pub"), "{}", r.describe());

    // Planted records that say nothing about this run are noted, not counted, and do not fail
    // the claim: alice's key signing a replay of another lockfile, and a record whose
    // envelope is not in the store (which `gc` then collects).
    let run_manifest: prov_store::Digest = producer
        .json(&["show", "lockfiles/quickstart.lock"])
        .into_iter()
        .find(|l| l["type"] == "record" && l["data"]["kind"] == "run")
        .unwrap()["data"]["digest"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let mut other: Value = serde_json::from_slice(&payload_of(&read_envelope(&producer.path(&files[0])))).unwrap();
    other["predicate"]["buildDefinition"]["externalParameters"]["lockfile"]["blake3"] = Value::String("ab".repeat(32));
    fs_err::write(producer.path("other.statement"), serde_json::to_vec(&other).unwrap()).unwrap();
    let other_signed = reference.text(&producer.root, &["sign", "other.statement", "alice.key"]);
    let store = prov_store::Store::open(&producer.path(".prov"), prov_store::Access::Shared, true).unwrap();
    let parsed = prov_attest::Envelope::parse(other_signed.as_bytes()).unwrap();
    prov_attest::attach(&store, other_signed.as_bytes(), &parsed, run_manifest, prov_manifest::AttestationRole::Replay)
        .unwrap();
    let broken = prov_manifest::AttestationRecord {
        schema: 1,
        envelope: prov_store::Digest::of(b"an envelope that was never stored"),
        run: run_manifest,
        role: prov_manifest::AttestationRole::Replay,
        keyids: vec![],
    };
    let broken = prov_manifest::put_record(&store, &prov_manifest::Record::Attestation(broken)).unwrap();
    drop(store);
    let r = audit();
    r.success();
    assert!(r.stdout().contains("about another run or recording (not counted): 1"), "{}", r.describe());
    assert!(r.stdout().contains("whose envelope cannot be read (not counted): 1"), "{}", r.describe());
    producer.prov(&["gc"]).success();
    assert!(!producer.object_file(&broken.to_string()).exists(), "gc collects the broken record");
    audit().success();

    // Alice's key signs a replay statement of this run whose outputs differ, planted in the
    // store as a well-formed attestation (`--add` would refuse it): the claim fails.
    let envelope = read_envelope(&producer.path(&files[0]));
    let mut statement: Value = serde_json::from_slice(&payload_of(&envelope)).unwrap();
    statement["subject"][2]["digest"]["blake3"] = Value::String("ee".repeat(32));
    fs_err::write(producer.path("lie.statement"), serde_json::to_vec(&statement).unwrap()).unwrap();
    let signed = reference.text(&producer.root, &["sign", "lie.statement", "alice.key"]);
    let store = prov_store::Store::open(&producer.path(".prov"), prov_store::Access::Shared, true).unwrap();
    let parsed = prov_attest::Envelope::parse(signed.as_bytes()).unwrap();
    prov_attest::attach(&store, signed.as_bytes(), &parsed, run_manifest, prov_manifest::AttestationRole::Replay)
        .unwrap();
    drop(store);
    let r = audit();
    r.exit(4);
    assert!(r.stdout().contains("replay: FAILS"), "{}", r.describe());
    assert!(r.stdout().contains("signed by keys/alice.pub does not reproduce the run"), "{}", r.describe());
}

/// `prov export --sign` writes a signature the `OpenSSF` reference (`model-signing` 1.1.1)
/// verifies offline with the public key; Provenant verifies what `model-signing` signs; and
/// both refuse a changed file, an added file and another key.
#[test]
fn signed_exports_are_verified_by_model_signing_and_the_reverse() {
    let Some(reference) = Reference::get() else { return };
    let (p, lines) = crate::test_train::trained();
    let pretrain = lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == "pretrain").unwrap();
    let model = pretrain["data"]["outputs"]["model"].as_str().unwrap().to_owned();
    p.prov(&["attest", "--generate-key", "ed.key"]).success();
    p.prov(&["attest", "--generate-key", "ec.key", "--key-type", "ecdsa-p256"]).success();
    p.prov(&["attest", "--generate-key", "other.key", "--key-type", "ecdsa-p256"]).success();

    // Model signatures are ECDSA only: refused with a hint, before anything is written.
    let e = p.prov(&["export", &model, "--out", "hf", "--sign", "ed.key"]).exit(1).stderr();
    assert!(e.contains("ECDSA") && e.contains("--key-type ecdsa-p256"), "{e}");
    assert!(!p.path("hf").exists());

    p.prov(&["export", &model, "--out", "hf", "--sign", "ec.key"]).success();
    let ours = |key: &str| p.prov(&["verify-attestation", "hf/model.sig", "--key", key, "--model", "hf"]);
    reference.accepts(&p.root, &["model-verify", "hf", "hf/model.sig", "ec.key.pub"]);
    ours("ec.key.pub").success();
    // Another key: refused by both.
    reference.refuses(&p.root, &["model-verify", "hf", "hf/model.sig", "other.key.pub"]);
    ours("other.key.pub").exit(2);
    // One flipped byte in a file: refused by both.
    flip_byte(&p.path("hf/config.json"), 3);
    reference.refuses(&p.root, &["model-verify", "hf", "hf/model.sig", "ec.key.pub"]);
    assert!(ours("ec.key.pub").exit(2).stderr().contains("`config.json` has other bytes"));
    flip_byte(&p.path("hf/config.json"), 3);
    ours("ec.key.pub").success();
    // A file added: refused by both.
    p.write("hf/extra.txt", "not signed");
    reference.refuses(&p.root, &["model-verify", "hf", "hf/model.sig", "ec.key.pub"]);
    assert!(ours("ec.key.pub").exit(2).stderr().contains("`extra.txt` is not signed"));
    // A flipped byte in the signed payload: refused by both.
    let mut bundle: Value = serde_json::from_slice(&fs_err::read(p.path("hf/model.sig")).unwrap()).unwrap();
    let mut payload = B64.decode(bundle["dsseEnvelope"]["payload"].as_str().unwrap()).unwrap();
    let at = payload.len() / 2;
    payload[at] ^= 0x01;
    bundle["dsseEnvelope"]["payload"] = Value::String(B64.encode(&payload));
    fs_err::write(p.path("forged.sig"), serde_json::to_vec(&bundle).unwrap()).unwrap();
    fs_err::remove_file(p.path("hf/extra.txt")).unwrap();
    reference.refuses(&p.root, &["model-verify", "hf", "forged.sig", "ec.key.pub"]);
    p.prov(&["verify-attestation", "forged.sig", "--key", "ec.key.pub", "--model", "hf"]).exit(2);

    // A model signature is about a folder, not a run.
    p.prov(&["verify-attestation", "hf/model.sig", "--key", "ec.key.pub", "--run", "lockfiles/lm.lock"]).exit(1);
    // A symlink in the folder: not the signed model (model-signing refuses it too).
    std::os::unix::fs::symlink("config.json", p.path("hf/link.json")).unwrap();
    reference.refuses(&p.root, &["model-verify", "hf", "hf/model.sig", "ec.key.pub"]);
    ours("ec.key.pub").exit(2);
    fs_err::remove_file(p.path("hf/link.json")).unwrap();
    ours("ec.key.pub").success();

    // Signing covers the whole folder: a folder with a file the export did not write is not
    // signed.
    p.write("hf2/notes.txt", "mine");
    let e = p.prov(&["export", &model, "--out", "hf2", "--sign", "ec.key"]).exit(1).stderr();
    assert!(e.contains("`notes.txt` is not a file the export wrote"), "{e}");

    // The other direction: model-signing signs the exported folder, Provenant verifies it.
    reference.text(&p.root, &["model-sign", "hf", "theirs.sig", "other.key"]);
    p.prov(&["verify-attestation", "theirs.sig", "--key", "other.key.pub", "--model", "hf"]).success();
    p.prov(&["verify-attestation", "theirs.sig", "--key", "ec.key.pub", "--model", "hf"]).exit(2);
    flip_byte(&p.path("hf/model.safetensors"), 100);
    reference.refuses(&p.root, &["model-verify", "hf", "theirs.sig", "other.key.pub"]);
    p.prov(&["verify-attestation", "theirs.sig", "--key", "other.key.pub", "--model", "hf"]).exit(2);
}

const REVIEW_RECIPE: &str = "\
schema: 1
name: review
seed: 7
sources:
  docs: {path: data/docs, license: MIT}
  reviewed: {path: ../verdicts}
stages:
  shards: {kind: shard, inputs: {docs: docs}, params: {shards: 1}}
  license: {kind: license, inputs: {docs: shards, verdicts: reviewed}, params: {policy: permissive}}
";

/// Signed reviewer verdicts: `prov license decide --key` signs the verdict file beside it; a
/// license policy that lists reviewers' keys makes the queue refuse a verdict signed by
/// another key, unsigned, or changed after signing (a well-formed verdict re-encoded with
/// another reviewer); the audit's license claim refuses the same for the verdicts a run
/// used; securesystemslib verifies the signature file.
#[test]
fn a_policy_can_require_verdicts_signed_by_listed_reviewers() {
    let Some(reference) = Reference::get() else { return };
    let p = Project::new();
    p.git_init("Rita Reviewer", "rita@example.org");
    let mut docs = String::new();
    for (id, l) in [("a", "MIT"), ("b", "AFL-3.0"), ("c", "AFL-3.0")] {
        docs.push_str(&serde_json::json!({"id": id, "text": format!("document {id}"), "license": l}).to_string());
        docs.push('\n');
    }
    p.write("recipes/data/docs/docs.jsonl", &docs);
    p.write("recipes/review.yaml", REVIEW_RECIPE);
    p.write("verdicts/README.md", "Reviewer verdicts.\n");
    p.write("lp.yaml", "schema: 1\nname: signed\nversion: \"1\"\nallow: [MIT]\nsigned_verdicts: [rita.key.pub]\n");
    p.prov(&["run", "recipes/review.yaml"]).success();
    p.prov(&["attest", "--generate-key", "rita.key"]).success();
    p.prov(&["attest", "--generate-key", "mallory.key"]).success();
    let decide = |key: Option<&str>| {
        let mut args =
            vec!["license", "decide", "license:AFL-3.0", "--allow", "--reason", "permissive", "--policy", "lp.yaml"];
        if let Some(k) = key {
            args.extend(["--key", k]);
        }
        p.prov(&args).success();
    };
    let queue = || {
        let lines = p.json(&["license", "queue", "--all", "--policy", "lp.yaml"]);
        let afl = lines
            .iter()
            .find(|l| l["type"] == "subject" && l["data"]["subject"] == "license:AFL-3.0")
            .map(|l| l["data"].clone());
        let refused: Vec<String> = lines
            .iter()
            .filter(|l| l["type"] == "refused_verdict")
            .map(|l| l["data"]["why"].as_str().unwrap().to_owned())
            .collect();
        (afl.unwrap(), refused)
    };

    // Signed by a key the policy does not list: refused, the license back in the queue.
    decide(Some("mallory.key"));
    let (afl, refused) = queue();
    assert_eq!(afl["status"], "deny", "{afl}");
    assert!(refused[0].contains("badly signed") && refused[0].contains("no signature verifies"), "{refused:?}");
    // Signed by the listed reviewer: decided.
    decide(Some("rita.key"));
    let (afl, refused) = queue();
    assert!(refused.is_empty(), "{refused:?}");
    assert_eq!(afl["status"], "decided", "{afl}");
    assert_eq!(afl["verdict"]["signature"], "signed by rita.key.pub", "{afl}");
    let seen = reference.accepts(&p.root, &["verify", "verdicts/licenses/AFL-3.0.json.sig", "rita.key.pub"]);
    assert_eq!(seen["predicate_type"], "https://provenant.dev/attestation/license-verdict/v1");
    // Unsigned: the earlier signature is removed (committed as removed), and the verdict refused.
    decide(None);
    assert!(!p.path("verdicts/licenses/AFL-3.0.json.sig").exists());
    assert!(!p.git(&["ls-files", "verdicts"]).contains(".sig"), "the removal is committed");
    assert_eq!(queue().1, ["unsigned"]);

    // Signed again, and the run uses it; the audit checks who signed what kept documents.
    decide(Some("rita.key"));
    p.prov(&["run", "recipes/review.yaml"]).success();
    p.write("audit.yaml", "schema: 1\nname: a\nclaims:\n  - kind: license\n    verdict_signers: [rita.key.pub]\n");
    p.write("audit-m.yaml", "schema: 1\nname: a\nclaims:\n  - kind: license\n    verdict_signers: [mallory.key.pub]\n");
    let audit = |policy: &str| p.prov(&["audit", "lockfiles/review.lock", "--policy", policy]);
    let r = audit("audit.yaml");
    r.success();
    assert!(r.stdout().contains("signed by rita.key.pub"), "{}", r.describe());
    let r = audit("audit-m.yaml");
    r.exit(4);
    assert!(r.stdout().contains("the policy requires verdicts signed by mallory.key.pub"), "{}", r.describe());

    // The run pinned the signed verdict; an unsigned one decided since replaces it, signature
    // and all: the queue says unsigned, not that the old signature signs other bytes.
    decide(None);
    assert_eq!(queue().1, ["unsigned"]);
    decide(Some("rita.key"));

    // A forged verdict: well-formed, canonical, at its right path, with another reviewer
    // written in, beside rita's signature of the real one.
    let path = p.path("verdicts/licenses/AFL-3.0.json");
    let prov_manifest::Record::Verdict(mut v) =
        prov_manifest::Record::from_bytes(&fs_err::read(&path).unwrap()).unwrap()
    else {
        panic!("a verdict")
    };
    v.reviewer = "Mallory <m@example.org>".into();
    fs_err::write(&path, prov_manifest::Record::Verdict(v).to_bytes().unwrap()).unwrap();
    let refused = queue().1;
    assert!(refused[0].contains("signs other bytes"), "{refused:?}");
    reference.refuses(&p.root, &["verify", "verdicts/licenses/AFL-3.0.json.sig", "mallory.key.pub"]);
    p.prov(&["run", "recipes/review.yaml"]).success();
    let r = audit("audit.yaml");
    r.exit(4);
    assert!(r.stdout().contains("signs other bytes"), "{}", r.describe());
}
