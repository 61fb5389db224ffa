//! `/readyz` reports the store: a live server on a real SQLite file stops being ready when a
//! write fails in the database, says so only as `[-]storage failed` (the reason goes to the
//! log), stays live, and loses nothing it acknowledged. It is ready again after
//! `RETRY_READY` without another failure (so that writes can show whether the store
//! recovered), and at once when a write succeeds.

mod events_support;

use events_support::*;
use std::time::Duration;

use herald_server::server::StoreKind;
use herald_server::storage::RETRY_READY;

#[tokio::test]
async fn readiness_follows_the_store_commits() {
    let dir = tempfile::tempdir().unwrap();
    let clock = fake_clock();
    let server = start(
        StoreKind::Sqlite {
            dir: dir.path().to_path_buf(),
        },
        clock.clone(),
    )
    .await;
    let http = Http::new(&server);
    let path = core_path("ns1");
    http.create_core("ns1", "a.1", "Started").await;
    let ready = http.get("/readyz?verbose").await;
    assert_eq!(ready.status, 200);
    assert!(ready.text().contains("[+]storage ok\n"), "{}", ready.text());

    // Another process makes every insert fail, as a full disk or a broken file would.
    let db = rusqlite::Connection::open(dir.path().join("herald.db")).unwrap();
    db.busy_timeout(GUARD).unwrap();
    db.execute_batch(
        "CREATE TRIGGER fail_inserts BEFORE INSERT ON versions
         BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
    )
    .unwrap();
    let failed = http.post(&path, &core_event("b.1", "ns1", "Started")).await;
    assert_eq!(failed.status, 500, "{}", failed.text());
    let not_ready = http.get("/readyz?verbose").await;
    assert_eq!(not_ready.status, 500);
    assert!(
        not_ready
            .text()
            .contains("[-]storage failed: reason withheld\n")
            && not_ready.text().ends_with("readyz check failed\n"),
        "{}",
        not_ready.text()
    );
    assert_eq!(http.get("/readyz/storage").await.status, 500);
    // Alive (a restart would not help a failing disk), and reads still work.
    assert_eq!(http.get("/livez").await.status, 200);
    assert_eq!(http.get(&format!("{path}/a.1")).await.status, 200);

    // Half-open: after RETRY_READY without a failure it takes writes again; one more failure
    // closes it again.
    clock.advance(RETRY_READY - Duration::from_millis(1));
    assert_eq!(http.get("/readyz").await.status, 500);
    clock.advance(Duration::from_millis(1));
    assert_eq!(http.get("/readyz").await.status, 200);
    let failed = http.post(&path, &core_event("b.1", "ns1", "Started")).await;
    assert_eq!(failed.status, 500, "{}", failed.text());
    assert_eq!(http.get("/readyz").await.status, 500);

    db.execute_batch("DROP TRIGGER fail_inserts").unwrap();
    http.create_core("ns1", "b.1", "Started").await;
    let ready = http.get("/readyz").await;
    assert_eq!((ready.status, ready.text().as_str()), (200, "ok"));
    let names: Vec<String> = http.get(&path).await.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["a.1", "b.1"]);
    drop(db);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_memory_store_is_ready() {
    let (server, _clock) = memory().await;
    let ready = Http::new(&server).get("/readyz?verbose").await;
    assert_eq!(ready.status, 200);
    assert!(ready.text().contains("[+]storage ok\n"), "{}", ready.text());
}

mod etcd_support;

/// On etcd, `/readyz` follows etcd: ready while it answers, not ready soon after it dies
/// (the backend's watch breaks and its probe fails; `/readyz` reads that state), writes fail
/// with a `Status` rather than hang, and after etcd comes back the server is ready again
/// with every acknowledged event there.
#[tokio::test]
async fn readiness_follows_etcd() {
    use herald_server::storage::EtcdOptions;

    let mut etcd = etcd_support::EtcdProcess::start().await;
    let server = start(
        StoreKind::Etcd(Box::new(EtcdOptions {
            servers: vec![etcd.url.clone()],
            health_interval: Duration::from_millis(100),
            request_timeout: Duration::from_secs(2),
            ..EtcdOptions::default()
        })),
        fake_clock(),
    )
    .await;
    let http = Http::new(&server);
    http.create_core("ns1", "a.1", "Started").await;
    let ready = http.get("/readyz?verbose").await;
    assert_eq!(ready.status, 200, "{}", ready.text());
    assert!(ready.text().contains("[+]storage ok\n"), "{}", ready.text());

    etcd.kill();
    let mut status = 200;
    for _ in 0..200 {
        status = http.get("/readyz").await.status;
        if status != 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, 500, "/readyz still ready with etcd gone");
    assert!(
        http.get("/readyz?verbose")
            .await
            .text()
            .contains("[-]storage failed")
    );
    assert_eq!(http.get("/livez").await.status, 200, "still live");
    let refused = http
        .post(&core_path("ns1"), &core_event("a.2", "ns1", "Started"))
        .await;
    assert!(
        refused.status >= 500,
        "{} {}",
        refused.status,
        refused.text()
    );
    assert_eq!(refused.json()["kind"], "Status");

    etcd.restart().await;
    let mut status = 500;
    for _ in 0..200 {
        status = http.get("/readyz").await.status;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, 200, "/readyz not ready again after etcd came back");
    let got = http.get(&format!("{}/a.1", core_path("ns1"))).await;
    assert_eq!(got.status, 200, "{}", got.text());
    server.shutdown().await.unwrap();
}
