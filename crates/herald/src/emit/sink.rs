//! A sink wrapper that remembers the last write error, so `herald emit` can say in one line
//! why a write failed (the recorder itself only counts failures).

use std::sync::{Arc, Mutex};

use herald_runtime::record::sink::SinkFuture;
use herald_runtime::record::{EventSink, SinkError};

/// Delegates to `inner`, keeping the most recent error (one string: bounded).
pub struct ErrorMemo<S> {
    inner: S,
    last: Arc<Mutex<Option<String>>>,
}

impl<S: Sync> ErrorMemo<S> {
    /// Wraps `inner`; `last` receives each error's message.
    pub fn new(inner: S, last: Arc<Mutex<Option<String>>>) -> Self {
        ErrorMemo { inner, last }
    }

    fn watch<'a, E: 'a>(&'a self, fut: SinkFuture<'a, E>) -> SinkFuture<'a, E> {
        Box::pin(async move {
            let r = fut.await;
            if let Err(e) = &r {
                remember(&self.last, e);
            }
            r
        })
    }
}

fn remember(last: &Mutex<Option<String>>, e: &SinkError) {
    *last.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
}

/// For both event APIs: `E` is a core/v1 or an events.k8s.io/v1 `Event`.
impl<E: Send + Sync + 'static, S: EventSink<E>> EventSink<E> for ErrorMemo<S> {
    fn create<'a>(&'a self, event: &'a E) -> SinkFuture<'a, E> {
        self.watch(self.inner.create(event))
    }

    fn update<'a>(&'a self, event: &'a E) -> SinkFuture<'a, E> {
        self.watch(self.inner.update(event))
    }

    fn patch<'a>(&'a self, event: &'a E, patch: &'a [u8]) -> SinkFuture<'a, E> {
        self.watch(self.inner.patch(event, patch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_runtime::record::MemorySink;
    use k8s_openapi::api::core::v1::Event;

    #[tokio::test]
    async fn keeps_the_last_error_and_passes_results_through() {
        let mem = MemorySink::new();
        let last = Arc::new(Mutex::new(None));
        let sink = ErrorMemo::new(mem.clone(), last.clone());
        let mut e = Event::default();
        e.metadata.name = Some("a.1".into());
        e.metadata.namespace = Some("default".into());
        sink.create(&e).await.unwrap();
        assert_eq!(mem.events().len(), 1);
        assert!(last.lock().unwrap().is_none());
        // Creating the same event twice is refused by the memory sink.
        let err = sink.create(&e).await.unwrap_err();
        assert_eq!(
            last.lock().unwrap().as_deref(),
            Some(err.to_string().as_str())
        );
    }
}
