//! The server's connection limits, in process with a one-second header timeout and two
//! connection slots: clients that connect and send nothing, or half a header, are let go
//! when the timeout passes, so that they cannot keep a third client from its answer for
//! longer (a slow-headers attack against a server whose guard runs only after the headers).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use prov_serve::{ConnectionLimits, ServeConfig, serve};

fn start(limits: ConnectionLimits) -> SocketAddr {
    let dir = tempfile::tempdir().unwrap().keep();
    let config = ServeConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        token: None,
        project_root: dir.clone(),
        store_dir: dir.join(".prov"),
        read_only: true,
        policies: vec![prov_license::Policy::permissive()],
        audit_policies: Arc::new(Vec::new()),
        verdicts: dir.join("verdicts"),
        key: None,
        limits,
        clock: Arc::new(|| 0),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = serve(config, |addr, _| tx.send(addr).unwrap());
    });
    rx.recv_timeout(Duration::from_secs(10)).expect("the server starts")
}

/// The status of `GET path` on a fresh connection, and how long it took.
fn get(addr: SocketAddr, path: &str) -> (String, Duration) {
    let started = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    (answer.lines().next().unwrap_or_default().to_owned(), started.elapsed())
}

#[test]
fn silent_and_slow_clients_are_let_go_and_cannot_hold_the_server() {
    let addr = start(ConnectionLimits { max_connections: 2, header_timeout: Duration::from_secs(1) });
    // Both slots taken: one client says nothing, the other sends half a request head.
    let silent = TcpStream::connect(addr).unwrap();
    let mut slow = TcpStream::connect(addr).unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n").unwrap();
    // A third client is answered once the timeout lets one of them go, not never.
    let (status, took) = get(addr, "/static/style.css");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    // The slow one's connection was closed by the server.
    slow.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 256];
    let started = Instant::now();
    let n = slow.read(&mut buf).unwrap_or(0);
    assert!(n == 0 || String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 408"), "{:?}", &buf[..n]);
    assert!(started.elapsed() < Duration::from_secs(10));
    drop(silent);
}
