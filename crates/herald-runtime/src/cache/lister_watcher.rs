//! The [`ListerWatcher`] contract (list one page, watch from a resourceVersion) and its
//! implementation over `kube::Api<K>`.

use std::marker::PhantomData;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use kube::Resource;
use kube::api::WatchParams;
use kube::core::{ObjectList, Request};
use serde::de::DeserializeOwned;

use super::error::ListWatchError;

/// The annotation that marks the end of a streaming list's initial events.
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// How a list's `resourceVersion` is to be matched (`resourceVersionMatch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceVersionMatch {
    /// Data at least as new as the given resourceVersion.
    NotOlderThan,
    /// Data at exactly the given resourceVersion.
    Exact,
}

/// One LIST request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListRequest {
    /// `resourceVersion`: `""` = quorum read, `"0"` = any (cache), else not older than.
    pub resource_version: String,
    /// `resourceVersionMatch`, if any.
    pub resource_version_match: Option<ResourceVersionMatch>,
    /// `limit` (page size); `None` = unpaginated.
    pub limit: Option<u32>,
    /// `continue` token of the previous page.
    pub continue_token: Option<String>,
}

/// One page of a LIST.
#[derive(Debug, Clone)]
pub struct ListPage<K> {
    /// The decoded objects.
    pub items: Vec<K>,
    /// The list's resourceVersion.
    pub resource_version: String,
    /// Token for the next page; `None` on the last page.
    pub continue_token: Option<String>,
    /// Items that could not be decoded (left out of `items`), one message each.
    pub corrupt: Vec<String>,
}

/// One WATCH request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchRequest {
    /// Watch from this resourceVersion (`""` with `send_initial_events` = consistent snapshot).
    pub resource_version: String,
    /// Server-side `timeoutSeconds`.
    pub timeout_seconds: u32,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// `sendInitialEvents` (streaming list; implies `resourceVersionMatch=NotOlderThan`).
    pub send_initial_events: bool,
}

/// A watch bookmark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bookmark {
    /// The resourceVersion the server has reached.
    pub resource_version: String,
    /// True when annotated `k8s.io/initial-events-end: "true"` (end of a streaming list).
    pub initial_events_end: bool,
}

/// One decoded watch event. Server `ERROR` events arrive as `Err` items of the stream.
#[derive(Debug, Clone)]
pub enum WatchEvent<K> {
    /// `ADDED`.
    Added(K),
    /// `MODIFIED`.
    Modified(K),
    /// `DELETED` with the final state.
    Deleted(K),
    /// `BOOKMARK`.
    Bookmark(Bookmark),
}

/// An open watch: events until the server closes it (end of stream).
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>, ListWatchError>>;

/// Lists and watches one collection. The reflector drives it; errors are typed so that it can
/// apply client-go's recovery rules.
pub trait ListerWatcher<K>: Send + Sync + 'static {
    /// Lists one page.
    fn list(&self, request: ListRequest) -> BoxFuture<'_, Result<ListPage<K>, ListWatchError>>;

    /// Opens a watch.
    fn watch(&self, request: WatchRequest)
    -> BoxFuture<'_, Result<WatchStream<K>, ListWatchError>>;

    /// Whether streaming lists (`sendInitialEvents`) may be attempted at all. The reflector
    /// also falls back on its own when the server rejects or ignores them.
    fn supports_watch_list(&self) -> bool {
        true
    }
}

/// A [`ListerWatcher`] over a `kube::Api<K>` (any k8s-openapi type or custom resource),
/// optionally narrowed by label and field selectors.
///
/// Objects are decoded one by one, so a corrupt item of a list is reported in
/// [`ListPage::corrupt`] instead of failing the whole page, and a corrupt watch event is a
/// [`ListWatchError::Decode`] item (the reflector then relists).
///
/// ```no_run
/// # async fn doc(client: kube::Client) {
/// use k8s_openapi::api::core::v1::Event;
/// use herald_runtime::cache::KubeListerWatcher;
/// let lw = KubeListerWatcher::new(kube::Api::<Event>::all(client))
///     .fields("type=Warning");
/// # }
/// ```
pub struct KubeListerWatcher<K> {
    client: kube::Client,
    request: Request,
    label_selector: Option<String>,
    field_selector: Option<String>,
    watch_list: bool,
    _k: PhantomData<fn() -> K>,
}

impl<K: Resource> KubeListerWatcher<K> {
    /// Lists and watches what `api` addresses (a namespace or all namespaces).
    pub fn new(api: kube::Api<K>) -> Self {
        let request = Request::new(api.resource_url().to_owned());
        Self {
            client: api.into_client(),
            request,
            label_selector: None,
            field_selector: None,
            watch_list: true,
            _k: PhantomData,
        }
    }

    /// Restricts to objects matching this label selector (`app=web,tier!=db`).
    #[must_use]
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_owned());
        self
    }

    /// Restricts to objects matching this field selector (`type=Warning`).
    #[must_use]
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = Some(selector.to_owned());
        self
    }

    /// Never attempt streaming lists with this server.
    #[must_use]
    pub fn disable_watch_list(mut self) -> Self {
        self.watch_list = false;
        self
    }
}

/// Percent-encodes a query value (everything but RFC 3986 unreserved characters).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl<K> KubeListerWatcher<K> {
    /// Builds the LIST request. Built here rather than through `kube`'s `ListParams`, which
    /// drops `resourceVersion=0` whenever a limit is set: client-go's first list is exactly
    /// `resourceVersion=0&limit=500` (served from the watch cache), and dropping the RV would
    /// turn every first list into a quorum read from etcd.
    fn list_request(&self, req: &ListRequest) -> Result<http::Request<Vec<u8>>, ListWatchError> {
        let mut q: Vec<String> = Vec::new();
        if let Some(l) = &self.label_selector {
            q.push(format!("labelSelector={}", encode(l)));
        }
        if let Some(f) = &self.field_selector {
            q.push(format!("fieldSelector={}", encode(f)));
        }
        if let Some(limit) = req.limit.filter(|l| *l > 0) {
            q.push(format!("limit={limit}"));
        }
        match &req.continue_token {
            Some(token) => q.push(format!("continue={}", encode(token))),
            None if !req.resource_version.is_empty() => {
                q.push(format!("resourceVersion={}", encode(&req.resource_version)));
                match req.resource_version_match {
                    Some(ResourceVersionMatch::NotOlderThan) => {
                        q.push("resourceVersionMatch=NotOlderThan".to_owned())
                    }
                    Some(ResourceVersionMatch::Exact) => {
                        q.push("resourceVersionMatch=Exact".to_owned())
                    }
                    None => {}
                }
            }
            None => {}
        }
        let url = format!("{}?{}", self.request.url_path, q.join("&"));
        http::Request::get(url)
            .body(Vec::new())
            .map_err(|e| ListWatchError::Invalid {
                code: 400,
                message: e.to_string(),
            })
    }
}

fn decode<K: DeserializeOwned>(v: serde_json::Value) -> Result<K, ListWatchError> {
    serde_json::from_value(v).map_err(|e| ListWatchError::Decode(e.to_string()))
}

impl<K> ListerWatcher<K> for KubeListerWatcher<K>
where
    K: Resource + DeserializeOwned + Clone + Send + Sync + 'static,
{
    fn list(&self, req: ListRequest) -> BoxFuture<'_, Result<ListPage<K>, ListWatchError>> {
        async move {
            let http = self.list_request(&req)?;
            let list: ObjectList<serde_json::Value> = self
                .client
                .request(http)
                .await
                .map_err(ListWatchError::from_kube)?;
            let mut items = Vec::with_capacity(list.items.len());
            let mut corrupt = Vec::new();
            for v in list.items {
                match decode::<K>(v) {
                    Ok(o) => items.push(o),
                    Err(e) => corrupt.push(e.to_string()),
                }
            }
            Ok(ListPage {
                items,
                resource_version: list.metadata.resource_version.unwrap_or_default(),
                continue_token: list.metadata.continue_.filter(|c| !c.is_empty()),
                corrupt,
            })
        }
        .boxed()
    }

    fn watch(&self, req: WatchRequest) -> BoxFuture<'_, Result<WatchStream<K>, ListWatchError>> {
        async move {
            let wp = WatchParams {
                label_selector: self.label_selector.clone(),
                field_selector: self.field_selector.clone(),
                timeout: Some(req.timeout_seconds),
                bookmarks: req.allow_bookmarks || req.send_initial_events,
                send_initial_events: req.send_initial_events,
            };
            let http = self
                .request
                .watch(&wp, &req.resource_version)
                .map_err(|e| ListWatchError::Invalid {
                    code: 400,
                    message: e.to_string(),
                })?;
            let stream = self
                .client
                .request_events::<serde_json::Value>(http)
                .await
                .map_err(ListWatchError::from_kube)?;
            let stream = stream.map(|item| {
                use kube::api::WatchEvent as W;
                match item.map_err(ListWatchError::from_kube)? {
                    W::Added(v) => Ok(WatchEvent::Added(decode(v)?)),
                    W::Modified(v) => Ok(WatchEvent::Modified(decode(v)?)),
                    W::Deleted(v) => Ok(WatchEvent::Deleted(decode(v)?)),
                    W::Bookmark(b) => Ok(WatchEvent::Bookmark(Bookmark {
                        initial_events_end: b
                            .metadata
                            .annotations
                            .get(INITIAL_EVENTS_END_ANNOTATION)
                            .is_some_and(|v| v == "true"),
                        resource_version: b.metadata.resource_version,
                    })),
                    W::Error(status) => Err(ListWatchError::from_kube(kube::Error::Api(status))),
                }
            });
            Ok(stream.boxed())
        }
        .boxed()
    }

    fn supports_watch_list(&self) -> bool {
        self.watch_list
    }
}

/// The server-side watch timeout for one request: uniform in `[min, 2·min)` seconds.
pub(crate) fn watch_timeout(min: Duration, r: f64) -> u32 {
    let min = min.as_secs().max(1) as f64;
    (min + min * r.clamp(0.0, 0.999_999)) as u32
}
