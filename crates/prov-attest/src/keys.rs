//! Signing keys and public keys: Ed25519 and ECDSA P-256, read from the files OpenSSH,
//! OpenSSL and Python's `cryptography` write, and named by the key id `securesystemslib`
//! computes, so that a key has the same id in Provenant and in the in-toto tooling.
//!
//! Two algorithms, because the formats Provenant signs in ask for them: in-toto and DSSE take
//! either (Ed25519 is the default), and `OpenSSF` model signing takes only NIST curves.

use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use ed25519_dalek::pkcs8::{DecodePrivateKey as _, DecodePublicKey as _, EncodePrivateKey as _, EncodePublicKey as _};
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use p256::elliptic_curve::sec1::ToEncodedPoint as _;
use p256::pkcs8::LineEnding;
use sha2::{Digest as _, Sha256};

use crate::openssh::{self, OpenSshError, OpenSshPrivate, OpenSshPublic};

/// A signature algorithm Provenant signs and verifies with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAlgorithm {
    /// Ed25519 (RFC 8032): signatures of 64 bytes.
    Ed25519,
    /// ECDSA over NIST P-256 with SHA-256: DER-encoded signatures, as `cryptography` and
    /// OpenSSL write them.
    EcdsaP256,
}

impl KeyAlgorithm {
    /// The name used on the command line and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ed25519 => "ed25519",
            Self::EcdsaP256 => "ecdsa-p256",
        }
    }

    /// `securesystemslib`'s `keytype`.
    fn sslib_keytype(self) -> &'static str {
        match self {
            Self::Ed25519 => "ed25519",
            Self::EcdsaP256 => "ecdsa",
        }
    }

    /// `securesystemslib`'s `scheme`.
    fn sslib_scheme(self) -> &'static str {
        match self {
            Self::Ed25519 => "ed25519",
            Self::EcdsaP256 => "ecdsa-sha2-nistp256",
        }
    }
}

impl std::str::FromStr for KeyAlgorithm {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ed25519" => Ok(Self::Ed25519),
            "ecdsa-p256" => Ok(Self::EcdsaP256),
            other => Err(format!("unknown key type `{other}` (ed25519 or ecdsa-p256)")),
        }
    }
}

/// A key file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file cannot be read.
    #[error("{}: {source}", path.display())]
    Unreadable {
        /// The key file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a key Provenant reads.
    #[error("{}: {message}", path.display())]
    Format {
        /// The key file.
        path: PathBuf,
        /// What is wrong.
        message: String,
        /// What to do about it.
        hint: &'static str,
    },
    /// A key pair cannot be written.
    #[error("{}: {message}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl KeyError {
    /// What to do about it, when there is something to say.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            Self::Format { hint, .. } => Some(hint),
            Self::Unreadable { .. } | Self::Write { .. } => None,
        }
    }

    fn format(path: &Path, message: impl Into<String>, hint: &'static str) -> Self {
        Self::Format { path: path.to_owned(), message: message.into(), hint }
    }
}

const HINT_FORMATS: &str = "Provenant reads Ed25519 and ECDSA P-256 keys: private keys as unencrypted PKCS#8 PEM \
     (`-----BEGIN PRIVATE KEY-----`), SEC1 PEM (`-----BEGIN EC PRIVATE KEY-----`) or OpenSSH \
     (`-----BEGIN OPENSSH PRIVATE KEY-----`); public keys as PEM (`-----BEGIN PUBLIC KEY-----`) or \
     an OpenSSH `.pub` line; `prov attest --generate-key FILE` makes a pair";

const HINT_ENCRYPTED: &str = "Provenant does not ask for passphrases: export an unencrypted copy for signing \
     (`ssh-keygen -p -N '' -f COPY` or `openssl pkey -in KEY -out COPY`) and keep it where only you can read it";

/// A public key: what verifies signatures.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    inner: PublicInner,
}

#[derive(Clone, PartialEq, Eq)]
enum PublicInner {
    Ed25519(ed25519_dalek::VerifyingKey),
    EcdsaP256(p256::ecdsa::VerifyingKey),
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({} {})", self.algorithm().name(), self.keyid())
    }
}

impl PublicKey {
    /// The key's algorithm.
    pub fn algorithm(&self) -> KeyAlgorithm {
        match self.inner {
            PublicInner::Ed25519(_) => KeyAlgorithm::Ed25519,
            PublicInner::EcdsaP256(_) => KeyAlgorithm::EcdsaP256,
        }
    }

    /// The key as `SubjectPublicKeyInfo` PEM (`-----BEGIN PUBLIC KEY-----`, LF line ends, a
    /// final newline), as `cryptography` and OpenSSL write it.
    pub fn to_pem(&self) -> String {
        match &self.inner {
            PublicInner::Ed25519(k) => k.to_public_key_pem(LineEnding::LF),
            PublicInner::EcdsaP256(k) => p256::PublicKey::from(k).to_public_key_pem(LineEnding::LF),
        }
        .expect("a valid public key encodes")
    }

    /// `securesystemslib`'s `keyval.public`: the raw key in hex for Ed25519, the PEM for ECDSA.
    fn sslib_public(&self) -> String {
        match &self.inner {
            PublicInner::Ed25519(k) => hex::encode(k.as_bytes()),
            PublicInner::EcdsaP256(_) => self.to_pem(),
        }
    }

    /// The key id: SHA-256 of the canonical JSON of `{"keytype", "keyval": {"public"},
    /// "scheme"}`, in hex, which is the default id `securesystemslib` (and so in-toto and TUF)
    /// gives the same key.
    pub fn keyid(&self) -> String {
        let alg = self.algorithm();
        // OLPC canonical JSON, which `securesystemslib` uses: keys sorted, no white space, and
        // only `"` and `\` escaped in strings (a PEM's newlines stay raw).
        let canonical = format!(
            r#"{{"keytype":{},"keyval":{{"public":{}}},"scheme":{}}}"#,
            olpc_string(alg.sslib_keytype()),
            olpc_string(&self.sslib_public()),
            olpc_string(alg.sslib_scheme())
        );
        hex::encode(Sha256::digest(canonical.as_bytes()))
    }

    /// The key as OpenSSH names it: `SHA256:` and the unpadded base64 of the SHA-256 of its
    /// wire encoding, which `ssh-keygen -l` prints.
    pub fn openssh_fingerprint(&self) -> String {
        let key = match &self.inner {
            PublicInner::Ed25519(k) => OpenSshPublic::Ed25519(k.to_bytes()),
            PublicInner::EcdsaP256(k) => {
                OpenSshPublic::EcdsaP256(p256::PublicKey::from(k).to_encoded_point(false).as_bytes().to_vec())
            }
        };
        key.fingerprint()
    }

    /// True when `signature` is this key's signature of `message`. Ed25519 signatures are
    /// checked strictly (no small-order keys, canonical encodings); ECDSA signatures are DER.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        match &self.inner {
            PublicInner::Ed25519(k) => {
                ed25519_dalek::Signature::from_slice(signature).is_ok_and(|sig| k.verify_strict(message, &sig).is_ok())
            }
            PublicInner::EcdsaP256(k) => {
                p256::ecdsa::Signature::from_der(signature).is_ok_and(|sig| k.verify(message, &sig).is_ok())
            }
        }
    }

    /// Reads a public key file: PEM `SubjectPublicKeyInfo` or an OpenSSH `.pub` line.
    pub fn read(path: &Path) -> Result<Self, KeyError> {
        let text = read_key_text(path)?;
        Self::parse(path, &text)
    }

    /// Parses the text of a public key file; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, KeyError> {
        let trimmed = first_pem_block(text.trim_start());
        match pem_label(trimmed) {
            Some("PUBLIC KEY") => {
                if let Ok(k) = ed25519_dalek::VerifyingKey::from_public_key_pem(trimmed) {
                    return Ok(Self { inner: PublicInner::Ed25519(k) });
                }
                if let Ok(k) = p256::PublicKey::from_public_key_pem(trimmed) {
                    return Ok(Self { inner: PublicInner::EcdsaP256(k.into()) });
                }
                Err(KeyError::format(path, "a public key, but not an Ed25519 or ECDSA P-256 one", HINT_FORMATS))
            }
            Some(label) if label.contains("PRIVATE KEY") => Err(KeyError::format(
                path,
                "this is a private key; verification takes the public key",
                "give the public half (`FILE.pub` beside a key `prov attest --generate-key` made)",
            )),
            Some(label) => {
                Err(KeyError::format(path, format!("a PEM `{label}`, not a key Provenant reads"), HINT_FORMATS))
            }
            None if trimmed.starts_with("ssh-") || trimmed.starts_with("ecdsa-") => {
                let key = OpenSshPublic::parse_line(trimmed.lines().next().unwrap_or_default())
                    .map_err(|e| openssh_error(path, e, "public"))?;
                Self::from_openssh(path, key)
            }
            None => Err(KeyError::format(path, "not a PEM public key nor an OpenSSH public key", HINT_FORMATS)),
        }
    }

    fn from_openssh(path: &Path, key: OpenSshPublic) -> Result<Self, KeyError> {
        match key {
            OpenSshPublic::Ed25519(k) => ed25519_dalek::VerifyingKey::from_bytes(&k)
                .map(|k| Self { inner: PublicInner::Ed25519(k) })
                .map_err(|e| KeyError::format(path, format!("not a valid Ed25519 key: {e}"), HINT_FORMATS)),
            OpenSshPublic::EcdsaP256(point) => p256::ecdsa::VerifyingKey::from_sec1_bytes(&point)
                .map(|k| Self { inner: PublicInner::EcdsaP256(k) })
                .map_err(|e| KeyError::format(path, format!("not a valid P-256 point: {e}"), HINT_FORMATS)),
        }
    }
}

/// A private key: what signs.
pub struct SigningKey {
    inner: SigningInner,
}

enum SigningInner {
    Ed25519(ed25519_dalek::SigningKey),
    EcdsaP256(p256::ecdsa::SigningKey),
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the secret.
        write!(f, "SigningKey({} {})", self.public().algorithm().name(), self.public().keyid())
    }
}

impl SigningKey {
    /// A new key from the operating system's random source.
    pub fn generate(algorithm: KeyAlgorithm) -> Self {
        let mut rng = rand_core::OsRng;
        let inner = match algorithm {
            KeyAlgorithm::Ed25519 => SigningInner::Ed25519(ed25519_dalek::SigningKey::generate(&mut rng)),
            KeyAlgorithm::EcdsaP256 => SigningInner::EcdsaP256(p256::ecdsa::SigningKey::random(&mut rng)),
        };
        Self { inner }
    }

    /// The public half.
    pub fn public(&self) -> PublicKey {
        public_of(&self.inner)
    }

    /// Signs `message`: Ed25519's 64 bytes, or ECDSA's DER encoding. Both are deterministic
    /// (Ed25519 by construction, ECDSA by RFC 6979 nonces), so the same key signs the same
    /// bytes the same way.
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        match &self.inner {
            SigningInner::Ed25519(k) => k.sign(message).to_bytes().to_vec(),
            SigningInner::EcdsaP256(k) => {
                let sig: p256::ecdsa::Signature = k.sign(message);
                sig.to_der().as_bytes().to_vec()
            }
        }
    }

    /// The key as unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`).
    pub fn to_pkcs8_pem(&self) -> String {
        let pem = match &self.inner {
            // PKCS#8 v1 (RFC 5208, no public key inside), as OpenSSL writes it: `cryptography`
            // refuses the v2 form that `ed25519-dalek` writes by default.
            SigningInner::Ed25519(k) => {
                ed25519_dalek::pkcs8::KeypairBytes { secret_key: k.to_bytes(), public_key: None }
                    .to_pkcs8_pem(LineEnding::LF)
            }
            SigningInner::EcdsaP256(k) => p256::SecretKey::from(k).to_pkcs8_pem(LineEnding::LF),
        }
        .expect("a valid private key encodes");
        pem.as_str().to_owned()
    }

    /// Reads a private key file: PKCS#8 PEM, SEC1 PEM (P-256) or OpenSSH, unencrypted.
    pub fn read(path: &Path) -> Result<Self, KeyError> {
        let text = read_key_text(path)?;
        Self::parse(path, &text)
    }

    /// Parses the text of a private key file; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, KeyError> {
        let trimmed = first_pem_block(text.trim_start());
        let inner = match pem_label(trimmed) {
            Some("PRIVATE KEY") => {
                if let Ok(k) = ed25519_dalek::SigningKey::from_pkcs8_pem(trimmed) {
                    SigningInner::Ed25519(k)
                } else if let Ok(k) = p256::SecretKey::from_pkcs8_pem(trimmed) {
                    SigningInner::EcdsaP256(k.into())
                } else {
                    return Err(KeyError::format(
                        path,
                        "a PKCS#8 private key, but not an Ed25519 or ECDSA P-256 one",
                        HINT_FORMATS,
                    ));
                }
            }
            Some("EC PRIVATE KEY") => {
                let k = p256::SecretKey::from_sec1_pem(trimmed)
                    .map_err(|_| KeyError::format(path, "a SEC1 EC private key, but not a P-256 one", HINT_FORMATS))?;
                SigningInner::EcdsaP256(k.into())
            }
            Some("OPENSSH PRIVATE KEY") => Self::from_openssh(path, trimmed)?,
            Some("ENCRYPTED PRIVATE KEY") => {
                return Err(KeyError::format(path, "the private key is encrypted", HINT_ENCRYPTED));
            }
            Some("PUBLIC KEY") => {
                return Err(KeyError::format(
                    path,
                    "this is a public key; signing takes the private key",
                    "give the private key (the file without `.pub`)",
                ));
            }
            Some(label) => {
                return Err(KeyError::format(
                    path,
                    format!("a PEM `{label}`, not a key Provenant reads"),
                    HINT_FORMATS,
                ));
            }
            None if trimmed.starts_with("ssh-") || trimmed.starts_with("ecdsa-") => {
                return Err(KeyError::format(
                    path,
                    "this is an OpenSSH public key; signing takes the private key",
                    "give the private key (the file without `.pub`)",
                ));
            }
            None => return Err(KeyError::format(path, "not a PEM or OpenSSH private key", HINT_FORMATS)),
        };
        Ok(Self { inner })
    }

    fn from_openssh(path: &Path, text: &str) -> Result<SigningInner, KeyError> {
        let body: String = text
            .lines()
            .map(str::trim)
            .skip_while(|l| !l.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----"))
            .skip(1)
            .take_while(|l| !l.starts_with("-----END OPENSSH PRIVATE KEY-----"))
            .collect();
        let bytes = b64_decode(&body).ok_or_else(|| {
            KeyError::format(path, "not a valid OpenSSH private key: its body is not base64", HINT_FORMATS)
        })?;
        let (private, stated) = openssh::parse_private(&bytes).map_err(|e| openssh_error(path, e, "private"))?;
        let inner = match private {
            OpenSshPrivate::Ed25519(seed) => SigningInner::Ed25519(ed25519_dalek::SigningKey::from_bytes(&seed)),
            OpenSshPrivate::EcdsaP256(scalar) => p256::SecretKey::from_slice(&scalar)
                .map(|k| SigningInner::EcdsaP256(k.into()))
                .map_err(|e| KeyError::format(path, format!("not a valid P-256 private key: {e}"), HINT_FORMATS))?,
        };
        // The file states the public key beside the private one: a file whose public key is
        // not the private key's was edited, and signing with it would name a key that did
        // not sign.
        if public_of(&inner) != PublicKey::from_openssh(path, stated)? {
            return Err(KeyError::format(
                path,
                "the public key stated in the file is not the private key's",
                "the file was edited or damaged; use the key as ssh-keygen wrote it",
            ));
        }
        Ok(inner)
    }

    /// Writes a new key pair: `path` (PKCS#8 PEM, readable by its owner only) and `path.pub`
    /// (PEM). Refuses to overwrite either file.
    pub fn write_pair(&self, path: &Path) -> Result<PathBuf, KeyError> {
        let public_path = public_path_of(path);
        for p in [path, public_path.as_path()] {
            if p.exists() {
                return Err(KeyError::Write {
                    path: p.to_owned(),
                    message: "exists already; refusing to overwrite a key".into(),
                });
            }
        }
        write_new(path, self.to_pkcs8_pem().as_bytes(), 0o600)?;
        write_new(&public_path, self.public().to_pem().as_bytes(), 0o644)?;
        Ok(public_path)
    }
}

fn openssh_error(path: &Path, e: OpenSshError, half: &str) -> KeyError {
    match e {
        OpenSshError::Encrypted => KeyError::format(path, "the private key is encrypted", HINT_ENCRYPTED),
        OpenSshError::Unsupported(alg) => KeyError::format(
            path,
            format!("an OpenSSH `{alg}` key; Provenant signs with Ed25519 or ECDSA P-256"),
            HINT_FORMATS,
        ),
        OpenSshError::Invalid(why) => {
            KeyError::format(path, format!("not a valid OpenSSH {half} key: {why}"), HINT_FORMATS)
        }
    }
}

fn public_of(inner: &SigningInner) -> PublicKey {
    let inner = match inner {
        SigningInner::Ed25519(k) => PublicInner::Ed25519(k.verifying_key()),
        SigningInner::EcdsaP256(k) => PublicInner::EcdsaP256(*k.verifying_key()),
    };
    PublicKey { inner }
}

/// `KEY.pub` beside `KEY`.
pub fn public_path_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), KeyError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let err = |e: std::io::Error| KeyError::Write { path: path.to_owned(), message: e.to_string() };
    // `create_new`: never replace a key that appeared meanwhile; the mode is set at creation,
    // so the private key is never readable by others, not even for a moment.
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(path).map_err(err)?;
    file.write_all(bytes).map_err(err)?;
    file.sync_all().map_err(err)
}

/// The largest key file read: a PEM or OpenSSH key is a few kilobytes.
const MAX_KEY_BYTES: u64 = 64 << 10;

/// Reads a key file: a regular file, looked at before it is opened (a policy handed over can
/// name a FIFO, which would wait for a writer, or `/dev/zero`), of at most [`MAX_KEY_BYTES`].
fn read_key_text(path: &Path) -> Result<String, KeyError> {
    use std::io::Read as _;
    let unreadable = |source| KeyError::Unreadable { path: path.to_owned(), source };
    let meta = fs_err::metadata(path).map_err(unreadable)?;
    if !meta.is_file() {
        return Err(KeyError::format(path, "not a regular file: a key file is PEM or OpenSSH text", HINT_FORMATS));
    }
    if meta.len() > MAX_KEY_BYTES {
        return Err(KeyError::format(path, format!("{} bytes: larger than any key file", meta.len()), HINT_FORMATS));
    }
    let mut bytes = Vec::new();
    fs_err::File::open(path).and_then(|f| f.take(MAX_KEY_BYTES).read_to_end(&mut bytes)).map_err(unreadable)?;
    String::from_utf8(bytes)
        .map_err(|_| KeyError::format(path, "not text: a key file is PEM or OpenSSH text", HINT_FORMATS))
}

/// The first PEM block of a text that starts with one (through its `-----END …-----` line):
/// what follows, a blank line or a second block, is not part of the key, as OpenSSL and
/// `cryptography` read it.
fn first_pem_block(text: &str) -> &str {
    let Some(label) = pem_label(text) else { return text };
    let end = format!("-----END {label}-----");
    text.find(&end).map_or(text, |at| &text[..at + end.len()])
}

/// The label of the PEM block the text starts with.
fn pem_label(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("-----BEGIN ")?;
    let end = rest.find("-----")?;
    Some(&rest[..end])
}

/// A string in OLPC canonical JSON: only `"` and `\` are escaped.
fn olpc_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Standard base64 with padding, as DSSE and the Sigstore bundle write it.
pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decodes standard or URL-safe base64, with or without padding, as the DSSE specification
/// asks of verifiers.
pub(crate) fn b64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD].iter().find_map(|e| e.decode(s).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key path a policy names is read only when it is a regular file of key size: a
    /// FIFO (which hung `prov audit`, a review found) and `/dev/zero` are refused at once.
    #[test]
    fn only_a_regular_file_of_key_size_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("alice.pub");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let big = dir.path().join("big.pub");
        fs_err::write(&big, vec![b'a'; 100 << 10]).unwrap();
        for (path, said) in [
            (fifo.as_path(), "not a regular file"),
            (Path::new("/dev/zero"), "not a regular file"),
            (big.as_path(), "larger than any key file"),
        ] {
            let Err(e) = PublicKey::read(path) else { panic!("{} was read", path.display()) };
            assert!(e.to_string().contains(said), "{}: {e}", path.display());
        }
    }

    #[test]
    fn keys_round_trip_through_pem_and_sign_what_they_verify() {
        for alg in [KeyAlgorithm::Ed25519, KeyAlgorithm::EcdsaP256] {
            let key = SigningKey::generate(alg);
            let again = SigningKey::parse(Path::new("k"), &key.to_pkcs8_pem()).unwrap();
            assert_eq!(again.public(), key.public());
            let public = PublicKey::parse(Path::new("k.pub"), &key.public().to_pem()).unwrap();
            let sig = key.sign(b"message");
            assert!(public.verifies(b"message", &sig));
            assert!(!public.verifies(b"messagf", &sig));
            let other = SigningKey::generate(alg).public();
            assert!(!other.verifies(b"message", &sig));
            assert_ne!(other.keyid(), public.keyid());
        }
    }

    #[test]
    fn signing_is_deterministic() {
        for alg in [KeyAlgorithm::Ed25519, KeyAlgorithm::EcdsaP256] {
            let key = SigningKey::generate(alg);
            assert_eq!(key.sign(b"m"), key.sign(b"m"));
        }
    }

    #[test]
    fn a_private_key_is_refused_where_a_public_key_is_asked_and_back() {
        let key = SigningKey::generate(KeyAlgorithm::Ed25519);
        let e = PublicKey::parse(Path::new("k"), &key.to_pkcs8_pem()).unwrap_err();
        assert!(e.to_string().contains("this is a private key"), "{e}");
        let e = SigningKey::parse(Path::new("k.pub"), &key.public().to_pem()).unwrap_err();
        assert!(e.to_string().contains("this is a public key"), "{e}");
    }

    #[test]
    fn what_follows_the_first_pem_block_is_not_the_key() {
        let key = SigningKey::generate(KeyAlgorithm::EcdsaP256);
        let public = key.public().to_pem();
        let with_blank = format!("{public}\n\n");
        assert_eq!(PublicKey::parse(Path::new("k"), &with_blank).unwrap(), key.public());
        let two_blocks = format!("{}{public}", key.to_pkcs8_pem());
        assert_eq!(SigningKey::parse(Path::new("k"), &two_blocks).unwrap().public(), key.public());
    }

    /// An OpenSSH file whose stated public key (in both places it is stated) is not the
    /// private key's: ssh-keygen's Ed25519 key with another key's public half written in.
    #[test]
    fn an_openssh_key_whose_public_half_is_another_keys_is_refused() {
        use base64::engine::general_purpose::STANDARD;
        let body: String = crate::openssh::tests::OPENSSH_ED25519.to_owned();
        let mut bytes = STANDARD.decode(&body).unwrap();
        let good = ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]).verifying_key().to_bytes();
        // The public key is at three places: the public blob, the private section, and the
        // second half of the 64-byte private key; replace it everywhere.
        let original: [u8; 32] = {
            let at = bytes.windows(11).position(|w| w == b"ssh-ed25519").unwrap() + 11 + 4;
            bytes[at..at + 32].try_into().unwrap()
        };
        let mut i = 0;
        while let Some(at) = bytes[i..].windows(32).position(|w| w == original) {
            bytes[i + at..i + at + 32].copy_from_slice(&good);
            i += at + 32;
        }
        let pem = format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n",
            STANDARD.encode(&bytes)
        );
        let e = SigningKey::parse(Path::new("k"), &pem).unwrap_err();
        assert!(e.to_string().contains("not the private key's"), "{e}");
    }

    #[test]
    fn olpc_strings_escape_only_quotes_and_backslashes() {
        assert_eq!(olpc_string("a\"b\\c\nd"), "\"a\\\"b\\\\c\nd\"");
    }
}
