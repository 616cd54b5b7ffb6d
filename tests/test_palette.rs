//! Palettization (the AFM report, §5.2) end to end: a model pretrained on the quickstart's
//! parallel UDHR articles, palettized to the report's 3.7 bits per weight (k-means tables per
//! 16 rows, 2 or 4 bits per layer, 8-bit embeddings), an accuracy-recovery LoRA adapter trained
//! on the palettized model, `prov eval` printing the bits per weight and the log-likelihood
//! change against the float model, and the `bits-per-weight` audit claim.
//!
//! The reference palettizer is PyPI scikit-learn's `KMeans` (`tests/python/
//! palette_kmeans_reference.py`): on the same weights, group by group at the bits the stage
//! chose, the stage's tables must leave no more squared error than scikit-learn's (within a
//! few per cent: both are local optima of k-means).

use serde_json::Value;

use crate::common::{Project, repo_root, venv_python};

/// The stages after the shared base (`crate::test_adapters::recipe`).
const STAGES: &str = "  palettize:
    kind: palettize
    inputs: {model: pretrain.model}
    params: {target_bits_per_weight: 3.7}
  recovery:
    kind: lora
    inputs: {model: palettize.model, examples: pairs.train}
    params: {rank: 8, steps: 10, batch_size: 4, seq_len: 256, lr: 0.01, packing: true}
";

fn project() -> Project {
    let p = Project::with_recipes();
    crate::test_post_training::write_parallel_udhr(&p);
    p.write("recipes/palette.yaml", &crate::test_adapters::recipe("palette", STAGES));
    p
}

fn stage<'v>(lines: &'v [Value], name: &str) -> &'v Value {
    lines.iter().find(|l| l["type"] == "stage" && l["data"]["name"] == name).unwrap_or_else(|| panic!("{name}"))
}

fn record(p: &Project, digest: &str) -> Value {
    p.json(&["show", digest])[0]["data"]["record"].clone()
}

const POLICY: &str = "schema: 1\nname: afm\nclaims:\n  - kind: bits-per-weight\n";

/// The stage reaches the target with one layer at 2 bits, its tables are as good as
/// scikit-learn's, `prov eval` reports the bits and the change, the recovery adapter trains on
/// the palettized base, the claim holds and fails a forged palette, and the run replays.
#[test]
fn a_palettized_checkpoint_meets_its_bits_and_holds_its_claim() {
    let p = project();
    let run = p.json(&["run", "recipes/palette.yaml"]);
    let palettize = stage(&run, "palettize")["data"].clone();
    let stats = record(&p, palettize["manifest"].as_str().unwrap())["stats"].clone();
    let bpw = stats["bits_per_weight"].as_f64().unwrap();
    assert!(bpw <= 3.7 && bpw > 2.0, "{stats}");
    assert_eq!(stats["layers"].as_array().unwrap().iter().filter(|b| **b == 2).count(), 1, "{stats}");
    let quantized = palettize["outputs"]["model"].as_str().unwrap().to_owned();
    let float = stage(&run, "pretrain")["data"]["outputs"]["model"].as_str().unwrap().to_owned();
    let palette_digest = stats["palette"].as_str().unwrap().to_owned();
    let palette: Value = serde_json::from_slice(&fs_err::read(p.object_file(&palette_digest)).unwrap()).unwrap();
    assert_eq!(palette["source"], float);
    assert_eq!(palette["tensors"]["model.embed_tokens.weight"]["scheme"], "linear8");
    assert_eq!(palette["tensors"]["model.norm.weight"]["scheme"], "float");

    // Against scikit-learn's k-means on the same weights and groups.
    if let Some(python) = venv_python() {
        let weights = record(&p, &float)["weights"].as_str().unwrap().to_owned();
        let script = repo_root().join("tests/python/palette_kmeans_reference.py");
        let (w, pal) = (p.object_file(&weights), p.object_file(&palette_digest));
        let args = [script.to_str().unwrap(), "--weights", w.to_str().unwrap(), "--palette", pal.to_str().unwrap()];
        let out: Value = serde_json::from_slice(&prov_testkit::pipe(&python, &args, b"")).unwrap();
        let (mut ours, mut theirs) = (0.0, 0.0);
        for (name, t) in out["tensors"].as_object().unwrap() {
            let (s, k) = (t["stage"].as_f64().unwrap(), t["sklearn"].as_f64().unwrap());
            assert!(s <= k * 1.10, "{name}: the stage's error {s} against scikit-learn's {k}");
            ours += s;
            theirs += k;
        }
        assert!(ours <= theirs * 1.02, "in all: {ours} against scikit-learn's {theirs}");
        eprintln!("squared error: stage {ours:.6e}, scikit-learn {theirs:.6e} ({:.4})", ours / theirs);
    }

    // `prov eval` reports the bits and the change against the float model.
    p.write("ids.jsonl", "[2, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50]\n[2, 300, 7, 599, 12, 100, 101, 5]\n");
    let r = p.prov(&["eval", "--ids", "ids.jsonl", &quantized]);
    let text = r.success().stdout();
    assert!(text.contains("palettized: ") && text.contains("bits per weight (projections)"), "{text}");
    let eval = p.json(&["eval", "--ids", "ids.jsonl", &quantized]);
    let change = &eval[0]["data"]["palette"];
    assert_eq!(change["source"], float);
    assert!(change["nll_change"].as_f64().unwrap().is_finite(), "{change}");
    assert!((change["bits_per_weight"].as_f64().unwrap() - bpw).abs() < 1e-12);
    let adapter = stage(&run, "recovery")["data"]["outputs"]["adapter"].as_str().unwrap().to_owned();
    let recovered = p.json(&["eval", "--ids", "ids.jsonl", "--adapter", &adapter, &quantized]);
    // The recovery adapter was trained on the palettized model: not on the float one.
    let r = p.prov(&["eval", "--ids", "ids.jsonl", "--adapter", &adapter, &float]);
    assert!(r.exit(1).stderr().contains("was trained on checkpoint"), "{}", r.describe());
    eprintln!(
        "nll change against the float model: palettized {}, with the recovery adapter {}",
        change["nll_change"], recovered[0]["data"]["palette"]["nll_change"]
    );

    // The audit claim: holds at 3.7, fails a tighter claim and a forged palette.
    p.write("policy.yaml", POLICY);
    let r = p.prov(&["audit", "lockfiles/palette.lock", "--policy", "policy.yaml"]);
    assert!(r.success().stdout().contains("bits-per-weight: HOLDS"), "{}", r.describe());
    p.write("tight.yaml", "schema: 1\nname: afm\nclaims:\n  - kind: bits-per-weight\n    max: 3.0\n");
    let r = p.prov(&["audit", "lockfiles/palette.lock", "--policy", "tight.yaml"]);
    assert!(r.exit(4).stdout().contains("more than the claimed 3"), "{}", r.describe());
    forged_palettes_fail(&p);

    p.prov(&["replay", "lockfiles/palette.lock"]).success();

    p.write(
        "recipes/low.yaml",
        &crate::test_adapters::recipe(
            "low",
            &STAGES.replace("target_bits_per_weight: 3.7", "target_bits_per_weight: 1.5"),
        ),
    );
    let r = p.prov(&["run", "recipes/low.yaml"]);
    assert!(r.exit(1).stderr().contains("above the target 1.5"), "{}", r.describe());
}

/// A palette that says a 4-bit layer has 2 bits (and so fewer bits per weight), the float
/// weights under the honest palette, and the float weights under a palette that calls every
/// tensor kept: each passes every digest check, and each fails.
fn forged_palettes_fail(p: &Project) {
    use prov_manifest::{Record, get_typed, put_record};
    let (store, run, at, record) = crate::test_audit::recorded_stage(p, "lockfiles/palette.lock", "palettize");
    let checkpoint = get_typed::<prov_manifest::CheckpointRecord>(&store, &record.outputs["model"].digest).unwrap();
    let palette_digest = checkpoint.palette.unwrap();
    let mut palette: Value = serde_json::from_slice(&store.read(&palette_digest).unwrap()).unwrap();
    let four = palette["layers"].as_array().unwrap().iter().position(|b| *b == 4).unwrap();
    palette["layers"][four] = 2.into();
    let (mut bits, mut n) = (0u64, 0u64);
    let weights = prov_manifest::NamedTensors::from_safetensors(&store.read(&checkpoint.weights).unwrap()).unwrap();
    for (name, scheme) in palette["tensors"].as_object_mut().unwrap() {
        if scheme["scheme"] == "palette" {
            if name.starts_with(&format!("model.layers.{four}.")) {
                scheme["bits"] = 2.into();
            }
            let b = scheme["bits"].as_u64().unwrap();
            let count = weights.0[name].1.len() as u64;
            bits += count * b + scheme["groups"].as_u64().unwrap() * (1 << b) * 16;
            n += count;
        }
    }
    palette["bits_per_weight"] = (bits as f64 / n as f64).into();
    let forged = |checkpoint: prov_manifest::CheckpointRecord| {
        let mut stage = record.clone();
        stage.outputs.get_mut("model").unwrap().digest = put_record(&store, &Record::Checkpoint(checkpoint)).unwrap();
        let claims = crate::test_audit::audit_with_stage(&store, &run, at, stage, POLICY, &prov_audit::StageRescan);
        claims.into_iter().find(|c| c.kind == "bits-per-weight").unwrap()
    };
    let digest = store.put_bytes(prov_store::ObjectKind::Blob, &prov_manifest::encode_value(&palette)).unwrap();
    let c = forged(prov_manifest::CheckpointRecord { palette: Some(digest), ..checkpoint.clone() });
    assert_eq!(c.outcome, prov_audit::Outcome::Fails, "{c:?}");
    assert!(c.reasons.iter().any(|r| r.contains("distinct values, more than a 2-bit table")), "{c:?}");
    // The float model's weights under the honest palette.
    let float = get_typed::<prov_manifest::CheckpointRecord>(&store, &record.inputs["model"]).unwrap();
    let c = forged(prov_manifest::CheckpointRecord { palette: Some(palette_digest), ..float.clone() });
    assert!(c.reasons.iter().any(|r| r.contains("distinct values") || r.contains("not the 8-bit rounding")), "{c:?}");
    // The float model's weights under a palette that calls every tensor kept: 0 bits per
    // weight for the projections, if the schemes were taken on the palette's word.
    let mut all_float: Value = serde_json::from_slice(&store.read(&palette_digest).unwrap()).unwrap();
    for scheme in all_float["tensors"].as_object_mut().unwrap().values_mut() {
        *scheme = serde_json::json!({"scheme": "float"});
    }
    all_float["bits_per_weight"] = 0.into();
    all_float["model_bits_per_weight"] = 32.into();
    let digest = store.put_bytes(prov_store::ObjectKind::Blob, &prov_manifest::encode_value(&all_float)).unwrap();
    let c = forged(prov_manifest::CheckpointRecord { palette: Some(digest), ..float });
    assert_eq!(c.outcome, prov_audit::Outcome::Fails, "{c:?}");
    assert!(c.reasons.iter().any(|r| r.contains("the book's scheme gives it")), "{c:?}");
}
