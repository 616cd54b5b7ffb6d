//! `prov lineage`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;

use prov_manifest::{Record, get_record};
use prov_store::{Access, Digest, ObjectKind, Store};
use serde_json::json;

use crate::context::CommandContext;
use crate::error::CommandError;
use crate::resolve::resolve_object;
use crate::ui::Ui;

/// Draw what an object was made from and what was made from it, as Graphviz or Mermaid
///
/// Builds a graph from every stage record in the store (input -> stage -> output, edges
/// labelled with the input or output name) and from the records that contain other objects
/// (dataset -> shards, source -> its content, tree -> its files, checkpoint -> its files;
/// drawn dashed). Prints everything that leads to HASH (upstream) and everything HASH leads
/// to (downstream), with HASH highlighted. Nodes are labelled with their kind and their name
/// (a stage or source name, or the stage output that produced them) or short digest.
/// The output is sorted, so the same store always gives the same text.
///
/// Render with `dot -Tsvg` (Graphviz) or paste into any Mermaid renderer.
#[derive(Debug, clap::Args)]
pub(crate) struct LineageArgs {
    /// Object digest, full or a prefix of at least 6 hex digits
    hash: String,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Dot)]
    format: Format,
    /// Follow at most this many edges upstream and downstream (default: all)
    #[arg(long, value_name = "N")]
    depth: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// Graphviz: `digraph lineage { … }`
    Dot,
    /// Mermaid: `flowchart LR`
    Mermaid,
}

/// An edge: produced-from (input -> stage -> output) or containment (dashed).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Edge {
    from: Digest,
    to: Digest,
    label: String,
    containment: bool,
}

/// Where a node stands relative to the queried object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Target,
    Upstream,
    Downstream,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Self::Target => "target",
            Self::Upstream => "upstream",
            Self::Downstream => "downstream",
        }
    }
}

struct Node {
    digest: Digest,
    kind: String,
    name: Option<String>,
    role: Role,
}

impl Node {
    /// Label lines: kind, then the name and short digest, or the short digest alone.
    fn label_lines(&self) -> Vec<String> {
        match &self.name {
            Some(n) if self.kind == "stage" => vec![self.kind.clone(), n.clone()],
            Some(n) => vec![self.kind.clone(), n.clone(), self.digest.short()],
            None => vec![self.kind.clone(), self.digest.short()],
        }
    }
}

/// The whole graph of the store.
#[derive(Default)]
struct Graph {
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

    fn build(store: &Store) -> Result<Self, CommandError> {
        let mut g = Self::default();
        let mut shards = Vec::new();
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
                Record::Dataset(prov_manifest::DatasetRecord { shards: parts, .. })
                | Record::Ledger(prov_manifest::LedgerRecord { shards: parts, .. }) => {
                    for (i, s) in parts.iter().enumerate() {
                        g.edge(d, s.digest, "", true);
                        shards.push((s.digest, d, i));
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
                    for (part, digest) in
                        [("weights", c.weights), ("optimizer", c.optimizer), ("rng", c.rng), ("config", c.config)]
                    {
                        g.edge(d, digest, "", true);
                        g.name(digest, 2, part.to_owned());
                    }
                }
                Record::Verdict(_) | Record::Run(_) | Record::Lockfile(_) | Record::Replay(_) => {}
            }
        }
        // Shards are named after their dataset, whose name comes from the stage output
        // that produced it, known only once every record is read.
        for (shard, dataset, i) in shards {
            let name = match g.names.get(&dataset) {
                Some((_, n)) => format!("{n}[{i}]"),
                None => format!("{}[{i}]", dataset.short()),
            };
            g.name(shard, 2, name);
        }
        Ok(g)
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
}

pub(crate) fn cmd_lineage(ui: &mut Ui, cx: &CommandContext, args: &LineageArgs) -> Result<(), CommandError> {
    let (store, _) = cx.open_store(Access::ReadOnly, true)?;
    let target = resolve_object(&store, &args.hash)?;
    let graph = Graph::build(&store)?;
    let in_graph = graph.edges.iter().any(|e| e.from == target || e.to == target);
    if !in_graph && !store.contains(&target) {
        return Err(CommandError::input(format!("no object `{target}` in this store")));
    }
    if !in_graph {
        ui.warn(format!("no stage, dataset, source or tree record in this store refers to `{target}`"));
    }
    let up = graph.reach(target, false, args.depth);
    let down = graph.reach(target, true, args.depth);

    let mut nodes = Vec::new();
    for d in up.union(&down) {
        let role = if *d == target {
            Role::Target
        } else if up.contains(d) {
            Role::Upstream
        } else {
            Role::Downstream
        };
        let kind = match graph.record_kind.get(d) {
            Some(k) => (*k).to_owned(),
            None => store
                .index()
                .object_kind(d)?
                .unwrap_or_else(|| if store.contains(d) { "object".to_owned() } else { "missing".to_owned() }),
        };
        nodes.push(Node { digest: *d, kind, name: graph.names.get(d).map(|(_, n)| n.clone()), role });
    }
    let edges: Vec<&Edge> = graph
        .edges
        .iter()
        .filter(|e| (up.contains(&e.from) && up.contains(&e.to)) || (down.contains(&e.from) && down.contains(&e.to)))
        .collect();

    ui.json(
        "lineage",
        json!({
            "target": target.to_string(),
            "depth": args.depth,
            "nodes": nodes.iter().map(|n| json!({
                "id": n.digest.to_string(),
                "kind": n.kind,
                "name": n.name,
                "role": n.role.as_str(),
            })).collect::<Vec<_>>(),
            "edges": edges.iter().map(|e| json!({
                "from": e.from.to_string(),
                "to": e.to.to_string(),
                "label": e.label,
                "containment": e.containment,
            })).collect::<Vec<_>>(),
        }),
    )?;
    let text = match args.format {
        Format::Dot => to_dot(&nodes, &edges),
        Format::Mermaid => to_mermaid(&nodes, &edges),
    };
    ui.line(text.trim_end())?;
    Ok(())
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn to_dot(nodes: &[Node], edges: &[&Edge]) -> String {
    let mut out = String::from("digraph lineage {\n");
    out.push_str("  rankdir=LR;\n");
    out.push_str("  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n");
    out.push_str("  edge [fontname=\"Helvetica\", fontsize=9];\n");
    for n in nodes {
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
    for e in edges {
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

fn mermaid_escape(s: &str) -> String {
    s.replace('#', "#35;").replace('&', "#amp;").replace('"', "#quot;").replace('<', "#lt;").replace('>', "#gt;")
}

fn to_mermaid(nodes: &[Node], edges: &[&Edge]) -> String {
    let ids: BTreeMap<Digest, String> = nodes.iter().enumerate().map(|(i, n)| (n.digest, format!("n{i}"))).collect();
    let mut out = String::from("flowchart LR\n");
    for n in nodes {
        let label = n.label_lines().iter().map(|l| mermaid_escape(l)).collect::<Vec<_>>().join("<br/>");
        let id = &ids[&n.digest];
        let _ = match n.kind.as_str() {
            "stage" => writeln!(out, "  {id}[\"{label}\"]"),
            "dataset" => writeln!(out, "  {id}[(\"{label}\")]"),
            _ => writeln!(out, "  {id}(\"{label}\")"),
        };
    }
    for e in edges {
        let (from, to) = (&ids[&e.from], &ids[&e.to]);
        let label: String =
            e.label.chars().map(|c| if c.is_ascii_alphanumeric() || "_-.".contains(c) { c } else { '_' }).collect();
        let _ = match (e.containment, label.is_empty()) {
            (true, _) => writeln!(out, "  {from} -.-> {to}"),
            (false, true) => writeln!(out, "  {from} --> {to}"),
            (false, false) => writeln!(out, "  {from} -->|{label}| {to}"),
        };
    }
    if let Some(n) = nodes.iter().find(|n| n.role == Role::Target) {
        out.push_str("  classDef target stroke-width:4px,font-weight:bold\n");
        let _ = writeln!(out, "  class {} target", ids[&n.digest]);
    }
    out
}
