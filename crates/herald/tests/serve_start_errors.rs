//! `herald serve` that cannot start says why on one line, naming what to change, and says
//! each cause once (the server's error carries its cause in its message, not again as a
//! source for the chain printer to repeat).

mod support;

use std::process::Stdio;

use support::{START_GUARD, herald_bin};

/// Runs `herald serve ARGS`, which must exit on its own and fail; returns its stderr lines.
async fn serve_fails(args: &[&str]) -> Vec<String> {
    let out = tokio::time::timeout(
        START_GUARD,
        tokio::process::Command::new(herald_bin())
            .arg("serve")
            .args(args)
            .env("NO_COLOR", "1")
            .env_remove("HERALD_LISTEN")
            .env_remove("HERALD_DATA")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("herald serve exits on its own")
    .expect("run herald serve");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{out:?}");
    assert!(!stdout.contains("listening"), "it must not serve: {stdout}");
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn an_address_in_use_is_named_with_what_to_do() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let addr = taken.local_addr().expect("its address").to_string();
    let lines = serve_fails(&["--store", "memory", "--listen", &addr]).await;
    let [line] = lines.as_slice() else {
        panic!("one line expected: {lines:?}");
    };
    let prefix = format!("herald: cannot listen on {addr}: ");
    let suffix = "; stop what is using it or choose another --listen address";
    assert!(
        line.starts_with(&prefix) && line.ends_with(suffix),
        "{line}"
    );
    let cause = &line[prefix.len()..line.len() - suffix.len()];
    assert!(cause.contains("in use"), "the OS's reason: {line}");
    assert_eq!(line.matches(cause).count(), 1, "said once: {line}");
    drop(taken);
}

#[tokio::test]
async fn a_data_directory_that_is_a_file_is_named_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"").expect("write a file");
    let lines = serve_fails(&["--listen", "127.0.0.1:0", "--data", &file.to_string_lossy()]).await;
    let [line] = lines.as_slice() else {
        panic!("one line expected: {lines:?}");
    };
    let prefix = format!("herald: cannot open the store in {}: ", file.display());
    assert!(line.starts_with(&prefix), "{line}");
    assert_eq!(line.matches("File exists").count(), 1, "said once: {line}");
    assert!(file.is_file(), "the file is left as it was");
}
