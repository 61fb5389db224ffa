//! The thread-safe, indexed object cache: [`Store`] (the keyed-store contract) and
//! [`Indexer`] (the implementation, with named secondary indexes).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use kube::Resource;

use super::error::IndexError;
use super::key::{object_key, resource_version};

/// An index function: the index values of an object (zero, one or many).
pub type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// Named index functions.
pub type Indexers<K> = HashMap<String, IndexFn<K>>;

/// The name of the namespace index every [`Indexer`] has.
pub const NAMESPACE_INDEX: &str = "namespace";

/// The namespace index function: `[namespace]`, or nothing for cluster-scoped objects.
pub fn namespace_index_fn<K: Resource>() -> IndexFn<K> {
    Arc::new(|obj: &K| {
        obj.meta()
            .namespace
            .iter()
            .filter(|n| !n.is_empty())
            .cloned()
            .collect()
    })
}

/// A keyed store of shared, immutable objects.
///
/// Keys are [`object_key`]s. Objects are handed out as `Arc<K>`: they are shared with every
/// reader and can never be mutated through the cache.
pub trait Store<K>: Send + Sync {
    /// Inserts or replaces the object under its key.
    fn add(&self, obj: Arc<K>);
    /// Same as [`add`](Store::add).
    fn update(&self, obj: Arc<K>) {
        self.add(obj);
    }
    /// Removes the object with this key; returns what was stored.
    fn delete_key(&self, key: &str) -> Option<Arc<K>>;
    /// Swaps the whole content for `objs` and records `resource_version`.
    fn replace(&self, objs: Vec<Arc<K>>, resource_version: String);
    /// The object stored under `key`.
    fn get_by_key(&self, key: &str) -> Option<Arc<K>>;
    /// Every stored object (a snapshot, in no particular order).
    fn list(&self) -> Vec<Arc<K>>;
    /// Every stored key (a snapshot, in no particular order).
    fn list_keys(&self) -> Vec<String>;
    /// Number of stored objects.
    fn len(&self) -> usize;
    /// True when nothing is stored.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The resourceVersion of the last mutation, bookmark or replace (`""` before any).
    fn last_sync_resource_version(&self) -> String;
}

struct Inner<K> {
    items: HashMap<String, Arc<K>>,
    indexers: Indexers<K>,
    /// index name → index value → keys. Empty key sets are removed so that high-cardinality
    /// values do not leak.
    indices: HashMap<String, HashMap<String, HashSet<String>>>,
    last_rv: String,
}

impl<K> Inner<K> {
    fn unindex(&mut self, key: &str, obj: &K) {
        for (name, f) in &self.indexers {
            let Some(index) = self.indices.get_mut(name) else {
                continue;
            };
            for value in f(obj) {
                if let Some(set) = index.get_mut(&value) {
                    set.remove(key);
                    if set.is_empty() {
                        index.remove(&value);
                    }
                }
            }
        }
    }

    fn index(&mut self, key: &str, obj: &K) {
        for (name, f) in &self.indexers {
            let index = self.indices.entry(name.clone()).or_default();
            for value in f(obj) {
                index.entry(value).or_default().insert(key.to_owned());
            }
        }
    }

    fn put(&mut self, key: String, obj: Arc<K>) -> Option<Arc<K>> {
        let old = self.items.remove(&key);
        if let Some(old) = &old {
            self.unindex(&key, old);
        }
        self.index(&key, &obj);
        self.items.insert(key, obj);
        old
    }

    fn keys_for(&self, name: &str, value: &str) -> Result<Option<&HashSet<String>>, IndexError> {
        if !self.indexers.contains_key(name) {
            return Err(IndexError::NoSuchIndex(name.to_owned()));
        }
        Ok(self.indices.get(name).and_then(|i| i.get(value)))
    }
}

/// A thread-safe [`Store`] with named secondary indexes. Cloning is cheap (a shared handle).
///
/// Every `Indexer` has the [`NAMESPACE_INDEX`]; add more with [`Indexer::add_indexers`]
/// (also after objects exist: they are indexed at once).
///
/// Bound: one entry per object of the watched collection (as narrowed by selectors). The
/// cache mirrors the server, so its size is the collection's size; nothing is evicted. Trim
/// objects with a transform (see [`SharedInformer::set_transform`](super::SharedInformer::set_transform))
/// to make each entry smaller.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use herald_runtime::cache::{Indexer, NAMESPACE_INDEX};
///
/// let idx: Indexer<ConfigMap> = Indexer::new();
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("a".into());
/// cm.metadata.namespace = Some("ns1".into());
/// idx.add(Arc::new(cm));
/// assert_eq!(idx.index_keys(NAMESPACE_INDEX, "ns1").unwrap(), vec!["ns1/a".to_string()]);
/// assert!(idx.get_by_key("ns1/a").is_some());
/// ```
pub struct Indexer<K> {
    inner: Arc<RwLock<Inner<K>>>,
}

impl<K> Clone for Indexer<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<K: Resource> Default for Indexer<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Resource> Indexer<K> {
    /// An empty indexer with the namespace index.
    pub fn new() -> Self {
        let mut indexers: Indexers<K> = HashMap::new();
        indexers.insert(NAMESPACE_INDEX.to_owned(), namespace_index_fn::<K>());
        Self {
            inner: Arc::new(RwLock::new(Inner {
                items: HashMap::new(),
                indexers,
                indices: HashMap::new(),
                last_rv: String::new(),
            })),
        }
    }

    /// Inserts or replaces `obj` under its key and re-indexes it; records its resourceVersion.
    pub fn add(&self, obj: Arc<K>) {
        let key = object_key(obj.as_ref());
        let rv = resource_version(obj.as_ref()).to_owned();
        let mut g = self.write();
        g.put(key, obj);
        g.last_rv = rv;
    }

    /// Same as [`add`](Self::add).
    pub fn update(&self, obj: Arc<K>) {
        self.add(obj);
    }

    /// Removes `obj`'s key; records `obj`'s resourceVersion. Returns what was stored.
    pub fn delete(&self, obj: &K) -> Option<Arc<K>> {
        let removed = self.delete_key(&object_key(obj));
        let rv = resource_version(obj);
        if !rv.is_empty() {
            self.write().last_rv = rv.to_owned();
        }
        removed
    }

    /// The object under `key`, if any.
    pub fn get(&self, obj: &K) -> Option<Arc<K>> {
        self.get_by_key(&object_key(obj))
    }
}

impl<K> Indexer<K> {
    fn read(&self) -> RwLockReadGuard<'_, Inner<K>> {
        // Index functions are user code; if one panicked mid-update the maps are still
        // structurally valid, so recovering the guard is safe.
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner<K>> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds named indexes; existing objects are indexed at once. Fails (adding none) if a
    /// name is already taken.
    pub fn add_indexers(&self, new: Indexers<K>) -> Result<(), IndexError> {
        let mut g = self.write();
        if let Some(name) = new.keys().find(|n| g.indexers.contains_key(*n)) {
            return Err(IndexError::Conflict(name.clone()));
        }
        for (name, f) in new {
            let mut index: HashMap<String, HashSet<String>> = HashMap::new();
            for (key, obj) in &g.items {
                for value in f(obj) {
                    index.entry(value).or_default().insert(key.clone());
                }
            }
            g.indices.insert(name.clone(), index);
            g.indexers.insert(name, f);
        }
        Ok(())
    }

    /// The names of the indexes.
    pub fn index_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.read().indexers.keys().cloned().collect();
        names.sort();
        names
    }

    /// Removes `key`; returns what was stored.
    pub fn delete_key(&self, key: &str) -> Option<Arc<K>> {
        let mut g = self.write();
        let old = g.items.remove(key);
        if let Some(old) = &old {
            g.unindex(key, old);
        }
        old
    }

    /// Swaps the whole content for `objs` (keyed by `key_fn`), rebuilding every index, and
    /// records `resource_version`.
    fn replace_with(&self, objs: Vec<(String, Arc<K>)>, resource_version: String) {
        let mut g = self.write();
        g.items = objs.into_iter().collect();
        g.indices.clear();
        let items: Vec<(String, Arc<K>)> = g
            .items
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (key, obj) in items {
            g.index(&key, &obj);
        }
        g.last_rv = resource_version;
    }

    /// Records `rv` as the last synced resourceVersion (a watch bookmark).
    pub fn set_resource_version(&self, rv: String) {
        self.write().last_rv = rv;
    }

    /// The object stored under `key`.
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.read().items.get(key).cloned()
    }

    /// Every stored object (snapshot).
    pub fn list(&self) -> Vec<Arc<K>> {
        self.read().items.values().cloned().collect()
    }

    /// Every stored key (snapshot).
    pub fn list_keys(&self) -> Vec<String> {
        self.read().items.keys().cloned().collect()
    }

    /// Number of stored objects.
    pub fn len(&self) -> usize {
        self.read().items.len()
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The resourceVersion of the last mutation, bookmark or replace.
    pub fn last_sync_resource_version(&self) -> String {
        self.read().last_rv.clone()
    }

    /// Objects sharing at least one value of index `name` with `obj` (each object once).
    pub fn index(&self, name: &str, obj: &K) -> Result<Vec<Arc<K>>, IndexError> {
        let g = self.read();
        let f = g
            .indexers
            .get(name)
            .ok_or_else(|| IndexError::NoSuchIndex(name.to_owned()))?;
        let mut keys: HashSet<&String> = HashSet::new();
        for value in f(obj) {
            if let Some(set) = g.indices.get(name).and_then(|i| i.get(&value)) {
                keys.extend(set.iter());
            }
        }
        Ok(keys
            .into_iter()
            .filter_map(|k| g.items.get(k).cloned())
            .collect())
    }

    /// Objects whose index `name` contains `value`.
    pub fn by_index(&self, name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        let g = self.read();
        Ok(g.keys_for(name, value)?
            .map(|set| set.iter().filter_map(|k| g.items.get(k).cloned()).collect())
            .unwrap_or_default())
    }

    /// Keys whose index `name` contains `value`, sorted.
    pub fn index_keys(&self, name: &str, value: &str) -> Result<Vec<String>, IndexError> {
        let g = self.read();
        let mut keys: Vec<String> = g
            .keys_for(name, value)?
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default();
        keys.sort();
        Ok(keys)
    }

    /// Every value of index `name` that at least one object has, sorted.
    pub fn list_index_values(&self, name: &str) -> Result<Vec<String>, IndexError> {
        let g = self.read();
        if !g.indexers.contains_key(name) {
            return Err(IndexError::NoSuchIndex(name.to_owned()));
        }
        let mut values: Vec<String> = g
            .indices
            .get(name)
            .map(|i| i.keys().cloned().collect())
            .unwrap_or_default();
        values.sort();
        Ok(values)
    }
}

impl<K: Resource + Send + Sync> Store<K> for Indexer<K> {
    fn add(&self, obj: Arc<K>) {
        Indexer::add(self, obj);
    }
    fn delete_key(&self, key: &str) -> Option<Arc<K>> {
        Indexer::delete_key(self, key)
    }
    fn replace(&self, objs: Vec<Arc<K>>, resource_version: String) {
        let keyed = objs
            .into_iter()
            .map(|o| (object_key(o.as_ref()), o))
            .collect();
        self.replace_with(keyed, resource_version);
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        Indexer::get_by_key(self, key)
    }
    fn list(&self) -> Vec<Arc<K>> {
        Indexer::list(self)
    }
    fn list_keys(&self) -> Vec<String> {
        Indexer::list_keys(self)
    }
    fn len(&self) -> usize {
        Indexer::len(self)
    }
    fn last_sync_resource_version(&self) -> String {
        Indexer::last_sync_resource_version(self)
    }
}

impl<K: Resource + Send + Sync> Indexer<K> {
    /// Swaps the whole content for `objs` and records `resource_version` (see [`Store::replace`]).
    pub fn replace(&self, objs: Vec<Arc<K>>, resource_version: String) {
        Store::replace(self, objs, resource_version);
    }
}
