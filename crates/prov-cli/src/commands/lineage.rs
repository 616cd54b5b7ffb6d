//! `prov lineage`.

use prov_manifest::LineageGraph;
use prov_store::Access;
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

pub(crate) fn cmd_lineage(ui: &mut Ui, cx: &CommandContext, args: &LineageArgs) -> Result<(), CommandError> {
    let (store, _) = cx.open_store(Access::ReadOnly, true)?;
    let target = resolve_object(&store, &args.hash)?;
    let graph = LineageGraph::of_store(&store)?;
    let in_graph = graph.contains(&target);
    if !in_graph && !store.contains(&target) {
        return Err(CommandError::input(format!("no object `{target}` in this store")));
    }
    if !in_graph {
        ui.warn(format!("no stage, dataset, source or tree record in this store refers to `{target}`"));
    }
    let lineage = graph.lineage(&store, target, args.depth)?;
    let (nodes, edges) = (&lineage.nodes, &lineage.edges);

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
        Format::Dot => lineage.to_dot(),
        Format::Mermaid => lineage.to_mermaid(),
    };
    ui.line(text.trim_end())?;
    Ok(())
}
