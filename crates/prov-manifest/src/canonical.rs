//! Canonical JSON: the one encoding used for hashing, storing and comparing records.
//!
//! The rules (the book's "Canonical JSON" chapter is normative and says the same):
//!
//! - UTF-8, no byte-order mark, no whitespace outside strings, no trailing newline.
//! - Object members sorted by the UTF-16 code units of their keys (RFC 8785 §3.2.3); no
//!   duplicate keys.
//! - Strings: `"` and `\` escaped with a backslash; U+0008, U+0009, U+000A, U+000C, U+000D as
//!   `\b \t \n \f \r`; other code points below U+0020 as `\u00xx` with lowercase hex; all other
//!   characters as themselves (RFC 8785 §3.2.2.2).
//! - Integers (any value that fits `i64` or `u64`) are written in full decimal, without
//!   exponent or fraction, even beyond 2^53: a seed must survive exactly. Verifiers must not
//!   round them through doubles.
//! - Other numbers are IEEE-754 doubles written as ECMAScript's `Number.prototype.toString`
//!   writes them (RFC 8785 §3.2.2.3): shortest round-trip digits, `1e+21`, `5e-324`,
//!   `0.30000000000000004`; `-0` is written `0`. NaN and infinities are refused.
//!
//! Readers reject bytes that are not canonical: parsing and re-encoding must give the same
//! bytes, so a record has exactly one encoding and one name.

use std::fmt::Write as _;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A value that cannot be encoded canonically.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EncodeError {
    /// Serde refused the value (for example a non-finite [`Finite`]).
    #[error("cannot encode record: {0}")]
    Serde(String),
}

/// Bytes that are not a canonical record.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// Not JSON at all.
    #[error("not valid JSON at line {line}, column {column}: {message}")]
    Syntax {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the parser said.
        message: String,
    },
    /// JSON, but not in canonical form (whitespace, key order, duplicates, number form).
    #[error("not canonical JSON: differs from its canonical form at byte {offset}")]
    NotCanonical {
        /// First byte offset that differs.
        offset: usize,
    },
    /// Canonical JSON of the wrong shape for the record.
    #[error("invalid record: {0}")]
    Shape(String),
}

/// A finite `f64`: the only float type allowed in records, since NaN and infinities have no
/// canonical form.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Finite(f64);

impl Finite {
    /// Returns `Some` when `v` is finite.
    pub fn new(v: f64) -> Option<Self> {
        v.is_finite().then_some(Self(v))
    }
    /// Returns the value.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl Serialize for Finite {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0.is_finite() {
            s.serialize_f64(self.0)
        } else {
            Err(serde::ser::Error::custom("NaN and infinities have no canonical encoding"))
        }
    }
}

impl<'de> serde::Deserialize<'de> for Finite {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        Self::new(v).ok_or_else(|| serde::de::Error::custom("NaN and infinities are refused"))
    }
}

/// Encodes a serialisable value as canonical JSON.
pub fn to_canonical_bytes<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, EncodeError> {
    let v = serde_json::to_value(value).map_err(|e| EncodeError::Serde(e.to_string()))?;
    Ok(encode_value(&v))
}

/// Encodes a JSON value canonically.
pub fn encode_value(value: &Value) -> Vec<u8> {
    let mut out = String::new();
    write_value(&mut out, value);
    out.into_bytes()
}

/// Decodes canonical JSON into `T`, rejecting input that is not canonical.
pub fn from_canonical_bytes<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    let value = parse_canonical(bytes)?;
    serde_json::from_value(value).map_err(|e| DecodeError::Shape(e.to_string()))
}

/// Parses canonical JSON into a value, rejecting input that is not canonical.
pub fn parse_canonical(bytes: &[u8]) -> Result<Value, DecodeError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| DecodeError::Syntax {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let again = encode_value(&value);
    if again != bytes {
        let offset = again.iter().zip(bytes).position(|(a, b)| a != b).unwrap_or(again.len().min(bytes.len()));
        return Err(DecodeError::NotCanonical { offset });
    }
    Ok(value)
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write_value(out, v);
            }
            out.push('}');
        }
    }
}

fn write_number(out: &mut String, n: &serde_json::Number) {
    if let Some(i) = n.as_u64() {
        write!(out, "{i}").expect("writing to a String cannot fail");
    } else if let Some(i) = n.as_i64() {
        write!(out, "{i}").expect("writing to a String cannot fail");
    } else {
        // serde_json never holds a non-finite number, so as_f64 is Some and finite.
        let f = n.as_f64().unwrap_or(0.0);
        let mut buf = ryu_js::Buffer::new();
        out.push_str(buf.format_finite(f));
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => {
                write!(out, "\\u{:04x}", c as u32).expect("writing to a String cannot fail");
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn enc(v: &Value) -> String {
        String::from_utf8(encode_value(v)).unwrap()
    }

    #[test]
    fn awkward_numbers_follow_the_written_rule() {
        assert_eq!(enc(&json!(1e21)), "1e+21");
        assert_eq!(enc(&json!(1e20)), "100000000000000000000");
        assert_eq!(enc(&json!(5e-324)), "5e-324");
        assert_eq!(enc(&json!(-0.0)), "0");
        assert_eq!(enc(&json!(0.1 + 0.2)), "0.30000000000000004");
        assert_eq!(enc(&json!(0.000_001)), "0.000001");
        assert_eq!(enc(&json!(1e-7)), "1e-7");
        assert_eq!(enc(&json!(2.0)), "2");
        assert_eq!(enc(&json!(u64::MAX)), "18446744073709551615");
        assert_eq!(enc(&json!(i64::MIN)), "-9223372036854775808");
        assert_eq!(enc(&json!(9_007_199_254_740_993_u64)), "9007199254740993");
    }

    #[test]
    fn non_finite_floats_are_refused() {
        #[derive(Serialize)]
        struct S {
            x: Finite,
        }
        assert!(Finite::new(f64::NAN).is_none());
        assert!(Finite::new(f64::INFINITY).is_none());
        let bad = S { x: Finite(f64::NAN) };
        assert!(to_canonical_bytes(&bad).is_err());
        assert_eq!(to_canonical_bytes(&S { x: Finite(0.5) }).unwrap(), b"{\"x\":0.5}");
        assert!(from_canonical_bytes::<Finite>(b"1e999").is_err());
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // In UTF-16 the emoji is the surrogate pair D83D DE00, which sorts before E000;
        // in UTF-8 byte order it would sort after U+E000.
        let v = json!({"\u{e000}": 1, "\u{1f600}": 2, "b": 3, "a": 4, "": 5});
        assert_eq!(enc(&v), "{\"\":5,\"a\":4,\"b\":3,\"\u{1f600}\":2,\"\u{e000}\":1}");
    }

    #[test]
    fn strings_escape_exactly_the_required_characters() {
        let v = json!("q\"b\\\u{8}\t\n\u{c}\r\u{1}\u{1f}\u{7f}\u{2028}é/");
        assert_eq!(enc(&v), "\"q\\\"b\\\\\\b\\t\\n\\f\\r\\u0001\\u001f\u{7f}\u{2028}é/\"");
    }

    #[test]
    fn readers_reject_non_canonical_bytes() {
        assert!(parse_canonical(br#"{"a":1,"b":2}"#).is_ok());
        for bad in [
            &br#"{"b":2,"a":1}"#[..],
            br#"{"a": 1}"#,
            br#"{"a":1,"a":1}"#,
            br#"{"a":1.0}"#,
            br#"{"a":1E2}"#,
            br#""\u0041""#,
            b"{\"a\":1}\n",
        ] {
            assert!(
                matches!(parse_canonical(bad), Err(DecodeError::NotCanonical { .. })),
                "accepted {}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(matches!(parse_canonical(b"{"), Err(DecodeError::Syntax { .. })));
    }

    fn arb_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            any::<u64>().prop_map(|i| json!(i)),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                proptest::collection::btree_map(any::<String>(), inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn canonical_parse_canonical_is_identity(v in arb_json()) {
            let once = encode_value(&v);
            let parsed = parse_canonical(&once).expect("canonical output parses as canonical");
            proptest::prop_assert_eq!(encode_value(&parsed), once);
        }
    }
}
