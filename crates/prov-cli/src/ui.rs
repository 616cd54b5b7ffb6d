//! All output goes through [`Ui`]: data to stdout, status and errors to stderr, and in
//! `--json` mode stdout carries only JSON Lines.
//!
//! # JSON wire format
//!
//! One JSON object per line: `{"type": "<message type>", "data": {…}}`. Message types used
//! today: `run` (an execution's summary), `stage` (one stage boundary), `divergence`,
//! `verify`, `damage`, `gc`, `lock`, `init`, `commit`, `doctor`, `log`, `status`, `lockfile`, `record`,
//! `object`, `diff`, `lineage`, `robots`, `pii`, `license`, `goldfish`, `batch` (the `explain`
//! answers), `eval`, `sample`, `export`, `proof` (`prove` and `verify-proof`). Types and fields
//! may expand over time; consumers must ignore what they do not know.

use std::io::{self, IsTerminal, Write};

use prov_textfix::shown::terminal_safe;
use serde_json::Value;

/// The one way commands talk to the user.
pub(crate) struct Ui {
    json: bool,
    progress: bool,
    /// Set when stdout was closed by its reader (`prov log | head`): later output is dropped,
    /// and the command goes on to its real outcome and exit code.
    stdout_closed: bool,
}

impl Ui {
    pub fn new(json: bool) -> Self {
        let progress =
            !json && io::stderr().is_terminal() && crate::env_vars::get(crate::env_vars::PROV_NO_PROGRESS).is_none();
        Self { json, progress, stdout_closed: false }
    }

    /// True in `--json` mode.
    pub fn is_json(&self) -> bool {
        self.json
    }

    /// True when progress bars may be drawn.
    pub fn progress_enabled(&self) -> bool {
        self.progress
    }

    /// Writes a line of human-readable data to stdout (nothing in `--json` mode).
    pub fn line(&mut self, text: impl AsRef<str>) -> io::Result<()> {
        if self.json {
            return Ok(());
        }
        // Whatever a line quotes (an id, a declared license), no escape sequence or
        // invisible character reaches the terminal.
        self.write_stdout(format!("{}\n", terminal_safe(text.as_ref())).as_bytes())
    }

    /// Writes bytes to stdout exactly as given, no newline added, in either mode (data that
    /// must arrive byte for byte, such as redacted text).
    pub fn raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.write_stdout(bytes)
    }

    /// Writes a line to stdout. A reader that closed stdout has seen all it wanted: that is
    /// not an error of the command (its exit code still says how it ended); any other write
    /// error is.
    fn write_stdout(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.stdout_closed {
            return Ok(());
        }
        let mut out = io::stdout().lock();
        match out.write_all(bytes).and_then(|()| out.flush()) {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.stdout_closed = true;
                Ok(())
            }
            other => other,
        }
    }

    /// Writes one JSON Lines message (only in `--json` mode).
    // Callers build the value inline with `json!`; taking it by value keeps them short.
    #[allow(clippy::needless_pass_by_value)]
    pub fn json(&mut self, kind: &str, data: Value) -> io::Result<()> {
        if !self.json {
            return Ok(());
        }
        let msg = serde_json::json!({ "type": kind, "data": data });
        self.write_stdout(format!("{msg}\n").as_bytes())
    }

    /// Writes a status message to stderr.
    // A method, so that all output goes through `Ui`, though stderr needs no state.
    #[allow(clippy::unused_self)]
    pub fn status(&mut self, text: impl AsRef<str>) {
        let _ = writeln!(io::stderr().lock(), "{}", terminal_safe(text.as_ref()));
    }

    /// Writes a warning to stderr.
    #[allow(clippy::unused_self)]
    pub fn warn(&mut self, text: impl AsRef<str>) {
        let _ = writeln!(io::stderr().lock(), "warning: {}", terminal_safe(text.as_ref()));
    }
}

/// Draws a progress bar over the stages of an execution (terminal only).
pub(crate) struct StageProgress {
    bar: Option<indicatif::ProgressBar>,
}

impl StageProgress {
    pub fn new(ui: &Ui) -> Self {
        let bar = ui.progress_enabled().then(|| {
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} [{pos}/{len}] {msg} {elapsed}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
            bar
        });
        Self { bar }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl prov_exec::Observer for StageProgress {
    fn stage_started(&self, index: usize, total: usize, name: &str, kind: &str) {
        if let Some(b) = &self.bar {
            b.set_length(total as u64);
            b.set_position(index as u64);
            b.set_message(format!("{name} ({kind})"));
        }
    }
    fn stage_finished(&self, _report: &prov_exec::StageReport) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }
}

/// Formats milliseconds since the Unix epoch as `YYYY-MM-DD HH:MM:SSZ` (UTC).
pub(crate) use prov_store::format_utc as format_time;

/// Formats a byte count for people.
pub(crate) fn format_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{n} B") } else { format!("{v:.1} {}", UNITS[u]) }
}

/// Formats a duration in milliseconds for people: `0.42s`, `3m07s`, `2h05m`.
pub(crate) fn format_duration(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 60_000 {
        return format!("{:.2}s", ms as f64 / 1000.0);
    }
    let secs = ms / 1000;
    if secs < 3600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h{:02}m", secs / 3600, secs % 3600 / 60)
    }
}

/// Formats a JSON value on one line for people: digests shortened to their first 12 hex
/// digits, everything else as compact JSON (so that the string `"1"` and the number `1` stay
/// apart).
pub(crate) fn format_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.parse::<prov_store::Digest>().map_or_else(|_| v.to_string(), |d| d.short()),
        other => other.to_string(),
    }
}

/// Returns `n` and the noun, with an `s` unless `n` is 1: `1 run`, `3 runs`.
pub(crate) fn count(n: usize, noun: &str) -> String {
    if n == 1 { format!("{n} {noun}") } else { format!("{n} {noun}s") }
}

/// Formats a JSON value over several lines for reading: objects one key per line, indented
/// by two spaces; arrays of scalars (CPU flags, commands) on one line.
pub(crate) fn pretty_json(v: &Value) -> String {
    fn go(v: &Value, indent: usize, out: &mut String) {
        let pad = "  ".repeat(indent + 1);
        match v {
            Value::Object(m) if !m.is_empty() => {
                out.push_str("{\n");
                for (i, (k, x)) in m.iter().enumerate() {
                    out.push_str(&pad);
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push_str(": ");
                    go(x, indent + 1, out);
                    out.push_str(if i + 1 < m.len() { ",\n" } else { "\n" });
                }
                out.push_str(&"  ".repeat(indent));
                out.push('}');
            }
            Value::Array(a) if a.iter().any(|x| x.is_object() || x.is_array()) => {
                out.push_str("[\n");
                for (i, x) in a.iter().enumerate() {
                    out.push_str(&pad);
                    go(x, indent + 1, out);
                    out.push_str(if i + 1 < a.len() { ",\n" } else { "\n" });
                }
                out.push_str(&"  ".repeat(indent));
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    go(v, 0, &mut out);
    out
}

/// Renders rows as an aligned text table.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let fmt_row = |cells: Vec<&str>| {
        let mut line = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            line.push_str(c);
            if i + 1 < cells.len() {
                line.push_str(&" ".repeat(widths[i] - c.chars().count()));
            }
        }
        line
    };
    let mut out = fmt_row(header.to_vec());
    for r in rows {
        out.push('\n');
        out.push_str(&fmt_row(r.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pretty_json_keeps_scalar_arrays_on_one_line() {
        let v = serde_json::json!({"a": [1, 2], "b": {"c": [{"d": null}]}, "e": {}});
        assert_eq!(
            pretty_json(&v),
            "{\n  \"a\": [1,2],\n  \"b\": {\n    \"c\": [\n      {\n        \"d\": null\n      }\n    ]\n  },\n  \"e\": {}\n}"
        );
        let back: Value = serde_json::from_str(&pretty_json(&v)).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(format_duration(420), "0.42s");
        assert_eq!(format_duration(187_000), "3m07s");
        assert_eq!(format_duration(7_500_000), "2h05m");
    }

    #[test]
    fn tables_align() {
        let t = table(&["a", "bb"], &[vec!["xxx".into(), "y".into()]]);
        assert_eq!(t, "a    bb\nxxx  y");
    }
}
