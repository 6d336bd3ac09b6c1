//! The namespace controller (kube-controller-manager's `namespace` controller): a namespace
//! being deleted (Terminating, with the `kubernetes` finalizer in `spec.finalizers`) has
//! every object in it deleted; once none is left, the finalizer is removed (the `finalize`
//! subresource) and the namespace is gone. Namespaces are watched; one whose objects are not
//! all gone yet (finalizers, grace periods) is tried again every two seconds.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::namespace_conditions::{ConditionUpdater, ContentTotals};
use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::registry::store::{DeleteOptions, ListQuery, Propagation, Registry};
use crate::registry::{ResourceInfo, Strategy, meta_str};
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

/// Deletes what is left in namespace `name` and writes what it found into the namespace's
/// status conditions; true once the namespace is finalized (or gone). As kube's
/// `namespacedResourcesDeleter.deleteAllContent`: every namespaced kind that can be deleted,
/// once per group and resource, an error for one kind not stopping the others; the pods
/// first, and nothing else while any is left (`OrderedNamespaceDeletion`, GA and locked on
/// in 1.34), so no pod outlives the policies and secrets it runs with.
async fn finalize(registry: &Registry, name: &str) -> Result<bool, Status> {
    let mut updater = ConditionUpdater::default();
    let mut totals = ContentTotals::default();
    let mut errors = Vec::new();
    let mut seen = BTreeSet::new();
    let mut waiting = false;
    let kinds = registry.kinds();
    let pods = registry.core("pods");
    let is_pods = |info: &ResourceInfo| info.group.is_empty() && info.resource == "pods";
    let ordered = std::iter::once(pods).chain(kinds.iter().copied().filter(|k| !is_pods(k.info())));
    for kind in ordered {
        let info = kind.info();
        if !info.namespaced || !kind.stored() || !seen.insert((info.group, info.resource)) {
            continue;
        }
        if waiting {
            // Pods are left: the rest waits for them.
            break;
        }
        let left = match delete_content(registry, kind, name).await {
            Ok(left) => left,
            Err(status) => {
                updater.delete_content_error(status.message.clone());
                errors.push(status);
                continue;
            }
        };
        if left.items == 0 {
            continue;
        }
        waiting = true;
        totals
            .remaining
            .insert(format!("{}.{}", info.resource, info.group), left.items);
        for (finalizer, n) in left.finalizers.iter() {
            *totals.finalizers.entry(finalizer.clone()).or_default() += n;
        }
        // Only a pod's grace period explains an object left without finalizers.
        if left.finalizers.is_empty() && !is_pods(info) {
            let message = format!(
                "unexpected items still remain in namespace: {name} for gvr: {}/{}, Resource={}",
                info.group, info.version, info.resource
            );
            updater.delete_content_error(message.clone());
            errors.push(Status::internal(message));
        }
    }
    let now = Time::now();
    updater.content_totals(&totals, now);
    write_conditions(registry, name, &updater, now).await;
    if let Some(status) = errors.into_iter().next() {
        return Err(status);
    }
    if waiting {
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

/// What is left of one kind's objects in a namespace after a deletion pass.
#[derive(Debug, Default)]
struct Left {
    items: usize,
    finalizers: BTreeMap<String, usize>,
}

/// Deletes every object of `kind` in namespace `ns` (background propagation, as kube's
/// namespaced resources deleter asks, so none waits for an orphaning in a dying
/// namespace), then counts what is left and the finalizers holding it
/// (`deleteAllContentForGroupVersionResource`).
async fn delete_content(
    registry: &Registry,
    kind: &'static dyn Strategy,
    ns: &str,
) -> Result<Left, Status> {
    let list = registry.list(kind, Some(ns), &ListQuery::default()).await?;
    if list.objects().next().is_none() {
        return Ok(Left::default());
    }
    let background = DeleteOptions {
        propagation: Some(Propagation::Background),
        ..DeleteOptions::default()
    };
    for item in list.objects() {
        if !meta_str(item, "deletionTimestamp").is_empty() {
            continue;
        }
        match registry
            .delete(kind, Some(ns), meta_str(item, "name"), &background)
            .await
        {
            Ok(_) => {}
            Err(status) if status.code == 404 => {}
            Err(status) => return Err(status),
        }
    }
    let list = registry.list(kind, Some(ns), &ListQuery::default()).await?;
    let mut left = Left::default();
    for item in list.objects() {
        left.items += 1;
        let finalizers = item.at("/metadata/finalizers").and_then(Value::as_array);
        for finalizer in finalizers.into_iter().flatten().filter_map(Value::as_str) {
            *left.finalizers.entry(finalizer.to_string()).or_default() += 1;
        }
    }
    Ok(left)
}

/// Writes the pass's conditions through the namespace's `status` subresource when they
/// change anything; a failure is logged, not fatal (as upstream).
async fn write_conditions(registry: &Registry, name: &str, updater: &ConditionUpdater, now: Time) {
    let namespaces = registry.core("namespaces");
    let written = registry
        .update(namespaces, None, name, Some("status"), false, |current| {
            let mut ns = current.cloned().unwrap_or_default();
            let mut status = ns.get("status").cloned().unwrap_or_default();
            if updater.update(&mut status, now) {
                ns["status"] = status;
            }
            Ok(ns)
        })
        .await;
    if let Err(status) = written
        && status.code != 404
    {
        tracing::warn!(namespace = %name, error = %status.message, "couldn't update status condition for namespace");
    }
}
