//! A lineage drawn as SVG on the server: layered left to right along the edges (each node one
//! column after the furthest of its predecessors, the graph being acyclic), nodes in a column
//! in the lineage's own order (the same on every machine), each node a link to its own
//! lineage, containment edges dashed. Text is escaped; nothing comes from anywhere but the
//! lineage.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use prov_manifest::{Lineage, LineageRole};
use prov_textfix::html::escape;

const WIDTH: i64 = 190;
const HEIGHT: i64 = 46;
const COLUMN: i64 = 250;
const ROW: i64 = 62;
const MARGIN: i64 = 20;

/// Each node's column: 0 for nodes nothing leads to, else one after the furthest predecessor.
fn columns(lineage: &Lineage) -> Vec<usize> {
    let index: BTreeMap<_, _> = lineage.nodes.iter().enumerate().map(|(i, n)| (n.digest, i)).collect();
    let mut column = vec![0usize; lineage.nodes.len()];
    // Longest paths by relaxation: at most one pass per node in an acyclic graph.
    for _ in 0..lineage.nodes.len() {
        let mut changed = false;
        for e in &lineage.edges {
            if let (Some(&from), Some(&to)) = (index.get(&e.from), index.get(&e.to))
                && column[to] < column[from] + 1
            {
                column[to] = column[from] + 1;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    column
}

/// The lineage as an SVG element.
pub fn draw(lineage: &Lineage) -> String {
    let column = columns(lineage);
    let mut row_of = vec![0usize; lineage.nodes.len()];
    let mut filled: BTreeMap<usize, usize> = BTreeMap::new();
    for (i, c) in column.iter().enumerate() {
        let next = filled.entry(*c).or_insert(0);
        row_of[i] = *next;
        *next += 1;
    }
    let columns_used = column.iter().max().map_or(1, |c| c + 1);
    let rows_used = filled.values().max().copied().unwrap_or(1);
    let position = |i: usize| {
        (MARGIN + i64::try_from(column[i]).unwrap_or(0) * COLUMN, MARGIN + i64::try_from(row_of[i]).unwrap_or(0) * ROW)
    };
    let (w, h) = (
        2 * MARGIN + i64::try_from(columns_used).unwrap_or(1) * COLUMN,
        2 * MARGIN + i64::try_from(rows_used).unwrap_or(1) * ROW,
    );
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"lineage\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\">\
         <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\">\
         <path d=\"M0,0 L10,5 L0,10 z\"/></marker></defs>"
    );
    let index: BTreeMap<_, _> = lineage.nodes.iter().enumerate().map(|(i, n)| (n.digest, i)).collect();
    for e in &lineage.edges {
        let (Some(&from), Some(&to)) = (index.get(&e.from), index.get(&e.to)) else { continue };
        let ((x1, y1), (x2, y2)) = (position(from), position(to));
        let dash = if e.containment { " stroke-dasharray=\"4 3\"" } else { "" };
        let _ = write!(
            svg,
            "<line class=\"edge\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"{dash} marker-end=\"url(#arrow)\"><title>{}</title></line>",
            x1 + WIDTH,
            y1 + HEIGHT / 2,
            x2,
            y2 + HEIGHT / 2,
            escape(&e.label)
        );
    }
    for (i, n) in lineage.nodes.iter().enumerate() {
        let (x, y) = position(i);
        let role = match n.role {
            LineageRole::Target => "target",
            LineageRole::Upstream => "upstream",
            LineageRole::Downstream => "downstream",
        };
        let lines = n.label_lines();
        let _ = write!(
            svg,
            "<a href=\"/lineage/{digest}\" class=\"node {role}\" data-digest=\"{digest}\"><rect x=\"{x}\" y=\"{y}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" rx=\"5\"/>",
            digest = escape(&n.digest.to_string()),
        );
        for (k, line) in lines.iter().take(3).enumerate() {
            let shown: String = line.chars().take(28).collect();
            let _ = write!(
                svg,
                "<text x=\"{}\" y=\"{}\">{}</text>",
                x + 8,
                y + 14 + i64::try_from(k).unwrap_or(0) * 13,
                escape(&shown)
            );
        }
        svg.push_str("</a>");
    }
    svg.push_str("</svg>");
    svg
}
