//! The `herald get events` table: kubectl's columns, aligned the way kubectl's tabwriter
//! aligns them (each column as wide as its widest cell, three spaces between columns, the
//! last column unpadded), with colors added after alignment so escape codes never count
//! as width.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use unicode_width::UnicodeWidthStr as _;

use crate::event_text::Cells;
use crate::style::{Palette, Role};

/// Spaces between two columns.
const GAP: usize = 3;

/// Table layout options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Layout {
    /// Adds SUBOBJECT, SOURCE, FIRST SEEN, COUNT and NAME; LAST SEEN is then the plain age.
    pub wide: bool,
    /// Adds a NAMESPACE column first (`-A`).
    pub namespaces: bool,
    /// Leaves out the header line.
    pub no_headers: bool,
}

/// Which column a cell is in, for coloring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
    Namespace,
    LastSeen,
    Type,
    Reason,
    Object,
    Subobject,
    Source,
    Message,
    FirstSeen,
    Count,
    Name,
}

impl Col {
    fn header(self) -> &'static str {
        match self {
            Col::Namespace => "NAMESPACE",
            Col::LastSeen => "LAST SEEN",
            Col::Type => "TYPE",
            Col::Reason => "REASON",
            Col::Object => "OBJECT",
            Col::Subobject => "SUBOBJECT",
            Col::Source => "SOURCE",
            Col::Message => "MESSAGE",
            Col::FirstSeen => "FIRST SEEN",
            Col::Count => "COUNT",
            Col::Name => "NAME",
        }
    }
}

fn columns(layout: Layout) -> Vec<Col> {
    let mut cols = Vec::new();
    if layout.namespaces {
        cols.push(Col::Namespace);
    }
    if layout.wide {
        cols.extend([
            Col::LastSeen,
            Col::Type,
            Col::Reason,
            Col::Object,
            Col::Subobject,
            Col::Source,
            Col::Message,
            Col::FirstSeen,
            Col::Count,
            Col::Name,
        ]);
    } else {
        cols.extend([
            Col::LastSeen,
            Col::Type,
            Col::Reason,
            Col::Object,
            Col::Message,
        ]);
    }
    cols
}

fn cell(col: Col, event: &Event, c: &Cells, wide: bool) -> String {
    match col {
        Col::Namespace => event.metadata.namespace.clone().unwrap_or_default(),
        Col::LastSeen if wide => c.last_seen.clone(),
        Col::LastSeen => c.interval(),
        Col::Type => c.type_.clone(),
        Col::Reason => c.reason.clone(),
        Col::Object => c.object.clone(),
        Col::Subobject => c.subobject.clone(),
        Col::Source => c.source.clone(),
        // One event, one line: a multi-line message would break the columns.
        Col::Message => c.message.replace(['\n', '\r', '\t'], " "),
        Col::FirstSeen => c.first_seen.clone(),
        Col::Count => c.count.to_string(),
        Col::Name => c.name.clone(),
    }
}

fn paint(col: Col, text: &str, palette: Palette) -> String {
    match col {
        Col::Type => palette.event_type(text),
        Col::Reason => palette.paint(text, Role::Reason),
        Col::Namespace | Col::LastSeen | Col::FirstSeen => palette.paint(text, Role::Dim),
        _ => text.to_string(),
    }
}

/// Renders `events` (already sorted) as a table, ages computed at `now`.
pub fn render(events: &[Event], now: Timestamp, layout: Layout, palette: Palette) -> String {
    let cols = columns(layout);
    let mut rows: Vec<Vec<String>> = Vec::with_capacity(events.len() + 1);
    if !layout.no_headers {
        rows.push(cols.iter().map(|c| c.header().to_string()).collect());
    }
    for e in events {
        let c = Cells::of(e, now);
        rows.push(
            cols.iter()
                .map(|&col| cell(col, e, &c, layout.wide))
                .collect(),
        );
    }
    let mut widths = vec![0usize; cols.len()];
    for row in &rows {
        for (w, text) in widths.iter_mut().zip(row) {
            *w = (*w).max(text.width());
        }
    }
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let header = i == 0 && !layout.no_headers;
        for (k, text) in row.iter().enumerate() {
            let last = k + 1 == row.len();
            if header {
                out.push_str(&palette.paint(text, Role::Header));
            } else {
                out.push_str(&paint(cols[k], text, palette));
            }
            if !last {
                out.extend(std::iter::repeat_n(' ', widths[k] - text.width() + GAP));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ns: &str, name: &str, reason: &str, count: i32) -> Event {
        let t = crate::event_text::fixtures::ts("2025-01-01T00:00:00Z");
        let mut e = crate::event_text::fixtures::event(name, "web-1", reason, count, t, t);
        e.metadata.namespace = Some(ns.into());
        e.message = Some("line one\nline two".into());
        e
    }

    #[test]
    fn columns_line_up_and_counts_read_like_kubectl_events() {
        let now: Timestamp = "2025-01-01T00:05:00Z".parse().unwrap();
        let out = render(
            &[
                ev("default", "a", "BackOff", 12),
                ev("kube-system", "b", "X", 1),
            ],
            now,
            Layout {
                namespaces: true,
                ..Layout::default()
            },
            Palette::plain(),
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "NAMESPACE     LAST SEEN          TYPE      REASON    OBJECT      MESSAGE"
        );
        assert_eq!(
            lines[1],
            "default       5m (x12 over 5m)   Warning   BackOff   pod/web-1   line one line two"
        );
        assert!(
            lines[2].starts_with("kube-system   5m                 Warning   X "),
            "{out}"
        );
    }

    #[test]
    fn wide_has_count_and_first_seen() {
        let now: Timestamp = "2025-01-01T00:05:00Z".parse().unwrap();
        let out = render(
            &[ev("default", "a", "BackOff", 12)],
            now,
            Layout {
                wide: true,
                no_headers: false,
                namespaces: false,
            },
            Palette::plain(),
        );
        let header: Vec<&str> = out
            .lines()
            .next()
            .unwrap()
            .split("   ")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        assert_eq!(
            header,
            [
                "LAST SEEN",
                "TYPE",
                "REASON",
                "OBJECT",
                "SUBOBJECT",
                "SOURCE",
                "MESSAGE",
                "FIRST SEEN",
                "COUNT",
                "NAME"
            ]
        );
        let row: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(row[row.len() - 2..], ["12", "a"], "{out}");
        let bare = render(
            &[],
            now,
            Layout {
                no_headers: true,
                ..Layout::default()
            },
            Palette::plain(),
        );
        assert_eq!(bare, "");
    }
}
