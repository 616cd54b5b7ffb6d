//! `prov explain robots`: which rule of a robots.txt decided, in human text, `--json` and
//! `--batch` form.

use std::io::Write as _;
use std::process::Stdio;

use serde_json::{Value, json};

use crate::common::{Project, Run};

const ROBOTS: &str = "\
# robots.txt for example.com
User-agent: *
Disallow: /private/

User-agent: GPTBot
User-agent: CCBot
Disallow: /
Allow: /public/
Allow: /*.css$
";

/// Runs `prov explain robots --batch` with `input` on stdin.
fn batch(p: &Project, json: bool, input: impl AsRef<[u8]>) -> Run {
    let mut args = vec!["explain", "robots", "--batch"];
    if json {
        args.insert(0, "--json");
    }
    let mut child =
        p.command(&args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input.as_ref()).unwrap();
    let output = child.wait_with_output().unwrap();
    Run { args: args.iter().map(|s| (*s).to_owned()).collect(), output }
}

fn explain(p: &Project, agent: &str, url: &str) -> Run {
    p.prov(&["explain", "robots", "--robots", "robots.txt", "--agent", agent, "--url", url])
}

#[test]
fn human_output_names_the_deciding_rule_and_group() {
    let p = Project::new();
    p.write("robots.txt", ROBOTS);
    let r = explain(&p, "CCBot/2.0", "https://example.com/private/a?b=1");
    r.success();
    assert_eq!(r.stdout(), "disallowed by line 7: Disallow: /\ngroup: user-agent CCBot\npath: /private/a?b=1\n");
    let r = explain(&p, "gptbot", "https://example.com/public/index.html");
    r.success();
    assert_eq!(r.stdout(), "allowed by line 8: Allow: /public/\ngroup: user-agent GPTBot\npath: /public/index.html\n");
    let r = explain(&p, "FooBot", "/private/x");
    assert_eq!(r.stdout(), "disallowed by line 3: Disallow: /private/\ngroup: user-agent *\npath: /private/x\n");
    let r = explain(&p, "FooBot", "/elsewhere");
    assert_eq!(r.stdout(), "no matching rule: allowed\ngroup: user-agent *\npath: /elsewhere\n");
    // `/robots.txt` is implicitly allowed, even to a crawler disallowed everything.
    let r = explain(&p, "GPTBot", "https://example.com/robots.txt");
    assert!(r.stdout().starts_with("allowed: /robots.txt is always allowed"), "{}", r.describe());
    assert_eq!(r.stderr(), "", "{}", r.describe());
}

#[test]
fn json_output_is_one_robots_message() {
    let p = Project::new();
    p.write("robots.txt", ROBOTS);
    let lines = p.json(&["explain", "robots", "--robots", "robots.txt", "--agent", "GPTBot", "--url", "/site.css"]);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["type"], "robots");
    let data = &lines[0]["data"];
    assert_eq!(data["allowed"], true);
    assert_eq!(data["rule"], json!({"line": 9, "directive": "allow", "pattern": "/*.css$"}));
    assert_eq!(data["agent_group"], "GPTBot");
    assert_eq!(data["basis"], "rule");
    assert_eq!(data["unparseable"], false);

    p.write("other.txt", "User-agent: BarBot\nDisallow: /\n");
    let lines = p.json(&["explain", "robots", "--robots", "other.txt", "--agent", "FooBot", "--url", "/"]);
    let data = &lines[0]["data"];
    assert_eq!(data["allowed"], true);
    assert_eq!(data["rule"], Value::Null);
    assert_eq!(data["agent_group"], Value::Null);
    assert_eq!(data["basis"], "no_group");
}

#[test]
fn awkward_bodies_are_read_and_reported() {
    let p = Project::new();
    // A byte order mark, CR line ends, a Latin-1 byte and a raw UTF-8 path.
    let body = b"\xEF\xBB\xBFUser-agent: FooBot\rDisallow: /caf\xE9\rAllow: /\xE3\x83\x84\rDisallow: /\r";
    fs_err::write(p.path("robots.txt"), body).unwrap();
    let r = explain(&p, "FooBot", "/caf%E9");
    assert!(r.stdout().starts_with("disallowed by line 2: Disallow: /caf%E9\n"), "{}", r.describe());
    let r = explain(&p, "FooBot", "/%e3%83%84/x");
    assert!(r.stdout().starts_with("allowed by line 3: Allow: /%E3%83%84\n"), "{}", r.describe());

    // An HTML error page served as robots.txt allows everything, with a warning.
    p.write("robots.txt", "<!DOCTYPE html>\n<html><body>Not Found</body></html>\n");
    let r = explain(&p, "FooBot", "/x");
    r.success();
    assert!(r.stderr().contains("does not look like a robots.txt (an HTML body"), "{}", r.describe());
    assert!(r.stdout().starts_with("no matching rule: allowed\n"), "{}", r.describe());
    let lines = p.json(&["explain", "robots", "--robots", "robots.txt", "--agent", "FooBot", "--url", "/x"]);
    assert_eq!(lines[0]["data"]["unparseable"], true);
}

#[test]
fn batch_answers_each_line_in_order_as_single_mode_does() {
    let p = Project::new();
    p.write("robots.txt", ROBOTS);
    p.write("sub/other.txt", "User-agent: *\nDisallow: /\n");
    let inputs = [
        ("robots.txt", "CCBot/2.0", "https://example.com/x"),
        ("sub/other.txt", "GPTBot", "/x"),
        ("robots.txt", "FooBot", "/private/y"),
        ("robots.txt", "GPTBot", "/public/"),
        ("robots.txt", "FooBot", "/z"),
    ];
    let mut stdin = String::new();
    for (i, (robots, agent, url)) in inputs.iter().enumerate() {
        stdin.push_str(&json!({"robots": robots, "agent": agent, "url": url}).to_string());
        stdin.push('\n');
        if i == 1 {
            stdin.push('\n'); // blank lines are skipped
        }
    }
    // Always JSON, even without `--json`.
    let r = batch(&p, false, &stdin);
    r.success();
    let out: Vec<Value> = r.stdout().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(out.len(), inputs.len(), "{}", r.describe());
    let expected_allowed = [false, false, false, true, true];
    for (i, ((robots, agent, url), o)) in inputs.iter().zip(&out).enumerate() {
        assert_eq!(o["robots"], *robots);
        assert_eq!(o["agent"], *agent);
        assert_eq!(o["url"], *url);
        assert_eq!(o["allowed"], expected_allowed[i], "{o}");
        // The same answer as a single `--json` explain.
        let single = p.json(&["explain", "robots", "--robots", robots, "--agent", agent, "--url", url]);
        for key in ["allowed", "rule", "agent_group", "basis", "path"] {
            assert_eq!(o[key], single[0]["data"][key], "{key} of input {i}: {o} vs {}", single[0]);
        }
    }
    assert_eq!(out[0]["rule"], json!({"line": 7, "directive": "disallow", "pattern": "/"}));
    assert_eq!(out[2]["line"], 4, "line numbers count the blank line");

    // With `--json`, each answer is a `robots` message.
    let r = batch(&p, true, &stdin);
    r.success();
    let msgs: Vec<Value> = r.stdout().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(msgs.len(), inputs.len());
    for (m, o) in msgs.iter().zip(&out) {
        assert_eq!(m["type"], "robots");
        assert_eq!(&m["data"], o);
    }

    // Empty input, empty output.
    let r = batch(&p, false, "");
    r.success();
    assert_eq!(r.stdout(), "");
}

#[test]
fn batch_errors_name_the_input_line() {
    let p = Project::new();
    p.write("robots.txt", ROBOTS);
    let good = r#"{"robots": "robots.txt", "agent": "a", "url": "/"}"#;
    for (bad, what) in [
        ("not json", "stdin line 2: expected"),
        (r#"{"robots": "robots.txt", "agent": "a"}"#, "stdin line 2: missing field `url`"),
        (r#"{"robots": "robots.txt", "agent": "a", "url": "/", "extra": 1}"#, "stdin line 2: unknown field `extra`"),
        (r#"{"robots": "missing.txt", "agent": "a", "url": "/"}"#, "stdin line 2: reading robots.txt"),
    ] {
        let r = batch(&p, false, format!("{good}\n{bad}\n{good}\n"));
        r.exit(1);
        assert!(r.stderr().contains(what), "{what}\n{}", r.describe());
    }
    let r = batch(&p, false, [good.as_bytes(), b"\n\xFF\n"].concat());
    r.exit(1);
    assert!(r.stderr().contains("stdin line 2: not valid UTF-8"), "{}", r.describe());
}

#[test]
fn usage_errors_exit_1() {
    let p = Project::new();
    p.write("robots.txt", ROBOTS);
    p.prov(&["explain", "robots", "--robots", "robots.txt", "--batch"]).exit(1);
    p.prov(&["explain", "robots", "--robots", "robots.txt", "--agent", "a"]).exit(1);
    let r = p.prov(&["explain", "robots", "--robots", "absent.txt", "--agent", "a", "--url", "/"]);
    r.exit(1);
    assert!(r.stderr().contains("absent.txt"), "{}", r.describe());
}

#[test]
fn explain_license_normalises_and_decides() {
    let p = Project::new();
    let cases = [
        ("MIT/Apache-2.0", Some("MIT OR Apache-2.0"), "allow"),
        ("GPL-2+", Some("GPL-2.0-or-later"), "deny"),
        ("CC BY-NC 4.0", Some("CC-BY-NC-4.0"), "deny"),
        ("Expat", Some("MIT"), "allow"),
        ("Unspecified", None, "deny"),
        ("", None, "deny"),
    ];
    for (input, spdx, decision) in cases {
        let out = p.json(&["explain", "license", input]);
        assert_eq!(out.len(), 1, "{input}: {out:?}");
        let data = &out[0]["data"];
        assert_eq!(out[0]["type"], "license");
        assert_eq!(data["spdx"].as_str(), spdx, "{input}: {data}");
        assert_eq!(data["decision"], decision, "{input}: {data}");
        if spdx.is_none() {
            assert!(data["unknown"].as_str().is_some_and(|r| !r.is_empty()), "an unknown says why: {data}");
        }
    }
}
