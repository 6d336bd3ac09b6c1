//! The shape two of kube-controller-manager's controllers share: one object of a given name
//! in every active namespace (the `default` ServiceAccount, the `kube-root-ca.crt`
//! ConfigMap), made when a namespace appears or the object is deleted, and set right when
//! it is changed (if the controller cares: [`PerNamespace::reconcile`]).
//!
//! Namespaces and the objects of that name are followed by [`Informer`]s; a change to either
//! queues the namespace for a sync, and a failed sync is tried again a second later.
//! Namespaces not `Active` (being deleted) are left alone, and a create refused because the
//! namespace is gone or terminating is not retried, as upstream.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use super::informer::Informer;
use crate::apimachinery::time::Time;
use crate::fieldmanager::FieldManager;
use crate::json_pointer::At;
use crate::registry::store::Registry;
use crate::registry::{Strategy, meta_str};
use crate::storage::Status;

/// How soon a failed sync is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// The field manager of the controllers' writes.
const MANAGER: &str = "kube-controller-manager";

/// One object per namespace.
pub trait PerNamespace: Send + Sync + 'static {
    /// The core resource (`serviceaccounts`).
    const RESOURCE: &'static str;
    /// The object's name (`default`).
    const NAME: &'static str;

    /// The object to create (name and content; the namespace is set on create).
    fn desired(&self) -> Value;

    /// The stored object as it should be, if it is not.
    fn reconcile(&self, _stored: &Value) -> Option<Value> {
        None
    }
}

/// Runs `controller` until the process ends.
pub async fn run<C: PerNamespace>(registry: Arc<Registry>, controller: C) {
    let kind = registry.core(C::RESOURCE);
    let (changed, mut changes) = mpsc::unbounded_channel();
    let namespaces = Informer::spawn(
        registry.clone(),
        registry.core("namespaces"),
        None,
        None,
        Some(changed.clone()),
    );
    let named: fn(&Value) -> bool = |obj| meta_str(obj, "name") == C::NAME;
    let objects = Informer::spawn(registry.clone(), kind, None, Some(named), Some(changed));
    let mut failed = BTreeSet::new();
    loop {
        let mut due: BTreeSet<String> = std::mem::take(&mut failed);
        match tokio::time::timeout(RETRY, changes.recv()).await {
            Ok(None) => return,
            Ok(Some(key)) => {
                due.insert(key.split('/').next().unwrap_or_default().to_string());
                while let Ok(key) = changes.try_recv() {
                    due.insert(key.split('/').next().unwrap_or_default().to_string());
                }
            }
            Err(_) => {}
        }
        if !objects.has_synced() {
            failed.extend(due);
            continue;
        }
        for namespace in due {
            let Some(ns) = namespaces.get(&namespace) else {
                continue;
            };
            let stored = objects.get(&format!("{namespace}/{}", C::NAME));
            if let Err(status) = sync(&registry, kind, &controller, &ns, stored.as_deref()).await {
                tracing::warn!(
                    namespace = %namespace,
                    resource = C::RESOURCE,
                    error = %status.message,
                    "syncing the namespace; will retry"
                );
                failed.insert(namespace);
            }
        }
    }
}

/// Makes the namespace's object what it should be.
async fn sync<C: PerNamespace>(
    registry: &Registry,
    kind: &'static dyn Strategy,
    controller: &C,
    ns: &Value,
    stored: Option<&Value>,
) -> Result<(), Status> {
    if ns.at("/status/phase").and_then(Value::as_str) != Some("Active") {
        return Ok(());
    }
    let namespace = meta_str(ns, "name");
    let Some(stored) = stored else {
        let mut obj = controller.desired();
        FieldManager::new(kind, None, Time::now()).update(None, &mut obj, MANAGER);
        return match registry.create(kind, Some(namespace), obj, false).await {
            Ok(_) => Ok(()),
            // Already made, the namespace gone, or being deleted: nothing to do.
            Err(status) if matches!(status.code, 409 | 404 | 403) => Ok(()),
            Err(status) => Err(status),
        };
    };
    if controller.reconcile(stored).is_none() {
        return Ok(());
    }
    let fields = FieldManager::new(kind, None, Time::now());
    let written = registry
        .update(kind, Some(namespace), C::NAME, None, false, |current| {
            let current = current.cloned().unwrap_or_default();
            let mut new = controller.reconcile(&current).unwrap_or(current.clone());
            fields.update(Some(&current), &mut new, MANAGER);
            Ok(new)
        })
        .await;
    match written {
        Ok(_) => Ok(()),
        Err(status) if status.code == 404 => Ok(()),
        Err(status) => Err(status),
    }
}
