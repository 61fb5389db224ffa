//! Field-selected lists read through SQLite's indexes give the answer of the plain scan.
//!
//! The same random writes go to a registry over SQLite (which narrows a list with an index
//! query to the events holding the pinned value) and to one over the memory backend (which
//! ignores index queries and filters every stored event). Every list — random selectors,
//! namespaces and page sizes, paged to the end with continue tokens, with more writes between
//! the pages — must list the same events at the same resourceVersions on both, and the
//! continue tokens must keep reading the first page's snapshot. Unpaged lists are read a few
//! events at a time on SQLite and in one read on the memory backend; the HTTP layer's
//! unpaged lists (`list_streamed`), which SQLite reads in write order when they hold most of
//! the store, hold the same events.

use std::sync::Arc;

use herald_core::clock::FakeClock;
use herald_core::event::{ApiGroup, CoreEvent};
use herald_server::registry::{
    DeleteParams, EventRegistry, ListParams, RegistryOptions, WriteOptions,
};
use herald_server::storage::{
    EtcdBackend, EtcdOptions, HistoryOptions, MemoryBackend, SqliteBackend, SqliteOptions,
    StorageMediaType,
};
use proptest::prelude::*;

mod etcd_support;

const NAMESPACES: [&str; 2] = ["ns1", "ns2"];
const OBJECTS: [&str; 4] = ["web-0", "web-1", "db-0", ""];
const UIDS: [&str; 3] = ["u1", "u2", ""];
const REASONS: [&str; 3] = ["BackOff", "Pulled", "Started"];
const TYPES: [&str; 2] = ["Normal", "Warning"];
const COMPONENTS: [&str; 3] = ["kubelet", "scheduler", ""];

/// One random event's fields, as indexes into the arrays above.
#[derive(Debug, Clone)]
struct Fields {
    object: usize,
    uid: usize,
    reason: usize,
    type_: usize,
    source: usize,
    reporting: usize,
}

#[derive(Debug, Clone)]
enum Op {
    /// Create (or, if the name is taken, update) event `name` in namespace `ns`.
    Put {
        ns: usize,
        name: u8,
        fields: Fields,
    },
    Delete {
        ns: usize,
        name: u8,
    },
}

fn fields() -> impl Strategy<Value = Fields> {
    (
        0..4usize,
        0..3usize,
        0..3usize,
        0..2usize,
        0..3usize,
        0..3usize,
    )
        .prop_map(|(object, uid, reason, type_, source, reporting)| Fields {
            object,
            uid,
            reason,
            type_,
            source,
            reporting,
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..2usize, 0..12u8, fields()).prop_map(|(ns, name, fields)| Op::Put { ns, name, fields }),
        1 => (0..2usize, 0..12u8).prop_map(|(ns, name)| Op::Delete { ns, name }),
    ]
}

/// A field selector of one to three terms on indexed and other fields, some negated.
fn selector() -> impl Strategy<Value = String> {
    let term = prop_oneof![
        (0..4usize).prop_map(|i| format!("involvedObject.name={}", OBJECTS[i])),
        (0..3usize).prop_map(|i| format!("involvedObject.uid={}", UIDS[i])),
        (0..3usize).prop_map(|i| format!("reason=={}", REASONS[i])),
        (0..2usize).prop_map(|i| format!("type={}", TYPES[i])),
        (0..2usize).prop_map(|i| format!("type!={}", TYPES[i])),
        (0..3usize).prop_map(|i| format!("source={}", COMPONENTS[i])),
        (0..3usize).prop_map(|i| format!("reportingComponent={}", COMPONENTS[i])),
        Just("involvedObject.kind=Pod".to_string()),
        (0..2usize).prop_map(|i| format!("involvedObject.namespace={}", NAMESPACES[i])),
    ];
    proptest::collection::vec(term, 1..=3).prop_map(|t| t.join(","))
}

fn event(ns: &str, name: u8, f: &Fields) -> CoreEvent {
    let mut e = CoreEvent::default();
    e.metadata.name = Some(format!("ev-{name:02}"));
    e.metadata.namespace = Some(ns.to_string());
    e.involved_object.kind = Some("Pod".into());
    e.involved_object.namespace = Some(ns.to_string());
    let set = |v: &str| (!v.is_empty()).then(|| v.to_string());
    e.involved_object.name = set(OBJECTS[f.object]);
    e.involved_object.uid = set(UIDS[f.uid]);
    e.reason = Some(REASONS[f.reason].into());
    e.type_ = Some(TYPES[f.type_].into());
    e.source = set(COMPONENTS[f.source]).map(|component| k8s_openapi::api::core::v1::EventSource {
        component: Some(component),
        host: None,
    });
    e.reporting_component = set(COMPONENTS[f.reporting]);
    e.message = Some("m".into());
    e
}

struct Stores {
    sqlite: EventRegistry,
    memory: EventRegistry,
    _dir: tempfile::TempDir,
}

/// The SQLite store merges its index changes after every `merge_every` committed ones (1:
/// a merge races every read; a large number: every index read combines the database with
/// the unmerged changes).
fn stores(merge_every: usize) -> Stores {
    let clock = Arc::new(FakeClock::new("2024-01-01T00:00:00Z".parse().unwrap()));
    let opts = RegistryOptions {
        event_ttl: None,
        ..RegistryOptions::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let sqlite_opts = SqliteOptions {
        merge_index_every: merge_every,
        ..SqliteOptions::default()
    };
    let sqlite = SqliteBackend::open(dir.path(), clock.clone(), sqlite_opts).unwrap();
    let memory = MemoryBackend::new(clock.clone(), HistoryOptions::default());
    // Unpaged lists on SQLite are read three matching events at a time (on the memory
    // backend, in one read): the pages must add up to the one read.
    let paged = RegistryOptions {
        list_page_items: 3,
        ..opts
    };
    Stores {
        sqlite: EventRegistry::new(Arc::new(sqlite), clock.clone(), paged),
        memory: EventRegistry::new(Arc::new(memory), clock, opts),
        _dir: dir,
    }
}

/// Applies `op` to `reg`; what it answers (the revision written, or the error's code) is
/// compared between the two stores.
async fn apply(reg: &EventRegistry, op: &Op) -> Result<String, u16> {
    match op {
        Op::Put { ns, name, fields } => {
            let ns = NAMESPACES[*ns];
            let e = event(ns, *name, fields);
            let opts = WriteOptions::default();
            let name = e.metadata.name.clone().unwrap_or_default();
            let written = match reg.create(ApiGroup::Core, ns, e.clone(), &opts).await {
                Ok(c) => c.event,
                Err(err) if err.code == 409 => {
                    reg.update(ApiGroup::Core, ns, &name, e, &opts)
                        .await
                        .map_err(|e| e.code)?
                        .event
                }
                Err(err) => return Err(err.code),
            };
            Ok(written.metadata.resource_version.unwrap_or_default())
        }
        Op::Delete { ns, name } => reg
            .delete(
                ApiGroup::Core,
                NAMESPACES[*ns],
                &format!("ev-{name:02}"),
                &DeleteParams::default(),
            )
            .await
            .map(|d| d.into_event().metadata.resource_version.unwrap_or_default())
            .map_err(|e| e.code),
    }
}

/// One page: its resourceVersion and its items as (name, resourceVersion).
type Page = (String, Vec<(String, String)>);

fn params(selector: &str, limit: Option<i64>, continue_: Option<String>) -> ListParams {
    ListParams {
        field_selector: Some(selector.to_string()),
        limit,
        continue_,
        ..ListParams::default()
    }
}

/// Every page of a list, from the first.
async fn pages(
    reg: &EventRegistry,
    ns: Option<&str>,
    selector: &str,
    limit: Option<i64>,
) -> Vec<Page> {
    let (first, cont) = reg_list(reg, ns, params(selector, limit, None)).await;
    let mut all = vec![first];
    all.extend(rest(reg, ns, selector, limit, cont).await);
    all
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn indexed_lists_equal_the_scan(
        merge_every in prop_oneof![Just(1usize), Just(4), Just(1_000_000)],
        ops in proptest::collection::vec(op(), 1..60),
        later in proptest::collection::vec(op(), 0..10),
        lists in proptest::collection::vec(
            (selector(), prop_oneof![Just(None), (1..6i64).prop_map(Some)], 0..3usize),
            1..6,
        ),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let s = stores(merge_every);
            for op in &ops {
                let a = apply(&s.sqlite, op).await;
                let b = apply(&s.memory, op).await;
                prop_assert_eq!(a, b, "{:?}", op);
            }
            for (selector, limit, ns) in &lists {
                let ns = NAMESPACES.get(*ns).copied();
                // The first page, then writes, then the rest of the pages from the first
                // page's snapshot.
                let (a_first, a_cont) = reg_list(&s.sqlite, ns, params(selector, *limit, None)).await;
                let (b_first, b_cont) = reg_list(&s.memory, ns, params(selector, *limit, None)).await;
                prop_assert_eq!(&a_first, &b_first, "first page of {} in {:?}", selector, ns);
                for op in &later {
                    prop_assert_eq!(apply(&s.sqlite, op).await, apply(&s.memory, op).await);
                }
                let mut a = vec![a_first];
                a.extend(rest(&s.sqlite, ns, selector, *limit, a_cont).await);
                let mut b = vec![b_first];
                b.extend(rest(&s.memory, ns, selector, *limit, b_cont).await);
                prop_assert_eq!(
                    answer(&a, *limit), answer(&b, *limit),
                    "pages of {} in {:?} around writes", selector, ns
                );
                // And the whole list again, now.
                let a = pages(&s.sqlite, ns, selector, *limit).await;
                let b = pages(&s.memory, ns, selector, *limit).await;
                prop_assert_eq!(answer(&a, *limit), answer(&b, *limit), "{} in {:?}", selector, ns);
                // The HTTP layer's unpaged list, which SQLite may read in write order: the
                // same events, each once, from the first page's snapshot.
                if limit.is_none() {
                    let p = params(selector, None, None);
                    let (first, rest) = s.sqlite.list_streamed(ApiGroup::Core, ns, &p).await.unwrap();
                    let (want, _) = reg_list(&s.memory, ns, p).await;
                    prop_assert_eq!(&first.resource_version, &want.0);
                    for op in &later {
                        prop_assert_eq!(apply(&s.sqlite, op).await, apply(&s.memory, op).await);
                    }
                    let mut items = first.items;
                    if let Some(mut rest) = rest {
                        prop_assert_eq!(rest.revision().to_string(), want.0.clone());
                        while let Some(page) = rest.next_page().await.unwrap() {
                            items.extend(page);
                        }
                    }
                    let mut got: Vec<(String, String)> = items
                        .iter()
                        .map(|i| i.decode().unwrap())
                        .map(|e| named(&e))
                        .collect();
                    // In key order or in the order of the events' last writes.
                    let by_rv = got.windows(2).all(|w| {
                        w[0].1.parse::<u64>().unwrap() < w[1].1.parse::<u64>().unwrap()
                    });
                    prop_assert!(by_rv || got.windows(2).all(|w| w[0].0 < w[1].0), "{:?}", got);
                    got.sort();
                    prop_assert_eq!(got, want.1, "unpaged {} in {:?}", selector, ns);
                }
            }
            Ok(())
        })?;
    }
}

proptest! {
    // Each case starts an etcd of its own (revisions must start where the memory store's
    // do), so fewer cases than above.
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// The same over etcd (values in kube-apiserver's protobuf form, no index, pages read
    /// in etcd ranges of two keys) against the memory store: equal answers, equal
    /// resourceVersions.
    #[test]
    fn etcd_lists_equal_the_memory_store(
        ops in proptest::collection::vec(op(), 1..40),
        later in proptest::collection::vec(op(), 0..6),
        lists in proptest::collection::vec(
            (selector(), prop_oneof![Just(None), (1..6i64).prop_map(Some)], 0..3usize),
            1..4,
        ),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let etcd = etcd_support::EtcdProcess::start().await;
            let clock = Arc::new(FakeClock::new("2024-01-01T00:00:00Z".parse().unwrap()));
            let opts = RegistryOptions {
                event_ttl: None,
                ..RegistryOptions::default()
            };
            let backend = EtcdBackend::connect(
                EtcdOptions {
                    servers: vec![etcd.url.clone()],
                    media_type: StorageMediaType::Protobuf,
                    range_keys: 2,
                    ..EtcdOptions::default()
                },
                clock.clone(),
            )
            .await
            .unwrap();
            let e = EventRegistry::new(
                Arc::new(backend),
                clock.clone(),
                RegistryOptions { list_page_items: 3, ..opts },
            );
            let m = EventRegistry::new(
                Arc::new(MemoryBackend::new(clock.clone(), HistoryOptions::default())),
                clock,
                opts,
            );
            for op in &ops {
                prop_assert_eq!(apply(&e, op).await, apply(&m, op).await, "{:?}", op);
            }
            for (selector, limit, ns) in &lists {
                let ns = NAMESPACES.get(*ns).copied();
                let (a_first, a_cont) = reg_list(&e, ns, params(selector, *limit, None)).await;
                let (b_first, b_cont) = reg_list(&m, ns, params(selector, *limit, None)).await;
                prop_assert_eq!(&a_first, &b_first, "first page of {} in {:?}", selector, ns);
                for op in &later {
                    prop_assert_eq!(apply(&e, op).await, apply(&m, op).await);
                }
                let mut a = vec![a_first];
                a.extend(rest(&e, ns, selector, *limit, a_cont).await);
                let mut b = vec![b_first];
                b.extend(rest(&m, ns, selector, *limit, b_cont).await);
                prop_assert_eq!(
                    answer(&a, *limit), answer(&b, *limit),
                    "pages of {} in {:?} around writes", selector, ns
                );
            }
            Ok(())
        })?;
    }
}

/// What a paged list answers, for comparing two stores: the resourceVersion (every page
/// must have the first page's) and the items of all pages in order. The pages themselves
/// may differ in one way only: a scan cannot know that no more matching keys follow, so it
/// may end with an empty page where the index ends one page earlier (Kubernetes allows a
/// continue token with nothing after it). Every page but the last is full.
fn answer(pages: &[Page], limit: Option<i64>) -> (String, Vec<(String, String)>) {
    let rv = pages[0].0.clone();
    let mut items = Vec::new();
    for (i, (page_rv, page)) in pages.iter().enumerate() {
        assert_eq!(page_rv, &rv, "page {i} is not at the first page's snapshot");
        if i + 1 < pages.len() {
            assert_eq!(
                Some(page.len() as i64),
                limit,
                "page {i} of {pages:?} is not full"
            );
        }
        items.extend(page.iter().cloned());
    }
    (rv, items)
}

/// One page and its continue token.
async fn reg_list(reg: &EventRegistry, ns: Option<&str>, p: ListParams) -> (Page, Option<String>) {
    let list = reg.list(ApiGroup::Core, ns, &p).await.unwrap();
    let items = list.decode().iter().map(named).collect();
    ((list.resource_version, items), list.continue_)
}

/// An event as (namespace/name, resourceVersion).
fn named(e: &CoreEvent) -> (String, String) {
    (
        format!(
            "{}/{}",
            e.metadata.namespace.as_deref().unwrap_or_default(),
            e.metadata.name.as_deref().unwrap_or_default()
        ),
        e.metadata.resource_version.clone().unwrap_or_default(),
    )
}

/// The pages after the one that gave `cont`.
async fn rest(
    reg: &EventRegistry,
    ns: Option<&str>,
    selector: &str,
    limit: Option<i64>,
    mut cont: Option<String>,
) -> Vec<Page> {
    let mut out = Vec::new();
    while let Some(c) = cont.take() {
        let (page, next) = reg_list(reg, ns, params(selector, limit, Some(c))).await;
        out.push(page);
        cont = next;
        assert!(out.len() < 100, "more than 100 pages");
    }
    out
}
