//! Reading `--admission-control-config-file` and EventRateLimit's configuration: the good
//! shapes (inline, by path, v1 and v1alpha1) and, for every bad one, a one-line error that
//! names the file and the line.

use std::path::Path;
use std::sync::Arc;

use herald_core::clock::SystemClock;
use herald_server::api::admission::config::AdmissionConfiguration;
use herald_server::api::admission::event_rate_limit::config::{
    Configuration, DEFAULT_CACHE_SIZE, Limit, LimitType,
};
use herald_server::api::admission::{
    AdmissionError, AdmissionOptions, AdmissionPlugin, AdmissionPlugins,
};
use herald_server::api::metrics::Metrics;

const LIMITS: &str = "\
apiVersion: eventratelimit.admission.k8s.io/v1alpha1
kind: Configuration
limits:
- type: Server
  qps: 100
  burst: 200
  cacheSize: 7
- type: Namespace
  qps: 50
  burst: 100
- type: User
  qps: 10
  burst: 20
  cacheSize: 300
- type: SourceAndObject
  qps: 1
  burst: 5
  cacheSize: 0
";

fn limit(limit_type: LimitType, qps: u32, burst: u32, cache_size: usize) -> Limit {
    Limit {
        limit_type,
        qps,
        burst,
        cache_size,
    }
}

fn expected_limits() -> Vec<Limit> {
    vec![
        limit(LimitType::Server, 100, 200, 7),
        limit(LimitType::Namespace, 50, 100, DEFAULT_CACHE_SIZE),
        limit(LimitType::User, 10, 20, 300),
        limit(LimitType::SourceAndObject, 1, 5, DEFAULT_CACHE_SIZE),
    ]
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn indent(text: &str, by: &str) -> String {
    text.lines()
        .map(|l| format!("{by}{l}\n"))
        .collect::<String>()
}

#[test]
fn a_plugin_file_by_relative_path_is_read_beside_the_admission_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("conf")).unwrap();
    write(&dir.path().join("conf"), "limits.yaml", LIMITS);
    let admission = write(
        &dir.path().join("conf"),
        "admission.yaml",
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: EventRateLimit\n  path: limits.yaml\n",
    );
    let c = AdmissionConfiguration::read(&admission).unwrap();
    assert_eq!(c.event_rate_limit.unwrap().limits, expected_limits());
    assert!(c.other_plugins.is_empty());
}

#[test]
fn an_absolute_path_and_v1alpha1_are_accepted_and_path_wins_over_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let limits = write(dir.path(), "limits.yaml", LIMITS);
    let text = format!(
        "apiVersion: apiserver.config.k8s.io/v1alpha1\nkind: AdmissionConfiguration\nplugins:\n- name: EventRateLimit\n  path: {}\n  configuration:\n    apiVersion: eventratelimit.admission.k8s.io/v1alpha1\n    kind: Configuration\n    limits: [{{type: Server, qps: 1, burst: 1}}]\n",
        limits.display()
    );
    let c =
        AdmissionConfiguration::parse(dir.path().join("elsewhere/admission.yaml"), &text).unwrap();
    assert_eq!(c.event_rate_limit.unwrap().limits, expected_limits());
}

#[test]
fn an_inline_configuration_is_read_and_other_plugins_are_ignored() {
    // As upstream, the first entry of a name is the one used: the second one's file is
    // never read.
    let text = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  configuration:\n    whatever: [1, 2]\n- name: EventRateLimit\n  configuration:\n{}- name: EventRateLimit\n  path: unread.yaml\n",
        indent(LIMITS, "    ")
    );
    let c = AdmissionConfiguration::parse("admission.yaml", &text).unwrap();
    assert_eq!(c.event_rate_limit.unwrap().limits, expected_limits());
    assert_eq!(c.other_plugins, ["PodSecurity"]);
    // `configuration` before `name` is read too.
    let text = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- configuration:\n{}  name: EventRateLimit\n",
        indent(LIMITS, "    ")
    );
    let c = AdmissionConfiguration::parse("admission.yaml", &text).unwrap();
    assert_eq!(c.event_rate_limit.unwrap().limits, expected_limits());
}

/// The message of `err`, asserting it is one line.
fn one_line(err: AdmissionError) -> String {
    let s = err.to_string();
    assert_eq!(s.lines().count(), 1, "{s}");
    s
}

#[test]
fn every_bad_limits_file_names_the_file_and_line() {
    let head = "apiVersion: eventratelimit.admission.k8s.io/v1alpha1\nkind: Configuration\n";
    #[rustfmt::skip]
    let cases: &[(&str, &str)] = &[
        // (limits, the error after the head's two lines)
        ("limits: []\n", "limits.yaml:1: limits: must not be empty"),
        ("", "limits.yaml:1: limits: must not be empty"),
        ("limits:\n- {type: Namespace, qps: 1, burst: 1}\n- {type: Pod, qps: 1, burst: 1}\n",
         r#"limits.yaml:5: limits[1]: type: Unsupported value: "Pod": supported values: "Namespace", "Server", "SourceAndObject", "User""#),
        ("limits:\n- type: User\n  qps: 0\n  burst: 3\n",
         "limits.yaml:4: limits[0]: qps: Invalid value: 0: must be positive"),
        ("limits:\n- type: User\n  qps: 3\n",
         "limits.yaml:4: limits[0]: burst: Invalid value: 0: must be positive"),
        ("limits:\n- {type: User, qps: 3, burst: 3, cacheSize: -1}\n",
         "limits.yaml:4: limits[0]: cacheSize: Invalid value: -1: must not be negative"),
        // A Server limit's cacheSize is not looked at, as upstream.
        ("limits:\n- {type: Server, qps: -2, burst: 0, cacheSize: -1}\n",
         "limits.yaml:4: limits[0]: [burst: Invalid value: 0: must be positive, qps: Invalid value: -2: must be positive]"),
        ("limits:\n- {qps: 1, burst: 1}\n",
         r#"limits.yaml:4: limits[0]: type: Unsupported value: "": supported values: "Namespace", "Server", "SourceAndObject", "User""#),
        ("limits:\n- type: User\n  qps: 0.5\n  burst: 3\n",
         "limits.yaml:5: limits[0].qps: invalid type: floating point `0.5`, expected i32"),
        ("limits:\n- type: User\n  qps: 1\n  burts: 3\n",
         "limits.yaml:6: limits[0]: unknown field `burts`, expected one of `type`, `qps`, `burst`, `cacheSize`"),
        ("limits: {type: User}\n", "limits.yaml:3: limits: invalid type: map, expected a sequence"),
        ("limits:\n- {type: User, qps: 1, burst: 1\n", "limits.yaml:5: did not find expected ',' or '}' at line 5 column 1, while parsing a flow mapping at line 4 column 3"),
    ];
    for (limits, want) in cases {
        let err = Configuration::parse("limits.yaml", &format!("{head}{limits}")).unwrap_err();
        let got = one_line(err);
        // The head is two lines; the cases count from the file's first line.
        assert_eq!(&got, want, "for {limits:?}");
    }
    let wrong = Configuration::parse(
        "limits.yaml",
        "apiVersion: eventratelimit.admission.k8s.io/v1\nkind: Configuration\nlimits: [{type: User, qps: 1, burst: 1}]\n",
    )
    .unwrap_err();
    assert_eq!(
        one_line(wrong),
        r#"limits.yaml:1: EventRateLimit's configuration is apiVersion eventratelimit.admission.k8s.io/v1alpha1, kind Configuration; this is apiVersion "eventratelimit.admission.k8s.io/v1", kind "Configuration""#
    );
}

#[test]
fn every_bad_admission_file_names_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let head = "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\n";
    write(
        dir.path(),
        "bad-limits.yaml",
        "apiVersion: eventratelimit.admission.k8s.io/v1alpha1\nkind: Configuration\nlimits:\n- type: Namespace\n  qps: 1\n  burst: 0\n",
    );
    let admission = dir.path().join("admission.yaml");
    let a = admission.display().to_string();
    let bad_limits = dir.path().join("bad-limits.yaml").display().to_string();
    let missing = dir.path().join("missing.yaml").display().to_string();
    #[rustfmt::skip]
    let cases: Vec<(String, String)> = vec![
        (format!("{head}plugins:\n- name: EventRateLimit\n  configuration:\n    apiVersion: eventratelimit.admission.k8s.io/v1alpha1\n    kind: Configuration\n    limits:\n    - type: Namespace\n      qps: 1\n    - type: User\n      qps: 1\n      burst: 1\n"),
         format!("{a}:9: plugins[0].configuration.limits[0]: burst: Invalid value: 0: must be positive")),
        (format!("{head}plugins:\n- name: EventRateLimit\n  configuration:\n    apiVersion: eventratelimit.admission.k8s.io/v1alpha1\n    kind: Configuration\n"),
         format!("{a}:6: plugins[0].configuration: limits: must not be empty")),
        (format!("{head}plugins:\n- name: EventRateLimit\n  path: bad-limits.yaml\n"),
         format!("{bad_limits}:4: limits[0]: burst: Invalid value: 0: must be positive")),
        (format!("{head}plugins:\n- name: EventRateLimit\n  path: missing.yaml\n"),
         format!("reading admission config file {missing}: No such file or directory (os error 2)")),
        (format!("{head}plugins:\n- name: EventRateLimit\n  pth: limits.yaml\n"),
         format!("{a}:5: plugins[0]: unknown field `pth`, expected one of `name`, `path`, `configuration`")),
        (format!("{head}plugins:\n- path: limits.yaml\n"),
         format!("{a}:4: plugins[0]: missing field `name`")),
        (format!("{head}plugin:\n- name: EventRateLimit\n"),
         format!("{a}:3: unknown field `plugin`, expected one of `apiVersion`, `kind`, `plugins`")),
        ("# an admission file\napiVersion: apiserver.config.k8s.io/v2\nkind: AdmissionConfiguration\n".to_string(),
         format!(r#"{a}:2: apiVersion "apiserver.config.k8s.io/v2", kind "AdmissionConfiguration" is not an AdmissionConfiguration (apiVersion apiserver.config.k8s.io/v1 or apiserver.config.k8s.io/v1alpha1, kind AdmissionConfiguration)"#)),
        ("kind: AdmissionConfiguration\n".to_string(),
         format!("{a}:1: missing field `apiVersion`")),
        (format!("{head}plugins:\n- name: EventRateLimit\n    path: x\n"),
         format!("{a}:5: mapping values are not allowed in this context")),
    ];
    for (text, want) in cases {
        let got = one_line(AdmissionConfiguration::parse(&admission, &text).unwrap_err());
        assert_eq!(got, want, "for\n{text}");
    }
    // `configuration` before `name`: read once the name is known, so without a line.
    let text = format!(
        "{head}plugins:\n- configuration:\n    apiVersion: eventratelimit.admission.k8s.io/v1alpha1\n    kind: Configuration\n  name: EventRateLimit\n"
    );
    assert_eq!(
        one_line(AdmissionConfiguration::parse(&admission, &text).unwrap_err()),
        format!("{a}: plugins: EventRateLimit: configuration: limits: must not be empty")
    );
}

fn plugins(options: &AdmissionOptions) -> Result<AdmissionPlugins, AdmissionError> {
    AdmissionPlugins::new(options, Arc::new(SystemClock), &Metrics::default())
}

#[test]
fn enabling_needs_a_configuration_and_a_known_name() {
    let unknown = "NamespaceLifecycle".parse::<AdmissionPlugin>().unwrap_err();
    assert_eq!(
        one_line(unknown),
        r#"unknown admission plugin "NamespaceLifecycle" in --enable-admission-plugins: Herald supports EventRateLimit"#
    );
    let enabled = AdmissionOptions {
        enable_plugins: vec![AdmissionPlugin::EventRateLimit],
        config_file: None,
    };
    assert_eq!(
        one_line(plugins(&enabled).unwrap_err()),
        "--enable-admission-plugins=EventRateLimit needs --admission-control-config-file: an AdmissionConfiguration (apiserver.config.k8s.io/v1) with a plugins entry for EventRateLimit, whose limits must not be empty"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "admission.yaml",
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: EventRateLimit\n",
    );
    let with_file = AdmissionOptions {
        config_file: Some(file.clone()),
        ..enabled.clone()
    };
    assert_eq!(
        one_line(plugins(&with_file).unwrap_err()),
        format!(
            "{}: no configuration for EventRateLimit: add a plugins entry named EventRateLimit with a path or a configuration (its limits must not be empty)",
            file.display()
        )
    );
    // The file is checked even with no plugin enabled; a good one and nothing enabled runs
    // nothing.
    write(dir.path(), "limits.yaml", LIMITS);
    std::fs::write(
        &file,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: EventRateLimit\n  path: limits.yaml\n",
    )
    .unwrap();
    let off = AdmissionOptions {
        enable_plugins: vec![],
        config_file: Some(file.clone()),
    };
    assert!(plugins(&off).unwrap().is_empty());
    let twice = AdmissionOptions {
        enable_plugins: vec![
            AdmissionPlugin::EventRateLimit,
            AdmissionPlugin::EventRateLimit,
        ],
        config_file: Some(file),
    };
    let p = plugins(&twice).unwrap();
    assert_eq!(
        p.enabled().collect::<Vec<_>>(),
        [AdmissionPlugin::EventRateLimit]
    );
}
