//! Invalid recipes get errors naming file, line, column and field, with a hint where one
//! helps; no input makes `prov` panic.
//!
//! Each file in `tests/fixtures/recipes/invalid/` starts with `# expect: L:C: <text>`, where
//! the text is `|`-separated fragments that must all appear in stderr.

use crate::common::{Project, repo_root};

#[test]
fn every_invalid_fixture_fails_with_its_located_message() {
    let dir = repo_root().join("tests/fixtures/recipes/invalid");
    let mut files: Vec<_> = fs_err::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 15, "{files:?}");
    let p = Project::with_recipes();
    let mut failures = Vec::new();
    for file in files {
        let text = fs_err::read_to_string(&file).unwrap();
        let expect = text.lines().next().and_then(|l| l.strip_prefix("# expect: ")).expect("fixture header");
        let (location, fragments) = expect.split_once(": ").unwrap();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let rel = format!("recipes/{name}");
        p.write(&rel, &text);
        let r = p.prov(&["lock", &rel]);
        let err = r.stderr();
        let mut problems = Vec::new();
        if r.code() != 1 {
            problems.push(format!("exit {} instead of 1", r.code()));
        }
        if err.contains("panicked") {
            problems.push("panicked".to_owned());
        }
        if !err.contains(&format!("error: {rel}:{location}: ")) {
            problems.push(format!("no `{rel}:{location}` location"));
        }
        for fragment in fragments.split(" | ") {
            if !err.contains(fragment) {
                problems.push(format!("missing `{fragment}`"));
            }
        }
        if !problems.is_empty() {
            failures.push(format!("{name}: {}\n{err}", problems.join("; ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn errors_quote_the_offending_line() {
    let p = Project::with_recipes();
    let text = fs_err::read_to_string(repo_root().join("tests/fixtures/recipes/invalid/typo-in-field.yaml")).unwrap();
    p.write("recipes/t.yaml", &text);
    let r = p.prov(&["lock", "recipes/t.yaml"]);
    r.exit(1);
    assert!(r.stderr().contains("11 |     paramz:\n   |     ^"), "{}", r.describe());
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config { cases: 48, ..Default::default() })]

    /// Random edits of the quickstart recipe (deleted, duplicated or mangled lines, random
    /// bytes) give exit 0 or 1, never a panic or another code.
    #[test]
    fn mangled_recipes_never_panic(
        ops in proptest::collection::vec((0usize..40, 0u8..4, proptest::string::string_regex("[ -~]{0,12}").unwrap()), 1..4)
    ) {
        let p = Project::with_recipes();
        let text = fs_err::read_to_string(repo_root().join("recipes/quickstart.yaml")).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        for (at, op, junk) in ops {
            let i = at % lines.len().max(1);
            match op {
                0 => { lines.remove(i); }
                1 => { let l = lines[i].clone(); lines.insert(i, l); }
                2 => { lines[i].push_str(&junk); }
                _ => { let cut = lines[i].len() / 2; lines[i].truncate(cut); }
            }
            if lines.is_empty() { lines.push(String::new()); }
        }
        p.write("recipes/quickstart.yaml", &lines.join("\n"));
        let r = p.prov(&["lock", "recipes/quickstart.yaml"]);
        proptest::prop_assert!(r.code() == 0 || r.code() == 1, "{}", r.describe());
        proptest::prop_assert!(!r.stderr().contains("panicked"), "{}", r.describe());
    }
}

/// 100,000 levels of nesting used to take a YAML parser most of a minute to refuse.
#[test]
fn a_recipe_nested_100000_levels_deep_is_refused_at_once() {
    let p = Project::with_recipes();
    let n = 100_000;
    p.write(
        "recipes/deep.yaml",
        &format!("schema: 1\nname: deep\nseed: 1\nstages:\n  a: {}{}\n", "[".repeat(n), "]".repeat(n)),
    );
    let r = p.prov(&["lock", "recipes/deep.yaml"]);
    r.exit(1);
    // Refused at the 65th `[`, by the scan before the parser, not by the parser.
    assert!(r.stderr().contains("recipes/deep.yaml:5:70: nested deeper than 64 levels"), "{}", r.describe());
}
