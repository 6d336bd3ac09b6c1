//! [`Informer`]: a list-and-watch cache of one kind, as client-go's informers give
//! kube-controller-manager's controllers. The objects are listed, then kept current by a
//! watch from the list's resourceVersion; when the watch ends or fails they are listed again
//! (what vanished in between is dropped as deleted). Every object added, changed or deleted
//! is announced by its key (`namespace/name`, or `name` for a cluster-scoped kind) to the
//! subscriber, if any, which reads the object back from the cache, as a workqueue does.
//!
//! The cache is behind a short-held lock and never across I/O: readers copy out the `Arc`s
//! they need.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::registry::store::{ListQuery, Registry};
use crate::registry::{Strategy, meta_str};
use crate::storage::Status;

/// How soon a failed list or watch is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// Which objects an informer keeps.
pub type Selector = fn(&Value) -> bool;

/// The cached objects of one kind (in one namespace, or all).
pub struct Informer {
    objects: RwLock<BTreeMap<String, Arc<Value>>>,
    synced: AtomicBool,
}

impl Informer {
    /// Starts following `kind` (in `namespace`, or all namespaces), keeping the objects
    /// `selector` accepts; each changed key is sent to `changes`.
    pub fn spawn(
        registry: Arc<Registry>,
        kind: &'static dyn Strategy,
        namespace: Option<&'static str>,
        selector: Option<Selector>,
        changes: Option<mpsc::UnboundedSender<String>>,
    ) -> Arc<Informer> {
        let informer = Arc::new(Informer {
            objects: RwLock::new(BTreeMap::new()),
            synced: AtomicBool::new(false),
        });
        let running = informer.clone();
        tokio::spawn(async move {
            loop {
                let round = running.follow(&registry, kind, namespace, selector, &changes);
                if let Err(status) = round.await {
                    tracing::debug!(
                        resource = kind.info().resource,
                        error = %status.message,
                        "informer: listing again"
                    );
                    tokio::time::sleep(RETRY).await;
                }
                if changes.as_ref().is_some_and(|c| c.is_closed()) {
                    return;
                }
            }
        });
        informer
    }

    /// The key an object is cached under.
    pub fn key(obj: &Value) -> String {
        match meta_str(obj, "namespace") {
            "" => meta_str(obj, "name").to_string(),
            ns => format!("{ns}/{}", meta_str(obj, "name")),
        }
    }

    /// Whether the first list has been taken in.
    pub fn has_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// The object under `key`.
    pub fn get(&self, key: &str) -> Option<Arc<Value>> {
        self.read().get(key).cloned()
    }

    /// Every object, in key order.
    pub fn list(&self) -> Vec<Arc<Value>> {
        self.read().values().cloned().collect()
    }

    /// The objects of `namespace`, in key order.
    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<Value>> {
        let prefix = format!("{namespace}/");
        self.read()
            .range(prefix.clone()..)
            .take_while(|(key, _)| key.starts_with(&prefix))
            .map(|(_, obj)| obj.clone())
            .collect()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<Value>>> {
        self.objects.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<Value>>> {
        self.objects.write().unwrap_or_else(|e| e.into_inner())
    }

    /// One list, then the watch from it until it ends.
    async fn follow(
        &self,
        registry: &Registry,
        kind: &'static dyn Strategy,
        namespace: Option<&str>,
        selector: Option<Selector>,
        changes: &Option<mpsc::UnboundedSender<String>>,
    ) -> Result<(), Status> {
        let keep = |obj: &Value| selector.is_none_or(|s| s(obj));
        let list = registry
            .list(kind, namespace, &ListQuery::default())
            .await?;
        let mut listed = BTreeMap::new();
        for item in list.objects() {
            if keep(item) {
                listed.insert(Informer::key(item), Arc::new(item.clone()));
            }
        }
        let mut changed = Vec::new();
        {
            let mut objects = self.write();
            for (key, old) in objects.iter() {
                if listed.get(key) != Some(old) {
                    changed.push(key.clone());
                }
            }
            for key in listed.keys() {
                if !objects.contains_key(key) {
                    changed.push(key.clone());
                }
            }
            *objects = listed;
        }
        self.synced.store(true, Ordering::Release);
        announce(changes, changed);
        let mut watching = registry
            .watch(kind, namespace, list.resource_version(), None)
            .await?;
        while let Some(event) = watching.next().await {
            let event = event?;
            let key = Informer::key(&event.object);
            {
                let mut objects = self.write();
                if event.kind == "DELETED" || !keep(&event.object) {
                    if objects.remove(&key).is_none() {
                        continue;
                    }
                } else {
                    objects.insert(key.clone(), event.object.clone());
                }
            }
            announce(changes, vec![key]);
        }
        Ok(())
    }
}

fn announce(changes: &Option<mpsc::UnboundedSender<String>>, keys: Vec<String>) {
    if let Some(changes) = changes {
        for key in keys {
            let _ = changes.send(key);
        }
    }
}
