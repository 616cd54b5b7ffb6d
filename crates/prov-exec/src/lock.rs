//! Locking: recipe in, lockfile out, with every source pinned, every default and seed
//! explicit, and the stages in plan order.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use prov_manifest::{
    Content, InputRef, LockedSource, LockedStage, Lockfile, Name, OutputType, Recipe, RecipeError, RecipeRef,
    SCHEMA_VERSION, closest, derive_seed, to_canonical_bytes, yaml_to_json,
};
use serde_json::Value;

use crate::stage::{InputSpec, Registry};
use crate::tree::{hash_file, tree_digest, tree_record};

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
    let text = fs_err::read_to_string(recipe_path).map_err(|e| RecipeError {
        file: recipe_path.to_owned(),
        line: 1,
        column: 1,
        field: None,
        message: format!("cannot read recipe: {e}"),
        hint: None,
        source_line: None,
    })?;
    lock_text(registry, recipe_path, &text, project_root)
}

/// Locks recipe text; `recipe_path` locates errors and the sources.
pub fn lock_text(
    registry: &Registry,
    recipe_path: &Path,
    text: &str,
    project_root: &Path,
) -> Result<Locked, RecipeError> {
    let recipe = Recipe::parse(recipe_path, text)?;
    let err = |path: &[&str], msg: String| RecipeError::at_field(recipe_path, text, path, msg);
    let recipe_dir = absolute(recipe_path.parent().unwrap_or(Path::new(".")));
    let root = absolute(project_root);

    // Sources.
    let mut sources = Vec::new();
    for (name, src) in &recipe.sources {
        let at = ["sources", name.as_str(), "path"];
        let resolved = normalize(&recipe_dir.join(&src.path));
        let meta = fs_err::metadata(&resolved).map_err(|e| {
            err(&at, format!("cannot read source `{}`: {}", resolved.display(), io_reason(&e)))
                .with_hint("paths are relative to the recipe's directory")
        })?;
        let content = if meta.is_dir() {
            let tree = tree_record(&resolved, &mut |p| Ok(hash_file(p)?)).map_err(|e| err(&at, e.to_string()))?;
            let (_, digest) = tree_digest(&tree);
            Content::Tree {
                digest,
                files: tree.entries.len() as u64,
                size: tree.entries.iter().map(|e| e.size).sum(),
            }
        } else {
            let (digest, size) = hash_file(&resolved).map_err(|e| err(&at, e.to_string()))?;
            Content::File { digest, size }
        };
        if let Some(expected) = &src.blake3 {
            if *expected != content.digest() {
                return Err(err(
                    &["sources", name.as_str(), "blake3"],
                    format!("source `{}` has BLAKE3 `{}`, but the recipe expects `{expected}`", src.path, content.digest()),
                )
                .with_hint("if the new bytes are intended, update `blake3` in the recipe"));
            }
        }
        sources.push(LockedSource {
            name: name.clone(),
            path: relative_to(&resolved, &root),
            content,
            license: src.license.clone(),
            retrieved: src.retrieved.clone(),
        });
    }

    // Stages: configs, seeds, inputs.
    let source_stage = registry.get("source").expect("the source stage kind is always registered");
    let mut outputs_of: BTreeMap<Name, Vec<(String, OutputType)>> = BTreeMap::new();
    for s in &sources {
        outputs_of.insert(s.name.clone(), source_stage.outputs(&Value::Null));
    }
    let mut resolved_configs = BTreeMap::new();
    for (name, stage) in &recipe.stages {
        let n = name.as_str();
        let Some(kind) = registry.get(&stage.kind) else {
            let names = registry.names();
            let mut e = err(&["stages", n, "kind"], format!("unknown stage kind `{}`", stage.kind));
            e = match closest(&stage.kind, &names) {
                Some(s) => e.with_hint(format!("did you mean `{s}`?")),
                None => e.with_hint(format!("known kinds: {}", names.join(", "))),
            };
            return Err(e);
        };
        if kind.kind() == "source" {
            return Err(err(&["stages", n, "kind"], "sources are declared under `sources`, not as stages".into()));
        }
        if kind.runs_commands() && !recipe.allow_commands {
            return Err(err(&["stages", n, "kind"], format!("stage kind `{}` runs commands", stage.kind))
                .with_hint("set `allow_commands: true` at the top of the recipe to allow it"));
        }
        let params = match &stage.params {
            None => Value::Object(serde_json::Map::new()),
            Some(y) => {
                let mut path = Vec::new();
                yaml_to_json(y, &mut path).map_err(|(p, msg)| {
                    let mut full = vec!["stages", n, "params"];
                    full.extend(p.iter().map(String::as_str));
                    err(&full, msg)
                })?
            }
        };
        let config = kind.resolve_config(&params).map_err(|e| {
            let mut full = vec!["stages", n, "params"];
            full.extend(e.path.iter().map(String::as_str));
            let mut re = err(&full, e.message);
            re.hint = e.hint;
            re
        })?;
        outputs_of.insert(name.clone(), kind.outputs(&config));
        resolved_configs.insert(name.clone(), config);
    }

    let mut stages = BTreeMap::new();
    for (name, stage) in &recipe.stages {
        let n = name.as_str();
        let kind = registry.get(&stage.kind).expect("checked above");
        let config = resolved_configs.remove(name).expect("resolved above");
        let mut inputs = BTreeMap::new();
        let spec = kind.inputs();
        if let InputSpec::Named(expected) = &spec {
            for (want, _) in expected {
                if !stage.inputs.contains_key(*want) {
                    return Err(err(&["stages", n], format!("stage kind `{}` needs input `{want}`", stage.kind))
                        .with_hint(format!("add `inputs: {{{want}: <source or stage>}}`")));
                }
            }
        }
        for (input_name, reference) in &stage.inputs {
            let at = ["stages", n, "inputs", input_name.as_str()];
            // Input names become paths (`inputs/<name>` of external commands): names only.
            input_name.parse::<Name>().map_err(|e| err(&at, format!("input {e}")))?;
            let accepted = match &spec {
                InputSpec::Any => None,
                InputSpec::Named(expected) => match expected.iter().find(|(w, _)| w == input_name) {
                    Some((_, types)) => Some(types.clone()),
                    None => {
                        let names: Vec<&str> = expected.iter().map(|(w, _)| *w).collect();
                        let mut e = err(&at, format!("stage kind `{}` has no input `{input_name}`", stage.kind));
                        if let Some(s) = closest(input_name, &names) {
                            e = e.with_hint(format!("did you mean `{s}`?"));
                        }
                        return Err(e);
                    }
                },
            };
            let (target, output) = match reference.split_once('.') {
                Some((t, o)) => (t, Some(o)),
                None => (reference.as_str(), None),
            };
            let Some(declared) = target.parse::<Name>().ok().and_then(|t| outputs_of.get(&t)) else {
                let known: Vec<&str> = outputs_of.keys().map(Name::as_str).collect();
                let mut e = err(&at, format!("`{target}` is neither a source nor a stage of this recipe"));
                if let Some(s) = closest(target, &known) {
                    e = e.with_hint(format!("did you mean `{s}`?"));
                }
                return Err(e);
            };
            let (output_name, output_type) = match output {
                Some(o) => match declared.iter().find(|(d, _)| d == o) {
                    Some(found) => found.clone(),
                    None => {
                        let names: Vec<&str> = declared.iter().map(|(d, _)| d.as_str()).collect();
                        return Err(err(&at, format!("`{target}` has no output `{o}`"))
                            .with_hint(format!("its outputs: {}", names.join(", "))));
                    }
                },
                None if declared.len() == 1 => declared[0].clone(),
                None => {
                    let names: Vec<&str> = declared.iter().map(|(d, _)| d.as_str()).collect();
                    return Err(err(&at, format!("`{target}` has several outputs; name one as `{target}.<output>`"))
                        .with_hint(format!("its outputs: {}", names.join(", "))));
                }
            };
            if let Some(types) = accepted {
                if !types.contains(&output_type) {
                    return Err(err(
                        &at,
                        format!(
                            "`{reference}` is a {}, but input `{input_name}` of `{}` takes {}",
                            type_name(output_type),
                            stage.kind,
                            types.iter().map(|t| type_name(*t)).collect::<Vec<_>>().join(" or ")
                        ),
                    ));
                }
            }
            let stage_name: Name = target.parse().expect("checked above");
            let output: Name = output_name.parse().map_err(|e: prov_manifest::NameError| err(&at, e.to_string()))?;
            inputs.insert(input_name.clone(), InputRef { stage: stage_name, output });
        }
        let mut seeds = BTreeMap::new();
        for (seed_name, value) in &stage.seeds {
            if !kind.seed_names().contains(&seed_name.as_str()) {
                let mut e = err(
                    &["stages", n, "seeds", seed_name.as_str()],
                    format!("stage kind `{}` has no seed `{seed_name}`", stage.kind),
                );
                e = match closest(seed_name, kind.seed_names()) {
                    Some(s) => e.with_hint(format!("did you mean `{s}`?")),
                    None if kind.seed_names().is_empty() => e.with_hint("this kind uses no seeds"),
                    None => e.with_hint(format!("its seeds: {}", kind.seed_names().join(", "))),
                };
                return Err(e);
            }
            seeds.insert(seed_name.clone(), *value);
        }
        for seed_name in kind.seed_names() {
            seeds.entry((*seed_name).to_owned()).or_insert_with(|| derive_seed(recipe.seed, n, seed_name));
        }
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
        err(&["stages", names[0], "inputs"], format!("stages form a cycle: {}", names.join(" -> ")))
            .with_hint("a stage cannot depend, directly or not, on its own outputs")
    })?;
    let mut ordered = Vec::with_capacity(order.len());
    for name in order {
        ordered.push(stages.remove(&name).expect("every planned stage exists"));
    }

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
        .map_err(|e| err(&[], format!("cannot encode the lockfile: {e}")))?;
    Ok(Locked { lockfile, bytes })
}

fn type_name(t: OutputType) -> &'static str {
    match t {
        OutputType::Source => "source",
        OutputType::Dataset => "dataset",
        OutputType::Tree => "tree",
        OutputType::File => "file",
        OutputType::Checkpoint => "checkpoint",
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
        let stages: BTreeMap<_, _> = [stage("a", &["c"]), stage("b", &["a"]), stage("c", &["b"]), stage("x", &[])].into();
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
