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
    let url = url.split_once('#').map_or(url, |(before, _)| before);
    let after_authority = |rest: &'_ str| -> usize { rest.find(['/', '?']).unwrap_or(rest.len()) };
    let path = if let Some(rest) = url.strip_prefix("//") {
        &rest[after_authority(rest)..]
    } else if url.starts_with('/') {
        url
    } else if let Some(rest) = strip_scheme(url) {
        &rest[after_authority(rest)..]
    } else {
        url
    };
    let path = if path.starts_with('/') { Cow::Borrowed(path) } else { Cow::Owned(format!("/{path}")) };
    uppercase_escapes(path)
}

/// Returns what follows `scheme://` when `url` starts with a scheme (RFC 3986 §3.1:
/// `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`) and `://`.
fn strip_scheme(url: &str) -> Option<&str> {
    let (scheme, rest) = url.split_once("://")?;
    let mut chars = scheme.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some(rest)
}

/// Upper-cases the hex digits of every `%xx` escape; borrows when there is nothing to change.
fn uppercase_escapes(path: Cow<'_, str>) -> Cow<'_, str> {
    let bytes = path.as_bytes();
    let needs = bytes.windows(3).any(|w| {
        w[0] == b'%'
            && w[1].is_ascii_hexdigit()
            && w[2].is_ascii_hexdigit()
            && (w[1].is_ascii_lowercase() || w[2].is_ascii_lowercase())
    });
    if !needs {
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
