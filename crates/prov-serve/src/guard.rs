//! What every request passes before a page sees it:
//!
//! - the token, when the server has one: `Authorization: Bearer <token>`, the cookie
//!   `prov_token`, or `?token=` in the URL (which sets the cookie, so that the links of a page
//!   work); compared in constant time; missing or wrong is 401;
//! - the body: a request that declares more than [`MAX_BODY`] bytes, or sends a body of unknown
//!   length, is refused with 413 before any of it is read (this slice has no page that takes
//!   a body);
//! - the identifiers: a URL names objects by full digests (`blake3:` and 64 lower-case hex
//!   digits) and nothing else, so no parameter can name a path ([`parse_digest`]).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
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

/// The middleware: the body bound, then the token.
pub async fn check(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).map(str::parse::<u64>);
    let chunked = headers.get(header::TRANSFER_ENCODING).is_some();
    match declared {
        Some(Ok(n)) if n > MAX_BODY => return refuse(StatusCode::PAYLOAD_TOO_LARGE, "the request body is too large"),
        Some(Err(_)) => return refuse(StatusCode::BAD_REQUEST, "the Content-Length is not a number"),
        _ if chunked => return refuse(StatusCode::PAYLOAD_TOO_LARGE, "a request body of unknown length is not read"),
        _ => {}
    }
    let Some(token) = &state.config.token else { return next.run(request).await };
    let Some((given, in_url)) = presented(request.headers(), request.uri().query()) else {
        return refuse(StatusCode::UNAUTHORIZED, "this server needs its token");
    };
    if !same(given.as_bytes(), token.as_bytes()) {
        return refuse(StatusCode::UNAUTHORIZED, "this server needs its token");
    }
    let mut response = next.run(request).await;
    if in_url {
        let cookie = format!("prov_token={token}; HttpOnly; SameSite=Strict; Path=/");
        if let Ok(v) = header::HeaderValue::from_str(&cookie) {
            response.headers_mut().insert(header::SET_COOKIE, v);
        }
    }
    response
}

/// A plain-text refusal.
fn refuse(status: StatusCode, message: &'static str) -> Response {
    let mut response = (status, Body::from(format!("{message}\n"))).into_response();
    response.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
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
