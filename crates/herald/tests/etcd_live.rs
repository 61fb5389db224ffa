//! `herald serve --store etcd`: the real kubectl against a replica on a real etcd, a second
//! replica on the same etcd answering with the same resourceVersion, the events in etcd under
//! kube-apiserver's keys (seen with the real etcdctl), and the flags' one-line errors.

mod support;

#[path = "../../herald-server/tests/etcd_support/mod.rs"]
mod etcd_support;

use etcd_support::EtcdProcess;
use support::{Herald, Kubectl, core_event, serve_refused};

#[tokio::test]
async fn kubectl_on_two_replicas_sharing_one_etcd() {
    let etcd = EtcdProcess::start().await;
    let flags = [
        "--store",
        "etcd",
        "--etcd-servers",
        etcd.url.as_str(),
        "--storage-media-type",
        "application/json",
    ];
    let a = Herald::start(&flags).await;
    let b = Herald::start(&flags).await;
    assert!(
        a.banner
            .contains(&format!("(store: etcd at {} under /registry)", etcd.url)),
        "{}",
        a.banner
    );
    let ka = Kubectl::new(&a).await;
    let kb = Kubectl::new(&b).await;
    let file = ka.write(
        "e.yaml",
        &core_event("web-1.1", "web-1", "Normal", "Started", "from replica a"),
    );
    let o = ka.run(&["create", "-f", &file]).await;
    assert_eq!(o.ok(), "event/web-1.1 created\n", "{}", o.show());
    let on_a = ka
        .run(&["get", "event", "web-1.1", "-o", "json"])
        .await
        .json();
    let on_b = kb
        .run(&["get", "event", "web-1.1", "-o", "json"])
        .await
        .json();
    assert_eq!(on_b["message"], "from replica a");
    assert_eq!(
        on_a["metadata"]["resourceVersion"], on_b["metadata"]["resourceVersion"],
        "one store, one resourceVersion"
    );
    // A list on B is a quorum read at etcd's revision.
    let list = kb.run(&["get", "events", "-o", "json"]).await.json();
    assert_eq!(list["items"][0]["metadata"]["name"], "web-1.1");

    let keys = etcd.etcdctl(&["get", "--prefix", "/registry/events", "--keys-only"]);
    assert_eq!(keys.trim(), "/registry/events/default/web-1.1");
    let value = etcd.etcdctl(&[
        "get",
        "/registry/events/default/web-1.1",
        "--print-value-only",
    ]);
    assert!(
        value.starts_with(r#"{"kind":"Event","apiVersion":"v1","metadata":{"#),
        "{value}"
    );
    assert!(
        !value.contains("resourceVersion\":\""),
        "not stored: {value}"
    );
}

#[tokio::test]
async fn etcd_flags_are_checked_on_one_line() {
    let line = |lines: Vec<String>| {
        let [line] = lines.as_slice() else {
            panic!("one line expected: {lines:?}");
        };
        line.clone()
    };
    assert_eq!(
        line(serve_refused(&["--store", "etcd", "--listen", "127.0.0.1:0"]).await),
        "herald: --store etcd needs --etcd-servers, e.g. --etcd-servers http://127.0.0.1:2379"
    );
    // Nothing listens on a port just released: etcd is unreachable, said on one line.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let unreachable = line(
        serve_refused(&[
            "--store",
            "etcd",
            "--etcd-servers",
            &url,
            "--listen",
            "127.0.0.1:0",
            "--insecure-plain-http",
        ])
        .await,
    );
    assert!(
        unreachable.starts_with(&format!("herald: cannot reach etcd at {url}")),
        "{unreachable}"
    );
    // Bad URLs: the flag and what to write, without echoing credentials.
    assert_eq!(
        line(serve_refused(&["--store", "etcd", "--etcd-servers", "127.0.0.1:2379"]).await),
        r#"herald: --etcd-servers: "127.0.0.1:2379" is not an etcd URL; use http://HOST:PORT or https://HOST:PORT"#
    );
    assert_eq!(
        line(
            serve_refused(&[
                "--store",
                "etcd",
                "--etcd-servers",
                "http://user:secret@127.0.0.1:2379",
            ])
            .await
        ),
        "herald: --etcd-servers: etcd URLs must not carry credentials; use --etcd-certfile and --etcd-keyfile"
    );
    let bad = serve_refused(&["--storage-media-type", "application/yaml"]).await;
    assert!(
        bad[0].contains("application/vnd.kubernetes.protobuf"),
        "{bad:?}"
    );
}
