//! [`KubeSink`]: writes core/v1 and events.k8s.io/v1 events to any Kubernetes API server
//! through `kube::Client`.

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::api::events::v1::Event as EventsV1Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{EventSink, SinkError, SinkFuture};

/// Writes events with `POST …/namespaces/{ns}/events`, strategic-merge
/// `PATCH …/events/{name}` and `PUT`, like client-go's `EventSinkImpl` bound to all
/// namespaces. Works against kube-apiserver and herald-server alike.
///
/// One sink writes both APIs: core/v1 (`/api/v1/…/events`, for [`record`](crate::record))
/// and events.k8s.io/v1 (`/apis/events.k8s.io/v1/…/events`, for [`events`](crate::events),
/// where it is also named [`KubeEventsSink`](crate::events::KubeEventsSink)). An event
/// without a namespace goes to `default`.
///
/// Each method is one HTTP request; the recorder owns retries. kube errors are classified
/// into [`SinkError`]: a `Status` body keeps its code, reason, cause types and
/// `retryAfterSeconds`; an undecodable body is [`SinkError::UnexpectedObject`]; a request that
/// cannot be built is [`SinkError::RequestConstruction`]; everything else (connection
/// refused, timeouts, TLS) is [`SinkError::Transport`].
///
/// Note that a `kube::Client` built with kube's defaults already retries 429, 503 and 504
/// answers itself (honouring `Retry-After`, up to 15 times), like client-go's REST client
/// does; only what is left after that reaches the recorder's own retries. Set
/// `kube::Config::default_retry = false` to leave all retrying to the recorder.
#[derive(Clone)]
pub struct KubeSink {
    client: kube::Client,
    field_manager: Option<String>,
}

impl std::fmt::Debug for KubeSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeSink")
            .field("field_manager", &self.field_manager)
            .finish_non_exhaustive()
    }
}

impl KubeSink {
    /// A sink writing through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            field_manager: None,
        }
    }

    /// Sends `fieldManager=<name>` with every write (shows up in `managedFields`).
    pub fn with_field_manager(mut self, name: impl Into<String>) -> Self {
        self.field_manager = Some(name.into());
        self
    }

    fn api<E: KubeEvent>(&self, event: &E) -> Api<E> {
        let ns = event.meta().namespace.as_deref().unwrap_or("default");
        Api::namespaced(self.client.clone(), ns)
    }

    fn post_params(&self) -> PostParams {
        PostParams {
            field_manager: self.field_manager.clone(),
            ..PostParams::default()
        }
    }
}

/// An event type [`KubeSink`] writes.
trait KubeEvent:
    kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl KubeEvent for Event {}
impl KubeEvent for EventsV1Event {}

fn name_of<E: KubeEvent>(event: &E) -> Result<&str, SinkError> {
    event
        .meta()
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| SinkError::RequestConstruction("event has no name".into()))
}

/// Classifies a kube error for the recorder's retry decision.
pub(crate) fn classify(err: kube::Error) -> SinkError {
    match err {
        kube::Error::Api(status) => {
            let (cause_types, retry_after) = match &status.details {
                Some(d) => (
                    d.causes.iter().map(|c| c.reason.clone()).collect(),
                    (d.retry_after_seconds > 0)
                        .then(|| Duration::from_secs(u64::from(d.retry_after_seconds))),
                ),
                None => (Vec::new(), None),
            };
            SinkError::Status {
                code: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
                cause_types,
                retry_after,
            }
        }
        kube::Error::SerdeError(e) => SinkError::UnexpectedObject(e.to_string()),
        kube::Error::BuildRequest(e) => SinkError::RequestConstruction(e.to_string()),
        kube::Error::HttpError(e) => SinkError::RequestConstruction(e.to_string()),
        other => SinkError::Transport(other.to_string()),
    }
}

impl KubeSink {
    async fn create_any<E: KubeEvent>(&self, event: &E) -> Result<E, SinkError> {
        self.api(event)
            .create(&self.post_params(), event)
            .await
            .map_err(classify)
    }

    async fn update_any<E: KubeEvent>(&self, event: &E) -> Result<E, SinkError> {
        let name = name_of(event)?;
        self.api(event)
            .replace(name, &self.post_params(), event)
            .await
            .map_err(classify)
    }

    async fn patch_any<E: KubeEvent>(&self, event: &E, patch: &[u8]) -> Result<E, SinkError> {
        let name = name_of(event)?;
        let body: serde_json::Value = serde_json::from_slice(patch)
            .map_err(|e| SinkError::RequestConstruction(format!("patch is not JSON: {e}")))?;
        let params = PatchParams {
            field_manager: self.field_manager.clone(),
            ..PatchParams::default()
        };
        self.api(event)
            .patch(name, &params, &Patch::Strategic(body))
            .await
            .map_err(classify)
    }
}

impl EventSink for KubeSink {
    fn create<'a>(&'a self, event: &'a Event) -> SinkFuture<'a> {
        Box::pin(self.create_any(event))
    }

    fn update<'a>(&'a self, event: &'a Event) -> SinkFuture<'a> {
        Box::pin(self.update_any(event))
    }

    fn patch<'a>(&'a self, event: &'a Event, patch: &'a [u8]) -> SinkFuture<'a> {
        Box::pin(self.patch_any(event, patch))
    }
}

impl EventSink<EventsV1Event> for KubeSink {
    fn create<'a>(&'a self, event: &'a EventsV1Event) -> SinkFuture<'a, EventsV1Event> {
        Box::pin(self.create_any(event))
    }

    fn update<'a>(&'a self, event: &'a EventsV1Event) -> SinkFuture<'a, EventsV1Event> {
        Box::pin(self.update_any(event))
    }

    fn patch<'a>(
        &'a self,
        event: &'a EventsV1Event,
        patch: &'a [u8],
    ) -> SinkFuture<'a, EventsV1Event> {
        Box::pin(self.patch_any(event, patch))
    }
}
