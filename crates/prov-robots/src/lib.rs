//! robots.txt: an RFC 9309 parser and matcher that says which rule decided, and the `robots`
//! stage kind that applies a pinned robots.txt snapshot to a dataset with hindsight
//! ([`RobotsStage`], in `stage`).
//!
//! [`RobotsTxt::parse`] reads a body as bytes and never fails; what it could not use is
//! counted in [`ParseStats`], and [`RobotsTxt::looks_unparseable`] tells a stage when to give
//! the `unparseable` reason code. [`RobotsTxt::check`] answers whether a crawler may fetch a
//! URL and returns a [`Decision`] naming the deciding rule, its line and its group.
//!
//! Filtering many documents takes a faster path with the same answers: parsing compiles the
//! groups into rule tables (in `table`), [`RobotsTxt::rules_for`] finds a crawler's table
//! once and [`RequestPath`] prepares a URL once. [`RobotsTxt::parse_for`] compiles tables
//! only for the [`Crawlers`] a caller will ask about, as the stage does.
//!
//! # Rules implemented (RFC 9309)
//!
//! - Lines end with CR, LF or CRLF; a UTF-8 byte order mark (or a prefix of one) at the start
//!   is skipped; `#` starts a comment; directive names are case-insensitive; a line without
//!   `:` is ignored; the body is read as bytes, so invalid UTF-8 is no obstacle.
//! - A run of `user-agent` lines starts a group and the `allow`/`disallow` lines after it
//!   belong to every agent in the run; the next `user-agent` line after a rule starts a new
//!   group. Other records (`sitemap`, `crawl-delay`) and blank lines do not end a group, and
//!   rules before the first `user-agent` line belong to none (§2.1).
//! - The crawler's product token is its user-agent up to the first `/` (`CCBot/2.0` is
//!   `CCBot`); a group line names the leading product token of its value (letters, `-`, `_`:
//!   `FooBot/1.0` and `FooBot crawler` both name `FooBot`, and `AB42bot` names `AB`); the
//!   value is `*` only when the `*` stands alone or before white space, so `*OrkashBot*`
//!   names no crawler. Tokens compare case-insensitively; every group naming the crawler
//!   applies, merged; if none does, the `*` groups apply, merged; if there are none either,
//!   everything is allowed (§2.2.1).
//! - A rule matches the path and query of the URL (§2.2.2); `*` matches any sequence and a
//!   final `$` anchors the end (§2.2.3). The longest matching pattern wins, counted in octets
//!   of its canonical form including `*` and `$`; between an `allow` and a `disallow` of the
//!   same length, `allow` wins. An empty `disallow` matches nothing.
//! - Canonical form: rule paths have their non-ASCII octets percent-encoded and the hex
//!   digits of escapes upper-cased; request paths have their escapes upper-cased. Escapes of
//!   unreserved characters are compared as written, not decoded: the conformance suite
//!   (google/robotstxt-spec-test) expects `Allow: /%62%61%7A` not to match `/baz`.
//! - `/robots.txt` is implicitly allowed (§2.2.2), unless [`CheckOptions`] says otherwise:
//!   the conformance suite has three cases that expect the file itself to be disallowed.
//!
//! # Example
//!
//! ```
//! use prov_robots::{Directive, RobotsTxt};
//!
//! let robots = RobotsTxt::parse(b"User-agent: GPTBot\nDisallow: /\nAllow: /public/\n");
//! let d = robots.check("GPTBot/1.1", "https://example.com/private/page");
//! assert!(!d.allowed);
//! let rule = d.rule.unwrap();
//! assert_eq!((rule.line, rule.directive, rule.pattern.as_str()), (2, Directive::Disallow, "/"));
//! assert_eq!(d.group_agent.as_deref(), Some("GPTBot"));
//! assert!(robots.check("GPTBot", "/public/index.html").allowed);
//! assert!(robots.check("CCBot", "/private/page").allowed);
//! ```

#[cfg(test)]
mod disagreements;
mod matcher;
mod parse;
mod scan;
mod stage;
mod table;

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

pub use parse::{BodyKind, KeyReading, MAX_BODY, ParseStats};
pub use stage::{APERTUS_AGENTS, RobotsConfig, RobotsMode, RobotsStage, robots_decider, url_host};
pub use table::Crawlers;

use parse::Agent;

/// A parsed robots.txt body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RobotsTxt {
    /// The groups, their agents and rules, the rules' patterns (ASCII), the statistics, and
    /// the lines of misspelled keys.
    parsed: parse::Parsed,
    /// The groups compiled for [`RobotsTxt::is_allowed`].
    tables: table::Tables,
    /// The crawlers the tables were compiled for, if not for every token the file names.
    crawlers: Option<Arc<Crawlers>>,
}

/// Whether a rule allows or disallows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Directive {
    /// `allow:`
    Allow,
    /// `disallow:`
    Disallow,
}

impl Directive {
    /// Returns the directive name as written in a robots.txt (`Allow`, `Disallow`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "Allow",
            Self::Disallow => "Disallow",
        }
    }
}

impl fmt::Display for Directive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The rule that decided a [`Decision`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MatchedRule {
    /// 1-based line number of the rule in the robots.txt body.
    pub line: usize,
    /// `Allow` or `Disallow`.
    pub directive: Directive,
    /// The path pattern in canonical form (non-ASCII octets percent-encoded, escapes in
    /// upper case), which is what was compared.
    pub pattern: String,
}

/// Why a [`Decision`] came out as it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// A rule matched: [`Decision::rule`] is that rule.
    Rule,
    /// A group applied, but none of its rules matched: allowed.
    NoMatchingRule,
    /// No group names the crawler and there is no `*` group: allowed.
    NoGroup,
    /// The path is `/robots.txt`, which is implicitly allowed (RFC 9309 §2.2.2).
    RobotsTxt,
}

/// The answer to "may this crawler fetch this URL?", with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// True when the crawler may fetch the URL.
    pub allowed: bool,
    /// The deciding rule, if a rule matched.
    pub rule: Option<MatchedRule>,
    /// The product token (as written in the file, or `*`) of the group that applied, if one
    /// did; with merged groups, the one that holds the deciding rule.
    pub group_agent: Option<String>,
    /// Why the decision came out as it did.
    pub basis: Basis,
    /// The path and query that were matched, in canonical form.
    pub path: String,
}

/// Options of [`RobotsTxt::check_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckOptions {
    /// Allow `/robots.txt` whatever the rules say (RFC 9309 §2.2.2). On by default; the
    /// google/robotstxt-spec-test suite expects it off.
    pub robots_txt_implicitly_allowed: bool,
}

impl Default for CheckOptions {
    fn default() -> Self {
        Self { robots_txt_implicitly_allowed: true }
    }
}

impl RobotsTxt {
    /// Parses a robots.txt body. Never fails: lines that cannot be used are counted in
    /// [`RobotsTxt::stats`] and ignored.
    pub fn parse(bytes: &[u8]) -> RobotsTxt {
        Self::parse_with(bytes, KeyReading::Rfc9309)
    }

    /// Parses a robots.txt body, reading keys as `reading` says.
    pub fn parse_with(bytes: &[u8], reading: KeyReading) -> RobotsTxt {
        let parsed = parse::parse(bytes, reading);
        let tables = table::Tables::compile(&parsed, None);
        RobotsTxt { parsed, tables, crawlers: None }
    }

    /// Parses a robots.txt body for checks by the given crawlers: like
    /// [`RobotsTxt::parse_with`], but the rule tables that make [`RobotsTxt::is_allowed`] and
    /// [`RobotsTxt::rules_for`] fast are compiled only for these crawlers (and the `*`
    /// groups), and finding a crawler's rules takes no search. Any other crawler still gets
    /// the right answer, from the explaining path, which is slower. A stage that checks a
    /// fixed list of crawlers against many files parses them this way; so does Protego, which
    /// compiles a crawler's rules on its first check.
    pub fn parse_for(bytes: &[u8], reading: KeyReading, crawlers: &Arc<Crawlers>) -> RobotsTxt {
        let parsed = parse::parse(bytes, reading);
        let tables = table::Tables::compile(&parsed, Some(crawlers));
        RobotsTxt { parsed, tables, crawlers: Some(Arc::clone(crawlers)) }
    }

    /// Returns what the parser saw, including what it ignored.
    pub fn stats(&self) -> &ParseStats {
        &self.parsed.stats
    }

    /// The line numbers (1-based) of keys that RFC 9309 does not know but Google's parser
    /// reads as `user-agent`, `allow` or `disallow`.
    pub fn misspelled_key_lines(&self) -> &[usize] {
        &self.parsed.misspelled
    }

    /// True when the body does not look like a robots.txt at all: it is HTML or binary, or
    /// it has lines that could not be used and not a single group. A stage records such a
    /// body with the `unparseable` reason code (the decision is still "allowed").
    pub fn looks_unparseable(&self) -> bool {
        self.parsed.stats.body != BodyKind::Text
            || (self.parsed.stats.groups == 0 && self.parsed.stats.ignored_lines() > 0)
    }

    /// Returns whether `user_agent` may fetch `url_or_path`, with the deciding rule.
    ///
    /// `user_agent` is a product token or a user-agent string whose product token comes
    /// before the first `/` (`CCBot/2.0`); `*` asks about the `*` group alone.
    /// `url_or_path` is an absolute URL or a path; the path and query are matched.
    pub fn check(&self, user_agent: &str, url_or_path: &str) -> Decision {
        self.check_with(user_agent, url_or_path, CheckOptions::default())
    }

    /// Like [`RobotsTxt::check`], with options.
    pub fn check_with(&self, user_agent: &str, url_or_path: &str, options: CheckOptions) -> Decision {
        let path = matcher::request_path(url_or_path);
        let (basis, best, first_agent) = self.decide(user_agent, &path, options);
        Decision {
            allowed: best.is_none_or(|(rule, _)| rule.directive == Directive::Allow),
            rule: best.map(|(rule, _)| MatchedRule {
                line: rule.line as usize,
                directive: rule.directive,
                // Patterns are ASCII, so nothing is lost.
                pattern: String::from_utf8_lossy(&self.parsed.patterns[rule.span()]).into_owned(),
            }),
            group_agent: best.map(|(_, a)| a).or(first_agent).map(|a| self.parsed.agent_str(a).to_owned()),
            basis,
            path: path.into_owned(),
        }
    }

    /// Returns whether `user_agent` may fetch `path`, a request path as [`request_path`]
    /// gives it: the same decision as [`RobotsTxt::check_with`] without building a
    /// [`Decision`], for filtering many documents. It uses rule tables compiled at parse
    /// time and allocates nothing.
    pub fn is_allowed(&self, user_agent: &str, path: &str, options: CheckOptions) -> bool {
        self.rules_for(user_agent).is_allowed(path, options)
    }

    /// Returns the rules that apply to `user_agent`, found once for many checks: the merged
    /// groups naming its product token, or else the `*` groups, or else none. For one crawler
    /// and many paths, this saves finding the groups on every [`RobotsTxt::is_allowed`].
    pub fn rules_for<'r>(&'r self, user_agent: &'r str) -> AgentRules<'r> {
        let token = product_token(user_agent);
        // Compiled for some crawlers, another crawler has no table: the explaining path.
        let applies = match &self.crawlers {
            Some(c) => self.tables.for_crawler(c, token).unwrap_or(table::Applies::NotCompiled),
            None => self.tables.applies_to(token),
        };
        let rules = match applies {
            table::Applies::Table(i) => Rules::Table(self.tables.table(i, &self.parsed.patterns)),
            table::Applies::Nothing => Rules::Everything,
            table::Applies::NotCompiled => Rules::Explain(self, token),
        };
        AgentRules { rules }
    }

    /// The decision itself: the basis, the winning rule with its group's agent, and the first
    /// applicable group's agent.
    fn decide(
        &self,
        user_agent: &str,
        path: &str,
        options: CheckOptions,
    ) -> (Basis, Option<(&parse::Rule, &Agent)>, Option<&Agent>) {
        if options.robots_txt_implicitly_allowed && path == "/robots.txt" {
            return (Basis::RobotsTxt, None, None);
        }
        let token = product_token(user_agent);
        let p = &self.parsed;
        let named =
            |a: &Agent| matches!(a, Agent::Token(t) if !t.is_empty() && p.agent_str(a).eq_ignore_ascii_case(token));
        // The groups naming the crawler's product token, or else the `*` groups (merged).
        let specific = p.agents.iter().any(named);
        let applies = |a: &Agent| if specific { named(a) } else { matches!(a, Agent::Any) };
        let groups =
            p.groups.iter().filter_map(|g| p.agents[g.agents.clone()].iter().find(|a| applies(a)).map(|a| (g, a)));
        let mut first_agent = None;
        // The longest pattern wins; `allow` wins a tie; among equals, the earliest line.
        let mut best: Option<(&parse::Rule, &Agent)> = None;
        for (group, agent) in groups {
            first_agent.get_or_insert(agent);
            for rule in &p.rules[group.rules.clone()] {
                let better = best.is_none_or(|(b, _)| {
                    (rule.pattern.len(), rule.directive == Directive::Allow)
                        > (b.pattern.len(), b.directive == Directive::Allow)
                });
                let pattern = &p.patterns[rule.span()];
                if better && matcher::matches(pattern, path.as_bytes()) {
                    best = Some((rule, agent));
                }
            }
        }
        let basis = match (first_agent, best) {
            (None, _) => Basis::NoGroup,
            (Some(_), Some(_)) => Basis::Rule,
            (Some(_), None) => Basis::NoMatchingRule,
        };
        (basis, best, first_agent)
    }
}

/// The rules of one robots.txt that apply to one crawler: see [`RobotsTxt::rules_for`].
#[derive(Debug, Clone, Copy)]
pub struct AgentRules<'r> {
    rules: Rules<'r>,
}

#[derive(Debug, Clone, Copy)]
enum Rules<'r> {
    /// A compiled table.
    Table(table::TableRef<'r>),
    /// No group applies: everything is allowed.
    Everything,
    /// Groups whose table was not compiled ([`RobotsTxt::parse_for`] other crawlers): the
    /// file and the crawler's product token, for the explaining path.
    Explain(&'r RobotsTxt, &'r str),
}

impl AgentRules<'_> {
    /// Returns whether the crawler may fetch `path`, a request path as [`request_path`] gives
    /// it; the same answer as [`RobotsTxt::is_allowed`]. Allocates nothing, unless the file
    /// was parsed for other crawlers.
    pub fn is_allowed(&self, path: &str, options: CheckOptions) -> bool {
        self.answer(path, None, options)
    }

    /// Like [`AgentRules::is_allowed`], for a path prepared once for many checks.
    pub fn allows(&self, path: &RequestPath<'_>, options: CheckOptions) -> bool {
        self.answer(&path.path, Some(&path.probe), options)
    }

    fn answer(&self, path: &str, probe: Option<&table::Probe>, options: CheckOptions) -> bool {
        if options.robots_txt_implicitly_allowed && path == "/robots.txt" {
            return true;
        }
        match self.rules {
            Rules::Table(t) => match probe {
                Some(probe) => t.allows(path.as_bytes(), probe),
                None => t.allows(path.as_bytes(), &table::Probe::new(path.as_bytes())),
            },
            Rules::Everything => true,
            Rules::Explain(robots, token) => {
                let (_, best, _) = robots.decide(token, path, options);
                best.is_none_or(|(rule, _)| rule.directive == Directive::Allow)
            }
        }
    }

    /// True when `self` and `other` are the same rules (the same merged groups of the same
    /// robots.txt, or both none), so that they give the same answer for every path: crawlers
    /// that fall back to the same groups can share one check.
    pub fn same_rules(&self, other: &AgentRules<'_>) -> bool {
        match (&self.rules, &other.rules) {
            (Rules::Table(a), Rules::Table(b)) => a.same(b),
            (Rules::Everything, Rules::Everything) => true,
            (Rules::Explain(a, x), Rules::Explain(b, y)) => std::ptr::eq(*a, *b) && x.eq_ignore_ascii_case(y),
            _ => false,
        }
    }
}

/// The request path of a URL, prepared once for checks against many files and crawlers: what
/// [`request_path`] returns, and what the compiled rule tables test first.
#[derive(Debug, Clone)]
pub struct RequestPath<'u> {
    path: std::borrow::Cow<'u, str>,
    probe: table::Probe,
}

impl<'u> RequestPath<'u> {
    /// Prepares the request path of `url_or_path` (see [`request_path`]).
    pub fn new(url_or_path: &'u str) -> RequestPath<'u> {
        let path = matcher::request_path(url_or_path);
        let probe = table::Probe::new(path.as_bytes());
        RequestPath { path, probe }
    }

    /// Returns the path and query in canonical form.
    pub fn as_str(&self) -> &str {
        &self.path
    }
}

/// Returns the request path of a URL (path and query, without the fragment, percent escapes
/// normalised as rules are) or of a bare path: compute it once per URL for
/// [`RobotsTxt::is_allowed`].
pub fn request_path(url_or_path: &str) -> std::borrow::Cow<'_, str> {
    matcher::request_path(url_or_path)
}

/// Returns the product token of a crawler's user-agent: the text before the first `/`,
/// without surrounding white space (`CCBot/2.0` → `CCBot`).
pub fn product_token(user_agent: &str) -> &str {
    let token = user_agent.bytes().position(|b| b == b'/').map_or(user_agent, |slash| &user_agent[..slash]);
    // Most tokens have no surrounding white space: skip the Unicode-aware trim for them.
    match token.as_bytes() {
        [first, .., last] if first.is_ascii_graphic() && last.is_ascii_graphic() => token,
        _ => token.trim(),
    }
}

/// Registers the `robots` stage kind.
pub fn register(registry: &mut prov_exec::Registry) {
    registry.register(std::sync::Arc::new(RobotsStage));
}

#[cfg(test)]
mod tests {
    /// `User Agent: *` is no group for RFC 9309; with Google's key reading it is. The prefix
    /// rule (`Disallowing:` is a disallow line) is transcribed from Google's robots.cc (its
    /// `GetKeyType`, frequent typos on), not compared with it: its C++ is not run here. The
    /// exact spellings are compared with Protego in `tests/test_robots.rs`.
    #[test]
    fn misspelled_keys_are_counted_and_read_only_when_asked() {
        let body = b"User Agent: *\nDisalow: /a\nuseragent: FooBot\nDISALLOWING: /b\nAllowed: /b/c\nSitemap: /s\n";
        let rfc = RobotsTxt::parse(body);
        assert_eq!((rfc.stats().misspelled_keys, rfc.stats().groups), (5, 0));
        assert_eq!(rfc.misspelled_key_lines(), [1, 2, 3, 4, 5]);
        assert!(rfc.check("FooBot", "/a").allowed && rfc.check("FooBot", "/b").allowed);
        let google = RobotsTxt::parse_with(body, KeyReading::GoogleTypos);
        assert_eq!((google.stats().misspelled_keys, google.stats().groups), (5, 2));
        assert!(!google.check("OtherBot", "/a").allowed, "`User Agent: *` then `Disalow` disallows");
        assert!(google.check("FooBot", "/a").allowed, "FooBot has a group of its own");
        assert!(!google.check("FooBot", "/b").allowed, "`DISALLOWING` is a disallow line");
        assert!(google.check("FooBot", "/b/c").allowed, "`Allowed` allows, the longer match");
        assert!(google.check("FooBot", "/c").allowed);
        // `User-agent` spelled right is no misspelling in either reading.
        assert_eq!(RobotsTxt::parse(b"User-agent: *\nDisallow: /\n").stats().misspelled_keys, 0);
    }

    use super::*;

    fn allowed(body: &str, agent: &str, url: &str) -> bool {
        RobotsTxt::parse(body.as_bytes()).check(agent, url).allowed
    }

    #[test]
    fn no_groups_allow_everything() {
        let d = RobotsTxt::parse(b"").check("FooBot", "/x");
        assert!(d.allowed);
        assert_eq!(d.basis, Basis::NoGroup);
        assert_eq!(d.group_agent, None);
        assert!(allowed("user-agent: BarBot\ndisallow: /\n", "FooBot", "/x"));
    }

    #[test]
    fn the_star_group_applies_only_when_no_group_names_the_crawler() {
        let body = "user-agent: *\ndisallow: /x\nuser-agent: FooBot\nallow: /x/y\n";
        assert!(allowed(body, "FooBot", "http://foo.bar/x/y"));
        assert!(allowed(body, "FooBot", "http://foo.bar/x/z"));
        assert!(!allowed(body, "BarBot", "http://foo.bar/x/y"));
        let d = RobotsTxt::parse(body.as_bytes()).check("BarBot", "/x/y");
        assert_eq!(d.group_agent.as_deref(), Some("*"));
    }

    #[test]
    fn agent_matching_is_case_insensitive_on_the_product_token() {
        let body = "User-agent: FooBot\nDisallow: /\n";
        assert!(!allowed(body, "foobot", "/"));
        assert!(!allowed(body, "FOOBOT/2.1", "/"));
        assert!(!allowed(body, " FooBot ", "/"));
        assert!(allowed(body, "FooBotX", "/"));
        assert!(allowed(body, "Foo", "/"));
        // A group line names its leading token; a crawler token with a space names nothing.
        let body = "User-agent: *\nDisallow: /\nUser-agent: Foo Bar\nAllow: /x/\nDisallow: /\n";
        assert!(allowed(body, "foo", "/x/y"));
        assert!(!allowed(body, "Foo Bar", "/x/y"));
    }

    #[test]
    fn a_star_inside_a_name_is_not_the_star_group() {
        // From www.stuff.co.nz: the `*WordPress*` group names no crawler, so its
        // `Disallow: /` must not reach the crawlers that the `*` group governs.
        let body = "User-agent: *\nDisallow: /search\n\nUser-agent: *WordPress*\nDisallow: /\n";
        assert!(allowed(body, "GPTBot", "/page"));
        assert!(allowed(body, "*", "/page"));
        assert!(!allowed(body, "GPTBot", "/search"));
        assert!(allowed(body, "WordPress", "/page"));
    }

    #[test]
    fn records_other_than_rules_do_not_end_a_group() {
        // RFC 9309 §2.2.4: other records MUST NOT terminate a group; google/robotstxt's
        // robots_test.cc (ID_LineSyntax_Groups_OtherRules) asks the same of unknown records.
        // From bitbucket.org: the `*` group shares `Disallow: /` with `008`.
        let body = "User-Agent: *\nCrawl-delay: 120\n\nUser-agent: 008\nDisallow: /\n";
        assert!(!allowed(body, "GPTBot", "/x"));
        let body = "User-agent: BarBot\nSitemap: https://foo.bar/sitemap\nUser-agent: *\nDisallow: /\n";
        assert!(!allowed(body, "BarBot", "/"));
        assert!(!allowed(body, "FooBot", "/"));
    }

    #[test]
    fn groups_for_the_same_agent_are_merged() {
        let body = "user-agent: FooBot\ndisallow: /\nallow: /x/\nuser-agent: BarBot\ndisallow: /\n\
                    user-agent: FooBot\nallow: /z/\n";
        assert!(allowed(body, "FooBot", "/x/b"));
        assert!(allowed(body, "FooBot", "/z/d"));
        assert!(!allowed(body, "FooBot", "/y/c"));
        let d = RobotsTxt::parse(body.as_bytes()).check("foobot", "/z/d");
        assert_eq!(d.rule.map(|r| r.line), Some(7));
        assert_eq!(d.group_agent.as_deref(), Some("FooBot"));
    }

    #[test]
    fn the_longest_match_wins_whatever_the_order() {
        assert!(!allowed("user-agent: a\ndisallow: /x/page.html\nallow: /x/\n", "a", "/x/page.html"));
        assert!(allowed("user-agent: a\nallow: /x/page.html\ndisallow: /x/\n", "a", "/x/page.html"));
        assert!(!allowed("user-agent: a\nallow: /page\ndisallow: /*.html\n", "a", "/page.html"));
        // `$` counts towards the length.
        assert!(allowed("user-agent: a\nallow: /$\ndisallow: /\n", "a", "/"));
        assert!(!allowed("user-agent: a\nallow: /$\ndisallow: /\n", "a", "/page"));
    }

    #[test]
    fn allow_wins_a_tie() {
        let d = RobotsTxt::parse(b"user-agent: a\ndisallow: /folder\nallow: /folder\n").check("a", "/folder/page");
        assert!(d.allowed);
        assert_eq!(d.rule.map(|r| (r.line, r.directive)), Some((3, Directive::Allow)));
        assert!(allowed("user-agent: a\ndisallow: /\nallow: /\n", "a", "/x"));
    }

    #[test]
    fn an_empty_disallow_allows() {
        let d = RobotsTxt::parse(b"user-agent: a\ndisallow:\n").check("a", "/x");
        assert!(d.allowed);
        assert_eq!(d.basis, Basis::NoMatchingRule);
        assert_eq!(d.group_agent.as_deref(), Some("a"));
    }

    #[test]
    fn rules_match_the_path_and_query_case_sensitively() {
        let body = "user-agent: a\ndisallow: /\nallow: /fish\n";
        assert!(allowed(body, "a", "http://foo.bar/fish.html?id=anything"));
        assert!(!allowed(body, "a", "http://foo.bar/?id=fish"));
        assert!(!allowed(body, "a", "http://foo.bar/Fish.asp"));
        assert!(!allowed("user-agent: a\ndisallow: /*?\n", "a", "/page?x=1#frag"));
        assert!(allowed("user-agent: a\ndisallow: /*?\n", "a", "/page#frag?"));
    }

    #[test]
    fn percent_encoding_is_compared_in_canonical_form() {
        let body = "user-agent: a\ndisallow: /\nallow: /foo/bar/ツ\n";
        assert!(allowed(body, "a", "/foo/bar/%E3%83%84"));
        assert!(allowed(body, "a", "/foo/bar/%e3%83%84"));
        assert!(!allowed(body, "a", "/foo/bar/ツ"));
        let body = "user-agent: a\ndisallow: /\nallow: /foo/bar/%62%61%7a\n";
        assert!(allowed(body, "a", "/foo/bar/%62%61%7A"));
        assert!(!allowed(body, "a", "/foo/bar/baz"));
    }

    #[test]
    fn robots_txt_is_implicitly_allowed_unless_told_otherwise() {
        let robots = RobotsTxt::parse(b"user-agent: *\ndisallow: /\n");
        let d = robots.check("a", "http://example.com/robots.txt");
        assert!(d.allowed);
        assert_eq!(d.basis, Basis::RobotsTxt);
        let strict = CheckOptions { robots_txt_implicitly_allowed: false };
        assert!(!robots.check_with("a", "http://example.com/robots.txt", strict).allowed);
        assert!(!robots.check("a", "/robots.txt.bak").allowed);
    }

    #[test]
    fn a_bom_and_any_line_ending_are_accepted() {
        for body in [
            &b"\xEF\xBB\xBFUser-Agent: foo\nDisallow: /x\n"[..],
            b"User-Agent: foo\r\nDisallow: /x\r\n",
            b"User-Agent: foo\rDisallow: /x\r",
            b"User-Agent: foo\nDisallow: /x",
        ] {
            assert!(!RobotsTxt::parse(body).check("foo", "/x").allowed, "{body:?}");
        }
        // A BOM in the middle is just bytes of a key that is not recognised.
        assert!(RobotsTxt::parse(b"User-Agent: foo\n\xEF\xBB\xBFDisallow: /x\n").check("foo", "/x").allowed);
    }

    #[test]
    fn unparseable_bodies_are_flagged() {
        assert!(RobotsTxt::parse(b"<html><body>404</body></html>").looks_unparseable());
        assert!(RobotsTxt::parse(b"this is not\na robots file\n").looks_unparseable());
        assert!(RobotsTxt::parse(b"\x1F\x8B\x08\x00\x00").looks_unparseable());
        assert!(!RobotsTxt::parse(b"").looks_unparseable());
        assert!(!RobotsTxt::parse(b"# only a comment\n").looks_unparseable());
        assert!(!RobotsTxt::parse(b"User-agent: *\n<br />\nDisallow: /\n").looks_unparseable());
    }

    #[test]
    fn product_tokens_stop_at_the_slash() {
        assert_eq!(product_token("CCBot/2.0"), "CCBot");
        assert_eq!(product_token(" GPTBot "), "GPTBot");
        assert_eq!(product_token("*"), "*");
        assert_eq!(product_token(""), "");
        assert_eq!(product_token("a"), "a");
        assert_eq!(product_token("\u{a0}GPTBot\u{2002}/1"), "GPTBot");
        assert_eq!(product_token("Foo Bar/1"), "Foo Bar");
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        fn robots_line() -> impl Strategy<Value = String> {
            let key = prop::sample::select(vec!["user-agent", "User-Agent", "allow", "disallow", "sitemap", "x"]);
            let value = "[ */$%a-fA-F0-9?ツ#:_-]{0,12}";
            (key, value).prop_map(|(k, v)| format!("{k}: {v}"))
        }

        proptest! {
            #[test]
            fn random_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..512),
                                        agent in ".{0,12}", url in ".{0,40}") {
                let robots = RobotsTxt::parse(&body);
                let _ = robots.looks_unparseable();
                let d = robots.check(&agent, &url);
                prop_assert_eq!(d.allowed, d.rule.as_ref().is_none_or(|r| r.directive == Directive::Allow));
            }

            #[test]
            fn random_urls_never_panic(url in "(https?://[a-z.:@]{0,10})?[/?#%a-fA-F0-9*$ツ.:]{0,40}",
                                       agent in "[*a-zA-Z/ 0-9.-]{0,10}") {
                let robots = RobotsTxt::parse(b"user-agent: *\ndisallow: /*a$\nallow: /%E3*\ndisallow: /\n");
                let d = robots.check(&agent, &url);
                prop_assert!(d.path.starts_with('/'));
            }

            // Line endings do not change any decision.
            #[test]
            fn line_endings_do_not_matter(lines in prop::collection::vec(robots_line(), 0..12),
                                          agent in "[a-zA-Z*]{1,4}", path in "/[a-f/%0-9.*$]{0,10}") {
                let lf = RobotsTxt::parse(lines.join("\n").as_bytes()).check(&agent, &path);
                let crlf = RobotsTxt::parse(lines.join("\r\n").as_bytes()).check(&agent, &path);
                let cr = RobotsTxt::parse(lines.join("\r").as_bytes()).check(&agent, &path);
                prop_assert_eq!(&lf, &crlf);
                prop_assert_eq!(&lf, &cr);
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]

        /// The allocation-free path and the explaining path always agree.
        #[test]
        fn is_allowed_agrees_with_check(
            body in proptest::collection::vec(proptest::sample::select(vec![
                "User-agent: *\n", "User-agent: GPTBot\n", "user-agent: ccbot\n", "Disallow: /\n", "Allow: /a\n",
                "Disallow: /a*b$\n", "Allow: /*.html$\n", "Disallow: /%7E\n", "Disallow:\n", "\n", "# c\n",
            ]), 0..12),
            agent in proptest::sample::select(vec!["GPTBot", "CCBot/2.0", "*", "Other"]),
            path in "/[a-z~%7Eb.html]{0,8}",
        ) {
            let txt = RobotsTxt::parse(body.concat().as_bytes());
            let slow = txt.check(agent, &path).allowed;
            let fast = txt.is_allowed(agent, &request_path(&path), CheckOptions::default());
            proptest::prop_assert_eq!(slow, fast);
        }

        /// The same with enough rules per group for the compiled tables' octet index, merged
        /// groups, and patterns with and without `*` and `$`.
        #[test]
        fn indexed_tables_agree_with_check(
            rules in proptest::collection::vec(("(A|Disa)llow", "(/|\\*|/\\*)?[ab/$*.]{0,11}"), 0..40),
            agents in proptest::collection::vec(proptest::sample::select(vec!["*", "a", "B", "a"]), 1..4),
            split in 0usize..40,
            agent in proptest::sample::select(vec!["a", "b/1", "*", "c"]),
            path in "/[ab/$.]{0,13}",
            crawlers in proptest::collection::vec(proptest::sample::select(vec!["a", "B", "*", "c", "CCBot/2.0", ""]), 0..4),
        ) {
            let group = |rules: &[(String, String)]| {
                let names = agents.iter().map(|a| ("user-agent", *a));
                let lines = names.chain(rules.iter().map(|(d, p)| (d.as_str(), p.as_str())));
                lines.map(|(key, value)| [key, ": ", value, "\n"].concat()).collect::<String>()
            };
            let split = split.min(rules.len());
            let body = group(&rules[..split]) + "user-agent: b\ndisallow: /a\n" + &group(&rules[split..]);
            let txt = RobotsTxt::parse(body.as_bytes());
            let slow = txt.check(agent, &path).allowed;
            let fast = txt.is_allowed(agent, &request_path(&path), CheckOptions::default());
            proptest::prop_assert_eq!(slow, fast, "{}", body);
            let prepared = txt.rules_for(agent).allows(&RequestPath::new(&path), CheckOptions::default());
            proptest::prop_assert_eq!(slow, prepared, "{}", body);
            // Compiled for some crawlers, which may or may not include this one.
            let crawlers = Arc::new(Crawlers::new(crawlers.iter().copied()));
            let some = RobotsTxt::parse_for(body.as_bytes(), KeyReading::Rfc9309, &crawlers);
            let compiled = some.rules_for(agent).allows(&RequestPath::new(&path), CheckOptions::default());
            proptest::prop_assert_eq!(slow, compiled, "{} for {:?}", body, crawlers);
            proptest::prop_assert_eq!(slow, some.check(agent, &path).allowed);
            // Crawlers that share rules in the full tables share them here, and the reverse.
            for other in ["a", "b/1", "*", "c", "A"] {
                let same = txt.rules_for(agent).same_rules(&txt.rules_for(other));
                if some.rules_for(agent).same_rules(&some.rules_for(other)) {
                    proptest::prop_assert!(same, "{} and {} share rules only when compiled for {:?}", agent, other, crawlers);
                }
            }
        }
    }
}
