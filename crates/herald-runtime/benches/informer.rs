//! Informer benchmarks: catch-up time for a 100,000-object list, and memory per cached
//! object (measured with a counting global allocator: live heap bytes after sync, minus the
//! baseline before the objects were created, divided by the object count).
//!
//! Run: `cargo bench -p herald-runtime --bench informer -- --warm-up-time 1 --measurement-time 3`

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::{Arc, Mutex};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use herald_runtime::cache::{
    HandlerFns, InformerOptions, ListPage, ListRequest, ListWatchError, ListerWatcher,
    ReflectorOptions, SharedInformer, WatchRequest, WatchStream,
};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio_util::sync::CancellationToken;

/// The system allocator, counting live heap bytes in [`LIVE`].
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// The one unsafe site of the crate: a `GlobalAlloc` must be an `unsafe impl`, and its methods
// call the system allocator's unsafe methods.
// SAFETY: every method forwards its arguments unchanged to `System`, which upholds
// `GlobalAlloc`'s contract; the counting touches only an atomic and never allocates.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's guarantees for `layout` are `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by this allocator, i.e. by `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: `ptr` was allocated by `System` with `layout`; the caller guarantees
        // `new_size` is valid for `layout`'s alignment.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const N: usize = 100_000;
const PAGE: usize = 500;

/// A typical Warning event as kube-apiserver stores it.
fn event(i: usize) -> Event {
    let ts: jiff::Timestamp = "2026-01-01T00:00:00Z"
        .parse()
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let mut e = Event::default();
    e.metadata.name = Some(format!("web-{i}.18a0c3b5d7e1f{i:05x}"));
    e.metadata.namespace = Some(format!("team-{}", i % 50));
    e.metadata.resource_version = Some((1000 + i).to_string());
    e.metadata.uid = Some(format!("5f0c7e1a-0000-4000-8000-{i:012}"));
    e.involved_object = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(format!("web-{i}")),
        namespace: e.metadata.namespace.clone(),
        uid: Some(format!("9d2b1c3a-0000-4000-8000-{i:012}")),
        resource_version: Some("12345".into()),
        ..Default::default()
    };
    e.reason = Some("BackOff".into());
    e.message = Some("Back-off restarting failed container app in pod web".into());
    e.type_ = Some("Warning".into());
    e.count = Some(3);
    e.first_timestamp = Some(Time(ts));
    e.last_timestamp = Some(Time(ts));
    e.source = Some(EventSource {
        component: Some("kubelet".into()),
        host: Some("node-1".into()),
    });
    e
}

/// Serves pre-built pages of 500, then a watch that never sends anything.
struct PagedLw {
    pages: Mutex<VecDeque<Vec<Event>>>,
}

impl PagedLw {
    fn new(objs: Vec<Event>) -> Self {
        let mut pages = VecDeque::new();
        let mut cur = Vec::with_capacity(PAGE);
        for o in objs {
            cur.push(o);
            if cur.len() == PAGE {
                pages.push_back(std::mem::replace(&mut cur, Vec::with_capacity(PAGE)));
            }
        }
        if !cur.is_empty() {
            pages.push_back(cur);
        }
        Self {
            pages: Mutex::new(pages),
        }
    }
}

impl ListerWatcher<Event> for PagedLw {
    fn list(&self, _r: ListRequest) -> BoxFuture<'_, Result<ListPage<Event>, ListWatchError>> {
        let mut pages = self.pages.lock().unwrap();
        let items = pages.pop_front().unwrap_or_default();
        let page = ListPage {
            items,
            resource_version: "200000".into(),
            continue_token: (!pages.is_empty()).then(|| format!("c{}", pages.len())),
            corrupt: Vec::new(),
        };
        async move { Ok(page) }.boxed()
    }
    fn watch(&self, _r: WatchRequest) -> BoxFuture<'_, Result<WatchStream<Event>, ListWatchError>> {
        async { Ok(futures::stream::pending().boxed()) }.boxed()
    }
    fn supports_watch_list(&self) -> bool {
        false
    }
}

fn config() -> InformerOptions {
    InformerOptions {
        reflector: ReflectorOptions {
            watch_list: false,
            ..ReflectorOptions::default()
        },
        ..InformerOptions::default()
    }
}

/// Lists `objs` into a fresh informer with one handler; returns once the handler synced.
async fn catch_up(lw: PagedLw) -> SharedInformer<Event> {
    let inf = SharedInformer::new(lw, config());
    let reg = inf
        .add_event_handler(HandlerFns::new().on_add(|e: Arc<Event>, _| {
            black_box(e);
        }))
        .unwrap_or_else(|e| panic!("{e}"));
    let token = CancellationToken::new();
    let task = inf.spawn(token.clone());
    assert!(inf.wait_for_cache_sync().await);
    assert!(reg.wait_synced().await);
    token.cancel();
    let _ = task.await;
    inf
}

fn memory_per_object(rt: &tokio::runtime::Runtime) {
    let before = LIVE.load(Ordering::SeqCst);
    let objs: Vec<Event> = (0..N).map(event).collect();
    let json: usize = objs
        .iter()
        .map(|e| serde_json::to_vec(e).map(|v| v.len()).unwrap_or(0))
        .sum();
    let inf = rt.block_on(catch_up(PagedLw::new(objs)));
    let after = LIVE.load(Ordering::SeqCst);
    assert_eq!(inf.indexer().len(), N);
    let per = (after - before) as f64 / N as f64;
    eprintln!(
        "informer memory: {per:.0} bytes per cached Event (live heap after sync, counting \
         allocator; includes the object, its Arc, its key and the namespace index); serialized JSON \
         {:.0} bytes per Event",
        json as f64 / N as f64
    );
    drop(inf);
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    memory_per_object(&rt);
    let objs: Vec<Event> = (0..N).map(event).collect();
    let mut g = c.benchmark_group("informer");
    g.sample_size(10);
    g.bench_function("catch_up_100k_events_pages_of_500", |b| {
        b.iter_batched(
            || PagedLw::new(objs.clone()),
            |lw| rt.block_on(catch_up(lw)),
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
