//! The CRD controller: what kube-apiserver's apiextensions-apiserver runs beside its
//! handlers (the naming, establishing and finalizing controllers, and the handler that
//! serves each established CRD's versions), so it runs in every keel apiserver whatever
//! `--controllers` says.
//!
//! - Each CRD's status is kept as upstream writes it ([`crate::apiextensions::crd::status`]):
//!   its names accepted unless another CRD of the group has them, `NamesAccepted`,
//!   `Established`.
//! - An established CRD's served versions are served at once (the registry's kinds, so
//!   discovery, OpenAPI and every verb see them); a version no longer served, or a CRD gone,
//!   stops being served.
//! - A CRD being deleted is `Terminating`: its objects are deleted (every namespace), then its
//!   `customresourcecleanup.apiextensions.k8s.io` finalizer is removed and it is gone.
//!
//! [`sync_all`] runs once before the server answers (its CRDs served from the first
//! request), then [`run`] follows the CRDs for the life of the process.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::apiextensions::crd;
use crate::apimachinery::time::Time;
use crate::registry::custom_resources;
use crate::registry::customresourcedefinitions::{CLEANUP_FINALIZER, CustomResourceDefinitions};
use crate::registry::store::{DeleteOptions, ListQuery, Registry};
use crate::registry::{Strategy, meta_str};
use crate::storage::Status;

/// How soon a CRD whose objects are not all gone is tried again.
const RETRY: Duration = Duration::from_secs(1);

static CRDS: CustomResourceDefinitions = CustomResourceDefinitions;

/// Brings every CRD's status and serving up to date, once.
pub async fn sync_all(registry: &Registry) -> Result<BTreeSet<String>, Status> {
    let list = registry.list(&CRDS, None, &ListQuery::default()).await?;
    sync_listed(registry, &list.objects().cloned().collect::<Vec<_>>()).await
}

/// Brings each of the CRDs `all` up to date; the names of those still waiting for their
/// objects to go.
async fn sync_listed(registry: &Registry, all: &[Value]) -> Result<BTreeSet<String>, Status> {
    let mut pending = BTreeSet::new();
    for crd in all {
        if !sync(registry, crd, all).await? {
            pending.insert(meta_str(crd, "name").to_string());
        }
    }
    Ok(pending)
}

/// Runs the controller until the process ends.
pub async fn run(registry: Arc<Registry>) {
    loop {
        if let Err(status) = watch_round(&registry).await {
            tracing::warn!(error = %status.message, "CRD controller: restarting its watch");
            tokio::time::sleep(RETRY).await;
        }
    }
}

/// Lists the CRDs, then follows them.
async fn watch_round(registry: &Registry) -> Result<(), Status> {
    let list = registry.list(&CRDS, None, &ListQuery::default()).await?;
    let all: Vec<Value> = list.objects().cloned().collect();
    let mut pending = sync_listed(registry, &all).await?;
    let mut watching = registry
        .watch(&CRDS, None, list.resource_version(), None)
        .await?;
    loop {
        let wait = if pending.is_empty() {
            Duration::from_secs(3600)
        } else {
            RETRY
        };
        let event = match tokio::time::timeout(wait, watching.next()).await {
            Err(_) => None,
            Ok(None) => return Ok(()),
            Ok(Some(Err(status))) => return Err(status),
            Ok(Some(Ok(event))) => Some(event),
        };
        if let Some(event) = event {
            let name = meta_str(&event.object, "name").to_string();
            if event.kind == "DELETED" {
                stop_serving(registry, &name);
                custom_resources::release(&event.object);
                pending.remove(&name);
            } else {
                pending.insert(name);
            }
        }
        // A change of one CRD can accept another's names: every pending one is looked at.
        let all: Vec<Value> = registry
            .list(&CRDS, None, &ListQuery::default())
            .await?
            .objects()
            .cloned()
            .collect();
        let names: Vec<String> = pending.iter().cloned().collect();
        for name in names {
            let Some(crd) = all.iter().find(|c| meta_str(c, "name") == name) else {
                stop_serving(registry, &name);
                pending.remove(&name);
                continue;
            };
            match sync(registry, crd, &all).await {
                Ok(true) => {
                    pending.remove(&name);
                }
                Ok(false) => {}
                Err(status) => {
                    tracing::warn!(crd = %name, error = %status.message, "CRD controller");
                }
            }
        }
    }
}

/// Brings one CRD up to date beside `all`; false while it waits for its objects to go.
async fn sync(registry: &Registry, crd: &Value, all: &[Value]) -> Result<bool, Status> {
    let name = meta_str(crd, "name").to_string();
    if !meta_str(crd, "deletionTimestamp").is_empty() {
        return cleanup(registry, crd).await;
    }
    let others: Vec<Value> = all
        .iter()
        .filter(|c| meta_str(c, "name") != name)
        .cloned()
        .collect();
    let status = crd::status(crd, &others, &Time::now().rfc3339());
    let established = status
        .pointer("/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        });
    // Served before the status says Established: a client that waits for the condition
    // (`kubectl wait`, kube-rs's `is_crd_established`) finds the resource served.
    let (kinds, changed) = if established {
        kinds(crd)
    } else {
        (Vec::new(), false)
    };
    registry.serve_custom(&name, kinds, changed);
    if !same_status(crd.get("status"), &status) {
        write_status(registry, &name, status).await?;
    }
    Ok(true)
}

/// The kinds of a CRD's served versions, and whether any was made or changed.
fn kinds(crd: &Value) -> (Vec<&'static dyn Strategy>, bool) {
    let mut changed = false;
    let kinds = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("served") == Some(&Value::Bool(true)))
        .map(|v| {
            let (kind, made) = custom_resources::serve(crd, v);
            changed |= made;
            kind as &'static dyn Strategy
        })
        .collect();
    (kinds, changed)
}

/// Whether two statuses say the same, their conditions' transition times aside.
fn same_status(old: Option<&Value>, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(conditions) = v.get_mut("conditions").and_then(Value::as_array_mut) {
            for c in conditions {
                if let Some(c) = c.as_object_mut() {
                    c.remove("lastTransitionTime");
                }
            }
        }
        v
    };
    old.is_some_and(|old| strip(old) == strip(new))
}

/// Writes `status` as the CRD's; the CRD written.
async fn write_status(registry: &Registry, name: &str, status: Value) -> Result<Value, Status> {
    let (written, _) = registry
        .update(&CRDS, None, name, Some("status"), false, |current| {
            let mut new = current.cloned().unwrap_or(Value::Null);
            new["status"] = status.clone();
            Ok(new)
        })
        .await?;
    Ok(written)
}

/// Deletes a terminating CRD's objects, then lets it go; true when it is gone.
async fn cleanup(registry: &Registry, crd: &Value) -> Result<bool, Status> {
    let name = meta_str(crd, "name").to_string();
    let terminating = crd
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Terminating"));
    let crd = if terminating {
        crd.clone()
    } else {
        let mut status = crd.get("status").cloned().unwrap_or_else(|| json!({}));
        let condition = json!({
            "type": "Terminating", "status": "True",
            "lastTransitionTime": Time::now().rfc3339(),
            "reason": "InstanceDeletionInProgress",
            "message": "CustomResource deletion is in progress",
        });
        match status.get_mut("conditions").and_then(Value::as_array_mut) {
            Some(conditions) => conditions.push(condition),
            None => status["conditions"] = json!([condition]),
        }
        write_status(registry, &name, status).await?
    };
    // Served while its objects go, creates refused (its kinds read the condition); served
    // again after a restart, so a cleanup cut short deletes the objects it had left. A CRD
    // that serves no version has its objects deleted through its storage version's kind,
    // held by the registry for the cleanup but served to no client (upstream's finalizer
    // deletes through the storage version's store, served or not): no object outlives it,
    // and discovery and requests still answer 404 for the version.
    let (kinds, changed) = kinds(&crd);
    registry.serve_custom(&name, kinds, changed);
    let mut kind = registry.custom_kinds(&name).first().copied();
    if kind.is_none()
        && let Some(storage) = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|v| v.get("storage") == Some(&Value::Bool(true)))
    {
        let (held, _) = custom_resources::serve(&crd, storage);
        registry.hold_for_cleanup(&name, Some(held));
        kind = Some(held);
    }
    let mut left = 0;
    if let Some(kind) = kind {
        let list = registry.list(kind, None, &ListQuery::default()).await?;
        for obj in list.objects() {
            left += 1;
            let namespace = Some(meta_str(obj, "namespace")).filter(|n| !n.is_empty());
            let deleted = registry
                .delete(
                    kind,
                    namespace,
                    meta_str(obj, "name"),
                    &DeleteOptions::default(),
                )
                .await;
            if let Err(status) = deleted
                && status.code != 404
            {
                return Err(status);
            }
        }
    }
    if left > 0 {
        return Ok(false);
    }
    let removed = registry
        .update(&CRDS, None, &name, None, false, |current| {
            let mut new = current.cloned().unwrap_or(Value::Null);
            if let Some(finalizers) = new
                .pointer_mut("/metadata/finalizers")
                .and_then(Value::as_array_mut)
            {
                finalizers.retain(|f| f != CLEANUP_FINALIZER);
            }
            Ok(new)
        })
        .await;
    match removed {
        Ok(_) => {}
        Err(status) if status.code == 404 => {}
        Err(status) => return Err(status),
    }
    stop_serving(registry, &name);
    custom_resources::release(&crd);
    Ok(true)
}

/// Stops serving the CRD `name`'s kinds, and lets go of the kind held for its cleanup.
fn stop_serving(registry: &Registry, name: &str) {
    registry.serve_custom(name, Vec::new(), false);
    registry.hold_for_cleanup(name, None);
}
