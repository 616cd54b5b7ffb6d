//! Locking: recipe in, lockfile out, with every source pinned, every default and seed
//! explicit, and the stages in plan order.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use prov_manifest::{
    Content, InputRef, LockedSource, LockedStage, Lockfile, Name, OutputType, Recipe, RecipeError, RecipeRef,
    RecipeSource, RecipeStage, RelPath, SCHEMA_VERSION, closest, derive_seed, to_canonical_bytes, yaml_to_json,
};
use serde_json::Value;

use crate::stage::Registry;
use crate::tree::{hash_file, refuse_sparse, tree_digest, tree_record};

/// A locked recipe: the lockfile and its canonical bytes.
#[derive(Debug, Clone)]
pub struct Locked {
    /// The lockfile.
    pub lockfile: Lockfile,
    /// Its canonical bytes; their BLAKE3 is the run id.
    pub bytes: Vec<u8>,
}

/// Locks the recipe at `recipe_path`. Source paths are resolved against the recipe's
/// directory and written relative to `project_root`.
pub fn lock_recipe(registry: &Registry, recipe_path: &Path, project_root: &Path) -> Result<Locked, RecipeError> {
    let text = prov_store::read_named_text(recipe_path, prov_store::MAX_DOCUMENT_BYTES, "the recipe").map_err(|e| {
        RecipeError {
            file: recipe_path.to_owned(),
            line: 1,
            column: 1,
            field: None,
            message: format!("cannot read recipe: {e}"),
            hint: None,
            source_line: None,
        }
    })?;
    lock_text(registry, recipe_path, &text, project_root)
}

/// Builds errors located in the recipe text.
struct Locator<'a> {
    file: &'a Path,
    text: &'a str,
}

impl Locator<'_> {
    fn err(&self, path: &[&str], message: String) -> RecipeError {
        RecipeError::at_field(self.file, self.text, path, message)
    }
}

/// Adds a "did you mean" hint when a candidate is close to what was written.
fn with_closest(e: RecipeError, got: &str, candidates: &[&str]) -> RecipeError {
    match closest(got, candidates) {
        Some(s) => e.with_hint(format!("did you mean `{s}`?")),
        None => e,
    }
}

/// One file of a recipe: the recipe itself, or one that it `extends`.
struct RecipeFile {
    path: PathBuf,
    text: String,
}

/// A recipe with the recipes it extends merged in. Each source and stage keeps the index (in
/// the list of files, the recipe itself first) of the file that declares it, which locates its
/// errors and resolves its paths.
struct Merged {
    name: Name,
    seed: u64,
    allow_commands: bool,
    sources: BTreeMap<Name, (RecipeSource, usize)>,
    stages: BTreeMap<Name, (RecipeStage, usize)>,
}

/// The longest chain of `extends`.
const MAX_EXTENDS: usize = 8;

/// The largest recipe file that `extends` reads: recipes are a few kilobytes; a path naming
/// something else (`/dev/zero`, a corpus) must not be read whole.
const MAX_RECIPE_BYTES: u64 = 1 << 20;

/// Reads the chain of recipes that `recipe` extends, and merges them: the base's sources and
/// stages, each replaced by one of the same name further down the chain; the first `seed` and
/// `allow_commands` found from the recipe itself upwards. A recipe it extends must be a
/// regular file of at most [`MAX_RECIPE_BYTES`] inside `project_root`, as sources must: a
/// recipe from elsewhere could name a private key (whose text a parse error would quote, in
/// `prov status` too), `/dev/zero` or a FIFO.
fn merge(recipe_path: &Path, text: &str, project_root: &Path) -> Result<(Vec<RecipeFile>, Merged), RecipeError> {
    let mut files = vec![RecipeFile { path: recipe_path.to_owned(), text: text.to_owned() }];
    let mut recipes = vec![Recipe::parse(recipe_path, text)?];
    let mut seen = vec![absolute(recipe_path)];
    while let Some(base) = recipes.last().and_then(|r| r.extends.clone()) {
        let child = files.last().expect("the recipe itself is first");
        let loc = Locator { file: &child.path, text: &child.text };
        let path = normalize(&child.path.parent().unwrap_or(Path::new(".")).join(&base));
        if seen.contains(&absolute(&path)) {
            return Err(loc
                .err(&["extends"], format!("`{base}` extends, directly or not, this recipe"))
                .with_hint("a chain of `extends` must end in a recipe that extends nothing"));
        }
        if files.len() > MAX_EXTENDS {
            return Err(loc.err(&["extends"], format!("more than {MAX_EXTENDS} recipes extend one another")));
        }
        let text = read_extended(&path, project_root).map_err(|why| {
            loc.err(&["extends"], format!("cannot read recipe `{base}`: {why}"))
                .with_hint("`extends` names a recipe file in the project, relative to the recipe's directory")
        })?;
        recipes.push(Recipe::parse(&path, &text)?);
        seen.push(absolute(&path));
        files.push(RecipeFile { path, text });
    }
    let top = &recipes[0];
    let mut merged = Merged {
        name: top.name.clone(),
        seed: recipes.iter().find_map(|r| r.seed).expect("a recipe that extends nothing has a seed (checked by parse)"),
        allow_commands: recipes.iter().find_map(|r| r.allow_commands).unwrap_or(false),
        sources: BTreeMap::new(),
        stages: BTreeMap::new(),
    };
    for (i, r) in recipes.iter().enumerate().rev() {
        merged.sources.extend(r.sources.iter().map(|(n, s)| (n.clone(), (s.clone(), i))));
        merged.stages.extend(r.stages.iter().map(|(n, s)| (n.clone(), (s.clone(), i))));
    }
    // As within one file, a name is a source or a stage, not both.
    for (name, (_, at)) in &merged.stages {
        if let Some((_, source_at)) = merged.sources.get(name) {
            let i = (*at).min(*source_at);
            let (file, text) = (&files[i].path, &files[i].text);
            let field = if i == *at { "stages" } else { "sources" };
            return Err(RecipeError::at_field(
                file,
                text,
                &[field, name.as_str()],
                format!("`{name}` names both a source and a stage"),
            )
            .with_hint(
                "sources and stages share one namespace, across the recipes a recipe extends; rename one of them",
            ));
        }
    }
    Ok((files, merged))
}

/// Reads a recipe that another extends: a regular file inside the project (symbolic links
/// followed) of at most [`MAX_RECIPE_BYTES`], as UTF-8. The error says why not, without the
/// file's content.
fn read_extended(path: &Path, project_root: &Path) -> Result<String, String> {
    let root = fs_err::canonicalize(project_root).map_err(|e| io_reason(&e))?;
    let resolved = fs_err::canonicalize(path).map_err(|e| io_reason(&e))?;
    if !resolved.starts_with(&root) {
        return Err(format!("it is outside the project (it resolves to `{}`)", resolved.display()));
    }
    // A recipe file by name and by content: a `.env`, a credentials file or a key inside
    // the project is refused before any parser can quote a line or a value of it.
    let recipe_name = resolved
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
    if !recipe_name {
        return Err("it is not a recipe file (`.yaml` or `.yml`)".into());
    }
    // A regular file of bounded size, looked at before it is opened (opening a FIFO waits
    // for a writer) and opened without waiting; the error names no content.
    let text =
        prov_store::read_named_text(&resolved, MAX_RECIPE_BYTES, "the base recipe").map_err(|e| io_reason(&e))?;
    let looks_like_a_recipe = serde_yaml::from_str::<serde_yaml::Value>(prov_manifest::without_bom(&text))
        .ok()
        .is_some_and(|v| v.as_mapping().is_some_and(|m| m.contains_key("schema") && m.contains_key("name")));
    if !looks_like_a_recipe {
        return Err("it is not a recipe (a YAML mapping with `schema` and `name`)".into());
    }
    Ok(text)
}

/// Locks recipe text; `recipe_path` locates errors and the sources.
pub fn lock_text(
    registry: &Registry,
    recipe_path: &Path,
    text: &str,
    project_root: &Path,
) -> Result<Locked, RecipeError> {
    let (files, recipe) = merge(recipe_path, text, project_root)?;
    let loc_in = |i: usize| Locator { file: &files[i].path, text: &files[i].text };
    let root = absolute(project_root);
    let sources = lock_sources(&files, &recipe, &root)?;

    // Every output of every source and stage, so that inputs can be checked in any order.
    let source_stage = registry.get("source").expect("the source stage kind is always registered");
    let mut outputs_of: BTreeMap<Name, Vec<(String, OutputType)>> =
        sources.iter().map(|s| (s.name.clone(), source_stage.outputs(&Value::Null))).collect();
    let mut configs = BTreeMap::new();
    for (name, (stage, at)) in &recipe.stages {
        let (kind, config) = resolve_stage(&loc_in(*at), registry, recipe.allow_commands, name, stage)?;
        outputs_of.insert(name.clone(), kind.outputs(&config));
        configs.insert(name.clone(), (kind, config));
    }

    let mut stages = BTreeMap::new();
    for (name, (stage, at)) in &recipe.stages {
        let loc = loc_in(*at);
        let (kind, config) = configs.remove(name).expect("resolved above");
        let inputs = lock_inputs(&loc, kind.as_ref(), &config, name, stage, &outputs_of)?;
        let seeds = lock_seeds(&loc, kind.as_ref(), recipe.seed, name, stage)?;
        stages.insert(
            name.clone(),
            LockedStage {
                name: name.clone(),
                stage_kind: stage.kind.clone(),
                version: kind.version(),
                determinism: kind.determinism(&config),
                config,
                inputs,
                seeds,
            },
        );
    }

    let order = plan_order(&stages).map_err(|cycle| {
        let names: Vec<&str> = cycle.iter().map(Name::as_str).collect();
        let at = cycle.first().and_then(|n| recipe.stages.get(n)).map_or(0, |(_, at)| *at);
        loc_in(at)
            .err(&["stages", names[0], "inputs"], format!("stages form a cycle: {}", names.join(" -> ")))
            .with_hint("a stage cannot depend, directly or not, on its own outputs")
    })?;
    let ordered = order.into_iter().map(|n| stages.remove(&n).expect("every planned stage exists")).collect();

    let lockfile = Lockfile {
        schema: SCHEMA_VERSION,
        recipe: RecipeRef { name: recipe.name.clone(), path: relative_to(&absolute(recipe_path), &root) },
        seed: recipe.seed,
        allow_commands: recipe.allow_commands,
        sources,
        stages: ordered,
    };
    let bytes = prov_manifest::Record::Lockfile(lockfile.clone())
        .to_bytes()
        .map_err(|e| loc_in(0).err(&[], format!("cannot encode the lockfile: {e}")))?;
    Ok(Locked { lockfile, bytes })
}

/// Hashes every source (files, and directories as tree records) and checks expected hashes.
/// Each source's path is relative to the directory of the recipe file that declares it.
fn lock_sources(files: &[RecipeFile], recipe: &Merged, root: &Path) -> Result<Vec<LockedSource>, RecipeError> {
    let mut sources = Vec::new();
    for (name, (src, i)) in &recipe.sources {
        let file = &files[*i];
        let loc = Locator { file: &file.path, text: &file.text };
        let recipe_dir = absolute(file.path.parent().unwrap_or(Path::new(".")));
        let at = ["sources", name.as_str(), "path"];
        let resolved = normalize(&recipe_dir.join(&src.path));
        let path: RelPath = relative_to(&resolved, root).parse().map_err(|_| {
            let place = if resolved == root { "the project root itself" } else { "outside the project root" };
            loc.err(&at, format!("source `{}` is {place} `{}`", src.path, root.display()))
                .with_hint("a source is a file or directory inside the project: copy or move the data into it")
        })?;
        let (real, is_dir) = crate::confine_source(root, &path).map_err(|e| {
            let e = match e {
                crate::SourcePathError::Io { source, .. } => {
                    format!("cannot read source `{}`: {}", resolved.display(), io_reason(&source))
                }
                other => other.to_string(),
            };
            loc.err(&at, e).with_hint("paths are relative to the recipe's directory, and stay inside the project")
        })?;
        let sparse_hint = "copy it densely (`cp --sparse=never`) if its zeros are data";
        let content = if is_dir {
            let mut hashed = |p: &std::path::Path| {
                refuse_sparse(p)?;
                Ok(hash_file(p)?)
            };
            let tree =
                tree_record(&real, &mut hashed).map_err(|e| loc.err(&at, e.to_string()).with_hint(sparse_hint))?;
            let (_, digest) = tree_digest(&tree);
            Content::Tree { digest, files: tree.entries.len() as u64, size: tree.entries.iter().map(|e| e.size).sum() }
        } else {
            refuse_sparse(&real).map_err(|e| loc.err(&at, e.to_string()).with_hint(sparse_hint))?;
            let (digest, size) = hash_file(&real).map_err(|e| loc.err(&at, e.to_string()))?;
            Content::File { digest, size }
        };
        if let Some(expected) = &src.blake3
            && *expected != content.digest()
        {
            return Err(loc
                .err(
                    &["sources", name.as_str(), "blake3"],
                    format!(
                        "source `{}` has BLAKE3 `{}`, but the recipe expects `{expected}`",
                        src.path,
                        content.digest()
                    ),
                )
                .with_hint("if the new bytes are intended, update `blake3` in the recipe"));
        }
        sources.push(LockedSource {
            name: name.clone(),
            path,
            content,
            license: src.license.clone(),
            retrieved: src.retrieved.clone(),
        });
    }
    Ok(sources)
}

/// Finds a stage's kind and resolves its parameters into a config with every default explicit.
fn resolve_stage<'r>(
    loc: &Locator<'_>,
    registry: &'r Registry,
    allow_commands: bool,
    name: &Name,
    stage: &RecipeStage,
) -> Result<(&'r std::sync::Arc<dyn crate::Stage>, Value), RecipeError> {
    let n = name.as_str();
    let Some(kind) = registry.get(&stage.kind) else {
        let names = registry.names();
        let e = loc.err(&["stages", n, "kind"], format!("unknown stage kind `{}`", stage.kind));
        return Err(match closest(&stage.kind, &names) {
            Some(s) => e.with_hint(format!("did you mean `{s}`?")),
            None => e.with_hint(format!("known kinds: {}", names.join(", "))),
        });
    };
    if kind.kind() == "source" {
        return Err(loc.err(&["stages", n, "kind"], "sources are declared under `sources`, not as stages".into()));
    }
    if kind.runs_commands() && !allow_commands {
        return Err(loc
            .err(&["stages", n, "kind"], format!("stage kind `{}` runs commands", stage.kind))
            .with_hint("set `allow_commands: true` at the top of the recipe to allow it"));
    }
    let params = match &stage.params {
        None => Value::Object(serde_json::Map::new()),
        Some(y) => yaml_to_json(y, &mut Vec::new()).map_err(|(p, msg)| {
            let mut full = vec!["stages", n, "params"];
            full.extend(p.iter().map(String::as_str));
            loc.err(&full, msg)
        })?,
    };
    let config = kind.resolve_config(&params).map_err(|e| {
        let mut full = vec!["stages", n, "params"];
        full.extend(e.path.iter().map(String::as_str));
        let mut re = loc.err(&full, e.message);
        re.hint = e.hint;
        re
    })?;
    Ok((kind, config))
}

/// Resolves a stage's input references (`name` or `name.output`) and checks their types.
fn lock_inputs(
    loc: &Locator<'_>,
    kind: &dyn crate::Stage,
    config: &Value,
    name: &Name,
    stage: &RecipeStage,
    outputs_of: &BTreeMap<Name, Vec<(String, OutputType)>>,
) -> Result<BTreeMap<String, InputRef>, RecipeError> {
    let n = name.as_str();
    let spec = kind.inputs_for(config);
    let declared = spec.declared();
    if let Some(expected) = &declared
        && let Some((want, _)) = expected
            .iter()
            .find(|(want, _)| !stage.inputs.contains_key(*want) && !kind.optional_inputs().contains(want))
    {
        return Err(loc
            .err(&["stages", n], format!("stage kind `{}` needs input `{want}`", stage.kind))
            .with_hint(format!("add `inputs: {{{want}: <source or stage>}}`")));
    }
    let mut inputs = BTreeMap::new();
    for (input_name, reference) in &stage.inputs {
        let at = ["stages", n, "inputs", input_name.as_str()];
        // Input names become paths (`inputs/<name>` of external commands): names only.
        input_name.parse::<Name>().map_err(|e| loc.err(&at, format!("input {e}")))?;
        let mut accepted = None;
        if let Some(expected) = &declared {
            let Some((_, types)) = expected.iter().find(|(w, _)| *w == input_name.as_str()) else {
                let names: Vec<&str> = expected.iter().map(|(w, _)| *w).collect();
                let e = loc.err(&at, format!("stage kind `{}` has no input `{input_name}`", stage.kind));
                return Err(with_closest(e, input_name, &names));
            };
            accepted = Some(types.to_vec());
        }
        let (target, output) = match reference.split_once('.') {
            Some((t, o)) => (t, Some(o)),
            None => (reference.as_str(), None),
        };
        let Some((target_name, declared)) =
            target.parse::<Name>().ok().and_then(|t| outputs_of.get(&t).map(|d| (t, d)))
        else {
            let known: Vec<&str> = outputs_of.keys().map(Name::as_str).collect();
            let e = loc.err(&at, format!("`{target}` is neither a source nor a stage of this recipe"));
            return Err(with_closest(e, target, &known));
        };
        let names = || declared.iter().map(|(d, _)| d.as_str()).collect::<Vec<_>>().join(", ");
        let (output_name, output_type) = match output {
            Some(o) => declared.iter().find(|(d, _)| d == o).cloned().ok_or_else(|| {
                loc.err(&at, format!("`{target}` has no output `{o}`")).with_hint(format!("its outputs: {}", names()))
            })?,
            None if declared.len() == 1 => declared[0].clone(),
            None => {
                return Err(loc
                    .err(&at, format!("`{target}` has several outputs; name one as `{target}.<output>`"))
                    .with_hint(format!("its outputs: {}", names())));
            }
        };
        if let Some(types) = accepted.filter(|t| !t.contains(&output_type)) {
            let takes: Vec<&str> = types.iter().map(|t| type_name(*t)).collect();
            return Err(loc.err(
                &at,
                format!(
                    "`{reference}` is a {}, but input `{input_name}` of `{}` takes {}",
                    type_name(output_type),
                    stage.kind,
                    takes.join(" or ")
                ),
            ));
        }
        let output: Name = output_name.parse().map_err(|e: prov_manifest::NameError| loc.err(&at, e.to_string()))?;
        inputs.insert(input_name.clone(), InputRef { stage: target_name, output });
    }
    Ok(inputs)
}

/// Takes the recipe's explicit seeds (checking their names) and derives the others.
fn lock_seeds(
    loc: &Locator<'_>,
    kind: &dyn crate::Stage,
    master: u64,
    name: &Name,
    stage: &RecipeStage,
) -> Result<BTreeMap<String, u64>, RecipeError> {
    let n = name.as_str();
    let mut seeds = BTreeMap::new();
    for (seed_name, value) in &stage.seeds {
        if !kind.seed_names().contains(&seed_name.as_str()) {
            let e = loc.err(
                &["stages", n, "seeds", seed_name.as_str()],
                format!("stage kind `{}` has no seed `{seed_name}`", stage.kind),
            );
            return Err(match closest(seed_name, kind.seed_names()) {
                Some(s) => e.with_hint(format!("did you mean `{s}`?")),
                None if kind.seed_names().is_empty() => e.with_hint("this kind uses no seeds"),
                None => e.with_hint(format!("its seeds: {}", kind.seed_names().join(", "))),
            });
        }
        seeds.insert(seed_name.clone(), *value);
    }
    for seed_name in kind.seed_names() {
        seeds.entry((*seed_name).to_owned()).or_insert_with(|| derive_seed(master, n, seed_name));
    }
    Ok(seeds)
}

pub(crate) fn type_name(t: OutputType) -> &'static str {
    match t {
        OutputType::Source => "source",
        OutputType::Dataset => "dataset",
        OutputType::Tree => "tree",
        OutputType::File => "file",
        OutputType::Checkpoint => "checkpoint",
        OutputType::Ledger => "ledger",
    }
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// Orders stages topologically, ties broken by name. On a cycle, returns the stages of one
/// cycle in order, the first repeated at the end.
pub fn plan_order(stages: &BTreeMap<Name, LockedStage>) -> Result<Vec<Name>, Vec<Name>> {
    let deps = |s: &LockedStage| -> BTreeSet<Name> {
        s.inputs.values().map(|i| i.stage.clone()).filter(|d| stages.contains_key(d)).collect()
    };
    let mut remaining: BTreeMap<Name, BTreeSet<Name>> = stages.iter().map(|(n, s)| (n.clone(), deps(s))).collect();
    let mut order = Vec::new();
    loop {
        let ready: Option<Name> = remaining.iter().find(|(_, d)| d.is_empty()).map(|(n, _)| n.clone());
        let Some(next) = ready else { break };
        remaining.remove(&next);
        for d in remaining.values_mut() {
            d.remove(&next);
        }
        order.push(next);
    }
    if remaining.is_empty() {
        return Ok(order);
    }
    // Every remaining stage has a remaining dependency: follow them until one repeats.
    let start = remaining.keys().next().expect("non-empty").clone();
    let mut path = vec![start.clone()];
    let mut current = start;
    loop {
        let next = remaining[&current].iter().next().expect("each remaining stage has a dependency").clone();
        if let Some(pos) = path.iter().position(|p| p == &next) {
            let mut cycle: Vec<Name> = path[pos..].to_vec();
            cycle.reverse();
            cycle.insert(0, next);
            // Present as "a -> b -> a" in the direction of data flow.
            return Err(cycle);
        }
        path.push(next.clone());
        current = next;
    }
}

/// Makes a path absolute against the current directory, lexically (symlinks are not
/// resolved, so no machine-specific target leaks into the lockfile).
pub fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        normalize(p)
    } else {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        normalize(&cwd.join(p))
    }
}

fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Writes `path` relative to `base` with `/` separators (both absolute and normalised).
pub fn relative_to(path: &Path, base: &Path) -> String {
    let p: Vec<_> = path.components().collect();
    let b: Vec<_> = base.components().collect();
    let common = p.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = std::iter::repeat_n("..".to_owned(), b.len() - common).collect();
    parts.extend(p[common..].iter().map(|c| c.as_os_str().to_string_lossy().into_owned()));
    if parts.is_empty() { ".".to_owned() } else { parts.join("/") }
}

/// Returns the canonical bytes of a lockfile value (for tests and tools).
pub fn lockfile_bytes(lockfile: &Lockfile) -> Vec<u8> {
    to_canonical_bytes(&prov_manifest::Record::Lockfile(lockfile.clone())).expect("lockfiles encode")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(name: &str, deps: &[&str]) -> (Name, LockedStage) {
        let n: Name = name.parse().unwrap();
        let inputs = deps
            .iter()
            .enumerate()
            .map(|(i, d)| (format!("in{i}"), InputRef { stage: d.parse().unwrap(), output: "out".parse().unwrap() }))
            .collect();
        (
            n.clone(),
            LockedStage {
                name: n,
                stage_kind: "k".into(),
                version: 1,
                determinism: prov_manifest::Determinism::Portable,
                config: Value::Null,
                inputs,
                seeds: BTreeMap::new(),
            },
        )
    }

    #[test]
    fn plan_is_topological_with_name_ties() {
        let stages: BTreeMap<_, _> =
            [stage("d", &["b", "c"]), stage("c", &["a"]), stage("b", &["a"]), stage("a", &["src"])].into();
        let order: Vec<String> = plan_order(&stages).unwrap().iter().map(ToString::to_string).collect();
        assert_eq!(order, ["a", "b", "c", "d"]);
    }

    #[test]
    fn cycles_are_reported_in_order() {
        let stages: BTreeMap<_, _> =
            [stage("a", &["c"]), stage("b", &["a"]), stage("c", &["b"]), stage("x", &[])].into();
        let cycle: Vec<String> = plan_order(&stages).unwrap_err().iter().map(ToString::to_string).collect();
        assert_eq!(cycle.first(), cycle.last());
        assert_eq!(cycle.len(), 4, "{cycle:?}");
    }

    #[test]
    fn relative_paths_are_lexical() {
        assert_eq!(relative_to(Path::new("/p/recipes/data/x"), Path::new("/p")), "recipes/data/x");
        assert_eq!(relative_to(Path::new("/shared/data/x"), Path::new("/p/q")), "../../shared/data/x");
        assert_eq!(normalize(Path::new("/p/recipes/../data/./x")), PathBuf::from("/p/data/x"));
    }
}
