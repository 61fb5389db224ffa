//! [`Recorder`]: a drop-in for `kube::runtime::events::Recorder` that records through
//! Herald's events.k8s.io/v1 pipeline.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType, Reporter};

use super::broadcaster::{EventBroadcaster, EventBroadcasterOptions};
use super::recorder::EventRecorder;
use crate::record::{EventType, KubeSink, RecordStats};

/// kube-rs's `Recorder`, with series, bounded memory, retries and accounting: the same
/// constructor (`Recorder::new(client, reporter)`) and the same
/// `publish(&kube::runtime::events::Event, &ObjectReference)`, so a kube-rs controller
/// switches by changing one import:
///
/// ```diff
/// -use kube::runtime::events::Recorder;
/// +use herald_runtime::events::Recorder;
///  use kube::runtime::events::{Event, EventType, Reporter};
/// ```
///
/// What changes behind it: kube-rs sends a merge patch of the whole event for every repeat
/// and keeps an unbounded map without retries; this recorder groups repeats into a series
/// (a create, one patch starting the series, then a heartbeat every 30 minutes and the final
/// count when the series ends or at [`shutdown`](Self::shutdown)), keeps at most 4096 series,
/// retries by error class and accounts for every occurrence ([`stats`](Self::stats)).
///
/// Differences to know:
/// - `publish` never waits for the API server: it queues the event and returns `Ok(())`
///   (failures are retried in the background, then counted as `failed` in the stats). It
///   never returns an error.
/// - The recorder owns a broadcaster and its tasks: create it inside a tokio runtime, once,
///   and clone it (clones share the pipeline, so series span reconciles; kube-rs's docs
///   suggest one recorder per reconcile, which here would start a pipeline each time). Call
///   [`shutdown`](Self::shutdown) before exiting to write the final counts.
/// - As kube-rs does, the isomorphic key takes the reference as given; `Resource::object_ref`
///   leaves out the resourceVersion, so repeats about a live object form a series.
///
/// ```no_run
/// use herald_runtime::events::Recorder; // was: kube::runtime::events::Recorder
/// use kube::runtime::events::{Event, EventType, Reporter};
/// use kube::Resource;
/// # use k8s_openapi::api::core::v1::Pod;
///
/// # async fn reconcile(client: kube::Client, pod: Pod) -> Result<(), kube::Error> {
/// let reporter = Reporter { controller: "my-controller".into(), instance: None };
/// let recorder = Recorder::new(client, reporter);
/// recorder
///     .publish(
///         &Event {
///             type_: EventType::Warning,
///             reason: "FailedMount".into(),
///             note: Some("volume \"data\" not ready".into()),
///             action: "Mounting".into(),
///             secondary: None,
///         },
///         &pod.object_ref(&()),
///     )
///     .await?;
/// recorder.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Recorder {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    broadcaster: EventBroadcaster,
    recorder: EventRecorder,
}

impl Recorder {
    /// A recorder writing events.k8s.io/v1 events through `client` as `reporter` (its
    /// `instance` defaults to the controller name, as in kube-rs), with default options.
    /// Must be called inside a tokio runtime.
    pub fn new(client: kube::Client, reporter: Reporter) -> Self {
        Self::with_options(client, reporter, EventBroadcasterOptions::default())
    }

    /// [`new`](Self::new) with Herald's options (series, retries, bounds, clock).
    pub fn with_options(
        client: kube::Client,
        reporter: Reporter,
        options: EventBroadcasterOptions,
    ) -> Self {
        let broadcaster = EventBroadcaster::new(options);
        broadcaster.start_recording_to_sink(KubeSink::new(client));
        let instance = reporter
            .instance
            .clone()
            .unwrap_or_else(|| reporter.controller.clone());
        let recorder = broadcaster.new_recorder(reporter.controller, instance);
        Self {
            inner: Arc::new(Inner {
                broadcaster,
                recorder,
            }),
        }
    }

    /// Records `ev` about `reference` (kube-rs's `publish`): `secondary` becomes `related`,
    /// the note defaults to empty. Queues without waiting and always returns `Ok(())` (see
    /// the type's documentation); the `Result` keeps kube-rs's signature.
    pub async fn publish(
        &self,
        ev: &KubeEvent,
        reference: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let type_ = match ev.type_ {
            KubeEventType::Normal => EventType::Normal,
            KubeEventType::Warning => EventType::Warning,
        };
        self.inner.recorder.event_for_ref(
            reference,
            ev.secondary.as_ref(),
            type_,
            &ev.reason,
            &ev.action,
            ev.note.as_deref().unwrap_or(""),
        );
        Ok(())
    }

    /// The broadcaster behind this recorder (for watchers, metrics and series stats).
    pub fn broadcaster(&self) -> &EventBroadcaster {
        &self.inner.broadcaster
    }

    /// A snapshot of the accounting (see [`EventBroadcaster::stats`]).
    pub fn stats(&self) -> RecordStats {
        self.inner.broadcaster.stats()
    }

    /// Writes what is queued and every series' final count (within the shutdown timeout),
    /// then stops the pipeline; later `publish` calls are counted as `dropped_shutdown`.
    pub async fn shutdown(&self) {
        self.inner.broadcaster.shutdown().await;
    }
}
