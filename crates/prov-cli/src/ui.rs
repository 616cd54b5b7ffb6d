//! All output goes through [`Ui`]: data to stdout, status and errors to stderr, and in
//! `--json` mode stdout carries only JSON Lines.
//!
//! # JSON wire format
//!
//! One JSON object per line: `{"type": "<message type>", "data": {…}}`. Message types used
//! today: `run` (an execution's summary), `stage` (one stage boundary), `divergence`,
//! `verify`, `damage`, `gc`, `lock`, `init`, `doctor`, `log`, `status`, `record`, `object`,
//! `diff`, `lineage`. Types and fields may expand over time; consumers must ignore what they
//! do not know.

use std::io::{self, IsTerminal, Write};

use serde_json::Value;

/// The one way commands talk to the user.
pub(crate) struct Ui {
    json: bool,
    progress: bool,
}

impl Ui {
    pub fn new(json: bool) -> Self {
        let progress = !json
            && io::stderr().is_terminal()
            && crate::env_vars::get(crate::env_vars::PROV_NO_PROGRESS).is_none();
        Self { json, progress }
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
        let mut out = io::stdout().lock();
        writeln!(out, "{}", text.as_ref())
    }

    /// Writes one JSON Lines message (only in `--json` mode).
    pub fn json(&mut self, kind: &str, data: Value) -> io::Result<()> {
        if !self.json {
            return Ok(());
        }
        let msg = serde_json::json!({ "type": kind, "data": data });
        let mut out = io::stdout().lock();
        writeln!(out, "{msg}")
    }

    /// Writes a status message to stderr.
    pub fn status(&mut self, text: impl AsRef<str>) {
        let _ = writeln!(io::stderr().lock(), "{}", text.as_ref());
    }

    /// Writes a warning to stderr.
    pub fn warn(&mut self, text: impl AsRef<str>) {
        let _ = writeln!(io::stderr().lock(), "warning: {}", text.as_ref());
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
pub(crate) fn format_time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

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
    fn times_are_utc_civil_dates() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00Z");
        assert_eq!(format_time(951_782_400_000), "2000-02-29 00:00:00Z");
        assert_eq!(format_time(1_795_310_000_000), "2026-11-22 01:13:20Z");
    }

    #[test]
    fn tables_align() {
        let t = table(&["a", "bb"], &[vec!["xxx".into(), "y".into()]]);
        assert_eq!(t, "a    bb\nxxx  y");
    }
}
