//! Model folders signed in the `OpenSSF` model signing format (sigstore/model-transparency,
//! the `model-signing` package, v1.0 predicate), with a private key and no online service.
//!
//! The signature is a Sigstore bundle (media type v0.3) whose DSSE envelope carries an in-toto
//! Statement: one subject, the folder's name with the SHA-256 over its files' digests (in path
//! order), and the predicate `https://model_signing/signature/v1.0`, listing every file with
//! its digest and how the folder was serialised (`files`: each regular file hashed whole,
//! symlinks refused, the listed paths ignored). The bundle's verification material names the
//! public key by the SHA-256 of its PEM, as `model-signing` does; there is no transparency log
//! entry. Verifiers accept ECDSA keys only, so signing takes a P-256 key.

use std::path::{Component, Path};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::dsse::{Envelope, IN_TOTO_PAYLOAD_TYPE};
use crate::keys::{KeyAlgorithm, PublicKey, SigningKey};
use crate::statement::{ResourceDescriptor, STATEMENT_TYPE, Statement};

/// The predicate type of a model signature.
pub const MODEL_SIGNATURE_PREDICATE: &str = "https://model_signing/signature/v1.0";
/// The Sigstore bundle media type `model-signing` writes and reads.
pub const SIGSTORE_BUNDLE_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
/// Where the signature is written: inside the folder, and ignored by the serialisation, as
/// the `model_signing` command line does with its default name.
pub const SIGNATURE_FILE: &str = "model.sig";
/// The paths `model-signing` ignores by default (and records as ignored).
const GIT_PATHS: [&str; 4] = [".git", ".gitattributes", ".github", ".gitignore"];

/// Why a model folder cannot be signed or does not verify.
#[derive(Debug, thiserror::Error)]
pub enum ModelSigningError {
    /// The key cannot sign model signatures.
    #[error("model signatures are ECDSA (NIST curves) only, and this is an {0} key")]
    KeyAlgorithm(&'static str),
    /// The signature file is not a model signature.
    #[error("not a model signature: {0}")]
    Bundle(String),
    /// The folder cannot be read.
    #[error("{0}")]
    Folder(String),
    /// The folder holds what a model signature cannot cover: a symlink, a special file, a
    /// name that is not UTF-8.
    #[error("{0}")]
    Unsupported(String),
    /// The folder's files are not the signed ones.
    #[error("the folder is not the signed model: {}", .0.join("; "))]
    Mismatch(Vec<String>),
    /// The envelope is malformed or not signed by the keys given.
    #[error(transparent)]
    Envelope(#[from] crate::dsse::EnvelopeError),
}

/// A Sigstore bundle as `model-signing` writes it (the fields it reads; anything else is
/// refused).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Bundle {
    media_type: String,
    verification_material: VerificationMaterial,
    dsse_envelope: Envelope,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct VerificationMaterial {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    public_key: Option<PublicKeyHint>,
    #[serde(default)]
    tlog_entries: Vec<Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PublicKeyHint {
    #[serde(default)]
    hint: Option<String>,
}

/// The hint that names a public key in the bundle: the SHA-256 of its PEM.
fn key_hint(key: &PublicKey) -> String {
    hex::encode(Sha256::digest(key.to_pem().as_bytes()))
}

/// One file of a folder: its path relative to the folder (`/`-separated) and digest (hex).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderFile {
    /// The path relative to the folder.
    pub name: String,
    /// The file's digest, lowercase hex.
    pub digest: String,
}

/// One file of a folder as read: its path relative to the folder and both digests it is
/// checked by, from one read of its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashedFile {
    /// The path relative to the folder.
    pub name: String,
    /// SHA-256, lowercase hex (what model signatures list).
    pub sha256: String,
    /// BLAKE3, lowercase hex (what the store names the file by).
    pub blake3: String,
}

impl HashedFile {
    /// The digest by `algorithm` (`sha256` or `blake3`).
    fn digest(&self, algorithm: &str) -> &str {
        if algorithm == "blake3" { &self.blake3 } else { &self.sha256 }
    }
}

/// True when `rel` is one of `ignored` or inside one, component by component (Python's
/// `PurePath.is_relative_to`).
fn is_ignored(rel: &[String], ignored: &[String]) -> bool {
    ignored.iter().any(|i| {
        let parts: Vec<&str> = i.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
        !parts.is_empty() && rel.len() >= parts.len() && rel.iter().zip(&parts).all(|(a, b)| a == b)
    })
}

/// Hashes every regular file of `dir` (SHA-256 and BLAKE3 in one read), skipping the ignored
/// paths; symlinks and other kinds of file are refused, as `model-signing` refuses them without
/// `allow_symlinks`. Files come in `model-signing`'s order: by path components.
pub fn hash_folder(dir: &Path, ignored: &[String]) -> Result<Vec<HashedFile>, ModelSigningError> {
    let io = |p: &Path, e: std::io::Error| ModelSigningError::Folder(format!("{}: {e}", p.display()));
    let mut found: Vec<(Vec<String>, String, String)> = Vec::new();
    let mut pending = vec![(dir.to_path_buf(), Vec::<String>::new())];
    while let Some((at, rel)) = pending.pop() {
        for entry in fs_err::read_dir(&at).map_err(|e| io(&at, e))? {
            let entry = entry.map_err(|e| io(&at, e))?;
            let path = entry.path();
            // The kind first, ignored or not, as `model-signing` checks it: a symlink anywhere
            // in the folder is refused.
            let kind = entry.file_type().map_err(|e| io(&path, e))?;
            if !kind.is_dir() && !kind.is_file() {
                return Err(ModelSigningError::Unsupported(format!(
                    "{}: not a regular file or folder (model signatures refuse symlinks)",
                    path.display()
                )));
            }
            let name = entry.file_name().into_string().map_err(|n| {
                ModelSigningError::Unsupported(format!(
                    "{}: a file name that is not UTF-8: {}",
                    at.display(),
                    n.display()
                ))
            })?;
            let mut path_rel = rel.clone();
            path_rel.push(name);
            if is_ignored(&path_rel, ignored) {
                continue;
            }
            if kind.is_dir() {
                pending.push((path, path_rel));
            } else {
                let (sha256, blake3) = hash_file(&path).map_err(|e| io(&path, e))?;
                found.push((path_rel, sha256, blake3));
            }
        }
    }
    found.sort();
    Ok(found.into_iter().map(|(parts, sha256, blake3)| HashedFile { name: parts.join("/"), sha256, blake3 }).collect())
}

fn hash_file(path: &Path) -> std::io::Result<(String, String)> {
    use std::io::Read as _;
    let mut file = fs_err::File::open(path)?;
    let (mut sha, mut b3) = (Sha256::new(), blake3::Hasher::new());
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        sha.update(&buf[..n]);
        b3.update(&buf[..n]);
    }
    Ok((hex::encode(sha.finalize()), b3.finalize().to_hex().to_string()))
}

/// The subject's digest: SHA-256 over the files' raw digests in order.
fn root_digest<'a>(digests: impl Iterator<Item = &'a str>) -> Result<String, ModelSigningError> {
    let mut h = Sha256::new();
    for d in digests {
        let raw = hex::decode(d).map_err(|_| ModelSigningError::Bundle(format!("digest `{d}` is not hex")))?;
        h.update(raw);
    }
    Ok(hex::encode(h.finalize()))
}

/// The ignored paths Provenant signs with: the signature file and the git paths.
fn default_ignored() -> Vec<String> {
    std::iter::once(SIGNATURE_FILE).chain(GIT_PATHS).map(str::to_owned).collect()
}

/// Signs the folder `dir` with an ECDSA P-256 key: the Sigstore bundle's JSON, to be written
/// to `dir/model.sig`. Gives the bundle and the files signed.
pub fn sign_model_folder(dir: &Path, key: &SigningKey) -> Result<(Vec<u8>, Vec<HashedFile>), ModelSigningError> {
    let public = key.public();
    if public.algorithm() != KeyAlgorithm::EcdsaP256 {
        return Err(ModelSigningError::KeyAlgorithm(public.algorithm().name()));
    }
    let ignored = default_ignored();
    let files = hash_folder(dir, &ignored)?;
    let name = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "model".to_owned());
    let resources: Vec<Value> =
        files.iter().map(|f| json!({"algorithm": "sha256", "digest": f.sha256, "name": f.name})).collect();
    let mut predicate = Map::new();
    predicate.insert("resources".into(), Value::Array(resources));
    predicate.insert(
        "serialization".into(),
        json!({"method": "files", "hash_type": "sha256", "allow_symlinks": false, "ignore_paths": ignored}),
    );
    let statement = Statement {
        statement_type: STATEMENT_TYPE.into(),
        subject: vec![ResourceDescriptor {
            name,
            digest: [("sha256".to_owned(), root_digest(files.iter().map(|f| f.sha256.as_str()))?)].into(),
            ..ResourceDescriptor::default()
        }],
        predicate_type: MODEL_SIGNATURE_PREDICATE.into(),
        predicate,
    };
    let mut envelope = Envelope::sign(IN_TOTO_PAYLOAD_TYPE, &statement.to_payload(), &[key]);
    // `model-signing` names the key in the verification material, not in the signature.
    for s in &mut envelope.signatures {
        s.keyid.clear();
    }
    let bundle = Bundle {
        media_type: SIGSTORE_BUNDLE_MEDIA_TYPE.into(),
        verification_material: VerificationMaterial {
            public_key: Some(PublicKeyHint { hint: Some(key_hint(&public)) }),
            tlog_entries: Vec::new(),
        },
        dsse_envelope: envelope,
    };
    let mut bytes = serde_json::to_vec_pretty(&bundle).expect("a bundle serialises");
    bytes.push(b'\n');
    Ok((bytes, files))
}

/// What a verified model signature says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelVerified {
    /// The model's name (the signed folder's name; informative only).
    pub model: String,
    /// The key ids, of those given, that signed.
    pub signers: Vec<String>,
    /// The files the signature lists, all found with their digests.
    pub files: Vec<FolderFile>,
}

/// Whether a file's bytes look like a Sigstore bundle rather than a bare DSSE envelope.
pub fn is_sigstore_bundle(bytes: &[u8]) -> bool {
    serde_json::from_slice::<Map<String, Value>>(bytes).is_ok_and(|m| m.contains_key("mediaType"))
}

/// Verifies a model signature: the bundle's signature with `keys`, its statement, and with
/// `dir` that the folder's files (but the ignored ones) are exactly the signed ones.
pub fn verify_model_signature(
    bundle: &[u8],
    keys: &[PublicKey],
    dir: Option<&Path>,
) -> Result<ModelVerified, ModelSigningError> {
    let bundle: Bundle = serde_json::from_slice(bundle).map_err(|e| ModelSigningError::Bundle(e.to_string()))?;
    if bundle.media_type != SIGSTORE_BUNDLE_MEDIA_TYPE {
        return Err(ModelSigningError::Bundle(format!("media type `{}`", bundle.media_type)));
    }
    let verified = bundle.dsse_envelope.verify(keys)?;
    if verified.payload_type != IN_TOTO_PAYLOAD_TYPE {
        return Err(ModelSigningError::Bundle(format!("payload type `{}`", verified.payload_type)));
    }
    let statement = Statement::parse(&verified.payload).map_err(ModelSigningError::Bundle)?;
    if statement.predicate_type != MODEL_SIGNATURE_PREDICATE {
        return Err(ModelSigningError::Bundle(format!("predicate type `{}`", statement.predicate_type)));
    }
    let [subject] = statement.subject.as_slice() else {
        return Err(ModelSigningError::Bundle(format!("{} subjects where one is expected", statement.subject.len())));
    };
    let serialization = statement.predicate.get("serialization").and_then(Value::as_object);
    let field = |name: &str| serialization.and_then(|s| s.get(name));
    if field("method").and_then(Value::as_str) != Some("files") {
        return Err(ModelSigningError::Bundle(
            "only the `files` serialization is read (not `shards`, or none given)".into(),
        ));
    }
    let algorithm = field("hash_type").and_then(Value::as_str).unwrap_or_default().to_owned();
    if algorithm != "sha256" && algorithm != "blake3" {
        return Err(ModelSigningError::Bundle(format!("hash type `{algorithm}` (sha256 or blake3 are read)")));
    }
    let ignored: Vec<String> = field("ignore_paths")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    let mut files = Vec::new();
    for r in statement.predicate.get("resources").and_then(Value::as_array).into_iter().flatten() {
        let (Some(name), Some(alg), Some(digest)) = (
            r.get("name").and_then(Value::as_str),
            r.get("algorithm").and_then(Value::as_str),
            r.get("digest").and_then(Value::as_str),
        ) else {
            return Err(ModelSigningError::Bundle("a resource without name, algorithm or digest".into()));
        };
        if alg != algorithm {
            return Err(ModelSigningError::Bundle(format!("`{name}` is hashed with {alg}, not {algorithm}")));
        }
        files.push(FolderFile { name: name.to_owned(), digest: digest.to_owned() });
    }
    // The subject is a digest over the resources: a statement whose resources were edited
    // without it is inconsistent even before the folder is read.
    if subject.digest.get("sha256") != Some(&root_digest(files.iter().map(|f| f.digest.as_str()))?) {
        return Err(ModelSigningError::Bundle("the subject's digest is not the digest of the listed resources".into()));
    }
    if let Some(dir) = dir {
        if !ignored
            .iter()
            .all(|p| Path::new(p).components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir)))
        {
            return Err(ModelSigningError::Bundle("an ignored path leaves the folder".into()));
        }
        // In a folder checked against a signature, what no signature can cover means the
        // folder is not the signed one.
        let found = hash_folder(dir, &ignored).map_err(|e| match e {
            ModelSigningError::Unsupported(what) => ModelSigningError::Mismatch(vec![what]),
            other => other,
        })?;
        let mut problems = Vec::new();
        for f in &files {
            match found.iter().find(|g| g.name == f.name) {
                None => problems.push(format!("`{}` is missing", f.name)),
                Some(g) if g.digest(&algorithm) != f.digest => problems.push(format!("`{}` has other bytes", f.name)),
                Some(_) => {}
            }
        }
        for g in found.iter().filter(|g| !files.iter().any(|f| f.name == g.name)) {
            problems.push(format!("`{}` is not signed", g.name));
        }
        if !problems.is_empty() {
            return Err(ModelSigningError::Mismatch(problems));
        }
    }
    Ok(ModelVerified { model: subject.name.clone(), signers: verified.signers, files })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignoring_is_by_whole_components() {
        let rel = |s: &str| s.split('/').map(str::to_owned).collect::<Vec<_>>();
        let ignored = vec![".git".to_owned(), "model.sig".to_owned(), "sub/x".to_owned()];
        assert!(is_ignored(&rel(".git/config"), &ignored));
        assert!(is_ignored(&rel("model.sig"), &ignored));
        assert!(is_ignored(&rel("sub/x/y"), &ignored));
        assert!(!is_ignored(&rel(".github2"), &ignored));
        assert!(!is_ignored(&rel("sub/xy"), &ignored));
    }

    #[test]
    fn files_are_ordered_by_path_components_as_python_sorts_paths() {
        let dir = tempfile::tempdir().unwrap();
        fs_err::create_dir_all(dir.path().join("a")).unwrap();
        fs_err::write(dir.path().join("a/b"), b"1").unwrap();
        fs_err::write(dir.path().join("a-b"), b"2").unwrap();
        let names: Vec<String> = hash_folder(dir.path(), &[]).unwrap().into_iter().map(|f| f.name).collect();
        // As strings "a-b" < "a/b"; as paths ("a", "b") < ("a-b").
        assert_eq!(names, ["a/b", "a-b"]);
    }
}
