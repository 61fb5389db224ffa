//! A small controller built from Herald's parts, end to end on one machine:
//!
//! 1. starts an in-process herald-server (memory store) on 127.0.0.1,
//! 2. records events about a few pods through the recorder and `KubeSink`,
//! 3. watches events with a `SharedInformer` (indexed by involved object), queues object keys
//!    into a `RateLimitingQueue`, and
//! 4. reconciles each object: counts its Warning occurrences from the informer's cache.
//!
//! ```sh
//! cargo run -p herald --example warning_counter
//! ```
//! Point it at another cluster instead with `--kubeconfig` semantics by changing `client()`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herald_runtime::cache::{HandlerFns, InformerOptions, SharedInformer};
use herald_runtime::record::{
    BroadcasterOptions, EventBroadcaster, EventSource, EventType, KubeSink,
};
use herald_runtime::workqueue::RateLimitingQueue;
use herald_server::server::{Server, ServerOptions};
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio_util::sync::CancellationToken;

/// The index from an involved object (`namespace/Kind/name`) to its events.
const BY_OBJECT: &str = "involvedObject";

fn object_key(e: &Event) -> String {
    let r = &e.involved_object;
    format!(
        "{}/{}/{}",
        r.namespace.as_deref().unwrap_or(""),
        r.kind.as_deref().unwrap_or(""),
        r.name.as_deref().unwrap_or("")
    )
}

fn pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("prod".into()),
            uid: Some(format!("uid-{name}")),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = Server::start(ServerOptions {
        listen: "127.0.0.1:0".parse()?,
        ..ServerOptions::default()
    })
    .await?;
    println!("herald-server on {}", server.url());
    let client = kube::Client::try_from(kube::Config::new(server.url().parse()?))?;

    // The reading side: informer → queue → reconcile.
    let informer = SharedInformer::for_api(
        kube::Api::<Event>::all(client.clone()),
        InformerOptions::default(),
    );
    let mut indexers = HashMap::new();
    indexers.insert(
        BY_OBJECT.to_string(),
        Arc::new(|e: &Event| vec![object_key(e)]) as herald_runtime::cache::IndexFn<Event>,
    );
    informer.add_indexers(indexers)?;
    let queue: RateLimitingQueue<String> = RateLimitingQueue::default();
    let q = queue.clone();
    let q2 = queue.clone();
    informer.add_event_handler(
        HandlerFns::new()
            .on_add(move |e: Arc<Event>, _| q.queue().add(object_key(&e)))
            .on_update(move |_, e: Arc<Event>| q2.queue().add(object_key(&e))),
    )?;
    let stop = CancellationToken::new();
    let informer_task = informer.spawn(stop.clone());
    informer.wait_for_cache_sync().await;

    let warnings: Arc<Mutex<BTreeMap<String, i64>>> = Arc::default();
    let worker = {
        let queue = queue.clone();
        let indexer = informer.indexer();
        let warnings = warnings.clone();
        tokio::spawn(async move {
            while let Some(key) = queue.get().await {
                match indexer.by_index(BY_OBJECT, &key) {
                    Ok(events) => {
                        let total = events
                            .iter()
                            .filter(|e| e.type_.as_deref() == Some("Warning"))
                            .map(|e| i64::from(e.count.unwrap_or(1)))
                            .sum();
                        warnings
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(key.clone(), total);
                        queue.forget(&key);
                    }
                    Err(e) => {
                        eprintln!("reconcile {key}: {e}; retrying");
                        queue.add_rate_limited(key.clone());
                    }
                }
                queue.done(&key);
            }
        })
    };

    // The writing side: a recorder with client-go's semantics writing to the server.
    let broadcaster = EventBroadcaster::new(BroadcasterOptions::default());
    broadcaster.start_recording_to_sink(KubeSink::new(client.clone()));
    let recorder = broadcaster.new_recorder(EventSource::new("warning-counter-demo", "node-1"));
    let (web, db, api) = (pod("web-1"), pod("db-0"), pod("api-7"));
    for _ in 0..500 {
        recorder.event(
            &web,
            EventType::Warning,
            "BackOff",
            "Back-off restarting failed container",
        );
    }
    for i in 0..3 {
        recorder.eventf(
            &db,
            EventType::Warning,
            "FailedMount",
            format_args!("volume data-{i} timed out"),
        );
    }
    recorder.event(&api, EventType::Normal, "Started", "Started container api");
    broadcaster.shutdown().await; // writes everything, including the held-back counts

    let expected: BTreeMap<String, i64> = [
        ("prod/Pod/api-7".to_string(), 0),
        ("prod/Pod/db-0".to_string(), 3),
        ("prod/Pod/web-1".to_string(), 500),
    ]
    .into();
    // Wait (bounded) until the controller has reconciled the final state.
    let mut converged = false;
    for _ in 0..200 {
        if *warnings.lock().unwrap_or_else(|e| e.into_inner()) == expected {
            converged = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    println!("{:<20} WARNINGS", "OBJECT");
    for (object, n) in warnings.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        println!("{object:<20} {n}");
    }
    let stats = broadcaster.stats();
    println!(
        "recorded {} events with {} API writes; unaccounted: {}",
        stats.emitted,
        stats.sinks[0].api_calls(),
        stats.unaccounted(0)
    );

    queue.shutdown();
    stop.cancel();
    let _ = worker.await;
    let _ = informer_task.await;
    server.shutdown().await?;
    anyhow::ensure!(converged, "the controller did not converge on {expected:?}");
    Ok(())
}
