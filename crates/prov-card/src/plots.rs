//! Plots as SVG written by hand, rasterised to PNG by resvg with an embedded font.

use prov_textfix::html::escape;
use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::Value;

use crate::inputs::CardInputs;
use crate::{CardError, group};

/// The font the plots are drawn in, embedded so that rendering needs no system fonts.
const FONT: &[u8] = include_bytes!("../fonts/DejaVuSansMono.ttf");
const FAMILY: &str = "DejaVu Sans Mono";

const KEPT: &str = "#4477aa";
const REMOVED: &str = "#cc6677";
const GRID: &str = "#dddddd";
/// The bar of what a plot sums into one row.
const OTHER: &str = "#999999";
/// The rows of the license plot, the last summing the smaller declared strings.
const LICENSE_ROWS: usize = 25;

/// One plot: a file stem, a caption and the SVG text.
#[derive(Debug, Clone)]
pub struct Plot {
    /// File name without extension, e.g. `languages`.
    pub stem: &'static str,
    /// What it shows and which manifests it was drawn from.
    pub caption: String,
    /// The SVG document.
    pub svg: String,
}

struct Svg {
    w: f64,
    h: f64,
    body: String,
}

impl Svg {
    fn new(w: f64, h: f64, title: &str, note: &str) -> Self {
        let mut s = Self { w, h, body: String::new() };
        s.rect(0.0, 0.0, w, h, "#ffffff");
        s.text(12.0, 22.0, title, 15.0, "start", "#000000");
        s.text(12.0, h - 10.0, note, 10.0, "start", "#555555");
        s
    }
    fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str) {
        let _ = writeln!(
            self.body,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{fill}"/>"#,
            w.max(0.0),
            h.max(0.0)
        );
    }
    fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, dash: bool) {
        let d = if dash { r#" stroke-dasharray="4 3""# } else { "" };
        let _ = writeln!(
            self.body,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{stroke}" stroke-width="1.5"{d}/>"#
        );
    }
    fn polyline(&mut self, points: &[(f64, f64)], stroke: &str) {
        let pts: Vec<String> = points.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = writeln!(
            self.body,
            r#"<polyline points="{}" fill="none" stroke="{stroke}" stroke-width="1.5"/>"#,
            pts.join(" ")
        );
    }
    fn text(&mut self, x: f64, y: f64, t: &str, size: f64, anchor: &str, fill: &str) {
        let _ = writeln!(
            self.body,
            r#"<text x="{x:.1}" y="{y:.1}" font-family="{FAMILY}" font-size="{size}" text-anchor="{anchor}" fill="{fill}">{}</text>"#,
            escape(t)
        );
    }
    fn finish(self) -> String {
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">\n{}</svg>\n",
            self.body,
            w = self.w,
            h = self.h
        )
    }
}

fn docs(v: &Value) -> u64 {
    v.get("documents").and_then(Value::as_u64).unwrap_or(0)
}
fn words(v: &Value) -> u64 {
    v.get("words").and_then(Value::as_u64).unwrap_or(0)
}

/// Horizontal bars: `(label, value, colour, annotation)`.
fn bars(title: &str, note: &str, rows: &[(String, u64, &str, String)]) -> String {
    let row_h = 22.0;
    let left = 170.0;
    let width = 900.0;
    let plot_w = width - left - 170.0;
    let h = 50.0 + row_h * rows.len() as f64 + 40.0;
    let mut s = Svg::new(width, h, title, note);
    let max = rows.iter().map(|r| r.1).max().unwrap_or(1).max(1) as f64;
    for k in 0..=4 {
        let x = left + plot_w * f64::from(k) / 4.0;
        s.line(x, 40.0, x, h - 35.0, GRID, false);
        s.text(x, h - 24.0, &group((max * f64::from(k) / 4.0).round() as u64), 10.0, "middle", "#555555");
    }
    for (i, (label, value, colour, ann)) in rows.iter().enumerate() {
        let y = 45.0 + row_h * i as f64;
        s.text(left - 8.0, y + 14.0, label, 12.0, "end", "#000000");
        let w = plot_w * (*value as f64) / max;
        s.rect(left, y + 2.0, w, row_h - 6.0, colour);
        s.text(left + w + 6.0, y + 14.0, &format!("{} {ann}", group(*value)), 11.0, "start", "#000000");
    }
    s.finish()
}

/// Documents per language in the output, the `top` largest.
fn languages(ev: &CardInputs, top: usize) -> Option<Plot> {
    let (langs, _) = ev.kept_languages();
    if langs.is_empty() {
        return None;
    }
    let mut sorted: Vec<(&String, &u64)> = langs.iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let rows: Vec<(String, u64, &str, String)> =
        sorted.iter().take(top).map(|(l, n)| ((*l).clone(), **n, KEPT, String::new())).collect();
    let first = ev.chain_stages().next().map(|s| s.manifest.short()).unwrap_or_default();
    let filters: Vec<String> = ev.filters().map(|s| s.manifest.short()).collect();
    let note = format!("languages: stage {first} less removed_by_language of {}", filters.join(" "));
    let title = format!("Documents per language in the output (top {} of {})", rows.len(), langs.len());
    Some(Plot { stem: "languages", caption: title.clone(), svg: bars(&title, &note, &rows) })
}

/// The filter funnel: documents and words in and removed, per filter stage.
fn funnel(ev: &CardInputs) -> Option<Plot> {
    let filters: Vec<_> = ev.filters().collect();
    if filters.is_empty() {
        return None;
    }
    let width = 1000.0;
    let left = 190.0;
    // Two panels, each with room for its labels on the right.
    let plot_w = (width - left - 220.0) / 2.0;
    let row_h = 30.0;
    let h = 80.0 + row_h * filters.len() as f64 + 40.0;
    let ids: Vec<String> = filters.iter().map(|s| s.manifest.short()).collect();
    let mut s = Svg::new(
        width,
        h,
        "Filter funnel: kept (blue) and removed (red, labelled) per stage",
        &format!("by_rule and removed_by_language of stages {}", ids.join(" ")),
    );
    let measures: Vec<(u64, u64, u64, u64)> = filters
        .iter()
        .map(|f| {
            let (mut din, mut win) = (0, 0);
            if let Some(Value::Object(r)) = f.record.stats.get("by_rule") {
                for v in r.values() {
                    din += docs(v);
                    win += words(v);
                }
            }
            let (mut drm, mut wrm) = (0, 0);
            if let Some(Value::Object(r)) = f.record.stats.get("removed_by_language") {
                for v in r.values() {
                    drm += docs(v);
                    wrm += words(v);
                }
            }
            (din, drm, win, wrm)
        })
        .collect();
    let max_d = measures.iter().map(|m| m.0).max().unwrap_or(1).max(1) as f64;
    let max_w = measures.iter().map(|m| m.2).max().unwrap_or(1).max(1) as f64;
    s.text(left, 55.0, "documents", 12.0, "start", "#000000");
    s.text(left + plot_w + 110.0, 55.0, "words", 12.0, "start", "#000000");
    for (i, (f, (din, drm, win, wrm))) in filters.iter().zip(&measures).enumerate() {
        let y = 65.0 + row_h * i as f64;
        s.text(
            left - 8.0,
            y + 16.0,
            &if f.record.name.as_str() == f.record.stage_kind {
                f.record.name.to_string()
            } else {
                format!("{} ({})", f.record.name, f.record.stage_kind)
            },
            12.0,
            "end",
            "#000000",
        );
        for (x0, total, removed, max) in [(left, *din, *drm, max_d), (left + plot_w + 110.0, *win, *wrm, max_w)] {
            let kw = plot_w * (total.saturating_sub(removed)) as f64 / max;
            let rw = plot_w * removed as f64 / max;
            s.rect(x0, y + 4.0, kw, row_h - 10.0, KEPT);
            s.rect(x0 + kw, y + 4.0, rw, row_h - 10.0, REMOVED);
            s.text(x0 + kw + rw + 4.0, y + 11.0, &format!("-{}", group(removed)), 10.0, "start", "#000000");
            s.text(x0 + kw + rw + 4.0, y + 23.0, &format!("of {}", group(total)), 10.0, "start", "#555555");
        }
    }
    Some(Plot {
        stem: "funnel",
        caption: "Filter funnel: documents and words removed per stage".to_owned(),
        svg: s.finish(),
    })
}

/// Documents per declared license at the license stage, with the decision.
fn licenses(ev: &CardInputs) -> Option<Plot> {
    let st = ev.chain_stage("license")?;
    let Some(Value::Object(lic)) = st.record.stats.get("licenses") else { return None };
    let mut rows: Vec<(String, u64, &str, String)> = lic
        .iter()
        .map(|(declared, v)| {
            let decision = v.get("decision").and_then(Value::as_str).unwrap_or("?");
            let spdx = v.get("spdx").and_then(Value::as_str).unwrap_or("no SPDX id");
            let colour = if decision == "kept" { KEPT } else { REMOVED };
            (declared.clone(), docs(v), colour, format!("{decision} ({spdx})"))
        })
        .collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    // One row per declared string is one per distinct string of the data, which a corpus
    // decides: the largest, and the rest summed, so that the picture stays a picture (4,000
    // strings made a 1800 x 176,180 pixel PNG and 2.6 GB of memory).
    if rows.len() > LICENSE_ROWS {
        let rest = rows.split_off(LICENSE_ROWS - 1);
        let documents = rest.iter().map(|r| r.1).sum();
        rows.push((format!("{} other strings", group(rest.len() as u64)), documents, OTHER, String::new()));
    }
    let title = "License breakdown: documents per declared license and the policy's decision";
    let note = format!("licenses of stage {} ({})", st.manifest.short(), st.record.name);
    Some(Plot { stem: "licenses", caption: title.to_owned(), svg: bars(title, &note, &rows) })
}

/// Per language, the distribution of toxicity scores from the stage's `score_quantiles` (21
/// quantiles: an empirical CDF), with the removal threshold.
// Coordinates are x, y, w, h as in SVG.
#[allow(clippy::many_single_char_names)]
fn toxicity(ev: &CardInputs) -> Option<Plot> {
    let st = ev.chain_stage("toxicity")?;
    let Some(Value::Object(q)) = st.record.stats.get("score_quantiles") else { return None };
    let thresholds = st.record.stats.get("thresholds");
    let quantile = st.record.stats.get("quantile").and_then(Value::as_f64).unwrap_or(0.95);
    let langs: Vec<(&String, Vec<f64>)> = q
        .iter()
        .filter_map(|(l, v)| {
            let xs: Vec<f64> = v.as_array()?.iter().filter_map(Value::as_f64).collect();
            (xs.len() >= 2).then_some((l, xs))
        })
        .collect();
    if langs.is_empty() {
        return None;
    }
    let cols = 4usize;
    let (pw, ph) = (210.0, 150.0);
    let rows = langs.len().div_ceil(cols);
    let width = 30.0 + pw * cols as f64 + 10.0;
    let h = 50.0 + ph * rows as f64 + 30.0;
    let mut s = Svg::new(
        width,
        h,
        &format!(
            "Toxicity score (logit) per language: share of documents at or below x; red: the {:.0}% threshold",
            quantile * 100.0
        ),
        &format!("score_quantiles and thresholds of stage {} ({})", st.manifest.short(), st.record.name),
    );
    for (i, (lang, xs)) in langs.iter().enumerate() {
        let x0 = 30.0 + pw * (i % cols) as f64;
        let y0 = 45.0 + ph * (i / cols) as f64;
        let (iw, ih) = (pw - 30.0, ph - 55.0);
        let (top, left) = (y0 + 22.0, x0 + 10.0);
        let t = thresholds.and_then(|t| t.get(lang.as_str()));
        let thr = t.and_then(|t| t.get("threshold")).and_then(Value::as_f64);
        let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max).max(thr.unwrap_or(f64::NEG_INFINITY));
        let span = if hi > lo { hi - lo } else { 1.0 };
        let px = |x: f64| left + iw * (x - lo) / span;
        s.rect(left, top, iw, ih, "#f7f7f7");
        for k in [0.0, 0.5, 1.0] {
            let y = top + ih * (1.0 - k);
            s.line(left, y, left + iw, y, GRID, false);
        }
        let n = (xs.len() - 1) as f64;
        let pts: Vec<(f64, f64)> =
            xs.iter().enumerate().map(|(j, x)| (px(*x), top + ih * (1.0 - j as f64 / n))).collect();
        s.polyline(&pts, KEPT);
        if let Some(thr) = thr {
            s.line(px(thr), top - 4.0, px(thr), top + ih, "#cc0000", true);
        }
        let removed = t.and_then(|t| t.get("removed")).and_then(Value::as_u64).unwrap_or(0);
        let scored = t.and_then(|t| t.get("scored")).and_then(Value::as_u64).unwrap_or(0);
        s.text(left, y0 + 14.0, &format!("{lang}: {removed} of {scored} removed"), 11.0, "start", "#000000");
        s.text(left, top + ih + 13.0, &format!("{lo:.2}"), 9.0, "start", "#555555");
        s.text(left + iw, top + ih + 13.0, &format!("{hi:.2}"), 9.0, "end", "#555555");
        if let Some(thr) = thr {
            s.text(px(thr), top + ih + 24.0, &format!("t={thr:.3}"), 9.0, "middle", "#cc0000");
        }
    }
    Some(Plot {
        stem: "toxicity",
        caption: format!("Toxicity score distribution per language with the {:.0}% threshold", quantile * 100.0),
        svg: s.finish(),
    })
}

/// Every plot the evidence supports, in a fixed order.
pub fn plots(ev: &CardInputs, top_languages: usize) -> Vec<Plot> {
    [languages(ev, top_languages), toxicity(ev), funnel(ev), licenses(ev)].into_iter().flatten().collect()
}

/// Rasterises an SVG to PNG at twice its size, with the embedded font only.
pub fn png(name: &str, svg: &str) -> Result<Vec<u8>, CardError> {
    use resvg::{tiny_skia, usvg};
    let render = |reason: String| CardError::Render { name: name.to_owned(), reason };
    let mut db = usvg::fontdb::Database::new();
    db.load_font_data(FONT.to_vec());
    let opt = usvg::Options { font_family: FAMILY.to_owned(), fontdb: Arc::new(db), ..usvg::Options::default() };
    let tree = usvg::Tree::from_str(svg, &opt).map_err(|e| render(e.to_string()))?;
    let size = tree.size().to_int_size();
    let scale = 2.0;
    let mut pixmap =
        tiny_skia::Pixmap::new(size.width() * 2, size.height() * 2).ok_or_else(|| render("empty image".to_owned()))?;
    resvg::render(&tree, tiny_skia::Transform::from_scale(scale, scale), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(|e| render(e.to_string()))
}
