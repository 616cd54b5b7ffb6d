//! The web workbench (`prov serve`) as a person and an attacker use it: the quickstart's run
//! served from its store, its pages read over plain HTTP, then driven in a real headless
//! Chromium through ChromeDriver (WebDriver, Debian's `chromium` and `chromium-driver`, which
//! `scripts/setup` installs): open the runs, follow a run to its stages, an output to its
//! lineage, and a box of the lineage graph to the next. Screenshots of each page go to
//! `$PROV_SCREENSHOTS` (the book's `book/src/images/workbench/` when refreshing its figures),
//! else into the test's project.
//!
//! Security, with well-formed requests: a non-loopback bind without the token is refused
//! (401) and with it served; `..`, absolute paths and digest prefixes in every parameter are
//! refused; a 100 MB body is refused (413) from its headers, before any of it is sent; a
//! body of unknown length likewise; an error page names no path and no backtrace.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::common::Project;

/// A `prov serve` child, killed when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) addr: String,
    pub(crate) token: Option<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `prov serve --bind <bind>` (plus `extra`) in `p` and waits for its address.
pub(crate) fn serve(p: &Project, bind: &str, extra: &[&str]) -> Server {
    let mut args = vec!["--json", "serve", "--bind", bind];
    args.extend_from_slice(extra);
    let mut child = p.command(&args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("prov serve starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let msg: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not the serve message ({e}): {line}"));
    assert_eq!(msg["type"], "serve", "{msg}");
    Server {
        child,
        addr: msg["data"]["address"].as_str().unwrap().to_owned(),
        token: msg["data"]["token"].as_str().map(str::to_owned),
    }
}

/// A response: status, head (lower-cased) and body.
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) head: String,
    pub(crate) body: String,
}

/// Sends `request` (a whole HTTP/1.1 request) to `addr` and reads the response: its head,
/// then `Content-Length` bytes, or chunks to the last, or to the end of the connection.
pub(crate) fn send(addr: &str, request: &[u8]) -> Response {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request).unwrap();
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 65536];
    loop {
        let n = s.read(&mut buf).unwrap_or(0);
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&buf[..n]);
        let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
        let length =
            head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse::<usize>().ok());
        if length.is_some_and(|len| bytes.len() >= end + 4 + len)
            || (head.contains("chunked") && bytes.ends_with(b"0\r\n\r\n"))
        {
            break;
        }
    }
    parse(&bytes)
}

pub(crate) fn parse(bytes: &[u8]) -> Response {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Response { status, head: head.to_ascii_lowercase(), body: body.to_owned() }
}

pub(crate) fn get(addr: &str, path: &str, headers: &str) -> Response {
    send(addr, format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n").as_bytes())
}

/// The run manifest of `recipe`'s run in `p`.
pub(crate) fn run_manifest(p: &Project, recipe: &str) -> String {
    let run = p.json(&["run", recipe]);
    run.iter().find(|l| l["type"] == "run").expect("the run ends")["data"]["run_manifest"].as_str().unwrap().to_owned()
}

/// A second run of the quickstart in `p`, its sample a quarter instead of half.
fn quickstart_quarter(p: &Project) -> String {
    let recipe = fs_err::read_to_string(p.path("recipes/quickstart.yaml")).unwrap();
    assert!(recipe.contains("fraction: 0.5"));
    p.write("recipes/quickstart-quarter.yaml", &recipe.replace("fraction: 0.5", "fraction: 0.25"));
    run_manifest(p, "recipes/quickstart-quarter.yaml")
}

/// The quickstart run recorded in a fresh project, and its run manifest.
fn quickstart() -> (Project, String) {
    let p = Project::with_recipes();
    let run = p.json(&["run", "recipes/quickstart.yaml"]);
    let manifest = run.iter().find(|l| l["type"] == "run").expect("the run ends")["data"]["run_manifest"]
        .as_str()
        .unwrap()
        .to_owned();
    (p, manifest)
}

#[test]
fn the_workbench_serves_runs_stages_and_lineage_and_refuses_what_it_should() {
    let (p, manifest) = quickstart();
    let server = serve(&p, "127.0.0.1:0", &[]);
    assert!(server.token.is_none(), "loopback needs no token");
    let addr = &server.addr;

    // The runs page links the run; the run page lists its stages with their outputs; an
    // output's lineage is an SVG whose boxes link to their own lineage.
    let runs = get(addr, "/", "");
    assert_eq!(runs.status, 200, "{}", runs.body);
    assert!(runs.body.contains(&format!("href=\"/runs/{manifest}\"")), "{}", runs.body);
    let run = get(addr, &format!("/runs/{manifest}"), "");
    assert_eq!(run.status, 200);
    for stage in ["shards", "half", "checksums"] {
        assert!(run.body.contains(&format!("id=\"stage-{stage}\"")), "{stage}: {}", run.body);
    }
    // Each stage's time in the execution that recorded the run.
    assert_eq!(run.body.matches(", executed</td>").count(), 4, "the source and three stages: {}", run.body);
    let output = run.body.split("class=\"output\" href=\"/lineage/").nth(1).unwrap().split('"').next().unwrap();
    let lineage = get(addr, &format!("/lineage/{output}"), "");
    assert_eq!(lineage.status, 200);
    assert!(lineage.body.contains("<svg") && lineage.body.contains("class=\"node target\""), "{}", lineage.body);
    assert!(lineage.body.contains("class=\"node upstream\""), "an output has what it was made from");
    let css = get(addr, "/static/style.css", "");
    assert!(css.status == 200 && css.head.contains("text/css"));

    // Identifiers are full digests and nothing else: paths, `..` and prefixes are refused,
    // and no refusal shows a file or a path of the server's.
    let short = &manifest[..20];
    for path in [
        "/runs/..%2F..%2F..%2Fetc%2Fpasswd".to_owned(),
        "/runs/%2Fetc%2Fpasswd".to_owned(),
        "/lineage/..%2F.prov%2FVERSION".to_owned(),
        "/lineage/blake3:..".to_owned(),
        format!("/runs/{short}"),
        "/../../etc/passwd".to_owned(),
        "/static/..%2F..%2FCargo.toml".to_owned(),
    ] {
        let r = get(addr, &path, "");
        assert!(matches!(r.status, 400 | 404), "{path}: {}", r.status);
        assert!(!r.body.contains("root:") && !r.body.contains("[package]"), "{path}: {}", r.body);
        assert!(!r.body.contains(&p.root.display().to_string()) && !r.body.contains("panicked"), "{path}");
    }
    let missing = format!("blake3:{}", "0".repeat(64));
    assert_eq!(get(addr, &format!("/lineage/{missing}"), "").status, 404);
    assert_eq!(get(addr, &format!("/runs/{output}"), "").status, 404, "an object that is not a run");

    // Two runs compared: the lockfiles' changed parameter, the stages whose outputs differ.
    let quarter = quickstart_quarter(&p);
    let diff = get(addr, &format!("/diff?a={manifest}&b={quarter}"), "");
    assert_eq!(diff.status, 200, "{}", diff.body);
    assert!(diff.body.contains("config.fraction") && diff.body.contains("0.25"), "{}", diff.body);
    assert!(diff.body.contains("outputs.dataset") && diff.body.contains("documents_out"), "{}", diff.body);
    assert!(get(addr, "/", "").body.contains("id=\"compare\""), "two runs: the compare form");
    assert_eq!(get(addr, &format!("/diff?a={manifest}&b=..%2F..%2Fetc%2Fpasswd"), "").status, 400);
    assert_eq!(get(addr, &format!("/diff?a={manifest}"), "").status, 400, "b missing");

    // A 100 MB body is refused from its headers: the answer comes before any byte of it.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = format!("POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\n\r\n", 100 * 1024 * 1024);
    s.write_all(head.as_bytes()).unwrap();
    let mut answer = [0u8; 512];
    let n = s.read(&mut answer).expect("answered without the body");
    assert_eq!(parse(&answer[..n]).status, 413, "{}", String::from_utf8_lossy(&answer[..n]));
    let chunked =
        send(addr, format!("POST / HTTP/1.1\r\nHost: {addr}\r\nTransfer-Encoding: chunked\r\n\r\n").as_bytes());
    assert_eq!(chunked.status, 413);
    // The server is still there.
    assert_eq!(get(addr, "/", "").status, 200);
}

#[test]
fn a_server_bound_beyond_loopback_needs_its_token() {
    let (p, manifest) = quickstart();
    let server = serve(&p, "0.0.0.0:0", &[]);
    let token = server.token.clone().expect("a token is generated for a non-loopback bind");
    assert_eq!(token.len(), 64);
    let port = server.addr.rsplit(':').next().unwrap();
    let addr = format!("127.0.0.1:{port}");
    let page = format!("/runs/{manifest}");
    assert_eq!(get(&addr, &page, "").status, 401, "no token");
    assert_eq!(get(&addr, &page, "Authorization: Bearer wrong-token-0123456789\r\n").status, 401);
    assert_eq!(get(&addr, &format!("{page}?token={}", &token[..63]), "").status, 401, "a prefix of it");
    assert_eq!(get(&addr, &page, &format!("Authorization: Bearer {token}\r\n")).status, 200);
    let with_query = get(&addr, &format!("{page}?token={token}"), "");
    assert_eq!(with_query.status, 200);
    assert!(with_query.head.contains("set-cookie: prov_token=") && with_query.head.contains("httponly"));
    assert_eq!(get(&addr, &page, &format!("Cookie: prov_token={token}\r\n")).status, 200);
    // The body bound holds before the token is looked at.
    let big = format!("POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 104857600\r\nConnection: close\r\n\r\n");
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(big.as_bytes()).unwrap();
    let mut answer = [0u8; 256];
    let n = s.read(&mut answer).unwrap();
    assert_eq!(parse(&answer[..n]).status, 413);

    // A token that is too short to guess-proof is refused at start.
    let r = p.prov(&["serve", "--bind", "0.0.0.0:0", "--token", "short"]);
    r.exit(1);
    assert!(r.stderr().contains("--token"), "{}", r.describe());
}

/// Where a browser test writes its screenshots: `$PROV_SCREENSHOTS` (the book's figures when
/// refreshing them), else the test's project.
pub(crate) fn screenshots(p: &Project) -> std::path::PathBuf {
    std::env::var_os("PROV_SCREENSHOTS").map_or_else(|| p.path("screenshots"), std::path::PathBuf::from)
}

/// A minimal WebDriver client (the W3C protocol is JSON over HTTP).
pub(crate) struct Browser {
    driver: Child,
    addr: String,
    session: String,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.call("DELETE", "", &Value::Null);
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Browser {
    pub(crate) fn start(profile: &std::path::Path) -> Option<Self> {
        let driver = prov_testkit::require(
            std::path::PathBuf::from("/usr/bin/chromedriver"),
            "Debian's chromium-driver: run `scripts/setup`",
        )?;
        prov_testkit::require(std::path::PathBuf::from("/usr/bin/chromium"), "Debian's chromium: run `scripts/setup`")?;
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = std::process::Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let addr = format!("127.0.0.1:{port}");
        let mut browser = Self { driver: child, addr, session: String::new() };
        for _ in 0..100 {
            if TcpStream::connect(&browser.addr).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1280,900",
        ];
        let mut args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        // An element is waited for up to 10 s (a page a click led to may still be loading).
        let caps = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome", "timeouts": {"implicit": 10_000},
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args,
                "prefs": {"download.default_directory": profile.join("downloads"),
                    "download.prompt_for_download": false}}}}});
        let created = browser.call("POST", "/session", &caps);
        created["value"]["sessionId"].as_str().expect("a session").clone_into(&mut browser.session);
        Some(browser)
    }

    /// One WebDriver command; `path` is below `/session/<id>` unless it starts the session.
    fn call(&self, method: &str, path: &str, body: &Value) -> Value {
        let url = if path == "/session" { path.to_owned() } else { format!("/session/{}{path}", self.session) };
        let payload = if body.is_null() { String::new() } else { body.to_string() };
        let request = format!(
            "{method} {url} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
            self.addr,
            payload.len()
        );
        let r = send(&self.addr, request.as_bytes());
        let body = r.body.trim();
        // ChromeDriver may answer in chunks; the JSON is the part between the braces.
        let json = &body[body.find('{').unwrap_or(0)..=body.rfind('}').unwrap_or(0)];
        serde_json::from_str(json).unwrap_or_else(|e| panic!("WebDriver {method} {url}: {e}: {body}"))
    }

    pub(crate) fn open(&self, url: &str) {
        self.call("POST", "/url", &json!({ "url": url }));
    }

    pub(crate) fn find(&self, css: &str) -> String {
        let v = self.call("POST", "/element", &json!({"using": "css selector", "value": css}));
        v["value"]["element-6066-11e4-a52e-4f735466cecf"]
            .as_str()
            .unwrap_or_else(|| panic!("no element `{css}`: {v}"))
            .to_owned()
    }

    pub(crate) fn click(&self, css: &str) {
        let id = self.find(css);
        self.call("POST", &format!("/element/{id}/click"), &json!({}));
    }

    pub(crate) fn text(&self, css: &str) -> String {
        let id = self.find(css);
        self.call("GET", &format!("/element/{id}/text"), &Value::Null)["value"].as_str().unwrap_or_default().to_owned()
    }

    /// Types `text` into the element `css`.
    pub(crate) fn fill(&self, css: &str, text: &str) {
        let id = self.find(css);
        self.call("POST", &format!("/element/{id}/value"), &json!({ "text": text }));
    }

    pub(crate) fn url(&self) -> String {
        self.call("GET", "/url", &Value::Null)["value"].as_str().unwrap_or_default().to_owned()
    }

    pub(crate) fn screenshot(&self, dir: &std::path::Path, name: &str) {
        let v = self.call("GET", "/screenshot", &Value::Null);
        let png = base64::engine::general_purpose::STANDARD.decode(v["value"].as_str().unwrap()).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        fs_err::create_dir_all(dir).unwrap();
        fs_err::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}

#[test]
fn a_reviewer_follows_a_run_to_its_lineage_in_chromium() {
    let (p, manifest) = quickstart();
    let server = serve(&p, "127.0.0.1:0", &[]);
    let Some(browser) = Browser::start(&p.path("chromium-profile")) else { return };
    let shots = screenshots(&p);
    let base = format!("http://{}", server.addr);

    browser.open(&format!("{base}/"));
    assert!(browser.text("#executions").contains("quickstart"));
    browser.screenshot(&shots, "runs");

    browser.click("a.run-link");
    assert!(browser.text("#stages").contains("checksums"));
    assert_eq!(browser.url(), format!("{base}/runs/{manifest}"));
    browser.screenshot(&shots, "run");

    browser.click("#stage-half a.output");
    assert!(browser.text("#nodes").contains("upstream"));
    assert!(browser.url().starts_with(&format!("{base}/lineage/blake3:")));
    let first = browser.url();
    browser.screenshot(&shots, "lineage");

    // A box of the graph leads to that object's own lineage.
    browser.click("svg a.node.upstream");
    for _ in 0..100 {
        if browser.url() != first {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_ne!(browser.url(), first);
    assert!(browser.url().starts_with(&format!("{base}/lineage/blake3:")));
    assert!(!browser.find("svg a.node.target").is_empty());

    // With a second run, the runs page offers to compare two; the diff names the change.
    quickstart_quarter(&p);
    browser.open(&format!("{base}/"));
    browser.click("#compare button");
    assert!(browser.text("#config").contains("config.fraction"));
    assert!(browser.url().starts_with(&format!("{base}/diff?a=blake3")), "{}", browser.url());
    assert!(browser.text("#outputs").contains("half"));
    browser.screenshot(&shots, "diff");
}

/// The short version of `scripts/bench-serve` (which measures; this only counts): 50 clients
/// at once, 400 requests over the quickstart's pages, every one answered 200 with its page.
/// No time is asserted.
#[test]
fn fifty_clients_at_once_are_all_answered() {
    let (p, manifest) = quickstart();
    let server = serve(&p, "127.0.0.1:0", &[]);
    let run = get(&server.addr, &format!("/runs/{manifest}"), "");
    let output = run.body.split("class=\"output\" href=\"/lineage/").nth(1).unwrap().split('"').next().unwrap();
    let pages = ["/".to_owned(), format!("/runs/{manifest}"), format!("/lineage/{output}"), "/static/style.css".into()];
    let answered = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for client in 0..50 {
            let (pages, addr, answered) = (&pages, &server.addr, &answered);
            s.spawn(move || {
                for i in 0..8 {
                    let page = &pages[(client + i) % pages.len()];
                    let r = get(addr, page, "");
                    assert_eq!(r.status, 200, "{page}: {}", r.body);
                    assert!(!r.body.is_empty(), "{page}");
                    answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    assert_eq!(answered.into_inner(), 400);
}
