//! Compiled rule tables: what [`RobotsTxt::is_allowed`](super::RobotsTxt::is_allowed) uses to
//! answer many checks fast, with the same answers as the explaining path.
//!
//! At parse time the groups are compiled once: every product token that the file names maps
//! to one table holding the rules of all the groups naming it (merged, RFC 9309 §2.2.1), and
//! `*` maps to the table of the `*` groups. Tokens naming the same groups share a table. Each
//! rule has a key, `2 * (pattern length) + (1 if allow)`: of the rules that match a path, the
//! one with the highest key decides (the longest pattern wins, and `allow` wins a tie). A
//! check looks at every rule that can match and keeps the highest key, so a table's rules
//! need no sort by priority. Each rule has quick tests, kept apart in a compact array that a
//! check scans first: the first octets that a matching path starts with, and for a rule with
//! `*` a set of octets that the path must hold. Past them, a rule without `*` is a prefix
//! test (or with a final `$` an equality test), and a rule with `*` runs the general
//! matcher. A table with many rules also has an index by the octet after the leading `/` of
//! its patterns, so that a path is compared only with the rules that can match it. All
//! tables of a file share one array of rules, which point into the parsed body's patterns.

use std::ops::Range;

use super::Directive;
use super::matcher;
use super::parse::{self, Agent, Parsed};

/// Tables with more rules than this get an index by second octet.
const INDEX_FROM: usize = 12;

/// The compiled tables of one robots.txt.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Tables {
    /// The product tokens named by groups, ASCII-lowercased and concatenated.
    names: Vec<u8>,
    /// One entry per distinct token, sorted by token: its range in `names` and its table.
    /// Empty when compiled for some crawlers.
    agents: Vec<(usize, usize, usize)>,
    /// When compiled for some crawlers: for each (by its index in [`Crawlers`]), what applies
    /// to it.
    crawlers: Vec<Applies>,
    /// The table of the `*` groups, if there are any.
    star: Option<usize>,
    /// Every table, by index.
    all: Vec<Table>,
    /// The rules of all tables, each table's in file order (with an index, grouped by second
    /// octet).
    rules: Vec<Rule>,
    /// The quick tests of each rule (same positions as `rules`).
    quick: Vec<Quick>,
    indexes: Vec<Index>,
}

/// The crawlers a parse compiles rule tables for (see
/// [`RobotsTxt::parse_for`](super::RobotsTxt::parse_for)): their product tokens,
/// ASCII-lowercased, sorted, each once.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Crawlers {
    tokens: Vec<Vec<u8>>,
}

impl Crawlers {
    /// The crawlers of these user-agents (product tokens, or user-agent strings whose product
    /// token comes before the first `/`, as [`RobotsTxt::check`](super::RobotsTxt::check)
    /// takes them).
    pub fn new<'a>(user_agents: impl IntoIterator<Item = &'a str>) -> Crawlers {
        let mut tokens: Vec<Vec<u8>> =
            user_agents.into_iter().map(|a| super::product_token(a).as_bytes().to_ascii_lowercase()).collect();
        tokens.sort_unstable();
        tokens.dedup();
        Crawlers { tokens }
    }

    /// The index of the crawler whose product token is `token`, if it is one of these.
    fn index_of(&self, token: &str) -> Option<usize> {
        self.tokens.iter().position(|t| t.eq_ignore_ascii_case(token.as_bytes()))
    }
}

/// What applies to one crawler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applies {
    /// The table of this index: the groups naming the crawler, or else the `*` groups.
    Table(usize),
    /// No group: everything is allowed.
    Nothing,
    /// Groups naming the crawler whose table was not compiled (the file was compiled for
    /// other crawlers): only the explaining path can answer.
    NotCompiled,
}

/// The merged rules of one set of groups.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Table {
    /// Its range of [`Tables::rules`]. With an index: first the rules any path may match,
    /// then one run per second octet.
    rules: Range<usize>,
    /// Its index in [`Tables::indexes`], if it has one.
    index: Option<usize>,
}

/// Which rules of a table can match a path whose second octet is `b`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Index {
    /// The rules any path may match (a range of [`Tables::rules`]).
    any: Range<usize>,
    /// `slot[b]` is 1 + the index in `runs` of the rules whose pattern's second octet is `b`,
    /// or 0 when there are none.
    slot: [u8; 256],
    /// Ranges of [`Tables::rules`].
    runs: Vec<Range<usize>>,
}

/// 16 octets: positions are `u32`, as in the parsed body (see [`parse::MAX_BODY`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rule {
    /// `2 * (length of the canonical pattern) + (1 if allow)`: a higher key wins.
    key: u32,
    /// The pattern's range of the parsed body's patterns (without a final `$` that
    /// [`Kind::Exact`] stands for).
    start: u32,
    end: u32,
    /// 1 + the octet after the leading `/` when every path the rule matches has it there
    /// (the index's key), else 0.
    second: u16,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Kind {
    /// No `*`, no final `$`: the path starts with the pattern.
    Prefix,
    /// No `*`, a final `$` (not stored): the path is the pattern.
    Exact,
    /// A `*` somewhere: the general matcher, on the whole pattern.
    Wildcard,
}

impl Rule {
    /// A placeholder, overwritten before use.
    const EMPTY: Rule = Rule { key: 0, start: 0, end: 0, second: 0, kind: Kind::Prefix };

    fn allows(self) -> bool {
        self.key & 1 == 1
    }
}

/// The rules that apply to one crawler: a table of a [`Tables`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct TableRef<'t> {
    tables: &'t Tables,
    /// The parsed body's patterns.
    patterns: &'t [u8],
    table: &'t Table,
}

impl Tables {
    /// Compiles the groups of a parsed body: the tables of every product token the file
    /// names, or with `only`, of those crawlers' tokens alone.
    pub(crate) fn compile(parsed: &Parsed, only: Option<&Crawlers>) -> Tables {
        let mut star: Vec<usize> = Vec::new();
        // (token, group) for every token a group names; with `only`, (crawler, group) for
        // the crawlers among them.
        let mut named: Vec<(&str, usize)> = Vec::new();
        let mut hits: Vec<(usize, usize)> = Vec::new();
        for (g, group) in parsed.groups.iter().enumerate() {
            for agent in &parsed.agents[group.agents.clone()] {
                match agent {
                    // A group that names `*` twice counts once.
                    Agent::Any if star.last() != Some(&g) => star.push(g),
                    Agent::Token(t) if !t.is_empty() => {
                        let token = parsed.agent_str(agent);
                        match only {
                            None => named.push((token, g)),
                            Some(crawlers) => hits.extend(crawlers.index_of(token).map(|c| (c, g))),
                        }
                    }
                    _ => {}
                }
            }
        }
        let mut b =
            Builder { parsed, out: Tables::default(), single: vec![None; parsed.groups.len()], merged: Vec::new() };
        b.out.star = (!star.is_empty()).then(|| b.table_of(&star));
        match only {
            None => b.named_tables(named),
            Some(crawlers) => b.crawler_tables(crawlers, hits),
        }
        b.out
    }

    /// Returns what applies to the crawler with product token `token`, when it is one of
    /// `crawlers`, the crawlers the file was compiled for; else `None`.
    pub(crate) fn for_crawler(&self, crawlers: &Crawlers, token: &str) -> Option<Applies> {
        crawlers.index_of(token).and_then(|i| self.crawlers.get(i).copied())
    }

    /// Returns what applies to `token`, a crawler's product token: the table of the groups
    /// naming it, else the `*` one, else nothing (everything allowed).
    pub(crate) fn applies_to(&self, token: &str) -> Applies {
        let token = token.as_bytes();
        let named = if token.is_empty() {
            None
        } else {
            let found =
                self.agents.binary_search_by(|&(start, end, _)| cmp_lowercased(&self.names[start..end], token, |c| c));
            found.ok().map(|i| self.agents[i].2)
        };
        match named {
            Some(table) => Applies::Table(table),
            None => self.star.map_or(Applies::Nothing, Applies::Table),
        }
    }

    /// The table of this index.
    pub(crate) fn table<'t>(&'t self, index: usize, patterns: &'t [u8]) -> TableRef<'t> {
        TableRef { tables: self, patterns, table: &self.all[index] }
    }

    /// Appends the table of `rules` (the merged rules of some groups) and returns its index.
    ///
    /// The rules keep their order in the file: a check looks at every rule that can match
    /// and keeps the one with the highest key, so no sort by priority is needed (most checks
    /// are allowed, which means that no rule matches, and a scan in priority order would
    /// look at every rule too). A table with an index holds its rules grouped by second
    /// octet, by one counting pass.
    fn push_table<'r>(&mut self, rules: impl Iterator<Item = &'r parse::Rule>, patterns: &[u8]) -> usize {
        let first = self.rules.len();
        for rule in rules {
            let pattern = &patterns[rule.span()];
            let key = pattern.len() as u32 * 2 + u32::from(rule.directive == Directive::Allow);
            let (kind, stored) = if rule.wildcard {
                (Kind::Wildcard, pattern)
            } else if let Some(before) = pattern.strip_suffix(b"$") {
                (Kind::Exact, before)
            } else {
                (Kind::Prefix, pattern)
            };
            let second = match stored {
                [b'/', b, ..] if *b != b'*' => 1 + u16::from(*b),
                _ => 0,
            };
            let (start, end) = (rule.pattern.start, rule.pattern.start + stored.len() as u32);
            self.rules.push(Rule { key, start, end, second, kind });
            self.quick.push(Quick::of(stored, kind));
        }
        let range = first..self.rules.len();
        let index = if range.len() > INDEX_FROM { self.push_index(range.clone()) } else { None };
        self.all.push(Table { rules: range, index });
        self.all.len() - 1
    }

    /// Groups a table's rules by second octet (those any path may match first, then one run
    /// per octet, each in file order) and appends their index; returns its index.
    fn push_index(&mut self, rules: Range<usize>) -> Option<usize> {
        // Where each second octet's run starts (0: the rules any path may match).
        let mut starts = [0usize; 258];
        for r in &self.rules[rules.clone()] {
            starts[usize::from(r.second) + 1] += 1;
        }
        let mut runs = Vec::new();
        let mut slot = [0u8; 256];
        for second in 1..258 {
            let n = starts[second];
            starts[second] += starts[second - 1];
            if second >= 2 && n > 0 {
                runs.push(rules.start + starts[second - 1]..rules.start + starts[second]);
                // More than 255 distinct octets cannot be named by a `u8` slot: no index.
                slot[second - 2] = u8::try_from(runs.len()).ok()?;
            }
        }
        let mut placed = vec![(Rule::EMPTY, Quick::EMPTY); rules.len()];
        for (r, q) in self.rules[rules.clone()].iter().zip(&self.quick[rules.clone()]) {
            let at = &mut starts[usize::from(r.second)];
            placed[*at] = (*r, *q);
            *at += 1;
        }
        for (i, (r, q)) in placed.into_iter().enumerate() {
            self.rules[rules.start + i] = r;
            self.quick[rules.start + i] = q;
        }
        let any = rules.start..rules.start + runs.first().map_or(rules.len(), |r| r.start - rules.start);
        self.indexes.push(Index { any, slot, runs });
        Some(self.indexes.len() - 1)
    }
}

/// Builds each distinct set of groups' table once.
struct Builder<'p> {
    parsed: &'p Parsed,
    out: Tables,
    /// The table of each group alone, once built.
    single: Vec<Option<usize>>,
    /// The tables of sets of more than one group.
    merged: Vec<(Vec<usize>, usize)>,
}

impl Builder<'_> {
    fn table_of(&mut self, list: &[usize]) -> usize {
        let known = match list {
            [g] => self.single[*g],
            _ => self.merged.iter().find(|(l, _)| l == list).map(|(_, t)| *t),
        };
        if let Some(t) = known {
            return t;
        }
        let parsed = self.parsed;
        let count = list.iter().map(|&g| parsed.groups[g].rules.len()).sum();
        self.out.rules.reserve(count);
        self.out.quick.reserve(count);
        let rules = list.iter().flat_map(|&g| &parsed.rules[parsed.groups[g].rules.clone()]);
        let t = self.out.push_table(rules, &parsed.patterns);
        match list {
            [g] => self.single[*g] = Some(t),
            _ => self.merged.push((list.to_vec(), t)),
        }
        t
    }

    /// The table of every token in `named` ((token, group) pairs, in group order).
    fn named_tables(&mut self, mut named: Vec<(&str, usize)>) {
        named.sort_unstable_by(|(a, ga), (b, gb)| {
            cmp_lowercased(a.as_bytes(), b.as_bytes(), |x| x.to_ascii_lowercase()).then(ga.cmp(gb))
        });
        let mut list = Vec::new();
        let mut rest = &named[..];
        while let [(token, _), ..] = rest {
            let n = rest.iter().take_while(|(t, _)| t.eq_ignore_ascii_case(token)).count();
            list.clear();
            for &(_, g) in &rest[..n] {
                // A group that names the same token twice counts once.
                if list.last() != Some(&g) {
                    list.push(g);
                }
            }
            let table = self.table_of(&list);
            let start = self.out.names.len();
            self.out.names.extend(token.bytes().map(|c| c.to_ascii_lowercase()));
            let end = self.out.names.len();
            self.out.agents.push((start, end, table));
            rest = &rest[n..];
        }
    }

    /// What applies to each crawler, from `hits` ((crawler, group) pairs, in group order):
    /// the table of the groups naming it, else the `*` table, else nothing.
    fn crawler_tables(&mut self, crawlers: &Crawlers, mut hits: Vec<(usize, usize)>) {
        // Stable: each crawler's groups stay in order, and a group naming it twice counts once.
        hits.sort_by_key(|&(c, _)| c);
        hits.dedup();
        let fallback = self.out.star.map_or(Applies::Nothing, Applies::Table);
        let mut list = Vec::new();
        for c in 0..crawlers.tokens.len() {
            list.clear();
            list.extend(hits.iter().filter(|&&(h, _)| h == c).map(|&(_, g)| g));
            let applies = if list.is_empty() { fallback } else { Applies::Table(self.table_of(&list)) };
            self.out.crawlers.push(applies);
        }
    }
}

/// Compares `a`, mapped by `lower_a`, with `b` ASCII-lowercased, without allocating.
fn cmp_lowercased(a: &[u8], b: &[u8], lower_a: impl Fn(u8) -> u8) -> std::cmp::Ordering {
    let common = a.iter().zip(b).map(|(&x, y)| lower_a(x).cmp(&y.to_ascii_lowercase())).find(|o| o.is_ne());
    common.unwrap_or_else(|| a.len().cmp(&b.len()))
}

impl TableRef<'_> {
    /// Returns whether the table allows `path`, whose quick-test data is `probe`.
    pub(crate) fn allows(&self, path: &[u8], probe: &Probe) -> bool {
        let Some(index) = self.table.index.map(|i| &self.tables.indexes[i]) else {
            return self.best_match(self.table.rules.clone(), path, probe, None).is_none_or(Rule::allows);
        };
        let best = self.best_match(index.any.clone(), path, probe, None);
        let slot = path.get(1).map_or(0, |&b| index.slot[usize::from(b)]);
        let best = match slot.checked_sub(1) {
            Some(s) => self.best_match(index.runs[usize::from(s)].clone(), path, probe, best),
            None => best,
        };
        best.is_none_or(Rule::allows)
    }

    /// True when both are the same table of the same file.
    pub(crate) fn same(&self, other: &TableRef<'_>) -> bool {
        std::ptr::eq(self.table, other.table)
    }

    /// The rule of highest key among `best` and the rules of `rules` that match the path.
    /// Rules of equal key give equal answers (the key holds the directive), so which of
    /// them is kept does not matter.
    fn best_match(&self, rules: Range<usize>, path: &[u8], probe: &Probe, mut best: Option<Rule>) -> Option<Rule> {
        let t = self.tables;
        let quick = &t.quick[rules.clone()];
        let mut i = 0;
        // A tight scan over the quick tests; the full test only where they pass.
        while let Some(n) = quick[i..].iter().position(|q| q.passes(probe)) {
            i += n;
            let r = t.rules[rules.start + i];
            i += 1;
            if best.is_some_and(|b| b.key >= r.key) {
                continue;
            }
            let pattern = &self.patterns[r.start as usize..r.end as usize];
            let matched = match r.kind {
                // A byte loop: mismatches come early, and a call to `memcmp` costs more.
                Kind::Prefix => pattern.len() <= path.len() && pattern.iter().zip(path).all(|(a, b)| a == b),
                Kind::Exact => path == pattern,
                Kind::Wildcard => matcher::matches(pattern, path),
            };
            if matched {
                best = Some(r);
            }
        }
        best
    }
}

/// Necessary conditions for a rule to match a path, cheap to test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Quick {
    /// The octets that every path the rule matches holds (see [`octets`]): for a rule with a
    /// `*`, its literal octets; 0 for others, whose head test says more.
    need: u64,
    /// The first (up to 8) octets that every path the rule matches starts with, as [`head`]
    /// reads them (those before the first `*`), and the mask of the octets that count.
    head: u64,
    mask: u64,
}

impl Quick {
    /// A placeholder, overwritten before use.
    const EMPTY: Quick = Quick { need: 0, head: 0, mask: 0 };

    /// The quick tests of a stored pattern (without the final `$` unless it has a `*`).
    fn of(pattern: &[u8], kind: Kind) -> Quick {
        // A pattern without `*` is all literal; only a wildcard one is searched.
        let literal = match kind {
            Kind::Wildcard => &pattern[..memchr::memchr(b'*', pattern).unwrap_or(pattern.len())],
            Kind::Prefix | Kind::Exact => pattern,
        };
        let n = literal.len().min(8);
        let mask = if n == 8 { u64::MAX } else { (1 << (8 * n)) - 1 };
        let need = match kind {
            // All but the `*`s and a final `$`.
            Kind::Wildcard => octets(pattern.strip_suffix(b"$").unwrap_or(pattern)) & !(1 << (b'*' & 63)),
            Kind::Prefix | Kind::Exact => 0,
        };
        Quick { need, head: head(literal), mask }
    }

    fn passes(&self, probe: &Probe) -> bool {
        probe.head & self.mask == self.head && self.need & !probe.octets == 0
    }
}

/// What the quick tests need to know about a request path, computed once per path.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    head: u64,
    octets: u64,
}

impl Probe {
    pub(crate) fn new(path: &[u8]) -> Probe {
        Probe { head: head(path), octets: octets(path) }
    }
}

/// Returns the first 8 octets of `bytes` (fewer when it is shorter, the rest 0) as one
/// little-endian number.
fn head(bytes: &[u8]) -> u64 {
    if let Some(first) = bytes.first_chunk::<8>() {
        return u64::from_le_bytes(*first);
    }
    let mut buf = [0; 8];
    let n = bytes.len().min(8);
    buf[..n].copy_from_slice(&bytes[..n]);
    u64::from_le_bytes(buf)
}

/// Returns the set of octets in `bytes` as bits, octet `b` as bit `b mod 64`. Octets that
/// share a bit only make the filter weaker: a path holding one of them sets the bit that a
/// pattern needing the other asks for, so the filter can let a rule through but never
/// wrongly reject one. (A `*` clears its bit from what a pattern needs, and with it `j`'s.)
fn octets(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0, |set, &b| set | 1 << (b & 63))
}
