//! The namespace controller (kube-controller-manager's `namespace` controller): a namespace
//! being deleted (Terminating, with the `kubernetes` finalizer in `spec.finalizers`) has
//! every object in it deleted; once none is left, the finalizer is removed (the `finalize`
//! subresource) and the namespace is gone. Namespaces are watched; one whose objects are not
//! all gone yet (finalizers, grace periods) is tried again every two seconds.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::json_pointer::At;
use crate::registry::meta_str;
use crate::registry::store::{DeleteOptions, ListQuery, Propagation, Registry};
use crate::storage::Status;

/// The finalizer this controller owns.
pub const FINALIZER: &str = "kubernetes";

/// How soon a namespace whose objects are not all gone is tried again.
const RETRY: Duration = Duration::from_secs(2);

/// Runs the controller until the process ends.
pub async fn run(registry: Arc<Registry>) {
    let mut pending = BTreeSet::new();
    loop {
        if let Err(status) = watch_round(&registry, &mut pending).await {
            tracing::warn!(error = %status.message, "namespace controller: restarting its watch");
            tokio::time::sleep(RETRY).await;
        }
    }
}

/// Lists the namespaces, then watches them, finalizing the ones being deleted.
async fn watch_round(registry: &Registry, pending: &mut BTreeSet<String>) -> Result<(), Status> {
    let kind = registry.core("namespaces");
    let list = registry.list(kind, None, &ListQuery::default()).await?;
    for ns in list.objects() {
        if is_terminating(ns) {
            pending.insert(meta_str(ns, "name").to_string());
        }
    }
    let mut watching = registry
        .watch(kind, None, list.resource_version(), None)
        .await?;
    loop {
        let names: Vec<String> = pending.iter().cloned().collect();
        for name in names {
            match finalize(registry, &name).await {
                Ok(true) => {
                    pending.remove(&name);
                }
                Ok(false) => {}
                Err(status) => {
                    tracing::warn!(namespace = %name, error = %status.message, "deleting the namespace's objects");
                }
            }
        }
        let wait = if pending.is_empty() {
            Duration::from_secs(3600)
        } else {
            RETRY
        };
        match tokio::time::timeout(wait, watching.next()).await {
            Err(_) => continue,
            Ok(None) => return Ok(()),
            Ok(Some(Err(status))) => return Err(status),
            Ok(Some(Ok(event))) => {
                if event.kind != "DELETED" && is_terminating(&event.object) {
                    pending.insert(meta_str(&event.object, "name").to_string());
                }
            }
        }
    }
}

fn is_terminating(ns: &Value) -> bool {
    !meta_str(ns, "deletionTimestamp").is_empty()
        && ns
            .at("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|v| v == FINALIZER))
}

/// Deletes what is left in namespace `name`; true once the namespace is finalized (or gone).
async fn finalize(registry: &Registry, name: &str) -> Result<bool, Status> {
    let mut left = 0;
    for kind in registry.kinds().iter() {
        let info = kind.info();
        // events.k8s.io events are the core events, seen twice.
        if !info.namespaced || (info.group == "events.k8s.io") {
            continue;
        }
        let list = registry
            .list(*kind, Some(name), &ListQuery::default())
            .await?;
        for item in list.objects() {
            left += 1;
            if !meta_str(item, "deletionTimestamp").is_empty() {
                continue;
            }
            let item_name = meta_str(item, "name");
            // As kube's namespaced resources deleter: background deletion whatever the
            // kind's default, so no object waits for an orphaning in a dying namespace.
            let background = DeleteOptions {
                propagation: Some(Propagation::Background),
                ..DeleteOptions::default()
            };
            match registry
                .delete(*kind, Some(name), item_name, &background)
                .await
            {
                Ok(deleted) if deleted.finished => left -= 1,
                Ok(_) => {}
                Err(status) if status.code == 404 => left -= 1,
                Err(status) => return Err(status),
            }
        }
    }
    if left > 0 {
        return Ok(false);
    }
    let namespaces = registry.core("namespaces");
    let finalized = registry
        .update(namespaces, None, name, Some("finalize"), false, |current| {
            let mut ns = current.cloned().unwrap_or_default();
            if let Some(f) = ns.at_mut("/spec/finalizers").and_then(Value::as_array_mut) {
                f.retain(|v| v != FINALIZER);
            }
            Ok(ns)
        })
        .await;
    match finalized {
        Ok(_) => {}
        Err(status) if status.code == 404 => return Ok(true),
        Err(status) => return Err(status),
    }
    match registry
        .delete(namespaces, None, name, &DeleteOptions::default())
        .await
    {
        Ok(_) => Ok(true),
        Err(status) if status.code == 404 => Ok(true),
        Err(status) => Err(status),
    }
}
