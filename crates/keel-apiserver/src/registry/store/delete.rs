//! What a delete of the [`Registry`] is asked ([`DeleteOptions`]) and what it did
//! ([`Deleted`]), the preconditions it checks, the garbage collector's finalizers it sets
//! ([`Propagation`]), and the delete of an object a write has just left with nothing
//! holding it.

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
    /// `orphanDependents` (deprecated: `true` is `Orphan`, `false` `Background`).
    pub orphan_dependents: Option<bool>,
    /// `propagationPolicy`.
    pub propagation: Option<Propagation>,
}

/// What becomes of the objects whose ownerReferences name a deleted object
/// (`propagationPolicy`), as the garbage collector carries it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Their references to it are removed (the `orphan` finalizer holds the owner until
    /// then).
    Orphan,
    /// The owner goes at once; they are deleted after it.
    Background,
    /// They are deleted first (the `foregroundDeletion` finalizer holds the owner until
    /// those that block it are gone).
    Foreground,
}

impl Propagation {
    /// The policy a `propagationPolicy` names.
    pub fn parse(policy: &str) -> Option<Propagation> {
        match policy {
            "Orphan" => Some(Propagation::Orphan),
            "Background" => Some(Propagation::Background),
            "Foreground" => Some(Propagation::Foreground),
            _ => None,
        }
    }
}

/// The finalizer of an owner whose dependents are being orphaned.
pub const ORPHAN_FINALIZER: &str = "orphan";
/// The finalizer of an owner whose dependents are being deleted first.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// The finalizers a delete with `options` leaves `current` with, as kube-apiserver's
/// `deletionFinalizersForGarbageCollection` sets them (an explicit policy first, then a
/// finalizer already set, then the kind's default `default`); None when they do not change.
pub fn gc_finalizers(
    current: &Value,
    options: &DeleteOptions,
    default: Propagation,
) -> Option<Vec<Value>> {
    let existing: Vec<&str> = current
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|f| f.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let asked = match (options.orphan_dependents, options.propagation) {
        (Some(true), _) => Some(Propagation::Orphan),
        (Some(false), _) => Some(Propagation::Background),
        (None, policy) => policy,
    };
    let policy = asked.unwrap_or_else(|| {
        if existing.contains(&ORPHAN_FINALIZER) {
            Propagation::Orphan
        } else if existing.contains(&FOREGROUND_FINALIZER) {
            Propagation::Foreground
        } else {
            default
        }
    });
    let mut finalizers: Vec<&str> = existing
        .iter()
        .copied()
        .filter(|f| *f != ORPHAN_FINALIZER && *f != FOREGROUND_FINALIZER)
        .collect();
    match policy {
        Propagation::Orphan => finalizers.push(ORPHAN_FINALIZER),
        Propagation::Foreground => finalizers.push(FOREGROUND_FINALIZER),
        Propagation::Background => {}
    }
    let same =
        finalizers.len() == existing.len() && finalizers.iter().all(|f| existing.contains(f));
    (!same).then(|| finalizers.into_iter().map(Value::from).collect())
}

/// `obj` with the garbage collector's finalizers a delete with `options` sets.
pub fn with_gc_finalizers(obj: &Value, options: &DeleteOptions, default: Propagation) -> Value {
    let mut obj = obj.clone();
    if let Some(finalizers) = gc_finalizers(&obj, options, default) {
        crate::registry::meta::metadata(&mut obj).insert("finalizers".into(), finalizers.into());
    }
    obj
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
            .storage_of(kind)?
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn options(orphan: Option<bool>, policy: Option<Propagation>) -> DeleteOptions {
        DeleteOptions {
            orphan_dependents: orphan,
            propagation: policy,
            ..DeleteOptions::default()
        }
    }

    #[test]
    fn finalizers_follow_the_policy_then_the_object_then_the_kind() {
        let bare = json!({"metadata": {"name": "a"}});
        let set = |obj: &Value, o: &DeleteOptions, d| gc_finalizers(obj, o, d);
        let bg = Propagation::Background;
        assert_eq!(set(&bare, &options(None, None), bg), None);
        assert_eq!(
            set(&bare, &options(None, Some(Propagation::Orphan)), bg),
            Some(vec![json!("orphan")])
        );
        assert_eq!(
            set(&bare, &options(None, None), Propagation::Orphan),
            Some(vec![json!("orphan")])
        );
        assert_eq!(
            set(&bare, &options(Some(false), None), Propagation::Orphan),
            None
        );
        let fg = options(None, Some(Propagation::Foreground));
        assert_eq!(set(&bare, &fg, bg), Some(vec![json!("foregroundDeletion")]));
        // A finalizer already there decides when the delete names no policy; other
        // finalizers stay.
        let held = json!({"metadata": {"finalizers": ["example.com/x", "orphan"]}});
        assert_eq!(set(&held, &options(None, None), bg), None);
        assert_eq!(
            set(&held, &fg, bg),
            Some(vec![json!("example.com/x"), json!("foregroundDeletion")])
        );
        assert_eq!(
            set(&held, &options(None, Some(Propagation::Background)), bg),
            Some(vec![json!("example.com/x")])
        );
    }
}
