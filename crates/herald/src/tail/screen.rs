//! The lines `herald tail` prints: one per new or updated event. On a terminal, an update of
//! an event whose line is still among the last lines on screen rewrites that line in place
//! (so a storm is one line whose count grows); elsewhere every update is a new line.

use std::collections::VecDeque;
use std::io::{self, Write};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use ratatui::crossterm::{cursor, queue, terminal};
use unicode_width::{UnicodeWidthChar as _, UnicodeWidthStr as _};

use crate::event_text::{Cells, event_key, last_seen};
use crate::style::{Palette, Role};

/// Most lines kept rewritable, whatever the terminal's height (bounds the region).
const MAX_REGION: usize = 200;

/// Whether an event is new to the stream or an update of one already shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// First time this event is shown.
    New,
    /// A later state (higher count) of an event shown before.
    Updated,
}

/// How the screen learns the terminal's size.
pub trait TermSize: Send {
    /// `(columns, rows)`, or `None` when unknown.
    fn size(&self) -> Option<(u16, u16)>;
}

/// The size of the process's terminal.
pub struct RealTerm;

impl TermSize for RealTerm {
    fn size(&self) -> Option<(u16, u16)> {
        terminal::size().ok()
    }
}

/// Prints event lines to `out`.
pub struct Screen<W: Write> {
    out: W,
    palette: Palette,
    /// Rewrite lines in place (a terminal); `None` = append only.
    term: Option<Box<dyn TermSize>>,
    /// Event keys of the last lines printed, oldest first; the cursor sits on the line
    /// below the newest. At most `min(rows - 1, MAX_REGION)` entries.
    region: VecDeque<String>,
    /// Prefix objects with their namespace (`-A`).
    namespaces: bool,
    /// Events shown for the first time.
    pub new_events: u64,
    /// Updates shown (in place or as new lines).
    pub updates: u64,
}

impl<W: Write> Screen<W> {
    /// A screen writing to `out`; `term` enables in-place updates.
    pub fn new(
        out: W,
        palette: Palette,
        term: Option<Box<dyn TermSize>>,
        namespaces: bool,
    ) -> Self {
        Screen {
            out,
            palette,
            term,
            region: VecDeque::new(),
            namespaces,
            new_events: 0,
            updates: 0,
        }
    }

    /// Shows `event` (ages relative to `now`).
    pub fn show(&mut self, event: &Event, change: Change, now: Timestamp) -> io::Result<()> {
        match change {
            Change::New => self.new_events += 1,
            Change::Updated => self.updates += 1,
        }
        let key = event_key(event);
        // A terminal that reports 0 columns (some ptys, serial consoles) has an unknown
        // width: lines are printed whole rather than cut to nothing.
        let size = self
            .term
            .as_ref()
            .and_then(|t| t.size())
            .filter(|&(cols, _)| cols > 0);
        let segments = self.segments(event, now);
        if let Some((cols, rows)) = size {
            let cap = usize::from(rows.saturating_sub(1)).min(MAX_REGION);
            while self.region.len() > cap {
                self.region.pop_front();
            }
            let line = self.fit(&segments, usize::from(cols).saturating_sub(1));
            if let Some(pos) = self.region.iter().rposition(|k| *k == key) {
                let up = u16::try_from(self.region.len() - pos).unwrap_or(u16::MAX);
                queue!(
                    self.out,
                    cursor::MoveToPreviousLine(up),
                    terminal::Clear(terminal::ClearType::CurrentLine)
                )?;
                self.out.write_all(line.as_bytes())?;
                queue!(self.out, cursor::MoveToNextLine(up))?;
            } else {
                self.out.write_all(line.as_bytes())?;
                self.out.write_all(b"\n")?;
                if cap > 0 {
                    self.region.push_back(key);
                    if self.region.len() > cap {
                        self.region.pop_front();
                    }
                }
            }
        } else {
            let line = self.fit(&segments, usize::MAX);
            self.out.write_all(line.as_bytes())?;
            self.out.write_all(b"\n")?;
        }
        self.out.flush()
    }

    /// Prints a note on its own line (e.g. a lost connection). Lines above it can no
    /// longer be rewritten safely, so the in-place region starts afresh.
    pub fn note(&mut self, text: &str) -> io::Result<()> {
        let line = self.palette.paint(text, Role::Dim);
        self.out.write_all(line.as_bytes())?;
        self.out.write_all(b"\n")?;
        self.region.clear();
        self.out.flush()
    }

    /// The pieces of an event's line with their roles:
    /// `12:00:01  Warning  pod/web-1  BackOff  Back-off restarting…  (x12 over 5m)`.
    fn segments(&self, event: &Event, now: Timestamp) -> Vec<(String, Role)> {
        let c = Cells::of(event, now);
        let when = last_seen(event)
            .map(|t| {
                t.to_zoned(jiff::tz::TimeZone::system())
                    .strftime("%H:%M:%S")
                    .to_string()
            })
            .unwrap_or_else(|| "--:--:--".to_string());
        let type_role = match c.type_.as_str() {
            "Warning" => Role::Warning,
            _ => Role::Normal,
        };
        let object = match (&event.metadata.namespace, self.namespaces) {
            (Some(ns), true) => format!("{ns}/{}", c.object),
            _ => c.object.clone(),
        };
        let mut v = vec![
            (when, Role::Dim),
            ("  ".into(), Role::Dim),
            (format!("{:<7}", c.type_), type_role),
            ("  ".into(), Role::Dim),
            (object, Role::Object),
            ("  ".into(), Role::Dim),
            (c.reason.clone(), Role::Reason),
            ("  ".into(), Role::Dim),
            (c.message.replace(['\n', '\r', '\t'], " "), Role::Header),
        ];
        if c.count > 1 {
            v.push(("  ".into(), Role::Dim));
            v.push((format!("(x{} over {})", c.count, c.first_seen), Role::Count));
        }
        v
    }

    /// Joins `segments` into one line of at most `width` columns (cut with `…`), colored
    /// after cutting. The message (the plain segment) is cut first, so the count at the end
    /// stays visible when it can.
    fn fit(&self, segments: &[(String, Role)], width: usize) -> String {
        let width_of = |p: &[(String, Role)]| p.iter().map(|(s, _)| s.width()).sum::<usize>();
        let mut pieces: Vec<(String, Role)> = segments.to_vec();
        let total = width_of(&pieces);
        if total <= width {
            return self.paint(&pieces);
        }
        // Shorten the message (segment 8) first.
        if let Some((msg, _)) = pieces.get_mut(8) {
            let (mw, excess) = (msg.width(), total - width);
            *msg = if mw > excess {
                format!("{}…", truncate(msg, mw - excess - 1))
            } else {
                "…".to_string()
            };
        }
        if width_of(&pieces) <= width {
            return self.paint(&pieces);
        }
        // Still too wide (a very narrow terminal): cut from the end.
        let mut out = Vec::new();
        let mut used = 0;
        for (s, role) in pieces {
            if used + s.width() < width {
                used += s.width();
                out.push((s, role));
            } else {
                out.push((
                    format!("{}…", truncate(&s, width.saturating_sub(used + 1))),
                    role,
                ));
                break;
            }
        }
        self.paint(&out)
    }

    fn paint(&self, pieces: &[(String, Role)]) -> String {
        pieces
            .iter()
            .map(|(s, role)| match role {
                Role::Header => s.clone(),
                r => self.palette.paint(s, *r),
            })
            .collect()
    }

    /// The writer (for tests).
    #[cfg(test)]
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// The longest prefix of `s` at most `width` columns wide.
fn truncate(s: &str, width: usize) -> &str {
    let mut used = 0;
    for (i, ch) in s.char_indices() {
        let w = ch.width().unwrap_or(0);
        if used + w > width {
            return &s[..i];
        }
        used += w;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event_text::fixtures::ts;

    struct Fixed(u16, u16);
    impl TermSize for Fixed {
        fn size(&self) -> Option<(u16, u16)> {
            Some((self.0, self.1))
        }
    }

    fn ev(name: &str, object: &str, count: i32) -> Event {
        let t = ts("2025-01-01T00:00:00Z");
        crate::event_text::fixtures::event(name, object, "BackOff", count, t, t)
    }

    fn screen_text(bytes: &[u8], rows: u16, cols: u16) -> Vec<String> {
        let nz = |n: u16| std::num::NonZeroU16::new(n).unwrap();
        let mut p = vt100::Parser::new(nz(rows), nz(cols), 0);
        // A terminal's line discipline turns "\n" into "\r\n" (ONLCR).
        let mut tty = Vec::with_capacity(bytes.len());
        for &b in bytes {
            if b == b'\n' {
                tty.push(b'\r');
            }
            tty.push(b);
        }
        p.process(&tty);
        p.screen()
            .rows(0, cols)
            .map(|r| r.trim_end().to_string())
            .collect()
    }

    #[test]
    fn updates_rewrite_their_line_on_a_terminal() {
        let now: Timestamp = "2025-01-01T00:05:00Z".parse().unwrap();
        let mut s = Screen::new(
            Vec::new(),
            Palette::plain(),
            Some(Box::new(Fixed(100, 10))),
            false,
        );
        s.show(&ev("a", "web-1", 1), Change::New, now).unwrap();
        s.show(&ev("b", "db-0", 1), Change::New, now).unwrap();
        s.show(&ev("a", "web-1", 7), Change::Updated, now).unwrap();
        s.show(&ev("b", "db-0", 3), Change::Updated, now).unwrap();
        s.show(&ev("a", "web-1", 12), Change::Updated, now).unwrap();
        assert_eq!((s.new_events, s.updates), (2, 3));
        let lines = screen_text(&s.into_inner(), 10, 100);
        let shown: Vec<&String> = lines.iter().filter(|l| !l.is_empty()).collect();
        assert_eq!(shown.len(), 2, "{lines:#?}");
        assert!(
            shown[0].contains("pod/web-1") && shown[0].ends_with("(x12 over 5m)"),
            "{lines:#?}"
        );
        assert!(
            shown[1].contains("pod/db-0") && shown[1].ends_with("(x3 over 5m)"),
            "{lines:#?}"
        );
    }

    #[test]
    fn lines_that_scrolled_away_are_not_rewritten() {
        let now: Timestamp = "2025-01-01T00:05:00Z".parse().unwrap();
        // 3 rows: at most 2 rewritable lines.
        let mut s = Screen::new(
            Vec::new(),
            Palette::plain(),
            Some(Box::new(Fixed(100, 3))),
            false,
        );
        s.show(&ev("a", "web-1", 1), Change::New, now).unwrap();
        s.show(&ev("b", "db-0", 1), Change::New, now).unwrap();
        s.show(&ev("c", "api-0", 1), Change::New, now).unwrap();
        s.show(&ev("a", "web-1", 2), Change::Updated, now).unwrap();
        let out = String::from_utf8(s.into_inner()).unwrap();
        assert_eq!(out.matches("pod/web-1").count(), 2, "{out:?}");
    }

    #[test]
    fn without_a_terminal_every_update_is_a_line() {
        let now: Timestamp = "2025-01-01T00:05:00Z".parse().unwrap();
        let mut s = Screen::new(Vec::new(), Palette::plain(), None, true);
        s.show(&ev("a", "web-1", 1), Change::New, now).unwrap();
        s.show(&ev("a", "web-1", 2), Change::Updated, now).unwrap();
        let out = String::from_utf8(s.into_inner()).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[1].contains("Warning  default/pod/web-1  BackOff  Back-off restarting failed container  (x2 over 5m)"), "{out}");
        assert!(!out.contains('\u{1b}'));
    }

    #[test]
    fn long_lines_are_cut_to_the_terminal_keeping_the_count() {
        let now: Timestamp = "2025-01-01T00:05:00Z".parse().unwrap();
        let mut s = Screen::new(
            Vec::new(),
            Palette::plain(),
            Some(Box::new(Fixed(60, 10))),
            false,
        );
        s.show(&ev("a", "web-1", 4), Change::New, now).unwrap();
        let out = String::from_utf8(s.into_inner()).unwrap();
        let line = out.lines().next().unwrap();
        assert!(line.width() <= 59, "{line:?}");
        assert!(
            line.ends_with("(x4 over 5m)") && line.contains('…'),
            "{line:?}"
        );
    }

    #[test]
    fn a_terminal_of_zero_columns_gets_whole_lines() {
        let now: Timestamp = "2025-01-01T00:05:00Z".parse().unwrap();
        let mut s = Screen::new(
            Vec::new(),
            Palette::plain(),
            Some(Box::new(Fixed(0, 0))),
            false,
        );
        s.show(&ev("a", "web-1", 4), Change::New, now).unwrap();
        s.show(&ev("a", "web-1", 5), Change::Updated, now).unwrap();
        let out = String::from_utf8(s.into_inner()).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{out:?}");
        assert!(
            lines[1].ends_with("BackOff  Back-off restarting failed container  (x5 over 5m)"),
            "{out:?}"
        );
        assert!(!out.contains('…'), "{out:?}");
    }
}
