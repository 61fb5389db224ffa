//! `herald serve` that cannot start says why on one line, naming what to change, and says
//! each cause once (the server's error carries its cause in its message, not again as a
//! source for the chain printer to repeat).

mod support;

use support::serve_refused;

#[tokio::test]
async fn an_address_in_use_is_named_with_what_to_do() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let addr = taken.local_addr().expect("its address").to_string();
    let lines = serve_refused(&["--store", "memory", "--listen", &addr]).await;
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
    let file_arg = file.to_string_lossy();
    let lines = serve_refused(&["--listen", "127.0.0.1:0", "--data", &file_arg]).await;
    let [line] = lines.as_slice() else {
        panic!("one line expected: {lines:?}");
    };
    let prefix = format!("herald: cannot create data directory {}: ", file.display());
    let suffix = "; choose a --data path that is, or can become, a directory";
    assert!(
        line.starts_with(&prefix) && line.ends_with(suffix),
        "{line}"
    );
    assert_eq!(line.matches("File exists").count(), 1, "said once: {line}");
    assert!(file.is_file(), "the file is left as it was");
}

#[tokio::test]
async fn a_store_file_that_is_not_a_database_is_named_and_left_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("herald.db");
    let junk = b"these are not the pages you are looking for\n".repeat(200);
    std::fs::write(&db, &junk).expect("write a file");
    let dir_arg = dir.path().to_string_lossy();
    let lines = serve_refused(&["--listen", "127.0.0.1:0", "--data", &dir_arg]).await;
    let [line] = lines.as_slice() else {
        panic!("one line expected: {lines:?}");
    };
    let prefix = format!(
        "herald: cannot open the store in {}: ",
        dir.path().display()
    );
    assert!(line.starts_with(&prefix), "{line}");
    assert!(
        line.ends_with(&format!("{}: file is not a database", db.display())),
        "the file and SQLite's reason: {line}"
    );
    assert!(
        !line.contains("storage backend error"),
        "the directory already says which store failed: {line}"
    );
    assert_eq!(
        std::fs::read(&db).expect("read it back"),
        junk,
        "the file is left as it was"
    );
}

/// Runs `herald serve --store memory` with `extra` flags, expecting one line.
async fn refused_line(extra: &[&str]) -> String {
    let mut args = vec!["--store", "memory", "--listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let lines = serve_refused(&args).await;
    let [line] = lines.as_slice() else {
        panic!("one line expected: {lines:?}");
    };
    line.clone()
}

#[tokio::test]
async fn a_bad_admission_config_is_one_line_naming_the_file_and_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let admission = dir.path().join("admission.yaml");
    std::fs::write(
        &admission,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: EventRateLimit\n  path: limits.yaml\n",
    )
    .expect("write the admission file");
    let limits = dir.path().join("limits.yaml");
    std::fs::write(
        &limits,
        "apiVersion: eventratelimit.admission.k8s.io/v1alpha1\nkind: Configuration\nlimits:\n- type: Namespace\n  qps: 10\n  burst: 20\n- type: Pod\n  qps: 0\n  burst: 1\n",
    )
    .expect("write the limits file");
    let admission_arg = admission.to_string_lossy();
    let flags = [
        "--enable-admission-plugins=EventRateLimit",
        "--admission-control-config-file",
        &admission_arg,
    ];
    assert_eq!(
        refused_line(&flags).await,
        format!(
            r#"herald: {}:7: limits[1]: [type: Unsupported value: "Pod": supported values: "Namespace", "Server", "SourceAndObject", "User", qps: Invalid value: 0: must be positive]"#,
            limits.display()
        )
    );
    // Enabled without a configuration file, or with a plugin Herald does not have: the
    // flag and what to do.
    assert_eq!(
        refused_line(&["--enable-admission-plugins=EventRateLimit"]).await,
        "herald: --enable-admission-plugins=EventRateLimit needs --admission-control-config-file: an AdmissionConfiguration (apiserver.config.k8s.io/v1) with a plugins entry for EventRateLimit, whose limits must not be empty"
    );
    assert_eq!(
        refused_line(&["--enable-admission-plugins=EventRateLimit,AlwaysPullImages"]).await,
        r#"herald: unknown admission plugin "AlwaysPullImages" in --enable-admission-plugins: Herald supports EventRateLimit"#
    );
}

#[tokio::test]
async fn a_bad_mirror_kubeconfig_or_context_is_one_line_naming_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("nope.kubeconfig");
    let missing = missing.to_str().unwrap();
    let line = refused_line(&["--mirror-kubeconfig", missing]).await;
    assert!(
        line.starts_with(&format!(
            "herald: --mirror-kubeconfig {missing}: cannot read it: "
        )),
        "{line}"
    );

    let broken = dir.path().join("broken.kubeconfig");
    std::fs::write(&broken, "clusters: [oops").unwrap();
    let broken = broken.to_str().unwrap();
    let line = refused_line(&["--mirror-kubeconfig", broken]).await;
    assert!(
        line.starts_with(&format!(
            "herald: --mirror-kubeconfig {broken}: not a usable kubeconfig: "
        )),
        "{line}"
    );

    let good = dir.path().join("good.kubeconfig");
    std::fs::write(
        &good,
        support::kubeconfig_for_url("http://127.0.0.1:1", &[]).await,
    )
    .unwrap();
    let good = good.to_str().unwrap();
    let line = refused_line(&["--mirror-kubeconfig", good, "--mirror-context", "elsewhere"]).await;
    assert_eq!(
        line,
        format!("herald: --mirror-context elsewhere: no such context in the kubeconfig {good}")
    );
}
