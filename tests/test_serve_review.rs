//! The workbench's document and license pages as a reviewer and an attacker use them, on the
//! quickstart's UDHR articles, each declaring a license by language (German, Dutch, Polish,
//! Portuguese and Spanish MIT; English CC BY-SA 4.0; French CC BY-NC 4.0; Italian
//! "Unspecified") while their source declares MIT, through a URL index, the license filter
//! with a reviewer verdicts directory, PII redaction and tokenisation, in a git repository.
//!
//! In Chromium: find a French article the license filter removed, read its fate, download
//! its proof (then `prov verify-proof`, in a directory without the store, accepts it pinned
//! to the run); open the license review, allow CC BY-NC 4.0 with a reason (then the verdict
//! manifest, the verdict file and the git commit exist, as `prov license decide` writes
//! them); the next run keeps the French articles by the reviewer's verdict, and the document
//! page of that run says the article reached the training data. Over HTTP: the policy diff
//! names the license a share-alike policy flips; a cross-site form post, a post without the
//! server's CSRF token, a request for another host name (DNS rebinding), a policy named by a
//! path and a 100 MB body are refused; a `--read-only` server shows no form and refuses the
//! post that a normal server accepts; paths in a card's or an audit's name are refused; every
//! answer forbids scripts. Then the audit of the second run, started from its page and shown
//! with its progress, holds as `prov audit` says, and its evidence links the objects it
//! cites; the data card's page shows the card `prov card` writes, byte for byte, with plots.
//! A store with a flipped bit in the ledger the pages read is said to be damaged: no fate, no
//! proof, and an audit that does not hold.

use serde_json::Value;

use crate::common::{Project, repo_root};
use crate::test_serve::{Browser, get, parse, run_manifest, screenshots, send, serve};

const RECIPE: &str = "\
schema: 1
name: workbench
seed: 20250131
sources:
  udhr:
    path: data/workbench/udhr.jsonl
    license: MIT
  reviewed: {path: ../verdicts}
stages:
  shards:
    kind: shard
    inputs: {docs: udhr}
    params: {shards: 4}
  urls:
    kind: url-index
    inputs: {docs: shards}
  license:
    kind: license
    inputs: {docs: shards, verdicts: reviewed}
    params: {policy: permissive}
  pii:
    kind: pii
    inputs: {docs: license.dataset}
  tokenizer:
    kind: tokenizer
    inputs: {docs: pii.dataset}
    params: {vocab_size: 400}
  tokens:
    kind: tokenize
    inputs: {docs: pii.dataset, tokenizer: tokenizer.tokenizer}
    params: {seq_len: 64}
";

/// The audit policy the workbench offers: the license filter kept only what the policy or a
/// reviewer allowed, and no kept document holds PII.
const AUDIT: &str =
    "schema: 1\nname: workbench-audit\nclaims:\n  - kind: license\n    policy: permissive\n  - kind: pii\n";

const FRENCH_ID: &str = "udhr-fra-01";

/// The license each language's articles declare.
fn license_of(id: &str) -> &'static str {
    match id.split('-').nth(1) {
        Some("fra") => "CC BY-NC 4.0",
        Some("eng") => "CC BY-SA 4.0",
        Some("ita") => "Unspecified",
        _ => "MIT",
    }
}

/// The project in a git repository, its data written, its first run made; the run manifest.
fn project() -> (Project, String) {
    project_with("")
}

/// As [`project`], with more documents (JSON Lines) after the sample's.
fn project_with(more: &str) -> (Project, String) {
    let p = Project::with_recipes();
    p.git_init("Rita Reviewer", "rita@example.org");
    let sample = fs_err::read_to_string(p.path("recipes/data/quickstart/udhr-sample.jsonl")).unwrap();
    let mut lines = String::new();
    for line in sample.lines() {
        let mut doc: Value = serde_json::from_str(line).unwrap();
        let license = license_of(doc["id"].as_str().unwrap());
        doc["license"] = Value::from(license);
        lines.push_str(&doc.to_string());
        lines.push('\n');
    }
    lines.push_str(more);
    p.write("recipes/data/workbench/udhr.jsonl", &lines);
    p.write("verdicts/README.md", "Reviewer verdicts, written by `prov license decide` and the workbench.\n");
    p.write("recipes/workbench.yaml", RECIPE);
    p.write("audit.yaml", AUDIT);
    p.git(&["add", "."]);
    p.git(&["commit", "-q", "-m", "the workbench's project"]);
    let manifest = run_manifest(&p, "recipes/workbench.yaml");
    (p, manifest)
}

/// Outside strings cannot pass for something else: a look-alike id (a zero-width space) on
/// the document page, and a declared license whose line break and escape sequences write a
/// forged "allow" line, on the review page and in `prov license queue`; a lockfile's source
/// license doing the same in `prov show`. Found by an adversarial review.
#[test]
fn look_alike_ids_and_forged_lines_are_shown_escaped() {
    let forged = "CC-BY-NC-4.0\n  license:MIT  allow  allow-list  (signed by rita.key.pub)\u{1b}[2K";
    let more = serde_json::json!({
        "id": "udhr-deu_1996-00\u{200B}", "text": "Alle Menschen sind frei und gleich an Würde und Rechten geboren.",
        "url": "https://example.org/de", "license": forged,
    });
    let (p, manifest) = project_with(&format!("{more}\n"));
    let server = serve(&p, "127.0.0.1:0", &[]);
    let page = get(&server.addr, &format!("/runs/{manifest}/document?q=udhr-deu_1996-00%E2%80%8B"), "");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("<code id=\"subject\">udhr-deu_1996-00\\u{200b}</code>"), "{}", page.body);
    assert!(!page.body.contains('\u{200B}'), "{}", page.body);
    let page = get(&server.addr, &format!("/runs/{manifest}/licenses?all=1"), "");
    assert!(page.body.contains("CC-BY-NC-4.0\\n  license:MIT  allow"), "{}", page.body);
    // What the page shows (its text, not the form's values, which carry the id as it is).
    let mut text = String::new();
    let mut in_tag = false;
    for c in page.body.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    assert!(!text.contains('\u{1b}'), "{text}");

    let r = p.prov(&["license", "queue", "lockfiles/workbench.lock"]);
    assert!(r.stdout().contains("`CC-BY-NC-4.0\\n  license:MIT  allow"), "{}", r.describe());
    assert!(!r.stdout().lines().any(|l| l.starts_with("  license:MIT")), "{}", r.describe());
    assert!(!r.stdout().contains('\u{1b}'), "{}", r.describe());

    p.write(
        "recipes/odd.yaml",
        "schema: 1\nname: odd\nseed: 1\nsources:\n  udhr:\n    path: data/workbench/udhr.jsonl\n    license: \
         \"MIT\\n  verified: all sources reviewed \\e[32mOK\"\nstages:\n  shards:\n    kind: shard\n    inputs: \
         {docs: udhr}\n",
    );
    p.prov(&["lock", "recipes/odd.yaml"]).success();
    let r = p.prov(&["show", "lockfiles/odd.lock"]);
    r.success();
    assert!(r.stdout().contains("license MIT\\n  verified: all sources reviewed \\u{1b}[32mOK"), "{}", r.describe());
    assert!(!r.stdout().lines().any(|l| l.starts_with("  verified")), "{}", r.describe());
}

/// The `license` stage's statistics in the run `manifest`.
fn license_stats(p: &Project, manifest: &str) -> Value {
    let run = p.json(&["show", manifest]);
    let stages = run[0]["data"]["record"]["stages"].as_array().unwrap().clone();
    let license = stages.iter().find(|s| s["name"] == "license").expect("a license stage");
    let shown = p.json(&["show", license["manifest"].as_str().unwrap()]);
    shown[0]["data"]["record"]["stats"].clone()
}

/// A form post to `path` with `headers` (each ending in CRLF) and `body`.
fn post(addr: &str, path: &str, headers: &str, body: &str) -> crate::test_serve::Response {
    send(
        addr,
        format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n{headers}Connection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
}

/// The server's CSRF token, from a form of the queue's page.
fn csrf(addr: &str, manifest: &str) -> String {
    let page = get(addr, &format!("/runs/{manifest}/licenses"), "");
    assert_eq!(page.status, 200, "{}", page.body);
    page.body.split("name=\"csrf\" value=\"").nth(1).expect("a verdict form").split('"').next().unwrap().to_owned()
}

#[test]
fn a_reviewer_proves_a_removed_document_and_decides_its_license_in_chromium() {
    let (p, manifest) = project();
    let server = serve(&p, "127.0.0.1:0", &["--audit-policy", "audit.yaml"]);
    let profile = p.path("chromium-profile");
    let Some(browser) = Browser::start(&profile) else { return };
    let shots = screenshots(&p);
    let base = format!("http://{}", server.addr);

    // A French article: removed by the license filter, so it never reached the training data.
    browser.open(&format!("{base}/runs/{manifest}"));
    browser.fill("#find input[name=q]", FRENCH_ID);
    browser.click("#find button");
    // Read first: finding an element waits for the page the click led to.
    let license_row = browser.text("#fate-license");
    assert!(browser.url().starts_with(&format!("{base}/runs/{manifest}/document?q=udhr-fra-01")), "{}", browser.url());
    assert!(license_row.contains("removed") && license_row.contains("license:"), "{license_row}");
    assert!(browser.text("#fate-pii").contains("absent"));
    assert!(browser.text("#training").contains("did not reach the training data"));
    browser.screenshot(&shots, "document");

    // The proof it downloads is the one `prov prove` builds, and verifies alone.
    browser.click("#download");
    let downloads = profile.join("downloads");
    let mut file = None;
    for _ in 0..100 {
        file = fs_err::read_dir(&downloads)
            .ok()
            .and_then(|mut d| d.find_map(|e| e.ok().map(|e| e.path())))
            .filter(|f| f.extension().is_some_and(|x| x == "proof"));
        if file.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let file = file.expect("the proof was downloaded");
    let alone = tempfile::tempdir().unwrap();
    fs_err::copy(&file, alone.path().join("x.proof")).unwrap();
    let verified = p
        .command(&["verify-proof", "x.proof", "--run", &manifest])
        .current_dir(alone.path())
        .output()
        .expect("prov starts");
    let stdout = String::from_utf8_lossy(&verified.stdout);
    assert!(verified.status.success(), "{stdout}{}", String::from_utf8_lossy(&verified.stderr));
    assert!(stdout.contains("proof valid") && stdout.contains("did not reach the training data"), "{stdout}");
    let cli = p.prov(&["prove", "lockfiles/workbench.lock", "--doc", FRENCH_ID, "--out", "cli.proof"]);
    cli.success();
    assert_eq!(
        fs_err::read(&file).unwrap(),
        fs_err::read(p.path("cli.proof")).unwrap(),
        "the CLI's proof, byte for byte"
    );

    // A URL is read as a URL, through the run's URL index.
    let url = "https://www.ohchr.org/en/human-rights/universal-declaration/translations/french#article-01";
    browser.open(&format!("{base}/runs/{manifest}"));
    browser.fill("#find input[name=q]", url);
    browser.click("#find button");
    assert!(browser.text("#url-ids").contains(FRENCH_ID), "{}", browser.text("#url-ids"));

    // The review: the three licenses the permissive policy denies or cannot judge, and the
    // source, which declares MIT while its documents declare licenses MIT cannot carry.
    browser.open(&format!("{base}/runs/{manifest}"));
    browser.click("#license-review");
    let summary = browser.text("#summary");
    assert!(summary.starts_with("4 of 5 subjects"), "{summary}");
    let source = browser.text("section[data-subject=\"source:udhr\"]");
    assert!(source.contains("forbids commercial use, which the mixture's `MIT` allows"), "{source}");
    let nc = "section[data-subject=\"license:CC-BY-NC-4.0\"]";
    assert!(browser.text(nc).contains("CC BY-NC 4.0 (31 documents)"), "{}", browser.text(nc));
    assert!(browser.text(nc).contains("non-commercial"), "{}", browser.text(nc));
    browser.fill(&format!("{nc} input[name=reason]"), "the model is for non-commercial research only");
    browser.screenshot(&shots, "licenses");
    browser.click(&format!("{nc} button.allow"));

    // Written as `prov license decide` writes it: the manifest, the file, one commit.
    let commit = browser.text("#commit");
    let verdict = browser.text("#verdict");
    assert_eq!(browser.text("#file"), "verdicts/licenses/CC-BY-NC-4.0.json");
    browser.screenshot(&shots, "decided");
    let log = p.git(&["log", "-1", "--format=%H%n%s%n%b"]);
    assert!(log.starts_with(&commit), "{log}");
    assert!(log.contains("prov license decide: allow license:CC-BY-NC-4.0"), "{log}");
    assert!(log.contains("reviewer: Rita Reviewer <rita@example.org>") && log.contains("non-commercial research"));
    assert_eq!(p.git(&["show", "--name-only", "--format=", "HEAD"]).trim(), "verdicts/licenses/CC-BY-NC-4.0.json");
    let file = fs_err::read(p.path("verdicts/licenses/CC-BY-NC-4.0.json")).unwrap();
    assert_eq!(file, fs_err::read(p.object_file(&verdict)).unwrap(), "the file is the verdict manifest");
    let shown = p.json(&["show", &verdict]);
    let record = &shown[0]["data"]["record"];
    assert_eq!((record["kind"].as_str(), record["decision"].as_str()), (Some("verdict"), Some("allow")), "{record}");
    assert_eq!(record["reviewer"], "Rita Reviewer <rita@example.org>");
    // The queue no longer lists it; `prov license queue` agrees.
    browser.click("#back");
    assert!(browser.text("#summary").starts_with("3 of 5"), "{}", browser.text("#summary"));
    let queue = p.json(&["license", "queue", "lockfiles/workbench.lock"]);
    assert!(queue.iter().all(|l| l["data"]["subject"] != "license:CC-BY-NC-4.0"), "{queue:?}");

    // The next run uses the verdict: the French articles are kept by the reviewer.
    let second = run_manifest(&p, "recipes/workbench.yaml");
    assert_ne!(second, manifest);
    let stats = license_stats(&p, &second);
    assert_eq!(stats["by_rule"]["license:reviewer-allowed"]["documents"], 31, "{stats}");
    browser.open(&format!("{base}/runs/{second}/document?q={FRENCH_ID}"));
    assert!(browser.text("#fate-license").contains("kept"), "{}", browser.text("#fate-license"));
    assert!(browser.text("#training").contains("reached the training data"));

    audit_and_card(&p, &browser, &server.addr, &second, &shots);
}

/// The audit of the run `second`, started from its page and shown with its progress until the
/// report is there, each claim's evidence linking the objects it cites; then its data card.
fn audit_and_card(p: &Project, browser: &Browser, addr: &str, second: &str, shots: &std::path::Path) {
    let base = format!("http://{addr}");
    browser.open(&format!("{base}/runs/{second}"));
    browser.click("#audit");
    browser.click("a.audit-link");
    assert!(browser.text("#verdict").starts_with("Every claim holds"), "{}", browser.text("#verdict"));
    let license = browser.text("section[data-kind=\"license\"]");
    assert!(license.starts_with("holds"), "{license}");
    let cli = p.prov(&["audit", "lockfiles/workbench.lock", "--policy", "audit.yaml"]);
    cli.success();
    assert!(cli.stdout().contains("license: HOLDS"), "the page and `prov audit` agree: {}", cli.describe());
    browser.screenshot(shots, "audit");
    browser.click("section[data-kind=\"license\"] a[href^=\"/lineage/blake3:\"]");
    browser.find("#nodes");
    assert!(browser.url().starts_with(&format!("{base}/lineage/blake3:")), "{}", browser.url());

    // The data card, with its plots, as `prov card` writes it.
    browser.open(&format!("{base}/runs/{second}"));
    browser.click("#card-link");
    assert!(browser.text("#card").contains("workbench"), "{}", browser.text("#card"));
    browser.screenshot(shots, "card");
    p.prov(&["card", "lockfiles/workbench.lock", "--out", "card"]).success();
    let page = get(addr, &format!("/runs/{second}/card/README.md"), "");
    assert_eq!(page.body.as_bytes(), fs_err::read(p.path("card/README.md")).unwrap(), "the CLI's card, byte for byte");
    let plot = page.body.split("](plots/").nth(1).expect("a plot").split(')').next().unwrap().to_owned();
    let png = get(addr, &format!("/runs/{second}/card/plots/{plot}"), "");
    assert!(png.status == 200 && png.head.contains("image/png"), "{}", png.head);
}

#[test]
fn policy_diffs_and_the_refusals_of_a_server_that_writes() {
    let (p, manifest) = project();
    let share_alike = repo_root().join("recipes/license-policies/share-alike.yaml");
    let share_alike = share_alike.to_str().unwrap();
    let server = serve(&p, "127.0.0.1:0", &["--policy", "permissive", "--policy", share_alike]);
    let addr = &server.addr;

    // The policy diff: CC BY-SA 4.0 is denied by the permissive policy, allowed by share-alike.
    let diff = get(addr, &format!("/runs/{manifest}/licenses/diff?a=permissive&b=share-alike"), "");
    assert_eq!(diff.status, 200, "{}", diff.body);
    let flips = diff.body.split("<tbody>").nth(1).unwrap();
    assert!(flips.contains("CC-BY-SA-4.0") && !flips.contains("CC-BY-NC-4.0"), "{flips}");
    let cli = p.json(&["license", "diff", "permissive", share_alike]);
    let flipped: Vec<&str> =
        cli.iter().filter(|l| l["type"] == "license").map(|l| l["data"]["key"].as_str().unwrap()).collect();
    assert_eq!(flipped, ["CC-BY-SA-4.0"], "the page and `prov license diff` agree");
    for bad in ["a=../../etc/passwd&b=permissive", "a=permissive&b=%2Fetc%2Fpasswd", "a=permissive&b=nope"] {
        assert_eq!(get(addr, &format!("/runs/{manifest}/licenses/diff?{bad}"), "").status, 400, "{bad}");
    }
    assert_eq!(get(addr, &format!("/runs/{manifest}/licenses?policy=..%2Fpolicy.yaml"), "").status, 400);
    for path in
        ["card/..%2F..%2FCargo.toml", "card/../../.prov/VERSION", "card/%2Fetc%2Fpasswd", "audit/..%2Faudit.yaml"]
    {
        let r = get(addr, &format!("/runs/{manifest}/{path}"), "");
        assert!(matches!(r.status, 400 | 404), "{path}: {}", r.status);
        assert!(!r.body.contains("[package]") && !r.body.contains("claims:"), "{path}: {}", r.body);
    }
    // Every answer forbids scripts and framing.
    let page = get(addr, &format!("/runs/{manifest}"), "");
    assert!(page.head.contains("content-security-policy: default-src 'self'; script-src 'none'"), "{}", page.head);
    assert!(page.head.contains("x-content-type-options: nosniff"), "{}", page.head);

    // Writes: only with the server's CSRF token, from the server's own pages.
    let token = csrf(addr, &manifest);
    let path = format!("/runs/{manifest}/licenses/decide");
    let form = |t: &str| {
        format!("csrf={t}&subject=license%3AUnspecified&decision=deny&reason=unknown+terms&policy=permissive")
    };
    let head_before = p.git(&["rev-parse", "HEAD"]);
    let refused = [
        post(addr, &path, "", &form("")),
        post(addr, &path, "", &form(&"0".repeat(64))),
        post(addr, &path, "Origin: http://evil.example\r\n", &form(&token)),
        post(addr, &path, "Sec-Fetch-Site: cross-site\r\n", &form(&token)),
    ];
    for r in &refused {
        assert_eq!(r.status, 403, "{}", r.body);
    }
    // A page of another name that resolves to this server (DNS rebinding) reads nothing.
    let rebound = send(
        addr,
        format!("GET /runs/{manifest}/licenses HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    assert_eq!(rebound.status, 421);
    assert!(!rebound.body.contains(&token));
    assert!(rebound.head.contains("content-security-policy:"), "a refusal carries the headers too: {}", rebound.head);
    // A 100 MB body is refused before any of it is read.
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    std::io::Write::write_all(
        &mut s,
        format!("POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\n\r\n", 100 * 1024 * 1024).as_bytes(),
    )
    .unwrap();
    let mut answer = [0u8; 512];
    let n = std::io::Read::read(&mut s, &mut answer).unwrap();
    assert_eq!(parse(&answer[..n]).status, 413);
    assert_eq!(p.git(&["rev-parse", "HEAD"]), head_before, "nothing was committed");
    // Without a reason there is no verdict; a subject not in the queue is named.
    let blank = post(addr, &path, "", &form(&token).replace("reason=unknown+terms", "reason=+"));
    assert_eq!(blank.status, 400, "{}", blank.body);
    let unknown = post(addr, &path, "", &form(&token).replace("Unspecified", "GPL-9.0"));
    assert_eq!(unknown.status, 422, "{}", unknown.body);
    assert_eq!(p.git(&["rev-parse", "HEAD"]), head_before, "nothing was committed");

    // The same post from the page's own origin is a verdict.
    let origin = format!("Origin: http://{addr}\r\nSec-Fetch-Site: same-origin\r\n");
    let ok = post(addr, &path, &origin, &form(&token));
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert!(p.git(&["log", "-1", "--format=%s"]).contains("deny license:Unspecified"));

    // A read-only server of the same project: no form, and the same post is refused.
    let published = serve(&p, "127.0.0.1:0", &["--read-only"]);
    let page = get(&published.addr, &format!("/runs/{manifest}/licenses?all=1"), "");
    assert_eq!(page.status, 200);
    assert!(!page.body.contains("<form class=\"decide\"") && page.body.contains("read-only"), "{}", page.body);
    let head = p.git(&["rev-parse", "HEAD"]);
    let refused = post(&published.addr, &path, "", &form(&token));
    assert_eq!(refused.status, 403);
    assert_eq!(p.git(&["rev-parse", "HEAD"]), head);
}

#[test]
fn a_verdict_that_cannot_be_committed_is_not_left_behind_and_errors_name_no_path() {
    let (p, manifest) = project();
    let server = serve(&p, "127.0.0.1:0", &[]);
    let addr = &server.addr;
    let token = csrf(addr, &manifest);
    let path = format!("/runs/{manifest}/licenses/decide");
    let form = format!("csrf={token}&subject=license%3AUnspecified&decision=allow&reason=checked&policy=permissive");
    let verdict = p.path("verdicts/licenses/Unspecified.json");
    let head = p.git(&["rev-parse", "HEAD"]);

    // git is busy (another process holds its index): the commit fails, and the verdict file,
    // which the next run would read, is not left written.
    p.write(".git/index.lock", "");
    let busy = post(addr, &path, "", &form);
    assert_eq!(busy.status, 500, "{}", busy.body);
    assert!(!verdict.exists(), "a verdict the page reported as failed would decide the next run");
    fs_err::remove_file(p.path(".git/index.lock")).unwrap();
    // A name git cannot sign a commit with is said before anything is written.
    p.git(&["config", "user.name", "Rita <Reviewer>"]);
    let unsigned = post(addr, &path, "", &form);
    assert_eq!(unsigned.status, 400, "{}", unsigned.body);
    assert!(!verdict.exists());
    assert_eq!(p.git(&["rev-parse", "HEAD"]), head);
    p.git(&["config", "user.name", "Rita Reviewer"]);

    // A malformed verdict file is the reader's to fix: said, with the project's paths made
    // relative to it.
    p.write("verdicts/licenses/broken.json", "{");
    let page = get(addr, &format!("/runs/{manifest}/licenses"), "");
    assert_eq!(page.status, 422, "{}", page.body);
    assert!(page.body.contains("broken.json"), "{}", page.body);
    assert!(!page.body.contains(&p.root.display().to_string()), "{}", page.body);
    fs_err::remove_file(p.path("verdicts/licenses/broken.json")).unwrap();

    // With git free again the same post commits.
    let ok = post(addr, &path, "", &form);
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert!(verdict.exists());
    assert!(p.git(&["log", "-1", "--format=%s"]).contains("allow license:Unspecified"));
}

#[test]
fn the_runs_page_lists_committed_runs_with_their_replay_state() {
    let (p, manifest) = project();
    p.prov(&["run", "--commit", "lockfiles/workbench.lock"]).success();
    // Another recipe's committed run this store never saw, and a RUN file that names nothing.
    let elsewhere = format!("blake3:{}", "7".repeat(64));
    p.write("manifests/elsewhere/RUN", &format!("{elsewhere}\n"));
    p.write("manifests/garbled/RUN", "../../etc/passwd\n");
    let server = serve(&p, "127.0.0.1:0", &[]);
    let row = |page: &str, recipe: &str| {
        let start = page.find(&format!("id=\"committed-{recipe}\"")).unwrap_or_else(|| panic!("{recipe}: {page}"));
        page[start..].split("</tr>").next().unwrap().to_owned()
    };
    let page = get(&server.addr, "/", "").body;
    let workbench = row(&page, "workbench");
    assert!(workbench.contains(&format!("href=\"/runs/{manifest}\"")), "{workbench}");
    assert!(workbench.contains("never replayed here"), "{workbench}");
    assert!(row(&page, "elsewhere").contains("not in this store"));
    assert!(!page.contains("committed-garbled") && !page.contains("passwd"), "{page}");

    // Replayed against the committed manifests: the row says so.
    p.prov(&["replay", "lockfiles/workbench.lock", "--against", "manifests/workbench"]).success();
    let workbench = row(&get(&server.addr, "/", "").body, "workbench");
    assert!(workbench.contains("badge ok"), "{workbench}");
}

#[test]
fn a_server_with_a_key_signs_the_verdicts_decided_on_its_pages() {
    let (p, manifest) = project();
    p.prov(&["attest", "--generate-key", "rita.key"]).success();
    p.write("signed.yaml", "schema: 1\nname: signed\nversion: \"1\"\nallow: [MIT]\nsigned_verdicts: [rita.key.pub]\n");
    // Without the key, the page says that verdicts decided here would be refused.
    let unsigned = serve(&p, "127.0.0.1:0", &["--policy", "signed.yaml"]);
    let page = get(&unsigned.addr, &format!("/runs/{manifest}/licenses"), "").body;
    assert!(page.contains("start <code>prov serve --key KEY</code>"), "{page}");
    drop(unsigned);

    let server = serve(&p, "127.0.0.1:0", &["--policy", "signed.yaml", "--key", "rita.key"]);
    let addr = &server.addr;
    let token = csrf(addr, &manifest);
    let form = format!("csrf={token}&subject=license%3AUnspecified&decision=allow&reason=checked&policy=signed");
    let ok = post(addr, &format!("/runs/{manifest}/licenses/decide"), "", &form);
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert!(ok.body.contains("signed by"), "{}", ok.body);
    let committed = p.git(&["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(
        committed.lines().collect::<Vec<_>>(),
        ["verdicts/licenses/Unspecified.json", "verdicts/licenses/Unspecified.json.sig"],
        "the verdict and its signature, in one commit"
    );
    // The queue checks the signature against the policy's reviewer key, as the CLI's does.
    let cli = p.json(&["license", "queue", "--all", "--policy", "signed.yaml"]);
    let subject = cli.iter().find(|l| l["data"]["subject"] == "license:Unspecified").unwrap();
    assert_eq!(subject["data"]["verdict"]["signature"], "signed by rita.key.pub", "{subject}");
    let page = get(addr, &format!("/runs/{manifest}/licenses?all=1"), "").body;
    assert!(page.contains("signed by rita.key.pub"), "{page}");
}

/// A record of the project's store, decoded.
fn stored_record(p: &Project, digest: &str) -> Value {
    let store = prov_store::Store::open(&p.path(".prov"), prov_store::Access::Shared, true).unwrap();
    serde_json::from_slice(&store.read(&digest.parse().unwrap()).unwrap()).unwrap()
}

/// A store whose license ledger lost a bit in every shard (as a disk or a hand can do): no
/// page that reads the ledger shows a fate or a proof made of those bytes, and each
/// says that the store is damaged, naming the object by digest, and how to check it; the
/// audit of the run does not hold. A flipped bit in the run manifest itself is named as
/// damage too, not as "no such run".
#[test]
fn a_damaged_store_is_said_to_be_damaged_and_gives_no_fate_no_proof_and_no_holding_audit() {
    let (p, manifest) = project();
    let run = stored_record(&p, &manifest);
    let license_stage = run["stages"].as_array().unwrap().iter().find(|s| s["name"] == "license").unwrap().clone();
    let stage = stored_record(&p, license_stage["manifest"].as_str().unwrap());
    let ledger = stage["outputs"]["ledger"]["digest"].as_str().unwrap_or_else(|| panic!("{stage}")).to_owned();
    let parts = stored_record(&p, stored_record(&p, &ledger)["parts"].as_str().unwrap());
    let shards: Vec<String> =
        parts["shards"].as_array().unwrap().iter().map(|s| s["digest"].as_str().unwrap().to_owned()).collect();
    assert_eq!(shards.len(), 4, "{parts}");
    for shard in &shards {
        crate::common::flip_byte(&p.object_file(shard), 200);
    }
    let server = serve(&p, "127.0.0.1:0", &["--audit-policy", "audit.yaml"]);
    let addr = &server.addr;
    let damaged = |what: &str, r: &crate::test_serve::Response| {
        assert_eq!(r.status, 500, "{what}: {}", r.body);
        assert!(r.body.contains("the store is damaged") && r.body.contains("prov verify"), "{what}: {}", r.body);
        assert!(shards.iter().any(|s| r.body.contains(s.as_str())), "{what} names the object: {}", r.body);
        assert!(!r.body.contains(&p.path(".prov").display().to_string()), "{what} names no path: {}", r.body);
    };
    let page = get(addr, &format!("/runs/{manifest}/document?q={FRENCH_ID}"), "");
    damaged("the document page", &page);
    assert!(!page.body.contains("training data"), "no fate is shown: {}", page.body);
    let proof = get(addr, &format!("/runs/{manifest}/proof?q={FRENCH_ID}"), "");
    damaged("the proof", &proof);
    assert!(!proof.head.contains("content-disposition"), "no proof is offered: {}", proof.head);
    // `prov verify` says the same of the same objects.
    let verify = p.prov(&["verify"]);
    verify.exit(2);
    assert!(shards.iter().all(|s| verify.stderr().contains(s.as_str()) || verify.stdout().contains(s.as_str())));

    // The audit runs in the background; its report, when done, does not hold.
    let report = (0..600)
        .map(|_| {
            let r = get(addr, &format!("/runs/{manifest}/audit/workbench-audit"), "");
            if r.body.contains("<title>Auditing") {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            r
        })
        .find(|r| !r.body.contains("<title>Auditing"))
        .expect("the audit ends");
    assert_eq!(report.status, 200, "{}", report.body);
    let license = report.body.split("data-kind=\"license\"").nth(1).expect("the license claim").to_owned();
    assert!(license.contains("badge fails"), "the license claim fails: {license}");
    assert!(!report.body.contains("Every claim holds"), "{}", report.body);
    assert!(shards.iter().any(|s| license.contains(s.as_str())), "it names the shard: {license}");

    // The run manifest itself damaged: said so, not "no such run".
    crate::common::flip_byte(&p.object_file(&manifest), 30);
    let server = serve(&p, "127.0.0.1:0", &[]);
    let page = get(&server.addr, &format!("/runs/{manifest}"), "");
    assert_eq!(page.status, 500, "{}", page.body);
    assert!(page.body.contains("the store is damaged") && page.body.contains(&manifest), "{}", page.body);
}
