//! Building events.k8s.io/v1 events, the occurrences the pipeline carries, and the
//! isomorphic key that groups occurrences into a series.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use hashbrown::DefaultHashBuilder;
use herald_core::naming::{event_namespace, push_event_name};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

use crate::record::EventType;
use crate::record::correlator::KeyBuilder;
use crate::record::queue::Mergeable;
use crate::record::writer::{WritableEvent, WriteKey, WriteSource};

/// Everything client-go's `makeEvent` builds one event from.
#[cfg(test)]
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
#[cfg(test)]
pub(crate) fn make_event(
    spec: EventSpec<'_>,
    reporting_controller: &str,
    reporting_instance: &str,
    t: Timestamp,
    name_nanos: i128,
) -> Event {
    Event {
        metadata: crate::record::event::new_event_meta(
            &spec.regarding,
            spec.annotations,
            t,
            name_nanos,
        ),
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

/// Who stamps a recorder's occurrences: its reporting controller and instance, shared by
/// every occurrence it records (one reference count each, no copy).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Reporter {
    /// `reportingController`.
    pub controller: String,
    /// `reportingInstance`.
    pub instance: String,
}

/// What a recorder call gives an occurrence besides its note, reporter and time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OccurrenceSpec<'a> {
    pub regarding: &'a ObjectReference,
    pub related: Option<&'a ObjectReference>,
    pub type_: EventType,
    pub reason: &'a str,
    pub action: &'a str,
}

/// The text fields of an occurrence, in the order `Occurrence::text` keeps them.
const REASON: usize = 0;
const ACTION: usize = 1;
const NOTE: usize = 2;
/// The event's name, fixed when the occurrence is recorded (it may be a random UUID, so it
/// is not made again for each event built).
const NAME: usize = 3;
/// The regarding reference's seven fields start here (in [`ref_options`] order).
const REGARDING: usize = 4;
/// The related reference's seven fields start here.
const RELATED: usize = REGARDING + 7;
const FIELDS: usize = RELATED + 7;
/// Bit of `Occurrence::present` set when there is a related object (bits `0..14` say
/// which reference fields are present, regarding first).
const HAS_RELATED: u16 = 1 << 14;

/// One or more identical occurrences of an event, as the pipeline carries them: not a whole
/// Event but what the recorder was given — its text fields packed into one allocation, the
/// recorder's shared [`Reporter`], the annotations and the time —, how many occurrences it
/// stands for (more than one after the incoming queue merged identical ones) and when the
/// latest was observed.
///
/// So an occurrence that a series only counts costs one allocation to make and one to free;
/// the Event is built ([`Occurrence::to_event`]) only by a write that sends it (on the
/// write's task, see [`PendingEvent`]: a create, a series patch) and for watchers. The
/// built event is exactly the one client-go's `makeEvent` builds.
#[derive(Debug, Clone)]
pub(crate) struct Occurrence {
    reporter: Arc<Reporter>,
    type_: EventType,
    /// Reason, action, note, name, then the regarding and related references' fields
    /// ([`ref_options`] order; absent ones empty); field `i` ends at `ends[i]`.
    text: String,
    ends: [usize; FIELDS],
    /// Bit `i < 14`: reference field `i` (regarding's, then related's) is present; and
    /// [`HAS_RELATED`].
    present: u16,
    annotations: Option<BTreeMap<String, String>>,
    /// The recorder's clock reading (`eventTime`).
    time: Timestamp,
    pub count: u64,
    pub last_observed: Timestamp,
}

impl Occurrence {
    /// One occurrence recorded at `t` by `reporter`, named with `name_nanos` (the event
    /// client-go's `makeEvent` builds from the same arguments, without building it; the
    /// name is made now, as [`herald_core::naming::event_name`] makes it).
    pub(crate) fn new(
        spec: OccurrenceSpec<'_>,
        note: fmt::Arguments<'_>,
        annotations: Option<BTreeMap<String, String>>,
        reporter: Arc<Reporter>,
        t: Timestamp,
        name_nanos: i128,
    ) -> Self {
        let regarding = ref_options(Some(spec.regarding));
        let related = ref_options(spec.related);
        let refs_len: usize = regarding
            .iter()
            .chain(&related)
            .map(|f| f.map_or(0, str::len))
            .sum();
        let note_str = note.as_str();
        let object_name = spec.regarding.name.as_deref().unwrap_or("");
        // The name is `<object name>.<at most 32 hex digits>` or a 36-character UUID.
        let name_len = object_name.len() + 33;
        let mut text = String::with_capacity(
            spec.reason.len()
                + spec.action.len()
                + note_str.map_or(64, str::len)
                + name_len
                + refs_len,
        );
        let mut ends = [0; FIELDS];
        text.push_str(spec.reason);
        ends[REASON] = text.len();
        text.push_str(spec.action);
        ends[ACTION] = text.len();
        match note_str {
            Some(s) => text.push_str(s),
            // Writing to a String cannot fail.
            None => {
                let _ = fmt::Write::write_fmt(&mut text, note);
            }
        }
        ends[NOTE] = text.len();
        let stamp = Timestamp::from_nanosecond(name_nanos).unwrap_or(t);
        push_event_name(&mut text, object_name, stamp);
        ends[NAME] = text.len();
        let mut present = 0u16;
        for (i, f) in regarding.iter().chain(&related).enumerate() {
            if let Some(f) = f {
                text.push_str(f);
                present |= 1 << i;
            }
            ends[REGARDING + i] = text.len();
        }
        if spec.related.is_some() {
            present |= HAS_RELATED;
        }
        Self {
            reporter,
            type_: spec.type_,
            text,
            ends,
            present,
            annotations,
            time: t,
            count: 1,
            last_observed: t,
        }
    }

    #[inline]
    fn field(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.text.get(start..self.ends[i]).unwrap_or("")
    }

    /// The seven fields of the regarding (`REGARDING`) or related (`RELATED`) reference,
    /// absent ones empty.
    fn ref_strs(&self, first: usize) -> RefFields<'_> {
        std::array::from_fn(|i| self.field(first + i))
    }

    /// Reference field `i` (`REGARDING..FIELDS`), `None` when absent.
    fn ref_field(&self, i: usize) -> Option<&str> {
        (self.present & (1 << (i - REGARDING)) != 0).then(|| self.field(i))
    }

    fn reference(&self, first: usize) -> ObjectReference {
        let f = |i: usize| self.ref_field(first + i).map(str::to_string);
        ObjectReference {
            kind: f(0),
            namespace: f(1),
            name: f(2),
            uid: f(3),
            api_version: f(4),
            resource_version: f(5),
            field_path: f(6),
        }
    }

    /// The occurrence's note.
    pub(crate) fn note(&self) -> &str {
        self.field(NOTE)
    }

    /// The namespace and name of [`to_event`](Self::to_event)'s event, without building it.
    pub(crate) fn write_key(&self) -> WriteKey {
        (
            event_namespace(self.ref_field(REGARDING + 1)).to_string(),
            self.field(NAME).to_string(),
        )
    }

    /// The event of this occurrence, without a series: what client-go's `makeEvent` builds
    /// from the recorder's arguments (namespace the regarding object's or `default`, the
    /// name made when it was recorded, `eventTime` in whole microseconds).
    pub(crate) fn to_event(&self) -> Event {
        let regarding = self.reference(REGARDING);
        let namespace = event_namespace(regarding.namespace.as_deref()).to_string();
        Event {
            metadata: ObjectMeta {
                name: Some(self.field(NAME).to_string()),
                namespace: Some(namespace),
                annotations: self.annotations.clone(),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(micro(self.time))),
            series: None,
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(self.reporter.instance.clone()),
            action: Some(self.field(ACTION).to_string()),
            reason: Some(self.field(REASON).to_string()),
            regarding: Some(regarding),
            related: (self.present & HAS_RELATED != 0).then(|| self.reference(RELATED)),
            note: Some(self.note().to_string()),
            type_: Some(self.type_.as_str().to_string()),
            ..Event::default()
        }
    }

    /// Writes the isomorphic key (client-go's `getKey`): type, action, reason,
    /// reportingController, reportingInstance, the whole regarding reference and the whole
    /// related reference (empty fields when absent) — not the note, annotations or name.
    /// With `ignore_resource_version` the references' resourceVersion is left out (see
    /// [`SeriesOptions::ignore_resource_version`](super::SeriesOptions::ignore_resource_version)).
    /// The same key as the test rule `isomorphic_key` gives for [`to_event`](Self::to_event).
    pub(crate) fn isomorphic_key(&self, ignore_resource_version: bool, key: &mut KeyBuilder<'_>) {
        for part in [
            self.type_.as_str(),
            self.field(ACTION),
            self.field(REASON),
            &self.reporter.controller,
            &self.reporter.instance,
        ] {
            key.push(part);
        }
        for first in [REGARDING, RELATED] {
            let mut fields = self.ref_strs(first);
            if ignore_resource_version {
                fields[5] = "";
            }
            for part in fields {
                key.push(part);
            }
        }
    }

    /// Writes the series spam filter's key: the reporting controller and the regarding
    /// object's kind, namespace, name, uid, apiVersion and fieldPath — not its
    /// resourceVersion.
    pub(crate) fn spam_key(&self, key: &mut KeyBuilder<'_>) {
        key.push(&self.reporter.controller);
        let [kind, namespace, name, uid, api_version, _rv, field_path] = self.ref_strs(REGARDING);
        for part in [kind, namespace, name, uid, api_version, field_path] {
            key.push(part);
        }
    }

    /// What the incoming queue merges on besides the type, reporter and annotations (the
    /// fields of the test rule `identity`, read from the packed text): the lengths of
    /// reason, action and the fourteen reference fields, the bytes of reason and action,
    /// and the bytes of the reference fields. Two occurrences have equal parts exactly when
    /// those fields are equal one by one (the lengths split the bytes), absent reference
    /// fields counting as empty.
    fn identity_parts(&self) -> ([usize; 16], &[u8], &[u8]) {
        let e = &self.ends;
        let mut lens = [0; 16];
        lens[0] = e[REASON];
        lens[1] = e[ACTION].saturating_sub(e[REASON]);
        for (i, len) in lens[2..].iter_mut().enumerate() {
            let f = REGARDING + i;
            *len = e[f].saturating_sub(e[f - 1]);
        }
        let b = self.text.as_bytes();
        let head = b.get(..e[ACTION]).unwrap_or_default();
        let refs = b.get(e[NAME]..e[FIELDS - 1]).unwrap_or_default();
        (lens, head, refs)
    }
}

#[cfg(test)]
fn s(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("")
}

type RefFields<'a> = [&'a str; 7];

fn ref_options(r: Option<&ObjectReference>) -> [Option<&str>; 7] {
    match r {
        Some(r) => [
            r.kind.as_deref(),
            r.namespace.as_deref(),
            r.name.as_deref(),
            r.uid.as_deref(),
            r.api_version.as_deref(),
            r.resource_version.as_deref(),
            r.field_path.as_deref(),
        ],
        None => [None; 7],
    }
}

#[cfg(test)]
fn ref_fields(r: Option<&ObjectReference>) -> RefFields<'_> {
    ref_options(r).map(|f| f.unwrap_or(""))
}

/// The fields an event merges on in the incoming queue: the isomorphic key's fields (with the
/// references' resourceVersion) plus the annotations (compared beside it). The note is not
/// among them, as it is not in the isomorphic key: a series keeps its first occurrence's note
/// whatever the later ones say, so occurrences that differ only in their note belong to the
/// same series and merge (a storm of changing notes takes one queue slot instead of
/// overflowing the queue). Time and name are ignored too, and so is the namespace, which is
/// the regarding object's (or `default`). [`Occurrence`]s compare these fields without
/// building their events; this is the rule on events, which the tests hold them to.
#[cfg(test)]
fn identity(e: &Event) -> ([&str; 5], RefFields<'_>, RefFields<'_>) {
    (
        [
            s(&e.type_),
            s(&e.action),
            s(&e.reason),
            s(&e.reporting_controller),
            s(&e.reporting_instance),
        ],
        ref_fields(e.regarding.as_ref()),
        ref_fields(e.related.as_ref()),
    )
}

impl Mergeable for Occurrence {
    fn identity_hash(&self, hasher: &DefaultHashBuilder) -> u64 {
        let mut h = hasher.build_hasher();
        // What `same_identity` compares; `[u8]` and `str` hash their length or a terminator,
        // so the sequence cannot be ambiguous.
        self.type_.hash(&mut h);
        self.identity_parts().hash(&mut h);
        self.reporter.controller.hash(&mut h);
        self.reporter.instance.hash(&mut h);
        self.annotations.hash(&mut h);
        h.finish()
    }

    /// The test rule `identity` of the two events and their annotations compared, without
    /// building the events.
    fn same_identity(&self, other: &Self) -> bool {
        self.type_ == other.type_
            && self.identity_parts() == other.identity_parts()
            && (Arc::ptr_eq(&self.reporter, &other.reporter) || self.reporter == other.reporter)
            && self.annotations == other.annotations
    }

    fn absorb(&mut self, newer: Self) {
        self.count = self.count.saturating_add(newer.count);
        self.last_observed = self.last_observed.max(newer.last_observed);
    }
}

/// Writes the isomorphic key of `e` (client-go's `getKey`), as [`Occurrence::isomorphic_key`]
/// does for an occurrence: the rule on events, which the tests hold occurrences to.
#[cfg(test)]
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

/// What an events.k8s.io/v1 write carries: the occurrence whose event it sends (a series'
/// first one), shared with the series cache, and the series the event carries (`None` for
/// the create of a single occurrence). Cheap to make and to drop (a reference count and a
/// few words): the writer builds the event ([`Occurrence::to_event`] with `series`) on the
/// write's own task, once per write, so the sink task that decides writes never builds one.
#[derive(Debug, Clone)]
pub(crate) struct PendingEvent {
    /// The occurrence whose event the write sends.
    pub first: Arc<Occurrence>,
    /// The series the sent event carries.
    pub series: Option<EventSeries>,
}

impl WriteSource for PendingEvent {
    type Event = Event;

    fn write_key(&self) -> WriteKey {
        self.first.write_key()
    }

    fn event(&self) -> Cow<'_, Event> {
        let mut event = self.first.to_event();
        event.series.clone_from(&self.series);
        Cow::Owned(event)
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
            source: std::sync::Arc::new(plain.clone()),
            op: WriteOp::Create,
            tally: Tally::default(),
        };
        let series_write = Write {
            source: std::sync::Arc::new(isomorphic.clone()),
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

    mod occurrence {
        use super::*;
        use proptest::prelude::*;

        /// A recorder call's arguments, from small alphabets so that two calls often agree
        /// on some fields and sometimes on all the merge identity looks at.
        #[derive(Debug, Clone)]
        struct Call {
            refs: [Option<String>; 14],
            has_related: bool,
            annotations: Option<BTreeMap<String, String>>,
            warning: bool,
            texts: [String; 5],
            secs: i64,
            name_offset: i128,
        }

        /// Field indices of [`Call::texts`].
        const REASON: usize = 0;
        const ACTION: usize = 1;
        const NOTE: usize = 2;
        const CONTROLLER: usize = 3;
        const INSTANCE: usize = 4;

        fn field() -> impl Strategy<Value = Option<String>> {
            prop_oneof![
                Just(None),
                Just(Some(String::new())),
                "[ab]{1,2}".prop_map(Some)
            ]
        }

        prop_compose! {
            fn call()(
                refs in proptest::array::uniform14(field()),
                has_related in any::<bool>(),
                annotations in proptest::option::of(
                    proptest::collection::btree_map("[ab]", "[ab]", 0..2),
                ),
                warning in any::<bool>(),
                texts in proptest::array::uniform5("[ab]{0,2}"),
                secs in 0i64..1_000_000,
                name_offset in 0i128..1_000_000_000,
            ) -> Call {
                Call { refs, has_related, annotations, warning, texts, secs, name_offset }
            }
        }

        /// `x` with the fields `mask` marks taken from `y` (each of the 23 with
        /// probability 1/8: most pairs differ in a few fields).
        fn mix(x: &Call, y: &Call, mask: &[bool]) -> Call {
            let mut m = mask.iter().copied();
            let mut take = || m.next().unwrap_or(false);
            let mut out = x.clone();
            for i in 0..14 {
                if take() {
                    out.refs[i].clone_from(&y.refs[i]);
                }
            }
            if take() {
                out.has_related = y.has_related;
            }
            if take() {
                out.annotations.clone_from(&y.annotations);
            }
            if take() {
                out.warning = y.warning;
            }
            for i in 0..5 {
                if take() {
                    out.texts[i].clone_from(&y.texts[i]);
                }
            }
            if take() {
                out.secs = y.secs;
            }
            if take() {
                out.name_offset = y.name_offset;
            }
            out
        }

        fn reference(f: &[Option<String>]) -> ObjectReference {
            ObjectReference {
                kind: f[0].clone(),
                namespace: f[1].clone(),
                name: f[2].clone(),
                uid: f[3].clone(),
                api_version: f[4].clone(),
                resource_version: f[5].clone(),
                field_path: f[6].clone(),
            }
        }

        /// The occurrence the recorder makes of `c`, and the event it made before
        /// occurrences were light (`make_event` of the same arguments).
        fn record(c: &Call) -> (Occurrence, Event) {
            let regarding = reference(&c.refs[..7]);
            let related = c.has_related.then(|| reference(&c.refs[7..]));
            let type_ = if c.warning {
                EventType::Warning
            } else {
                EventType::Normal
            };
            let t = Timestamp::from_second(c.secs).unwrap();
            let name_nanos = t.as_nanosecond() + c.name_offset;
            let reporter = Arc::new(Reporter {
                controller: c.texts[CONTROLLER].clone(),
                instance: c.texts[INSTANCE].clone(),
            });
            let spec = OccurrenceSpec {
                regarding: &regarding,
                related: related.as_ref(),
                type_,
                reason: &c.texts[REASON],
                action: &c.texts[ACTION],
            };
            let note = &c.texts[NOTE];
            let occ = Occurrence::new(
                spec,
                format_args!("{note}"),
                c.annotations.clone(),
                reporter,
                t,
                name_nanos,
            );
            let mut event = make_event(
                EventSpec {
                    regarding: regarding.clone(),
                    related: related.clone(),
                    annotations: c.annotations.clone(),
                    type_: type_.as_str(),
                    reason: &c.texts[REASON],
                    action: &c.texts[ACTION],
                    note: note.clone(),
                },
                &c.texts[CONTROLLER],
                &c.texts[INSTANCE],
                t,
                name_nanos,
            );
            let object_name = regarding.name.as_deref().unwrap_or("");
            let candidate = format!("{object_name}.{name_nanos:x}");
            if !herald_core::naming::is_dns1123_subdomain(&candidate) {
                // Not a valid name: both made a random UUID, each its own.
                let uuid = occ.field(NAME);
                assert_eq!(uuid.len(), 36, "{uuid}");
                assert_eq!(event.metadata.name.as_ref().map(String::len), Some(36));
                event.metadata.name = Some(uuid.to_string());
            }
            (occ, event)
        }

        fn bytes(write: impl FnOnce(&mut KeyBuilder<'_>)) -> Vec<u8> {
            let mut buf = Vec::new();
            write(&mut KeyBuilder::new(&mut buf));
            buf
        }

        /// The spam filter's key, from an event: the reporting controller and the regarding
        /// reference without its resourceVersion.
        fn spam_key_of_event(e: &Event) -> Vec<u8> {
            bytes(|k| {
                k.push(s(&e.reporting_controller));
                let f = ref_fields(e.regarding.as_ref());
                for (i, part) in f.into_iter().enumerate() {
                    if i != 5 {
                        k.push(part);
                    }
                }
            })
        }

        proptest! {
            /// A light occurrence stands for the whole event the recorder used to build: it
            /// builds exactly that event, and its isomorphic key, spam-filter key and queue
            /// identity are those of the event (so series, spam filter and queue merging
            /// decide as they did on whole events).
            #[test]
            fn occurrence_is_its_event(
                x in call(),
                y in call(),
                mask in proptest::collection::vec(proptest::bool::weighted(0.125), 23),
            ) {
                let z = mix(&x, &y, &mask);
                let (a, ea) = record(&x);
                let (b, eb) = record(&z);
                // Built again, the event is the same (the name is made once, even a UUID).
                prop_assert_eq!(&a.to_event(), &ea);
                prop_assert_eq!(&a.to_event(), &ea);
                prop_assert_eq!(&b.to_event(), &eb);
                prop_assert_eq!(a.note(), ea.note.as_deref().unwrap_or(""));
                // What orders its writes, without building the event.
                prop_assert_eq!(a.write_key(), crate::record::writer::write_key(&ea));
                prop_assert_eq!(b.write_key(), crate::record::writer::write_key(&eb));
                for ignore_rv in [false, true] {
                    for (o, e) in [(&a, &ea), (&b, &eb)] {
                        prop_assert_eq!(
                            bytes(|k| o.isomorphic_key(ignore_rv, k)),
                            bytes(|k| isomorphic_key(e, ignore_rv, k))
                        );
                    }
                }
                prop_assert_eq!(bytes(|k| a.spam_key(k)), spam_key_of_event(&ea));
                let same = identity(&ea) == identity(&eb)
                    && ea.metadata.annotations == eb.metadata.annotations;
                prop_assert_eq!(a.same_identity(&b), same);
                prop_assert_eq!(b.same_identity(&a), same);
                let hasher = DefaultHashBuilder::default();
                if same {
                    prop_assert_eq!(a.identity_hash(&hasher), b.identity_hash(&hasher));
                }
            }
        }

        /// A note given as a literal (`format_args!` with no arguments) is copied as it is.
        #[test]
        fn literal_note() {
            let c = Call {
                refs: Default::default(),
                has_related: false,
                annotations: None,
                warning: true,
                texts: Default::default(),
                secs: 0,
                name_offset: 0,
            };
            let (mut occ, _) = record(&c);
            let t = Timestamp::UNIX_EPOCH;
            let spec = OccurrenceSpec {
                regarding: &ObjectReference::default(),
                related: None,
                type_: EventType::Warning,
                reason: "R",
                action: "A",
            };
            occ = Occurrence::new(spec, format_args!("a literal"), None, occ.reporter, t, 0);
            assert_eq!(occ.note(), "a literal");
            assert_eq!(occ.to_event().note.as_deref(), Some("a literal"));
            assert_eq!(occ.to_event().reason.as_deref(), Some("R"));
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
