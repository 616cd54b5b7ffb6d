//! Croissant 1.0 JSON-LD with the Responsible AI (RAI) vocabulary.

use std::io::Read as _;

use prov_store::{Digest, Store};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::hf::{kept_licenses, limitations};
use crate::inputs::CardInputs;
use crate::{CardError, Refs, group};

/// The file name a shard of the output gets in a published copy, relative to the card.
pub fn shard_path(index: usize) -> String {
    format!("data/shard-{index:05}.parquet")
}

/// Returns the SHA-256 (lowercase hex) of a stored object, read through a verified reader so
/// that a damaged shard fails rather than being hashed.
pub fn sha256_of(store: &Store, digest: &Digest) -> Result<String, CardError> {
    if !store.contains(digest) {
        return Err(CardError::MissingShard { digest: *digest });
    }
    let mut reader = store.open_verified(digest)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = reader.read(&mut buf).map_err(|source| CardError::ReadShard { digest: *digest, source })?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex_lower(&hasher.finalize()))
}

fn hex_lower(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn context() -> Value {
    json!({
        "@language": "en",
        "@vocab": "https://schema.org/",
        "citeAs": "cr:citeAs",
        "column": "cr:column",
        "conformsTo": "dct:conformsTo",
        "cr": "http://mlcommons.org/croissant/",
        "rai": "http://mlcommons.org/croissant/RAI/",
        "data": {"@id": "cr:data", "@type": "@json"},
        "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
        "dct": "http://purl.org/dc/terms/",
        "equivalentProperty": "cr:equivalentProperty",
        "examples": {"@id": "cr:examples", "@type": "@json"},
        "extract": "cr:extract",
        "field": "cr:field",
        "fileProperty": "cr:fileProperty",
        "fileObject": "cr:fileObject",
        "fileSet": "cr:fileSet",
        "format": "cr:format",
        "includes": "cr:includes",
        "isLiveDataset": "cr:isLiveDataset",
        "jsonPath": "cr:jsonPath",
        "key": "cr:key",
        "md5": "cr:md5",
        "parentField": "cr:parentField",
        "path": "cr:path",
        "recordSet": "cr:recordSet",
        "references": "cr:references",
        "regex": "cr:regex",
        "repeated": "cr:repeated",
        "replace": "cr:replace",
        "samplingRate": "cr:samplingRate",
        "sc": "https://schema.org/",
        "separator": "cr:separator",
        "source": "cr:source",
        "subField": "cr:subField",
        "transform": "cr:transform"
    })
}

/// Builds the Croissant document. `sha256` gives each output shard's SHA-256, in order.
pub fn build(ev: &CardInputs, sha256: &[String]) -> Value {
    let mut refs = Refs::inline();
    let out = &ev.output;
    let (licenses, _) = kept_licenses(ev);
    let (languages, _) = ev.kept_languages();
    let mut distribution = Vec::new();
    for (i, (shard, sha)) in out.record.shards.iter().zip(sha256).enumerate() {
        distribution.push(json!({
            "@type": "cr:FileObject",
            "@id": format!("shard-{i:05}"),
            "name": format!("shard-{i:05}"),
            "description": format!("Shard {i} of the dataset: {} rows; BLAKE3 {} (the object's name in the Provenant store).", group(shard.rows), shard.digest),
            "contentUrl": shard_path(i),
            "contentSize": format!("{} B", shard.bytes),
            "encodingFormat": "application/x-parquet",
            "sha256": sha,
        }));
    }
    distribution.push(json!({
        "@type": "cr:FileSet",
        "@id": "parquet-shards",
        "name": "parquet-shards",
        "description": "The dataset's Parquet shards (zstd), in dataset order.",
        "encodingFormat": "application/x-parquet",
        "includes": "data/*.parquet",
    }));
    let fields: Vec<Value> = out
        .record
        .columns
        .iter()
        .map(|c| {
            let data_type = match c.data_type.as_str() {
                "Int64" | "UInt64" | "Int32" | "UInt32" => "sc:Integer",
                "Float64" | "Float32" => "sc:Float",
                "Boolean" => "sc:Boolean",
                _ => "sc:Text",
            };
            json!({
                "@type": "cr:Field",
                "@id": format!("documents/{}", c.name),
                "name": c.name,
                "description": format!("Column `{}` ({}{}).", c.name, c.data_type, if c.nullable { ", nullable" } else { "" }),
                "dataType": data_type,
                "source": {"fileSet": {"@id": "parquet-shards"}, "extract": {"column": c.name}},
            })
        })
        .collect();
    let record_set = json!({
        "@type": "cr:RecordSet",
        "@id": "documents",
        "name": "documents",
        "description": format!("One record per document: {} records.", group(out.record.rows)),
        "field": fields,
    });

    let run_ref = refs.cite(ev.run.manifest, "run");
    let out_ref = refs.cite(out.digest, "dataset");
    let sources: Vec<String> = ev
        .sources
        .iter()
        .map(|s| {
            let r = refs.cite(s.digest, "source");
            format!(
                "`{}` ({}, from `{}`, license {}, retrieved {}){r}",
                s.record.name,
                if s.documents { "documents" } else { "filter input" },
                s.record.origin,
                s.record.license.as_deref().unwrap_or("not declared"),
                s.record.retrieved.as_deref().unwrap_or("not declared")
            )
        })
        .collect();
    let preprocessing: Vec<String> = ev
        .chain_stages()
        .map(|st| {
            let r = refs.cite(st.manifest, "stage");
            let rules = match st.record.stats.get("by_rule") {
                Some(Value::Object(m)) => m
                    .iter()
                    .map(|(k, v)| {
                        format!("{k}: {} documents", group(v.get("documents").and_then(Value::as_u64).unwrap_or(0)))
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                _ => String::new(),
            };
            let config = serde_json::to_string(&st.record.config).expect("JSON serialises");
            format!(
                "{} ({} v{}, {}), config {config}{}{r}",
                st.record.name,
                st.record.stage_kind,
                st.record.version,
                st.record.determinism.as_str(),
                if rules.is_empty() { String::new() } else { format!("; {rules}") }
            )
        })
        .collect();
    let pii = ev.chain_stage("pii").map_or_else(
        || "No PII stage ran in this pipeline: the data may contain personal information.".to_owned(),
        |st| {
            let r = refs.cite(st.manifest, "pii");
            let replaced = match st.record.stats.get("replaced") {
                Some(Value::Object(m)) => m.iter().map(|(k, v)| format!("{} {k}", group(v.as_u64().unwrap_or(0)))).collect::<Vec<_>>().join(", "),
                _ => "not recorded".to_owned(),
            };
            let redacted = st.record.stats.get("by_rule").and_then(|b| b.get("pii:redacted")).and_then(|v| v.get("documents")).and_then(Value::as_u64).unwrap_or(0);
            format!(
                "The `{}` stage (mode `{}`) replaced spans in {} documents: {replaced}{r}. Only these pattern kinds are detected; names, postal addresses and phone numbers are not.",
                st.record.name,
                st.record.config.get("mode").and_then(Value::as_str).unwrap_or("?"),
                group(redacted)
            )
        },
    );
    let limits: Vec<String> = limitations(ev, &mut refs);
    let biases = {
        let mut parts = Vec::new();
        if let Some(st) = ev.chain_stage("toxicity") {
            let r = refs.cite(st.manifest, "toxicity");
            let (d, _) = st
                .record
                .stats
                .get("by_rule")
                .and_then(|b| b.get("toxicity:toxic"))
                .map_or((0, 0), |v| (v.get("documents").and_then(Value::as_u64).unwrap_or(0), 0));
            parts.push(format!("The toxicity filter removed {} documents, the top scores of each language with a classifier{r}; languages without one were not filtered.", group(d)));
        }
        let mut sorted: Vec<(&String, &u64)> = languages.iter().collect();
        sorted.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let top: Vec<String> = sorted.iter().take(5).map(|(l, n)| format!("{l} {}", group(**n))).collect();
        parts.push(format!(
            "{} language tags; the largest: {} documents{}.",
            group(languages.len() as u64),
            top.join(", "),
            refs.cite(out.digest, "dataset")
        ));
        parts.join(" ")
    };
    let license_value: Vec<Value> =
        licenses.iter().map(|l| Value::String(format!("https://spdx.org/licenses/{l}.html"))).collect();

    let mut doc = Map::new();
    doc.insert("@context".into(), context());
    doc.insert("@type".into(), json!("sc:Dataset"));
    doc.insert("conformsTo".into(), json!("http://mlcommons.org/croissant/1.0"));
    doc.insert("name".into(), json!(ev.run.recipe()));
    doc.insert(
        "description".into(),
        json!(format!(
            "The `dataset` output of stage `{}` of the Provenant run with run manifest {}{run_ref}: {} documents in {} Parquet shards{out_ref}, Merkle root {}. Generated by `prov card` from the run's manifests alone.",
            out.stage,
            ev.run.manifest,
            group(out.record.rows),
            out.record.shards.len(),
            out.record.merkle_root
        )),
    );
    doc.insert(
        "license".into(),
        if license_value.len() == 1 { license_value[0].clone() } else { Value::Array(license_value) },
    );
    doc.insert("url".into(), json!(format!("urn:provenant:run:{}", ev.run.manifest)));
    doc.insert("version".into(), json!("1.0.0"));
    doc.insert("inLanguage".into(), json!(languages.keys().cloned().collect::<Vec<_>>()));
    doc.insert("keywords".into(), json!(["provenant", "provenance", "pretraining"]));
    doc.insert(
        "isBasedOn".into(),
        json!(ev.sources.iter().filter(|s| s.documents).map(|s| s.record.origin.clone()).collect::<Vec<_>>()),
    );
    doc.insert("rai:dataCollection".into(), json!(format!("Imported by source stages from: {}.", sources.join("; "))));
    doc.insert("rai:dataCollectionType".into(), json!(["Secondary Data Analysis"]));
    doc.insert("rai:dataPreprocessingProtocol".into(), json!(preprocessing));
    doc.insert("rai:personalSensitiveInformation".into(), json!(pii));
    doc.insert("rai:dataBiases".into(), json!(biases));
    doc.insert("rai:dataLimitations".into(), json!(limits));
    doc.insert(
        "rai:dataReleaseMaintenancePlan".into(),
        json!(format!("The dataset is a pure function of its lockfile: `prov replay` re-derives it and proves the bytes equal, run {}{run_ref}.", ev.run.manifest)),
    );
    doc.insert("distribution".into(), Value::Array(distribution));
    doc.insert("recordSet".into(), json!([record_set]));
    let manifests: Vec<String> = refs.list().iter().map(|(d, what)| format!("{} {d}: {what}", d.short())).collect();
    doc.insert("citeAs".into(), json!(format!("Provenant run manifest {} ({})", ev.run.manifest, ev.run.recipe())));
    doc.insert(
        "rai:dataAnnotationProtocol".into(),
        json!(format!("No annotation. Manifests cited by short id: {}", manifests.join("; "))),
    );
    Value::Object(doc)
}
