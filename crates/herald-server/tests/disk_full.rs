//! Finding 5 of issue 29: a full disk must not block the way out. The store is filled to a
//! size quota (`SqliteOptions::max_db_bytes`, SQLite's `max_page_count`: the same
//! `SQLITE_FULL` a full filesystem gives, deterministically and without privileges); then
//! creates are refused with a `Status` that says what to do, deletes and TTL expiry still
//! work and free space, `/readyz` reports the store while `/livez` and `/healthz` stay up,
//! creates work again once there is room, and every acknowledged write is still there after
//! a restart.

mod events_support;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use events_support::*;
use herald_server::server::{Server, ServerOptions, StoreKind};
use herald_server::storage::{
    Backend, HistoryOptions, KeyValue, RESERVE_FILE, SqliteBackend, SqliteOptions, StorageError,
};
use serde_json::json;

/// A 4 MiB store with a 512 KiB reserve: it takes creates again once 768 KiB are free.
fn small_store() -> SqliteOptions {
    SqliteOptions {
        max_db_bytes: Some(4 << 20),
        reserve_bytes: 512 << 10,
        ..SqliteOptions::default()
    }
}

fn value(i: usize) -> Bytes {
    Bytes::from(format!("{i:08}").repeat(1024))
}

#[tokio::test]
async fn a_full_store_refuses_creates_but_deletes_and_expiry_free_space() {
    let dir = tempfile::tempdir().unwrap();
    let clock = fake_clock();
    let store = SqliteBackend::open(dir.path(), clock.clone(), small_store()).unwrap();
    let reserve = dir.path().join(RESERVE_FILE);
    assert_eq!(std::fs::metadata(&reserve).unwrap().len(), 512 << 10);

    // Fill it: every other event with a TTL.
    let mut acked: BTreeMap<String, KeyValue> = BTreeMap::new();
    let refused = loop {
        let i = acked.len();
        assert!(i < 1_000, "a 4 MiB store took 8 MB");
        let key = format!("/events/ns/e{i:04}");
        let ttl = i.is_multiple_of(2).then_some(Duration::from_secs(60));
        match store.create(&key, value(i), ttl).await {
            Ok(kv) => {
                acked.insert(key, kv);
            }
            Err(e) => break e,
        }
    };
    let StorageError::NoSpace(message) = &refused else {
        panic!("not NoSpace: {refused:?}");
    };
    assert!(
        message.contains(&dir.path().display().to_string())
            && message.contains("delete events (or let them expire), free disk space"),
        "{message}"
    );
    assert_eq!(store.health(), Err(message.clone()));
    assert!(!reserve.exists(), "the reserve was released");

    // Creates and updates are refused at once; deletes work.
    let (first, kv) = acked
        .iter()
        .nth(1)
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap();
    assert!(matches!(
        store.create("/events/ns/new", value(0), None).await,
        Err(StorageError::NoSpace(_))
    ));
    assert!(matches!(
        store.update(&first, value(1), None, None).await,
        Err(StorageError::NoSpace(_))
    ));
    let deleted = store.delete(&first, Some(kv.mod_revision)).await.unwrap();
    assert_eq!(deleted.prev, kv);
    acked.remove(&first);

    // Expiry frees the rest of the room: half the events had a TTL.
    let odd = |k: &String| {
        k.trim_start_matches("/events/ns/e")
            .parse::<usize>()
            .unwrap()
            % 2
            == 1
    };
    let with_ttl = acked.keys().filter(|k| !odd(k)).count();
    clock.advance(Duration::from_secs(61));
    assert_eq!(store.expire_due().await.unwrap(), with_ttl);
    acked.retain(|k, _| odd(k));
    assert_eq!(store.health(), Ok(()), "room again after the expiry");
    assert!(reserve.exists(), "the reserve is taken back");
    let again = store
        .create("/events/ns/after", value(7), None)
        .await
        .unwrap();
    acked.insert("/events/ns/after".into(), again);

    // Every acknowledged write is there after a restart, and nothing else.
    drop(store);
    let store = SqliteBackend::open(dir.path(), clock, small_store()).unwrap();
    let items = store
        .list("/events/", Default::default())
        .await
        .unwrap()
        .items;
    let stored: BTreeMap<String, KeyValue> =
        items.into_iter().map(|kv| (kv.key.clone(), kv)).collect();
    assert_eq!(stored, acked);
}

#[tokio::test]
async fn a_full_disk_answers_a_clear_status_and_stays_live() {
    let dir = tempfile::tempdir().unwrap();
    let clock = fake_clock();
    let server = Server::start(ServerOptions {
        store: StoreKind::Sqlite {
            dir: dir.path().to_path_buf(),
        },
        listen: "127.0.0.1:0".parse().unwrap(),
        history: HistoryOptions::default(),
        sqlite: SqliteOptions {
            max_db_bytes: Some(1 << 20),
            reserve_bytes: 128 << 10,
            ..SqliteOptions::default()
        },
        // The test sweeps itself.
        sweep_interval: Duration::from_secs(3600),
        event_ttl: Some(Duration::from_secs(60)),
        clock: clock.clone(),
        ..ServerOptions::default()
    })
    .await
    .unwrap();
    let http = Http::new(&server);
    let path = core_path("ns1");
    let event = |i: usize| {
        let mut e = core_event(&format!("e{i:04}"), "ns1", "Started");
        e["message"] = json!(format!("{i:08}").repeat(1024));
        e
    };
    let mut created = Vec::new();
    let full = loop {
        assert!(created.len() < 500, "a 1 MiB store took 4 MB");
        let r = http.post(&path, &event(created.len())).await;
        if r.status != 201 {
            break r;
        }
        created.push(format!("e{:04}", created.len()));
    };
    let status = full.status_failure(500, "InternalError");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("is out of space: creates and updates are refused until there is room"),
        "{message}"
    );
    let ready = http.get("/readyz?verbose").await;
    assert_eq!(ready.status, 500);
    assert!(
        ready.text().contains("[-]storage failed"),
        "{}",
        ready.text()
    );
    assert_eq!(http.get("/livez").await.status, 200);
    assert_eq!(http.get("/healthz").await.status, 200);

    // A delete goes through.
    let gone = created.remove(0);
    let r = http.delete(&format!("{path}/{gone}"), "").await;
    assert_eq!(r.status, 200, "{}", r.text());
    // Reads too.
    assert_eq!(
        http.get(&format!("{path}/{}", created[0])).await.status,
        200
    );

    // Expiry makes room: ready, and creates work again.
    clock.advance(Duration::from_secs(61));
    let expired = server.registry().backend().expire_due().await.unwrap();
    assert_eq!(expired, created.len());
    assert_eq!(http.get("/readyz").await.status, 200);
    let r = http.post(&path, &event(9_999)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    server.shutdown().await.unwrap();
}
