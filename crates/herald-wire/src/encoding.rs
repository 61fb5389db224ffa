//! The encodings of one stored change that every watcher asking for the same form shares.
//!
//! The watch cache holds each committed change once, with room for its encodings; a change
//! is encoded the first time a watcher without selectors needs it in that form, and the
//! bytes are shared by every other such watcher. [`WatchEncoding`] names the forms and gives
//! each its slot, so the cache (which stores slots by number, knowing nothing of encodings)
//! and the writers of each form agree in one place.

use herald_core::event::ApiGroup;

/// A shared encoding of a change, for watchers without selectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchEncoding {
    /// A core/v1 JSON watch line: `{"type":…,"object":…}` and a newline.
    CoreJsonLine,
    /// An events.k8s.io/v1 JSON watch line.
    EventsJsonLine,
    /// A core/v1 protobuf watch frame (length-prefixed `WatchEvent`).
    CoreProtobufFrame,
    /// An events.k8s.io/v1 protobuf watch frame.
    EventsProtobufFrame,
}

impl WatchEncoding {
    /// How many encodings there are: the slots a cached change needs.
    pub const COUNT: usize = 4;

    /// The JSON line of `group`.
    pub fn json_line(group: ApiGroup) -> Self {
        match group {
            ApiGroup::Core => WatchEncoding::CoreJsonLine,
            ApiGroup::EventsV1 => WatchEncoding::EventsJsonLine,
        }
    }

    /// The protobuf frame of `group`.
    pub fn protobuf_frame(group: ApiGroup) -> Self {
        match group {
            ApiGroup::Core => WatchEncoding::CoreProtobufFrame,
            ApiGroup::EventsV1 => WatchEncoding::EventsProtobufFrame,
        }
    }

    /// This encoding's slot, below [`WatchEncoding::COUNT`]; distinct encodings have distinct
    /// slots.
    pub fn slot(self) -> usize {
        match self {
            WatchEncoding::CoreJsonLine => 0,
            WatchEncoding::EventsJsonLine => 1,
            WatchEncoding::CoreProtobufFrame => 2,
            WatchEncoding::EventsProtobufFrame => 3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_distinct_and_in_range() {
        let all = [ApiGroup::Core, ApiGroup::EventsV1]
            .into_iter()
            .flat_map(|g| {
                [
                    WatchEncoding::json_line(g),
                    WatchEncoding::protobuf_frame(g),
                ]
            });
        let mut seen = [false; WatchEncoding::COUNT];
        for e in all {
            assert!(!seen[e.slot()], "{e:?} shares a slot");
            seen[e.slot()] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
