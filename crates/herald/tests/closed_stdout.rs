//! Nobody reading stdout (`herald … | true`, `| head`) is not an error: every command that
//! prints ends quietly with its usual exit code, `tail` stops, and `serve` keeps serving.
//! The real binary against a live `herald serve --store memory` on 127.0.0.1.

mod support;

use std::process::Stdio;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, PostParams};
use support::{CLI_GUARD, HeraldCli, START_GUARD, closed_pipe};
use tokio::io::{AsyncBufReadExt as _, BufReader};

/// Stores `n` events whose messages make the JSON and YAML lists far larger than stdout's
/// 8 KiB buffer, so a closed pipe shows up while the serializer writes, not at the flush.
async fn store_events(server: &support::Herald, n: usize) {
    let api: Api<Event> = Api::namespaced(server.kube_client(), "default");
    let message = "x".repeat(400);
    for i in 0..n {
        let e: Event = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("web-{i}.1")},
            "involvedObject": {"kind": "Pod", "name": format!("web-{i}"), "namespace": "default"},
            "reason": "BackOff",
            "message": message,
        }))
        .expect("event");
        api.create(&PostParams::default(), &e)
            .await
            .expect("create an event");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_writing_into_a_closed_pipe_end_quietly() {
    let server = support::Herald::memory().await;
    store_events(&server, 40).await;
    let cli = HeraldCli::new(&server).await;
    let emit = ["emit", "--for", "pod/web-1", "--reason", "BackOff"];
    let bench = [
        "bench",
        "--requests",
        "5",
        "--clients",
        "1",
        "-n",
        "closed-pipe",
    ];
    // A plain-http server: its kubeconfig needs no credentials.
    let kubeconfig = ["kubeconfig", "--server", server.url.as_str()];
    let runs: [&[&str]; 8] = [
        &kubeconfig,
        &emit,
        &[&emit[..], &["-o", "json"]].concat(),
        &["get", "events"],
        &["get", "events", "-o", "json"],
        &["get", "events", "-o", "yaml"],
        &bench,
        &[&bench[..], &["-o", "json"]].concat(),
    ];
    for args in runs {
        let out = cli.run_to(args, closed_pipe()).await;
        assert_eq!(out.code, Some(0), "{}", out.show());
        assert_eq!(out.stderr, "", "{}", out.show());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_keeps_serving_when_nobody_reads_its_stdout() {
    let mut child = support::serve_command()
        .args([
            "--store",
            "memory",
            "--listen",
            "127.0.0.1:0",
            "--insecure-plain-http",
        ])
        .env("RUST_LOG", "info,herald=debug")
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start herald serve");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut seen = Vec::new();
    let (mut addr, mut noted) = (None, false);
    // Bounded: the server logs its address and (after failing to print the banner) says so
    // at debug level, in either order; a crash ends stderr instead.
    let deadline = tokio::time::Instant::now() + START_GUARD;
    while addr.is_none() || !noted {
        let line = match tokio::time::timeout_at(deadline, lines.next_line()).await {
            Ok(Ok(Some(l))) => l,
            other => panic!("no banner note from herald serve ({other:?}):\n{seen:#?}"),
        };
        if let Some(a) = line.split("addr=").nth(1) {
            addr = a.split_whitespace().next().map(str::to_owned);
        }
        noted |= line.contains("cannot print the address to stdout");
        seen.push(line);
    }
    // Keep reading so the server's logs never block on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let addr = addr.unwrap_or_default();
    let cli = HeraldCli::for_url(&format!("http://{addr}")).await;
    let out = cli.run(&["get", "events"]).await;
    out.ok();
    assert!(out.stderr.starts_with("No events found"), "{}", out.show());
    assert!(
        child.try_wait().expect("poll the server").is_none(),
        "the server must still be running:\n{seen:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_stops_when_its_reader_goes_away() {
    let server = support::Herald::memory().await;
    store_events(&server, 3).await;
    let cli = HeraldCli::new(&server).await;
    let mut tail = cli
        .command(&["tail", "-A"])
        .spawn()
        .expect("start herald tail");
    let mut stdout = BufReader::new(tail.stdout.take().expect("stdout")).lines();
    // `| head -2`: read two lines, then close the pipe.
    for _ in 0..2 {
        let line = tokio::time::timeout(CLI_GUARD, stdout.next_line())
            .await
            .expect("tail prints the stored events")
            .expect("read stdout");
        assert!(line.is_some_and(|l| l.contains("BackOff")));
    }
    drop(stdout);
    // The next event is written into the closed pipe, which ends the stream.
    cli.run(&["emit", "--for", "pod/late-0", "--reason", "Late"])
        .await
        .ok();
    let out = tokio::time::timeout(CLI_GUARD, tail.wait_with_output())
        .await
        .expect("tail exits once nobody reads it")
        .expect("reap tail");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{out:?}");
}
