//! Building events.k8s.io/v1 events, the occurrences the pipeline carries, and the
//! isomorphic key that groups occurrences into a series.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hash, Hasher};

use hashbrown::DefaultHashBuilder;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

use crate::record::correlator::KeyBuilder;
use crate::record::event::new_event_meta;
use crate::record::queue::Mergeable;
use crate::record::writer::WritableEvent;

/// Everything the recorder needs to build one event.
#[derive(Debug, Clone)]
pub(crate) struct EventSpec<'a> {
    pub regarding: ObjectReference,
    pub related: Option<ObjectReference>,
    pub annotations: Option<BTreeMap<String, String>>,
    pub type_: &'a str,
    pub reason: &'a str,
    pub action: &'a str,
    pub note: String,
}

/// `t` truncated to whole microseconds: what a MicroTime keeps on the wire, so an event
/// compares equal to itself after a round trip through the server.
pub(crate) fn micro(t: Timestamp) -> Timestamp {
    let nanos = t.as_nanosecond();
    Timestamp::from_nanosecond(nanos - nanos.rem_euclid(1000)).unwrap_or(t)
}

/// Builds the event client-go's `makeEvent` builds (tools/events): namespace from the
/// regarding object (or `default`), name `<regarding name>.<hex name_nanos>` (a UUID when that
/// is not a valid name), `eventTime` = `t` (MicroTime), no series, the reporting controller
/// and instance, action, reason, regarding, related, note and type.
pub(crate) fn make_event(
    spec: EventSpec<'_>,
    reporting_controller: &str,
    reporting_instance: &str,
    t: Timestamp,
    name_nanos: i128,
) -> Event {
    Event {
        metadata: new_event_meta(&spec.regarding, spec.annotations, t, name_nanos),
        event_time: Some(MicroTime(micro(t))),
        series: None,
        reporting_controller: Some(reporting_controller.to_string()),
        reporting_instance: Some(reporting_instance.to_string()),
        action: Some(spec.action.to_string()),
        reason: Some(spec.reason.to_string()),
        regarding: Some(spec.regarding),
        related: spec.related,
        note: Some(spec.note),
        type_: Some(spec.type_.to_string()),
        ..Event::default()
    }
}

/// One or more identical occurrences of an event, as the pipeline carries them: the first
/// occurrence's event, how many occurrences it stands for (more than one after the incoming
/// queue merged identical ones) and when the latest was observed.
#[derive(Debug, Clone)]
pub(crate) struct Occurrence {
    pub event: Event,
    pub count: u64,
    pub last_observed: Timestamp,
}

impl Occurrence {
    pub(crate) fn new(event: Event) -> Self {
        let last_observed = event
            .event_time
            .as_ref()
            .map_or(Timestamp::UNIX_EPOCH, |t| t.0);
        Self {
            event,
            count: 1,
            last_observed,
        }
    }
}

fn s(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("")
}

type RefFields<'a> = [&'a str; 7];

fn ref_fields(r: Option<&ObjectReference>) -> RefFields<'_> {
    match r {
        Some(r) => [
            s(&r.kind),
            s(&r.namespace),
            s(&r.name),
            s(&r.uid),
            s(&r.api_version),
            s(&r.resource_version),
            s(&r.field_path),
        ],
        None => [""; 7],
    }
}

/// The fields an occurrence merges on in the incoming queue: the isomorphic key's fields
/// (with the references' resourceVersion) plus the annotations and namespace. The note is
/// not among them, as it is not in the isomorphic key: a series keeps its first occurrence's
/// note whatever the later ones say, so occurrences that differ only in their note belong to
/// the same series and merge (a storm of changing notes takes one queue slot instead of
/// overflowing the queue). Time and name are ignored too.
fn identity(e: &Event) -> ([&str; 6], RefFields<'_>, RefFields<'_>) {
    (
        [
            s(&e.type_),
            s(&e.action),
            s(&e.reason),
            s(&e.reporting_controller),
            s(&e.reporting_instance),
            s(&e.metadata.namespace),
        ],
        ref_fields(e.regarding.as_ref()),
        ref_fields(e.related.as_ref()),
    )
}

impl Mergeable for Occurrence {
    fn identity_hash(&self, hasher: &DefaultHashBuilder) -> u64 {
        let mut h = hasher.build_hasher();
        // `str`'s Hash writes a terminator, so the tuple of fields cannot be ambiguous.
        identity(&self.event).hash(&mut h);
        self.event.metadata.annotations.hash(&mut h);
        h.finish()
    }

    fn same_identity(&self, other: &Self) -> bool {
        identity(&self.event) == identity(&other.event)
            && self.event.metadata.annotations == other.event.metadata.annotations
    }

    fn absorb(&mut self, newer: Self) {
        self.count = self.count.saturating_add(newer.count);
        self.last_observed = self.last_observed.max(newer.last_observed);
    }
}

/// Writes the regarding object's part of the series spam filter's key: kind, namespace,
/// name, uid, apiVersion and fieldPath — not the resourceVersion.
pub(crate) fn spam_key_of_regarding(r: Option<&ObjectReference>, key: &mut KeyBuilder<'_>) {
    let [
        kind,
        namespace,
        name,
        uid,
        api_version,
        _resource_version,
        field_path,
    ] = ref_fields(r);
    for part in [kind, namespace, name, uid, api_version, field_path] {
        key.push(part);
    }
}

/// What a series cache entry keeps of a single occurrence: the fields a later occurrence of
/// the same isomorphic key may have differently — name, note, eventTime, annotations, and the
/// references' resourceVersions when the key leaves them out. With a later occurrence they
/// give back the first occurrence's event ([`FirstFields::restore`]).
///
/// The rest of an event is the isomorphic key's (type, action, reason, reporting controller
/// and instance, regarding, related), follows from it (the namespace is the regarding
/// object's, or `default`), or is never set on an occurrence ([`make_event`] leaves the other
/// metadata, the deprecated fields and the series empty).
#[derive(Debug)]
pub(crate) struct FirstFields {
    /// The name, then the note: one allocation.
    text: Box<str>,
    name_len: usize,
    event_time: Option<MicroTime>,
    annotations: Option<BTreeMap<String, String>>,
    /// The regarding and related references' resourceVersions, kept only when the key
    /// ignores them.
    resource_versions: Option<Box<[Option<String>; 2]>>,
}

impl FirstFields {
    /// What an entry keeps of `e`; `ignore_resource_version` as the key was built.
    pub(crate) fn of(e: &Event, ignore_resource_version: bool) -> Self {
        let (name, note) = (s(&e.metadata.name), s(&e.note));
        let mut text = String::with_capacity(name.len() + note.len());
        text.push_str(name);
        text.push_str(note);
        let rv = |r: &Option<ObjectReference>| r.as_ref().and_then(|r| r.resource_version.clone());
        Self {
            text: text.into_boxed_str(),
            name_len: name.len(),
            event_time: e.event_time.clone(),
            annotations: e.metadata.annotations.clone(),
            resource_versions: ignore_resource_version
                .then(|| Box::new([rv(&e.regarding), rv(&e.related)])),
        }
    }

    /// The first occurrence's event, from `later`, an occurrence of the same isomorphic key:
    /// `later` with the first occurrence's name, note, eventTime, annotations (and
    /// resourceVersions, when the key leaves them out).
    pub(crate) fn restore(&self, mut later: Event) -> Event {
        let (name, note) = self.text.split_at(self.name_len);
        name.clone_into(later.metadata.name.get_or_insert_default());
        note.clone_into(later.note.get_or_insert_default());
        later.event_time.clone_from(&self.event_time);
        later.metadata.annotations.clone_from(&self.annotations);
        if let Some(rvs) = &self.resource_versions {
            for (r, rv) in [&mut later.regarding, &mut later.related]
                .into_iter()
                .zip(rvs.iter())
            {
                if let Some(r) = r {
                    r.resource_version.clone_from(rv);
                }
            }
        }
        later
    }
}

/// Writes the isomorphic key of `e` (client-go's `getKey`): type, action, reason,
/// reportingController, reportingInstance, the whole regarding reference and the whole related
/// reference (zero when absent) — not the note, annotations or name. With
/// `ignore_resource_version` the references' resourceVersion is left out (see
/// [`SeriesOptions::ignore_resource_version`](super::SeriesOptions::ignore_resource_version)).
pub(crate) fn isomorphic_key(e: &Event, ignore_resource_version: bool, key: &mut KeyBuilder<'_>) {
    for part in [
        s(&e.type_),
        s(&e.action),
        s(&e.reason),
        s(&e.reporting_controller),
        s(&e.reporting_instance),
    ] {
        key.push(part);
    }
    for r in [e.regarding.as_ref(), e.related.as_ref()] {
        let mut fields = ref_fields(r);
        if ignore_resource_version {
            fields[5] = "";
        }
        for part in fields {
            key.push(part);
        }
    }
}

/// The strategic-merge patch that updates a series: exactly
/// `{"series":{"count":N,"lastObservedTime":"<RFC 3339, 6 fractional digits, UTC>"}}`
/// (client-go's two-way patch from the event without its series to the event).
pub(crate) fn series_patch(series: &EventSeries) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({ "series": series })).unwrap_or_else(|_| b"{}".to_vec())
}

impl WritableEvent for Event {
    fn fallback_patch(&self) -> Vec<u8> {
        match &self.series {
            Some(series) => series_patch(series),
            None => b"{}".to_vec(),
        }
    }

    /// A series write whose patch found no event creates it; an `AlreadyExists` there means
    /// the create raced with the original's, so the write is tried again (client-go's rule).
    fn retry_already_exists_after_patch() -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ObjectReference;

    fn pod_ref(rv: &str) -> ObjectReference {
        ObjectReference {
            kind: Some("Pod".into()),
            name: Some("pod1".into()),
            namespace: Some("ns1".into()),
            uid: Some("12345".into()),
            api_version: Some("v1".into()),
            resource_version: Some(rv.into()),
            ..ObjectReference::default()
        }
    }

    fn spec(note: &str, rv: &str) -> EventSpec<'static> {
        EventSpec {
            regarding: pod_ref(rv),
            related: None,
            annotations: None,
            type_: "Normal",
            reason: "Started",
            action: "starting",
            note: note.into(),
        }
    }

    #[test]
    fn client_go_test_eventf_normal_event() {
        let t: Timestamp = "2023-01-01T12:00:00Z".parse().unwrap();
        let e = make_event(spec("Pod started", "1"), "c1", "i1", t, t.as_nanosecond());
        assert_eq!(e.metadata.name.as_deref(), Some("pod1.17362d8e1c698000"));
        assert_eq!(e.metadata.namespace.as_deref(), Some("ns1"));
        assert_eq!(e.event_time, Some(MicroTime(t)));
        assert_eq!(e.series, None);
        assert_eq!(e.reporting_controller.as_deref(), Some("c1"));
        assert_eq!(e.reporting_instance.as_deref(), Some("i1"));
        assert_eq!(e.related, None);
    }

    #[test]
    fn key_ignores_note_but_not_resource_version_by_default() {
        let t: Timestamp = "2023-01-01T12:00:00Z".parse().unwrap();
        let key = |note: &str, rv: &str, ignore: bool| {
            let e = make_event(spec(note, rv), "c1", "i1", t, t.as_nanosecond());
            let mut buf = Vec::new();
            isomorphic_key(&e, ignore, &mut KeyBuilder::new(&mut buf));
            buf
        };
        assert_eq!(key("a", "1", false), key("b", "1", false));
        assert_ne!(key("a", "1", false), key("a", "2", false));
        assert_eq!(key("a", "1", true), key("a", "2", true));
    }

    /// client-go TestRecordEventToSink: whatever the order of a plain write and a series write
    /// of one event, exactly one event is stored, and it is the one the table says.
    #[tokio::test(start_paused = true)]
    async fn record_event_to_sink_table() {
        use crate::record::MemorySink;
        use crate::record::writer::{RetryOptions, Tally, Write, WriteOp, write_with_retries};
        use rand::SeedableRng;
        use tokio_util::sync::CancellationToken;

        let t: Timestamp = "2023-01-01T12:00:00Z".parse().unwrap();
        let mut plain = make_event(spec("m", "1"), "c1", "i1", t, t.as_nanosecond());
        plain.metadata.name = Some("test".into());
        plain.metadata.namespace = Some("default".into());
        let mut isomorphic = plain.clone();
        isomorphic.series = Some(EventSeries {
            count: 2,
            last_observed_time: MicroTime(t),
        });
        let plain_write = Write {
            event: std::sync::Arc::new(plain.clone()),
            op: WriteOp::Create,
            tally: Tally::default(),
        };
        let series_write = Write {
            event: std::sync::Arc::new(isomorphic.clone()),
            op: WriteOp::Patch(None),
            tally: Tally::default(),
        };
        let cases = [
            (vec![&plain_write], &plain),
            (vec![&plain_write, &series_write], &isomorphic),
            (vec![&series_write, &plain_write], &isomorphic),
            (vec![&series_write], &isomorphic),
        ];
        for (i, (writes, expected)) in cases.into_iter().enumerate() {
            let sink = MemorySink::new();
            let metrics = crate::record::Metrics::default();
            let counters = metrics.new_sink("t");
            let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
            for w in writes {
                write_with_retries(
                    &sink,
                    w,
                    &RetryOptions::default(),
                    &counters,
                    &CancellationToken::new(),
                    &mut rng,
                )
                .await;
            }
            let mut stored = sink.events_v1();
            assert_eq!(stored.len(), 1, "case {i}");
            stored[0].metadata.resource_version = None;
            assert_eq!(&stored[0], expected, "case {i}");
        }
    }

    mod restore {
        use super::*;
        use proptest::prelude::*;

        fn text() -> impl Strategy<Value = String> {
            "[a-z0-9]{0,12}"
        }

        prop_compose! {
            /// Two occurrences of one isomorphic key, as the recorder builds them: they may
            /// differ in everything the key leaves out (name stamp, time, note, annotations,
            /// and the references' resourceVersions, which the key keeps unless ignored).
            fn occurrences()(
                ignore_rv in any::<bool>(),
                kind in text(), ns in proptest::option::of(text()), name in text(),
                related in any::<bool>(),
                notes in (text(), text()),
                secs in (0i64..1_000_000, 0i64..1_000_000),
                nanos in (0i128..1_000_000_000, 0i128..1_000_000_000),
                annotations in proptest::collection::vec(
                    proptest::option::of(proptest::collection::btree_map(text(), text(), 0..3)),
                    2,
                ),
                rvs in (text(), text(), text(), text()),
            ) -> (bool, Event, Event) {
                let reference = |rv: &str| ObjectReference {
                    kind: Some(kind.clone()),
                    namespace: ns.clone(),
                    name: Some(name.clone()),
                    uid: Some("u".into()),
                    api_version: Some("v1".into()),
                    resource_version: Some(rv.into()),
                    ..ObjectReference::default()
                };
                let event = |i: usize, note: &str, secs: i64, nanos: i128, rv: (&str, &str)| {
                    let t = Timestamp::from_second(secs).unwrap();
                    let spec = EventSpec {
                        regarding: reference(rv.0),
                        related: related.then(|| reference(rv.1)),
                        annotations: annotations[i].clone(),
                        type_: "Warning",
                        reason: "BackOff",
                        action: "Restarting",
                        note: note.into(),
                    };
                    make_event(spec, "c", "i", t, t.as_nanosecond() + nanos)
                };
                let first = event(0, &notes.0, secs.0, nanos.0, (&rvs.0, &rvs.1));
                let later_rvs = if ignore_rv { (&rvs.2, &rvs.3) } else { (&rvs.0, &rvs.1) };
                let later = event(1, &notes.1, secs.1, nanos.1, (later_rvs.0, later_rvs.1));
                (ignore_rv, first, later)
            }
        }

        proptest! {
            /// The fields a single occurrence's cache entry keeps, with any later occurrence
            /// of its key, give back exactly the first occurrence's event: what client-go's
            /// cache, which keeps the whole event, would send for the series.
            #[test]
            fn first_fields_and_a_later_occurrence_give_the_first_event(
                (ignore_rv, first, later) in occurrences()
            ) {
                let key = |e: &Event| {
                    let mut buf = Vec::new();
                    isomorphic_key(e, ignore_rv, &mut KeyBuilder::new(&mut buf));
                    buf
                };
                prop_assert_eq!(key(&first), key(&later));
                let restored = FirstFields::of(&first, ignore_rv).restore(later);
                prop_assert_eq!(restored, first);
            }
        }
    }

    #[test]
    fn series_patch_is_exactly_series() {
        let t: Timestamp = "2023-01-01T12:00:00.123456789Z".parse().unwrap();
        let p = series_patch(&EventSeries {
            count: 2,
            last_observed_time: MicroTime(t),
        });
        assert_eq!(
            std::str::from_utf8(&p).unwrap(),
            r#"{"series":{"count":2,"lastObservedTime":"2023-01-01T12:00:00.123456Z"}}"#
        );
    }
}
