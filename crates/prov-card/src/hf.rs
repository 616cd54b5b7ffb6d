//! The Hugging Face dataset card: `README.md` with YAML front matter.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use prov_store::Digest;
use serde_json::Value;

use crate::inputs::CardInputs;
use crate::{Refs, group, primary_language};

/// How many languages the per-language tables list before summing the rest.
const TOP: usize = 15;

/// Hugging Face's `size_categories` bucket for a number of rows.
pub fn size_category(n: u64) -> &'static str {
    const BUCKETS: [(u64, &str); 10] = [
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
        (10_000_000, "1M<n<10M"),
        (100_000_000, "10M<n<100M"),
        (1_000_000_000, "100M<n<1B"),
        (10_000_000_000, "1B<n<10B"),
        (100_000_000_000, "10B<n<100B"),
        (1_000_000_000_000, "100B<n<1T"),
    ];
    BUCKETS.iter().find(|(limit, _)| n < *limit).map_or("n>1T", |(_, b)| b)
}

/// The SPDX ids the output's documents carry: the kept licenses of the chain's `license`
/// stage, or else the ids in the document sources' declared license expressions. Documents
/// that the license stage kept without a declared license (`missing: allow`) add SPDX's
/// `NOASSERTION`: a card that listed only the declared ids would say every kept document
/// carries one of them.
pub fn kept_licenses(ev: &CardInputs) -> (Vec<String>, Vec<Digest>) {
    if let Some(s) = ev.chain_stage("license")
        && let Some(Value::Object(licenses)) = s.record.stats.get("licenses")
    {
        let mut ids: BTreeSet<String> = licenses
            .values()
            .filter(|v| v.get("decision").and_then(Value::as_str) == Some("kept"))
            .filter_map(|v| v.get("spdx").and_then(Value::as_str).map(str::to_owned))
            .collect();
        if undeclared_kept(s) > 0 {
            ids.insert(NO_ASSERTION.to_owned());
        }
        return (ids.into_iter().collect(), vec![s.manifest]);
    }
    let mut ids = BTreeSet::new();
    let mut refs = Vec::new();
    for s in ev.sources.iter().filter(|s| s.documents) {
        if let Some(l) = &s.record.license {
            // An expression's license ids, without its operators.
            ids.extend(
                l.split(|c: char| c.is_whitespace() || c == '(' || c == ')')
                    .filter(|t| !t.is_empty() && !matches!(*t, "AND" | "OR" | "WITH"))
                    .map(str::to_owned),
            );
            refs.push(s.digest);
        }
    }
    (ids.into_iter().collect(), refs)
}

/// SPDX's word for a license nobody stated.
const NO_ASSERTION: &str = "NOASSERTION";

/// The documents a `license` stage kept that declare no license: its `license:missing` rule
/// under `missing: allow` (under `deny` they are removed).
fn undeclared_kept(stage: &prov_manifest::LoadedStage) -> u64 {
    if stage.record.config.get("missing").and_then(Value::as_str) != Some("allow") {
        return 0;
    }
    stage.record.stats.get("by_rule").and_then(|b| b.get("license:missing")).map_or(0, |v| docs_words(v).0)
}

fn yaml_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

fn code(v: &Value) -> String {
    let s = serde_json::to_string(v).expect("JSON serialises");
    // A code span cannot hold a backtick or a pipe inside a table cell.
    format!("`{}`", s.replace('`', "'").replace('|', "\\|"))
}

fn docs_words(v: &Value) -> (u64, u64) {
    (v.get("documents").and_then(Value::as_u64).unwrap_or(0), v.get("words").and_then(Value::as_u64).unwrap_or(0))
}

/// Renders the card. Plots, when given, are listed by file name relative to the card.
pub fn render(ev: &CardInputs, plots: &[(String, String)]) -> String {
    let mut refs = Refs::default();
    let run_ref = refs.cite(ev.run.manifest, format!("run record of `{}`", ev.run.recipe()));
    let out_ref = refs.cite(ev.output.digest, format!("dataset record, `{}.dataset`", ev.output.stage));
    let (licenses, license_refs) = kept_licenses(ev);

    let mut s = String::new();
    front_matter(&mut s, ev, &licenses);
    introduction(&mut s, ev, &mut refs, (&run_ref, &out_ref), (&licenses, &license_refs));
    sources_section(&mut s, ev, &mut refs);
    processing_section(&mut s, ev, &mut refs, &run_ref);
    filters_section(&mut s, ev, &mut refs, &out_ref);
    tiers_section(&mut s, ev, &mut refs);
    plots_section(&mut s, ev, &mut refs, plots);
    s.push_str("## Known limitations\n\n");
    for line in limitations(ev, &mut refs) {
        let _ = writeln!(s, "- {line}");
    }
    s.push('\n');
    s.push_str("## Manifests\n\n");
    s.push_str(&refs.footnotes());
    s
}

/// Outside text (a declared license, a language tag, a rule name, an origin) as inline code:
/// what would not show escaped, inside a fence of backticks longer than any run of backticks
/// in it (`CommonMark` code spans), so that no Markdown in it is read as Markdown: a data
/// string cannot write a paragraph, a link or a row of its own into the card.
fn literal(text: &str) -> String {
    let shown = prov_textfix::shown::visible(text);
    let mut longest = 0;
    let mut run = 0;
    for c in shown.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    // A space each side lets the text start or end with a backtick; CommonMark strips them.
    let pad = if longest > 0 { " " } else { "" };
    format!("{fence}{pad}{shown}{pad}{fence}")
}

/// [`literal`] in a table cell: its `|` escaped too, which GitHub's tables read before the
/// code span.
fn literal_cell(text: &str) -> String {
    literal(text).replace('|', "\\|")
}

/// The YAML front matter the Hub reads: name, licenses, languages, size, sources, tags.
fn front_matter(s: &mut String, ev: &CardInputs, licenses: &[String]) {
    let (languages, _) = ev.kept_languages();
    let primaries: BTreeSet<String> = languages.keys().map(|l| primary_language(l)).collect();
    s.push_str("---\n");
    let _ = writeln!(
        s,
        "pretty_name: {}",
        yaml_str(&format!("{} (Provenant run manifest {})", ev.run.recipe(), ev.run.manifest.short()))
    );
    s.push_str("license:\n");
    for l in licenses {
        // The Hub's word for a license nobody stated is `unknown`.
        let id = if l == NO_ASSERTION { "unknown".to_owned() } else { l.to_lowercase() };
        let _ = writeln!(s, "- {}", yaml_str(&id));
    }
    if licenses.is_empty() {
        s.push_str("- other\n");
    }
    s.push_str("language:\n");
    for l in &primaries {
        let _ = writeln!(s, "- {}", yaml_str(l));
    }
    let _ = writeln!(s, "size_categories:\n- {}", yaml_str(size_category(ev.output.record.rows)));
    s.push_str("source_datasets:\n");
    for src in ev.sources.iter().filter(|s| s.documents) {
        let _ = writeln!(s, "- {}", yaml_str(&format!("extended|{}", src.record.name)));
    }
    s.push_str("task_categories:\n- text-generation\n");
    s.push_str("tags:\n- provenant\n- provenance\n");
    for f in ev.filters() {
        let _ = writeln!(s, "- {}", yaml_str(&format!("filter-{}", f.record.stage_kind)));
    }
    s.push_str("configs:\n- config_name: default\n  data_files:\n  - split: train\n    path: data/*.parquet\n");
    s.push_str("---\n\n");
}

/// The title, where the card comes from, what the dataset is and its licenses.
fn introduction(
    s: &mut String,
    ev: &CardInputs,
    refs: &mut Refs,
    (run_ref, out_ref): (&str, &str),
    (licenses, license_refs): (&[String], &[Digest]),
) {
    let _ = writeln!(s, "# {}\n", ev.run.recipe());
    let _ = writeln!(
        s,
        "Generated by `prov card` from the manifests of run `{}`{run_ref} alone: no corpus text was read. \
         Every number below names the manifest it comes from, as a footnote whose label is the \
         first 12 hex digits of the manifest's BLAKE3 digest; the full digests are listed at the end.\n",
        ev.run.manifest
    );
    let _ = writeln!(
        s,
        "The dataset is the `dataset` output of stage `{}`: {} documents in {} Parquet shards{out_ref}, \
         with Merkle root `{}`{out_ref}.\n",
        ev.output.stage,
        group(ev.output.record.rows),
        group(ev.output.record.shards.len() as u64),
        ev.output.record.merkle_root
    );
    if !licenses.is_empty() {
        let cites: String = license_refs.iter().map(|d| refs.cite(*d, "license evidence")).collect();
        let shown: Vec<String> = licenses.iter().map(|l| literal(l)).collect();
        let _ = writeln!(s, "Licenses of the kept documents (SPDX): {}{cites}.\n", shown.join(", "));
        if let Some(st) = ev.chain_stage("license")
            && undeclared_kept(st) > 0
        {
            let r = refs.cite(st.manifest, format!("stage record `{}`", st.record.name));
            let _ = writeln!(
                s,
                "{} kept documents declare no license (`license:missing` under `missing: allow`){r}: `{NO_ASSERTION}`.\n",
                group(undeclared_kept(st))
            );
        }
    }
}

/// `## Sources`: each source record, its role, origin, license and size.
fn sources_section(s: &mut String, ev: &CardInputs, refs: &mut Refs) {
    s.push_str("## Sources\n\n| source | role | origin | license | retrieved | files | bytes | manifest |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for src in &ev.sources {
        let r = refs.cite(src.digest, format!("source record `{}`", src.record.name));
        let files = match &src.record.content {
            prov_manifest::Content::File { .. } => 1,
            prov_manifest::Content::Tree { files, .. } => *files,
        };
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} | {} | {} | {} | {r} |",
            src.record.name,
            if src.documents { "documents" } else { "filter input" },
            literal_cell(&src.record.origin),
            src.record.license.as_deref().map_or_else(|| "not declared".to_owned(), literal_cell),
            src.record.retrieved.as_deref().map_or_else(|| "not declared".to_owned(), literal_cell),
            group(files),
            group(src.record.content.size()),
        );
    }
    s.push('\n');
}

/// `## Processing`: every stage in plan order with its resolved configuration, and the chain
/// the documents went through.
fn processing_section(s: &mut String, ev: &CardInputs, refs: &mut Refs, run_ref: &str) {
    s.push_str("## Processing\n\nEvery stage of the run, in plan order, with its resolved configuration (every default explicit).\n\n");
    s.push_str("| stage | kind | version | determinism | config | manifest |\n| --- | --- | --- | --- | --- | --- |\n");
    for st in ev.run.stages() {
        let r = refs.cite(
            st.manifest,
            format!("stage record `{}` ({} v{})", st.record.name, st.record.stage_kind, st.record.version),
        );
        let config =
            if st.record.stage_kind == "source" { "(source import)".to_owned() } else { code(&st.record.config) };
        let _ = writeln!(
            s,
            "| `{}` | `{}` | {} | `{}` | {config} | {r} |",
            st.record.name,
            st.record.stage_kind,
            st.record.version,
            st.record.determinism.as_str()
        );
    }
    s.push('\n');
    let chain: Vec<String> = ev.chain_stages().map(|st| format!("`{}`", st.record.name)).collect();
    let _ = writeln!(s, "The documents go through {}{run_ref}.\n", chain.join(" → "));
}

/// `## Compliance filters`: each filter of the chain, then the documents per language.
fn filters_section(s: &mut String, ev: &CardInputs, refs: &mut Refs, out_ref: &str) {
    let (languages, languages_add_up) = ev.kept_languages();
    let rows = ev.output.record.rows;
    s.push_str("## Compliance filters\n\nWords are whitespace-separated words, as the ledgers count them.\n\n");
    for f in ev.filters() {
        filter_section(s, refs, f);
    }
    if !languages.is_empty() {
        let mut cites = String::new();
        if let Some(first) = ev.chain_stages().next() {
            cites.push_str(&refs.cite(first.manifest, "languages"));
        }
        for f in ev.filters() {
            cites.push_str(&refs.cite(f.manifest, "removed by language"));
        }
        let _ = writeln!(
            s,
            "### Documents per language in the output\n\n{} language tags. The counts are the first stage's `languages` less every filter's `removed_by_language`{cites}; they {} the dataset's {} rows{out_ref}.\n",
            group(languages.len() as u64),
            if languages_add_up { "add up to" } else { "do not add up to" },
            group(rows)
        );
        let mut sorted: Vec<(&String, &u64)> = languages.iter().collect();
        sorted.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        s.push_str("| language | documents | manifests |\n| --- | --- | --- |\n");
        for (l, n) in sorted.iter().take(TOP) {
            let _ = writeln!(s, "| {} | {} | {cites} |", literal_cell(l), group(**n));
        }
        if sorted.len() > TOP {
            let rest: u64 = sorted[TOP..].iter().map(|(_, n)| **n).sum();
            let _ = writeln!(s, "| {} other tags | {} | {cites} |", group((sorted.len() - TOP) as u64), group(rest));
        }
        s.push('\n');
    }
}

/// `## Quality tiers`: per language, the documents each tier of the first `quality` stage the
/// output went through holds (EuroLLM's EuroFilter tiers), and what each such stage kept.
/// Nothing when the output went through none.
fn tiers_section(s: &mut String, ev: &CardInputs, refs: &mut Refs) {
    let stages: Vec<&prov_manifest::LoadedStage> =
        ev.chain_stages().filter(|st| st.record.stage_kind == "quality").collect();
    let Some(first) = stages.first() else { return };
    let r = refs.cite(first.manifest, format!("stage record `{}`", first.record.name));
    let cutoffs = &first.record.config["cutoffs"];
    let _ = writeln!(
        s,
        "## Quality tiers

A quality scorer (`quality-train`: ridge regression on hashed character n-grams, standing in for EuroFilter's mDeBERTa) gives each document a score from 0 to 5; `{}` puts it in `high` at or above {}, `medium` from {}, else `low`{r}.\n",
        first.record.name, cutoffs[1], cutoffs[0]
    );
    let count = |v: &Value, tier: &str| v.get(tier).and_then(Value::as_u64).unwrap_or(0);
    let tiers = first.record.stats.get("tiers").and_then(Value::as_object);
    let mut rows: Vec<(&String, [u64; 3])> = tiers
        .into_iter()
        .flatten()
        .map(|(l, v)| (l, [count(v, "high"), count(v, "medium"), count(v, "low")]))
        .collect();
    rows.sort_by(|a, b| b.1.iter().sum::<u64>().cmp(&a.1.iter().sum::<u64>()).then(a.0.cmp(b.0)));
    s.push_str("| language | high | medium | low | manifest |\n| --- | --- | --- | --- | --- |\n");
    for (l, [h, m, lo]) in rows.iter().take(TOP) {
        let _ = writeln!(s, "| {} | {} | {} | {} | {r} |", literal_cell(l), group(*h), group(*m), group(*lo));
    }
    if rows.len() > TOP {
        let mut rest = [0u64; 3];
        for (_, t) in &rows[TOP..] {
            for (a, b) in rest.iter_mut().zip(t) {
                *a += b;
            }
        }
        let other = group((rows.len() - TOP) as u64);
        let _ = writeln!(
            s,
            "| {other} other languages | {} | {} | {} | {r} |",
            group(rest[0]),
            group(rest[1]),
            group(rest[2])
        );
    }
    s.push_str("\n| stage | cut-offs | keeps | documents kept | manifest |\n| --- | --- | --- | --- | --- |\n");
    for st in &stages {
        let r = refs.cite(st.manifest, format!("stage record `{}`", st.record.name));
        let keep: Vec<&str> =
            st.record.config["keep"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let kept: u64 = keep
            .iter()
            .filter_map(|t| st.record.stats.get("by_rule").and_then(|b| b.get(format!("quality:{t}"))))
            .map(|v| docs_words(v).0)
            .sum();
        let c = &st.record.config["cutoffs"];
        let _ =
            writeln!(s, "| `{}` | {}, {} | {} | {} | {r} |", st.record.name, c[0], c[1], keep.join(", "), group(kept));
    }
    s.push('\n');
}

/// `## Plots`, each citing the chain's stage records it was drawn from.
fn plots_section(s: &mut String, ev: &CardInputs, refs: &mut Refs, plots: &[(String, String)]) {
    if !plots.is_empty() {
        s.push_str("## Plots\n\n");
        // Each plot is drawn from the chain's stage records (each plot's bottom line names the
        // ones it used).
        let cites: String = ev.chain.iter().map(|&i| refs.cite(ev.run.stages()[i].manifest, "plot")).collect();
        for (file, caption) in plots {
            let _ = writeln!(s, "![{caption}]({file}){cites}\n");
        }
    }
}

// Short names for the string, the stage, its citation, documents and words keep the table rows
// readable.
#[allow(clippy::many_single_char_names)]
fn filter_section(s: &mut String, refs: &mut Refs, f: &prov_manifest::LoadedStage) {
    let r = refs.cite(f.manifest, format!("stage record `{}`", f.record.name));
    let stats = &f.record.stats;
    let _ = writeln!(s, "### `{}` ({} v{})\n", f.record.name, f.record.stage_kind, f.record.version);
    if let Some(t) = stats.get("total") {
        let (d, w) = docs_words(t);
        let _ = writeln!(s, "{} documents ({} words) in{r}.\n", group(d), group(w));
    }
    s.push_str("| rule | documents | words | manifest |\n| --- | --- | --- | --- |\n");
    if let Some(Value::Object(rules)) = stats.get("by_rule") {
        for (rule, v) in rules {
            let (d, w) = docs_words(v);
            let _ = writeln!(s, "| {} | {} | {} | {r} |", literal_cell(rule), group(d), group(w));
        }
    }
    s.push('\n');
    if let Some(Value::Object(by_lang)) = stats.get("removed_by_language")
        && !by_lang.is_empty()
    {
        let mut sorted: Vec<(&String, (u64, u64))> = by_lang.iter().map(|(l, v)| (l, docs_words(v))).collect();
        sorted.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(b.0)));
        let _ = writeln!(s, "Removed, per language ({} languages){r}:\n", group(sorted.len() as u64));
        s.push_str("| language | documents | words | manifest |\n| --- | --- | --- | --- |\n");
        for (l, (d, w)) in sorted.iter().take(TOP) {
            let _ = writeln!(s, "| {} | {} | {} | {r} |", literal_cell(l), group(*d), group(*w));
        }
        if sorted.len() > TOP {
            let (d, w) = sorted[TOP..].iter().fold((0, 0), |acc, (_, (d, w))| (acc.0 + d, acc.1 + w));
            let _ = writeln!(
                s,
                "| {} other languages | {} | {} | {r} |",
                group((sorted.len() - TOP) as u64),
                group(d),
                group(w)
            );
        }
        s.push('\n');
    }
    if let Some(Value::Object(replaced)) = stats.get("replaced") {
        let parts: Vec<String> =
            replaced.iter().map(|(k, v)| format!("{} {}", group(v.as_u64().unwrap_or(0)), literal(k))).collect();
        let _ = writeln!(s, "Spans replaced: {}{r}.\n", parts.join(", "));
    }
    if let Some(Value::Object(th)) = stats.get("thresholds") {
        let q = stats.get("quantile").and_then(Value::as_f64).unwrap_or(f64::NAN);
        let _ = writeln!(s, "Per-language thresholds at quantile {q}{r} (documents at or above are removed):\n");
        s.push_str("| language | threshold (logit) | scored | removed | manifest |\n| --- | --- | --- | --- | --- |\n");
        for (l, v) in th {
            let t = v
                .get("threshold")
                .and_then(Value::as_f64)
                .map_or_else(|| "none (too few)".to_owned(), |t| format!("{t:.4}"));
            let scored = v.get("scored").and_then(Value::as_u64).unwrap_or(0);
            let removed = v.get("removed").and_then(Value::as_u64).unwrap_or(0);
            let _ = writeln!(s, "| {} | {t} | {} | {} | {r} |", literal_cell(l), group(scored), group(removed));
        }
        s.push('\n');
    }
    if let Some(Value::Object(licenses)) = stats.get("licenses") {
        if let Some(p) = stats.get("policy") {
            let _ = writeln!(
                s,
                "Policy {} version {}{r}. One verdict record per declared license string:\n",
                literal(p.get("name").and_then(Value::as_str).unwrap_or("?")),
                literal(p.get("version").and_then(Value::as_str).unwrap_or("?"))
            );
        }
        s.push_str("| declared | SPDX | documents | decision | policy rule | verdict |\n| --- | --- | --- | --- | --- | --- |\n");
        for (declared, v) in licenses {
            let spdx = v.get("spdx").and_then(Value::as_str).map_or_else(|| "none".to_owned(), literal_cell);
            let verdict = v
                .get("verdict")
                .and_then(Value::as_str)
                .and_then(|d| d.parse::<Digest>().ok())
                .map_or_else(|| r.clone(), |d| refs.cite(d, format!("verdict record for {}", literal(declared))));
            let _ = writeln!(
                s,
                "| {} | {spdx} | {} | {} | {} | {verdict}{r} |",
                literal_cell(declared),
                group(v.get("documents").and_then(Value::as_u64).unwrap_or(0)),
                literal_cell(v.get("decision").and_then(Value::as_str).unwrap_or("?")),
                literal_cell(v.get("policy_rule").and_then(Value::as_str).unwrap_or("?"))
            );
        }
        s.push('\n');
    }
}

/// Known limitations, each derived from what the records show.
// One independent check per stage kind, in a row.
#[allow(clippy::too_many_lines)]
pub fn limitations(ev: &CardInputs, refs: &mut Refs) -> Vec<String> {
    let mut out = Vec::new();
    let by_rule = |st: &prov_manifest::LoadedStage, rule: &str| {
        st.record.stats.get("by_rule").and_then(|b| b.get(rule)).map(docs_words).unwrap_or_default()
    };
    if let Some(tox) = ev.chain_stage("toxicity") {
        let r = refs.cite(tox.manifest, "toxicity");
        let (d, w) = by_rule(tox, "toxicity:no-classifier");
        let scored: BTreeSet<String> = match tox.record.stats.get("thresholds") {
            Some(Value::Object(t)) => t.keys().cloned().collect(),
            _ => BTreeSet::new(),
        };
        if d > 0 {
            out.push(format!(
                "Toxicity was not measured for {} documents ({} words) whose language has no classifier (`toxicity:no-classifier`){r}; classifiers exist for {} language tags only{r}. Their documents were kept unscored.",
                group(d),
                group(w),
                group(scored.len() as u64)
            ));
        }
        out.push(format!(
            "The toxicity rule is relative: per language, the top {}% of scores is removed whatever the documents are{r}. It removes clean text from clean languages too.",
            tox.record.stats.get("quantile").and_then(Value::as_f64).map_or_else(|| "?".to_owned(), |q| format!("{:.0}", (1.0 - q) * 100.0))
        ));
    }
    if let Some(robots) = ev.chain_stage("robots") {
        let r = refs.cite(robots.manifest, "robots");
        for (rule, what) in [
            ("robots:unparseable", "whose robots.txt could not be parsed"),
            ("robots:no-robots", "whose host had no robots.txt in the snapshot"),
            ("robots:no-url", "without a URL"),
        ] {
            let (d, w) = by_rule(robots, rule);
            if d > 0 {
                out.push(format!(
                    "{} documents ({} words) {what} were kept by default (`{rule}`){r}: no opt-out could be read for them.",
                    group(d),
                    group(w)
                ));
            }
        }
        if let Some(snap) = ev.sources.iter().find(|s| !s.documents && s.record.name.as_str().contains("robots")) {
            let rs = refs.cite(snap.digest, "snapshot");
            out.push(format!(
                "Opt-outs are judged against the snapshot `{}` retrieved {}{rs}, not against the sites' robots.txt at crawl time or today.",
                snap.record.name,
                snap.record.retrieved.as_deref().map_or_else(|| "(date not declared)".to_owned(), literal)
            ));
        }
    }
    if let Some(pii) = ev.chain_stage("pii") {
        let r = refs.cite(pii.manifest, "pii");
        let mode = pii.record.config.get("mode").and_then(Value::as_str).unwrap_or("?");
        let kinds: Vec<String> = match pii.record.stats.get("replaced") {
            Some(Value::Object(m)) => m.keys().cloned().collect(),
            _ => Vec::new(),
        };
        out.push(format!(
            "PII redaction (mode `{mode}`){r} replaces only pattern matches of: {}. Names, postal addresses and phone numbers are not detected.",
            kinds.join(", ")
        ));
    }
    if let Some(lic) = ev.chain_stage("license") {
        let r = refs.cite(lic.manifest, "license");
        out.push(format!(
            "Licenses are the strings each document declares, normalised and judged by policy{r}; they were not checked against the documents' origins."
        ));
    }
    if let Some(dedup) = ev.chain_stage("dedup")
        && let Some(n) = dedup.record.stats.get("unverified_candidates").and_then(Value::as_u64)
        && n > 0
    {
        let r = refs.cite(dedup.manifest, "dedup");
        out.push(format!(
            "{} kept documents had near-duplicate candidates that failed verification{r}; near-duplicate detection is approximate (MinHash).",
            group(n)
        ));
    }
    let (langs, adds_up) = ev.kept_languages();
    let cjk: Vec<&str> = langs
        .keys()
        .map(String::as_str)
        .filter(|l| matches!(primary_language(l).as_str(), "zh" | "ja" | "th" | "my" | "km" | "lo" | "bo"))
        .collect();
    if !cjk.is_empty() {
        out.push(format!(
            "Word counts split at white space, so they undercount languages written without spaces ({}).",
            cjk.iter().map(|l| literal(l)).collect::<Vec<_>>().join(", ")
        ));
    }
    if !adds_up {
        let r = refs.cite(ev.output.digest, "output");
        out.push(format!(
            "The per-language counts derived from the stage statistics do not add up to the dataset's rows{r}: a stage of the chain does not record its removals per language."
        ));
    }
    let envelope: BTreeMap<&str, usize> = ev.run.stages().iter().fold(BTreeMap::new(), |mut m, s| {
        *m.entry(s.record.determinism.as_str()).or_default() += 1;
        m
    });
    if envelope.get("envelope").copied().unwrap_or(0) > 0 {
        let names: Vec<String> = ev
            .run
            .stages()
            .iter()
            .filter(|s| s.record.determinism.as_str() == "envelope")
            .map(|s| format!("`{}`{}", s.record.name, refs.cite(s.manifest, "envelope stage")))
            .collect();
        out.push(format!(
            "Stages of class `envelope` ({}) reproduce bit for bit only in the same envelope (libtorch version, CPU capability, threads).",
            names.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    /// Outside text as a code span: fenced by more backticks than it holds in a row, so that
    /// it cannot end the span, its invisible characters escaped, and in a cell its `|` too.
    #[test]
    fn outside_text_is_a_code_span_it_cannot_end() {
        assert_eq!(super::literal("MIT"), "`MIT`");
        assert_eq!(super::literal("a`b"), "`` a`b ``");
        assert_eq!(super::literal("x``` y"), "```` x``` y ````");
        assert_eq!(super::literal("de\n**bold**"), "`de\\n**bold**`");
        assert_eq!(super::literal_cell("a|b`"), "`` a\\|b` ``");
    }

    /// A source license written to end the row or the cell stays in its cell.
    #[test]
    fn an_authors_string_stays_in_its_table_cell() {
        assert_eq!(super::literal_cell("MIT"), "`MIT`");
        assert_eq!(super::literal_cell("MIT\n| forged | row |"), "`MIT\\n\\| forged \\| row \\|`");
        assert_eq!(super::literal_cell("MIT\u{1b}[32m"), "`MIT\\u{1b}[32m`");
    }
}
