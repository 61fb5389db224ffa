//! How one event reads on the command line: the cells kubectl prints (computed by the
//! server's own Table printer, so `herald get` and `kubectl get` agree) plus kubectl
//! events' `5m (x12 over 10m)` interval, and the time an event was last seen (the sort key).

use herald_wire::table::event_cells;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;

/// The printable fields of one event at a given time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cells {
    /// Age of the last occurrence (`45s`, `5m2s`).
    pub last_seen: String,
    /// `Normal` or `Warning` (or whatever the writer put there).
    pub type_: String,
    /// `BackOff`.
    pub reason: String,
    /// `pod/web-1` (kind lowercased, as kubectl prints it).
    pub object: String,
    /// `spec.containers{app}`, or empty.
    pub subobject: String,
    /// `kubelet, node-1`.
    pub source: String,
    /// The message, trimmed.
    pub message: String,
    /// Age of the first occurrence.
    pub first_seen: String,
    /// How many times it happened (at least 1).
    pub count: i64,
    /// The Event object's name.
    pub name: String,
}

impl Cells {
    /// The cells of `event` with ages computed at `now`.
    pub fn of(event: &Event, now: Timestamp) -> Cells {
        let mut v = event_cells(event, now).into_iter();
        let mut next = || match v.next() {
            Some(serde_json::Value::String(s)) => s,
            Some(other) => other.to_string(),
            None => String::new(),
        };
        Cells {
            last_seen: next(),
            type_: next(),
            reason: next(),
            object: next(),
            subobject: next(),
            source: next(),
            message: next(),
            first_seen: next(),
            count: next().parse().unwrap_or(1),
            name: next(),
        }
    }

    /// kubectl events' interval: `5m` for a single occurrence, `5m (x12 over 10m)` for a
    /// repeated one.
    pub fn interval(&self) -> String {
        if self.count > 1 {
            format!(
                "{} (x{} over {})",
                self.last_seen, self.count, self.first_seen
            )
        } else {
            self.last_seen.clone()
        }
    }
}

/// When `event` last happened: the series' last observation, else `lastTimestamp`, else
/// `eventTime`, else `firstTimestamp`, else when the object was created.
pub fn last_seen(event: &Event) -> Option<Timestamp> {
    event
        .series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref().map(|t| t.0))
        .or_else(|| event.last_timestamp.as_ref().map(|t| t.0))
        .or_else(|| event.event_time.as_ref().map(|t| t.0))
        .or_else(|| event.first_timestamp.as_ref().map(|t| t.0))
        .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// How many times `event` happened: the series count, else `count`, at least 1.
pub fn count(event: &Event) -> i64 {
    match &event.series {
        Some(s) => i64::from(s.count.unwrap_or(1)).max(1),
        None => i64::from(event.count.unwrap_or(1)).max(1),
    }
}

/// `namespace/name` of the Event object itself (its identity across updates).
pub fn event_key(event: &Event) -> String {
    format!(
        "{}/{}",
        event.metadata.namespace.as_deref().unwrap_or(""),
        event.metadata.name.as_deref().unwrap_or("")
    )
}

/// Sorts events by when they were last seen, oldest first (kubectl events' order); ties
/// by namespace and name so the order is stable.
pub fn sort_by_last_seen(events: &mut [Event]) {
    events.sort_by(|a, b| {
        last_seen(a)
            .cmp(&last_seen(b))
            .then_with(|| a.metadata.namespace.cmp(&b.metadata.namespace))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

/// Events for unit tests.
#[cfg(test)]
pub mod fixtures {
    use jiff::Timestamp;
    use k8s_openapi::api::core::v1::{Event, ObjectReference};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    /// A Warning event `default/<name>` about `pod/<object>` with `reason`, `count` and
    /// first/last timestamps.
    pub fn event(
        name: &str,
        object: &str,
        reason: &str,
        count: i32,
        first: Timestamp,
        last: Timestamp,
    ) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                kind: Some("Pod".into()),
                name: Some(object.into()),
                ..ObjectReference::default()
            },
            type_: Some("Warning".into()),
            reason: Some(reason.into()),
            message: Some("Back-off restarting failed container".into()),
            count: Some(count),
            first_timestamp: Some(Time(first)),
            last_timestamp: Some(Time(last)),
            ..Event::default()
        }
    }

    /// `s` as a timestamp.
    pub fn ts(s: &str) -> Timestamp {
        s.parse().expect("a valid timestamp")
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::ts;
    use super::*;

    fn ev(name: &str, count: i32, first: &str, last: &str) -> Event {
        let mut e = super::fixtures::event(name, "web-1", "BackOff", count, ts(first), ts(last));
        e.message = Some(" Back-off restarting failed container\n".into());
        e
    }

    #[test]
    fn repeated_events_read_like_kubectl_events() {
        let now = ts("2025-01-01T00:10:00Z");
        let c = Cells::of(
            &ev("a", 12, "2025-01-01T00:05:00Z", "2025-01-01T00:09:30Z"),
            now,
        );
        assert_eq!(c.interval(), "30s (x12 over 5m)");
        assert_eq!(c.object, "pod/web-1");
        assert_eq!(c.message, "Back-off restarting failed container");
        assert_eq!(c.count, 12);
        let once = Cells::of(
            &ev("b", 1, "2025-01-01T00:09:00Z", "2025-01-01T00:09:00Z"),
            now,
        );
        assert_eq!(once.interval(), "60s");
    }

    #[test]
    fn sorted_oldest_first() {
        let mut v = vec![
            ev("late", 1, "2025-01-01T00:00:00Z", "2025-01-01T00:09:00Z"),
            ev("early", 5, "2025-01-01T00:00:00Z", "2025-01-01T00:01:00Z"),
        ];
        sort_by_last_seen(&mut v);
        assert_eq!(v[0].metadata.name.as_deref(), Some("early"));
        assert_eq!(count(&v[0]), 5);
        assert_eq!(event_key(&v[1]), "default/late");
    }
}
