//! Store, indexer and lister behaviour.

mod cache_support;

use std::collections::HashMap;
use std::sync::Arc;

use cache_support::*;
use herald_runtime::cache::{
    IndexError, IndexFn, Indexer, Lister, NAMESPACE_INDEX, Store, object_key, split_key,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::{Expression, Selector};

fn comma_index() -> IndexFn<ConfigMap> {
    Arc::new(|c: &ConfigMap| {
        c.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("users"))
            .map(|v| v.split(',').map(str::to_owned).collect())
            .unwrap_or_default()
    })
}

fn with_users(name: &str, users: &str) -> Arc<ConfigMap> {
    let mut c = cm("ns", name, "1");
    c.metadata.annotations = Some([("users".to_string(), users.to_string())].into());
    Arc::new(c)
}

#[test]
fn add_get_update_delete_list_replace() {
    let s: Indexer<ConfigMap> = Indexer::new();
    s.add(Arc::new(cm("ns", "a", "1")));
    s.add(Arc::new(cm("", "node", "2")));
    assert_eq!(s.len(), 2);
    assert_eq!(rv_of(&s.get_by_key("ns/a").unwrap()), "1");
    assert!(s.get_by_key("node").is_some());
    s.update(Arc::new(cm("ns", "a", "3")));
    assert_eq!(rv_of(&s.get(&cm("ns", "a", "")).unwrap()), "3");
    assert_eq!(s.last_sync_resource_version(), "3");
    assert!(s.delete(&cm("ns", "a", "4")).is_some());
    assert_eq!(s.last_sync_resource_version(), "4");
    assert!(s.get_by_key("ns/a").is_none());
    assert!(s.delete_key("missing").is_none());
    Store::replace(
        &s,
        vec![Arc::new(cm("x", "b", "9")), Arc::new(cm("y", "c", "9"))],
        "10".into(),
    );
    let mut keys = s.list_keys();
    keys.sort();
    assert_eq!(keys, vec!["x/b", "y/c"]);
    assert_eq!(s.last_sync_resource_version(), "10");
    assert_eq!(
        s.list_index_values(NAMESPACE_INDEX).unwrap(),
        vec!["x", "y"]
    );
    // Objects are shared, not copied.
    let a = s.get_by_key("x/b").unwrap();
    let b = s.get_by_key("x/b").unwrap();
    assert!(Arc::ptr_eq(&a, &b));
}

#[test]
fn multi_valued_index_follows_updates_and_drops_empty_sets() {
    let s: Indexer<ConfigMap> = Indexer::new();
    s.add_indexers(HashMap::from([("users".to_string(), comma_index())]))
        .unwrap();
    s.add(with_users("key1", "foo"));
    s.add(with_users("key2", "bar"));
    assert_eq!(s.index_keys("users", "bar").unwrap(), vec!["ns/key2"]);
    s.update(with_users("key2", "foo,bar"));
    assert_eq!(
        s.index_keys("users", "foo").unwrap(),
        vec!["ns/key1", "ns/key2"]
    );
    assert_eq!(s.index_keys("users", "bar").unwrap(), vec!["ns/key2"]);
    s.update(with_users("key2", "bar"));
    assert_eq!(s.index_keys("users", "foo").unwrap(), vec!["ns/key1"]);
    s.delete_key("ns/key1");
    // The emptied "foo" set is gone, not left behind.
    assert_eq!(s.list_index_values("users").unwrap(), vec!["bar"]);
    assert!(s.by_index("users", "foo").unwrap().is_empty());
    let same = s.index("users", &with_users("probe", "bar,zzz")).unwrap();
    assert_eq!(same.len(), 1);
    assert_eq!(object_key(same[0].as_ref()), "ns/key2");
}

#[test]
fn unknown_index_and_conflicts_are_errors() {
    let s: Indexer<ConfigMap> = Indexer::new();
    let e = s.by_index("nope", "x").unwrap_err();
    assert_eq!(e.to_string(), "Index with name nope does not exist");
    assert_eq!(
        s.index_keys("nope", "x").unwrap_err(),
        IndexError::NoSuchIndex("nope".into())
    );
    assert!(s.list_index_values("nope").is_err());
    let e = s
        .add_indexers(HashMap::from([(
            NAMESPACE_INDEX.to_string(),
            comma_index(),
        )]))
        .unwrap_err();
    assert_eq!(e, IndexError::Conflict(NAMESPACE_INDEX.into()));
}

#[test]
fn index_added_after_objects_exist_is_populated_at_once() {
    let s: Indexer<ConfigMap> = Indexer::new();
    s.add(with_users("a", "x,y"));
    s.add(with_users("b", "y"));
    s.add_indexers(HashMap::from([("users".to_string(), comma_index())]))
        .unwrap();
    assert_eq!(s.index_keys("users", "y").unwrap(), vec!["ns/a", "ns/b"]);
    assert_eq!(s.list_index_values("users").unwrap(), vec!["x", "y"]);
    assert_eq!(s.index_names(), vec!["namespace", "users"]);
}

#[test]
fn keys_split_and_join() {
    assert_eq!(object_key(&cm("ns", "a", "1")), "ns/a");
    assert_eq!(object_key(&cm("", "a", "1")), "a");
    assert_eq!(split_key("ns/a").unwrap(), (Some("ns"), "a"));
    assert_eq!(split_key("a").unwrap(), (None, "a"));
    assert_eq!(
        split_key("a/b/c").unwrap_err().to_string(),
        "unexpected key format: \"a/b/c\""
    );
}

#[test]
fn listers_select_by_labels_and_namespace() {
    let s: Indexer<ConfigMap> = Indexer::new();
    s.add(Arc::new(cm_labels("ns1", "a", "1", &[("app", "web")])));
    s.add(Arc::new(cm_labels("ns1", "b", "1", &[("app", "db")])));
    s.add(Arc::new(cm_labels("ns2", "c", "1", &[("app", "web")])));
    let lister = Lister::new(s);
    let web = Selector::from(Expression::Equal("app".into(), "web".into()));
    assert_eq!(lister.list(&Selector::default()).len(), 3);
    let mut got: Vec<String> = lister
        .list(&web)
        .iter()
        .map(|c| object_key(c.as_ref()))
        .collect();
    got.sort();
    assert_eq!(got, vec!["ns1/a", "ns2/c"]);
    let ns1 = lister.namespaced("ns1");
    assert_eq!(ns1.list(&Selector::default()).len(), 2);
    assert_eq!(ns1.list(&web).len(), 1);
    assert!(ns1.get("b").is_ok());
    assert_eq!(
        ns1.get("c").unwrap_err().to_string(),
        "configmaps \"c\" not found"
    );
    assert!(
        lister.get("a").is_err(),
        "namespaced objects are not found by bare name"
    );
}
