//! Human output: aligned tables, timestamps, short JSON.

use std::fmt::Write as _;

use serde_json::Value;

/// A table whose columns are padded to their widest cell; the last column is not padded.
#[derive(Debug, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Self {
        Self { headers: headers.iter().map(|h| (*h).to_owned()).collect(), rows: Vec::new() }
    }

    /// Adds a row (missing cells are empty, extra cells are dropped).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Adds a row of a table of names and values (headers `["", ""]`: rendered without them).
    pub fn pair(&mut self, name: &str, value: String) {
        self.row(vec![name.to_owned(), value]);
    }

    /// Whether no rows were added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, one line per row, headers first (none when they are all empty).
    pub fn render(&self) -> String {
        let n = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().take(n).enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let empty = String::new();
        let headers = self.headers.iter().any(|h| !h.is_empty()).then_some(&self.headers);
        for row in headers.into_iter().chain(&self.rows) {
            let mut line = String::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = row.get(i).unwrap_or(&empty);
                if i + 1 == n {
                    line.push_str(cell);
                } else {
                    let pad = width.saturating_sub(cell.chars().count());
                    let _ = write!(line, "{cell}{}  ", " ".repeat(pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `ms` since the Unix epoch as `YYYY-MM-DD HH:MM:SS.mmm UTC`: every time the CLI prints says
/// its zone.
pub fn time(ms: u64) -> String {
    time_in(ms, chrono_tz::UTC)
}

/// `ms` since the Unix epoch in `zone`, the zone's abbreviation last (`2026-03-02 03:00:00.000
/// CET`): a schedule's ticks read in the zone their cron fields are in.
pub fn time_in(ms: u64, zone: chrono_tz::Tz) -> String {
    match i64::try_from(ms).ok().and_then(chrono::DateTime::from_timestamp_millis) {
        Some(at) => at.with_timezone(&zone).format("%Y-%m-%d %H:%M:%S%.3f %Z").to_string(),
        None => format!("{ms} ms since the epoch"),
    }
}

/// A JSON value on one line, cut to `max` characters.
pub fn short_json(value: &Value, max: usize) -> String {
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    cut(&text, max)
}

/// `text` cut to `max` characters, with an ellipsis when cut.
pub fn cut(text: &str, max: usize) -> String {
    let one_line = text.replace('\n', " ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut s: String = one_line.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// Pretty JSON, or the compact form if that fails (it cannot for a `Value`).
pub fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_calendar_dates_with_their_zone() {
        assert_eq!(time(0), "1970-01-01 00:00:00.000 UTC");
        assert_eq!(time(951_782_400_000 + 1), "2000-02-29 00:00:00.001 UTC");
        assert_eq!(time(1_700_000_000_123), "2023-11-14 22:13:20.123 UTC");
        let berlin = chrono_tz::Europe::Berlin;
        assert_eq!(time_in(1_700_000_000_123, berlin), "2023-11-14 23:13:20.123 CET");
        assert_eq!(time_in(1_690_000_000_000, berlin), "2023-07-22 06:26:40.000 CEST");
        assert_eq!(time(u64::MAX), "18446744073709551615 ms since the epoch");
    }

    #[test]
    fn tables_align_columns_and_leave_the_last_unpadded() {
        let mut t = Table::new(&["A", "BBB", "C"]);
        t.row(vec!["xx".into(), "y".into(), "last".into()]);
        t.row(vec!["x".into()]);
        assert_eq!(t.render(), "A   BBB  C\nxx  y    last\nx\n");
        let mut pairs = Table::new(&["", ""]);
        pairs.pair("name", "value".into());
        assert_eq!(pairs.render(), "name  value\n", "no header line");
    }

    #[test]
    fn cut_counts_characters() {
        assert_eq!(cut("héllo", 10), "héllo");
        assert_eq!(cut("héllo wörld", 5), "héll…");
    }
}
