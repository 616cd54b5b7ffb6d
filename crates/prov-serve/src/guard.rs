//! What every request passes before a page sees it:
//!
//! - the token, when the server has one: `Authorization: Bearer <token>`, the cookie
//!   `prov_token`, or `?token=` in the URL (which sets the cookie, so that the links of a page
//!   work); compared in constant time; missing or wrong is 401;
//! - the host: a server bound to loopback answers only requests whose `Host` is a loopback
//!   name (`localhost`, `127.0.0.1`, `[::1]`), so that a page of another site whose name was
//!   made to resolve to 127.0.0.1 (DNS rebinding) is refused (421) before any page is read;
//! - the body: a request that declares more than [`MAX_BODY`] bytes, or sends a body of unknown
//!   length, is refused with 413 before any of it is read;
//! - the method: a `--read-only` server refuses everything but `GET` and `HEAD` (403);
//! - a write ([`check_form`]): the form's CSRF token must be the server's, and a browser's
//!   `Origin` and `Sec-Fetch-Site` must say the form came from this server (403);
//! - the identifiers: a URL names objects by full digests (`blake3:` and 64 lower-case hex
//!   digits) and nothing else, so no parameter can name a path ([`parse_digest`]).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prov_store::Digest;

use crate::AppState;

/// The largest request body accepted, in bytes.
pub const MAX_BODY: u64 = 64 * 1024;

/// A fresh token: 32 random bytes from the operating system, as hex.
///
/// # Errors
///
/// When `/dev/urandom` cannot be read.
pub fn new_token() -> std::io::Result<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 32];
    fs_err::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(hex::encode(bytes))
}

/// Equal in time independent of where they differ (for equal lengths).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token a request carries, and whether it came in the URL.
fn presented(headers: &HeaderMap, query: Option<&str>) -> Option<(String, bool)> {
    if let Some(t) =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some((t.to_owned(), false));
    }
    for cookie in headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()) {
        for part in cookie.split(';') {
            if let Some(t) = part.trim().strip_prefix("prov_token=") {
                return Some((t.to_owned(), false));
            }
        }
    }
    let query = query?;
    query.split('&').find_map(|pair| pair.strip_prefix("token=")).map(|t| (t.to_owned(), true))
}

/// True for a `Host` header naming a loopback address (any port).
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, port)| if port.is_empty() { host } else { name }),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The middleware: the host, the body bound, the method, then the token.
pub async fn check(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    if state.config.bind.ip().is_loopback() {
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or_default();
        if !loopback_host(host) {
            return refuse(StatusCode::MISDIRECTED_REQUEST, "this server answers only to a loopback host name");
        }
    }
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).map(str::parse::<u64>);
    let chunked = headers.get(header::TRANSFER_ENCODING).is_some();
    match declared {
        Some(Ok(n)) if n > MAX_BODY => return refuse(StatusCode::PAYLOAD_TOO_LARGE, "the request body is too large"),
        Some(Err(_)) => return refuse(StatusCode::BAD_REQUEST, "the Content-Length is not a number"),
        _ if chunked => return refuse(StatusCode::PAYLOAD_TOO_LARGE, "a request body of unknown length is not read"),
        _ => {}
    }
    if state.config.read_only && !matches!(*request.method(), Method::GET | Method::HEAD) {
        return refuse(StatusCode::FORBIDDEN, "this server is read-only");
    }
    let Some(token) = &state.config.token else {
        let mut response = next.run(request).await;
        protect(&mut response);
        return response;
    };
    let Some((given, in_url)) = presented(request.headers(), request.uri().query()) else {
        return refuse(StatusCode::UNAUTHORIZED, "this server needs its token");
    };
    if !same(given.as_bytes(), token.as_bytes()) {
        return refuse(StatusCode::UNAUTHORIZED, "this server needs its token");
    }
    let mut response = next.run(request).await;
    protect(&mut response);
    if in_url {
        let cookie = format!("prov_token={token}; HttpOnly; SameSite=Strict; Path=/");
        if let Ok(v) = header::HeaderValue::from_str(&cookie) {
            response.headers_mut().insert(header::SET_COOKIE, v);
        }
    }
    response
}

/// Checks a write: `form_token` (the form's hidden `csrf` field) must be the server's, and a
/// browser's headers must place the form on this server: `Origin`, when sent, is this
/// request's own `http://<Host>`, and `Sec-Fetch-Site`, when sent, is `same-origin`. A page
/// of another site can make a browser post to this server, but cannot read a form of it, so
/// it cannot know the token.
///
/// # Errors
///
/// The 403 response to send.
pub fn check_form(state: &AppState, headers: &HeaderMap, form_token: &str) -> Result<(), Response> {
    let header = |name| headers.get(name).and_then(|v: &header::HeaderValue| v.to_str().ok());
    if let Some(origin) = header(header::ORIGIN) {
        let own = header(header::HOST).map(|h| format!("http://{h}"));
        if own.as_deref() != Some(origin) {
            return Err(refuse(StatusCode::FORBIDDEN, "a form of another site cannot write here"));
        }
    }
    if header(header::HeaderName::from_static("sec-fetch-site")).is_some_and(|s| s != "same-origin") {
        return Err(refuse(StatusCode::FORBIDDEN, "a form of another site cannot write here"));
    }
    if !same(form_token.as_bytes(), state.csrf.as_bytes()) {
        return Err(refuse(StatusCode::FORBIDDEN, "the form's CSRF token is not this server's: reload the page"));
    }
    Ok(())
}

/// The headers every answer carries: no script may run on a page or an SVG served (the pages
/// have none), no other site may frame them, forms post only here, types are not sniffed, and
/// no URL (with its digests) leaks to another site as a referrer.
fn protect(response: &mut Response) {
    let headers = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; script-src 'none'; object-src 'none'; style-src 'self' 'unsafe-inline'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        // Not `no-referrer`: under it a browser sends `Origin: null` with a form, which
        // [`check_form`] must refuse.
        (header::REFERRER_POLICY, "same-origin"),
    ] {
        headers.insert(name, header::HeaderValue::from_static(value));
    }
}

/// A plain-text refusal.
fn refuse(status: StatusCode, message: &'static str) -> Response {
    let mut response = (status, Body::from(format!("{message}\n"))).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, header::HeaderValue::from_static("close"));
    headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/plain; charset=utf-8"));
    protect(&mut response);
    response
}

/// A full digest as a URL carries it, or `None` for anything else (a prefix, a path, `..`).
pub fn parse_digest(s: &str) -> Option<Digest> {
    let hex = s.strip_prefix("blake3:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| s.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_full_digests_are_identifiers() {
        let d = format!("blake3:{}", "ab".repeat(32));
        assert!(parse_digest(&d).is_some());
        for bad in
            ["blake3:abc", "../etc/passwd", "/etc/passwd", "blake3:../../x", &d.to_uppercase(), &format!("{d}/..")]
        {
            assert!(parse_digest(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn only_loopback_host_names_pass() {
        for ok in ["localhost", "localhost:8787", "127.0.0.1:80", "127.1.2.3", "[::1]:8787", "[::1]", "LOCALHOST:1"] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in ["", "evil.example:8787", "localhost.evil.example", "10.0.0.1:80", "[::2]:1", "127.0.0.1.nip.io"] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn tokens_are_compared_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd") && !same(b"abc", b"ab"));
        let t = new_token().unwrap();
        assert_eq!(t.len(), 64);
        assert_ne!(t, new_token().unwrap());
    }

    #[test]
    fn a_token_is_found_in_a_header_a_cookie_or_the_url() {
        let mut h = HeaderMap::new();
        assert_eq!(presented(&h, Some("a=1&token=xyz")), Some(("xyz".into(), true)));
        h.insert(header::COOKIE, "x=1; prov_token=abc".parse().unwrap());
        assert_eq!(presented(&h, None), Some(("abc".into(), false)));
        h.insert(header::AUTHORIZATION, "Bearer def".parse().unwrap());
        assert_eq!(presented(&h, None), Some(("def".into(), false)));
    }
}
