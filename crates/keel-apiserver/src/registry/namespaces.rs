//! core/v1 Namespaces (cluster-scoped, names are DNS labels): NAME, STATUS, AGE. A new
//! namespace is `Active` with the `kubernetes` finalizer, carries the
//! `kubernetes.io/metadata.name` label, and keeps its finalizers on updates (they change
//! only through the `finalize` subresource). A status update's phase must agree with the
//! deletion timestamp (`ValidateNamespaceStatusUpdate`).

use serde_json::{Map, Value, json};

use super::names::NameRule;
use super::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy};
use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::storage::FieldError;

/// The Namespace strategy.
pub struct Namespaces;

static INFO: ResourceInfo = ResourceInfo {
    returns_deleted_object: true,
    short_names: &["ns"],
    namespaced: false,
    name_rule: NameRule::Label,
    status: true,
    ..ResourceInfo::new("", "v1", "Namespace", "namespaces", "namespace")
};

static COLUMNS: [Column; 3] = [
    NAME_COLUMN,
    Column::string("Status", 0, "The status of the namespace"),
    AGE_COLUMN,
];

/// The label every namespace carries, its own name (`v1.LabelMetadataName`).
pub const METADATA_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The finalizer the namespace controller removes once the namespace is empty.
pub const KUBERNETES_FINALIZER: &str = "kubernetes";

/// `SetDefaults_Namespace`: the `kubernetes.io/metadata.name` label is the name.
fn default_label(obj: &mut Value) {
    let name = super::meta_str(obj, "name").to_string();
    if name.is_empty() {
        return;
    }
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if !labels.is_object() {
        *labels = Value::Object(Map::new());
    }
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(METADATA_NAME_LABEL.into(), Value::from(name));
    }
}

/// `ValidateNamespaceStatusUpdate` (pkg/apis/core/validation/validation.go): the phase is
/// `Active` until the namespace is being deleted, `Terminating` after.
fn validate_status_update(ns: &Value) -> Vec<FieldError> {
    let phase = ns.at("/status/phase").and_then(Value::as_str).unwrap_or("");
    let deleting = ns
        .at("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    let (want, detail) = match deleting {
        false => (
            "Active",
            "may only be 'Active' if `deletionTimestamp` is empty",
        ),
        true => (
            "Terminating",
            "may only be 'Terminating' if `deletionTimestamp` is not empty",
        ),
    };
    (phase != want)
        .then(|| FieldError::invalid("status.Phase", phase, detail))
        .into_iter()
        .collect()
}

impl Strategy for Namespaces {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    /// `SetDefaults_Namespace` and `SetDefaults_NamespaceStatus` (a status without a phase
    /// is `Active`).
    fn set_defaults(&self, obj: &mut Value) {
        default_label(obj);
        if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut)
            && status
                .get("phase")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
        {
            status.insert("phase".into(), json!("Active"));
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        self.set_defaults(obj);
        let Some(o) = obj.as_object_mut() else {
            return;
        };
        o.insert("status".into(), json!({"phase": "Active"}));
        let spec = o.entry("spec").or_insert_with(|| json!({}));
        if !spec.is_object() {
            *spec = json!({});
        }
        if let Some(spec) = spec.as_object_mut() {
            let finalizers = spec.entry("finalizers").or_insert_with(|| json!([]));
            if !finalizers.is_array() {
                *finalizers = json!([]);
            }
            if let Some(list) = finalizers.as_array_mut()
                && !list.iter().any(|f| f == KUBERNETES_FINALIZER)
            {
                list.push(Value::from(KUBERNETES_FINALIZER));
            }
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        self.set_defaults(new);
        let finalizers = old.at("/spec/finalizers").cloned();
        let Some(o) = new.as_object_mut() else {
            return;
        };
        let spec = o.entry("spec").or_insert_with(|| json!({}));
        if !spec.is_object() {
            *spec = json!({});
        }
        if let Some(spec) = spec.as_object_mut() {
            match finalizers {
                Some(f) => spec.insert("finalizers".into(), f),
                None => spec.remove("finalizers"),
            };
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let finalizers = obj.at("/spec/finalizers").and_then(Value::as_array);
        for (i, f) in finalizers.into_iter().flatten().enumerate() {
            let name = f.as_str().unwrap_or("");
            if name != KUBERNETES_FINALIZER && !name.contains('/') {
                errors.push(FieldError::invalid(
                    &format!("spec.finalizers[{i}]"),
                    name,
                    "name is neither a standard finalizer name nor is it fully qualified",
                ));
            }
        }
        errors
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        validate_status_update(new)
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        super::name_age_row(obj, now, [Value::from(super::text(obj, "/status/phase"))])
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["status.phase"]
    }

    /// A namespace with finalizers (its own `spec.finalizers` or `metadata.finalizers`) is
    /// not removed at once: it gets a deletionTimestamp and the phase `Terminating`, and the
    /// namespace controller empties and finalizes it.
    fn graceful_deletion(&self, obj: &Value, _grace: Option<i64>, now: Time) -> Option<Value> {
        let has = |pointer: &str| {
            obj.at(pointer)
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty())
        };
        if !has("/spec/finalizers") && !has("/metadata/finalizers") {
            return None;
        }
        let mut marked = obj.clone();
        let meta = super::meta::metadata(&mut marked);
        if !meta.contains_key("deletionTimestamp") {
            meta.insert("deletionTimestamp".into(), now.rfc3339().into());
            meta.insert("deletionGracePeriodSeconds".into(), 0.into());
        }
        if !marked.get("status").is_some_and(Value::is_object) {
            marked["status"] = serde_json::json!({});
        }
        marked["status"]["phase"] = "Terminating".into();
        Some(marked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;

    #[test]
    fn a_new_namespace_is_active_with_the_kubernetes_finalizer_and_name_label() {
        let mut ns = json!({"metadata": {"name": "team-a"}, "status": {"phase": "Terminating"}});
        Namespaces.prepare_for_create(&mut ns);
        assert_eq!(
            ns,
            json!({"metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a"}},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
        );
        let mut update = json!({"metadata": {"name": "team-a", "labels": {"x": "y"}}, "spec": {}});
        Namespaces.prepare_for_update(&mut update, &ns);
        assert_eq!(update["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(
            update["metadata"]["labels"],
            json!({"x": "y", "kubernetes.io/metadata.name": "team-a"})
        );
        let stored = json!({"metadata": {"name": "team-a", "creationTimestamp": "2026-05-25T20:26:40Z"},
            "status": {"phase": "Active"}});
        assert_eq!(
            Namespaces.cells(&stored, Time(1_780_000_000)),
            vec![json!("team-a"), json!("Active"), json!("3d")]
        );
        assert_eq!(Namespaces.field(&stored, "status.phase"), "Active");
    }

    #[test]
    fn a_status_update_phase_follows_the_deletion_timestamp() {
        let active = json!({"metadata": {"name": "a"}, "status": {"phase": "Terminating"}});
        assert_eq!(
            crate::registry::rules::messages(&Namespaces.validate_status_update(&active, &active)),
            [
                "status.Phase: Invalid value: \"Terminating\": may only be 'Active' if \
              `deletionTimestamp` is empty"
            ]
        );
        let mut deleting = json!({"metadata": {"name": "a",
            "deletionTimestamp": "2024-01-01T00:00:00Z"}, "status": {}});
        Namespaces.set_defaults(&mut deleting);
        assert_eq!(deleting["status"]["phase"], "Active");
        assert_eq!(
            crate::registry::rules::messages(
                &Namespaces.validate_status_update(&deleting, &active)
            ),
            [
                "status.Phase: Invalid value: \"Active\": may only be 'Terminating' if \
              `deletionTimestamp` is not empty"
            ]
        );
    }

    #[test]
    fn finalizers_must_be_standard_or_qualified() {
        let ns = json!({"spec": {"finalizers": ["kubernetes", "example.com/x", "bad"]}});
        let errors = messages(&Namespaces.validate(&ns));
        assert_eq!(
            errors,
            vec![
                "spec.finalizers[2]: Invalid value: \"bad\": name is neither a standard finalizer \
                 name nor is it fully qualified"
            ]
        );
    }
}
