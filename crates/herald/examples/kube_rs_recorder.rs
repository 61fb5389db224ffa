//! A kube-rs controller's event publishing, switched to Herald by one import: the code below
//! is what a controller using `kube::runtime::events::Recorder` already has, with
//! `herald_runtime::events::Recorder` imported instead. 1,000 repeats of one warning become
//! one events.k8s.io/v1 Event with `series.count: 1000`, written by a handful of requests
//! (kube-rs's own recorder sends a request per repeat).
//!
//! It starts an in-process herald-server (memory store) on 127.0.0.1, so it runs anywhere:
//!
//! ```sh
//! cargo run -p herald --example kube_rs_recorder
//! ```

use herald_runtime::events::Recorder; // was: use kube::runtime::events::Recorder;
use herald_server::server::{Server, ServerOptions};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event as EventsV1Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::events::{Event, EventType, Reporter};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = Server::start(ServerOptions {
        listen: "127.0.0.1:0".parse()?,
        ..ServerOptions::default()
    })
    .await?;
    let client = kube::Client::try_from(kube::Config::new(server.url().parse()?))?;

    // --- a kube-rs controller's code, unchanged but for the import above ---
    let reporter = Reporter {
        controller: "volume-controller".into(),
        instance: Some("volume-controller-7d4b9-xk2lp".into()),
    };
    let recorder = Recorder::new(client.clone(), reporter);
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("web-1".into()),
            namespace: Some("prod".into()),
            uid: Some("uid-web-1".into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    };
    for attempt in 1..=1000 {
        recorder
            .publish(
                &Event {
                    type_: EventType::Warning,
                    reason: "FailedMount".into(),
                    note: Some(format!("attempt {attempt}: volume \"data\" is not ready")),
                    action: "Mounting".into(),
                    secondary: None,
                },
                &pod.object_ref(&()),
            )
            .await?;
    }
    // --- Herald's addition: write the final count before exiting ---
    recorder.shutdown().await;

    let stats = recorder.stats();
    let sink = &stats.sinks[0];
    println!(
        "{} occurrences published, {} API requests, {} unaccounted",
        stats.emitted,
        sink.api_calls(),
        stats.unaccounted(0)
    );
    let events = kube::Api::<EventsV1Event>::namespaced(client, "prod")
        .list(&Default::default())
        .await?;
    for e in events {
        println!(
            "{}  {} {}  series.count={}",
            e.metadata.name.unwrap_or_default(),
            e.type_.unwrap_or_default(),
            e.reason.unwrap_or_default(),
            e.series.map_or(1, |s| s.count)
        );
    }
    server.shutdown().await?;
    Ok(())
}
