//! [`EventRecorder`]: the non-blocking call a controller makes to report an
//! events.k8s.io/v1 event.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;

use super::event::{Occurrence, OccurrenceSpec, Reporter};
use super::fake::{FakeEvent, FakeTarget};
use crate::record::recorder::Intake;
use crate::record::{EventType, object_reference};

/// Records events.k8s.io/v1 events about Kubernetes objects (client-go's
/// `tools/events.EventRecorder`). Cheap to clone; every clone feeds the same
/// [`EventBroadcaster`](super::EventBroadcaster).
///
/// Every method returns at once: the event is queued for the broadcaster's watchers and
/// sinks, or — when the queue is full of other events, or the broadcaster is shut down — it
/// is dropped, counted in the broadcaster's stats and logged (one summary line per ten
/// seconds at most). An occurrence of the same series as one still queued (same isomorphic
/// key and annotations; the note may differ, as in a series) is merged into it and counted
/// in its series; watchers see the queued occurrence once.
///
/// The `regarding` and `related` references are built like client-go's (kind, apiVersion,
/// namespace, name, uid and the object's resourceVersion).
///
/// ```
/// use herald_runtime::events::*;
/// use k8s_openapi::api::core::v1::{Node, Pod};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let broadcaster = EventBroadcaster::new(EventBroadcasterOptions::default());
/// let sink = MemorySink::new(); // KubeEventsSink::new(client) for a real API server
/// broadcaster.start_recording_to_sink(sink.clone());
/// let recorder = broadcaster.new_recorder("my-controller", "my-controller-7d4b9-xk2lp");
///
/// let mut pod = Pod::default();
/// pod.metadata.name = Some("web-1".into());
/// pod.metadata.namespace = Some("prod".into());
/// for _ in 0..3 {
///     recorder.eventf(&pod, None::<&Node>, EventType::Warning, "FailedMount", "Mounting",
///         format_args!("MountVolume.SetUp failed for volume {:?}", "config"));
/// }
/// broadcaster.shutdown().await; // writes the final series count
///
/// let stored = sink.events_v1();
/// assert_eq!(stored.len(), 1);
/// assert_eq!(stored[0].series.as_ref().map(|s| s.count), Some(3));
/// # }
/// ```
#[derive(Clone)]
pub struct EventRecorder {
    inner: Arc<RecorderInner>,
}

pub(crate) struct RecorderInner {
    pub(crate) target: Target,
    /// Shared with every occurrence this recorder makes.
    pub(crate) reporter: Arc<Reporter>,
}

/// Where a recorder's events go.
pub(crate) enum Target {
    /// A broadcaster's pipeline.
    Pipeline(Intake<Occurrence>),
    /// Lines of text on a channel ([`FakeRecorder`](super::FakeRecorder)).
    Fake(FakeTarget),
}

impl fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventRecorder")
            .field("reporting_controller", &self.inner.reporter.controller)
            .field("reporting_instance", &self.inner.reporter.instance)
            .finish_non_exhaustive()
    }
}

fn reference<K>(obj: &K) -> ObjectReference
where
    K: Resource,
    K::DynamicType: Default,
{
    object_reference(obj, None)
}

impl EventRecorder {
    pub(crate) fn new(inner: RecorderInner) -> Self {
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The `reportingController` this recorder stamps on its events.
    pub fn reporting_controller(&self) -> &str {
        &self.inner.reporter.controller
    }

    /// The `reportingInstance` this recorder stamps on its events.
    pub fn reporting_instance(&self) -> &str {
        &self.inner.reporter.instance
    }

    /// Records that `action` on `regarding` (and, optionally, on `related`) led to `reason`,
    /// with a note formatted at the call site (client-go's `Eventf`):
    /// `recorder.eventf(&pod, Some(&node), EventType::Warning, "FailedScheduling", "Scheduling",
    /// format_args!("0/{n} nodes are available"))`.
    pub fn eventf<K, R>(
        &self,
        regarding: &K,
        related: Option<&R>,
        type_: EventType,
        reason: &str,
        action: &str,
        note: fmt::Arguments<'_>,
    ) where
        K: Resource,
        K::DynamicType: Default,
        R: Resource,
        R::DynamicType: Default,
    {
        let related = related.map(reference);
        self.record(
            &reference(regarding),
            related.as_ref(),
            None,
            type_.as_str(),
            reason,
            action,
            note,
        );
    }

    /// [`eventf`](Self::eventf) with `annotations` on the Event object itself (client-go's
    /// `AnnotatedEventf`). Annotations are not part of the isomorphic key: a series keeps
    /// those of its first occurrence.
    #[allow(clippy::too_many_arguments)]
    pub fn annotated_eventf<K, R>(
        &self,
        regarding: &K,
        related: Option<&R>,
        annotations: BTreeMap<String, String>,
        type_: EventType,
        reason: &str,
        action: &str,
        note: fmt::Arguments<'_>,
    ) where
        K: Resource,
        K::DynamicType: Default,
        R: Resource,
        R::DynamicType: Default,
    {
        let related = related.map(reference);
        self.record(
            &reference(regarding),
            related.as_ref(),
            Some(annotations),
            type_.as_str(),
            reason,
            action,
            note,
        );
    }

    /// Records an event about existing references, used as they are (for instance with a
    /// `fieldPath` such as `spec.containers{web}`).
    pub fn event_for_ref(
        &self,
        regarding: &ObjectReference,
        related: Option<&ObjectReference>,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) {
        self.record(
            regarding,
            related,
            None,
            type_.as_str(),
            reason,
            action,
            format_args!("{note}"),
        );
    }

    /// Records an event whose type is only known as a string (from a command line or a config
    /// file). Anything but exactly `Normal` or `Warning` is dropped, counted as
    /// `dropped_invalid` and logged, as client-go does.
    #[allow(clippy::too_many_arguments)]
    pub fn event_with_type_str(
        &self,
        regarding: &ObjectReference,
        related: Option<&ObjectReference>,
        annotations: Option<BTreeMap<String, String>>,
        type_: &str,
        reason: &str,
        action: &str,
        note: &str,
    ) {
        self.record(
            regarding,
            related,
            annotations,
            type_,
            reason,
            action,
            format_args!("{note}"),
        );
    }

    /// Queues one occurrence (or hands it to the fake target). The occurrence keeps the
    /// arguments, not an Event: a sink's writer builds the Event only for a write that sends it.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        regarding: &ObjectReference,
        related: Option<&ObjectReference>,
        annotations: Option<BTreeMap<String, String>>,
        type_: &str,
        reason: &str,
        action: &str,
        note: fmt::Arguments<'_>,
    ) {
        let inner = &*self.inner;
        let intake = match &inner.target {
            Target::Pipeline(intake) => intake,
            Target::Fake(fake) => {
                fake.send(&FakeEvent {
                    regarding,
                    related,
                    annotations: annotations.as_ref(),
                    type_,
                    reason,
                    action,
                    note: &note.to_string(),
                });
                return;
            }
        };
        let Some((t, name_nanos)) = intake.admit(type_, reason) else {
            return;
        };
        // `admit` let only the two valid types through.
        let Some(type_) = EventType::parse(type_) else {
            return;
        };
        let spec = OccurrenceSpec {
            regarding,
            related,
            type_,
            reason,
            action,
        };
        let occ = Occurrence::new(
            spec,
            note,
            annotations,
            inner.reporter.clone(),
            t,
            name_nanos,
        );
        intake.push(occ, reason);
    }
}
