//! The event bodies each workload creates (core/v1 Events, JSON).
//!
//! Every body carries the annotation [`SENT_ANNOTATION`] = `"{run}:{unix nanos}"`, the send
//! time on the bench's clock, which watchers compare with their receipt time.

use clap::ValueEnum;
use serde::Serialize;

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

/// Builds the JSON body of event number `seq` of client `client`.
///
/// `sent_nanos` is the send time (unix nanoseconds), `now_rfc3339` the same instant as an
/// RFC 3339 timestamp with second precision for `firstTimestamp`/`lastTimestamp`.
pub fn body(
    workload: Workload,
    run: &str,
    namespace: &str,
    client: usize,
    seq: u64,
    sent_nanos: i128,
    now_rfc3339: &str,
) -> String {
    let (object, kind_type, reason, message) = match workload {
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
            format!("MountVolume.SetUp failed for volume \"data-{seq}\": not found"),
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
    };
    format!(
        concat!(
            r#"{{"apiVersion":"v1","kind":"Event","metadata":{{"name":"bench-{run}-{client}-{seq}","#,
            r#""namespace":"{ns}","annotations":{{"{ann}":"{run}:{sent}"}}}},"#,
            r#""involvedObject":{{"apiVersion":"v1","kind":"Pod","namespace":"{ns}","name":"{object}"}},"#,
            r#""reason":"{reason}","message":"{message}","type":"{kind_type}","#,
            r#""source":{{"component":"herald-bench"}},"firstTimestamp":"{now}","lastTimestamp":"{now}","count":1}}"#
        ),
        run = run,
        client = client,
        seq = seq,
        ns = namespace,
        ann = SENT_ANNOTATION,
        sent = sent_nanos,
        object = object,
        reason = reason,
        message = message.replace('"', "\\\""),
        kind_type = kind_type,
        now = now_rfc3339,
    )
}

/// Finds this run's send time (unix nanoseconds) in a raw watch line, without a full JSON
/// parse (1,000 watchers × 10,000 events/s is too many lines to parse on the bench side).
/// `None` when the line is not an `ADDED` of this run.
pub fn sent_nanos_in(line: &[u8], marker: &memchr::memmem::Finder<'_>) -> Option<i128> {
    let at = marker.find(line)? + marker.needle().len();
    let rest = &line[at..];
    let end = memchr::memchr(b'"', rest)?;
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

/// The byte string that precedes the send time of this run's events in a watch line.
pub fn marker(run: &str) -> String {
    format!("\"{SENT_ANNOTATION}\":\"{run}:")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_valid_json_and_carry_the_send_time() {
        for w in [
            Workload::Unique,
            Workload::Identical,
            Workload::Similar,
            Workload::Storm,
        ] {
            let b = body(w, "r1", "ns", 3, 7, 1_234_567, "2026-01-01T00:00:00Z");
            let v: serde_json::Value = serde_json::from_str(&b).unwrap();
            assert_eq!(v["metadata"]["name"], "bench-r1-3-7");
            assert_eq!(v["metadata"]["annotations"][SENT_ANNOTATION], "r1:1234567");
            let m = marker("r1");
            let f = memchr::memmem::Finder::new(m.as_bytes());
            assert_eq!(sent_nanos_in(b.as_bytes(), &f), Some(1_234_567));
            let other = memchr::memmem::Finder::new(b"\"herald.dev/bench-sent\":\"r2:");
            assert_eq!(sent_nanos_in(b.as_bytes(), &other), None);
        }
    }
}
