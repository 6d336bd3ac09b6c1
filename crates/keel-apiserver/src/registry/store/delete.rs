//! What a delete of the [`Registry`] is asked ([`DeleteOptions`]) and what it did
//! ([`Deleted`]), the preconditions it checks, and the delete of an object a write has
//! just left with nothing holding it.

use serde_json::Value;

use super::Registry;
use crate::registry::stored::decode;
use crate::registry::{ResourceInfo, Strategy, meta_str};
use crate::storage::{Status, StorageError};

/// How a delete is asked for (`DeleteOptions`).
#[derive(Debug, Default, Clone)]
pub struct DeleteOptions {
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `dryRun: [All]`.
    pub dry_run: bool,
    /// `orphanDependents` (deprecated; only changes the answer's code).
    pub orphan_dependents: Option<bool>,
}

/// What a delete did.
#[derive(Debug)]
pub struct Deleted {
    /// The object: as it was when it was removed, or as it now is while it waits for its
    /// finalizers or its grace period.
    pub object: Value,
    /// Whether it is gone from the store.
    pub finished: bool,
}

impl Registry {
    /// Deletes the object at `key` if it is still at `written`, the revision this request
    /// wrote it at: the object as deleted, or None when another writer changed or deleted
    /// it first.
    pub(super) async fn delete_if_unchanged(
        &self,
        kind: &dyn Strategy,
        key: &str,
        name: &str,
        written: i64,
    ) -> Result<Option<Value>, Status> {
        let info = kind.info();
        let deleted = self
            .storage_of(kind)
            .delete(key, None, |now| {
                if now.mod_revision == written {
                    Ok(())
                } else {
                    Err(StorageError::Conflict {
                        key: key.to_string(),
                    })
                }
            })
            .await;
        match deleted {
            Ok(gone) => Ok(Some(decode(kind, &gone)?)),
            Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => Ok(None),
            Err(e) => Err(Status::from_storage(&e, &info.target(name))),
        }
    }
}

/// The preconditions of `options` (uid, resourceVersion) checked against `current`: 409
/// Conflict, worded as kube-apiserver words it, if one does not hold.
pub(super) fn check_preconditions(
    current: &Value,
    options: &DeleteOptions,
    info: &ResourceInfo,
    name: &str,
) -> Result<(), Status> {
    let checks = [
        ("UID", options.uid.as_deref(), meta_str(current, "uid")),
        (
            "ResourceVersion",
            options.resource_version.as_deref(),
            meta_str(current, "resourceVersion"),
        ),
    ];
    for (what, wanted, actual) in checks {
        if let Some(wanted) = wanted
            && wanted != actual
        {
            return Err(Status::conflict(
                &info.target(name),
                &format!(
                    "Precondition failed: {what} in precondition: {wanted}, {what} in object meta: {actual}"
                ),
            ));
        }
    }
    Ok(())
}
