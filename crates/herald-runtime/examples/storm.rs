//! Records a small event storm into a `MemorySink` and prints what was stored, the way
//! `kubectl get events` shows it, followed by the recorder's accounting.
//!
//! ```sh
//! cargo run --release -p herald-runtime --example storm
//! cargo run --release -p herald-runtime --example storm -- 1000000   # a bigger storm
//! ```

use std::time::Instant;

use herald_runtime::record::*;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

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
async fn main() {
    let storm: u64 = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 100_000,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            eprintln!("usage: storm [NUMBER_OF_BACKOFF_EVENTS]  (a whole number, e.g. 100000)");
            std::process::exit(2);
        }
    };

    let broadcaster = EventBroadcaster::new(BroadcasterOptions::default());
    let sink = MemorySink::new();
    broadcaster.start_recording_to_sink(sink.clone());
    let recorder = broadcaster.new_recorder(EventSource::new("kubelet", "node-1"));

    let web = pod("web-1");
    for (reason, message) in [
        ("Scheduled", "Successfully assigned prod/web-1 to node-1"),
        (
            "Pulled",
            "Container image \"nginx:1.27\" already present on machine",
        ),
        ("Created", "Created container web"),
        ("Started", "Started container web"),
    ] {
        recorder.event(&web, EventType::Normal, reason, message);
    }

    // A crash loop: the same warning over and over, from four threads at once.
    let started = Instant::now();
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let recorder = recorder.clone();
            let web = web.clone();
            let n = storm / 4 + u64::from(i < storm % 4);
            std::thread::spawn(move || {
                for _ in 0..n {
                    recorder.event(
                        &web,
                        EventType::Warning,
                        "BackOff",
                        "Back-off restarting failed container web in pod web-1",
                    );
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    let recording = started.elapsed();

    // Many similar warnings on one object: aggregated into one "combined" event.
    let db = pod("db-0");
    for volume in 0..15 {
        recorder.eventf(
            &db,
            EventType::Warning,
            "FailedMount",
            format_args!("MountVolume.SetUp failed for volume \"data-{volume}\": timed out"),
        );
    }

    broadcaster.shutdown().await;

    let mut events = sink.events();
    events.sort_by_key(|e| e.last_timestamp.as_ref().map(|t| t.0));
    print_table(&events);

    let stats = broadcaster.stats();
    let s = &stats.sinks[0];
    println!();
    println!(
        "recorded {} events in {:.0?} ({:.1} M events/s)",
        stats.emitted,
        recording,
        storm as f64 / recording.as_secs_f64().max(1e-9) / 1e6
    );
    println!(
        "outcomes: {} created, {} patched, {} aggregated, {} skipped by the spam filter, {} merged while queued, {} dropped, {} failed",
        s.created,
        s.patched,
        s.aggregated,
        s.skipped,
        stats.merged,
        stats.dropped_invalid
            + stats.dropped_queue_full
            + stats.dropped_shutdown
            + s.dropped_shutdown,
        s.failed
    );
    println!(
        "API writes: {} ({} creates, {} patches, {} trailing flushes); unaccounted events: {}",
        s.api_calls(),
        s.create_calls,
        s.patch_calls,
        s.trailing_flushes,
        stats.unaccounted(0)
    );
}

fn print_table(events: &[Event]) {
    let now = jiff::Timestamp::now();
    let rows: Vec<[String; 6]> = events
        .iter()
        .map(|e| {
            let age = e
                .last_timestamp
                .as_ref()
                .map(|t| format!("{}s", now.duration_since(t.0).as_secs().max(0)))
                .unwrap_or_else(|| "<unknown>".into());
            let r = &e.involved_object;
            [
                age,
                e.type_.clone().unwrap_or_default(),
                e.reason.clone().unwrap_or_default(),
                format!(
                    "{}/{}",
                    r.kind.as_deref().unwrap_or("").to_lowercase(),
                    r.name.as_deref().unwrap_or("")
                ),
                e.count.unwrap_or(1).to_string(),
                e.message.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let header = ["LAST SEEN", "TYPE", "REASON", "OBJECT", "COUNT", "MESSAGE"];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: [&str; 6]| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i == 5 {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}   ", w = widths[i]));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header);
    for row in &rows {
        line(row.each_ref().map(String::as_str));
    }
}
