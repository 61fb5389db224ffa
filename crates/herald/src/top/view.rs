//! Drawing `herald top`'s screen with ratatui: a header with the totals, the objects and the
//! reasons ranked by rate, and a footer with the keys.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row as TableRow, Table};

use super::window::{Row, Snapshot};
use herald_wire::table::human_duration as duration_text;

/// What the header says besides the numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// `host:port`.
    pub server: String,
    /// `namespace default` / `all namespaces` (+ filters).
    pub scope: String,
    /// `syncing`, `live`, or the last connection problem.
    pub status: String,
    /// Whether colors are allowed (`NO_COLOR`).
    pub color: bool,
}

/// Draws one frame.
pub fn draw(frame: &mut Frame<'_>, snap: &Snapshot, window: std::time::Duration, header: &Header) {
    let [top, objects, reasons, footer] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Percentage(60),
        Constraint::Percentage(40),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let accent = |c: Color| {
        if header.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    };
    let bold = Style::default().add_modifier(Modifier::BOLD);

    let t = &snap.total;
    let lines = vec![
        Line::from(vec![
            Span::styled("herald top", bold),
            Span::raw(format!(
                "  {}  ·  {}  ·  window {} (rates over the last {})  ·  ",
                header.server,
                header.scope,
                duration_text(window),
                duration_text(snap.span)
            )),
            Span::styled(header.status.clone(), accent(status_color(&header.status))),
        ]),
        Line::from(vec![
            Span::raw("occurrences "),
            Span::styled(t.occurrences.to_string(), bold),
            Span::raw(format!(" ({}/s)", rate(t.rate))),
            Span::raw("  ·  API writes "),
            Span::styled(t.writes.to_string(), bold),
            Span::raw(format!("  ·  events {}", t.distinct)),
            Span::raw("  ·  compression "),
            Span::styled(compression(t), bold.patch(accent(Color::Magenta))),
        ]),
    ];
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL)),
        top,
    );
    table(
        frame,
        objects,
        "Objects by rate",
        "OBJECT",
        "TOP REASON",
        "EVENTS",
        &snap.objects,
        accent(Color::Cyan),
    );
    table(
        frame,
        reasons,
        "Reasons by rate",
        "REASON",
        "TYPE",
        "OBJECTS",
        &snap.reasons,
        accent(Color::Yellow),
    );
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(" q", bold),
            Span::raw(" quit   compression = occurrences per API write"),
        ])),
        footer,
    );
}

fn status_color(status: &str) -> Color {
    match status {
        "live" => Color::Green,
        "syncing" => Color::Yellow,
        _ => Color::Red,
    }
}

#[allow(clippy::too_many_arguments)]
fn table(
    frame: &mut Frame<'_>,
    area: Rect,
    title: &str,
    name: &str,
    detail: &str,
    distinct: &str,
    rows: &[Row],
    name_style: Style,
) {
    let header = TableRow::new(
        [
            "RATE/s",
            "OCCURRENCES",
            "WRITES",
            "COMPRESSION",
            distinct,
            name,
            detail,
        ]
        .map(|h| Cell::from(h).style(Style::default().add_modifier(Modifier::BOLD))),
    );
    let body: Vec<TableRow<'_>> = rows
        .iter()
        .map(|r| {
            TableRow::new(vec![
                Cell::from(rate(r.rate)),
                Cell::from(r.occurrences.to_string()),
                Cell::from(r.writes.to_string()),
                Cell::from(compression(r)),
                Cell::from(r.distinct.to_string()),
                Cell::from(r.name.clone()).style(name_style),
                Cell::from(r.detail.clone()),
            ])
        })
        .collect();
    let widths = [
        Constraint::Length(9),
        Constraint::Length(12),
        Constraint::Length(8),
        Constraint::Length(12),
        Constraint::Length(8),
        Constraint::Fill(3),
        Constraint::Fill(2),
    ];
    frame.render_widget(
        Table::new(body, widths).header(header).block(
            Block::default()
                .borders(Borders::ALL)
                .title(format!(" {title} ")),
        ),
        area,
    );
}

fn rate(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 10.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.2}")
    }
}

fn compression(r: &Row) -> String {
    match r.compression() {
        Some(c) => format!("{c:.1}x"),
        None => "-".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn row(name: &str, detail: &str, rate: f64, occurrences: u64, writes: u64) -> Row {
        Row {
            name: name.into(),
            detail: detail.into(),
            rate,
            occurrences,
            writes,
            distinct: 1,
        }
    }

    #[test]
    fn the_screen_shows_totals_and_rankings() {
        let snap = Snapshot {
            objects: vec![
                row("pod/storm-a", "BackOff", 50.0, 500, 26),
                row("pod/calm-b", "Pulled", 0.5, 5, 5),
            ],
            reasons: vec![row("BackOff", "Warning", 50.0, 500, 26)],
            total: Row {
                distinct: 2,
                ..row("all", "", 50.5, 505, 31)
            },
            span: std::time::Duration::from_secs(10),
        };
        let header = Header {
            server: "127.0.0.1:6443".into(),
            scope: "namespace default".into(),
            status: "live".into(),
            color: false,
        };
        let mut term = Terminal::new(TestBackend::new(120, 30)).unwrap();
        term.draw(|f| draw(f, &snap, std::time::Duration::from_secs(300), &header))
            .unwrap();
        let buf = term.backend().buffer().clone();
        let lines: Vec<String> = (0..buf.area.height)
            .map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect())
            .collect();
        let text = lines.join("\n");
        assert!(text.contains("window 5m"), "{text}");
        assert!(text.contains("occurrences 505 (50.5/s)"), "{text}");
        assert!(text.contains("compression 16.3x"), "{text}");
        let storm = lines
            .iter()
            .position(|l| l.contains("pod/storm-a"))
            .unwrap();
        let calm = lines.iter().position(|l| l.contains("pod/calm-b")).unwrap();
        assert!(storm < calm, "{text}");
        assert!(lines[storm].contains("19.2x"), "{}", lines[storm]);
        assert!(text.contains("q quit"), "{text}");
    }
}
