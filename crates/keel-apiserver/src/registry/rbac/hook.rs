//! kube-apiserver's `rbac/bootstrap-roles` post-start hook (`EnsureRBACPolicy` in
//! `pkg/registry/rbac/rest/storage_rbac.go`), run on every start: the store must answer a
//! list of ClusterRoles and ClusterRoleBindings, the once-off migrations run, then every
//! bootstrap ClusterRole, ClusterRoleBinding, Role and RoleBinding
//! ([`super::bootstrap::policy`]) is created or reconciled ([`super::reconcile`]). A failure
//! does not stop the others; the whole is tried again until it all succeeds.

use std::time::Duration;

use serde_json::Value;

use super::bindings::{ClusterRoleBindings, RoleBindings};
use super::bootstrap::policy;
use super::reconcile::{self, Operation, Reconciled};
use super::roles::{ClusterRoles, Roles};
use crate::apimachinery::time::Time;
use crate::controllers::system_namespaces;
use crate::fieldmanager::FieldManager;
use crate::registry::store::{DeleteOptions, ListQuery, Registry};
use crate::registry::{Strategy, meta_str};
use crate::storage::Status;

/// The field manager of the hook's writes (its loopback client's user agent).
const MANAGER: &str = "kube-apiserver";

/// `ClusterRolesToAggregate`: a role whose custom rules move to the role it aggregates.
const ROLES_TO_AGGREGATE: [(&str, &str); 3] = [
    ("admin", "system:aggregate-to-admin"),
    ("edit", "system:aggregate-to-edit"),
    ("view", "system:aggregate-to-view"),
];

/// `ClusterRoleBindingsToSplit`: `system:discovery`'s subjects, labels and annotations
/// seed `system:public-info-viewer`.
const BINDINGS_TO_SPLIT: [(&str, &str); 1] = [("system:discovery", "system:public-info-viewer")];

/// The object `name`, None when missing.
async fn get(
    registry: &Registry,
    kind: &dyn Strategy,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<Value>, Status> {
    match registry.get(kind, namespace, name, "").await {
        Ok(obj) => Ok(Some(obj)),
        Err(status) if status.code == 404 => Ok(None),
        Err(status) => Err(status),
    }
}

/// Creates `obj` as kube-apiserver's client would; Ok when it already exists.
async fn create(registry: &Registry, kind: &dyn Strategy, mut obj: Value) -> Result<bool, Status> {
    let namespace = Some(meta_str(&obj, "namespace").to_string()).filter(|n| !n.is_empty());
    FieldManager::new(kind, None, Time::now()).update(None, &mut obj, MANAGER);
    match registry
        .create(kind, namespace.as_deref(), obj, false)
        .await
    {
        Ok(_) => Ok(true),
        Err(status) if status.code == 409 => Ok(false),
        Err(status) => Err(status),
    }
}

/// A stored object as a template for a new one: its server-set fields dropped.
fn as_new(mut obj: Value, name: &str) -> Value {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "managedFields",
            "generation",
        ] {
            meta.remove(field);
        }
        meta.insert("name".into(), name.into());
    }
    obj
}

/// `primeAggregatedClusterRoles`: when `system:aggregate-to-<x>` is missing and `<x>` is
/// stored without an aggregation rule, `<x>`'s rules are copied into a new
/// `system:aggregate-to-<x>` (an `<x>` already aggregated ends the migration).
pub async fn prime_aggregated_cluster_roles(registry: &Registry) -> Result<(), Status> {
    for (old, new) in ROLES_TO_AGGREGATE {
        if get(registry, &ClusterRoles, None, new).await?.is_some() {
            continue;
        }
        let Some(existing) = get(registry, &ClusterRoles, None, old).await? else {
            continue;
        };
        if existing
            .get("aggregationRule")
            .is_some_and(|r| !r.is_null())
        {
            return Ok(());
        }
        tracing::info!("migrating {old} to {new}");
        create(registry, &ClusterRoles, as_new(existing, new)).await?;
    }
    Ok(())
}

/// `primeSplitClusterRoleBindings`: when the source binding is stored and the target is
/// not, the target is created from its bootstrap template with the source's subjects,
/// labels and annotations.
pub async fn prime_split_cluster_role_bindings(registry: &Registry) -> Result<(), Status> {
    for (source, target) in BINDINGS_TO_SPLIT {
        let Some(existing) = get(registry, &ClusterRoleBindings, None, source).await? else {
            continue;
        };
        if get(registry, &ClusterRoleBindings, None, target)
            .await?
            .is_some()
        {
            continue;
        }
        let Some(template) = policy().cluster_role_binding(target) else {
            continue;
        };
        tracing::info!(
            "copying subjects, labels, and annotations from ClusterRoleBinding {source:?} to template {target:?}"
        );
        let mut new = template.clone();
        for (at, field) in [
            ("", "subjects"),
            ("metadata", "labels"),
            ("metadata", "annotations"),
        ] {
            let from = if at.is_empty() {
                existing.get(field)
            } else {
                existing[at].get(field)
            };
            let into = if at.is_empty() {
                &mut new
            } else {
                &mut new[at]
            };
            match from {
                Some(value) => into[field] = value.clone(),
                None => {
                    into.as_object_mut().map(|o| o.remove(field));
                }
            }
        }
        create(registry, &ClusterRoleBindings, new).await?;
    }
    Ok(())
}

/// `ReconcileRoleOptions.Run` / `ReconcileRoleBindingOptions.Run` for one bootstrap
/// object, confirmed.
pub async fn reconcile_one(
    registry: &Registry,
    kind: &'static dyn Strategy,
    expected: &Value,
) -> Result<(), Status> {
    let binding = kind.info().kind.ends_with("Binding");
    let compute = |existing: &Value| -> Reconciled {
        if binding {
            reconcile::binding(existing, expected)
        } else {
            reconcile::role(existing, expected)
        }
    };
    let namespace = Some(meta_str(expected, "namespace")).filter(|n| !n.is_empty());
    let name = meta_str(expected, "name");
    let what = format!(
        "{}.{}/{name}",
        kind.info().kind.to_lowercase(),
        super::GROUP
    );
    // As upstream: a create that finds it made meanwhile, or an update or delete that finds
    // it gone, runs again.
    for _ in 0..5 {
        let Some(existing) = get(registry, kind, namespace, name).await? else {
            if create(registry, kind, expected.clone()).await? {
                tracing::debug!("created {what}");
                return Ok(());
            }
            continue;
        };
        let result = compute(&existing);
        if result.protected {
            if result.operation != Operation::None {
                tracing::warn!(
                    "skipped reconcile-protected {what} with missing permissions: {:?}",
                    result.missing
                );
            }
            return Ok(());
        }
        match result.operation {
            Operation::None | Operation::Create => return Ok(()),
            Operation::Recreate => {
                let options = DeleteOptions {
                    uid: Some(meta_str(&existing, "uid").to_string()),
                    ..DeleteOptions::default()
                };
                match registry.delete(kind, namespace, name, &options).await {
                    Ok(_) => {}
                    Err(status) if status.code == 404 => {}
                    Err(status) => return Err(status),
                }
                tracing::debug!("recreating {what}");
                if create(registry, kind, expected.clone()).await? {
                    return Ok(());
                }
            }
            Operation::Update(_) => {
                let fields = FieldManager::new(kind, None, Time::now());
                let written = registry
                    .update(kind, namespace, name, None, false, |current| {
                        let Some(current) = current else {
                            return Err(Status::failure(
                                404,
                                "NotFound",
                                format!("{what} not found"),
                            ));
                        };
                        // Reconciled again against the object the write replaces.
                        let mut new = match compute(current) {
                            Reconciled {
                                operation: Operation::Update(new),
                                protected: false,
                                ..
                            } => new,
                            _ => current.clone(),
                        };
                        fields.update(Some(current), &mut new, MANAGER);
                        Ok(new)
                    })
                    .await;
                match written {
                    Ok(_) => {
                        tracing::debug!(
                            "updated {what} with additional permissions: {:?}",
                            result.missing
                        );
                        return Ok(());
                    }
                    Err(status) if status.code == 404 => continue,
                    Err(status) => return Err(status),
                }
            }
        }
    }
    Err(Status::internal(format!(
        "{what} kept changing while reconciled"
    )))
}

/// `ensureRBACPolicy`: Ok once every object is reconciled.
pub async fn ensure(registry: &Registry) -> Result<(), Status> {
    // The store must answer before anything is reconciled.
    registry
        .list(&ClusterRoles, None, &ListQuery::default())
        .await?;
    registry
        .list(&ClusterRoleBindings, None, &ListQuery::default())
        .await?;
    prime_aggregated_cluster_roles(registry).await?;
    prime_split_cluster_role_bindings(registry).await?;
    let policy = policy();
    let mut failure = None;
    let kinds: [(&'static dyn Strategy, &Vec<Value>); 4] = [
        (&ClusterRoles, &policy.cluster_roles),
        (&ClusterRoleBindings, &policy.cluster_role_bindings),
        (&Roles, &policy.roles),
        (&RoleBindings, &policy.role_bindings),
    ];
    for (kind, objects) in kinds {
        if kind.info().namespaced {
            // The RoleModifier's tryEnsureNamespace: kube-system and kube-public.
            if let Err(message) = system_namespaces::ensure(registry).await {
                failure = Some(Status::internal(message));
                continue;
            }
        }
        for expected in objects {
            if let Err(status) = reconcile_one(registry, kind, expected).await {
                tracing::warn!(
                    kind = kind.info().kind,
                    name = meta_str(expected, "name"),
                    error = %status.message,
                    "unable to reconcile"
                );
                failure = Some(status);
            }
        }
    }
    failure.map_or(Ok(()), Err)
}

/// The post-start hook: [`ensure`], tried again until it succeeds.
pub async fn run(registry: &Registry) {
    let mut delay = Duration::from_millis(100);
    while let Err(status) = ensure(registry).await {
        tracing::warn!(error = %status.message, "cannot reconcile the bootstrap RBAC policy yet; retrying");
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}
