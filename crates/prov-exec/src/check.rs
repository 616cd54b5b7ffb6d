//! Checking a lockfile against the stage kinds of this build before anything runs.
//!
//! A lockfile is a file anyone can edit: what `prov lock` guarantees of a lockfile it writes
//! is checked again of every lockfile an execution reads. Each stage's kind must exist in this
//! version, its config must be the one the kind resolves from it (so every check the kind
//! makes of its parameters runs again: a hand-edited `dedup` config whose bands × rows is not
//! its permutations, a `shard` count of 0, are refused here instead of failing mid-stage), its
//! class must be the kind's, a kind that runs commands needs the lockfile's `allow_commands`,
//! and its inputs and seeds must be the ones the kind declares, each input naming an output of
//! an earlier source or stage, of a type the input takes. Source paths are checked when the
//! lockfile decodes ([`prov_manifest::RelPath`]) and confined to the project when they are read
//! ([`crate::confine_source`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use prov_manifest::{LockedStage, Lockfile, Name, OutputType, encode_value};
use serde_json::Value;

use crate::error::ExecError;
use crate::lock::type_name;
use crate::stage::{Registry, Stage};

/// Checks `lockfile` against the stage kinds of `registry`; the first problem found, naming
/// the stage and the field.
pub fn check_lockfile(registry: &Registry, lockfile: &Lockfile) -> Result<(), ExecError> {
    let source = registry.get("source").expect("the source stage kind is always registered");
    let mut outputs_of: BTreeMap<&Name, Vec<(String, OutputType)>> =
        lockfile.sources.iter().map(|s| (&s.name, source.outputs(&Value::Null))).collect();
    for stage in &lockfile.stages {
        let kind = check_kind(registry, lockfile, stage)?;
        check_config(kind.as_ref(), stage)?;
        check_inputs(kind.as_ref(), stage, &outputs_of)?;
        check_seeds(kind.as_ref(), stage)?;
        outputs_of.insert(&stage.name, kind.outputs(&stage.config));
    }
    Ok(())
}

fn invalid(stage: &LockedStage, field: &str, message: String) -> ExecError {
    ExecError::InvalidLockfile { stage: stage.name.clone(), field: field.to_owned(), message }
}

/// The kind exists in this build at the locked version, and may run here.
fn check_kind<'r>(
    registry: &'r Registry,
    lockfile: &Lockfile,
    stage: &LockedStage,
) -> Result<&'r Arc<dyn Stage>, ExecError> {
    let Some(kind) = registry.get(&stage.stage_kind).filter(|k| k.kind() != "source") else {
        return Err(ExecError::Incompatible {
            stage: stage.name.clone(),
            message: format!("this build has no stage kind `{}`", stage.stage_kind),
        });
    };
    if kind.version() != stage.version {
        return Err(ExecError::Incompatible {
            stage: stage.name.clone(),
            message: format!(
                "the lockfile pins `{}` version {}, but this build implements version {}; re-lock the recipe",
                stage.stage_kind,
                stage.version,
                kind.version()
            ),
        });
    }
    if kind.runs_commands() && !lockfile.allow_commands {
        return Err(invalid(
            stage,
            "stage_kind",
            format!("`{}` runs commands, and the lockfile does not allow commands", stage.stage_kind),
        ));
    }
    Ok(kind)
}

/// The config is the one the kind resolves from it, and the class the one it gives.
fn check_config(kind: &dyn Stage, stage: &LockedStage) -> Result<(), ExecError> {
    match kind.resolve_config(&stage.config) {
        Err(e) => {
            let field = std::iter::once("config".to_owned()).chain(e.path).collect::<Vec<_>>().join(".");
            return Err(invalid(stage, &field, e.message));
        }
        Ok(resolved) if encode_value(&resolved) != encode_value(&stage.config) => {
            return Err(invalid(
                stage,
                "config",
                format!("not the config `prov lock` resolves from it ({})", first_difference(&stage.config, &resolved)),
            ));
        }
        Ok(_) => {}
    }
    let determinism = kind.determinism(&stage.config);
    if determinism != stage.determinism {
        return Err(invalid(
            stage,
            "determinism",
            format!(
                "`{}`, but `{}` with this config is `{}`",
                stage.determinism.as_str(),
                stage.stage_kind,
                determinism.as_str()
            ),
        ));
    }
    Ok(())
}

/// Every input the kind needs and no other, each an output of an earlier source or stage of a
/// type the input takes.
fn check_inputs(
    kind: &dyn Stage,
    stage: &LockedStage,
    outputs_of: &BTreeMap<&Name, Vec<(String, OutputType)>>,
) -> Result<(), ExecError> {
    let spec = kind.inputs_for(&stage.config);
    let declared = spec.declared();
    if let Some(declared) = &declared
        && let Some((missing, _)) = declared
            .iter()
            .find(|(want, _)| !stage.inputs.contains_key(*want) && !kind.optional_inputs().contains(want))
    {
        return Err(invalid(stage, "inputs", format!("`{}` needs input `{missing}`", stage.stage_kind)));
    }
    for (input, reference) in &stage.inputs {
        let field = format!("inputs.{input}");
        let accepted = match &declared {
            Some(declared) => match declared.iter().find(|(want, _)| *want == input.as_str()) {
                Some((_, types)) => Some(*types),
                None => return Err(invalid(stage, &field, format!("`{}` has no input `{input}`", stage.stage_kind))),
            },
            None => None,
        };
        let Some(outputs) = outputs_of.get(&reference.stage) else {
            return Err(invalid(stage, &field, format!("`{}` is not a source or an earlier stage", reference.stage)));
        };
        let Some((_, output_type)) = outputs.iter().find(|(o, _)| o == reference.output.as_str()) else {
            return Err(invalid(stage, &field, format!("`{}` has no output `{}`", reference.stage, reference.output)));
        };
        if let Some(types) = accepted.filter(|t| !t.contains(output_type)) {
            let takes: Vec<&str> = types.iter().map(|t| type_name(*t)).collect();
            return Err(invalid(
                stage,
                &field,
                format!(
                    "`{}.{}` is a {}, but input `{input}` of `{}` takes {}",
                    reference.stage,
                    reference.output,
                    type_name(*output_type),
                    stage.stage_kind,
                    takes.join(" or ")
                ),
            ));
        }
    }
    Ok(())
}

/// Exactly the seeds the kind declares.
fn check_seeds(kind: &dyn Stage, stage: &LockedStage) -> Result<(), ExecError> {
    let want: BTreeSet<&str> = kind.seed_names().iter().copied().collect();
    let have: BTreeSet<&str> = stage.seeds.keys().map(String::as_str).collect();
    if want == have {
        return Ok(());
    }
    let names = |s: &BTreeSet<&str>| {
        if s.is_empty() {
            return "none".to_owned();
        }
        s.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
    };
    Err(invalid(stage, "seeds", format!("{}, but `{}` takes {}", names(&have), stage.stage_kind, names(&want))))
}

/// Names the first key (or the value) where two configs differ, for the error message.
fn first_difference(locked: &Value, resolved: &Value) -> String {
    match (locked, resolved) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) if encode_value(x) == encode_value(y) => {}
                    (Some(x), Some(y)) => {
                        return format!("`{key}`: {}", first_difference(x, y));
                    }
                    (Some(_), None) => return format!("`{key}` is not one of its fields"),
                    (None, Some(y)) => return format!("`{key}` is missing; it resolves to {y}"),
                    (None, None) => {}
                }
            }
            "the same fields".to_owned()
        }
        (a, b) => format!("{a} where it resolves to {b}"),
    }
}
