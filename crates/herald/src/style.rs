//! Colors on the command line: only when the stream is a terminal and `NO_COLOR` is unset
//! (or empty), per <https://no-color.org>.

use std::io::IsTerminal as _;

use ratatui::crossterm::style::{Attribute, Color, ContentStyle, Stylize as _};

/// What a piece of text is, which decides its color.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A `Warning` event type.
    Warning,
    /// A `Normal` event type.
    Normal,
    /// An event reason.
    Reason,
    /// The object an event is about.
    Object,
    /// An occurrence count.
    Count,
    /// Secondary text (times, namespaces).
    Dim,
    /// A heading.
    Header,
}

/// Paints text for one output stream (or leaves it plain).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Palette {
    on: bool,
}

impl Palette {
    /// Colors when stdout is a terminal and `NO_COLOR` allows.
    pub fn stdout() -> Palette {
        Palette::new(std::io::stdout().is_terminal())
    }

    /// Colors when stderr is a terminal and `NO_COLOR` allows.
    pub fn stderr() -> Palette {
        Palette::new(std::io::stderr().is_terminal())
    }

    /// Colors when `terminal` and `NO_COLOR` allows.
    pub fn new(terminal: bool) -> Palette {
        Palette {
            on: terminal && no_color_unset(),
        }
    }

    /// A palette that never colors.
    #[cfg(test)]
    pub fn plain() -> Palette {
        Palette { on: false }
    }

    /// Whether this palette colors at all.
    pub fn is_on(self) -> bool {
        self.on
    }

    /// `text` styled for `role` (unchanged when colors are off).
    pub fn paint(self, text: &str, role: Role) -> String {
        if !self.on || text.is_empty() {
            return text.to_string();
        }
        let style = ContentStyle::new();
        let style = match role {
            Role::Warning => style.with(Color::Yellow).attribute(Attribute::Bold),
            Role::Normal => style.with(Color::Green),
            Role::Reason => style.attribute(Attribute::Bold),
            Role::Object => style.with(Color::Cyan),
            Role::Count => style.with(Color::Magenta).attribute(Attribute::Bold),
            Role::Dim => style.attribute(Attribute::Dim),
            Role::Header => style.attribute(Attribute::Bold),
        };
        style.apply(text).to_string()
    }

    /// An event type painted by its value (`Warning`, `Normal`, anything else plain).
    pub fn event_type(self, t: &str) -> String {
        match t {
            "Warning" => self.paint(t, Role::Warning),
            "Normal" => self.paint(t, Role::Normal),
            _ => t.to_string(),
        }
    }
}

fn no_color_unset() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_palettes_change_nothing() {
        let p = Palette::plain();
        assert_eq!(p.paint("BackOff", Role::Reason), "BackOff");
        assert_eq!(p.event_type("Warning"), "Warning");
    }

    #[test]
    fn colors_are_escape_sequences_around_the_text() {
        let p = Palette { on: true };
        let s = p.event_type("Warning");
        assert!(s.starts_with('\u{1b}') && s.contains("Warning"), "{s:?}");
        assert_ne!(s, "Warning");
        assert_eq!(p.paint("", Role::Count), "");
    }
}
