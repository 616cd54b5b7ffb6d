//! The one digest type: BLAKE3-256, written `blake3:<64 lowercase hex>`.

use std::fmt;
use std::str::FromStr;

/// Prefix of every digest's text form.
pub const DIGEST_PREFIX: &str = "blake3:";

/// Length of a digest in bytes.
pub const DIGEST_LEN: usize = 32;

/// A BLAKE3-256 digest of exactly some bytes.
///
/// Its text form (`Display`, `Debug`, `FromStr`, serde) is `blake3:` followed by 64 lowercase
/// hex digits, which is safe in file names and what `b3sum` prints after the prefix.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest([u8; DIGEST_LEN]);

/// Text that is not a digest.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DigestParseError {
    /// The text does not start with `blake3:`.
    #[error("digest must start with `blake3:`: `{0}`")]
    MissingPrefix(String),
    /// The hex part is not 64 lowercase hex digits.
    #[error("digest must be `blake3:` followed by 64 lowercase hex digits: `{0}`")]
    BadHex(String),
}

/// A byte slice of the wrong length for a digest.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("a digest is {DIGEST_LEN} bytes, got {0}")]
pub struct DigestLengthError(pub usize);

impl Digest {
    /// Returns the digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(*blake3::hash(bytes).as_bytes())
    }

    /// Returns the raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Returns the 64 lowercase hex digits, without prefix.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Returns the first `n` hex digits, for display only.
    pub fn short(&self) -> String {
        let mut s = self.to_hex();
        s.truncate(12);
        s
    }

    /// Parses 64 lowercase hex digits without prefix.
    pub fn from_hex(hex_digits: &str) -> Result<Self, DigestParseError> {
        let bad = || DigestParseError::BadHex(hex_digits.to_owned());
        if hex_digits.len() != 2 * DIGEST_LEN
            || !hex_digits.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(bad());
        }
        let mut out = [0u8; DIGEST_LEN];
        hex::decode_to_slice(hex_digits, &mut out).map_err(|_| bad())?;
        Ok(Self(out))
    }
}

impl From<blake3::Hash> for Digest {
    fn from(h: blake3::Hash) -> Self {
        Self(*h.as_bytes())
    }
}

impl TryFrom<&[u8]> for Digest {
    type Error = DigestLengthError;
    fn try_from(bytes: &[u8]) -> Result<Self, Self::Error> {
        let arr: [u8; DIGEST_LEN] = bytes.try_into().map_err(|_| DigestLengthError(bytes.len()))?;
        Ok(Self(arr))
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{DIGEST_PREFIX}{}", self.to_hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Digest {
    type Err = DigestParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex_digits = s.strip_prefix(DIGEST_PREFIX).ok_or_else(|| DigestParseError::MissingPrefix(s.to_owned()))?;
        Self::from_hex(hex_digits).map_err(|_| DigestParseError::BadHex(s.to_owned()))
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Incremental hasher that yields a [`Digest`].
#[derive(Default, Clone)]
pub struct Hasher(blake3::Hasher);

impl Hasher {
    /// Returns a fresh hasher.
    pub fn new() -> Self {
        Self::default()
    }
    /// Feeds bytes.
    pub fn update(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.update(bytes);
        self
    }
    /// Returns the digest of everything fed so far.
    pub fn finalize(&self) -> Digest {
        self.0.finalize().into()
    }
}

impl std::io::Write for Hasher {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_input_matches_b3sum_vector() {
        // b3sum of the empty file, from the BLAKE3 test vectors.
        let d = Digest::of(b"");
        assert_eq!(d.to_string(), "blake3:af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262");
    }

    #[test]
    fn text_round_trips_and_rejects_bad_input() {
        let d = Digest::of(b"provenant");
        let s = d.to_string();
        assert_eq!(s.parse::<Digest>().unwrap(), d);
        assert!(matches!("af13".parse::<Digest>(), Err(DigestParseError::MissingPrefix(_))));
        assert!(matches!("blake3:af13".parse::<Digest>(), Err(DigestParseError::BadHex(_))));
        let upper = s.to_uppercase().replace("BLAKE3:", "blake3:");
        assert!(upper.parse::<Digest>().is_err(), "uppercase hex is not canonical");
        assert_eq!(Digest::try_from(&[0u8; 31][..]), Err(DigestLengthError(31)));
    }

    #[test]
    fn serde_uses_the_text_form() {
        let d = Digest::of(b"x");
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(json, format!("\"{d}\""));
        let back: Digest = serde_json::from_str(&json).unwrap();
        assert_eq!(back, d);
    }
}
