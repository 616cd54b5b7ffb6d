//! The lineage graph of a store: what each object was made from and what was made from it.
//!
//! Built from every stage record (input -> stage -> output, edges labelled with the input or
//! output name) and from the records that contain other objects (dataset and ledger -> shards,
//! source -> content, tree -> files, checkpoint -> its parts; containment edges). Nodes are
//! named after the stage or source that is them, the stage output that produced them, the
//! tree path they are at, or their dataset and shard index. Everything is kept sorted, so the
//! same store always gives the same graph and the same text ([`Lineage::to_dot`],
//! [`Lineage::to_mermaid`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;

use prov_store::{Digest, ObjectKind, Store};

use crate::record::Record;
use crate::records::DatasetRecord;
use crate::stored::{StoredError, get_record};

/// An edge: produced-from (input -> stage -> output) or containment.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    /// The object the edge leaves.
    pub from: Digest,
    /// The object the edge reaches.
    pub to: Digest,
    /// The input or output name, or empty for containment.
    pub label: String,
    /// True for containment (drawn dashed).
    pub containment: bool,
}

/// Where a node stands relative to the queried object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The queried object.
    Target,
    /// Something it was made from.
    Upstream,
    /// Something made from it.
    Downstream,
}

impl Role {
    /// `target`, `upstream` or `downstream`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Target => "target",
            Self::Upstream => "upstream",
            Self::Downstream => "downstream",
        }
    }
}

/// A node of a lineage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The object.
    pub digest: Digest,
    /// Its record kind, or the index's object kind, or `missing`.
    pub kind: String,
    /// Its best name, when it has one.
    pub name: Option<String>,
    /// Where it stands relative to the target.
    pub role: Role,
}

impl Node {
    /// Label lines: kind, then the name and short digest, or the short digest alone.
    pub fn label_lines(&self) -> Vec<String> {
        match &self.name {
            Some(n) if self.kind == "stage" => vec![self.kind.clone(), n.clone()],
            Some(n) => vec![self.kind.clone(), n.clone(), self.digest.short()],
            None => vec![self.kind.clone(), self.digest.short()],
        }
    }
}

/// The whole graph of a store.
#[derive(Debug, Default)]
pub struct Graph {
    /// Record kind of every decoded manifest.
    record_kind: BTreeMap<Digest, &'static str>,
    /// Best name for a node: `(priority, name)`, lowest priority wins.
    names: BTreeMap<Digest, (u8, String)>,
    edges: BTreeSet<Edge>,
}

impl Graph {
    fn name(&mut self, d: Digest, priority: u8, name: String) {
        let cand = (priority, name);
        match self.names.get(&d) {
            Some(old) if *old <= cand => {}
            _ => {
                self.names.insert(d, cand);
            }
        }
    }

    fn edge(&mut self, from: Digest, to: Digest, label: &str, containment: bool) {
        self.edges.insert(Edge { from, to, label: label.to_owned(), containment });
    }

    /// Reads every manifest the store's index lists and builds the graph.
    ///
    /// # Errors
    ///
    /// When a manifest is missing or damaged, or the index cannot be read.
    pub fn of_store(store: &Store) -> Result<Self, StoredError> {
        let mut g = Self::default();
        let mut shards = Vec::new();
        let mut parts_of = Vec::new();
        for d in store.index().objects_of_kind(ObjectKind::Manifest.as_str())? {
            let record = get_record(store, &d)?;
            g.record_kind.insert(d, record.kind_name());
            match &record {
                Record::Stage(s) => {
                    g.name(d, 0, s.name.to_string());
                    for (input, i) in &s.inputs {
                        g.edge(*i, d, input, false);
                    }
                    for (output, o) in &s.outputs {
                        g.edge(d, o.digest, output, false);
                        g.name(o.digest, 1, format!("{}.{output}", s.name));
                    }
                }
                Record::Dataset(DatasetRecord { shards: parts, .. }) => {
                    for (i, s) in parts.iter().enumerate() {
                        g.edge(d, s.digest, "", true);
                        shards.push((s.digest, d, i));
                    }
                }
                Record::Ledger(l) => {
                    g.edge(d, l.parts, "", true);
                    parts_of.push((l.parts, d));
                }
                Record::LedgerParts(p) => {
                    for (i, s) in p.shards.iter().enumerate() {
                        g.edge(d, s.digest, "", true);
                        shards.push((s.digest, d, i));
                    }
                    for c in &p.chunks {
                        g.edge(d, c.digest, "", true);
                    }
                }
                Record::Source(s) => {
                    g.name(d, 0, s.name.to_string());
                    let c = s.content.digest();
                    g.edge(d, c, "", true);
                    let file = s.origin.rsplit('/').next().unwrap_or(&s.origin);
                    g.name(c, 3, file.to_owned());
                }
                Record::Tree(t) => {
                    for e in &t.entries {
                        g.edge(d, e.digest, "", true);
                        g.name(e.digest, 2, e.path.to_string());
                    }
                }
                Record::Checkpoint(c) => {
                    g.name(d, 0, format!("step {}", c.step));
                    let palette = c.palette.map(|p| ("palette", p));
                    for (part, digest) in
                        [("weights", c.weights), ("optimizer", c.optimizer), ("rng", c.rng), ("config", c.config)]
                            .into_iter()
                            .chain(palette)
                    {
                        g.edge(d, digest, "", true);
                        g.name(digest, 2, part.to_owned());
                    }
                }
                Record::Verdict(_)
                | Record::Run(_)
                | Record::Lockfile(_)
                | Record::Replay(_)
                | Record::Attestation(_) => {}
            }
        }
        // Shards are named after their dataset, whose name comes from the stage output
        // that produced it, known only once every record is read. A ledger's shards hang
        // from its parts record, which takes the ledger's name first.
        for (parts, ledger) in parts_of {
            if let Some((_, n)) = g.names.get(&ledger).cloned() {
                g.name(parts, 2, n);
            }
        }
        for (shard, dataset, i) in shards {
            let name = match g.names.get(&dataset) {
                Some((_, n)) => format!("{n}[{i}]"),
                None => format!("{}[{i}]", dataset.short()),
            };
            g.name(shard, 2, name);
        }
        Ok(g)
    }

    /// True when an edge leaves or reaches `d`.
    pub fn contains(&self, d: &Digest) -> bool {
        self.edges.iter().any(|e| e.from == *d || e.to == *d)
    }

    /// Returns the nodes reachable from `start` along edges (forwards or backwards), with
    /// at most `depth` steps.
    fn reach(&self, start: Digest, forward: bool, depth: Option<usize>) -> BTreeSet<Digest> {
        let mut adj: BTreeMap<Digest, Vec<Digest>> = BTreeMap::new();
        for e in &self.edges {
            let (a, b) = if forward { (e.from, e.to) } else { (e.to, e.from) };
            adj.entry(a).or_default().push(b);
        }
        let mut seen = BTreeSet::from([start]);
        let mut queue = VecDeque::from([(start, 0usize)]);
        while let Some((d, dist)) = queue.pop_front() {
            if depth.is_some_and(|max| dist >= max) {
                continue;
            }
            for next in adj.get(&d).into_iter().flatten() {
                if seen.insert(*next) {
                    queue.push_back((*next, dist + 1));
                }
            }
        }
        seen
    }

    /// Everything that leads to `target` and everything it leads to, within `depth` edges.
    /// A node that no record names is `kind`-ed by the store's index, else `object` when the
    /// store holds it and `missing` when it does not.
    ///
    /// # Errors
    ///
    /// When the index cannot be read.
    pub fn lineage(&self, store: &Store, target: Digest, depth: Option<usize>) -> Result<Lineage, StoredError> {
        let up = self.reach(target, false, depth);
        let down = self.reach(target, true, depth);
        let mut nodes = Vec::new();
        for d in up.union(&down) {
            let role = if *d == target {
                Role::Target
            } else if up.contains(d) {
                Role::Upstream
            } else {
                Role::Downstream
            };
            let kind = match self.record_kind.get(d) {
                Some(k) => (*k).to_owned(),
                None => store
                    .index()
                    .object_kind(d)?
                    .unwrap_or_else(|| if store.contains(d) { "object".to_owned() } else { "missing".to_owned() }),
            };
            nodes.push(Node { digest: *d, kind, name: self.names.get(d).map(|(_, n)| n.clone()), role });
        }
        // Named nodes first, by name, then kind; the digest only breaks ties. A stage record's
        // digest depends on the envelope (CPU model and flags), so ordering by digest would
        // draw the same run in another order on another machine.
        nodes.sort_by(|a, b| {
            (a.name.is_none(), &a.name, &a.kind, a.digest).cmp(&(b.name.is_none(), &b.name, &b.kind, b.digest))
        });
        let position: BTreeMap<Digest, usize> = nodes.iter().enumerate().map(|(i, n)| (n.digest, i)).collect();
        let mut edges: Vec<Edge> = self
            .edges
            .iter()
            .filter(|e| {
                (up.contains(&e.from) && up.contains(&e.to)) || (down.contains(&e.from) && down.contains(&e.to))
            })
            .cloned()
            .collect();
        edges.sort_by(|a, b| {
            (position[&a.from], position[&a.to], &a.label, a.containment).cmp(&(
                position[&b.from],
                position[&b.to],
                &b.label,
                b.containment,
            ))
        });
        Ok(Lineage { target, nodes, edges })
    }
}

/// The part of a [`Graph`] around one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lineage {
    /// The queried object.
    pub target: Digest,
    /// The nodes: named ones first, sorted by name, then kind, then digest (the same order on
    /// every machine, where stage records' digests differ with the envelope).
    pub nodes: Vec<Node>,
    /// The edges between them, sorted by the positions of their ends in `nodes`, then label.
    pub edges: Vec<Edge>,
}

impl Lineage {
    /// Graphviz: `digraph lineage { … }`.
    pub fn to_dot(&self) -> String {
        let mut out = String::from("digraph lineage {\n");
        out.push_str("  rankdir=LR;\n");
        out.push_str("  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n");
        out.push_str("  edge [fontname=\"Helvetica\", fontsize=9];\n");
        for n in &self.nodes {
            let label: Vec<String> = n.label_lines().iter().map(|l| dot_escape(l)).collect();
            let (shape, mut style) = match n.kind.as_str() {
                "stage" => ("box", vec!["rounded"]),
                "dataset" => ("cylinder", vec![]),
                "source" => ("note", vec![]),
                "tree" => ("folder", vec![]),
                "checkpoint" => ("box3d", vec![]),
                "shard" => ("component", vec![]),
                _ => ("ellipse", vec![]),
            };
            let mut extra = String::new();
            if n.role == Role::Target {
                style.extend(["filled", "bold"]);
                extra.push_str(", penwidth=3, fillcolor=\"#ffe08a\"");
            }
            let style = if style.is_empty() { String::new() } else { format!(", style=\"{}\"", style.join(",")) };
            let _ = writeln!(out, "  \"{}\" [label=\"{}\", shape={shape}{style}{extra}];", n.digest, label.join("\\n"));
        }
        for e in &self.edges {
            let mut attrs = Vec::new();
            if !e.label.is_empty() {
                attrs.push(format!("label=\"{}\"", dot_escape(&e.label)));
            }
            if e.containment {
                attrs.push("style=dashed".to_owned());
            }
            let attrs = if attrs.is_empty() { String::new() } else { format!(" [{}]", attrs.join(", ")) };
            let _ = writeln!(out, "  \"{}\" -> \"{}\"{attrs};", e.from, e.to);
        }
        out.push_str("}\n");
        out
    }

    /// Mermaid: `flowchart LR`.
    pub fn to_mermaid(&self) -> String {
        let ids: BTreeMap<Digest, String> =
            self.nodes.iter().enumerate().map(|(i, n)| (n.digest, format!("n{i}"))).collect();
        let mut out = String::from("flowchart LR\n");
        for n in &self.nodes {
            let label = n.label_lines().iter().map(|l| mermaid_escape(l)).collect::<Vec<_>>().join("<br/>");
            let id = &ids[&n.digest];
            let _ = match n.kind.as_str() {
                "stage" => writeln!(out, "  {id}[\"{label}\"]"),
                "dataset" => writeln!(out, "  {id}[(\"{label}\")]"),
                _ => writeln!(out, "  {id}(\"{label}\")"),
            };
        }
        for e in &self.edges {
            let (from, to) = (&ids[&e.from], &ids[&e.to]);
            let label: String =
                e.label.chars().map(|c| if c.is_ascii_alphanumeric() || "_-.".contains(c) { c } else { '_' }).collect();
            let _ = match (e.containment, label.is_empty()) {
                (true, _) => writeln!(out, "  {from} -.-> {to}"),
                (false, true) => writeln!(out, "  {from} --> {to}"),
                (false, false) => writeln!(out, "  {from} -->|{label}| {to}"),
            };
        }
        if let Some(n) = self.nodes.iter().find(|n| n.role == Role::Target) {
            out.push_str("  classDef target stroke-width:4px,font-weight:bold\n");
            let _ = writeln!(out, "  class {} target", ids[&n.digest]);
        }
        out
    }
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn mermaid_escape(s: &str) -> String {
    s.replace('#', "#35;").replace('&', "#amp;").replace('"', "#quot;").replace('<', "#lt;").replace('>', "#gt;")
}
