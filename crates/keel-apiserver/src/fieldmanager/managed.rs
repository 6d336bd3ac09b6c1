//! `metadata.managedFields`: who set which field, kept as kube-apiserver's field manager
//! (`apimachinery/pkg/util/managedfields`) keeps it, on top of [`super::typed`]'s walks.
//!
//! # Entries
//!
//! An entry is `{manager, operation: Apply|Update, apiVersion, time, fieldsType: FieldsV1,
//! fieldsV1, subresource?}`. Its identity is the manager, the operation, the subresource
//! and, for an update, the apiVersion (an applier keeps its entry across versions); two
//! entries are never the same identity. Entries are written sorted by operation (`Apply`
//! first), time (whole seconds), manager, apiVersion and subresource; an entry whose set
//! is empty goes.
//!
//! # An update (create, PUT, any non-apply PATCH, a subresource)
//!
//! The entries come from the new object when it carries valid ones (a client may rewrite
//! them; `[]` or `[{}]` clears them), else from the stored object; a subresource write only
//! ever keeps the stored ones. An object without entries starts none on update, only on
//! create. The write is compared with the stored object (or, for a create, the kind's zero
//! value): every field it adds or changes is the manager's, taken from whoever had it; a
//! field it removes goes from every entry. The manager's entry gets the time of the write
//! only when it took something; the system fields of `metadata` (name, uid, resourceVersion,
//! ...) and what the strategy resets (status on the main resource, spec on `status`) are
//! never anyone's. More than ten update entries: the oldest merge into `ancient-changes`.
//!
//! # An apply
//!
//! [`FieldManager::apply`] merges the configuration into the object, makes the configuration's
//! fields the applier's set, removes what the applier set last time and no longer does unless
//! another entry has it, and refuses (409, SMD's wording) to change a field another entry owns
//! unless forced, which takes the field from it. An applier never seen before on an object
//! that has no entries first gives every existing field to `before-first-apply`. For the
//! manager `kubectl`, conflicts on fields whose value is the one in the
//! `last-applied-configuration` annotation are forced (the client-side apply migration), and
//! that annotation, when the object has it, is kept equal to the applied configuration.

#[cfg(test)]
mod tests;

use serde_json::{Map, Value, json};

use super::conflicts::{ApplyError, Conflict, conflict_message};
use super::entries::{self, Id, Managed, Operation, Owned};
use super::fieldpath::{self, PathElement, Set, go_json};
use super::typed::{self, TypedErrors};
use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::registry::{ResourceInfo, Strategy, meta, meta_str};
use crate::schema::{Schema, schema_of};

/// The merge metadata a field manager walks objects with: a built-in kind's, kept for the
/// life of the process, or a custom resource's, from its CRD.
enum MergeSchema {
    Builtin(&'static Schema),
    Custom(std::sync::Arc<Schema>),
}

impl std::ops::Deref for MergeSchema {
    type Target = Schema;

    fn deref(&self) -> &Schema {
        match self {
            MergeSchema::Builtin(schema) => schema,
            MergeSchema::Custom(schema) => schema,
        }
    }
}

/// The manager given the fields of an object first applied to without entries.
const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// The only applier whose conflicts the last-applied annotation settles.
const KUBECTL: &str = "kubectl";

/// The client-side apply annotation.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The field manager of one kind, for writes to it or to one of its subresources.
pub struct FieldManager<'a> {
    kind: &'a dyn Strategy,
    info: &'static ResourceInfo,
    schema: MergeSchema,
    api_version: String,
    subresource: &'a str,
    reset: Set,
    now: Time,
}

/// What the strategy resets, so no write owns it ([`Strategy::reset_fields`]).
fn reset_fields(kind: &dyn Strategy, subresource: &str) -> Set {
    let mut set = Set::new();
    for path in kind.reset_fields(subresource) {
        let path: Vec<PathElement> = path.iter().map(|name| PathElement::field(name)).collect();
        set.insert(&path);
    }
    set
}

impl<'a> FieldManager<'a> {
    /// The field manager for writes at `now` to objects of `kind` (through `subresource`).
    pub fn new(kind: &'a dyn Strategy, subresource: Option<&'a str>, now: Time) -> Self {
        let subresource = subresource.unwrap_or("");
        let info = kind.info();
        FieldManager {
            kind,
            info,
            schema: match kind.merge_schema() {
                Some(custom) => MergeSchema::Custom(custom),
                None => MergeSchema::Builtin(schema_of(info.group, info.kind)),
            },
            api_version: info.api_version(),
            subresource,
            reset: reset_fields(kind, subresource),
            now,
        }
    }

    /// The zero value of the kind, typed.
    fn zero(&self) -> Value {
        let mut zero = self.schema.zero().clone();
        zero["apiVersion"] = self.api_version.clone().into();
        zero["kind"] = self.info.kind.into();
        zero
    }

    /// Records in `new` (the object a create, update or non-apply patch is about to store;
    /// `live` the stored one, None for a create) the fields the write set, as
    /// `UpdateNoErrors` does: if the entries cannot be worked out, the stored ones stay.
    /// `new` gets the kind's defaults first, as the decoder gives them.
    pub fn update(&self, live: Option<&Value>, new: &mut Value, manager: &str) {
        self.kind.set_defaults(new);
        if let Some(live) = live
            && let Some(entries) = self.renewed_entries(live, new, manager)
        {
            #[cfg(debug_assertions)]
            {
                let mut general = new.clone();
                let _ = self.try_update(Some(live), &mut general, manager);
                meta::metadata(new).insert("managedFields".into(), entries.clone());
                debug_assert_eq!(*new, general, "the renewal fast path left the general one");
            }
            meta::metadata(new).insert("managedFields".into(), entries);
            return;
        }
        if self.try_update(live, new, manager).is_err() {
            let live_entries = live.and_then(|l| l.at("/metadata/managedFields")).cloned();
            let meta = meta::metadata(new);
            match live_entries {
                Some(entries) => meta.insert("managedFields".into(), entries),
                None => meta.remove("managedFields"),
            };
        }
    }

    /// The entries of the commonest update, worked out without decoding and encoding them
    /// all: a manager writing again only what it already owns, as a kubelet renews its
    /// Lease. The stored object has one entry, that manager's update entry of the kind's
    /// apiVersion; the write sends it back unchanged or not at all; and every field it
    /// changes or adds is the entry's, and none it removes is. The entries are then the
    /// stored ones with this write's time, as [`FieldManager::try_update`] would make them
    /// (it writes every entry in the form kept here). None for any other write.
    fn renewed_entries(&self, live: &Value, new: &Value, manager: &str) -> Option<Value> {
        if !self.subresource.is_empty() || manager.is_empty() {
            return None;
        }
        let stored = live.at("/metadata/managedFields")?;
        let sent = new.at("/metadata/managedFields");
        if sent.is_some_and(|sent| sent != stored) {
            return None;
        }
        let [entry] = stored.as_array()?.as_slice() else {
            return None;
        };
        let entry = entry.as_object()?;
        let text = |f: &str| entry.get(f).and_then(Value::as_str);
        let own = entry.len() == 6
            && text("manager") == Some(manager)
            && text("operation") == Some(Operation::Update.as_str())
            && text("apiVersion") == Some(self.api_version.as_str())
            && text("fieldsType") == Some("FieldsV1")
            && text("time").and_then(Time::parse).is_some();
        if !own {
            return None;
        }
        let fields_v1 = entry.get("fieldsV1")?;
        // Entries written some other way (by hand in the store) go the general way, which
        // writes them back in this form or drops them.
        if !entries::canonical(fields_v1) {
            return None;
        }
        debug_assert_eq!(
            Set::from_fields_v1(fields_v1)
                .map(|s| s.to_fields_v1())
                .ok(),
            Some(fields_v1.clone())
        );
        let owned = |path: &[PathElement]| {
            let found = entries::owns(fields_v1, path);
            debug_assert_eq!(
                found,
                Set::from_fields_v1(fields_v1).is_ok_and(|s| s.has(path))
            );
            found
        };
        let zero = self.schema.zero();
        let mut cmp = typed::compare(
            &self.schema,
            &typed::with_zero(live, zero),
            &typed::with_zero(new, zero),
        )
        .ok()?;
        cmp.exclude(&self.reset);
        let changed = cmp.modified.union(&cmp.added);
        let taken = changed.paths();
        let keeps_its_fields = !taken.is_empty()
            && taken.iter().all(|p| owned(p) && !entries::stripped(p))
            && cmp.removed.paths().iter().all(|p| !owned(p));
        if !keeps_its_fields {
            return None;
        }
        let mut entry = entry.clone();
        entry.insert("time".into(), self.now.rfc3339().into());
        Some(Value::Array(vec![Value::Object(entry)]))
    }

    fn try_update(
        &self,
        live: Option<&Value>,
        new: &mut Value,
        manager: &str,
    ) -> Result<(), String> {
        let live_entries = live.and_then(|l| l.at("/metadata/managedFields"));
        let decode_live = || Managed::decode(live_entries).unwrap_or_default();
        let sent = meta::metadata(new).remove("managedFields");
        let mut managed = if !self.subresource.is_empty() {
            decode_live()
        } else if is_reset(sent.as_ref()) {
            Managed::default()
        } else {
            match Managed::decode(sent.as_ref()) {
                Ok(m) if !m.0.is_empty() => m,
                _ => decode_live(),
            }
        };
        // Objects without entries start tracking on create only (skipNonAppliedManager).
        if managed.0.is_empty() && live.is_some() {
            return Ok(());
        }
        let base = match live {
            Some(l) => without_managed_fields(l),
            None => self.zero(),
        };
        let manager = if manager.is_empty() {
            "unknown"
        } else {
            manager
        };
        self.record_update(&base, new, &mut managed, manager)
            .map_err(|e| e.to_string())?;
        self.write(new, &managed);
        Ok(())
    }

    /// An update's bookkeeping (`capManagers`, `buildManagerInfo`, `managedFieldsUpdater`,
    /// `stripMeta` and SMD's `Update`): the manager takes what changed from `live` to `new`.
    fn record_update(
        &self,
        live: &Value,
        new: &Value,
        managed: &mut Managed,
        manager: &str,
    ) -> Result<(), TypedErrors> {
        let id = Id::new(
            manager,
            Operation::Update,
            &self.api_version,
            self.subresource,
        );
        let current = Id::new("current-operation", Operation::Update, "", "");
        managed.keep_version(&self.api_version);
        let cmp = self.take_changes(live, new, managed, Some(&current), true)?;
        let set = managed
            .0
            .remove(&current)
            .map(|o| o.set)
            .unwrap_or_default()
            .difference(&cmp.removed)
            .union(&cmp.modified)
            .union(&cmp.added)
            .recursive_difference(&self.reset);
        if !set.is_empty() {
            managed.0.insert(
                current.clone(),
                Owned {
                    set,
                    api_version: self.api_version.clone(),
                    time: None,
                },
            );
        }
        managed.strip(&current);
        if let Some(taken) = managed.0.remove(&current) {
            let set = match managed.0.get(&id) {
                Some(previous) => taken.set.union(&previous.set),
                None => taken.set,
            };
            let owned = Owned {
                set,
                api_version: self.api_version.clone(),
                time: Some(self.now),
            };
            managed.0.insert(id, owned);
        }
        managed.cap_updates();
        Ok(())
    }

    /// SMD's `Updater.update`: compares `live` with `new` (reset fields left out); every
    /// entry but `except` loses what the write removed and, when `force`, what it added or
    /// changed, and without `force` those are the conflicts.
    fn take_changes(
        &self,
        live: &Value,
        new: &Value,
        managed: &mut Managed,
        except: Option<&Id>,
        force: bool,
    ) -> Result<typed::Comparison, Refused> {
        let zero = self.schema.zero();
        let mut cmp = typed::compare(
            &self.schema,
            &typed::with_zero(live, zero),
            &typed::with_zero(new, zero),
        )?;
        cmp.exclude(&self.reset);
        let changed = cmp.modified.union(&cmp.added);
        let mut conflicts = Vec::new();
        for (id, owned) in &managed.0 {
            if Some(id) == except {
                continue;
            }
            for path in owned.set.intersection(&changed).paths() {
                conflicts.push(Conflict {
                    manager: id.clone(),
                    path,
                });
            }
        }
        if !force && !conflicts.is_empty() {
            return Err(Refused::Conflicts(conflicts));
        }
        for (id, owned) in managed.0.iter_mut() {
            if Some(id) == except {
                continue;
            }
            owned.set.subtract(&changed);
            owned.set.subtract(&cmp.removed);
        }
        managed.0.retain(|_, o| !o.set.is_empty());
        Ok(cmp)
    }

    /// Writes `managed` as `new`'s `metadata.managedFields` (none: the field goes).
    fn write(&self, new: &mut Value, managed: &Managed) {
        let entries = managed.encode();
        let meta = meta::metadata(new);
        if entries.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(entries));
        }
    }

    /// The checks an applied configuration meets before anything else is made of it, in
    /// kube-apiserver's order: its apiVersion and kind are the endpoint's (the field
    /// manager's outermost `versionCheckManager`), and it sets no managedFields.
    pub fn check_applied(&self, config: &Value) -> Result<(), ApplyError> {
        let (group, version) = split_api_version(
            config
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or(""),
        );
        let kind = config.get("kind").and_then(Value::as_str).unwrap_or("");
        if group != self.info.group || version != self.info.version || kind != self.info.kind {
            return Err(ApplyError::BadRequest(format!(
                "invalid object type: {group}/{version}, Kind={kind}"
            )));
        }
        if config
            .at("/metadata/managedFields")
            .is_some_and(Value::is_array)
        {
            return Err(ApplyError::BadRequest(
                "metadata.managedFields must be nil".into(),
            ));
        }
        Ok(())
    }

    /// Server-side apply of `config` by `manager` to `live` (None: the object is created):
    /// the object to store, its entries updated.
    pub fn apply(
        &self,
        live: Option<&Value>,
        config: &Value,
        manager: &str,
        force: bool,
    ) -> Result<Value, ApplyError> {
        self.check_applied(config)?;
        typed::validate(&self.schema, config).map_err(|e| {
            ApplyError::Internal(format!(
                "failed to create typed patch object ({}): {e}",
                self.describe(config)
            ))
        })?;
        let managed = Managed::decode(live.and_then(|l| l.at("/metadata/managedFields")))
            .map_err(|e| ApplyError::Internal(format!("failed to decode managed fields: {e}")))?;
        let base = match live {
            Some(l) => without_managed_fields(l),
            None => json!({
                "apiVersion": self.api_version, "kind": self.info.kind, "metadata": {}
            }),
        };
        let mut outcome = self.apply_as(&base, config, managed.clone(), manager, force);
        if manager == KUBECTL
            && let Err(ApplyError::Conflicts(conflicts)) = &outcome
            && let Some(allowed) = self.last_applied_fields(&base)
        {
            let left: Vec<Conflict> = conflicts
                .iter()
                .filter(|c| !allowed.has(&c.path))
                .cloned()
                .collect();
            outcome = if left.is_empty() {
                self.apply_as(&base, config, managed, manager, true)
            } else {
                Err(ApplyError::Conflicts(left))
            };
        }
        let (mut object, managed) = outcome?;
        self.kind.set_defaults(&mut object);
        if manager == KUBECTL
            && let Some(annotations) = object
                .at_mut("/metadata/annotations")
                .and_then(Value::as_object_mut)
            && annotations
                .get(LAST_APPLIED)
                .and_then(Value::as_str)
                .is_some_and(|a| !a.is_empty())
        {
            annotations.insert(LAST_APPLIED.into(), last_applied(config).into());
        }
        self.write(&mut object, &managed);
        Ok(object)
    }

    /// `namespace/name; group/version, Kind=kind` of an object, as the field manager's
    /// errors name it (`objectGVKNN`).
    pub fn describe(&self, obj: &Value) -> String {
        format!(
            "{}/{}; {}/{}, Kind={}",
            meta_str(obj, "namespace"),
            meta_str(obj, "name"),
            self.info.group,
            self.info.version,
            self.info.kind
        )
    }

    /// The apply chain below the last-applied handling: `skipNonApplied`, `buildManagerInfo`,
    /// `managedFieldsUpdater`, `stripMeta` and SMD's `Apply`.
    fn apply_as(
        &self,
        live: &Value,
        config: &Value,
        mut managed: Managed,
        manager: &str,
        force: bool,
    ) -> Result<(Value, Managed), ApplyError> {
        let internal = |what: &str, e: TypedErrors| ApplyError::Internal(format!("{what}: {e}"));
        if managed.0.is_empty() {
            self.record_update(&self.zero(), live, &mut managed, BEFORE_FIRST_APPLY)
                .map_err(|e| internal("failed to create manager for existing fields", e))?;
        }
        let id = Id::new(manager, Operation::Apply, "", self.subresource);
        managed.keep_version(&self.api_version);
        let merged = typed::merge(&self.schema, live, config)
            .map_err(|e| internal("failed to merge config", e))?;
        let last = managed.0.get(&id).map(|o| o.set.clone());
        let set = typed::to_field_set(&self.schema, config)
            .map_err(|e| internal("failed to get field set", e))?
            .recursive_difference(&self.reset);
        let previous_time = managed.0.get(&id).and_then(|o| o.time);
        managed.0.insert(
            id.clone(),
            Owned {
                set,
                api_version: self.api_version.clone(),
                time: previous_time,
            },
        );
        let new = match &last {
            Some(last) if !last.is_empty() => self
                .prune(&merged, &managed, last)
                .map_err(|e| internal("failed to prune fields", e))?,
            _ => merged,
        };
        match self.take_changes(live, &new, &mut managed, Some(&id), force) {
            Ok(_) => {}
            Err(Refused::Conflicts(c)) => return Err(ApplyError::Conflicts(c)),
            Err(Refused::Typed(e)) => {
                return Err(internal("failed to compare objects", e));
            }
        }
        managed.strip(&id);
        let changed = !fieldpath::values_equal(live, &new);
        if changed && let Some(owned) = managed.0.get_mut(&id) {
            owned.time = Some(self.now);
        }
        let object = if changed { new } else { live.clone() };
        Ok((object, managed))
    }

    /// SMD's `prune`: removes what the applier set last time (`last`), does not now, and no
    /// other entry owns.
    fn prune(&self, merged: &Value, managed: &Managed, last: &Set) -> Result<Value, TypedErrors> {
        let s = &*self.schema;
        let named = |set: &Set| typed::ensure_named_fields_are_members(s, set);
        let fields = |v: &Value| typed::to_field_set(s, v).map(|set| named(&set));
        let last = named(last);
        let pruned = typed::remove_items(s, merged, &last);
        // Add back what anyone (the applier's new set included) owns.
        let owned = managed
            .0
            .values()
            .fold(Set::new(), |acc, o| acc.union(&o.set));
        let merged_set = fields(merged)?;
        let keep = fields(&pruned)?.union(&named(&owned));
        let pruned = typed::remove_items(s, merged, &merged_set.difference(&keep));
        // Remove only what the applier owned before.
        let gone = merged_set.difference(&fields(&pruned)?).intersection(&last);
        Ok(typed::remove_items(s, merged, &gone))
    }

    /// `allowedConflictsFromLastApplied`: the fields of the last-applied annotation whose
    /// value the object still has.
    fn last_applied_fields(&self, live: &Value) -> Option<Set> {
        let text = live
            .at("/metadata/annotations")?
            .get(LAST_APPLIED)?
            .as_str()
            .filter(|t| !t.is_empty())?;
        let last: Value = serde_json::from_str(text).ok()?;
        if last.get("apiVersion").and_then(Value::as_str) != Some(self.api_version.as_str()) {
            return None;
        }
        let set = typed::to_field_set(&self.schema, &last).ok()?;
        let zero = self.schema.zero();
        let cmp = typed::compare(&self.schema, &last, &typed::with_zero(live, zero)).ok()?;
        Some(
            set.difference(&cmp.modified)
                .difference(&cmp.added)
                .difference(&cmp.removed),
        )
    }
}

/// Why [`FieldManager::take_changes`] refused a change.
#[derive(Debug)]
enum Refused {
    Conflicts(Vec<Conflict>),
    Typed(TypedErrors),
}

impl From<TypedErrors> for Refused {
    fn from(e: TypedErrors) -> Self {
        Refused::Typed(e)
    }
}

impl From<Refused> for TypedErrors {
    fn from(e: Refused) -> Self {
        match e {
            Refused::Typed(t) => t,
            Refused::Conflicts(c) => TypedErrors(vec![(String::new(), conflict_message(&c))]),
        }
    }
}

/// `isResetManagedFields`: `[]`, or one empty entry.
fn is_reset(sent: Option<&Value>) -> bool {
    match sent.and_then(Value::as_array).map(Vec::as_slice) {
        Some([]) => true,
        Some([one]) => one.as_object().is_some_and(Map::is_empty),
        _ => false,
    }
}

/// A copy of `obj` without `metadata.managedFields` (never copied: it is most of a small
/// object).
fn without_managed_fields(obj: &Value) -> Value {
    let Some(map) = obj.as_object() else {
        return obj.clone();
    };
    let copy = map.iter().map(|(k, v)| {
        let v = match v.as_object() {
            Some(meta) if k == "metadata" => Value::Object(
                meta.iter()
                    .filter(|(k, _)| *k != "managedFields")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            _ => v.clone(),
        };
        (k.clone(), v)
    });
    Value::Object(copy.collect())
}

/// `group`, `version` of an apiVersion as Go's `ParseGroupVersion` reads it (`v1` is the
/// core group; more than one `/` is no version at all).
fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        None => ("", api_version),
        Some((_, v)) if v.contains('/') => ("", ""),
        Some((g, v)) => (g, v),
    }
}

/// `buildLastApplied`: the applied configuration without the annotation, as Go's JSON
/// encoder writes it (with its newline).
fn last_applied(config: &Value) -> String {
    let mut copy = config.clone();
    if let Some(annotations) = copy
        .at_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED);
    }
    format!("{}\n", go_json(&copy))
}
