//! OpenSSH key files, for Ed25519 and ECDSA P-256: the `openssh-key-v1` private key format
//! (OpenSSH's `PROTOCOL.key`) and `.pub` lines, whose key blobs are SSH wire encodings (RFC
//! 4253 §6.6 for the layout, RFC 8709 for Ed25519, RFC 5656 §3.1 for ECDSA).
//!
//! Written here rather than taken from a crate because the files in the wild differ in ways a
//! strict reader refuses: `cryptography` wraps the base64 at 64 columns where OpenSSH wraps at
//! 70, and writes ECDSA scalars as minimal `mpint`s. This reader follows the format's
//! definition and checks what it defines: the magic, the repeated check word, the public key
//! stated twice, and the padding.

use base64::Engine as _;
use sha2::{Digest as _, Sha256};

const MAGIC: &[u8] = b"openssh-key-v1\0";
const ED25519: &str = "ssh-ed25519";
const ECDSA_P256: &str = "ecdsa-sha2-nistp256";

/// Why an OpenSSH key cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OpenSshError {
    /// It is protected by a passphrase.
    Encrypted,
    /// It is another algorithm.
    Unsupported(String),
    /// It is not a well-formed key.
    Invalid(String),
}

/// A public key as OpenSSH encodes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OpenSshPublic {
    /// The 32 bytes of the key.
    Ed25519([u8; 32]),
    /// The SEC1 point (65 bytes, uncompressed).
    EcdsaP256(Vec<u8>),
}

/// A private key from an `openssh-key-v1` file.
pub(crate) enum OpenSshPrivate {
    /// The 32-byte seed.
    Ed25519([u8; 32]),
    /// The scalar, 32 bytes big-endian.
    EcdsaP256([u8; 32]),
}

/// Reads SSH wire encodings.
struct Wire<'a> {
    rest: &'a [u8],
}

impl<'a> Wire<'a> {
    fn u32(&mut self) -> Result<u32, OpenSshError> {
        let (head, rest) = self.rest.split_first_chunk::<4>().ok_or_else(|| invalid("it ends early"))?;
        self.rest = rest;
        Ok(u32::from_be_bytes(*head))
    }

    fn string(&mut self) -> Result<&'a [u8], OpenSshError> {
        let len = self.u32()? as usize;
        if len > self.rest.len() {
            return Err(invalid("a length runs past its end"));
        }
        let (s, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(s)
    }

    fn text(&mut self) -> Result<&'a str, OpenSshError> {
        std::str::from_utf8(self.string()?).map_err(|_| invalid("a name is not text"))
    }
}

fn invalid(what: &str) -> OpenSshError {
    OpenSshError::Invalid(what.to_owned())
}

fn unsupported(algorithm: &str) -> OpenSshError {
    OpenSshError::Unsupported(algorithm.to_owned())
}

/// The key of a wire-encoded public key blob, read from `wire`.
fn read_public(wire: &mut Wire<'_>) -> Result<OpenSshPublic, OpenSshError> {
    match wire.text()? {
        ED25519 => {
            let key: [u8; 32] = wire.string()?.try_into().map_err(|_| invalid("an Ed25519 key is 32 bytes"))?;
            Ok(OpenSshPublic::Ed25519(key))
        }
        ECDSA_P256 => {
            if wire.text()? != "nistp256" {
                return Err(invalid("the curve is not nistp256"));
            }
            let point = wire.string()?;
            if point.len() != 65 || point[0] != 4 {
                return Err(invalid("a P-256 point is 65 bytes, uncompressed"));
            }
            Ok(OpenSshPublic::EcdsaP256(point.to_vec()))
        }
        other => Err(unsupported(other)),
    }
}

impl OpenSshPublic {
    /// The wire encoding (what `.pub` lines carry in base64, and fingerprints hash).
    pub(crate) fn blob(&self) -> Vec<u8> {
        fn string(out: &mut Vec<u8>, s: &[u8]) {
            out.extend_from_slice(&u32::try_from(s.len()).expect("short").to_be_bytes());
            out.extend_from_slice(s);
        }
        let mut out = Vec::new();
        match self {
            Self::Ed25519(k) => {
                string(&mut out, ED25519.as_bytes());
                string(&mut out, k);
            }
            Self::EcdsaP256(point) => {
                string(&mut out, ECDSA_P256.as_bytes());
                string(&mut out, b"nistp256");
                string(&mut out, point);
            }
        }
        out
    }

    /// `SHA256:` and the unpadded base64 of the SHA-256 of the blob, as `ssh-keygen -l` prints.
    pub(crate) fn fingerprint(&self) -> String {
        let hash = Sha256::digest(self.blob());
        format!("SHA256:{}", base64::engine::general_purpose::STANDARD_NO_PAD.encode(hash))
    }

    /// Reads a `.pub` line: `TYPE BASE64 [COMMENT]`, the type stated twice and equal.
    pub(crate) fn parse_line(line: &str) -> Result<Self, OpenSshError> {
        let mut fields = line.split_whitespace();
        let (Some(stated), Some(encoded)) = (fields.next(), fields.next()) else {
            return Err(invalid("a public key line is `TYPE BASE64 [COMMENT]`"));
        };
        let blob =
            base64::engine::general_purpose::STANDARD.decode(encoded).map_err(|_| invalid("the key is not base64"))?;
        let mut wire = Wire { rest: &blob };
        let key = read_public(&mut wire)?;
        if !wire.rest.is_empty() {
            return Err(invalid("bytes follow the key"));
        }
        let inner = match key {
            Self::Ed25519(_) => ED25519,
            Self::EcdsaP256(_) => ECDSA_P256,
        };
        if stated != inner {
            return Err(invalid(&format!("the line says `{stated}` but the key is `{inner}`")));
        }
        Ok(key)
    }
}

/// Reads the binary body of an `openssh-key-v1` file (the PEM's base64 decoded).
/// Gives the private key and the public key the file states (twice, equal); the caller
/// checks that the private key's own public key is that one.
pub(crate) fn parse_private(bytes: &[u8]) -> Result<(OpenSshPrivate, OpenSshPublic), OpenSshError> {
    let rest = bytes.strip_prefix(MAGIC).ok_or_else(|| invalid("it does not start with `openssh-key-v1`"))?;
    let mut wire = Wire { rest };
    let cipher = wire.text()?;
    let _kdf = wire.text()?;
    let _kdf_options = wire.string()?;
    if cipher != "none" {
        return Err(OpenSshError::Encrypted);
    }
    let count = wire.u32()?;
    if count != 1 {
        return Err(invalid(&format!("it holds {count} keys; one is expected")));
    }
    let stated = {
        let mut blob = Wire { rest: wire.string()? };
        read_public(&mut blob)?
    };
    let mut private = Wire { rest: wire.string()? };
    if private.u32()? != private.u32()? {
        return Err(invalid("its two check words differ"));
    }
    let (public, key) = match private.text()? {
        ED25519 => {
            let public: [u8; 32] = private.string()?.try_into().map_err(|_| invalid("an Ed25519 key is 32 bytes"))?;
            // OpenSSH keeps the seed followed by the public key.
            let pair: &[u8] = private.string()?;
            if pair.len() != 64 || pair[32..] != public {
                return Err(invalid("the Ed25519 private key is not its seed and public key"));
            }
            let seed: [u8; 32] = pair[..32].try_into().expect("32 bytes");
            (OpenSshPublic::Ed25519(public), OpenSshPrivate::Ed25519(seed))
        }
        ECDSA_P256 => {
            if private.text()? != "nistp256" {
                return Err(invalid("the curve is not nistp256"));
            }
            let point = private.string()?.to_vec();
            // An mpint: big-endian, a leading zero when the top bit is set, minimal length.
            let mpint = private.string()?;
            let digits = &mpint[mpint.iter().take_while(|b| **b == 0).count()..];
            if digits.len() > 32 {
                return Err(invalid("the P-256 scalar is longer than 32 bytes"));
            }
            let mut scalar = [0u8; 32];
            scalar[32 - digits.len()..].copy_from_slice(digits);
            (OpenSshPublic::EcdsaP256(point), OpenSshPrivate::EcdsaP256(scalar))
        }
        other => return Err(unsupported(other)),
    };
    if public != stated {
        return Err(invalid("the public key is stated twice, differently"));
    }
    let key = (key, stated);
    let _comment = private.string()?;
    // Padding to the cipher's block size: 1, 2, 3, …
    if !private.rest.iter().enumerate().all(|(i, b)| usize::from(*b) == i + 1) || private.rest.len() >= 255 {
        return Err(invalid("its padding is not 1, 2, 3, …"));
    }
    Ok(key)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A key `ssh-keygen -t ed25519 -N '' -C test` (OpenSSH 9.2) wrote, made for this test: the test checks the reader
    /// against the file format as OpenSSH 9.2 writes it.
    pub(crate) const OPENSSH_ED25519: &str = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\
QyNTUxOQAAACBMMHBdkmqBQkvEg7uYdwvd09/2tvo7MIJcpDCVtL1aRAAAAIjGarLUxmqy\
1AAAAAtzc2gtZWQyNTUxOQAAACBMMHBdkmqBQkvEg7uYdwvd09/2tvo7MIJcpDCVtL1aRA\
AAAECfMv501MyvhJ0DPviM8kjAjk08iuBgJvpsptK9c5sZR0wwcF2SaoFCS8SDu5h3C93T\
3/a2+jswglykMJW0vVpEAAAABHRlc3QB";

    #[test]
    fn an_ssh_keygen_ed25519_key_reads_and_a_changed_one_does_not() {
        let bytes = base64::engine::general_purpose::STANDARD.decode(OPENSSH_ED25519).unwrap();
        assert!(matches!(parse_private(&bytes), Ok((OpenSshPrivate::Ed25519(_), OpenSshPublic::Ed25519(_)))));
        // Any one byte changed in the private section (after the magic, counts and the public
        // blob) is refused or changes the key: the public key is stated twice, the check
        // words twice, and the padding is fixed.
        let mut refused = 0;
        for at in 100..bytes.len() {
            let mut changed = bytes.clone();
            changed[at] ^= 0x01;
            if parse_private(&changed).is_err() {
                refused += 1;
            }
        }
        // The seed (32 bytes), the comment (4) and a check word's copy pair (8, a change of
        // one word alone is refused) are not checkable; every other byte is.
        assert!(refused >= bytes.len() - 100 - 32 - 4 - 8, "{refused} of {}", bytes.len() - 100);
    }
}
