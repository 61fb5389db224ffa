//! [`Recorder`]: the non-blocking call a controller makes to report an event.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use herald_core::clock::Clock;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;

use super::drop_log::{DropCause, DropLog};
use super::event::{EventSource, EventSpec, EventType, make_event, object_reference};
use super::queue::{IncomingQueue, Mergeable, Push};
use super::stats::Metrics;

/// Records events about Kubernetes objects. Cheap to clone; every clone feeds the same
/// [`EventBroadcaster`](super::EventBroadcaster).
///
/// Every method returns at once: the event is queued for the broadcaster's watchers and
/// sinks, or — when the queue is full of other events, or the broadcaster is shut down — it
/// is dropped, counted in [`RecordStats`](super::RecordStats) and logged (one summary line per
/// ten seconds at most, so a storm of drops does not flood the log). An event identical
/// to one still queued is merged into it (full queue or not), so storms are counted
/// rather than lost.
///
/// ```
/// # use herald_runtime::record::*;
/// # use k8s_openapi::api::core::v1::Pod;
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let broadcaster = EventBroadcaster::new(BroadcasterOptions::default());
/// let sink = MemorySink::new();
/// broadcaster.start_recording_to_sink(sink.clone());
/// let recorder = broadcaster.new_recorder(EventSource::new("my-controller", "node-1"));
///
/// let mut pod = Pod::default();
/// pod.metadata.name = Some("web-1".into());
/// pod.metadata.namespace = Some("prod".into());
/// recorder.event(&pod, EventType::Warning, "BackOff", "Back-off restarting failed container");
/// recorder.eventf(&pod, EventType::Normal, "Pulled", format_args!("pulled {} in {}s", "nginx", 3));
///
/// broadcaster.shutdown().await;
/// assert_eq!(sink.events().len(), 2);
/// # }
/// ```
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<RecorderInner>,
}

pub(crate) struct RecorderInner {
    pub(crate) intake: Intake<Event>,
    pub(crate) source: EventSource,
}

/// The recorder's side of a pipeline, shared by both recorders: it counts every occurrence,
/// refuses invalid types, stamps names and queues without blocking.
pub(crate) struct Intake<T> {
    /// Last nanosecond stamp used in an event name, shared by every recorder of a
    /// broadcaster: names stay unique even when the clock does not move between two events.
    pub(crate) last_name_nanos: Arc<AtomicI64>,
    /// Rate-limited warnings for drops, shared by every recorder of a broadcaster.
    pub(crate) drop_log: Arc<DropLog>,
    pub(crate) queue: Arc<IncomingQueue<T>>,
    pub(crate) metrics: Metrics,
    pub(crate) clock: Arc<dyn Clock>,
}

impl<T: Mergeable> Intake<T> {
    /// Counts one emitted occurrence. An invalid type (anything but exactly `Normal` or
    /// `Warning`) is counted as `dropped_invalid`, logged, and answered `None`; otherwise the
    /// clock is read once and the time and the event name's nanosecond stamp (strictly
    /// increasing per broadcaster) are returned.
    pub(crate) fn admit(&self, type_: &str, reason: &str) -> Option<(Timestamp, i128)> {
        self.metrics.emitted();
        if EventType::parse(type_).is_none() {
            self.metrics.dropped_invalid();
            tracing::error!(
                r#type = type_,
                reason,
                "Unsupported event type: only Normal and Warning are valid; event dropped"
            );
            return None;
        }
        let t = self.clock.now();
        // i64 nanoseconds cover the years 1678..2262; clamp outside.
        let now_nanos = i64::try_from(t.as_nanosecond()).unwrap_or(i64::MAX);
        let name_nanos = next_name_nanos(&self.last_name_nanos, now_nanos);
        Some((t, i128::from(name_nanos)))
    }

    /// Queues `item` without blocking; a merge, a full queue or a closed one is counted (and
    /// drops are logged, rate-limited).
    pub(crate) fn push(&self, item: T, reason: &str) {
        match self.queue.push(item) {
            Push::Queued => {}
            Push::Merged => self.metrics.merged(),
            Push::Full => {
                self.metrics.dropped_queue_full();
                self.drop_log.dropped(DropCause::QueueFull, reason);
            }
            Push::Closed => {
                self.metrics.dropped_shutdown();
                self.drop_log.dropped(DropCause::Shutdown, reason);
            }
        }
    }
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("source", &self.inner.source)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    pub(crate) fn new(inner: RecorderInner) -> Self {
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The source this recorder stamps on its events.
    pub fn source(&self) -> &EventSource {
        &self.inner.source
    }

    /// Records an event about `obj` with `message` used verbatim.
    pub fn event<K>(&self, obj: &K, type_: EventType, reason: &str, message: &str)
    where
        K: Resource,
        K::DynamicType: Default,
    {
        self.record(
            object_reference(obj, None),
            type_.as_str(),
            reason,
            message.to_string(),
            None,
        );
    }

    /// Records an event whose message is formatted at the call site:
    /// `recorder.eventf(&pod, Warning, "Failed", format_args!("pull {image}: {err}"))`.
    /// (Rust's formatting is checked at compile time, so client-go's `%!` artefacts cannot
    /// happen.)
    pub fn eventf<K>(&self, obj: &K, type_: EventType, reason: &str, message: fmt::Arguments<'_>)
    where
        K: Resource,
        K::DynamicType: Default,
    {
        self.record(
            object_reference(obj, None),
            type_.as_str(),
            reason,
            message.to_string(),
            None,
        );
    }

    /// Records an event carrying `annotations` on the Event object itself.
    pub fn annotated_event<K>(
        &self,
        obj: &K,
        annotations: BTreeMap<String, String>,
        type_: EventType,
        reason: &str,
        message: &str,
    ) where
        K: Resource,
        K::DynamicType: Default,
    {
        self.record(
            object_reference(obj, None),
            type_.as_str(),
            reason,
            message.to_string(),
            Some(annotations),
        );
    }

    /// Records an event about an existing object reference (for instance one with a
    /// `fieldPath` such as `spec.containers{web}`), used as is.
    pub fn event_for_ref(
        &self,
        reference: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: &str,
    ) {
        self.record(
            reference.clone(),
            type_.as_str(),
            reason,
            message.to_string(),
            None,
        );
    }

    /// Records an event whose type is only known as a string (from a command line or a
    /// config file). Anything but exactly `Normal` or `Warning` is dropped, counted as
    /// `dropped_invalid` and logged, as client-go does.
    pub fn event_with_type_str(
        &self,
        reference: &ObjectReference,
        annotations: Option<BTreeMap<String, String>>,
        type_: &str,
        reason: &str,
        message: &str,
    ) {
        self.record(
            reference.clone(),
            type_,
            reason,
            message.to_string(),
            annotations,
        );
    }

    fn record(
        &self,
        reference: ObjectReference,
        type_: &str,
        reason: &str,
        message: String,
        annotations: Option<BTreeMap<String, String>>,
    ) {
        let inner = &*self.inner;
        let Some((t, name_nanos)) = inner.intake.admit(type_, reason) else {
            return;
        };
        let event = make_event(
            EventSpec {
                reference,
                type_,
                reason,
                message,
                annotations,
            },
            &inner.source,
            t,
            name_nanos,
        );
        inner.intake.push(event, reason);
    }
}

/// `max(now, last + 1)`, stored as the new last: a strictly increasing stamp per broadcaster.
fn next_name_nanos(last: &AtomicI64, now: i64) -> i64 {
    let mut prev = last.load(Ordering::Relaxed);
    loop {
        let next = now.max(prev.saturating_add(1));
        match last.compare_exchange_weak(prev, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(p) => prev = p,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_stamps_strictly_increase() {
        let last = AtomicI64::new(0);
        assert_eq!(next_name_nanos(&last, 100), 100);
        assert_eq!(next_name_nanos(&last, 100), 101);
        assert_eq!(next_name_nanos(&last, 50), 102);
        assert_eq!(next_name_nanos(&last, 500), 500);
    }
}
