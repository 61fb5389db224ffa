//! The bounded queue between the source's reflector and the applier: every change the
//! reflector observes, in order, with the source resourceVersion it brings the copy to.

use std::sync::{Arc, Mutex};

use herald_core::event::{CoreEvent, EventsV1Event};
use herald_runtime::cache::ReflectorStore;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::time::Instant;

/// How many watch changes may wait for the applier. At the bound the reflector stops
/// reading its watch (back-pressure through [`ReflectorStore::ready`]) until the applier
/// catches up; the source's list results (one entry each, however long) and the changes
/// handed over without waiting for room are not counted.
pub const QUEUE_CAPACITY: usize = 4096;

/// An event type the mirror can follow: core/v1 events, or events.k8s.io/v1 ones converted
/// to the core/v1 shape herald stores.
pub trait SourceEvent: kube::Resource + Send + Sync + 'static {
    /// This event as core/v1, metadata (uid, resourceVersion…) unchanged.
    fn into_core(self) -> CoreEvent;
}

impl SourceEvent for CoreEvent {
    fn into_core(self) -> CoreEvent {
        self
    }
}

impl SourceEvent for EventsV1Event {
    fn into_core(self) -> CoreEvent {
        herald_core::event::convert::events_v1_to_core(self)
    }
}

/// What one change asks of the copy.
#[derive(Debug)]
pub enum ChangeKind {
    /// An event was added or modified at the source: this is its state.
    Upsert(Box<CoreEvent>),
    /// An event was deleted (or expired) at the source. The copy keeps it.
    DeletedAtSource,
    /// The source has reached the change's position (a watch bookmark).
    Bookmark,
    /// A (re)list: every event the source holds. Events missing from it are kept.
    Relisted(Vec<CoreEvent>),
}

/// One change from the source.
#[derive(Debug)]
pub struct Change {
    /// What to do.
    pub kind: ChangeKind,
    /// The source resourceVersion the copy is at once this change is applied (`""` when
    /// the source did not say).
    pub position: String,
    /// When the change arrived from the source.
    pub received: Instant,
    /// Its room in the queue, given back once it is applied.
    _permit: Option<OwnedSemaphorePermit>,
}

/// The reflector's side of the queue.
pub struct Sender {
    tx: mpsc::UnboundedSender<Change>,
    room: Arc<Semaphore>,
    /// The room [`ReflectorStore::ready`] took for the next change.
    reserved: Mutex<Option<OwnedSemaphorePermit>>,
}

/// A queue of at most [`QUEUE_CAPACITY`] watch changes (see there).
pub fn queue() -> (Sender, mpsc::UnboundedReceiver<Change>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let sender = Sender {
        tx,
        room: Arc::new(Semaphore::new(QUEUE_CAPACITY)),
        reserved: Mutex::new(None),
    };
    (sender, rx)
}

impl Sender {
    fn send(&self, kind: ChangeKind, position: String) {
        let permit = self
            .reserved
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        // The applier has stopped (shutdown): nothing is waiting for the change.
        let _ = self.tx.send(Change {
            kind,
            position,
            received: Instant::now(),
            _permit: permit,
        });
    }

    fn upsert<K: SourceEvent>(&self, obj: K) {
        let e = obj.into_core();
        let position = e.metadata.resource_version.clone().unwrap_or_default();
        self.send(ChangeKind::Upsert(Box::new(e)), position);
    }
}

impl<K: SourceEvent> ReflectorStore<K> for Sender {
    fn add(&self, obj: K) {
        self.upsert(obj);
    }

    fn update(&self, obj: K) {
        self.upsert(obj);
    }

    fn delete(&self, obj: K) {
        let position = obj.meta().resource_version.clone().unwrap_or_default();
        self.send(ChangeKind::DeletedAtSource, position);
    }

    fn replace(&self, list: Vec<K>, resource_version: &str) {
        let events = list.into_iter().map(SourceEvent::into_core).collect();
        self.send(ChangeKind::Relisted(events), resource_version.to_owned());
    }

    fn bookmark(&self, resource_version: &str) {
        self.send(ChangeKind::Bookmark, resource_version.to_owned());
    }

    async fn ready(&self) {
        if let Ok(permit) = self.room.clone().acquire_owned().await {
            *self.reserved.lock().unwrap_or_else(|e| e.into_inner()) = Some(permit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn events_v1_changes_arrive_as_core_events_with_their_identity() {
        let (tx, mut rx) = queue();
        let mut e = EventsV1Event::default();
        e.metadata.namespace = Some("ns".into());
        e.metadata.name = Some("a".into());
        e.metadata.uid = Some("u1".into());
        e.metadata.resource_version = Some("41".into());
        e.reason = Some("Pulled".into());
        e.deprecated_count = Some(3);
        ReflectorStore::<EventsV1Event>::ready(&tx).await;
        tx.add(e.clone());
        ReflectorStore::<EventsV1Event>::replace(&tx, vec![e], "50");
        let first = rx.recv().await.unwrap();
        assert_eq!(first.position, "41");
        let ChangeKind::Upsert(core) = first.kind else {
            panic!("{:?}", first.kind)
        };
        assert_eq!(core.metadata.uid.as_deref(), Some("u1"));
        assert_eq!(core.metadata.resource_version.as_deref(), Some("41"));
        assert_eq!(core.reason.as_deref(), Some("Pulled"));
        assert_eq!(core.count, Some(3));
        let second = rx.recv().await.unwrap();
        assert_eq!(second.position, "50");
        assert!(matches!(second.kind, ChangeKind::Relisted(ref l) if l.len() == 1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_holds_the_watch_back() {
        let (tx, mut rx) = queue();
        for i in 0..QUEUE_CAPACITY {
            ReflectorStore::<CoreEvent>::ready(&tx).await;
            ReflectorStore::<CoreEvent>::bookmark(&tx, &i.to_string());
        }
        let waiting = ReflectorStore::<CoreEvent>::ready(&tx);
        tokio::pin!(waiting);
        assert!(
            futures::poll!(waiting.as_mut()).is_pending(),
            "no room at the bound"
        );
        // Applying a change gives its room back.
        drop(rx.recv().await);
        waiting.await;
    }
}
