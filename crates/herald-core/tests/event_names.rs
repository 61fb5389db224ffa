//! generateName expansion and the metadata steps of create and update.

use herald_core::event::names::{
    GENERATE_NAME_ALPHABET, MAX_GENERATE_NAME_BASE, check_url_name, ensure_namespace,
    generate_name, mark_deleting, prepare_for_create, prepare_for_update,
    should_delete_during_update,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use rand::SeedableRng;
use rand::rngs::StdRng;

/// A random source that always yields zero: the first alphabet letter every time.
struct Zero;

impl rand::RngCore for Zero {
    fn next_u32(&mut self) -> u32 {
        0
    }
    fn next_u64(&mut self) -> u64 {
        0
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        dst.fill(0);
    }
}

#[test]
fn generated_names_use_the_alphabet_and_injected_randomness() {
    assert_eq!(generate_name("web-", &mut Zero), "web-bbbbb");
    let mut rng = StdRng::seed_from_u64(42);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let name = generate_name("pod-", &mut rng);
        assert_eq!(name.len(), 9);
        let suffix = &name[4..];
        assert!(
            suffix.bytes().all(|b| GENERATE_NAME_ALPHABET.contains(&b)),
            "{name}"
        );
        seen.insert(name);
    }
    assert!(seen.len() > 190, "suffixes should vary: {}", seen.len());
    // Same seed, same names.
    let a = generate_name("x-", &mut StdRng::seed_from_u64(1));
    let b = generate_name("x-", &mut StdRng::seed_from_u64(1));
    assert_eq!(a, b);
}

#[test]
fn long_bases_are_cut_to_58_bytes() {
    let base = "a".repeat(100);
    let name = generate_name(&base, &mut Zero);
    assert_eq!(name.len(), 63);
    assert_eq!(&name[..MAX_GENERATE_NAME_BASE], &base[..58]);
    assert_eq!(&name[58..], "bbbbb");
    // Multi-byte characters are never split.
    let base = format!("{}é", "a".repeat(57));
    let name = generate_name(&base, &mut Zero);
    assert_eq!(name, format!("{}bbbbb", "a".repeat(57)));
    assert_eq!(generate_name("", &mut Zero), "bbbbb");
}

#[test]
fn create_fills_namespace_identity_and_name() {
    let mut meta = ObjectMeta {
        generate_name: Some("web-".into()),
        uid: Some("client-uid".into()),
        deletion_grace_period_seconds: Some(5),
        ..Default::default()
    };
    let now: Timestamp = "2026-02-03T04:05:06.789Z".parse().unwrap();
    prepare_for_create(&mut meta, "team-a", "server-uid", now, &mut Zero).unwrap();
    assert_eq!(meta.namespace.as_deref(), Some("team-a"));
    assert_eq!(meta.name.as_deref(), Some("web-bbbbb"));
    assert_eq!(meta.uid.as_deref(), Some("server-uid"));
    assert_eq!(
        meta.creation_timestamp,
        Some(Time("2026-02-03T04:05:06Z".parse().unwrap()))
    );
    assert_eq!(meta.deletion_grace_period_seconds, None);
    assert_eq!(meta.generation, None);

    // name wins over generateName.
    let mut meta = ObjectMeta {
        name: Some("fixed".into()),
        generate_name: Some("web-".into()),
        namespace: Some("team-a".into()),
        ..Default::default()
    };
    prepare_for_create(&mut meta, "team-a", "u", now, &mut Zero).unwrap();
    assert_eq!(meta.name.as_deref(), Some("fixed"));

    // A conflicting namespace is a 400.
    let mut meta = ObjectMeta {
        name: Some("x".into()),
        namespace: Some("other".into()),
        ..Default::default()
    };
    let err = prepare_for_create(&mut meta, "team-a", "u", now, &mut Zero).unwrap_err();
    assert_eq!(err.code, 400);
    assert_eq!(
        err.message,
        "the namespace of the provided object does not match the namespace sent on the request"
    );
}

#[test]
fn namespace_rules() {
    let mut meta = ObjectMeta::default();
    ensure_namespace(&mut meta, "ns").unwrap();
    assert_eq!(meta.namespace.as_deref(), Some("ns"));
    ensure_namespace(&mut meta, "ns").unwrap();
    assert!(ensure_namespace(&mut meta, "other").is_err());
    // No namespace in the URL clears the object's (kube then rejects it in validation).
    ensure_namespace(&mut meta, "").unwrap();
    assert_eq!(meta.namespace, None);
}

#[test]
fn url_name_checks() {
    let meta = ObjectMeta {
        name: Some("a".into()),
        namespace: Some("ns".into()),
        ..Default::default()
    };
    check_url_name(&meta, "ns", "a").unwrap();
    let err = check_url_name(&meta, "ns", "b").unwrap_err();
    assert_eq!(
        err.message,
        "the name of the object (a) does not match the name on the URL (b)"
    );
    let err = check_url_name(&meta, "other", "a").unwrap_err();
    assert_eq!(
        err.message,
        "the namespace of the object (ns) does not match the namespace on the request (other)"
    );
    let no_ns = ObjectMeta {
        name: Some("a".into()),
        ..Default::default()
    };
    check_url_name(&no_ns, "ns", "a").unwrap();
}

#[test]
fn update_carries_identity_over() {
    let old = ObjectMeta {
        name: Some("a".into()),
        namespace: Some("ns".into()),
        uid: Some("uid-1".into()),
        resource_version: Some("9".into()),
        creation_timestamp: Some(Time("2026-01-01T00:00:00Z".parse().unwrap())),
        generation: Some(3),
        ..Default::default()
    };
    let mut new = ObjectMeta {
        name: Some("a".into()),
        generation: Some(7),
        creation_timestamp: Some(Time("2030-01-01T00:00:00Z".parse().unwrap())),
        ..Default::default()
    };
    prepare_for_update(&mut new, &old, "ns").unwrap();
    assert_eq!(new.namespace.as_deref(), Some("ns"));
    assert_eq!(new.uid.as_deref(), Some("uid-1"));
    assert_eq!(new.resource_version.as_deref(), Some("9"));
    assert_eq!(new.generation, Some(3));
    assert_eq!(new.creation_timestamp, old.creation_timestamp);
    // A stale resourceVersion is kept for the caller's conflict check.
    let mut stale = ObjectMeta {
        resource_version: Some("2".into()),
        uid: Some("other".into()),
        ..Default::default()
    };
    prepare_for_update(&mut stale, &old, "ns").unwrap();
    assert_eq!(stale.resource_version.as_deref(), Some("2"));
    assert_eq!(stale.uid.as_deref(), Some("other"));
}

#[test]
fn mark_deleting_stamps_whole_seconds_and_bumps_a_generation_once() {
    let mut m = ObjectMeta {
        generation: Some(2),
        ..Default::default()
    };
    mark_deleting(&mut m, "2026-01-01T00:00:09.900Z".parse().unwrap());
    assert_eq!(
        m.deletion_timestamp,
        Some(Time("2026-01-01T00:00:09Z".parse().unwrap()))
    );
    assert_eq!(m.deletion_grace_period_seconds, Some(0));
    assert_eq!(m.generation, Some(3));
    // A repeated delete moves the timestamp, not the generation.
    mark_deleting(&mut m, "2026-01-01T00:01:00Z".parse().unwrap());
    assert_eq!(
        m.deletion_timestamp,
        Some(Time("2026-01-01T00:01:00Z".parse().unwrap()))
    );
    assert_eq!(m.generation, Some(3));
    // Events normally have no generation: none is invented.
    let mut m = ObjectMeta::default();
    mark_deleting(&mut m, Timestamp::UNIX_EPOCH);
    assert_eq!(m.generation, None);
}

#[test]
fn update_keeps_the_deletion_mark() {
    let when = Some(Time("2026-01-01T00:00:00Z".parse().unwrap()));
    let old = ObjectMeta {
        deletion_timestamp: when.clone(),
        deletion_grace_period_seconds: Some(0),
        finalizers: Some(vec!["x/y".into()]),
        ..Default::default()
    };
    let mut cleared = ObjectMeta::default();
    prepare_for_update(&mut cleared, &old, "ns").unwrap();
    assert_eq!(cleared.deletion_timestamp, when);
    assert_eq!(cleared.deletion_grace_period_seconds, Some(0));
    // A changed grace period is left for validation to reject as immutable.
    let mut changed = ObjectMeta {
        deletion_grace_period_seconds: Some(30),
        ..Default::default()
    };
    prepare_for_update(&mut changed, &old, "ns").unwrap();
    assert_eq!(changed.deletion_grace_period_seconds, Some(30));

    // Only the update that leaves a deleting object without finalizers deletes it.
    assert!(should_delete_during_update(&cleared, &old));
    assert!(!should_delete_during_update(&old, &old));
    let not_deleting = ObjectMeta::default();
    assert!(!should_delete_during_update(&cleared, &not_deleting));
    let graceful = ObjectMeta {
        deletion_grace_period_seconds: Some(30),
        ..old.clone()
    };
    assert!(!should_delete_during_update(&cleared, &graceful));
}
