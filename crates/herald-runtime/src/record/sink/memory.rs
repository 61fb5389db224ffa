//! An in-process event store that behaves like the events API, for tests and examples.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::api::events::v1::Event as EventsV1Event;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{EventSink, SinkError, SinkFuture};

/// Which sink method was called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SinkOp {
    /// [`EventSink::create`].
    Create,
    /// [`EventSink::update`].
    Update,
    /// [`EventSink::patch`].
    Patch,
}

/// Which events API a [`MemorySink`] call went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventsApi {
    /// core/v1 `Event` (the [`record`](crate::record) recorder).
    CoreV1,
    /// events.k8s.io/v1 `Event` (the [`events`](crate::events) recorder).
    EventsV1,
}

/// One call made to a [`MemorySink`], as recorded in its call log.
#[derive(Debug, Clone, PartialEq)]
pub struct SinkCall {
    /// The method.
    pub op: SinkOp,
    /// The API it went to.
    pub api: EventsApi,
    /// The event's namespace.
    pub namespace: String,
    /// The event's name.
    pub name: String,
    /// The count the call carried: core/v1, the event's `count` or the patch's `count`;
    /// events.k8s.io/v1, the event's or the patch's `series.count`.
    pub count: Option<i32>,
    /// The patch bytes, for patches.
    pub patch: Option<Vec<u8>>,
    /// Whether the call succeeded.
    pub ok: bool,
}

type FaultFn = dyn Fn(&SinkCall) -> Option<SinkError> + Send + Sync;

/// An in-process [`EventSink`] for both events APIs: creates, replaces and patches
/// (strategic merge, which for both Event types is a JSON merge patch: neither has
/// merge-keyed lists, and `null` removes a field) events held in memory, answering 409
/// AlreadyExists and 404 NotFound like the API server. core/v1 events
/// ([`events`](Self::events)) and events.k8s.io/v1 events ([`events_v1`](Self::events_v1))
/// are kept apart, each in its own store; both share one call log and one resourceVersion
/// sequence.
///
/// Bound: unbounded — it keeps every event and every call it saw. It is meant for tests,
/// examples and short-lived tools, not for long-running processes.
///
/// Faults can be injected with [`MemorySink::with_faults`] to exercise the recorder's retries.
#[derive(Clone, Default)]
pub struct MemorySink {
    inner: Arc<Mutex<State>>,
    faults: Option<Arc<FaultFn>>,
}

#[derive(Default)]
struct State {
    events: BTreeMap<(String, String), Event>,
    events_v1: BTreeMap<(String, String), EventsV1Event>,
    calls: Vec<SinkCall>,
    revision: u64,
}

/// An event type a [`MemorySink`] stores.
trait Stored: kube::Resource + Serialize + DeserializeOwned + Clone {
    const API: EventsApi;
    fn store(st: &mut State) -> &mut BTreeMap<(String, String), Self>;
    /// The count the event carries (see [`SinkCall::count`]).
    fn count(&self) -> Option<i32>;
    /// The count a patch carries.
    fn patch_count(patch: &serde_json::Value) -> Option<i32>;
}

fn as_i32(v: Option<&serde_json::Value>) -> Option<i32> {
    v.and_then(serde_json::Value::as_i64)
        .and_then(|c| i32::try_from(c).ok())
}

impl Stored for Event {
    const API: EventsApi = EventsApi::CoreV1;
    fn store(st: &mut State) -> &mut BTreeMap<(String, String), Self> {
        &mut st.events
    }
    fn count(&self) -> Option<i32> {
        self.count
    }
    fn patch_count(patch: &serde_json::Value) -> Option<i32> {
        as_i32(patch.get("count"))
    }
}

impl Stored for EventsV1Event {
    const API: EventsApi = EventsApi::EventsV1;
    fn store(st: &mut State) -> &mut BTreeMap<(String, String), Self> {
        &mut st.events_v1
    }
    fn count(&self) -> Option<i32> {
        self.series.as_ref().map(|s| s.count)
    }
    fn patch_count(patch: &serde_json::Value) -> Option<i32> {
        as_i32(patch.get("series").and_then(|s| s.get("count")))
    }
}

impl std::fmt::Debug for MemorySink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.lock();
        f.debug_struct("MemorySink")
            .field("events", &st.events.len())
            .field("events_v1", &st.events_v1.len())
            .field("calls", &st.calls.len())
            .finish()
    }
}

impl MemorySink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same store, but every call is first shown to `fault`; when it returns an error,
    /// the call fails with it (and is logged as failed) without touching the store.
    pub fn with_faults(
        &self,
        fault: impl Fn(&SinkCall) -> Option<SinkError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            inner: self.inner.clone(),
            faults: Some(Arc::new(fault)),
        }
    }

    /// Every stored event, ordered by namespace and name.
    pub fn events(&self) -> Vec<Event> {
        self.lock().events.values().cloned().collect()
    }

    /// The stored event `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Event> {
        self.lock()
            .events
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Every stored events.k8s.io/v1 event, ordered by namespace and name.
    pub fn events_v1(&self) -> Vec<EventsV1Event> {
        self.lock().events_v1.values().cloned().collect()
    }

    /// The stored events.k8s.io/v1 event `namespace/name`.
    pub fn get_v1(&self, namespace: &str, name: &str) -> Option<EventsV1Event> {
        self.lock()
            .events_v1
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Every call made so far, in order.
    pub fn calls(&self) -> Vec<SinkCall> {
        self.lock().calls.clone()
    }

    /// How many calls of `op` were made (successful or not).
    pub fn count_calls(&self, op: SinkOp) -> usize {
        self.lock().calls.iter().filter(|c| c.op == op).count()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn call<E: Stored>(&self, op: SinkOp, event: &E, patch: Option<&[u8]>) -> Result<E, SinkError> {
        let namespace = event.meta().namespace.clone().unwrap_or_default();
        let name = event.meta().name.clone().unwrap_or_default();
        let count = match patch {
            Some(p) => serde_json::from_slice::<serde_json::Value>(p)
                .ok()
                .and_then(|v| E::patch_count(&v)),
            None => event.count(),
        };
        let mut call = SinkCall {
            op,
            api: E::API,
            namespace: namespace.clone(),
            name: name.clone(),
            count,
            patch: patch.map(<[u8]>::to_vec),
            ok: false,
        };
        let fault = self.faults.as_ref().and_then(|f| f(&call));
        let mut st = self.lock();
        let result = match fault {
            Some(err) => Err(err),
            None => apply(&mut st, op, namespace, name, event, patch),
        };
        call.ok = result.is_ok();
        st.calls.push(call);
        result
    }
}

fn apply<E: Stored>(
    st: &mut State,
    op: SinkOp,
    namespace: String,
    name: String,
    event: &E,
    patch: Option<&[u8]>,
) -> Result<E, SinkError> {
    if name.is_empty() {
        return Err(SinkError::status(
            422,
            "Invalid",
            "Event \"\" is invalid: metadata.name: Required value: name or generateName is required",
        ));
    }
    let key = (namespace, name);
    st.revision += 1;
    let rv = st.revision.to_string();
    let store = E::store(st);
    match op {
        SinkOp::Create => {
            if store.contains_key(&key) {
                return Err(SinkError::status(
                    409,
                    "AlreadyExists",
                    format!("events \"{}\" already exists", key.1),
                ));
            }
            let mut stored = event.clone();
            stored.meta_mut().resource_version = Some(rv);
            store.insert(key, stored.clone());
            Ok(stored)
        }
        SinkOp::Update => {
            let mut stored = event.clone();
            stored.meta_mut().resource_version = Some(rv);
            store.insert(key, stored.clone());
            Ok(stored)
        }
        SinkOp::Patch => {
            let Some(existing) = store.get(&key) else {
                return Err(SinkError::status(
                    404,
                    "NotFound",
                    format!("events \"{}\" not found", key.1),
                ));
            };
            let patch: serde_json::Value = serde_json::from_slice(patch.unwrap_or(b"{}"))
                .map_err(|e| SinkError::status(400, "BadRequest", e.to_string()))?;
            let mut doc = serde_json::to_value(existing)
                .map_err(|e| SinkError::UnexpectedObject(e.to_string()))?;
            json_patch::merge(&mut doc, &patch);
            let mut stored: E = serde_json::from_value(doc)
                .map_err(|e| SinkError::status(422, "Invalid", e.to_string()))?;
            stored.meta_mut().resource_version = Some(rv);
            store.insert(key, stored.clone());
            Ok(stored)
        }
    }
}

impl EventSink for MemorySink {
    fn create<'a>(&'a self, event: &'a Event) -> SinkFuture<'a> {
        Box::pin(async move { self.call(SinkOp::Create, event, None) })
    }

    fn update<'a>(&'a self, event: &'a Event) -> SinkFuture<'a> {
        Box::pin(async move { self.call(SinkOp::Update, event, None) })
    }

    fn patch<'a>(&'a self, event: &'a Event, patch: &'a [u8]) -> SinkFuture<'a> {
        Box::pin(async move { self.call(SinkOp::Patch, event, Some(patch)) })
    }
}

impl EventSink<EventsV1Event> for MemorySink {
    fn create<'a>(&'a self, event: &'a EventsV1Event) -> SinkFuture<'a, EventsV1Event> {
        Box::pin(async move { self.call(SinkOp::Create, event, None) })
    }

    fn update<'a>(&'a self, event: &'a EventsV1Event) -> SinkFuture<'a, EventsV1Event> {
        Box::pin(async move { self.call(SinkOp::Update, event, None) })
    }

    fn patch<'a>(
        &'a self,
        event: &'a EventsV1Event,
        patch: &'a [u8],
    ) -> SinkFuture<'a, EventsV1Event> {
        Box::pin(async move { self.call(SinkOp::Patch, event, Some(patch)) })
    }
}
