//! The writes of the [`Registry`]: create, and the one write every update goes through (of an
//! object, its status, a namespace's finalizers or a delete's mark), with the update rules
//! it runs before it validates (resource quantities made canonical last).

use std::borrow::Cow;
use std::sync::Mutex;

use serde_json::{Value, json};

use super::{MARK_FOR_DELETION, Registry, invalid, rejected};
use crate::apimachinery::time::Time;
use crate::http::auth::User;
use crate::json_pointer::At;
use crate::registry::admission::{self, UpdateAdmission};
use crate::registry::served::{decodes_back, written};
use crate::registry::stored::{decode, encode_owned, parse_stored, same_but_resource_version};
use crate::registry::{Strategy, meta, meta_str};
use crate::storage::{Existing, Object, Status, StorageError};

/// Which object an update writes, and how.
pub(super) struct WriteTo<'a> {
    /// Its namespace (None for a cluster-scoped kind).
    pub namespace: Option<&'a str>,
    /// Its name.
    pub name: &'a str,
    /// `status`, `finalize`, a delete's mark, or None for the object itself.
    pub subresource: Option<&'a str>,
    /// Whether nothing is written.
    pub dry_run: bool,
    /// Whether a missing object is created.
    pub allow_create: bool,
    /// Who asked, for a create ([`Registry::create_by`]); None for the server's own writes.
    pub user: Option<&'a User>,
}

impl Registry {
    /// Creates `obj` (already checked to be of this kind and namespace), as the server's own
    /// write (no requesting user); the object as stored, or as it would be with `dry_run`.
    pub async fn create(
        &self,
        kind: &dyn Strategy,
        namespace: Option<&str>,
        obj: Value,
        dry_run: bool,
    ) -> Result<Value, Status> {
        self.create_by(kind, namespace, obj, dry_run, None).await
    }

    /// [`Registry::create`] of a request sent by `user`, which the kind may record
    /// ([`Strategy::prepare_for_create_by`]).
    pub async fn create_by(
        &self,
        kind: &dyn Strategy,
        namespace: Option<&str>,
        mut obj: Value,
        dry_run: bool,
        user: Option<&User>,
    ) -> Result<Value, Status> {
        if kind.read_only() {
            return Err(Status::method_not_allowed());
        }
        let info = kind.info();
        info.set_type(&mut obj);
        if let Some(ns) = namespace {
            meta::metadata(&mut obj).insert("namespace".into(), ns.into());
        }
        // NamespaceLifecycle first, as kube-apiserver orders its plugins; then the mutating
        // admission sees the decoded object before the kind prepares it, the validating
        // admission the object the kind validated.
        if let Some(ns) = namespace {
            self.check_namespace_open(info, ns, meta_str(&obj, "name"))
                .await?;
        }
        let plugins = self.admission_plugins();
        admission::admit_create(self, plugins, kind, &mut obj).await?;
        meta::prepare_create(&mut obj, kind.tracks_generation(), Time::now());
        kind.prepare_for_create(&mut obj);
        kind.prepare_for_create_by(&mut obj, user);
        canonical_quantities(kind, &mut obj);
        let name = meta_str(&obj, "name").to_string();
        let mut errors = meta::validate(&obj, info);
        errors.extend(kind.validate(&obj));
        if !errors.is_empty() {
            return Err(invalid(info, &name, &errors));
        }
        admission::validate_create(self, plugins, kind, &obj).await?;
        let key = self.key(kind, namespace, &name);
        let storage = self.storage_of(kind)?;
        if dry_run {
            // A dry run still answers AlreadyExists for a taken name.
            let found = storage
                .current(&key)
                .await
                .map_err(|e| Status::from_storage(&e, &info.target(&name)))?;
            if found.is_some() {
                return Err(Status::from_storage(
                    &StorageError::KeyExists { key },
                    &info.target(&name),
                ));
            }
            return Ok(obj);
        }
        let (bytes, stored) = encode_owned(kind, obj.clone());
        // The watch cache is handed the object as stored, so it need not decode the event.
        let mut handover = storage.handover(&key);
        if let Some(handover) = handover.as_mut().filter(|_| decodes_back(&stored)) {
            handover.offer(&bytes, written(info, kind.to_served(stored)));
        }
        let revision = storage
            .create(&key, bytes, self.ttl(info))
            .await
            .map_err(|e| Status::from_storage(&e, &info.target(&name)))?;
        if let Some(handover) = handover {
            handover.landed(revision);
        }
        meta::metadata(&mut obj).insert("resourceVersion".into(), revision.to_string().into());
        Ok(obj)
    }

    /// The update `to` names, of `kind`, by `make` ([`Registry::update`]).
    pub(super) async fn write(
        &self,
        kind: &dyn Strategy,
        to: WriteTo<'_>,
        mut make: impl FnMut(Option<&Value>) -> Result<Value, Status>,
    ) -> Result<(Value, bool), Status> {
        let WriteTo {
            namespace,
            name,
            subresource,
            dry_run,
            allow_create,
            user,
        } = to;
        if kind.read_only() {
            return Err(Status::method_not_allowed());
        }
        let info = kind.info();
        let key = self.key(kind, namespace, name);
        let target = info.target(name);
        let storage = self.storage_of(kind)?;
        // A create that loses a race to another writer's create goes on as an update of what
        // that writer stored, as kube-apiserver's GuaranteedUpdate retries it.
        let mut lost_a_create_race = false;
        let (existing, cached) = loop {
            // A real update starts from the watch cache's object, a guess the store checks;
            // a dry run answers what the store holds.
            let found = if dry_run {
                storage.current(&key).await.map(|found| {
                    found.map(|object| {
                        let existing = Existing {
                            object,
                            current: true,
                        };
                        (existing, None)
                    })
                })
            } else {
                storage.existing(&key).await
            };
            if let Some(found) = found.map_err(|e| Status::from_storage(&e, &target))? {
                break found;
            }
            if !allow_create || subresource.is_some() {
                return Err(Status::from_storage(
                    &StorageError::NotFound { key },
                    &target,
                ));
            }
            let obj = make(None)?;
            match self.create_by(kind, namespace, obj, dry_run, user).await {
                Err(status) if status.reason == "AlreadyExists" && !lost_a_create_race => {
                    lost_a_create_race = true;
                }
                created => return created.map(|created| (created, true)),
            }
        };
        let now = Time::now();
        // What admission reads of other kinds, read once for every attempt.
        let admission =
            UpdateAdmission::gather(self, self.admission_plugins(), kind, subresource).await?;
        // kube-apiserver's Store.Update never writes an object marked for deletion without its
        // last finalizer: `step` refuses to (errEmptiedFinalizers) and the object is deleted
        // as stored instead (deleteWithoutFinalizers), in one write, so no crash between two
        // writes can leave it marked with nothing left to remove it. When `step` refused: the
        // revision it found the object at, and the object the update made, without
        // finalizers (the answer once the object is deleted: kube-apiserver answers the
        // request's object, not the stored one). Behind a lock, as the loop below reads it
        // between the store's calls of `step`.
        let emptied: Mutex<Option<(i64, Value)>> = Mutex::new(None);
        // The last value `step` made, as stored and as served: what the store holds if it
        // wrote it, so the answer needs no second decode of the bytes just encoded.
        let mut made: Option<(Vec<u8>, Value)> = None;
        // The cache's object as served, for the start it was made of (the same revision of
        // the same key: the same bytes), so the update need not decode them again. It has the
        // kind's apiVersion and kind where the stored bytes may have others, so a finalize
        // (which keeps the stored object's) decodes, and so does the judgement of a no-op.
        let cached_at = existing.object.mod_revision;
        let cached = cached
            .and_then(Result::ok)
            .filter(|_| subresource != Some("finalize"));
        // What each attempt writes is offered to the watch cache before it is sent (see
        // `crate::storage::cacher::handoff`), so the cache need not decode its event.
        let mut handover = if dry_run {
            None
        } else {
            storage.handover(&key)
        };
        let mut step = |current: &Object| -> Result<Vec<u8>, StorageError> {
            // Whatever an earlier attempt refused, this one decides afresh (a refusal for
            // another reason must not be read as an emptied object).
            *emptied.lock().unwrap_or_else(|p| p.into_inner()) = None;
            let served = cached
                .as_ref()
                .filter(|_| current.mod_revision == cached_at)
                .map(|served| served.value());
            let old = match served {
                Some(served) => Cow::Borrowed(served),
                None => Cow::Owned(decode(kind, current).map_err(rejected)?),
            };
            let new = self
                .updated(kind, &old, subresource, &admission, now, &mut make)
                .map_err(rejected)?;
            if !dry_run && meta::should_delete_during_update(&new, &old) {
                if let Some(handover) = &mut handover {
                    handover.withdraw();
                }
                *emptied.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some((current.mod_revision, new));
                return Err(rejected(Status::failure(
                    409,
                    "Conflict",
                    "the update removes the last finalizer".into(),
                )));
            }
            // Unchanged as stored: an object stored under another apiVersion or kind is
            // written again in the kind's (a storage migration's no-op update).
            let unchanged = same_but_resource_version(&new, &old)
                && (served.is_none()
                    || same_but_resource_version(&new, &decode(kind, current).map_err(rejected)?));
            if unchanged {
                if let Some(handover) = &mut handover {
                    handover.withdraw();
                }
                made = Some((current.value.clone(), old.into_owned()));
                return Ok(current.value.clone());
            }
            let (bytes, stored) = encode_owned(kind, new);
            let handed = handover.is_some() && decodes_back(&stored);
            let served = kind.to_served(stored);
            match &mut handover {
                Some(handover) if handed => {
                    handover.offer(&bytes, written(info, served.clone()));
                }
                Some(handover) => handover.withdraw(),
                None => {}
            }
            made = Some((bytes.clone(), served));
            Ok(bytes)
        };
        if dry_run {
            let found = &existing.object;
            let value = step(found).map_err(|e| Status::from_storage(&e, &target))?;
            let mut obj: Value = parse_stored(&value)
                .map_err(|e| Status::internal(format!("decoding the updated object: {e}")))?;
            meta::metadata(&mut obj).insert(
                "resourceVersion".into(),
                found.mod_revision.to_string().into(),
            );
            return Ok((obj, false));
        }
        let mut existing = Some(existing);
        let stored = loop {
            let result = storage
                .guaranteed_update(&key, existing.take(), &mut step)
                .await;
            let refused_at = emptied
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .map(|(at, _)| *at);
            let answer = || {
                let emptied = emptied.lock().unwrap_or_else(|p| p.into_inner()).take();
                emptied.map(|(_, obj)| obj).unwrap_or_default()
            };
            match (result, refused_at) {
                (Err(StorageError::Rejected(_)), Some(at)) => {
                    if self
                        .delete_if_unchanged(kind, &key, name, at)
                        .await?
                        .is_some()
                    {
                        return Ok((answer(), false));
                    }
                    // Changed or deleted since: the update again, on what is stored now.
                }
                // Deleted by another writer that also removed the last finalizer: done, as
                // kube-apiserver takes a NotFound from that delete.
                (Err(StorageError::NotFound { .. }), Some(_)) => return Ok((answer(), false)),
                (result, _) => break result.map_err(|e| Status::from_storage(&e, &target))?,
            }
        };
        if let Some(handover) = handover {
            handover.landed(stored.mod_revision);
        }
        match made {
            Some((bytes, mut obj)) if bytes == stored.value => {
                meta::metadata(&mut obj).insert(
                    "resourceVersion".into(),
                    stored.mod_revision.to_string().into(),
                );
                Ok((obj, false))
            }
            _ => Ok((decode(kind, &stored)?, false)),
        }
    }

    /// The new state of `old` by `make`, with the update rules applied and validated.
    fn updated(
        &self,
        kind: &dyn Strategy,
        old: &Value,
        subresource: Option<&str>,
        admission: &UpdateAdmission,
        _now: Time,
        make: &mut impl FnMut(Option<&Value>) -> Result<Value, Status>,
    ) -> Result<Value, Status> {
        let info = kind.info();
        let old = canonical_old(kind, old);
        let old = old.as_ref();
        let mut new = make(Some(old))?;
        if subresource.is_none() {
            admission.admit(&mut new, old);
        }
        let name = meta_str(old, "name").to_string();
        let asked = meta_str(&new, "resourceVersion");
        if !asked.is_empty() && asked != meta_str(old, "resourceVersion") {
            return Err(Status::from_storage(
                &StorageError::Conflict { key: String::new() },
                &info.target(&name),
            ));
        }
        info.set_type(&mut new);
        match subresource {
            // A delete's mark is the server's own change: nothing to carry over.
            Some(MARK_FOR_DELETION) => {}
            Some("finalize") => new = finalized(old, &new),
            _ => {
                // `status` and the kind's own subresources (a CSR's `approval`) keep all
                // but the status; an update of the object keeps the status.
                if info.status {
                    carry_over(&mut new, old, subresource.is_some());
                }
                meta::prepare_update(&mut new, old);
                match subresource {
                    None => kind.prepare_for_update(&mut new, old),
                    Some("status") => {
                        // The decoder defaults every body, a status update's too.
                        kind.set_defaults(&mut new);
                        kind.prepare_for_status_update(&mut new, old);
                    }
                    Some(other) => kind.prepare_for_subresource_update(other, &mut new, old),
                }
            }
        }
        canonical_quantities(kind, &mut new);
        keep_managed_fields_times(&mut new, old);
        if kind.tracks_generation() {
            meta::bump_generation(&mut new, old);
        }
        let mut errors = meta::validate_update(&new, old);
        if subresource != Some(MARK_FOR_DELETION) {
            errors.extend(meta::validate_no_new_finalizers(&new, old));
        }
        if errors.is_empty() {
            errors.extend(meta::validate_updated(&new, old, info));
            errors.extend(match subresource {
                // As `updateForGracefulDeletionAndFinalizers`: a delete's mark is not the
                // kind's to validate, so an object stored under older rules can still go.
                Some(MARK_FOR_DELETION) => Vec::new(),
                Some("status") => kind.validate_status_update(&new, old),
                Some(other) if kind.subresources().contains(&other) => {
                    kind.validate_subresource_update(other, &new, old)
                }
                _ => kind.validate_update(&new, old),
            });
        }
        if !errors.is_empty() {
            return Err(invalid(info, &name, &errors));
        }
        if subresource.is_none() {
            admission.validate(kind, &new, Some(old))?;
        }
        Ok(new)
    }
}

/// `obj`'s resource quantities in canonical form, as kube-apiserver's decoding into the Go
/// types and encoding back leaves them (`0.5` is `500m`): every write's object, whatever made
/// it (a body, a patch, an apply, the server), once the kind's rules have filled it in, so
/// what is validated, stored, answered and watched is the same; and a request's object before
/// the field manager compares it with the stored one, so a value sent again in another
/// spelling (`0.5` over `500m`) is no change, as upstream's typed objects make it. A custom
/// resource keeps its values as written, as apiextensions-apiserver stores them.
pub fn canonical_quantities(kind: &dyn Strategy, obj: &mut Value) {
    if kind.custom_schema().is_none() {
        let info = kind.info();
        crate::schema::quantities::canonicalize(info.group, info.version, info.kind, obj);
    }
}

/// `old` with its quantities canonical, for a kind that has any: an object stored before keel
/// wrote them canonical (`cpu: 0.5`) is then updated, patched and compared as kube-apiserver,
/// which decodes it into the Go types, compares it (`500m`), so its immutable fields still
/// equal a canonical request's.
fn canonical_old<'a>(kind: &dyn Strategy, old: &'a Value) -> Cow<'a, Value> {
    let info = kind.info();
    if kind.custom_schema().is_some()
        || !crate::schema::quantities::has_quantities(info.group, info.version, info.kind)
    {
        return Cow::Borrowed(old);
    }
    let mut canonical = old.clone();
    canonical_quantities(kind, &mut canonical);
    Cow::Owned(canonical)
}

/// kube-apiserver's `IgnoreManagedFieldsTimestampsTransformer`: an update that changes
/// nothing but the times of `managedFields` entries keeps the old times, so it writes nothing
/// (an apply of `cpu: 0.5` over a stored `500m` is a change to the field manager, which
/// stamps its entry, until the value is made canonical; applied again a second later it must
/// not bump the resourceVersion).
fn keep_managed_fields_times(new: &mut Value, old: &Value) {
    let entries = |v: &Value| {
        v.at("/metadata/managedFields")
            .and_then(Value::as_array)
            .cloned()
    };
    let (Some(new_entries), Some(old_entries)) = (entries(new), entries(old)) else {
        return;
    };
    let untimed = |list: &[Value]| -> Vec<Value> {
        let mut list = list.to_vec();
        for entry in list.iter_mut().filter_map(Value::as_object_mut) {
            entry.remove("time");
        }
        list
    };
    if new_entries == old_entries || untimed(&new_entries) != untimed(&old_entries) {
        return;
    }
    let mut kept = new.clone();
    if let Some(meta) = kept.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("managedFields".into(), Value::Array(old_entries));
    }
    if same_but_resource_version(&kept, old) {
        *new = kept;
    }
}

/// Keeps on `new` what its update may not change: with `status_update` everything but the
/// status (and metadata), otherwise the status.
fn carry_over(new: &mut Value, old: &Value, status_update: bool) {
    let (Some(new), Some(old)) = (new.as_object_mut(), old.as_object()) else {
        return;
    };
    if status_update {
        let status = new.remove("status");
        let meta = new.remove("metadata");
        new.clear();
        for (k, v) in old {
            if k != "status" && k != "metadata" {
                new.insert(k.clone(), v.clone());
            }
        }
        if let Some(meta) = meta {
            new.insert("metadata".into(), meta);
        }
        if let Some(status) = status {
            new.insert("status".into(), status);
        }
    } else {
        match old.get("status") {
            Some(status) => new.insert("status".into(), status.clone()),
            None => new.remove("status"),
        };
    }
}

/// A namespace's `finalize` update: the stored namespace with the new `spec.finalizers`.
fn finalized(old: &Value, new: &Value) -> Value {
    let mut out = old.clone();
    let finalizers = new.at("/spec/finalizers").cloned().unwrap_or(json!([]));
    if !out.get("spec").is_some_and(Value::is_object) {
        out["spec"] = json!({});
    }
    out["spec"]["finalizers"] = finalizers;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_that_only_restamps_managed_fields_keeps_the_old_times() {
        let entry = |time: &str| json!({"manager": "m", "operation": "Apply", "time": time});
        let old = json!({"metadata": {"name": "a", "managedFields": [entry("2026-01-01T00:00:00Z")]}, "spec": {"x": 1}});
        let mut new = old.clone();
        new["metadata"]["managedFields"] = json!([entry("2026-01-01T00:00:09Z")]);
        keep_managed_fields_times(&mut new, &old);
        assert_eq!(new, old);
        // A change elsewhere keeps the new time.
        let mut changed = old.clone();
        changed["spec"]["x"] = json!(2);
        changed["metadata"]["managedFields"] = json!([entry("2026-01-01T00:00:09Z")]);
        let before = changed.clone();
        keep_managed_fields_times(&mut changed, &old);
        assert_eq!(changed, before);
    }
}
