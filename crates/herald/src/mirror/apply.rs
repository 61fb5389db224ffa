//! The applier: takes the source's changes from the [queue](super::queue) in batches,
//! writes each event's newest state into the local store (marked as a copy), and records
//! the position once the batch is durable.
//!
//! - **Batches.** Whatever is waiting (at most [`MAX_BATCH`] changes) is one batch. Within
//!   it only the newest state of each event (by namespace/name) is written, up to
//!   [`CONCURRENCY`] events at once; writes of one event never overlap.
//! - **Position.** After every write of a batch has answered, the position of its last
//!   change is saved ([`PositionFile::save`]): a restart replays at most the batch in
//!   flight, and the copy's [uid and version rule](herald_server::registry::copy) makes the
//!   replay change nothing.
//! - **Failures.** A write the store refuses for what the event is (400, 403, 404, 422: an
//!   event herald's validation does not accept) is counted as `failed`, logged on one line
//!   (namespace, name, uid and the store's reason; never credentials), and skipped. One
//!   refused for the store's state (409 races, 429 at `--max-events`, 5xx) is retried with
//!   a backoff of [`RETRY_INITIAL`] doubling to [`RETRY_MAX`], for as long as it takes:
//!   meanwhile the queue fills and the reflector waits, so nothing is skipped silently.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt as _, StreamExt as _};
use herald_core::event::CoreEvent;
use herald_core::status::ApiError;
use herald_server::registry::{CopyOutcome, EventRegistry};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::metrics::MirrorMetrics;
use super::position::{Position, PositionFile};
use super::queue::{Change, ChangeKind};
use super::{SOURCE_ANNOTATION, VERSION_ANNOTATION};

/// The most changes one batch takes from the queue.
pub const MAX_BATCH: usize = 1024;
/// How many events of a batch are written at once.
pub const CONCURRENCY: usize = 32;
/// The first wait before a write the store refused for its state is retried.
pub const RETRY_INITIAL: Duration = Duration::from_millis(200);
/// The longest wait between retries of one write.
pub const RETRY_MAX: Duration = Duration::from_secs(10);

/// Where copies are written: the registry, or a fake in tests.
pub trait Target: Send + Sync + 'static {
    /// Stores the copy `event` ([`EventRegistry::upsert_copy`]'s contract).
    fn upsert(&self, event: CoreEvent) -> BoxFuture<'_, Result<CopyOutcome, ApiError>>;
}

impl Target for EventRegistry {
    fn upsert(&self, event: CoreEvent) -> BoxFuture<'_, Result<CopyOutcome, ApiError>> {
        self.upsert_copy(event, VERSION_ANNOTATION).boxed()
    }
}

/// Marks `event` as a copy from `source`: the annotations [`SOURCE_ANNOTATION`] (the
/// source's URL) and [`VERSION_ANNOTATION`] (its resourceVersion there).
pub fn mark(mut event: CoreEvent, source: &str) -> CoreEvent {
    let version = event.metadata.resource_version.take().unwrap_or_default();
    let annotations = event.metadata.annotations.get_or_insert_default();
    annotations.insert(SOURCE_ANNOTATION.to_owned(), source.to_owned());
    annotations.insert(VERSION_ANNOTATION.to_owned(), version);
    event
}

/// Whether the store refused a write for its own state (retried) rather than for the event.
fn is_transient(e: &ApiError) -> bool {
    e.code == 409 || e.code == 429 || e.code >= 500
}

/// Whether the applier carried on or was stopped.
enum Step {
    Done,
    Stopped,
}

/// The applier of one source (see the module docs).
pub struct Applier<T: ?Sized> {
    /// Where copies go.
    pub target: Arc<T>,
    /// Where the position is saved.
    pub position: PositionFile,
    /// The counters it keeps.
    pub metrics: Arc<MirrorMetrics>,
    /// The source's URL (the annotation, and the position's owner).
    pub source: String,
    /// The API group followed (for the position).
    pub group: String,
}

impl<T: Target + ?Sized> Applier<T> {
    /// Applies changes until the queue closes or `shutdown`.
    pub async fn run(self, mut rx: mpsc::UnboundedReceiver<Change>, shutdown: CancellationToken) {
        let mut saved = String::new();
        loop {
            let first = tokio::select! {
                _ = shutdown.cancelled() => return,
                c = rx.recv() => c,
            };
            let Some(first) = first else { return };
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(c) => batch.push(c),
                    Err(_) => break,
                }
            }
            if let Step::Stopped = self.apply(&batch, &shutdown).await {
                return;
            }
            let Some(last) = batch.last() else { continue };
            let position = batch
                .iter()
                .rev()
                .map(|c| c.position.as_str())
                .find(|p| !p.is_empty())
                .unwrap_or_default();
            if !position.is_empty() && position != saved {
                let p = Position {
                    source: self.source.clone(),
                    group: self.group.clone(),
                    resource_version: position.to_owned(),
                };
                match self.position.save(p).await {
                    Ok(()) => saved = position.to_owned(),
                    // The copy is written; only a restart would replay it (harmlessly).
                    Err(e) => {
                        tracing::warn!(error = %format!("{e:#}"), "mirror: cannot save the position")
                    }
                }
            }
            self.metrics.complete_as_of(last.received);
        }
    }

    /// Writes the newest state of every event `batch` changes.
    async fn apply<'a>(&self, batch: &'a [Change], shutdown: &CancellationToken) -> Step {
        // Later states of an event replace earlier ones.
        let mut newest: HashMap<(&str, &str), &CoreEvent> = HashMap::new();
        let mut put = |e: &'a CoreEvent| {
            let key = (
                e.metadata.namespace.as_deref().unwrap_or_default(),
                e.metadata.name.as_deref().unwrap_or_default(),
            );
            newest.insert(key, e);
        };
        for change in batch {
            match &change.kind {
                ChangeKind::Upsert(e) => put(e),
                ChangeKind::Relisted(list) => {
                    self.metrics.relisted();
                    tracing::info!(events = list.len(), resource_version = %change.position,
                        "mirror: listed the source; copying what is new or changed");
                    list.iter().for_each(&mut put);
                }
                ChangeKind::DeletedAtSource => self.metrics.count("kept", 1),
                ChangeKind::Bookmark => {}
            }
        }
        // Boxed, so that the stream's type names no closure (which would keep the spawned
        // future from being `Send` for every lifetime).
        let copies: Vec<BoxFuture<'_, Step>> = newest
            .into_values()
            .map(|e| self.copy(e, shutdown).boxed())
            .collect();
        let results: Vec<Step> = futures::stream::iter(copies)
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        if results.iter().any(|s| matches!(s, Step::Stopped)) {
            Step::Stopped
        } else {
            Step::Done
        }
    }

    /// Writes one event, retrying what may pass (see the module docs).
    async fn copy(&self, event: &CoreEvent, shutdown: &CancellationToken) -> Step {
        let marked = mark(event.clone(), &self.source);
        let mut wait = RETRY_INITIAL;
        let mut warned = false;
        loop {
            let err = match self.target.upsert(marked.clone()).await {
                Ok(outcome) => {
                    self.metrics.count(outcome.as_str(), 1);
                    return Step::Done;
                }
                Err(e) => e,
            };
            let meta = &event.metadata;
            let (ns, name, uid) = (
                meta.namespace.as_deref().unwrap_or_default(),
                meta.name.as_deref().unwrap_or_default(),
                meta.uid.as_deref().unwrap_or_default(),
            );
            if !is_transient(&err) {
                self.metrics.count("failed", 1);
                tracing::warn!(namespace = ns, name, uid, code = err.code, reason = %err.message,
                    "mirror: could not copy an event; it is left out");
                return Step::Done;
            }
            if !warned {
                warned = true;
                tracing::warn!(namespace = ns, name, uid, code = err.code, reason = %err.message,
                    "mirror: the store refused a copy for now; retrying until it takes it");
            }
            tokio::select! {
                _ = shutdown.cancelled() => return Step::Stopped,
                _ = tokio::time::sleep(wait) => {}
            }
            wait = (wait * 2).min(RETRY_MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use herald_core::status::Reason;
    use herald_runtime::cache::ReflectorStore;
    use herald_server::registry::copy::decide;

    use super::super::queue::queue;
    use super::*;

    /// A store of copies in a map, following the registry's rule ([`decide`]); it refuses
    /// events whose reason is `Invalid` (422), and the first `busy` writes with 429.
    #[derive(Default)]
    struct Fake {
        events: Mutex<HashMap<(String, String), CoreEvent>>,
        writes: Mutex<u64>,
        busy: Mutex<u32>,
    }

    impl Target for Fake {
        fn upsert(&self, event: CoreEvent) -> BoxFuture<'_, Result<CopyOutcome, ApiError>> {
            async move {
                {
                    let mut busy = self.busy.lock().unwrap();
                    if *busy > 0 {
                        *busy -= 1;
                        return Err(ApiError::new(429, Reason::TooManyRequests, "full"));
                    }
                }
                if event.reason.as_deref() == Some("Invalid") {
                    return Err(ApiError::new(422, Reason::Invalid, "invalid"));
                }
                let key = (
                    event.metadata.namespace.clone().unwrap(),
                    event.metadata.name.clone().unwrap(),
                );
                let mut events = self.events.lock().unwrap();
                let outcome = decide(events.get(&key), &event, VERSION_ANNOTATION);
                if outcome != CopyOutcome::Unchanged {
                    *self.writes.lock().unwrap() += 1;
                    events.insert(key, event);
                }
                Ok(outcome)
            }
            .boxed()
        }
    }

    fn ev(name: &str, uid: &str, rv: &str, count: i32) -> CoreEvent {
        let mut e = CoreEvent::default();
        e.metadata.namespace = Some("ns".into());
        e.metadata.name = Some(name.into());
        e.metadata.uid = Some(uid.into());
        e.metadata.resource_version = Some(rv.into());
        e.count = Some(count);
        e
    }

    struct Run {
        fake: Arc<Fake>,
        metrics: Arc<MirrorMetrics>,
        dir: tempfile::TempDir,
    }

    impl Run {
        fn new() -> Run {
            Run {
                fake: Arc::default(),
                metrics: Arc::new(MirrorMetrics::new()),
                dir: tempfile::tempdir().unwrap(),
            }
        }

        /// Feeds `changes` through a queue into an applier, and waits for it to finish.
        async fn feed(&self, changes: impl FnOnce(&super::super::queue::Sender)) {
            let (tx, rx) = queue();
            changes(&tx);
            drop(tx);
            let applier = Applier {
                target: self.fake.clone(),
                position: PositionFile::new(Some(self.dir.path())),
                metrics: self.metrics.clone(),
                source: "https://src:6443".into(),
                group: "v1".into(),
            };
            applier.run(rx, CancellationToken::new()).await;
        }

        fn position(&self) -> Option<String> {
            PositionFile::new(Some(self.dir.path())).load("https://src:6443", "v1")
        }

        fn copy(&self, name: &str) -> CoreEvent {
            let key = ("ns".to_string(), name.to_string());
            self.fake.events.lock().unwrap()[&key].clone()
        }

        fn len(&self) -> usize {
            self.fake.events.lock().unwrap().len()
        }
    }

    fn version(e: &CoreEvent) -> &str {
        &e.metadata.annotations.as_ref().unwrap()[VERSION_ANNOTATION]
    }

    #[tokio::test]
    async fn changes_become_marked_copies_and_the_position_follows() {
        let run = Run::new();
        run.feed(|tx| {
            tx.add(ev("a", "u1", "5", 1));
            tx.update(ev("a", "u1", "6", 2));
            tx.add(ev("b", "u2", "7", 1));
            ReflectorStore::<CoreEvent>::delete(tx, ev("b", "u2", "8", 1));
            ReflectorStore::<CoreEvent>::bookmark(tx, "9");
        })
        .await;
        let a = run.copy("a");
        assert_eq!(a.count, Some(2));
        assert_eq!(version(&a), "6");
        assert_eq!(
            a.metadata.annotations.as_ref().unwrap()[SOURCE_ANNOTATION],
            "https://src:6443"
        );
        assert!(a.metadata.resource_version.is_none());
        // Deleted at the source, kept here.
        assert_eq!(run.copy("b").metadata.uid.as_deref(), Some("u2"));
        assert_eq!(run.metrics.counted("kept"), 1);
        assert_eq!(run.position().as_deref(), Some("9"));
    }

    #[tokio::test]
    async fn a_replay_and_a_relist_rewrite_nothing() {
        let run = Run::new();
        let first = |tx: &super::super::queue::Sender| {
            tx.add(ev("a", "u1", "5", 1));
            tx.update(ev("a", "u1", "6", 3));
            tx.add(ev("b", "u2", "7", 1));
        };
        run.feed(first).await;
        let writes = *run.fake.writes.lock().unwrap();
        // A restart from an older position replays the same changes; a relist brings the
        // current state (b has gone at the source; c is new).
        run.feed(first).await;
        run.feed(|tx| {
            ReflectorStore::<CoreEvent>::replace(
                tx,
                vec![ev("a", "u1", "6", 3), ev("c", "u3", "10", 1)],
                "10",
            );
        })
        .await;
        assert_eq!(
            *run.fake.writes.lock().unwrap(),
            writes + 1,
            "only c is new"
        );
        assert_eq!(run.len(), 3, "b, missing at the source, is kept");
        assert_eq!(run.copy("a").count, Some(3));
        assert_eq!(run.position().as_deref(), Some("10"));
    }

    #[tokio::test]
    async fn a_new_uid_at_a_known_name_replaces_the_copy() {
        let run = Run::new();
        run.feed(|tx| tx.add(ev("a", "u1", "5", 4))).await;
        run.feed(|tx| ReflectorStore::<CoreEvent>::replace(tx, vec![ev("a", "u2", "3", 1)], "12"))
            .await;
        let a = run.copy("a");
        assert_eq!(a.metadata.uid.as_deref(), Some("u2"));
        assert_eq!(a.count, Some(1));
        assert_eq!(run.metrics.counted("replaced"), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn refused_events_are_counted_and_busy_stores_retried() {
        let run = Run::new();
        *run.fake.busy.lock().unwrap() = 3;
        run.feed(|tx| {
            let mut bad = ev("bad", "u9", "5", 1);
            bad.reason = Some("Invalid".into());
            tx.add(bad);
            tx.add(ev("good", "u1", "6", 1));
        })
        .await;
        assert_eq!(run.metrics.counted("failed"), 1);
        assert_eq!(run.copy("good").count, Some(1));
        assert_eq!(run.len(), 1);
        assert_eq!(*run.fake.busy.lock().unwrap(), 0, "the 429s were retried");
        assert_eq!(run.position().as_deref(), Some("6"));
    }
}
