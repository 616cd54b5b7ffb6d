//! `prov explain goldfish`: the positions the Goldfish loss drops, checked against an
//! independent computation in PyTorch (the released code's tensor operations on a table drawn
//! by Python's torch), on real text.

use crate::common::{Project, repo_root, venv_python};

/// Label sequences from real text: the UTF-8 bytes of UDHR articles as byte-level token ids,
/// plus sequences whose products overflow int64 and go negative.
fn sequences() -> Vec<Vec<i64>> {
    let udhr = fs_err::read_to_string(repo_root().join("recipes/data/mini-apertus/udhr.jsonl")).unwrap();
    let mut out: Vec<Vec<i64>> = udhr
        .lines()
        .take(40)
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["text"].as_str().unwrap().bytes().map(i64::from).collect()
        })
        .collect();
    out.push((0..3000).map(|i| 50_000 + (i * 7919) % 100_000).collect());
    out.push((0..500).map(|i| if i % 3 == 0 { -100 } else { 4_000_000_000 + i }).collect());
    out
}

fn dropped(p: &Project, labels: &[i64], k: u64, h: u64) -> Vec<usize> {
    let input = serde_json::to_string(labels).unwrap();
    let r = p.prov_with_stdin(&["explain", "goldfish", "--k", &k.to_string(), "--h", &h.to_string()], input);
    r.success();
    serde_json::from_str(r.stdout().trim()).unwrap()
}

const TORCH_GOLDFISH: &str = r"
import json, sys, torch
torch.manual_seed(2971215073)
table = torch.rand(1000003)
for line in sys.stdin:
    case = json.loads(line)
    k, h = case['k'], case['h']
    labels = torch.tensor(case['labels'], dtype=torch.int64).unsqueeze(0)
    if labels.shape[1] < h:
        print('[]')
        continue
    keys = labels.unfold(1, h, 1).prod(dim=-1) % 1000003
    mask = table[keys] < 1 / k
    print(json.dumps((mask[0].nonzero().flatten() + h - 1).tolist()))
";

#[test]
fn masks_equal_pytorch_on_real_text() {
    let p = Project::new();
    // A dozen articles and the two overflowing sequences: each case is one `prov` process.
    let all = sequences();
    let seqs: Vec<&Vec<i64>> = all[..12].iter().chain(&all[all.len() - 2..]).collect();
    let settings = [(50, 50), (4, 13), (2, 1)];
    let mut cases = Vec::new();
    let mut ours = Vec::new();
    for labels in seqs {
        for (k, h) in settings {
            cases.push(serde_json::json!({"k": k, "h": h, "labels": labels}).to_string());
            ours.push(dropped(&p, labels, k, h));
        }
    }
    let Some(python) = venv_python() else { return };
    let mut child = std::process::Command::new(python)
        .args(["-c", TORCH_GOLDFISH])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), (cases.join("\n") + "\n").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let theirs: Vec<Vec<usize>> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(theirs.len(), ours.len());
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a, b, "case {i}: k, h = {:?}", settings[i % settings.len()]);
    }
}

#[test]
fn about_two_percent_are_dropped_at_k_50() {
    let p = Project::new();
    // Token ids spread over a 4,096-entry vocabulary, as a BPE tokenizer's are.
    let mut state = 12_345u64;
    let labels: Vec<i64> = (0..40_000)
        .map(|_| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 52).cast_signed()
        })
        .collect();
    let d = dropped(&p, &labels, 50, 50);
    assert!(d.iter().all(|&j| j >= 49), "nothing before h - 1 is dropped");
    let share = d.len() as f64 / (labels.len() - 49) as f64;
    // Below 2% by the windows whose product has 64 factors of two and wraps to 0: they all
    // share table[0] (the released code's arithmetic, kept exactly).
    assert!((0.016..0.022).contains(&share), "{} of {} dropped: {share}", d.len(), labels.len());

    // Byte-level ids of real text collapse much more (a space is 2^5): the book says so.
    let bytes: Vec<i64> = sequences().into_iter().take(40).flatten().collect();
    let share = dropped(&p, &bytes, 50, 50).len() as f64 / (bytes.len() - 49) as f64;
    assert!(share < 0.005, "{share}");
}

#[test]
fn bad_input_is_a_located_error() {
    let p = Project::new();
    let r = p.prov_with_stdin(&["explain", "goldfish"], "[1, 2, \"x\"]");
    r.exit(1);
    assert!(r.stderr().contains("stdin, line 1 column"), "{}", r.describe());
    assert!(r.stderr().contains("JSON array of integer token ids"), "{}", r.describe());
    p.prov_with_stdin(&["explain", "goldfish", "--k", "0"], "[]").exit(1);
}

#[test]
fn json_mode_reports_the_settings() {
    let p = Project::new();
    let labels: Vec<i64> = (0..400).collect();
    let r = p.prov_with_stdin(
        &["--json", "explain", "goldfish", "--k", "3", "--h", "2"],
        serde_json::to_string(&labels).unwrap(),
    );
    r.success();
    let v: serde_json::Value = serde_json::from_str(r.stdout().trim()).unwrap();
    assert_eq!(v["type"], "goldfish");
    assert_eq!(v["data"]["labels"], 400);
    assert_eq!(v["data"]["dropped"], serde_json::json!(dropped(&p, &labels, 3, 2)));
}
