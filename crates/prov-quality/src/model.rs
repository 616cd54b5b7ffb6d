//! The scorer a `quality-train` stage pins: its feature settings and ridge model, as a text
//! file an independent program can read and apply.
//!
//! ```text
//! prov-quality 1
//! n_features 1024
//! min_n 1
//! max_n 4
//! intercept 2.5e0
//! 1.25e-1
//! -3e-2
//! …
//! ```
//!
//! UTF-8, `\n` after every line: the magic line, the three feature settings, the intercept,
//! then exactly `n_features` weights, one per line in bucket order. Numbers are written as
//! Rust's `{:e}` writes them (the shortest decimal that reads back to the same double, with
//! an exponent), so Python's `float()` reads the same bits. Only that canonical form is read.
//! A document's score is the intercept plus the dot product of its features
//! ([`crate::features`]) with the weights, clipped to `0..=5`.

use std::fmt::Write as _;

use crate::features::HashingVectorizer;
use crate::ridge::RidgeModel;

/// The first line.
pub const MAGIC: &str = "prov-quality 1";

/// The most feature buckets a scorer has (`quality-train` holds a dense square of them).
pub const MAX_FEATURES: u32 = 4096;

/// The lowest and highest score.
pub const SCALE: (f64, f64) = (0.0, 5.0);

/// A pinned scorer.
#[derive(Debug, Clone, PartialEq)]
pub struct Scorer {
    /// The feature map.
    pub features: HashingVectorizer,
    /// The regression.
    pub model: RidgeModel,
}

/// Why a model file does not read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("line {line}: {message}")]
pub struct ModelError {
    /// The line (from 1).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl Scorer {
    /// The score of `text` before clipping, and after.
    pub fn score(&self, text: &str) -> (f64, f64) {
        let raw = self.model.predict(&self.features.transform(text));
        (raw, raw.clamp(SCALE.0, SCALE.1))
    }

    /// The model file.
    pub fn write(&self) -> String {
        let f = &self.features;
        let mut out = format!(
            "{MAGIC}\nn_features {}\nmin_n {}\nmax_n {}\nintercept {:e}\n",
            f.n_features, f.min_n, f.max_n, self.model.intercept
        );
        for w in &self.model.weights {
            writeln!(out, "{w:e}").expect("writing to a String cannot fail");
        }
        out
    }

    /// Reads a model file written by [`Scorer::write`].
    pub fn parse(text: &str) -> Result<Self, ModelError> {
        let err = |line: usize, message: String| ModelError { line, message };
        let Some(body) = text.strip_suffix('\n') else {
            return Err(err(text.lines().count().max(1), "the file does not end with a line end".into()));
        };
        let lines: Vec<&str> = body.split('\n').collect();
        if lines.first() != Some(&MAGIC) {
            return Err(err(1, format!("expected `{MAGIC}`")));
        }
        let field = |i: usize, name: &str| -> Result<&str, ModelError> {
            lines
                .get(i)
                .and_then(|l| l.strip_prefix(name))
                .and_then(|l| l.strip_prefix(' '))
                .ok_or_else(|| err(i + 1, format!("expected `{name} …`")))
        };
        let int = |i: usize, name: &str| -> Result<usize, ModelError> {
            let text = field(i, name)?;
            match text.parse::<usize>() {
                Ok(n) if n.to_string() == text => Ok(n),
                _ => Err(err(i + 1, format!("`{name}` is not a whole number in canonical form"))),
            }
        };
        let n_features = int(1, "n_features")?;
        if n_features > MAX_FEATURES as usize {
            return Err(err(2, format!("`n_features` is above {MAX_FEATURES}")));
        }
        let n_features = n_features as u32;
        let (min_n, max_n) = (int(2, "min_n")?, int(3, "max_n")?);
        if n_features == 0 {
            return Err(err(2, "`n_features` must be at least 1".into()));
        }
        if min_n == 0 {
            return Err(err(3, "`min_n` must be at least 1".into()));
        }
        if max_n < min_n {
            return Err(err(4, "`max_n` must be at least `min_n`".into()));
        }
        let number = |i: usize, s: &str| -> Result<f64, ModelError> {
            let x: f64 = s.parse().map_err(|_| err(i + 1, format!("`{s}` is not a number")))?;
            if !x.is_finite() || format!("{x:e}") != s {
                return Err(err(i + 1, format!("`{s}` is not a finite number in canonical form")));
            }
            Ok(x)
        };
        let intercept = number(4, field(4, "intercept")?)?;
        let weights_at = 5;
        if lines.len() != weights_at + n_features as usize {
            return Err(err(
                lines.len().min(weights_at + n_features as usize) + 1,
                format!("expected {n_features} weights, found {}", lines.len().saturating_sub(weights_at)),
            ));
        }
        let weights =
            lines[weights_at..].iter().enumerate().map(|(k, s)| number(weights_at + k, s)).collect::<Result<_, _>>()?;
        Ok(Self { features: HashingVectorizer { n_features, min_n, max_n }, model: RidgeModel { weights, intercept } })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn scorer() -> Scorer {
        Scorer {
            features: HashingVectorizer { n_features: 3, min_n: 1, max_n: 2 },
            model: RidgeModel { weights: vec![0.1, -2.5e-7, 3.0], intercept: 2.5 },
        }
    }

    #[test]
    fn the_file_reads_back_and_only_its_canonical_form_reads() {
        let text = scorer().write();
        assert_eq!(text, "prov-quality 1\nn_features 3\nmin_n 1\nmax_n 2\nintercept 2.5e0\n1e-1\n-2.5e-7\n3e0\n");
        assert_eq!(Scorer::parse(&text).unwrap(), scorer());
        for (bad, line) in [
            (text.replace("3e0\n", "3e0"), 8),
            (text.replace("1e-1", "0.1"), 6),
            (text.replace("1e-1", "NaN"), 6),
            (text.replace("3e0\n", ""), 8),
            (format!("{text}0e0\n"), 9),
            (text.replace("min_n 1", "min_n 0"), 3),
            (text.replace("prov-quality 1", "prov-quality 2"), 1),
            (text.replace("n_features 3", "n_features +3"), 2),
            (text.replace("min_n 1", "min_n 01"), 3),
            (text.replace("n_features 3", "n_features 4097"), 2),
        ] {
            assert_eq!(Scorer::parse(&bad).unwrap_err().line, line, "{bad:?}");
        }
    }

    #[test]
    fn scores_are_clipped_to_the_scale() {
        let mut s = scorer();
        s.model.intercept = 9.0;
        let (raw, clipped) = s.score("");
        assert!((raw - 9.0).abs() < 1e-12 && (clipped - 5.0).abs() < 1e-12);
    }
}
