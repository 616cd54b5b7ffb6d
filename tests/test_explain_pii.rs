//! `prov explain pii`: the redacted text of stdin on stdout, exactly; the replaced spans on
//! stderr; or one `pii` JSON message.

use serde_json::json;

use crate::common::{Project, Run};

/// Runs `prov` with `args` and `input` on stdin.
fn run(p: &Project, args: &[&str], input: impl AsRef<[u8]>) -> Run {
    p.prov_with_stdin(args, input)
}

const TEXT: &str = "Message-ID: <20050101.foo@example.org>\nFrom: foo@example.org (10.0.0.1, 8.8.8.8)\n\
                    IBAN: DE89 3704 0044 0532 0130 00; GB29NWBK60161331926819; 2001:db8::1 ünd";

#[test]
fn apertus_mode_writes_the_text_exactly_and_the_spans_to_stderr() {
    let p = Project::new();
    let r = run(&p, &["explain", "pii", "--mode", "apertus"], TEXT);
    r.success();
    // Longest match first: the Message-ID goes whole, not just its tail. No newline is added.
    assert_eq!(
        r.stdout(),
        "Message-ID: <<email-pii>>\nFrom: <email-pii> (<ip-pii>, <ip-pii>)\n\
         IBAN: <iban-pii>; GB29NWBK60161331926819; 2001:db8::1 ünd"
    );
    assert_eq!(r.stderr(), "email 13..37\nemail 45..60\nip 62..70\nip 72..79\niban 87..114\n", "{}", r.describe());
    assert_eq!(&TEXT[13..37], "20050101.foo@example.org");
    assert_eq!(&TEXT[87..114], "DE89 3704 0044 0532 0130 00");
}

#[test]
fn strict_mode_finds_every_layout_and_can_keep_private_addresses() {
    let p = Project::new();
    let r = run(&p, &["explain", "pii", "--mode", "strict"], TEXT);
    r.success();
    assert_eq!(
        r.stdout(),
        "Message-ID: <<email-pii>>\nFrom: <email-pii> (<ip-pii>, <ip-pii>)\n\
         IBAN: <iban-pii>; <iban-pii>; <ip-pii> ünd"
    );
    assert_eq!(r.stderr().lines().count(), 7, "{}", r.describe());
    assert!(r.stderr().ends_with("iban 116..138\nip 140..151\n"), "{}", r.describe());

    let r = run(&p, &["explain", "pii", "--mode", "strict", "--keep-private-ips"], TEXT);
    r.success();
    assert_eq!(
        r.stdout(),
        "Message-ID: <<email-pii>>\nFrom: <email-pii> (10.0.0.1, <ip-pii>)\n\
         IBAN: <iban-pii>; <iban-pii>; 2001:db8::1 ünd"
    );
}

#[test]
fn json_output_is_one_pii_message() {
    let p = Project::new();
    let r = run(&p, &["--json", "explain", "pii", "--mode", "apertus"], "mail a@b.cd\n");
    r.success();
    assert_eq!(r.stderr(), "", "{}", r.describe());
    let lines: Vec<serde_json::Value> = r.stdout().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(
        lines,
        [
            json!({"type": "pii", "data": {"text": "mail <email-pii>\n", "matches": [{"type": "email", "start": 5, "end": 11}]}})
        ]
    );
    let r = run(&p, &["--json", "explain", "pii", "--mode", "strict"], "nothing here");
    let lines: Vec<serde_json::Value> = r.stdout().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines, [json!({"type": "pii", "data": {"text": "nothing here", "matches": []}})]);
}

#[test]
fn text_without_pii_passes_through_byte_for_byte() {
    let p = Project::new();
    for input in ["", "\n", "ünïcödé\r\n\ttabs and trailing spaces  \n\n", "1.2.3 DE89 foo@ ::"] {
        for mode in ["apertus", "strict"] {
            let r = run(&p, &["explain", "pii", "--mode", mode], input);
            r.success();
            assert_eq!(r.output.stdout, input.as_bytes(), "{}", r.describe());
            assert_eq!(r.stderr(), "", "{}", r.describe());
        }
    }
}

#[test]
fn bad_input_and_flags_exit_1() {
    let p = Project::new();
    let r = run(&p, &["explain", "pii", "--mode", "strict"], b"ok \xFF\xFE");
    r.exit(1);
    assert!(r.stderr().contains("stdin is not valid UTF-8 (at byte 3)"), "{}", r.describe());
    assert_eq!(r.stdout(), "");

    let r = run(&p, &["explain", "pii", "--mode", "apertus", "--keep-private-ips"], "10.0.0.1");
    r.exit(1);
    assert!(r.stderr().contains("`--keep-private-ips` applies to `--mode strict` only"), "{}", r.describe());

    let r = run(&p, &["explain", "pii"], "x");
    r.exit(1);
    assert!(r.stderr().contains("--mode"), "{}", r.describe());
    let r = run(&p, &["explain", "pii", "--mode", "loose"], "x");
    r.exit(1);
    assert!(r.stderr().contains("apertus") && r.stderr().contains("strict"), "{}", r.describe());
}
