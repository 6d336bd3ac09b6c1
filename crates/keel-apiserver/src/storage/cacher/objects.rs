//! The watch cache's objects, sans I/O: the current state of every object of one resource,
//! by key, as of one revision, with an index per indexed field (kube-apiserver's watch cache
//! store and its indexers, e.g. pods by `spec.nodeName`).
//!
//! Every entry keeps the object as stored (its key, value bytes and resourceVersion: the
//! start an update guesses from) beside what the cache made of it (decoded once, shared by
//! every read). The revision only moves forward: an event moves it to the event's revision, a
//! progress notification to the revision the store says it has sent everything up to.
//!
//! An index maps each value of its field to the keys of the objects that have it; a list by
//! an indexed field's exact value reads those keys alone (still in key order) instead of the
//! whole resource.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::storage::Object;

/// One cached object.
#[derive(Debug)]
pub struct Entry<O> {
    /// The object as stored.
    pub object: Object,
    /// What the cache made of it.
    pub value: O,
    /// Its value of each indexed field, in the order of the store's fields.
    fields: Vec<String>,
}

/// The objects of one list, read from the cache.
#[derive(Debug)]
pub struct Listed<O> {
    /// The objects, in key order.
    pub entries: Vec<Arc<Entry<O>>>,
    /// The revision they are the state at.
    pub revision: i64,
    /// The index read ("" for none), as `apiserver_cache_list_total` labels it.
    pub index: String,
}

/// The current objects of one resource (see the module docs).
#[derive(Debug)]
pub struct Objects<O> {
    entries: BTreeMap<String, Arc<Entry<O>>>,
    /// The indexed fields, each with its values' keys.
    indexes: Vec<(&'static str, HashMap<String, BTreeSet<String>>)>,
    revision: i64,
}

impl<O> Objects<O> {
    /// No objects, at `revision`, indexing `fields`.
    pub fn new(fields: &[&'static str], revision: i64) -> Objects<O> {
        Objects {
            entries: BTreeMap::new(),
            indexes: fields.iter().map(|&f| (f, HashMap::new())).collect(),
            revision,
        }
    }

    /// The revision the objects are the state at.
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// Moves the revision up to `revision` (a progress notification); never down.
    pub fn advance(&mut self, revision: i64) {
        self.revision = self.revision.max(revision);
    }

    /// Stores `object` (created or updated at its mod_revision), made into `value`, with its
    /// values of the indexed fields.
    pub fn put(&mut self, object: Object, value: O, fields: Vec<String>) {
        self.advance(object.mod_revision);
        let key = object.key.clone();
        self.unindex(&key);
        for ((_, index), field) in self.indexes.iter_mut().zip(&fields) {
            index.entry(field.clone()).or_default().insert(key.clone());
        }
        let entry = Entry {
            object,
            value,
            fields,
        };
        self.entries.insert(key, Arc::new(entry));
    }

    /// Removes the object at `key`, deleted at `revision`.
    pub fn remove(&mut self, key: &str, revision: i64) {
        self.advance(revision);
        self.unindex(key);
        self.entries.remove(key);
    }

    fn unindex(&mut self, key: &str) {
        let Some(old) = self.entries.get(key) else {
            return;
        };
        for ((_, index), field) in self.indexes.iter_mut().zip(&old.fields) {
            if let Some(keys) = index.get_mut(field) {
                keys.remove(key);
                if keys.is_empty() {
                    index.remove(field);
                }
            }
        }
    }

    /// The object at `key`.
    pub fn get(&self, key: &str) -> Option<Arc<Entry<O>>> {
        self.entries.get(key).cloned()
    }

    /// The objects under `prefix` (the object at `prefix` alone when not `recursive`), through
    /// the index of the first of `exact` (field, value) requirements that has one.
    pub fn list(&self, prefix: &str, recursive: bool, exact: &[(&str, &str)]) -> Listed<O> {
        let listed = |entries, index: &str| Listed {
            entries,
            revision: self.revision,
            index: index.to_string(),
        };
        if !recursive {
            return listed(self.get(prefix).into_iter().collect(), "");
        }
        let indexed = exact.iter().find_map(|(field, value)| {
            let (name, index) = self.indexes.iter().find(|(f, _)| f == field)?;
            Some((name, index.get(*value)))
        });
        if let Some((name, keys)) = indexed {
            let entries = keys
                .into_iter()
                .flatten()
                .filter(|k| k.starts_with(prefix))
                .filter_map(|k| self.entries.get(k).cloned())
                .collect();
            return listed(entries, &format!("f:{name}"));
        }
        let entries = self
            .entries
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, e)| e.clone())
            .collect();
        listed(entries, "")
    }

    /// How many objects there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(key: &str, revision: i64) -> Object {
        Object {
            key: key.to_string(),
            value: Vec::new(),
            mod_revision: revision,
        }
    }

    fn keys(listed: &Listed<()>) -> Vec<&str> {
        listed
            .entries
            .iter()
            .map(|e| e.object.key.as_str())
            .collect()
    }

    #[test]
    fn lists_read_a_prefix_in_key_order_or_one_key() {
        let mut objects = Objects::new(&[], 1);
        for (key, rev) in [("/p/b/x", 2), ("/p/a/y", 3), ("/p/a/x", 4), ("/q/a", 5)] {
            objects.put(object(key, rev), (), vec![]);
        }
        let all = objects.list("/p/", true, &[]);
        assert_eq!(keys(&all), ["/p/a/x", "/p/a/y", "/p/b/x"]);
        assert_eq!((all.revision, all.index.as_str()), (5, ""));
        assert_eq!(
            keys(&objects.list("/p/a/", true, &[])),
            ["/p/a/x", "/p/a/y"]
        );
        assert_eq!(keys(&objects.list("/p/a/x", false, &[])), ["/p/a/x"]);
        assert!(objects.list("/p/a/z", false, &[]).entries.is_empty());
        objects.remove("/p/a/x", 9);
        assert_eq!(keys(&objects.list("/p/a/", true, &[])), ["/p/a/y"]);
        assert_eq!(objects.revision(), 9);
        objects.advance(7);
        assert_eq!(objects.revision(), 9, "the revision never goes back");
        objects.advance(12);
        assert_eq!(objects.revision(), 12);
    }

    #[test]
    fn an_index_follows_updates_and_deletes() {
        let mut objects = Objects::new(&["spec.nodeName"], 0);
        objects.put(object("/pods/a/p1", 1), (), vec!["n1".into()]);
        objects.put(object("/pods/b/p2", 2), (), vec!["n1".into()]);
        objects.put(object("/pods/a/p3", 3), (), vec!["n2".into()]);
        let on = |objects: &Objects<()>, prefix: &str, node: &str| {
            let listed = objects.list(prefix, true, &[("spec.nodeName", node)]);
            assert_eq!(listed.index, "f:spec.nodeName");
            keys(&listed)
                .iter()
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(on(&objects, "/pods/", "n1"), ["/pods/a/p1", "/pods/b/p2"]);
        assert_eq!(on(&objects, "/pods/a/", "n1"), ["/pods/a/p1"]);
        // Moved to another node, then deleted.
        objects.put(object("/pods/a/p1", 4), (), vec!["n2".into()]);
        assert_eq!(on(&objects, "/pods/", "n1"), ["/pods/b/p2"]);
        assert_eq!(on(&objects, "/pods/", "n2"), ["/pods/a/p1", "/pods/a/p3"]);
        objects.remove("/pods/b/p2", 5);
        assert!(on(&objects, "/pods/", "n1").is_empty());
        // A requirement on a field without an index reads everything.
        let unindexed = objects.list("/pods/", true, &[("status.phase", "Running")]);
        assert_eq!(unindexed.index, "");
        assert_eq!(unindexed.entries.len(), 2);
    }
}
