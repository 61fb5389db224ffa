//! `herald serve` secure by default: HTTPS with the CA, serving and admin certificates it
//! makes, reached by the real kubectl and by kube-rs through the kubeconfig `herald
//! kubeconfig` (or `serve --write-kubeconfig`) writes; the client commands without any
//! kubeconfig; and the refusals at start (plain HTTP off loopback, an unusable certificate).
//!
//! kubectl must be on PATH (a missing kubectl fails). Every wait is bounded.

mod support;

use std::process::Stdio;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use support::{CLI_GUARD, Herald, Kubectl, core_event, herald_bin, kubeconfig_text, serve_refused};

fn utf8(p: &std::path::Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_and_gets_events_over_https_with_the_generated_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Herald::start_https(&["--data", utf8(&data)]).await;
    assert!(
        server
            .banner
            .starts_with("herald-server listening on https://127.0.0.1:"),
        "{}",
        server.banner
    );
    let k = Kubectl::with_kubeconfig(&server, &["--data", utf8(&data)]).await;
    let manifest = k.write(
        "e.yaml",
        &core_event(
            "over-tls",
            "web-1",
            "Warning",
            "BackOff",
            "hello over https",
        ),
    );
    let o = k.run(&["create", "-f", &manifest]).await;
    assert_eq!(o.ok(), "event/over-tls created\n", "{}", o.show());
    let o = k.run(&["get", "events", "-o", "json"]).await;
    let v = o.json();
    assert_eq!(v["items"][0]["message"], "hello over https", "{}", o.show());

    // Secure by default: the admin certificate is a user in system:masters…
    let o = k.run(&["auth", "whoami", "-o", "json"]).await;
    let v = o.json();
    assert_eq!(
        v["status"]["userInfo"]["username"],
        "herald-admin",
        "{}",
        o.show()
    );
    let groups = v["status"]["userInfo"]["groups"].to_string();
    assert!(groups.contains("system:masters"), "{}", o.show());
    // …and a client with no credential (the CA trusted, no certificate, no token) gets 401.
    let anonymous = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: h\n  cluster:\n    server: {}\n    certificate-authority: {}\ncontexts:\n- name: h\n  context: {{cluster: h, user: nobody}}\ncurrent-context: h\nusers:\n- name: nobody\n  user: {{}}\n",
        server.url,
        utf8(&data.join("pki").join("ca.crt")),
    );
    let kc = kube::config::Kubeconfig::from_yaml(&anonymous).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let api: Api<Event> = Api::namespaced(kube::Client::try_from(config).unwrap(), "default");
    match api.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 401, "{status:?}");
            assert_eq!(status.reason, "Unauthorized", "{status:?}");
        }
        other => panic!("a request without a credential must get 401, got {other:?}"),
    }

    // The same kubeconfig without its CA: kubectl does not trust the server.
    let o = k
        .run(&["get", "events", "--certificate-authority", "/dev/null"])
        .await;
    assert!(o.failed().contains("certificate"), "{}", o.show());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_works_through_the_generated_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Herald::start_https(&["--data", utf8(&data)]).await;
    let text = kubeconfig_text(&server, &["--data", utf8(&data)]).await;
    let kc = kube::config::Kubeconfig::from_yaml(&text).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    assert_eq!(config.cluster_url.scheme_str(), Some("https"));
    let client = kube::Client::try_from(config).unwrap();
    let api: Api<Event> = Api::namespaced(client, "default");
    let event: Event = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "from-kube-rs"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "Tested",
        "message": "kube-rs over TLS",
    }))
    .unwrap();
    api.create(&PostParams::default(), &event).await.unwrap();
    let list = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].message.as_deref(), Some("kube-rs over TLS"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_store_writes_its_kubeconfig_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("herald.kubeconfig");
    let server =
        Herald::start_https(&["--store", "memory", "--write-kubeconfig", utf8(&path)]).await;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(&format!("server: {}", server.url)), "{text}");
    assert!(text.contains("client-key-data:"), "{text}");
    let kdir = tempfile::tempdir().unwrap();
    let kubeconfig = kdir.path().join("kubeconfig");
    std::fs::copy(&path, &kubeconfig).unwrap();
    let k = Kubectl::using(kdir, kubeconfig);
    let o = k.run(&["get", "events", "-A"]).await;
    assert_eq!(o.ok(), "", "{}", o.show());
    assert!(o.stderr.contains("No resources found"), "{}", o.show());
}

/// Without any kubeconfig the client commands use the default data directory's
/// credentials; without those, an untrusted certificate is one line saying what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_commands_without_a_kubeconfig_use_the_default_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("herald-data");
    let server = Herald::start_https(&["--data", utf8(&data)]).await;
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let run = |cwd: std::path::PathBuf| {
        let url = server.url.clone();
        let home = home.clone();
        async move {
            tokio::time::timeout(
                CLI_GUARD,
                tokio::process::Command::new(herald_bin())
                    .args(["get", "events", "-s", &url])
                    .current_dir(cwd)
                    .env("HOME", home)
                    .env("NO_COLOR", "1")
                    .env_remove("KUBECONFIG")
                    .env_remove("HERALD_DATA")
                    .env_remove("RUST_LOG")
                    .stdin(Stdio::null())
                    .kill_on_drop(true)
                    .output(),
            )
            .await
            .expect("herald get finishes")
            .expect("run herald get")
        }
    };
    let out = run(dir.path().to_path_buf()).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.starts_with("No events found"), "{stderr}");

    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let out = run(elsewhere).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let port = server.url.rsplit(':').next().unwrap();
    assert_eq!(
        stderr,
        format!(
            "herald: cannot trust 127.0.0.1:{port}'s certificate: for a herald server, write a kubeconfig with its CA (herald kubeconfig --data ITS-DATA-DIR > herald.kubeconfig) and pass --kubeconfig herald.kubeconfig\n"
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_is_refused_off_loopback_with_the_reason() {
    let lines = serve_refused(&[
        "--insecure-plain-http",
        "--store",
        "memory",
        "--listen",
        "0.0.0.0:0",
    ])
    .await;
    assert_eq!(
        lines,
        [
            "herald: refusing to serve plain HTTP on 0.0.0.0:0: anyone who can reach it could read and delete every event; listen on a loopback address (127.0.0.1 or [::1]) or serve HTTPS (drop --insecure-plain-http)"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_certificate_file_is_one_line_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("tls.crt");
    let key = dir.path().join("tls.key");
    std::fs::write(&cert, "not a certificate\n").unwrap();
    std::fs::write(&key, "not a key\n").unwrap();
    let lines = serve_refused(&[
        "--store",
        "memory",
        "--listen",
        "127.0.0.1:0",
        "--tls-cert-file",
        utf8(&cert),
        "--tls-private-key-file",
        utf8(&key),
    ])
    .await;
    assert_eq!(
        lines,
        [format!(
            "herald: the TLS certificate file {} is not usable: it holds no PEM CERTIFICATE block",
            cert.display()
        )]
    );
    // One of the pair alone is a usage error.
    let lines = serve_refused(&["--store", "memory", "--tls-cert-file", utf8(&cert)]).await;
    assert!(lines[0].contains("required arguments"), "{lines:?}");
    assert!(
        lines.iter().any(|l| l.contains("--tls-private-key-file")),
        "{lines:?}"
    );
}

/// `herald bench` over HTTPS with the kubeconfig's CA and admin certificate: every create
/// answered, its own list and watch over TLS too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_loads_an_https_server_through_the_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Herald::start_https(&["--data", utf8(&data)]).await;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        kubeconfig_text(&server, &["--data", utf8(&data)]).await,
    )
    .unwrap();
    let out = tokio::time::timeout(
        CLI_GUARD,
        tokio::process::Command::new(herald_bin())
            .args(["bench", "--kubeconfig", utf8(&kubeconfig)])
            .args(["--requests", "300", "--clients", "3", "--watchers", "1"])
            .args(["--namespace", "tls-bench", "--list", "-o", "json"])
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("herald bench finishes")
    .expect("run herald bench");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["succeeded"], 300, "{s}");
    assert_eq!(s["failed"], 0, "{s}");
    assert_eq!(s["list"]["items"], 300, "{s}");
    assert_eq!(s["watch"]["watchers"], 1, "{s}");
}

/// `herald bench` with a kubeconfig whose user has a bearer token (RBAC on): the token goes
/// with every request, so creates in the user's namespace succeed, and creates where RBAC
/// does not let it write are counted as 403s, not silently dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_sends_the_kubeconfigs_bearer_token() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "bench-token,bencher,7\n").unwrap();
    let rbac = dir.path().join("rbac.yaml");
    std::fs::write(
        &rbac,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: w, namespace: tok-bench}\nrules:\n- apiGroups: [\"\"]\n  resources: [events]\n  verbs: [create, list, watch, get]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: w, namespace: tok-bench}\nsubjects: [{kind: User, name: bencher, apiGroup: rbac.authorization.k8s.io}]\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: w}\n",
    )
    .unwrap();
    let server = Herald::start_https(&[
        "--data",
        utf8(&data),
        "--token-auth-file",
        utf8(&tokens),
        "--authorization-rbac-file",
        utf8(&rbac),
    ])
    .await;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: h\n  cluster:\n    server: {url}\n    certificate-authority: {ca}\ncontexts:\n- name: h\n  context: {{cluster: h, user: bencher}}\ncurrent-context: h\nusers:\n- name: bencher\n  user: {{token: bench-token}}\n",
            url = server.url,
            ca = data.join("pki/ca.crt").display(),
        ),
    )
    .unwrap();
    let bench = |namespace: &'static str| {
        tokio::process::Command::new(herald_bin())
            .args(["bench", "--kubeconfig", utf8(&kubeconfig)])
            .args(["--requests", "200", "--clients", "2"])
            .args(["--namespace", namespace, "-o", "json"])
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
    };
    let out = tokio::time::timeout(CLI_GUARD, bench("tok-bench"))
        .await
        .expect("herald bench finishes")
        .expect("run herald bench");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["succeeded"], 200, "{s}");
    assert_eq!(s["failed"], 0, "{s}");

    let out = tokio::time::timeout(CLI_GUARD, bench("elsewhere"))
        .await
        .expect("herald bench finishes")
        .expect("run herald bench");
    let s: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(s["succeeded"], 0, "{s}");
    assert_eq!(s["errors"]["403"], 200, "{s}");
}

/// Herald's recorder through `KubeSink` over the generated kubeconfig (HTTPS, the admin
/// certificate): repeats of one event are stored as one event with the exact count, and
/// every occurrence is accounted for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recorders_kube_sink_writes_through_the_generated_kubeconfig() {
    use herald_runtime::record::{
        BroadcasterOptions, EventBroadcaster, EventSource, EventType, KubeSink,
    };
    use k8s_openapi::api::core::v1::Pod;

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Herald::start_https(&["--data", utf8(&data)]).await;
    let text = kubeconfig_text(&server, &["--data", utf8(&data)]).await;
    let kc = kube::config::Kubeconfig::from_yaml(&text).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();

    let broadcaster = EventBroadcaster::new(BroadcasterOptions::default());
    broadcaster.start_recording_to_sink(KubeSink::new(client.clone()));
    let recorder = broadcaster.new_recorder(EventSource::new("tls-test", "node-1"));
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "default", "uid": "u-1"},
    }))
    .unwrap();
    for _ in 0..25 {
        recorder.event(
            &pod,
            EventType::Warning,
            "BackOff",
            "Back-off restarting failed container",
        );
    }
    broadcaster.shutdown().await;
    let stats = broadcaster.stats();
    assert_eq!(stats.emitted, 25);
    assert_eq!(stats.unaccounted(0), 0, "{stats:?}");
    assert_eq!(stats.sinks[0].failed, 0, "{stats:?}");

    let api: Api<Event> = Api::namespaced(client, "default");
    let stored = api.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(stored[0].count, Some(25));
    assert_eq!(stored[0].reason.as_deref(), Some("BackOff"));
}
