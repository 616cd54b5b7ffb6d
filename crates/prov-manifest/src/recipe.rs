//! Recipes: the YAML a user writes, parsed strictly, with errors that point at file, line,
//! column and field.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use prov_store::Digest;
use serde::Deserialize;
use serde_json::Value;

use crate::name::Name;

/// Recipe schema version this build reads.
pub const RECIPE_SCHEMA: u32 = 1;

/// A parsed recipe.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// Must be [`RECIPE_SCHEMA`].
    pub schema: u32,
    /// Recipe name; names the lockfile.
    pub name: Name,
    /// Free text for people.
    #[serde(default)]
    pub description: Option<String>,
    /// Another recipe (a path relative to this one's directory) whose sources and stages this
    /// one starts from: a variant. Its `seed` and `allow_commands` apply unless this recipe
    /// sets them; a source or stage of the same name here replaces the base's.
    #[serde(default)]
    pub extends: Option<String>,
    /// Master seed from which every seed not given explicitly is derived; required unless the
    /// recipe `extends` another.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Whether `external` stages may run commands (default false, or the base's).
    #[serde(default)]
    pub allow_commands: Option<bool>,
    /// Inputs pinned from outside, by name.
    #[serde(default, deserialize_with = "unique_keys")]
    pub sources: BTreeMap<Name, RecipeSource>,
    /// Stages by name.
    #[serde(default, deserialize_with = "unique_keys")]
    pub stages: BTreeMap<Name, RecipeStage>,
}

/// A source as declared in a recipe.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeSource {
    /// File or directory, relative to the recipe's directory.
    pub path: String,
    /// Expected BLAKE3 of the file or of the tree record; a mismatch fails the lock.
    #[serde(default)]
    pub blake3: Option<Digest>,
    /// Declared license.
    #[serde(default)]
    pub license: Option<String>,
    /// Declared retrieval date.
    #[serde(default)]
    pub retrieved: Option<String>,
}

/// A stage as declared in a recipe.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeStage {
    /// Stage kind.
    pub kind: String,
    /// Input name -> `source` or `stage` or `stage.output`.
    #[serde(default, deserialize_with = "unique_keys")]
    pub inputs: BTreeMap<String, String>,
    /// Kind-specific parameters; checked by the stage kind when locking.
    #[serde(default)]
    pub params: Option<serde_yaml::Value>,
    /// Explicit seeds by seed name; the others are derived from the master seed.
    #[serde(default, deserialize_with = "unique_keys")]
    pub seeds: BTreeMap<String, u64>,
}

/// Reads a mapping whose keys must each appear once. A YAML mapping read into a map keeps
/// the last of two equal keys, so a recipe with two stages named `shards` locked the second
/// while a reader of the file saw the first; this refuses the second, at its key.
fn unique_keys<'de, D, K, V>(deserializer: D) -> Result<BTreeMap<K, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    K: Deserialize<'de> + Ord + fmt::Display,
    V: Deserialize<'de>,
{
    struct Unique<K, V>(std::marker::PhantomData<(K, V)>);
    impl<'de, K, V> serde::de::Visitor<'de> for Unique<K, V>
    where
        K: Deserialize<'de> + Ord + fmt::Display,
        V: Deserialize<'de>,
    {
        type Value = BTreeMap<K, V>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a mapping")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(key) = map.next_key::<K>()? {
                if out.contains_key(&key) {
                    return Err(serde::de::Error::custom(format_args!(
                        "`{key}` appears twice in this mapping; a name is given once"
                    )));
                }
                let value = map.next_value()?;
                out.insert(key, value);
            }
            Ok(out)
        }
    }
    deserializer.deserialize_map(Unique(std::marker::PhantomData))
}

/// An error in a recipe, located in its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecipeError {
    /// The recipe file.
    pub file: PathBuf,
    /// 1-based line, when known.
    pub line: usize,
    /// 1-based column, when known.
    pub column: usize,
    /// Dotted path of the field, when known (`stages.shard.params.shards`).
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
    /// The offending line of the recipe, for display.
    pub source_line: Option<String>,
}

impl fmt::Display for RecipeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file.display(), self.line, self.column)?;
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for RecipeError {}

impl RecipeError {
    /// Builds an error at the location of a field path in `text`.
    pub fn at_field(file: &Path, text: &str, path: &[&str], message: impl Into<String>) -> Self {
        let (line, column) = locate(text, path).unwrap_or((1, 1));
        Self {
            file: file.to_owned(),
            line,
            column,
            field: (!path.is_empty()).then(|| path.join(".")),
            message: message.into(),
            hint: None,
            source_line: text.lines().nth(line - 1).map(str::to_owned),
        }
    }

    /// Adds a hint.
    #[must_use]
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// The deepest nesting a recipe, policy or verdict file may have: flow collections
/// (`[`, `{`) and compact sequences (`- - x`) counted together. Real files nest a few levels.
pub const MAX_YAML_DEPTH: usize = 64;

/// The widest indentation, in columns, of a line of such a file (block nesting is indentation).
pub const MAX_YAML_INDENT: usize = 1024;

/// Refuses YAML nested deeper than [`MAX_YAML_DEPTH`] or indented wider than
/// [`MAX_YAML_INDENT`], in one pass over the text, before a parser sees it: 100,000 levels of
/// `[` took a YAML parser most of a minute to refuse. Quoted scalars and comments are skipped.
pub fn check_yaml_nesting(file: &Path, text: &str) -> Result<(), RecipeError> {
    let too_deep = |line: usize, column: usize, message: String| RecipeError {
        file: file.to_owned(),
        line,
        column,
        field: None,
        message,
        hint: Some("recipes and policies nest a few levels; this looks like a file made to exhaust a parser".into()),
        source_line: text.lines().nth(line.saturating_sub(1)).map(|l| l.chars().take(120).collect()),
    };
    let (mut flow, mut quote, mut escaped) = (0usize, None::<char>, false);
    for (n, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start_matches(' ').len();
        if quote.is_none() && indent > MAX_YAML_INDENT {
            return Err(too_deep(n + 1, 1, format!("indented {indent} columns, more than {MAX_YAML_INDENT}")));
        }
        let mut compact = 0;
        let mut previous = ' ';
        // The last character before white space on this line: a quoted scalar starts a value
        // (after `:`, `-`, `?`, `[`, `{` or `,`, or at the start of a line), never inside a
        // plain one: in `note: it's`, the `'` quotes nothing.
        let mut last: Option<char> = None;
        let mut chars = line.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            match quote {
                Some('"') if escaped => escaped = false,
                Some('"') if c == '\\' => escaped = true,
                Some('\'') if c == '\'' && chars.peek().is_some_and(|(_, next)| *next == '\'') => {
                    chars.next();
                }
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None => match c {
                    '#' if previous.is_whitespace() => break,
                    '\'' | '"'
                        if "[{,".contains(previous)
                            || (previous.is_whitespace() && last.is_none_or(|l| ":-?[{,".contains(l))) =>
                    {
                        quote = Some(c);
                    }
                    '[' | '{' => flow += 1,
                    ']' | '}' => flow = flow.saturating_sub(1),
                    '-' if flow == 0
                        && line[..at].trim_start_matches(['-', ' ']).is_empty()
                        && chars.peek().is_none_or(|(_, next)| *next == ' ') =>
                    {
                        compact += 1;
                    }
                    _ => {}
                },
            }
            if flow + compact > MAX_YAML_DEPTH {
                return Err(too_deep(n + 1, at + 1, format!("nested deeper than {MAX_YAML_DEPTH} levels")));
            }
            previous = c;
            if !c.is_whitespace() {
                last = Some(c);
            }
        }
    }
    Ok(())
}

/// Parses YAML text into `T` after [`check_yaml_nesting`], with errors located in `file`.
///
/// # Errors
///
/// Too deep a nesting, or what [`yaml_error`] makes of the parser's error.
pub fn from_yaml<T: serde::de::DeserializeOwned>(file: &Path, text: &str) -> Result<T, RecipeError> {
    let text = without_bom(text);
    check_yaml_nesting(file, text)?;
    serde_yaml::from_str(text).map_err(|e| not_a_mapping(file, text).unwrap_or_else(|| yaml_error(file, text, &e)))
}

/// `text` without a leading UTF-8 byte order mark, which editors on Windows write: YAML
/// allows one, and the parser read it as part of the first key (`schema` became a field it
/// did not know, and the error named another).
pub fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// The error for a document that is not a mapping, which recipes and policies are: one
/// string (a private key named by a recipe's `extends`) would otherwise come back whole in
/// serde's "invalid type" message, on the terminal and in `prov status`. `None` for a
/// mapping, or a document that does not parse (the parser's error says where).
fn not_a_mapping(file: &Path, text: &str) -> Option<RecipeError> {
    let what = match serde_yaml::from_str::<serde_yaml::Value>(text).ok()? {
        // An empty document: serde names the first missing field.
        serde_yaml::Value::Mapping(_) | serde_yaml::Value::Null => return None,
        serde_yaml::Value::String(_) => "a string",
        serde_yaml::Value::Sequence(_) => "a sequence",
        serde_yaml::Value::Bool(_) | serde_yaml::Value::Number(_) => "a scalar",
        serde_yaml::Value::Tagged(_) => "a tagged value",
    };
    Some(RecipeError::at_field(file, text, &[], format!("the document is {what}, not a mapping of fields")))
}

/// The longest error message taken from the YAML parser, in characters: its messages quote
/// the offending value, which may be anything the file holds.
const MAX_YAML_MESSAGE: usize = 200;

impl Recipe {
    /// Parses a recipe from its text; `file` is used in error messages.
    pub fn parse(file: &Path, text: &str) -> Result<Self, RecipeError> {
        let recipe: Self = from_yaml(file, text)?;
        if recipe.schema != RECIPE_SCHEMA {
            return Err(RecipeError::at_field(
                file,
                text,
                &["schema"],
                format!(
                    "unsupported recipe schema version (v{}, but only v{RECIPE_SCHEMA} is supported)",
                    recipe.schema
                ),
            ));
        }
        if recipe.seed.is_none() && recipe.extends.is_none() {
            return Err(RecipeError::at_field(file, text, &[], "missing field `seed`").with_hint(
                "give the master seed, e.g. `seed: 20250131` (a recipe that `extends` another inherits it)",
            ));
        }
        for name in recipe.sources.keys() {
            if recipe.stages.contains_key(name) {
                return Err(RecipeError::at_field(
                    file,
                    text,
                    &["stages", name.as_str()],
                    format!("`{name}` names both a source and a stage"),
                )
                .with_hint("sources and stages share one namespace; rename one of them"));
            }
        }
        Ok(recipe)
    }
}

/// Turns a `serde_yaml` error in `text` (read from `file`) into a located [`RecipeError`]:
/// line, column, the field path serde names, the source line, and a "did you mean" hint for an
/// unknown field or variant. Recipes and other YAML inputs (audit policies) share it.
pub fn yaml_error(file: &Path, text: &str, e: &serde_yaml::Error) -> RecipeError {
    let raw = e.to_string();
    // serde_yaml appends " at line L column C"; the location is reported separately, but any
    // further context ("while scanning a quoted scalar at line 3 column 7") is kept.
    let message = match e.location() {
        Some(l) => raw.replacen(&format!(" at line {} column {}", l.line(), l.column()), "", 1),
        None => raw.clone(),
    };
    let (field, message) = match message.split_once(": ") {
        Some((path, rest)) if !path.contains(' ') && !path.is_empty() => (Some(path.to_owned()), rest.to_owned()),
        _ => (None, message),
    };
    let (line, column) = e.location().map_or((1, 1), |l| (l.line(), l.column()));
    let hint = did_you_mean(&message).map(|s| format!("did you mean `{s}`?"));
    let message = match message.char_indices().nth(MAX_YAML_MESSAGE) {
        Some((cut, _)) => format!("{}…", &message[..cut]),
        None => message,
    };
    RecipeError {
        file: file.to_owned(),
        line,
        column,
        field,
        message,
        hint,
        source_line: text.lines().nth(line.saturating_sub(1)).map(str::to_owned),
    }
}

/// From serde's "unknown field `x`, expected one of `a`, `b`" (or "unknown variant"),
/// returns the expected name closest to `x`, if any is close.
pub fn did_you_mean(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `").or_else(|| message.strip_prefix("unknown variant `"))?;
    let (got, expected) = rest.split_once('`')?;
    let candidates: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    closest(got, &candidates)
}

/// Returns the candidate closest to `got` by edit distance, if it is close enough to be a typo.
pub fn closest(got: &str, candidates: &[&str]) -> Option<String> {
    candidates
        .iter()
        .map(|c| (edit_distance(got, c), *c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min()
        .map(|(_, c)| c.to_owned())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Finds the 1-based line and column of the key at `path` in a block-style YAML document
/// (flow mappings written on the parent key's line are searched too). Returns `None` when
/// the path is not there.
pub fn locate(text: &str, path: &[&str]) -> Option<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    // The line and indentation of the parent key; `None` at the document's top level.
    let mut parent: Option<(usize, usize)> = None;
    for key in path {
        if let Some((line, _)) = parent
            && let Some(col) = find_flow_key(lines[line], key)
        {
            parent = Some((line, col));
            continue;
        }
        let first = parent.map_or(0, |(line, _)| line + 1);
        let mut child_indent = None;
        let mut hit = None;
        for (i, line) in lines.iter().enumerate().skip(first) {
            let trimmed = line.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let indent = line.len() - trimmed.len();
            if parent.is_some_and(|(_, p)| indent <= p) {
                break;
            }
            // Only direct children: keys at the indentation of the block's first line.
            if *child_indent.get_or_insert(indent) != indent {
                continue;
            }
            let is_key = [format!("{key}:"), format!("\"{key}\":"), format!("'{key}':")]
                .iter()
                .any(|k| trimmed.starts_with(k.as_str()));
            if is_key {
                hit = Some((i, indent));
                break;
            }
        }
        parent = Some(hit?);
    }
    parent.map(|(line, col)| (line + 1, col + 1))
}

fn find_flow_key(line: &str, key: &str) -> Option<usize> {
    let open = line.find('{')?;
    let mut from = open;
    while let Some(pos) = line[from..].find(key) {
        let at = from + pos;
        let before = line[..at].trim_end();
        let after = line[at + key.len()..].trim_start();
        if (before.ends_with('{') || before.ends_with(',')) && after.starts_with(':') {
            return Some(at);
        }
        from = at + key.len();
    }
    None
}

/// Converts YAML parameters to JSON for canonical encoding, refusing what has no canonical
/// form (NaN, infinities, non-string keys, tags). `path` names the field in errors.
pub fn yaml_to_json(value: &serde_yaml::Value, path: &mut Vec<String>) -> Result<Value, (Vec<String>, String)> {
    use serde_yaml::Value as Y;
    Ok(match value {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(*b),
        Y::Number(n) => {
            if let Some(u) = n.as_u64() {
                Value::from(u)
            } else if let Some(i) = n.as_i64() {
                Value::from(i)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if !f.is_finite() {
                    return Err((path.clone(), format!("`{n}` has no canonical form: use a finite number")));
                }
                Value::from(f)
            }
        }
        Y::String(s) => Value::String(s.clone()),
        Y::Sequence(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                path.push(i.to_string());
                out.push(yaml_to_json(item, path)?);
                path.pop();
            }
            Value::Array(out)
        }
        Y::Mapping(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                let Y::String(k) = k else {
                    return Err((path.clone(), "mapping keys must be strings".into()));
                };
                path.push(k.clone());
                out.insert(k.clone(), yaml_to_json(v, path)?);
                path.pop();
            }
            Value::Object(out)
        }
        Y::Tagged(t) => return Err((path.clone(), format!("YAML tags are not supported: `{}`", t.tag))),
    })
}

#[cfg(test)]
mod tests {
    /// A byte order mark before the first key is not part of it: the recipe reads as without.
    #[test]
    fn a_byte_order_mark_is_not_part_of_the_first_key() {
        let text = "schema: 1\nname: bom\nseed: 1\n";
        let file = Path::new("bom.yaml");
        assert_eq!(Recipe::parse(file, &format!("\u{feff}{text}")).unwrap(), Recipe::parse(file, text).unwrap());
    }

    /// 100,000 levels of nesting are refused by the scan, at the 65th level, naming where.
    #[test]
    fn deep_nesting_is_refused_before_parsing() {
        let file = Path::new("deep.yaml");
        let n = 100_000;
        let flow = format!("schema: 1\nname: x\nseed: 1\nstages:\n  a: {}{}\n", "[".repeat(n), "]".repeat(n));
        let e = Recipe::parse(file, &flow).unwrap_err();
        assert_eq!((e.line, e.column), (5, 70), "the 65th `[`: {e:?}");
        assert!(e.message.contains("nested deeper than 64 levels"), "{e:?}");
        let compact =
            format!("schema: 1\nname: x\nseed: 1\nstages:\n  a:\n    params:\n      x:\n{}y\n", "- ".repeat(n));
        assert!(Recipe::parse(file, &compact).unwrap_err().message.contains("nested deeper"));
        let indented = format!("a:\n{}b: 1\n", " ".repeat(2000));
        assert!(check_yaml_nesting(file, &indented).unwrap_err().message.contains("indented 2000 columns"));
        // A "billion laughs" of aliases: each level repeats the one before nine times, 9^9
        // strings in all if expanded. The parser refuses to expand that many.
        let mut laughs = String::from(
            "schema: 1\nname: x\nseed: 1\nstages:\n  a:\n    kind: shard\n    params:\n      l0: &l0 lol\n",
        );
        let levels: Vec<String> = (1..=9)
            .map(|level| format!("      l{level}: &l{level} [{}]\n", vec![format!("*l{}", level - 1); 9].join(", ")))
            .collect();
        laughs.push_str(&levels.concat());
        let e = Recipe::parse(file, &laughs).unwrap_err();
        assert!(e.message.contains("repetition limit exceeded"), "{e:?}");
        // An apostrophe inside a plain value opens no quote that would hide what follows.
        let hidden = format!("note: a 'b\nstages:\n  a: {}{}\n", "[".repeat(n), "]".repeat(n));
        assert!(check_yaml_nesting(file, &hidden).unwrap_err().message.contains("nested deeper"));
        let hidden = format!("note: it's \"x\nstages:\n  a: {}{}\n", "[".repeat(n), "]".repeat(n));
        assert!(check_yaml_nesting(file, &hidden).unwrap_err().message.contains("nested deeper"));
        // What looks like nesting inside quotes and comments is text.
        let quoted = format!("a: '{0}'\nb: \"{0}\"\nc: it's [1] # {0}\n", "[".repeat(200));
        check_yaml_nesting(file, &quoted).unwrap();
        check_yaml_nesting(file, &format!("a: {}1{}\n", "[".repeat(64), "]".repeat(64))).unwrap();
    }

    use super::*;

    const GOOD: &str = "\
schema: 1
name: demo
seed: 42
sources:
  corpus:
    path: data/docs.jsonl
    license: MIT
stages:
  shard:
    kind: shard
    inputs: {docs: corpus}
    params:
      shards: 4
  sample:
    kind: sample
    inputs:
      docs: shard
";

    fn parse(text: &str) -> Result<Recipe, RecipeError> {
        Recipe::parse(Path::new("r.yaml"), text)
    }

    #[test]
    fn a_good_recipe_parses() {
        let r = parse(GOOD).unwrap();
        assert_eq!(r.name.as_str(), "demo");
        assert_eq!(r.stages.len(), 2);
        assert_eq!(r.stages[&"shard".parse::<Name>().unwrap()].inputs["docs"], "corpus");
    }

    #[test]
    fn a_typo_names_line_column_field_and_the_fix() {
        let bad = GOOD.replace("    params:\n", "    paramz:\n");
        let e = parse(&bad).unwrap_err();
        assert_eq!(e.line, 12, "{e}");
        assert_eq!(e.field.as_deref(), Some("stages.shard"), "{e}");
        assert!(e.message.contains("unknown field `paramz`"), "{e}");
        assert_eq!(e.hint.as_deref(), Some("did you mean `params`?"));
        assert_eq!(e.source_line.as_deref(), Some("    paramz:"));
    }

    #[test]
    fn a_wrong_type_is_located() {
        let bad = GOOD.replace("seed: 42", "seed: forty-two");
        let e = parse(&bad).unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (3, Some("seed")), "{e}");
        assert!(e.message.contains("invalid type"), "{e}");
    }

    #[test]
    fn only_a_variant_may_leave_out_the_seed() {
        let e = parse(&GOOD.replace("seed: 42\n", "")).unwrap_err();
        assert!(e.message.contains("missing field `seed`"), "{e}");
        let variant = parse("schema: 1\nname: v\nextends: demo.yaml\nstages: {}\n").unwrap();
        assert_eq!((variant.extends.as_deref(), variant.seed), (Some("demo.yaml"), None));
    }

    #[test]
    fn bad_names_and_clashes_are_refused() {
        let e = parse(&GOOD.replace("  sample:", "  sam.ple:")).unwrap_err();
        assert!(e.message.contains("invalid name `sam.ple`"), "{e}");
        let e = parse(&GOOD.replace("  corpus:\n", "  shard:\n")).unwrap_err();
        assert!(e.message.contains("names both a source and a stage"), "{e}");
    }

    #[test]
    fn locate_finds_block_and_flow_keys() {
        assert_eq!(locate(GOOD, &["stages", "sample", "inputs", "docs"]), Some((17, 7)));
        assert_eq!(locate(GOOD, &["stages", "shard", "inputs", "docs"]), Some((11, 14)));
        assert_eq!(locate(GOOD, &["stages", "shard", "params", "shards"]), Some((13, 7)));
        assert_eq!(locate(GOOD, &["stages", "nope"]), None);
        // A key of the same name in another block is not a match.
        assert_eq!(locate(GOOD, &["sources", "corpus", "inputs"]), None);
    }

    #[test]
    fn yaml_numbers_without_canonical_form_are_refused() {
        let v: serde_yaml::Value = serde_yaml::from_str("a: .nan").unwrap();
        let err = yaml_to_json(&v, &mut Vec::new()).unwrap_err();
        assert_eq!(err.0, vec!["a".to_owned()]);
        let v: serde_yaml::Value = serde_yaml::from_str("a: [1, 0.5, -3, x]").unwrap();
        assert_eq!(yaml_to_json(&v, &mut Vec::new()).unwrap(), serde_json::json!({"a": [1, 0.5, -3, "x"]}));
    }

    #[test]
    fn arbitrary_text_never_panics() {
        for text in ["", ":", "[", "schema: [", "\u{0}", "stages: 3", "sources: {a: {path: 1}}", "- - -"] {
            let _ = parse(text);
        }
    }
}
