//! `herald tail` and `herald top` in a real pseudo-terminal against a live
//! `herald serve --store memory`, with storms made by `herald emit`: the screen shows the
//! events, counts update in place, the storm ranks first, the stream survives a server
//! restart, and `q` / Ctrl-C end them cleanly. Every wait polls the screen, bounded.

mod support;

use support::pty::Pty;
use support::{Herald, HeraldCli};

async fn emit(cli: &HeraldCli, object: &str, type_: &str, reason: &str, repeat: u32) {
    emit_paced(cli, object, type_, reason, repeat, None).await;
}

/// `herald emit`, optionally with `--rate` (so a watcher sees the count grow write by write).
async fn emit_paced(
    cli: &HeraldCli,
    object: &str,
    type_: &str,
    reason: &str,
    repeat: u32,
    rate: Option<u32>,
) {
    let repeat = repeat.to_string();
    let message = format!("{reason} happened to {object}");
    let mut args = vec![
        "emit",
        "--for",
        object,
        "--type",
        type_,
        "--reason",
        reason,
        "--message",
        &message,
        "--repeat",
        &repeat,
    ];
    let rate = rate.map(|r| r.to_string());
    if let Some(r) = &rate {
        args.extend(["--rate", r.as_str()]);
    }
    cli.run(&args).await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_streams_events_and_updates_counts_in_place() {
    let server = Herald::memory().await;
    let cli = HeraldCli::new(&server).await;
    emit(&cli, "pod/old-0", "Normal", "Pulled", 1).await;
    let env = cli.env();
    let mut tail = Pty::herald(&["tail"], &env, 30, 200);
    tail.wait_for("the stored event", |l| {
        l.iter()
            .any(|l| l.contains("pod/old-0") && l.contains("Pulled"))
    });

    // Paced: the watch delivers the storm's writes one by one while tail shows them.
    emit_paced(&cli, "pod/storm-1", "Warning", "BackOff", 300, Some(500)).await;
    let screen = tail.wait_for("the storm's final count", |l| {
        l.iter()
            .any(|l| l.contains("pod/storm-1") && l.contains("(x300 over"))
    });
    let storm_lines = screen.iter().filter(|l| l.contains("pod/storm-1")).count();
    assert_eq!(
        storm_lines,
        1,
        "updates rewrite the line:\n{}",
        screen.join("\n")
    );
    let line = screen.iter().find(|l| l.contains("pod/storm-1")).unwrap();
    assert!(
        line.contains("Warning  pod/storm-1  BackOff  BackOff happened to pod/storm-1"),
        "{line}"
    );
    // Colors on a terminal (NO_COLOR unset).
    assert!(
        tail.raw().windows(2).any(|w| w == b"\x1b["),
        "no escape sequences on a terminal"
    );

    tail.send(b"\x03");
    let screen = tail.wait_for("the summary", |l| {
        l.iter().any(|l| l.contains(" updated events shown"))
    });
    assert_eq!(tail.wait_exit(), 0, "{}", screen.join("\n"));
    // The terminal echoes ^C before the summary.
    let summary = screen
        .iter()
        .find_map(|l| l.split_once("herald tail: "))
        .unwrap()
        .1;
    let (new, updated) = summary
        .strip_suffix(" updated events shown")
        .and_then(|s| s.split_once(" new, "))
        .unwrap_or_else(|| panic!("{summary}"));
    assert_eq!(new, "2", "{summary}");
    assert!(
        updated.parse::<u32>().unwrap() > 0,
        "the storm arrived as updates: {summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_without_colors_when_no_color_is_set() {
    let server = Herald::memory().await;
    let cli = HeraldCli::new(&server).await;
    emit(&cli, "pod/web-1", "Warning", "BackOff", 2).await;
    let mut env = cli.env();
    env.push(("NO_COLOR", "1".to_string()));
    let mut tail = Pty::herald(&["tail"], &env, 30, 200);
    tail.wait_for("the event", |l| l.iter().any(|l| l.contains("(x2 over")));
    let raw = tail.raw();
    // SGR (color) sequences end in 'm'; none may appear.
    let sgr = raw
        .windows(2)
        .enumerate()
        .filter(|(_, w)| *w == b"\x1b[")
        .any(|(i, _)| {
            raw[i + 2..]
                .iter()
                .find(|b| b.is_ascii_alphabetic())
                .is_some_and(|b| *b == b'm')
        });
    assert!(
        !sgr,
        "NO_COLOR must turn colors off: {:?}",
        String::from_utf8_lossy(&raw)
    );
    tail.send(b"\x03");
    assert_eq!(tail.wait_exit(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_resumes_after_the_server_restarts() {
    let first = Herald::memory().await;
    let listen = first.url.trim_start_matches("http://").to_string();
    let cli = HeraldCli::new(&first).await;
    emit(&cli, "pod/before-0", "Normal", "Started", 1).await;
    let env = cli.env();
    let mut tail = Pty::herald(&["tail", "-A"], &env, 30, 200);
    tail.wait_for("the first event", |l| {
        l.iter().any(|l| l.contains("pod/before-0"))
    });

    first.kill9().await;
    tail.wait_for("the lost connection", |l| {
        l.iter().any(|l| l.contains(&format!("-- lost {listen}")))
    });
    // A new server on the same address (empty: memory store).
    let _second = Herald::start_on(&listen, &["--store", "memory"]).await;
    emit(&cli, "pod/after-0", "Warning", "BackOff", 4).await;
    let screen = tail.wait_for("the event written after the restart", |l| {
        l.iter()
            .any(|l| l.contains("default/pod/after-0") && l.contains("(x4 over"))
    });
    tail.send(b"\x03");
    assert_eq!(tail.wait_exit(), 0, "{}", screen.join("\n"));
}

/// The row index of the first screen line containing `needle` at or after `from`.
fn row_of(lines: &[String], needle: &str, from: usize) -> Option<usize> {
    lines
        .iter()
        .skip(from)
        .position(|l| l.contains(needle))
        .map(|i| i + from)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_ranks_storms_live_and_q_quits() {
    let server = Herald::memory().await;
    let cli = HeraldCli::new(&server).await;
    emit(&cli, "pod/storm-a", "Warning", "BackOff", 500).await;
    emit(&cli, "pod/calm-b", "Normal", "Pulled", 5).await;
    let env = cli.env();
    let mut top = Pty::herald(
        &["top", "--window", "10m", "--refresh", "200ms"],
        &env,
        40,
        160,
    );
    // The whole frame: status, both rankings and the footer (drawn last).
    let ranked = |l: &[String]| -> bool {
        let (Some(objects), Some(reasons)) = (
            row_of(l, "Objects by rate", 0),
            row_of(l, "Reasons by rate", 0),
        ) else {
            return false;
        };
        let in_order = |a: &str, b: &str, from: usize| matches!((row_of(l, a, from), row_of(l, b, from)), (Some(x), Some(y)) if x < y);
        l.iter().any(|r| r.contains("·  live"))
            && in_order("pod/storm-a", "pod/calm-b", objects)
            && in_order("BackOff", "Pulled", reasons)
            && l.iter().any(|r| r.contains("q quit"))
    };
    let screen = top.wait_for("both objects and both reasons, ranked", ranked);
    let storm = &screen[row_of(&screen, "pod/storm-a", 0).unwrap()];
    assert!(
        storm.contains("500") && storm.contains("BackOff"),
        "{storm}"
    );

    // A bigger storm while top runs takes the lead, with its compression.
    emit(&cli, "pod/late-c", "Warning", "FailedMount", 2000).await;
    let screen = top.wait_for("the new storm on top", |l| {
        let Some(objects) = row_of(l, "Objects by rate", 0) else {
            return false;
        };
        // Header row, then the busiest object.
        l.get(objects + 2)
            .is_some_and(|r| r.contains("pod/late-c") && r.contains("2000"))
    });
    let late = &screen[row_of(&screen, "pod/late-c", 0).unwrap()];
    assert!(late.contains('x'), "compression shown: {late}");

    top.send(b"q");
    assert_eq!(top.wait_exit(), 0, "{}", top.text());
    let after = top.text();
    assert!(
        after.contains("herald top: ") && after.contains("busiest pod/late-c"),
        "{after}"
    );
}
