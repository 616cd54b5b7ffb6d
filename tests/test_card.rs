//! `prov card`: a Hugging Face card and a Croissant file for a run of the quickstart's
//! documents through the robots, PII and dedup filters. The card's front matter parses as
//! YAML, every number in it names a manifest, the Croissant file passes `mlcroissant
//! validate` and `mlcroissant load` reads its record set from the copied shards, and the plots
//! are valid SVG and PNG.

use crate::common::{Project, venv_python};

const RECIPE: &str = "\
schema: 1
name: card
seed: 20250131
sources:
  udhr:
    path: data/quickstart/udhr-sample.jsonl
    license: MIT
    retrieved: \"2025-01-31\"
  snapshot:
    path: data/robots
    license: CC0-1.0
    retrieved: \"2025-01-31\"
stages:
  shards:
    kind: shard
    inputs: {docs: udhr}
    params: {shards: 2}
  robots:
    kind: robots
    inputs: {docs: shards, snapshot: snapshot}
  pii:
    kind: pii
    inputs: {docs: robots.dataset}
  dedup:
    kind: dedup
    inputs: {docs: pii.dataset}
";

/// Returns the project after the run, and its run manifest.
fn project() -> (Project, String) {
    let p = Project::with_recipes();
    p.write(
        "recipes/data/robots/www.ohchr.org",
        "User-agent: GPTBot\nDisallow: /en/human-rights/universal-declaration/translations/french\n",
    );
    p.write("recipes/card.yaml", RECIPE);
    let lines = p.json(&["run", "recipes/card.yaml"]);
    let run = lines.iter().find(|l| l["type"] == "run").expect("a run message");
    (p, run["data"]["run_manifest"].as_str().unwrap().to_owned())
}

/// The text between the front matter's `---` lines, and the rest.
fn split_front_matter(card: &str) -> (&str, &str) {
    let rest = card.strip_prefix("---\n").expect("the card starts with front matter");
    let end = rest.find("\n---\n").expect("the front matter ends");
    (&rest[..=end], &rest[end + 5..])
}

#[test]
fn hf_card_front_matter_parses_and_every_number_names_a_manifest() {
    let (p, manifest) = project();
    p.prov(&["card", &manifest, "--format", "hf", "--out", "card"]).success();
    let card = fs_err::read_to_string(p.path("card/README.md")).unwrap();
    let (yaml, body) = split_front_matter(&card);
    let meta: serde_yaml::Value = serde_yaml::from_str(yaml).unwrap();
    for key in ["license", "language", "size_categories", "source_datasets", "pretty_name", "tags"] {
        assert!(meta.get(key).is_some(), "front matter lacks `{key}`:\n{yaml}");
    }
    assert_eq!(meta["license"][0].as_str(), Some("mit"), "{yaml}");
    assert_eq!(meta["size_categories"][0].as_str(), Some("n<1K"), "{yaml}");
    assert_eq!(meta["source_datasets"][0].as_str(), Some("extended|udhr"), "{yaml}");
    let langs: Vec<&str> = meta["language"].as_sequence().unwrap().iter().filter_map(|v| v.as_str()).collect();
    assert!(langs.contains(&"de") && langs.contains(&"pt"), "{yaml}");

    // Every line with a number, outside headings and the list of manifests, cites a manifest,
    // and every cited footnote is defined with a full digest.
    let (text, manifests) = body.split_once("## Manifests\n").expect("a Manifests section");
    for line in text.lines().filter(|l| !l.starts_with('#') && l.chars().any(|c| c.is_ascii_digit())) {
        assert!(line.contains("[^"), "a number without a manifest: {line}");
    }
    let defined: Vec<&str> = manifests.lines().filter_map(|l| l.strip_prefix("[^")).map(|l| &l[..12]).collect();
    for cite in text.split("[^").skip(1) {
        let label = &cite[..12];
        assert!(defined.contains(&label), "footnote `{label}` is not defined");
    }
    for l in manifests.lines().filter(|l| l.starts_with("[^")) {
        let full = l.split('`').nth(1).unwrap();
        assert!(full.starts_with(&format!("blake3:{}", &l[2..14])) && full.len() == 71, "{l}");
    }
    assert!(manifests.contains(&manifest), "the run manifest is listed");
    assert!(text.contains("`robots:disallowed`"), "{text}");
    // The PII stage keeps every document unchanged here, so its output has the robots stage's
    // digest; the chain still goes through it.
    assert!(text.contains("### `pii` (pii v"), "{text}");

    for stem in ["languages", "funnel"] {
        let svg = fs_err::read_to_string(p.path(&format!("card/plots/{stem}.svg"))).unwrap();
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\"") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.len() > 1000, "{stem}.svg is {} bytes", svg.len());
        let png = fs_err::read(p.path(&format!("card/plots/{stem}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{stem}.png is not a PNG");
        assert!(png.len() > 5000, "{stem}.png is {} bytes", png.len());
        assert!(card.contains(&format!("plots/{stem}.png")));
    }
}

#[test]
fn croissant_passes_mlcroissant_validate() {
    let (p, manifest) = project();
    p.prov(&["card", &manifest, "--format", "croissant", "--out", "cr", "--with-data"]).success();
    let doc: serde_json::Value =
        serde_json::from_str(&fs_err::read_to_string(p.path("cr/croissant.json")).unwrap()).unwrap();
    let dist = doc["distribution"].as_array().unwrap();
    for f in dist.iter().filter(|f| f["@type"] == "cr:FileObject") {
        let path = p.path(&format!("cr/{}", f["contentUrl"].as_str().unwrap()));
        let out = std::process::Command::new("sha256sum").arg(&path).output().unwrap();
        let sum = String::from_utf8(out.stdout).unwrap();
        assert_eq!(Some(f["sha256"].as_str().unwrap()), sum.split_whitespace().next(), "{}", path.display());
    }
    let fields: Vec<&str> =
        doc["recordSet"][0]["field"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    for f in ["id", "text", "url", "date", "language"] {
        assert!(fields.contains(&f), "{fields:?}");
    }
    assert!(doc["rai:personalSensitiveInformation"].as_str().unwrap().contains("(blake3:"));

    let Some(python) = venv_python() else { return };
    let mlcroissant = python.with_file_name("mlcroissant");
    let out = std::process::Command::new(&mlcroissant)
        .args(["validate", "--jsonld"])
        .arg(p.path("cr/croissant.json"))
        .output()
        .expect("mlcroissant starts (scripts/setup installs it)");
    assert!(
        out.status.success(),
        "mlcroissant validate failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The record set reads the copied shards: mlcroissant yields the documents themselves.
    let out = std::process::Command::new(&mlcroissant)
        .args(["load", "--record_set", "documents", "--num_records", "2", "--jsonld"])
        .arg(p.path("cr/croissant.json"))
        .env("HOME", p.root.parent().unwrap())
        .output()
        .expect("mlcroissant starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("'documents/id': b'udhr-"),
        "mlcroissant load failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Declared licenses and language tags are data. A handed-over corpus whose strings close a
/// code span and a table row, then write rows and paragraphs of their own ("reviewed and are
/// MIT-licensed", "no personal data (verified by Provenant)"), as an adversarial review wrote
/// them, does not change the card's structure. markdown-it-py (`CommonMark` with GitHub's
/// tables, the reference reader here) reads the card: the license table has one row per
/// declared string, the language table one per tag, and the forged sentences are nowhere
/// but inside code spans.
#[test]
fn strings_from_the_data_cannot_write_markdown_into_the_card() {
    let Some(python) = venv_python() else { return };
    let p = Project::with_recipes();
    let forged_license = "LicenseRef-x` | none | 1 | removed | `x` | |\n| `GPL-3.0` | `GPL-3.0-only` | 0 | removed | \
                          `not-in-allow-list` | |\n\nAll documents of this dataset were reviewed and are **MIT**-licensed.\n";
    let forged_language = "de`|1|x|\n\n**This dataset contains no personal data (verified by Provenant).**\n\n|`x";
    let docs = [
        serde_json::json!({"id": "a", "text": "hello world", "language": "en", "license": "MIT"}),
        serde_json::json!({"id": "b", "text": "other words", "language": "en", "license": "GPL-3.0"}),
        serde_json::json!({"id": "c", "text": "x y", "language": "en", "license": forged_license}),
        serde_json::json!({"id": "d", "text": "p q", "language": forged_language, "license": "MIT"}),
    ];
    let jsonl: String = docs.iter().map(|d| d.to_string() + "\n").collect();
    p.write("recipes/data/forged/docs.jsonl", &jsonl);
    p.write(
        "recipes/forged.yaml",
        "schema: 1\nname: forged\nseed: 1\nsources:\n  docs:\n    path: data/forged/docs.jsonl\n    license: \
         MIT\n    retrieved: \"[verify the license](javascript:alert(1)) ![](https://evil.example/pixel.png)\"\n\
         stages:\n  shards:\n    kind: shard\n    inputs: {docs: docs}\n  license:\n    kind: license\n    \
         inputs: {docs: shards}\n    params: {missing: deny}\n",
    );
    p.prov(&["run", "recipes/forged.yaml"]).success();
    p.prov(&["card", "lockfiles/forged.lock", "--out", "card"]).success();

    let reader = "import json, sys\nfrom markdown_it import MarkdownIt\n\
                  tokens = MarkdownIt('commonmark').enable('table').parse(open(sys.argv[1]).read())\n\
                  prose, tables, table, row, links = [], [], None, None, []\n\
                  for t in tokens:\n\
                  \x20   if t.type == 'table_open': table = []\n\
                  \x20   elif t.type == 'table_close': tables.append(table); table = None\n\
                  \x20   elif t.type == 'tr_open': row = []\n\
                  \x20   elif t.type == 'tr_close': table.append(row); row = None\n\
                  \x20   elif t.type == 'inline':\n\
                  \x20       links.extend(c.attrs.get('href') or c.attrs.get('src') for c in t.children if c.type in ('link_open', 'image'))\n\
                  \x20       cell = {'prose': ''.join(c.content for c in t.children if c.type == 'text'),\n\
                  \x20               'code': ''.join(c.content for c in t.children if c.type == 'code_inline')}\n\
                  \x20       (row if row is not None else prose).append(cell)\n\
                  print(json.dumps({'prose': prose, 'tables': tables, 'links': links}))\n";
    let out = std::process::Command::new(&python).arg("-c").arg(reader).arg(p.path("card/README.md")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let read: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let all_prose = |v: &serde_json::Value| -> Vec<String> {
        let mut found = Vec::new();
        for cell in v["prose"].as_array().unwrap() {
            found.push(cell["prose"].as_str().unwrap().to_owned());
        }
        for table in v["tables"].as_array().unwrap() {
            for row in table.as_array().unwrap() {
                found.extend(row.as_array().unwrap().iter().map(|c| c["prose"].as_str().unwrap().to_owned()));
            }
        }
        found
    };
    for text in all_prose(&read) {
        for forged in ["reviewed and are", "verified by Provenant", "not-in-allow-list"] {
            assert!(!text.contains(forged), "{forged:?} reads as Markdown outside a code span: {text:?}");
        }
    }
    let table_with = |header: &[&str]| {
        let named = |t: &&serde_json::Value| {
            t[0].as_array().unwrap().iter().map(|c| c["prose"].as_str().unwrap()).collect::<Vec<_>>() == header
        };
        read["tables"].as_array().unwrap().iter().find(named).cloned().expect("the table")
    };
    // A source's `retrieved` date with a `javascript:` link and a tracking image in it (a
    // review of the fixes): no link or image but the card's footnotes and plots.
    for link in read["links"].as_array().unwrap() {
        let link = link.as_str().unwrap();
        assert!(link.starts_with('#') || link.starts_with("plots/"), "{link}");
    }
    // The header, then MIT, GPL-3.0 and the forged string: three declared strings.
    let licenses = table_with(&["declared", "SPDX", "documents", "decision", "policy rule", "verdict"]);
    assert_eq!(licenses.as_array().unwrap().len(), 4, "{licenses:#}");
    // Whole in one cell, its line breaks shown as `\n`.
    let shown = forged_license.replace('\n', "\\n");
    let forged_row = licenses.as_array().unwrap().iter().filter(|row| row[0]["code"] == shown.as_str()).count();
    assert_eq!(forged_row, 1, "the forged string is one cell, whole: {licenses:#}");
    // `en` and the forged tag, each one row.
    let languages = table_with(&["language", "documents", "manifests"]);
    assert_eq!(languages.as_array().unwrap().len(), 3, "{languages:#}");
}
