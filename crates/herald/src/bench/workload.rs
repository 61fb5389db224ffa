//! The requests of a bench run: the event bodies each workload creates, and the patches
//! that count repeats of them as client-go's recorder does (JSON either way).
//!
//! Every body and patch carries the annotation [`SENT_ANNOTATION`] = `"{run}:{unix nanos}"`,
//! the send time on the bench's clock, which watchers compare with their receipt time.

use clap::ValueEnum;
use serde::Serialize;

use super::encoding::Encoding;

/// The annotation that carries the run id and the send time of a bench event.
pub const SENT_ANNOTATION: &str = "herald.dev/bench-sent";

/// The shape of the events a bench run creates. Every request is a create of a new event;
/// the workload decides how alike the events are (which objects, reasons and messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Every event is about a different pod, with its own message.
    Unique,
    /// Every event has the same object, reason and message (what a correlator would count).
    Identical,
    /// Same object and reason, messages differ (what a correlator would aggregate).
    Similar,
    /// Ten pods in a crash loop, each repeating one message: a typical event storm.
    Storm,
}

/// What each request of a bench run does (`--verb`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    /// POST a new event (201 Created): a storm of distinct events, or a recorder's first
    /// occurrence of each.
    Create,
    /// PATCH the client's own event (200 OK) with a repeat's new count. On core/v1 it is the
    /// strategic-merge patch of `count`, `lastTimestamp` and `message` that client-go's
    /// `record` package (kubelet, most controllers) sends for each repeat it does not
    /// aggregate: in a storm of repeats most writes are these. On events.k8s.io/v1 it is a
    /// patch of `series` (count and lastObservedTime) per repeat, which kube-rs's Recorder
    /// sends as part of a merge patch of the whole event; client-go's `events` package
    /// sends its first and then one every 30 minutes. Each client creates its event before
    /// the load starts.
    Patch,
    /// Both, alternately: each client creates a new event, then patches its own event with
    /// a repeat's count, and so on (the writes of a soak).
    Mixed,
}

impl Verb {
    /// The verb's name, as `--verb` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Verb::Create => "create",
            Verb::Patch => "patch",
            Verb::Mixed => "mixed",
        }
    }

    /// The plural noun of the requests, for summaries and charts.
    pub fn noun(self) -> &'static str {
        match self {
            Verb::Create => "creates",
            Verb::Patch => "patches",
            Verb::Mixed => "writes",
        }
    }

    /// The past participle, for the progress line.
    pub fn done(self) -> &'static str {
        match self {
            Verb::Create => "created",
            Verb::Patch => "patched",
            Verb::Mixed => "written",
        }
    }

    /// Whether `status` answers a request of this verb with success: 201 Created for a
    /// create, 200 OK for a patch (either for mixed writes).
    pub fn succeeded(self, status: http::StatusCode) -> bool {
        match self {
            Verb::Create => status == http::StatusCode::CREATED,
            Verb::Patch => status == http::StatusCode::OK,
            Verb::Mixed => status == http::StatusCode::CREATED || status == http::StatusCode::OK,
        }
    }

    /// Whether this verb's clients patch an event of their own (created before the load).
    pub fn patches(self) -> bool {
        matches!(self, Verb::Patch | Verb::Mixed)
    }
}

/// The content type client-go sends its recorders' patches with.
pub const PATCH_CONTENT_TYPE: &str = "application/strategic-merge-patch+json";

/// The API group a bench run creates, watches and lists its events in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
pub enum Group {
    /// core/v1 (`/api/v1`): what kubectl, client-go's recorder and most tools use.
    #[value(name = "core")]
    #[serde(rename = "core")]
    Core,
    /// events.k8s.io/v1 (`/apis/events.k8s.io/v1`): the newer API, which client-go's
    /// `events` package and kube-rs's `Recorder` write; strictly validated.
    #[value(name = "events.k8s.io")]
    #[serde(rename = "events.k8s.io")]
    EventsV1,
}

impl Group {
    /// The group's name, as `--group` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Group::Core => "core",
            Group::EventsV1 => "events.k8s.io",
        }
    }

    /// The events collection of namespace `ns` in this group.
    pub fn collection(self, ns: &str) -> String {
        match self {
            Group::Core => format!("/api/v1/namespaces/{ns}/events"),
            Group::EventsV1 => format!("/apis/events.k8s.io/v1/namespaces/{ns}/events"),
        }
    }
}

/// Builds the JSON body of event number `seq` of client `client`, in `group`'s shape.
///
/// `sent_nanos` is the send time (unix nanoseconds), `now_rfc3339` the same instant as an
/// RFC 3339 timestamp with second precision for `firstTimestamp`/`lastTimestamp` (and, with
/// `.000000` added, `eventTime`).
#[allow(clippy::too_many_arguments)]
pub fn body(
    group: Group,
    workload: Workload,
    run: &str,
    namespace: &str,
    client: usize,
    seq: u64,
    sent_nanos: i128,
    now_rfc3339: &str,
) -> String {
    let (object, kind_type, reason, message) = shape(workload, client, seq);
    let meta = format!(
        r#""metadata":{{"name":"{name}","namespace":"{namespace}","annotations":{{{sent}}}}}"#,
        name = event_name(run, client, seq),
        sent = sent_annotation(run, sent_nanos),
    );
    let pod = format!(
        r#"{{"apiVersion":"v1","kind":"Pod","namespace":"{namespace}","name":"{object}"}}"#
    );
    match group {
        Group::Core => format!(
            concat!(
                r#"{{"apiVersion":"v1","kind":"Event",{meta},"involvedObject":{pod},"#,
                r#""reason":"{reason}","message":"{message}","type":"{kind_type}","#,
                r#""source":{{"component":"herald-bench"}},"firstTimestamp":"{now}","lastTimestamp":"{now}","count":1}}"#
            ),
            meta = meta,
            pod = pod,
            reason = reason,
            message = message,
            kind_type = kind_type,
            now = now_rfc3339,
        ),
        Group::EventsV1 => format!(
            concat!(
                r#"{{"apiVersion":"events.k8s.io/v1","kind":"Event",{meta},"regarding":{pod},"#,
                r#""reason":"{reason}","note":"{message}","type":"{kind_type}","action":"Bench","#,
                r#""reportingController":"herald.dev/bench","reportingInstance":"bench-{client}","#,
                r#""eventTime":"{micro}"}}"#
            ),
            meta = meta,
            pod = pod,
            reason = reason,
            message = message,
            kind_type = kind_type,
            client = client,
            micro = micro_time(now_rfc3339),
        ),
    }
}

/// A timestamp to the second (`…:05Z`) as a MicroTime (`…:05.000000Z`).
fn micro_time(rfc3339: &str) -> String {
    rfc3339.replace('Z', ".000000Z")
}

/// The object name, type, reason and message of event `seq` of `client` in `workload`, all
/// ready to go in a JSON string (the message's quotes escaped).
fn shape(
    workload: Workload,
    client: usize,
    seq: u64,
) -> (String, &'static str, &'static str, String) {
    match workload {
        Workload::Unique => (
            format!("bench-{client}-{seq}"),
            "Normal",
            "BenchCreated",
            format!("bench event {seq} from client {client}"),
        ),
        Workload::Identical => (
            "web-0".to_string(),
            "Warning",
            "BackOff",
            "Back-off restarting failed container app in pod web-0".to_string(),
        ),
        Workload::Similar => (
            "web-0".to_string(),
            "Warning",
            "FailedMount",
            format!(r#"MountVolume.SetUp failed for volume \"data-{seq}\": not found"#),
        ),
        Workload::Storm => {
            let pod = (seq as usize + client) % 10;
            (
                format!("crashloop-{pod}"),
                "Warning",
                "BackOff",
                format!("Back-off restarting failed container app in pod crashloop-{pod}"),
            )
        }
    }
}

/// The name of event `seq` of `client` in run `run`. A patching client's event is its
/// event 0.
pub fn event_name(run: &str, client: usize, seq: u64) -> String {
    format!("bench-{run}-{client}-{seq}")
}

/// The `annotations` member that carries the send time.
fn sent_annotation(run: &str, sent_nanos: i128) -> String {
    format!(r#""{SENT_ANNOTATION}":"{run}:{sent_nanos}""#)
}

/// The strategic-merge patch ([`PATCH_CONTENT_TYPE`]) that counts repeat `seq` (1, 2, …)
/// of `client`'s event, in `group`'s shape (see [`Verb::Patch`]): on core/v1 the new
/// `count` (`seq + 1`, the create counted 1), `lastTimestamp` and `message`; on
/// events.k8s.io/v1 the `series` with that count and `lastObservedTime`. As in client-go,
/// the count is the recorder's, not the server's: after a failed patch the next one skips
/// a number, so the stored counts add up to the successful patches only in a run without
/// failures. The send time goes in an annotation, as on creates, so watchers can time the
/// MODIFIED events; a recorder sends none, so each patch here also changes an annotation.
pub fn patch_body(
    group: Group,
    workload: Workload,
    run: &str,
    client: usize,
    seq: u64,
    sent_nanos: i128,
    now_rfc3339: &str,
) -> String {
    let meta = format!(
        r#""metadata":{{"annotations":{{{}}}}}"#,
        sent_annotation(run, sent_nanos)
    );
    let count = seq + 1;
    match group {
        Group::Core => {
            // A repeat keeps its event's message; similar events each bring their own.
            let of = if workload == Workload::Similar {
                seq
            } else {
                0
            };
            let (_, _, _, message) = shape(workload, client, of);
            format!(
                r#"{{{meta},"count":{count},"lastTimestamp":"{now_rfc3339}","message":"{message}"}}"#
            )
        }
        Group::EventsV1 => format!(
            r#"{{{meta},"series":{{"count":{count},"lastObservedTime":"{micro}"}}}}"#,
            micro = micro_time(now_rfc3339),
        ),
    }
}

/// Finds this run's send time (unix nanoseconds) in a raw watch record (a JSON line or a
/// protobuf frame) without decoding it: 1,000 watchers × 10,000 events/s is too many records
/// to parse on the bench side.
pub struct SentFinder {
    encoding: Encoding,
    /// What precedes the annotation's value.
    key: memchr::memmem::Finder<'static>,
    /// The value's start: `{run}:`.
    run: Vec<u8>,
}

impl SentFinder {
    /// A finder for the events of run `run` in records of `encoding`.
    pub fn new(encoding: Encoding, run: &str) -> Self {
        let key = match encoding {
            Encoding::Json => format!("\"{SENT_ANNOTATION}\":\"").into_bytes(),
            // A map entry of `annotations`: field 1 (the key) and the tag of field 2 (the
            // value, whose length follows).
            Encoding::Protobuf => {
                let mut k = vec![0x0a, SENT_ANNOTATION.len() as u8];
                k.extend_from_slice(SENT_ANNOTATION.as_bytes());
                k.push(0x12);
                k
            }
        };
        SentFinder {
            encoding,
            key: memchr::memmem::Finder::new(&key).into_owned(),
            run: format!("{run}:").into_bytes(),
        }
    }

    /// The send time in `record`; `None` when it is not an event of this run.
    pub fn sent_nanos(&self, record: &[u8]) -> Option<i128> {
        let rest = &record[self.key.find(record)? + self.key.needle().len()..];
        let value = match self.encoding {
            Encoding::Json => &rest[..memchr::memchr(b'"', rest)?],
            Encoding::Protobuf => {
                // A one-byte length: this run's values are far shorter than 128 bytes.
                let (&len, rest) = rest.split_first().filter(|(len, _)| **len < 0x80)?;
                rest.get(..usize::from(len))?
            }
        };
        std::str::from_utf8(value.strip_prefix(self.run.as_slice())?)
            .ok()?
            .parse()
            .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_count_repeats_in_each_group() {
        let core = |w, seq| {
            let p = patch_body(Group::Core, w, "r1", 3, seq, 42, "2026-01-01T00:00:05Z");
            serde_json::from_str::<serde_json::Value>(&p).unwrap()
        };
        let p = core(Workload::Unique, 1);
        assert_eq!(
            p,
            serde_json::json!({
                "metadata": {"annotations": {SENT_ANNOTATION: "r1:42"}},
                "count": 2,
                "lastTimestamp": "2026-01-01T00:00:05Z",
                "message": "bench event 0 from client 3",
            })
        );
        assert_eq!(core(Workload::Storm, 7)["count"], 8);
        assert_eq!(
            core(Workload::Storm, 7)["message"],
            core(Workload::Storm, 1)["message"]
        );
        // Similar events each bring their own message, quotes escaped.
        assert_eq!(
            core(Workload::Similar, 4)["message"],
            "MountVolume.SetUp failed for volume \"data-4\": not found"
        );
        let v1 = patch_body(
            Group::EventsV1,
            Workload::Unique,
            "r1",
            3,
            5,
            42,
            "2026-01-01T00:00:05Z",
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&v1).unwrap(),
            serde_json::json!({
                "metadata": {"annotations": {SENT_ANNOTATION: "r1:42"}},
                "series": {"count": 6, "lastObservedTime": "2026-01-01T00:00:05.000000Z"},
            })
        );
        assert_eq!(event_name("r1", 3, 0), "bench-r1-3-0");
        // What a watcher reads the send time from.
        assert_eq!(
            SentFinder::new(Encoding::Json, "r1").sent_nanos(v1.as_bytes()),
            Some(42)
        );
    }

    #[test]
    fn bodies_are_valid_json_and_carry_the_send_time() {
        for w in [
            Workload::Unique,
            Workload::Identical,
            Workload::Similar,
            Workload::Storm,
        ] {
            let v1 = body(
                Group::EventsV1,
                w,
                "r1",
                "ns",
                3,
                7,
                1_234_567,
                "2026-01-01T00:00:00Z",
            );
            let v: serde_json::Value = serde_json::from_str(&v1).unwrap();
            assert_eq!(v["apiVersion"], "events.k8s.io/v1");
            assert_eq!(v["eventTime"], "2026-01-01T00:00:00.000000Z");
            assert_eq!(v["metadata"]["annotations"][SENT_ANNOTATION], "r1:1234567");
            assert!(Encoding::Protobuf.create_body(v1).is_some());
            let b = body(
                Group::Core,
                w,
                "r1",
                "ns",
                3,
                7,
                1_234_567,
                "2026-01-01T00:00:00Z",
            );
            let v: serde_json::Value = serde_json::from_str(&b).unwrap();
            assert_eq!(v["metadata"]["name"], "bench-r1-3-7");
            assert_eq!(v["metadata"]["annotations"][SENT_ANNOTATION], "r1:1234567");
            let json = SentFinder::new(Encoding::Json, "r1");
            assert_eq!(json.sent_nanos(b.as_bytes()), Some(1_234_567));
            assert_eq!(
                SentFinder::new(Encoding::Json, "r2").sent_nanos(b.as_bytes()),
                None
            );
            let frame = Encoding::Protobuf.create_body(b.clone()).unwrap();
            let proto = SentFinder::new(Encoding::Protobuf, "r1");
            assert_eq!(proto.sent_nanos(&frame), Some(1_234_567));
            assert_eq!(
                SentFinder::new(Encoding::Protobuf, "r").sent_nanos(&frame),
                None
            );
            assert_eq!(proto.sent_nanos(b.as_bytes()), None);
        }
    }
}
