//! Matching request paths against rule patterns (RFC 9309 §2.2.2, §2.2.3).

use std::borrow::Cow;

/// Returns the part of a URL that rules are matched against: the path and the query, without
/// the fragment, in canonical form (hex digits of escapes upper-cased).
///
/// Accepts an absolute URL (`scheme://authority/path?query`), a network-path reference
/// (`//authority/path`) or a path. Anything else is taken as a path relative to the root, so
/// `page.html` means `/page.html`. An empty path is `/`.
///
/// Octets outside ASCII are left as they are: a request is expected to be encoded already,
/// and the conformance suite expects a raw `/ツ` not to match a rule for `/%E3%83%84`.
pub(crate) fn request_path(url: &str) -> Cow<'_, str> {
    let bytes = url.as_bytes();
    let url = &url[..bytes.iter().position(|&b| b == b'#').unwrap_or(bytes.len())];
    let bytes = url.as_bytes();
    // Where the authority starts, if there is one: after `//` or after `scheme://`.
    let authority = if bytes.starts_with(b"//") { Some(2) } else { scheme_length(bytes).map(|n| n + 3) };
    let path = match authority {
        Some(start) => {
            let rest = &bytes[start..];
            &url[start + rest.iter().position(|&b| b == b'/' || b == b'?').unwrap_or(rest.len())..]
        }
        None => url,
    };
    let path = if path.starts_with('/') { Cow::Borrowed(path) } else { Cow::Owned(format!("/{path}")) };
    uppercase_escapes(path)
}

/// Returns the length of the scheme when `url` starts with one (RFC 3986 §3.1:
/// `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`) followed by `://`.
fn scheme_length(url: &[u8]) -> Option<usize> {
    let n = url.iter().take_while(|&&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')).count();
    (n > 0 && url[0].is_ascii_alphabetic() && url[n..].starts_with(b"://")).then_some(n)
}

/// Upper-cases the hex digits of every `%xx` escape; borrows when there is nothing to change.
fn uppercase_escapes(path: Cow<'_, str>) -> Cow<'_, str> {
    let bytes = path.as_bytes();
    let lower_escape = |i: usize| {
        let (h, l) = (bytes.get(i + 1).copied().unwrap_or(0), bytes.get(i + 2).copied().unwrap_or(0));
        h.is_ascii_hexdigit() && l.is_ascii_hexdigit() && (h.is_ascii_lowercase() || l.is_ascii_lowercase())
    };
    if !bytes.iter().enumerate().any(|(i, &b)| b == b'%' && lower_escape(i)) {
        return path;
    }
    let mut out = bytes.to_vec();
    let mut i = 0;
    while i + 2 < out.len() {
        if out[i] == b'%' && out[i + 1].is_ascii_hexdigit() && out[i + 2].is_ascii_hexdigit() {
            out[i + 1] = out[i + 1].to_ascii_uppercase();
            out[i + 2] = out[i + 2].to_ascii_uppercase();
            i += 3;
        } else {
            i += 1;
        }
    }
    // Only ASCII hex letters changed, so the bytes are still valid UTF-8.
    Cow::Owned(String::from_utf8(out).expect("upper-casing ASCII letters keeps UTF-8 valid"))
}

/// True when `pattern` matches `path` (RFC 9309 §2.2.3): `*` matches any sequence of octets,
/// a final `$` anchors the pattern at the end of the path, and otherwise the pattern needs to
/// match only a prefix of the path. A `$` elsewhere is an ordinary octet.
///
/// Runs in O(|pattern| · |path|) time at worst and allocates nothing.
pub(crate) fn matches(pattern: &[u8], path: &[u8]) -> bool {
    let (pattern, anchored) = match pattern.split_last() {
        Some((b'$', rest)) => (rest, true),
        _ => (pattern, false),
    };
    let (mut p, mut s) = (0, 0);
    // After the last `*` seen: the pattern index after it and the path index it resumes from.
    let mut star: Option<(usize, usize)> = None;
    loop {
        match pattern.get(p) {
            None if !anchored || s == path.len() => return true,
            Some(b'*') => {
                p += 1;
                star = Some((p, s));
                continue;
            }
            Some(&c) if path.get(s) == Some(&c) => {
                p += 1;
                s += 1;
                continue;
            }
            _ => {}
        }
        // A mismatch: let the last `*` swallow one more octet, or fail.
        match star {
            Some((after, from)) if from < path.len() => {
                star = Some((after, from + 1));
                p = after;
                s = from + 1;
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_path_and_query_without_fragment() {
        assert_eq!(request_path("http://foo.bar/x/y?a=b#frag"), "/x/y?a=b");
        assert_eq!(request_path("https://u@foo.bar:8080/x"), "/x");
        assert_eq!(request_path("http://foo.bar"), "/");
        assert_eq!(request_path("http://foo.bar?q"), "/?q");
        assert_eq!(request_path("http://foo.bar#x"), "/");
        assert_eq!(request_path("//foo.bar/x"), "/x");
        assert_eq!(request_path("http://foo.bar//x"), "//x");
        assert_eq!(
            request_path("http://foo.bar/foo/bar?qux=taz&baz=http://foo.bar?tar&par"),
            "/foo/bar?qux=taz&baz=http://foo.bar?tar&par"
        );
    }

    /// The request path as the first version found it, with `str` searches.
    fn reference_request_path(url: &str) -> String {
        let url = url.split_once('#').map_or(url, |(before, _)| before);
        let after_authority = |rest: &str| -> usize { rest.find(['/', '?']).unwrap_or(rest.len()) };
        let scheme_rest = url.split_once("://").and_then(|(scheme, rest)| {
            let mut chars = scheme.chars();
            let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
            valid.then_some(rest)
        });
        let path = if let Some(rest) = url.strip_prefix("//") {
            &rest[after_authority(rest)..]
        } else if url.starts_with('/') {
            url
        } else if let Some(rest) = scheme_rest {
            &rest[after_authority(rest)..]
        } else {
            url
        };
        let path = if path.starts_with('/') { path.to_owned() } else { format!("/{path}") };
        // The escapes as the current code upper-cases them: only the path is under test.
        uppercase_escapes(Cow::Owned(path)).into_owned()
    }

    proptest::proptest! {
        #[test]
        fn request_paths_are_what_they_were(url in "([a-zA-Z0-9+.:/-]{0,8}(://|//))?[a-zA-Z0-9/?#%:.ツ-]{0,16}") {
            proptest::prop_assert_eq!(request_path(&url), reference_request_path(&url));
        }
    }

    #[test]
    fn bare_paths_are_taken_from_the_root() {
        assert_eq!(request_path("/x?y"), "/x?y");
        assert_eq!(request_path(""), "/");
        assert_eq!(request_path("page.html"), "/page.html");
        assert_eq!(request_path("?q=1"), "/?q=1");
    }

    #[test]
    fn escapes_are_uppercased_and_non_ascii_left_alone() {
        assert_eq!(request_path("/a%e3%83%84b"), "/a%E3%83%84b");
        assert_eq!(request_path("/%zz%4"), "/%zz%4");
        assert_eq!(request_path("/ツ"), "/ツ");
        assert!(matches!(request_path("/already/%AB"), Cow::Borrowed(_)));
    }

    #[test]
    fn patterns_match_prefixes() {
        assert!(matches(b"/fish", b"/fish"));
        assert!(matches(b"/fish", b"/fish.html"));
        assert!(matches(b"/fish", b"/fishheads/yummy.html"));
        assert!(!matches(b"/fish", b"/Fish.asp"));
        assert!(!matches(b"/fish", b"/catfish"));
        assert!(!matches(b"/fish/", b"/fish"));
        assert!(matches(b"/", b"/anything"));
    }

    #[test]
    fn star_matches_any_sequence() {
        assert!(matches(b"/*.php", b"/folder/filename.php?parameters"));
        assert!(matches(b"/*.php", b"//folder/any.php.file.html"));
        assert!(!matches(b"/*.php", b"/windows.PHP"));
        assert!(matches(b"/fish*.php", b"/fishheads/catfish.php?parameters"));
        assert!(matches(b"/foo/*/qux", b"/foo/bar/baz/qux"));
        assert!(matches(b"*", b"/"));
        assert!(matches(b"/a**b", b"/ab"));
    }

    #[test]
    fn a_final_dollar_anchors_at_the_end() {
        assert!(matches(b"/*.php$", b"/filename.php"));
        assert!(!matches(b"/*.php$", b"/filename.php?parameters"));
        assert!(!matches(b"/*.php$", b"/filename.php5"));
        assert!(matches(b"/*.php$", b"/a.php.php"));
        assert!(matches(b"/$", b"/"));
        assert!(!matches(b"/$", b"/page"));
        assert!(!matches(b"$", b"/"));
        // A `$` that is not last is an ordinary octet.
        assert!(matches(b"/a$b", b"/a$bc"));
        assert!(!matches(b"/a$b", b"/ab"));
    }

    #[test]
    fn many_stars_stay_fast() {
        let pattern = [b"/".as_slice(), &b"*a".repeat(200), b"$"].concat();
        let path = [b"/".as_slice(), &b"a".repeat(5000), b"b"].concat();
        assert!(!matches(&pattern, &path));
    }
}
