//! A scripted fake `ListerWatcher` and object helpers shared by the cache tests.
#![allow(dead_code, clippy::large_enum_variant)]

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use herald_runtime::cache::{
    Bookmark, ListPage, ListRequest, ListWatchError, ListerWatcher, WatchEvent, WatchRequest,
    WatchStream,
};
use k8s_openapi::api::core::v1::ConfigMap;
use tokio::time::Instant;

/// A ConfigMap `ns/name` at resourceVersion `rv`.
pub fn cm(ns: &str, name: &str, rv: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.to_owned());
    if !ns.is_empty() {
        c.metadata.namespace = Some(ns.to_owned());
    }
    c.metadata.resource_version = Some(rv.to_owned());
    c
}

/// A ConfigMap with labels.
pub fn cm_labels(ns: &str, name: &str, rv: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut c = cm(ns, name, rv);
    c.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    );
    c
}

pub fn rv_of(c: &ConfigMap) -> String {
    c.metadata.resource_version.clone().unwrap_or_default()
}

pub fn page(items: Vec<ConfigMap>, rv: &str, cont: Option<&str>) -> ListPage<ConfigMap> {
    ListPage {
        items,
        resource_version: rv.to_owned(),
        continue_token: cont.map(str::to_owned),
        corrupt: Vec::new(),
    }
}

/// One step of a scripted watch stream.
pub enum Step {
    Event(WatchEvent<ConfigMap>),
    Err(ListWatchError),
    Sleep(Duration),
    /// Never yields again (until the consumer drops the stream).
    Hang,
}

pub fn added(c: ConfigMap) -> Step {
    Step::Event(WatchEvent::Added(c))
}
pub fn modified(c: ConfigMap) -> Step {
    Step::Event(WatchEvent::Modified(c))
}
pub fn deleted(c: ConfigMap) -> Step {
    Step::Event(WatchEvent::Deleted(c))
}
pub fn bookmark(rv: &str, end: bool) -> Step {
    Step::Event(WatchEvent::Bookmark(Bookmark {
        resource_version: rv.to_owned(),
        initial_events_end: end,
    }))
}

/// A watch stream playing `steps`, then ending (unless a `Hang` step stops it first).
pub fn scripted(steps: Vec<Step>) -> WatchStream<ConfigMap> {
    futures::stream::unfold(VecDeque::from(steps), |mut steps| async move {
        loop {
            match steps.pop_front()? {
                Step::Event(e) => return Some((Ok(e), steps)),
                Step::Err(e) => return Some((Err(e), steps)),
                Step::Sleep(d) => tokio::time::sleep(d).await,
                Step::Hang => futures::future::pending::<()>().await,
            }
        }
    })
    .boxed()
}

pub enum ListScript {
    Page(ListPage<ConfigMap>),
    Err(ListWatchError),
}

pub enum WatchScript {
    Stream(WatchStream<ConfigMap>),
    Err(ListWatchError),
}

#[derive(Default)]
struct Inner {
    lists: VecDeque<ListScript>,
    watches: VecDeque<WatchScript>,
    list_log: Vec<(Instant, ListRequest)>,
    watch_log: Vec<(Instant, WatchRequest)>,
}

/// A scripted `ListerWatcher`: answers from its scripts in order and records every request.
/// When a script runs out, lists fail with a transport error and watches hang.
#[derive(Clone, Default)]
pub struct FakeLw {
    inner: Arc<Mutex<Inner>>,
    pub watch_list: bool,
}

impl FakeLw {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn with_watch_list() -> Self {
        Self {
            watch_list: true,
            ..Self::default()
        }
    }
    pub fn push_list(&self, s: ListScript) -> &Self {
        self.inner.lock().unwrap().lists.push_back(s);
        self
    }
    pub fn push_page(&self, items: Vec<ConfigMap>, rv: &str, cont: Option<&str>) -> &Self {
        self.push_list(ListScript::Page(page(items, rv, cont)))
    }
    pub fn push_list_err(&self, e: ListWatchError) -> &Self {
        self.push_list(ListScript::Err(e))
    }
    pub fn push_watch(&self, steps: Vec<Step>) -> &Self {
        self.inner
            .lock()
            .unwrap()
            .watches
            .push_back(WatchScript::Stream(scripted(steps)));
        self
    }
    pub fn push_watch_stream(&self, s: WatchStream<ConfigMap>) -> &Self {
        self.inner
            .lock()
            .unwrap()
            .watches
            .push_back(WatchScript::Stream(s));
        self
    }
    pub fn push_watch_err(&self, e: ListWatchError) -> &Self {
        self.inner
            .lock()
            .unwrap()
            .watches
            .push_back(WatchScript::Err(e));
        self
    }
    pub fn lists(&self) -> Vec<ListRequest> {
        self.inner
            .lock()
            .unwrap()
            .list_log
            .iter()
            .map(|(_, r)| r.clone())
            .collect()
    }
    pub fn list_times(&self) -> Vec<Instant> {
        self.inner
            .lock()
            .unwrap()
            .list_log
            .iter()
            .map(|(t, _)| *t)
            .collect()
    }
    pub fn list_rvs(&self) -> Vec<String> {
        self.lists()
            .into_iter()
            .map(|r| r.resource_version)
            .collect()
    }
    pub fn watches(&self) -> Vec<WatchRequest> {
        self.inner
            .lock()
            .unwrap()
            .watch_log
            .iter()
            .map(|(_, r)| r.clone())
            .collect()
    }
    pub fn watch_times(&self) -> Vec<Instant> {
        self.inner
            .lock()
            .unwrap()
            .watch_log
            .iter()
            .map(|(t, _)| *t)
            .collect()
    }
    pub fn scripts_left(&self) -> (usize, usize) {
        let g = self.inner.lock().unwrap();
        (g.lists.len(), g.watches.len())
    }
}

impl ListerWatcher<ConfigMap> for FakeLw {
    fn list(
        &self,
        request: ListRequest,
    ) -> BoxFuture<'_, Result<ListPage<ConfigMap>, ListWatchError>> {
        let mut g = self.inner.lock().unwrap();
        g.list_log.push((Instant::now(), request));
        let r = match g.lists.pop_front() {
            Some(ListScript::Page(p)) => Ok(p),
            Some(ListScript::Err(e)) => Err(e),
            None => Err(ListWatchError::Transport("list script exhausted".into())),
        };
        async move { r }.boxed()
    }

    fn watch(
        &self,
        request: WatchRequest,
    ) -> BoxFuture<'_, Result<WatchStream<ConfigMap>, ListWatchError>> {
        let mut g = self.inner.lock().unwrap();
        g.watch_log.push((Instant::now(), request));
        let r = match g.watches.pop_front() {
            Some(WatchScript::Stream(s)) => Ok(s),
            Some(WatchScript::Err(e)) => Err(e),
            None => Ok(scripted(vec![Step::Hang])),
        };
        async move { r }.boxed()
    }

    fn supports_watch_list(&self) -> bool {
        self.watch_list
    }
}

/// Polls `cond` every 10 ms of (paused) tokio time, at most `max` times.
pub async fn eventually(max: usize, mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..max {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond()
}

pub fn expired() -> ListWatchError {
    ListWatchError::Expired("too old resource version".into())
}
