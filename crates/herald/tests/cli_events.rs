//! `herald emit` and `herald get events` against a live `herald serve --store memory` on
//! 127.0.0.1, through a kubeconfig in `KUBECONFIG` (kube's own config loading): what emit
//! stores is what get (and the real kubectl) show, storms cost at most the spam budget with
//! an exact stored count, machine output parses, and mistakes are one line with the right
//! exit code.

mod support;

use std::time::Instant;

use support::pty::Pty;
use support::{Herald, HeraldCli, Kubectl, seeded};

/// The spam filter's budget per object: a burst of 25 writes, then one per 5 minutes, plus
/// the trailing write that flushes the final count.
fn spam_budget(elapsed: std::time::Duration) -> u64 {
    25 + elapsed.as_secs() / 300 + 1
}

fn json(out: &support::Output) -> serde_json::Value {
    serde_json::from_str(out.ok()).unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", out.show()))
}

/// The stored events about `object` (e.g. `web-1`), from `herald get events -o json`.
async fn stored_about(cli: &HeraldCli, object: &str) -> Vec<serde_json::Value> {
    let list = json(&cli.run(&["get", "events", "-o", "json"]).await);
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == object)
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emit_then_get_shows_the_event_with_its_count() {
    let server = Herald::memory().await;
    let cli = HeraldCli::new(&server).await;
    let out = cli
        .run(&[
            "emit",
            "--for",
            "pod/web-1",
            "--type",
            "Warning",
            "--reason",
            "BackOff",
            "--message",
            "Back-off restarting failed container",
            "--repeat",
            "3",
        ])
        .await;
    let text = out.ok();
    assert!(
        text.starts_with("emitted 3 of 3 × Warning BackOff on pod/web-1 in default\n"),
        "{}",
        out.show()
    );
    // Identical occurrences may merge in the queue or be counted by a patch; either way the
    // first one is a create and nothing is lost.
    assert!(
        text.contains("pipeline:   created 1, patched "),
        "{}",
        out.show()
    );
    assert!(text.contains(", dropped 0, failed 0\n"), "{}", out.show());
    assert!(text.contains("(1 create, "), "{}", out.show());

    let table = cli.run(&["get", "events"]).await.table();
    assert_eq!(
        table.headers,
        ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    );
    let row = table.row("OBJECT", "pod/web-1");
    assert_eq!(row[table.col("TYPE")], "Warning");
    assert_eq!(row[table.col("REASON")], "BackOff");
    assert_eq!(
        row[table.col("MESSAGE")],
        "Back-off restarting failed container"
    );
    let last_seen = row[table.col("LAST SEEN")];
    assert!(last_seen.contains(" (x3 over "), "{last_seen:?}");

    let wide = cli.run(&["get", "events", "-o", "wide"]).await.table();
    assert_eq!(wide.cell("OBJECT", "pod/web-1", "COUNT"), "3");
    assert_eq!(wide.cell("OBJECT", "pod/web-1", "SOURCE"), "herald-emit");
    assert!(!wide.cell("OBJECT", "pod/web-1", "FIRST SEEN").is_empty());

    // The real kubectl sees the same stored event.
    let k = Kubectl::new(&server).await;
    let items = k.run(&["get", "events", "-o", "json"]).await.json();
    let ev = &items["items"][0];
    assert_eq!(ev["count"], 3);
    assert_eq!(ev["involvedObject"]["kind"], "Pod");
    assert_eq!(ev["involvedObject"]["apiVersion"], "v1");
    assert_eq!(ev["source"]["component"], "herald-emit");

    // Like kubectl, -o json/yaml leave managedFields out unless --show-managed-fields.
    assert!(ev["metadata"].get("managedFields").is_none(), "{ev}");
    let listed = json(&cli.run(&["get", "events", "-o", "json"]).await);
    assert!(
        listed["items"][0]["metadata"]
            .get("managedFields")
            .is_none(),
        "{listed}"
    );
    let yaml = cli.run(&["get", "events", "-o", "yaml"]).await;
    assert!(!yaml.ok().contains("managedFields"), "{}", yaml.show());
    let shown = json(
        &cli.run(&["get", "events", "-o", "json", "--show-managed-fields"])
            .await,
    );
    assert_eq!(
        shown["items"][0]["metadata"]["managedFields"][0]["manager"], "herald-emit",
        "{shown}"
    );
    let yaml = cli
        .run(&["get", "events", "-o", "yaml", "--show-managed-fields"])
        .await;
    assert!(yaml.ok().contains("managedFields"), "{}", yaml.show());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_costs_no_more_than_the_spam_budget_and_its_count_is_exact() {
    let server = Herald::memory().await;
    let cli = HeraldCli::new(&server).await;
    let started = Instant::now();
    let out = cli
        .run(&[
            "emit",
            "--for",
            "pod/storm-1",
            "--type",
            "Warning",
            "--reason",
            "BackOff",
            "--message",
            "Back-off restarting failed container",
            "--repeat",
            "5000",
            "-o",
            "json",
        ])
        .await;
    let budget = spam_budget(started.elapsed());
    let s = json(&out);
    assert_eq!(s["requested"], 5000, "{s}");
    assert_eq!(s["emitted"], 5000, "{s}");
    assert_eq!(s["unaccounted"], 0, "{s}");
    assert_eq!(
        (s["dropped"].as_u64(), s["failed"].as_u64()),
        (Some(0), Some(0)),
        "{s}"
    );
    let writes = s["api_writes"].as_u64().unwrap();
    assert!(writes <= budget, "{writes} writes > budget {budget}: {s}");
    assert_eq!(s["creates"], 1, "{s}");
    let outcomes: u64 = ["created", "patched", "aggregated", "skipped", "merged"]
        .iter()
        .map(|k| s[k].as_u64().unwrap())
        .sum();
    assert_eq!(
        outcomes, 5000,
        "every occurrence has exactly one outcome: {s}"
    );

    let stored = stored_about(&cli, "storm-1").await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(stored[0]["count"], 5000, "the stored count is exact");

    // Paced by --rate: the same accounting, the same exact count.
    let out = cli
        .run(&[
            "emit",
            "--for",
            "pod/paced-1",
            "--reason",
            "Pulled",
            "--repeat",
            "40",
            "--rate",
            "400",
            "-o",
            "json",
        ])
        .await;
    let s = json(&out);
    assert_eq!(
        (s["emitted"].as_u64(), s["unaccounted"].as_i64()),
        (Some(40), Some(0)),
        "{s}"
    );
    assert!(s["api_writes"].as_u64().unwrap() <= spam_budget(started.elapsed()));
    assert_eq!(stored_about(&cli, "paced-1").await[0]["count"], 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_filters_sorts_and_prints_stable_machine_output() {
    let (server, _k) = seeded().await;
    let cli = HeraldCli::new(&server).await;

    let all = json(&cli.run(&["get", "events", "-A", "-o", "json"]).await);
    assert_eq!(all["kind"], "List");
    assert_eq!(all["apiVersion"], "v1");
    let names: Vec<&str> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["metadata"]["name"].as_str().unwrap())
        .collect();
    // Sorted by last seen: 00:00 web-1.a, 00:03 db-0.a, 00:04 coredns.a, 00:05 web-1.b.
    assert_eq!(names, ["web-1.a", "db-0.a", "coredns.a", "web-1.b"]);
    assert!(
        all["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["kind"] == "Event")
    );
    // Stable: the same bytes twice.
    let again = cli.run(&["get", "events", "-A", "-o", "json"]).await;
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(again.ok()).unwrap(),
        all
    );

    let yaml = cli.run(&["get", "events", "-A", "-o", "yaml"]).await;
    let from_yaml: serde_json::Value = serde_saphyr::from_str(yaml.ok())
        .unwrap_or_else(|e| panic!("not YAML ({e}):\n{}", yaml.show()));
    assert_eq!(from_yaml, all, "YAML and JSON say the same");

    let names_of = |v: serde_json::Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let for_web = json(
        &cli.run(&["get", "events", "--for", "pod/web-1", "-o", "json"])
            .await,
    );
    assert_eq!(names_of(for_web), ["web-1.a", "web-1.b"]);
    let warnings = json(
        &cli.run(&["get", "events", "--types", "Warning", "-o", "json"])
            .await,
    );
    assert_eq!(names_of(warnings), ["db-0.a", "web-1.b"]);
    let kube_system = json(
        &cli.run(&["get", "events", "-n", "kube-system", "-o", "json"])
            .await,
    );
    assert_eq!(names_of(kube_system), ["coredns.a"]);
    let deploy = json(
        &cli.run(&[
            "get",
            "events",
            "-A",
            "--for",
            "deployment.apps/coredns",
            "-o",
            "json",
        ])
        .await,
    );
    assert_eq!(names_of(deploy), ["coredns.a"]);

    let table = cli.run(&["get", "events", "-A"]).await.table();
    assert_eq!(
        table.headers,
        [
            "NAMESPACE",
            "LAST SEEN",
            "TYPE",
            "REASON",
            "OBJECT",
            "MESSAGE"
        ]
    );
    assert_eq!(
        table.column("OBJECT"),
        ["pod/web-1", "pod/db-0", "deployment/coredns", "pod/web-1"]
    );
    let backoff = table.cell("REASON", "BackOff", "LAST SEEN");
    assert!(backoff.contains(" (x5 over "), "{backoff:?}");
    let none = cli.run(&["get", "events", "-n", "empty"]).await;
    assert_eq!(none.ok(), "");
    assert_eq!(none.stderr.trim(), "No events found in namespace empty.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubeconfig_flags_choose_the_server_and_namespace() {
    let server = Herald::memory().await;
    let cli = HeraldCli::new(&server).await;
    let kc = cli.kubeconfig.to_str().unwrap();
    // --kubeconfig and --context name the file and context explicitly; -n the namespace.
    let out = cli
        .run(&[
            "emit",
            "--kubeconfig",
            kc,
            "--context",
            "herald",
            "-n",
            "prod",
            "--for",
            "pod/api-0",
            "--reason",
            "Started",
            "--source",
            "my-tool",
            "--source-host",
            "node-7",
        ])
        .await;
    assert!(out.ok().contains("on pod/api-0 in prod"), "{}", out.show());
    let listed = json(
        &cli.run(&["get", "events", "-n", "prod", "-o", "json"])
            .await,
    );
    assert_eq!(listed["items"][0]["involvedObject"]["namespace"], "prod");
    assert_eq!(listed["items"][0]["metadata"]["namespace"], "prod");
    assert_eq!(listed["items"][0]["source"]["component"], "my-tool");
    assert_eq!(listed["items"][0]["source"]["host"], "node-7");
    assert_eq!(listed["items"][0]["reportingComponent"], "my-tool");
    // --server overrides the kubeconfig's URL.
    let out = cli
        .run(&[
            "get",
            "events",
            "-n",
            "prod",
            "--server",
            &server.url,
            "-o",
            "json",
        ])
        .await;
    assert_eq!(json(&out)["items"].as_array().unwrap().len(), 1);
    let e = cli
        .run(&["get", "events", "--kubeconfig", kc, "--context", "nope"])
        .await;
    assert_eq!(e.code, Some(2), "{}", e.show());
    assert!(
        e.stderr
            .starts_with("herald: --context nope: no such context"),
        "{}",
        e.show()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mistakes_are_one_line_that_says_what_to_fix() {
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let down = HeraldCli::for_url(&format!("http://127.0.0.1:{port}")).await;
    let unreachable =
        format!("herald: cannot reach 127.0.0.1:{port}: is `herald serve` running?\n");
    for args in [
        &["get", "events"][..],
        &["emit", "--for", "pod/web-1", "--reason", "BackOff"],
        &["tail"],
    ] {
        let o = down.run(args).await;
        assert_eq!(o.code, Some(1), "{}", o.show());
        assert_eq!(o.stderr, unreachable, "{}", o.show());
    }

    let server = Herald::memory().await;
    let cli = HeraldCli::new(&server).await;
    let usage = [
        (
            &["emit", "--for", "web-1", "--reason", "BackOff"][..],
            "herald: --for \"web-1\": expected KIND/NAME, e.g. --for pod/web-1\n",
        ),
        (
            &["get", "events", "--for", "pod/"],
            "herald: --for \"pod/\": expected KIND/NAME, e.g. --for pod/web-1\n",
        ),
        (
            &["get", "events", "--for", "widget/x"],
            "herald: --for widget/x: the server has no resource \"widget\"; use a kind like pod, deployment or node\n",
        ),
        (
            &["get", "events", "--types", "Error"],
            "herald: --types \"Error\": valid types are Normal and Warning\n",
        ),
        (
            &["top"],
            "herald: herald top draws a full screen and needs a terminal; for plain output use `herald get events`\n",
        ),
        (
            &["bench", "--plot", "out.jpg"],
            "herald: --plot out.jpg: the file name must end in .svg or .png\n",
        ),
        (
            &["bench", "-n", "Bad"],
            "herald: --namespace \"Bad\" is not a namespace name (lowercase letters, digits and '-', at most 63)\n",
        ),
        (
            &["kubeconfig", "--server", "127.0.0.1:17100"],
            "herald: --server \"127.0.0.1:17100\" needs a scheme and a host; use a value like http://127.0.0.1:6443\n",
        ),
    ];
    for (args, expected) in usage {
        let o = cli.run(args).await;
        assert_eq!(o.code, Some(2), "{}", o.show());
        assert_eq!(o.stderr, expected, "{}", o.show());
        assert_eq!(o.stdout, "", "{}", o.show());
    }
    // Bad --for is found before the server is contacted.
    let o = down.run(&["get", "events", "--for", "web-1"]).await;
    assert_eq!(o.code, Some(2), "{}", o.show());
    // clap's own usage errors exit 2 as well.
    let o = cli.run(&["get", "events", "--frobnicate"]).await;
    assert_eq!(o.code, Some(2), "{}", o.show());
    assert!(
        o.stderr
            .starts_with("error: unexpected argument '--frobnicate'"),
        "{}",
        o.show()
    );
    // Values checked by the parser: the first line names the flag and what it takes.
    let rate = "must be a number from 0.001 to 1000000 (per second)";
    let emit = ["emit", "--for", "pod/a", "--reason", "X", "--rate"];
    let parsed: [(&[&str], String); 8] = [
        (
            &[&emit[..], &["0"]].concat(),
            format!("'0' for '--rate <PER_SECOND>': {rate}"),
        ),
        (&[&emit[..], &["1e-30"]].concat(), rate.to_string()),
        (&[&emit[..], &["1e30"]].concat(), rate.to_string()),
        (&["bench", "--rate", "0"], rate.to_string()),
        (&["bench", "--rate", "1e30"], rate.to_string()),
        (
            &["bench", "--clients", "0"],
            "'0' for '--clients <CLIENTS>'".to_string(),
        ),
        (
            &["serve", "--listen", "localhost:7443"],
            "'localhost:7443' for '--listen <LISTEN>': must be IP:PORT, e.g. 127.0.0.1:6443"
                .to_string(),
        ),
        (
            &["bench", "-s", "http://127.0.0.1:1", "--rate", "2e6"],
            rate.to_string(),
        ),
    ];
    for (args, expected) in parsed {
        let o = down.run(args).await;
        assert_eq!(o.code, Some(2), "{}", o.show());
        let first = o.stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: invalid value ") && first.contains(&expected),
            "{}",
            o.show()
        );
        assert!(!o.stderr.contains("panicked"), "{}", o.show());
    }
}

/// A kubeconfig or server the client cannot use is one line naming it, never a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_kubeconfigs_and_servers_are_one_line() {
    let server = Herald::memory().await;
    let cli = HeraldCli::new(&server).await;
    let dir = tempfile::tempdir().unwrap();
    // What `herald kubeconfig --server 127.0.0.1:PORT` used to write.
    let no_scheme = dir.path().join("no-scheme");
    let port = server.url.rsplit(':').next().unwrap();
    std::fs::write(
        &no_scheme,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: h\n  cluster: {{server: '127.0.0.1:{port}'}}\nusers:\n- name: h\n  user: {{}}\ncontexts:\n- name: h\n  context: {{cluster: h, user: h}}\ncurrent-context: h\n"
        ),
    )
    .unwrap();
    let path = no_scheme.to_str().unwrap();
    let expected = format!(
        "herald: the kubeconfig {path} has server \"127.0.0.1:{port}\", which needs an http:// or https:// scheme and a host; write it like http://127.0.0.1:{port}\n"
    );
    for args in [
        &["get", "events", "--kubeconfig", path][..],
        &[
            "emit",
            "--kubeconfig",
            path,
            "--for",
            "pod/a",
            "--reason",
            "X",
        ],
        &["tail", "--kubeconfig", path],
    ] {
        let o = cli.run(args).await;
        assert_eq!(o.code, Some(1), "{}", o.show());
        assert_eq!(o.stderr, expected, "{}", o.show());
    }
    // A kubeconfig that is not there: the cause, once.
    let o = cli
        .run(&["get", "events", "--kubeconfig", "/nonexistent/kubeconfig"])
        .await;
    assert_eq!(o.code, Some(1), "{}", o.show());
    assert_eq!(
        o.stderr,
        "herald: cannot read kubeconfig /nonexistent/kubeconfig: No such file or directory (os error 2)\n",
        "{}",
        o.show()
    );
    // https:// against a plain-http server.
    let https = server.url.replace("http://", "https://");
    let o = cli.run(&["get", "events", "-s", &https]).await;
    assert_eq!(o.code, Some(1), "{}", o.show());
    assert_eq!(
        o.stderr,
        format!(
            "herald: cannot reach 127.0.0.1:{port}: it does not speak TLS; try http:// instead of https://\n"
        ),
        "{}",
        o.show()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_has_help_with_an_example() {
    let cli = HeraldCli::for_url("http://127.0.0.1:1").await;
    for cmd in ["serve", "kubeconfig", "bench", "emit", "get", "tail", "top"] {
        let o = cli.run(&[cmd, "--help"]).await;
        let help = o.ok();
        assert!(
            help.contains("Example"),
            "herald {cmd} --help has no example:\n{help}"
        );
        assert!(help.contains(&format!("herald {cmd}")), "{help}");
    }
    let o = cli.run(&["--help"]).await;
    assert!(o.ok().contains("herald top"), "{}", o.show());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_a_storm_and_still_prints_an_exact_summary() {
    let server = Herald::memory().await;
    let cli = HeraldCli::new(&server).await;
    let env = cli.env();
    // Paced so the run would take far longer than the test: Ctrl-C ends it.
    let mut emit = Pty::herald(
        &[
            "emit",
            "--for",
            "pod/web-1",
            "--type",
            "Warning",
            "--reason",
            "BackOff",
            "--repeat",
            "1000000",
            "--rate",
            "200",
        ],
        &env,
        24,
        120,
    );
    // The progress bar shows occurrences going out.
    emit.wait_for("progress", |l| {
        l.iter()
            .any(|l| l.contains("/1000000") && !l.contains(" 0/1000000"))
    });
    emit.send(b"\x03");
    let screen = emit.wait_for("the summary", |l| {
        l.iter().any(|l| l.starts_with("API writes:"))
    });
    assert_eq!(emit.wait_exit(), 0, "{}", screen.join("\n"));
    let first = screen
        .iter()
        .find(|l| l.starts_with("emitted "))
        .unwrap_or_else(|| panic!("no summary:\n{}", screen.join("\n")));
    assert!(first.ends_with("(interrupted)"), "{first}");
    let emitted: u64 = first
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{first}"));
    assert!(emitted > 0 && emitted < 1_000_000, "{first}");
    let stored = stored_about(&cli, "web-1").await;
    assert_eq!(
        stored[0]["count"].as_u64(),
        Some(emitted),
        "{}",
        screen.join("\n")
    );
}
