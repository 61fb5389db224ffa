//! [`EventBroadcasterAdapter`]: client-go's `NewEventBroadcasterAdapter` — events.k8s.io/v1
//! when the server serves it, core/v1 otherwise, behind one recorder type.

use std::fmt;

use k8s_openapi::api::core::v1::ObjectReference;

use super::broadcaster::{EventBroadcaster, EventBroadcasterOptions};
use super::recorder::EventRecorder;
use crate::record::{self, BroadcasterOptions, EventSource, EventType, KubeSink, RecordStats};

/// Which events API an [`EventBroadcasterAdapter`] records to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventsApiChoice {
    /// events.k8s.io/v1, with series ([`EventBroadcaster`]).
    EventsV1,
    /// core/v1, through [`record`](crate::record) (the server does not serve
    /// events.k8s.io/v1).
    CoreV1,
}

/// The broadcaster behind the adapter.
#[derive(Clone)]
enum Backend {
    EventsV1(EventBroadcaster),
    CoreV1(record::EventBroadcaster),
}

/// Picks the events API from the server's discovery, like client-go's
/// `NewEventBroadcasterAdapter`: events.k8s.io/v1 when `/apis/events.k8s.io/v1` lists
/// `events`, core/v1 otherwise (a discovery error is logged and also means core/v1). Then it
/// records to that API through `kube::Client`, and every [`AdaptedRecorder`] it makes writes
/// there.
///
/// Unlike client-go's adapter, which always builds a core/v1 broadcaster too, only the chosen
/// one exists (and so only its tasks run).
#[derive(Clone)]
pub struct EventBroadcasterAdapter {
    backend: Backend,
}

impl fmt::Debug for EventBroadcasterAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventBroadcasterAdapter")
            .field("api", &self.api())
            .finish()
    }
}

/// True when the server behind `client` serves events.k8s.io/v1 events (discovery); a
/// discovery error counts as "no" and is logged.
pub async fn serves_events_v1(client: &kube::Client) -> bool {
    match client.list_api_group_resources("events.k8s.io/v1").await {
        Ok(list) => list.resources.iter().any(|r| r.name == "events"),
        Err(e) => {
            tracing::info!(error = %e, "events.k8s.io/v1 not served; recording core/v1 events");
            false
        }
    }
}

impl EventBroadcasterAdapter {
    /// Probes discovery and starts recording to the API it picked, with default options.
    /// Must be called inside a tokio runtime.
    pub async fn new(client: kube::Client) -> Self {
        Self::with_options(
            client,
            EventBroadcasterOptions::default(),
            BroadcasterOptions::default(),
        )
        .await
    }

    /// [`new`](Self::new) with the options of either broadcaster (only the chosen one's are
    /// used).
    pub async fn with_options(
        client: kube::Client,
        events_v1: EventBroadcasterOptions,
        core_v1: BroadcasterOptions,
    ) -> Self {
        let api = if serves_events_v1(&client).await {
            EventsApiChoice::EventsV1
        } else {
            EventsApiChoice::CoreV1
        };
        Self::for_api(api, client, events_v1, core_v1)
    }

    /// Records to `api` without asking discovery.
    pub fn for_api(
        api: EventsApiChoice,
        client: kube::Client,
        events_v1: EventBroadcasterOptions,
        core_v1: BroadcasterOptions,
    ) -> Self {
        let sink = KubeSink::new(client);
        let backend = match api {
            EventsApiChoice::EventsV1 => {
                let b = EventBroadcaster::new(events_v1);
                b.start_recording_to_sink(sink);
                Backend::EventsV1(b)
            }
            EventsApiChoice::CoreV1 => {
                let b = record::EventBroadcaster::new(core_v1);
                b.start_recording_to_sink(sink);
                Backend::CoreV1(b)
            }
        };
        Self { backend }
    }

    /// The API this adapter records to.
    pub fn api(&self) -> EventsApiChoice {
        match self.backend {
            Backend::EventsV1(_) => EventsApiChoice::EventsV1,
            Backend::CoreV1(_) => EventsApiChoice::CoreV1,
        }
    }

    /// A recorder for `reporting_controller` running as `reporting_instance`. On core/v1 they
    /// become the event source (component and host).
    pub fn new_recorder(
        &self,
        reporting_controller: &str,
        reporting_instance: &str,
    ) -> AdaptedRecorder {
        match &self.backend {
            Backend::EventsV1(b) => {
                AdaptedRecorder::EventsV1(b.new_recorder(reporting_controller, reporting_instance))
            }
            Backend::CoreV1(b) => AdaptedRecorder::CoreV1(
                b.new_recorder(EventSource::new(reporting_controller, reporting_instance)),
            ),
        }
    }

    /// A snapshot of the chosen broadcaster's accounting.
    pub fn stats(&self) -> RecordStats {
        match &self.backend {
            Backend::EventsV1(b) => b.stats(),
            Backend::CoreV1(b) => b.stats(),
        }
    }

    /// Shuts the chosen broadcaster down (writing what it holds).
    pub async fn shutdown(&self) {
        match &self.backend {
            Backend::EventsV1(b) => b.shutdown().await,
            Backend::CoreV1(b) => b.shutdown().await,
        }
    }
}

/// A recorder of an [`EventBroadcasterAdapter`]: events.k8s.io/v1 or core/v1 behind one
/// type. On core/v1 the action and the related object are dropped (there is no field for
/// them), as client-go's `EventRecorderAdapter` does; the note becomes the message.
#[derive(Clone, Debug)]
pub enum AdaptedRecorder {
    /// Records events.k8s.io/v1 events.
    EventsV1(EventRecorder),
    /// Records core/v1 events.
    CoreV1(record::Recorder),
}

impl AdaptedRecorder {
    /// Records that `action` on `regarding` (and `related`) led to `reason`.
    pub fn eventf<K, R>(
        &self,
        regarding: &K,
        related: Option<&R>,
        type_: EventType,
        reason: &str,
        action: &str,
        note: fmt::Arguments<'_>,
    ) where
        K: kube::Resource,
        K::DynamicType: Default,
        R: kube::Resource,
        R::DynamicType: Default,
    {
        match self {
            AdaptedRecorder::EventsV1(r) => {
                r.eventf(regarding, related, type_, reason, action, note)
            }
            AdaptedRecorder::CoreV1(r) => r.eventf(regarding, type_, reason, note),
        }
    }

    /// [`eventf`](Self::eventf) for existing references.
    pub fn event_for_ref(
        &self,
        regarding: &ObjectReference,
        related: Option<&ObjectReference>,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) {
        match self {
            AdaptedRecorder::EventsV1(r) => {
                r.event_for_ref(regarding, related, type_, reason, action, note)
            }
            AdaptedRecorder::CoreV1(r) => r.event_for_ref(regarding, type_, reason, note),
        }
    }
}
