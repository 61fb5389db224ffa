//! One data directory, one writer: a second `herald serve --data DIR` on a directory a live
//! server holds exits at once with a one-line error naming the directory and the running
//! server, and the first keeps serving; after the holder is killed with SIGKILL the lock is
//! gone with it, so the next server starts on the same directory without any cleanup.

mod support;

use support::{Herald, Kubectl, core_event};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_on_a_held_data_directory_is_refused_until_the_holder_dies() {
    let dir = tempfile::tempdir().expect("temp dir");
    let first = Herald::sqlite(dir.path()).await;
    let k = Kubectl::new(&first).await;
    let f = k.write(
        "ev.yaml",
        &core_event("web-1.a", "web-1", "Normal", "Started", "kept"),
    );
    k.run(&["create", "-f", &f]).await.ok();

    let lines = support::serve_refused(&[
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--data".as_ref(),
        dir.path().as_os_str(),
    ])
    .await;
    let expected = format!(
        "herald: data directory {} is in use by herald pid {}, serving {}; stop that server or \
         choose another --data directory",
        dir.path().display(),
        first.pid(),
        first.url
    );
    assert_eq!(lines, [expected], "stderr");

    // The holder is untouched and still serves its data.
    let o = k.run(&["get", "events", "-o", "name"]).await;
    assert_eq!(o.ok(), "event/web-1.a\n", "{}", o.show());

    // SIGKILL frees the lock with the process: no stale lock, no cleanup, the data is there.
    first.kill9().await;
    let third = Herald::sqlite(dir.path()).await;
    let k = Kubectl::new(&third).await;
    let o = k
        .run(&["get", "event", "web-1.a", "-o", "jsonpath={.message}"])
        .await;
    assert_eq!(o.ok(), "kept", "{}", o.show());
}
