//! core/v1 PersistentVolumeClaims (`pvc`): NAME, STATUS, VOLUME, CAPACITY, ACCESS MODES,
//! STORAGECLASS, VOLUMEATTRIBUTESCLASS, AGE and, wide, VOLUMEMODE
//! (`printPersistentVolumeClaim`). Defaults as `SetDefaults_PersistentVolumeClaim` and
//! `SetDefaults_PersistentVolumeClaimSpec` (`pkg/apis/core/v1/defaults.go`) set them: phase
//! `Pending`, volume mode `Filesystem`. A new claim's status is only that phase, and its
//! `dataSource` and `dataSourceRef` fill each other in (`NormalizeDataSources`, as
//! `pkg/registry/core/persistentvolumeclaim/strategy.go` runs it);
//! `ValidatePersistentVolumeClaim` and `ValidatePersistentVolumeClaimUpdate`
//! (`pkg/apis/core/validation/validation.go`): access modes, a positive `storage` request,
//! class, volume mode and data sources; after creation only a bound claim's storage request
//! may change (and not below its status capacity), the volume name be set once, and the
//! class move from the beta annotation to the field.

use serde_json::{Map, Value, json};

use super::persistentvolumes::{
    access_modes_text, name_field, or_unset, phase_cell, positive_quantity, storage_class,
    validate_access_modes, validate_class, validate_class_and_mode,
};
use super::resource_lists::{nanos, quantity_text};
use super::selector::validate_label_selector;
use super::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, meta_str, status};
use crate::apimachinery::time::Time;
use crate::apimachinery::validation::is_dns1123_subdomain;
use crate::json_pointer::At;
use crate::registry::defaults::default_value;
use crate::registry::rules::immutable_at;
use crate::storage::FieldError;

/// The PersistentVolumeClaim strategy.
pub struct PersistentVolumeClaims;

static INFO: ResourceInfo = ResourceInfo {
    // The store's `ReturnDeletedObject: true` (its `storage/storage.go`).
    returns_deleted_object: true,
    short_names: &["pvc"],
    status: true,
    ..ResourceInfo::new(
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
    )
};

static COLUMNS: [Column; 9] = [
    NAME_COLUMN,
    Column::string(
        "Status",
        0,
        "phase represents the current phase of PersistentVolumeClaim.",
    ),
    Column::string(
        "Volume",
        0,
        "volumeName is the binding reference to the PersistentVolume backing this claim.",
    ),
    Column::string(
        "Capacity",
        0,
        "capacity represents the actual resources of the underlying volume.",
    ),
    Column::string(
        "Access Modes",
        0,
        "accessModes contains the actual access modes the volume backing the PVC has.",
    ),
    Column::string("StorageClass", 0, "StorageClass of the pvc"),
    Column::string(
        "VolumeAttributesClass",
        0,
        "VolumeAttributesClass of the pvc",
    ),
    AGE_COLUMN,
    Column::string(
        "VolumeMode",
        1,
        "volumeMode defines what type of volume is required by the claim. Value of Filesystem \
         is implied when not included in claim spec.",
    ),
];

/// The beta storage class annotation.
const CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// `NormalizeDataSources`: a `dataSource` alone is copied to `dataSourceRef`, a
/// `dataSourceRef` without a namespace alone to `dataSource`.
fn normalize_data_sources(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let set = |k: &str| spec.get(k).is_some_and(|v| !v.is_null());
    let copy = |from: &Value| -> Value {
        let mut out = Map::new();
        for field in ["apiGroup", "kind", "name"] {
            if let Some(v) = from.get(field).filter(|v| !v.is_null()) {
                out.insert(field.into(), v.clone());
            }
        }
        Value::Object(out)
    };
    if set("dataSource") && !set("dataSourceRef") {
        let r = copy(&spec["dataSource"]);
        spec.insert("dataSourceRef".into(), r);
    } else if set("dataSourceRef") && !set("dataSource") {
        let ns = spec["dataSourceRef"]
            .get("namespace")
            .and_then(Value::as_str);
        if ns.is_none_or(str::is_empty) {
            let s = copy(&spec["dataSourceRef"]);
            spec.insert("dataSource".into(), s);
        }
    }
}

/// `validateDataSource` and `validateDataSourceRef` of the reference at `path`.
fn validate_reference(reference: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let text = |f: &str| reference.get(f).and_then(Value::as_str).unwrap_or("");
    for field in ["name", "kind"] {
        if text(field).is_empty() {
            errors.push(FieldError::required(&format!("{path}.{field}"), ""));
        }
    }
    let group = text("apiGroup");
    if group.is_empty() && text("kind") != "PersistentVolumeClaim" {
        errors.push(FieldError::invalid(
            path,
            text("kind"),
            "must be 'PersistentVolumeClaim' when referencing the default apiGroup",
        ));
    }
    for e in is_dns1123_subdomain(group)
        .iter()
        .filter(|_| !group.is_empty())
    {
        errors.push(FieldError::invalid(&format!("{path}.apiGroup"), group, e));
    }
    let namespace = text("namespace");
    if !namespace.is_empty() {
        for e in crate::apimachinery::validation::is_dns1123_label(namespace) {
            errors.push(FieldError::invalid(
                &format!("{path}.namespace"),
                namespace,
                &e,
            ));
        }
    }
    errors
}

/// `ValidatePersistentVolumeClaimSpec`.
fn validate_spec(obj: &Value) -> Vec<FieldError> {
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let mut errors = Vec::new();
    let modes = spec.get("accessModes").and_then(Value::as_array);
    if modes.is_none_or(Vec::is_empty) {
        errors.push(FieldError::required(
            "spec.accessModes",
            "at least 1 access mode is required",
        ));
    }
    if let Some(selector) = spec.get("selector").filter(|s| !s.is_null()) {
        errors.extend(validate_label_selector(selector, "spec.selector"));
    }
    errors.extend(validate_access_modes(&spec, "spec"));
    match spec.at("/resources/requests/storage") {
        None => errors.push(FieldError::required("spec.resources[storage]", "")),
        Some(storage) => errors.extend(positive_quantity(storage, "spec.resources[storage]")),
    }
    errors.extend(validate_class_and_mode(&spec));
    let source = spec.get("dataSource").filter(|s| !s.is_null());
    let reference = spec.get("dataSourceRef").filter(|s| !s.is_null());
    if let Some(s) = source {
        errors.extend(validate_reference(s, "spec.dataSource"));
    }
    if let Some(r) = reference {
        errors.extend(validate_reference(r, "spec.dataSourceRef"));
    }
    let ref_namespace = reference
        .and_then(|r| r.get("namespace"))
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    // The value is a `*field.Path`, which `json.Marshal` writes as `{}`.
    if ref_namespace {
        if source.is_some() {
            errors.push(FieldError::invalid_printed(
                "spec",
                "{}".into(),
                "may not be specified when dataSourceRef.namespace is specified",
            ));
        }
    } else if let (Some(s), Some(r)) = (source, reference) {
        let same = ["apiGroup", "kind", "name"]
            .iter()
            .all(|f| s.get(f).filter(|v| !v.is_null()) == r.get(f).filter(|v| !v.is_null()));
        if !same {
            errors.push(FieldError::invalid_printed(
                "spec",
                "{}".into(),
                "must match dataSourceRef",
            ));
        }
    }
    errors.extend(validate_class(&spec, "volumeAttributesClassName", "spec"));
    errors
}

/// The beta class annotation of `obj`, if set.
fn class_annotation(obj: &Value) -> Option<&str> {
    let annotations = obj.at("/metadata/annotations").and_then(Value::as_object);
    annotations
        .and_then(|a| a.get(CLASS_ANNOTATION))
        .and_then(Value::as_str)
}

/// `ValidatePersistentVolumeClaimUpdate`'s own rules.
fn validate_update_rules(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec_of = |o: &Value| {
        o.get("spec")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let (mut now, mut was) = (spec_of(new), spec_of(old));
    let unset = |m: &Map<String, Value>, k: &str| m.get(k).is_none_or(Value::is_null);
    // The volume name may be set once.
    if was
        .get("volumeName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        match now.get("volumeName") {
            Some(v) => was.insert("volumeName".into(), v.clone()),
            None => was.remove("volumeName"),
        };
    }
    let (old_annotation, new_annotation) = (class_annotation(old), class_annotation(new));
    let old_class = was.get("storageClassName").and_then(Value::as_str);
    let new_class = now.get("storageClassName").and_then(Value::as_str);
    let from_annotation = old_annotation.is_some()
        && (new_annotation.is_none() || new_annotation == old_annotation)
        && unset(&was, "storageClassName")
        && new_class.is_some()
        && new_class == old_annotation;
    if from_annotation {
        now.remove("storageClassName");
    } else {
        if new_annotation != old_annotation {
            errors.push(FieldError::invalid(
                &format!("metadata.annotations.{CLASS_ANNOTATION}"),
                new_annotation.unwrap_or(""),
                "field is immutable",
            ));
        }
        let from_nil = old_annotation.is_none()
            && old_class.is_none()
            && new_class.is_some_and(|c| !c.is_empty());
        if from_nil {
            now.remove("storageClassName");
        }
    }
    let bound = new.at("/status/phase").and_then(Value::as_str) == Some("Bound");
    if bound
        && let Some(requests) = now.get_mut("resources").and_then(|r| r.get_mut("requests"))
        && let Some(requests) = requests.as_object_mut()
    {
        let old_storage = old.at("/spec/resources/requests/storage").cloned();
        requests.insert("storage".into(), old_storage.unwrap_or(Value::Null));
    }
    match was.get("volumeAttributesClassName") {
        Some(v) => now.insert("volumeAttributesClassName".into(), v.clone()),
        None => now.remove("volumeAttributesClassName"),
    };
    if now != was {
        errors.push(FieldError::forbidden(
            "spec",
            &format!(
                "spec is immutable after creation except resources.requests and \
                 volumeAttributesClassName for bound claims\n{}",
                diff_lines(&was, &now)
            ),
        ));
    }
    let size = |o: &Value, p: &str| o.at(p).and_then(nanos).unwrap_or(0);
    let new_size = size(new, "/spec/resources/requests/storage");
    if new_size < size(old, "/spec/resources/requests/storage")
        && new_size <= size(old, "/status/capacity/storage")
    {
        errors.push(FieldError::forbidden(
            "spec.resources.requests.storage",
            "field can not be less than status.capacity",
        ));
    }
    errors.extend(immutable_at(new, old, "/spec/volumeMode", "volumeMode"));
    errors
}

/// The lines of a diff of two maps, one `-`/`+` pair per key that changed (what keel shows
/// where upstream shows `cmp.Diff` of the Go structs).
pub fn diff_lines(old: &Map<String, Value>, new: &Map<String, Value>) -> String {
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut lines = Vec::new();
    for key in keys {
        let (was, now) = (old.get(key), new.get(key));
        if was != now {
            if let Some(v) = was {
                lines.push(format!("-  {key}: {v}"));
            }
            if let Some(v) = now {
                lines.push(format!("+  {key}: {v}"));
            }
        }
    }
    lines.join("\n")
}

impl Strategy for PersistentVolumeClaims {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    /// `SetDefaults_PersistentVolumeClaim` and `SetDefaults_PersistentVolumeClaimSpec`.
    fn set_defaults(&self, obj: &mut Value) {
        let Some(o) = obj.as_object_mut() else {
            return;
        };
        for (key, field, value) in [
            ("spec", "volumeMode", "Filesystem"),
            ("status", "phase", "Pending"),
        ] {
            let part = o.entry(key).or_insert_with(|| json!({}));
            if let Some(part) = part.as_object_mut() {
                if part.get(field).and_then(Value::as_str) == Some("") {
                    part.remove(field);
                }
                default_value(part, field, json!(value));
            }
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({}));
        }
        self.set_defaults(obj);
        normalize_data_sources(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        self.set_defaults(new);
        normalize_data_sources(new);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_spec(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = validate_spec(new);
        let mut old = old.clone();
        normalize_data_sources(&mut old);
        errors.extend(validate_update_rules(new, &old));
        errors
    }

    /// `ValidatePersistentVolumeClaimStatusUpdate`: a resource version, access modes, and
    /// each capacity a quantity not below 0 (`validateBasicResource`).
    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errors: Vec<FieldError> =
            status::resource_version_required(new).into_iter().collect();
        let modes = new.at("/spec/accessModes").and_then(Value::as_array);
        if modes.is_none_or(Vec::is_empty) {
            errors.push(FieldError::required("Spec.accessModes", ""));
        }
        let capacity = new.at("/status/capacity").and_then(Value::as_object);
        for (name, quantity) in capacity.into_iter().flatten() {
            if let Some(n) = nanos(quantity).filter(|n| *n < 0) {
                errors.push(FieldError::invalid(
                    &format!("status.capacity[{name}]"),
                    super::resource_lists::value(n) as i64,
                    "must be a valid resource quantity",
                ));
            }
        }
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let phase = phase_cell(obj);
        let volume = super::text(obj, "/spec/volumeName");
        let (capacity, modes) = if volume.is_empty() {
            (String::new(), String::new())
        } else {
            let capacity = obj.at("/status/capacity/storage");
            (
                capacity.map_or_else(|| "0".into(), quantity_text),
                access_modes_text(obj.at("/status/accessModes")),
            )
        };
        vec![
            Value::from(meta_str(obj, "name")),
            Value::from(phase),
            Value::from(volume),
            Value::from(capacity),
            Value::from(modes),
            Value::from(storage_class(obj)),
            Value::from(or_unset(obj, "/spec/volumeAttributesClassName")),
            super::age(obj, now),
            Value::from(or_unset(obj, "/spec/volumeMode")),
        ]
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["name"]
    }

    fn field(&self, obj: &Value, field: &str) -> String {
        name_field(obj, field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;

    fn applied() -> Value {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}})
    }

    #[test]
    fn a_new_claim_gets_upstreams_defaults() {
        let mut pvc = applied();
        pvc["status"] = json!({"phase": "Bound"});
        PersistentVolumeClaims.prepare_for_create(&mut pvc);
        // The strategy clears the status; SetDefaults_PersistentVolumeClaim(Spec) set the
        // phase and the volume mode.
        assert_eq!(
            pvc,
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data", "namespace": "default"},
                "spec": {"accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "1Gi"}},
                         "volumeMode": "Filesystem"},
                "status": {"phase": "Pending"}})
        );
        assert!(PersistentVolumeClaims.validate(&pvc).is_empty());
        let mut sourced = applied();
        sourced["spec"]["dataSource"] = json!({"kind": "PersistentVolumeClaim", "name": "src"});
        PersistentVolumeClaims.prepare_for_create(&mut sourced);
        assert_eq!(
            sourced["spec"]["dataSourceRef"],
            json!({"kind": "PersistentVolumeClaim", "name": "src"})
        );
    }

    #[test]
    fn claims_are_validated_in_upstream_words() {
        let bad = json!({"spec": {"accessModes": [], "resources": {},
            "volumeMode": "Raw", "dataSource": {"kind": "Secret", "name": "s"}}});
        assert_eq!(
            messages(&PersistentVolumeClaims.validate(&bad)),
            vec![
                "spec.accessModes: Required value: at least 1 access mode is required",
                "spec.resources[storage]: Required value",
                "spec.volumeMode: Unsupported value: \"Raw\": supported values: \"Block\", \
                 \"Filesystem\"",
                "spec.dataSource: Invalid value: \"Secret\": must be 'PersistentVolumeClaim' \
                 when referencing the default apiGroup",
            ]
        );
        let mut zero = applied();
        zero["spec"]["resources"]["requests"]["storage"] = json!("0");
        assert_eq!(
            messages(&PersistentVolumeClaims.validate(&zero)),
            vec!["spec.resources[storage]: Invalid value: \"0\": must be greater than zero"]
        );
    }

    #[test]
    fn only_a_bound_claims_request_may_change() {
        let mut old = applied();
        PersistentVolumeClaims.prepare_for_create(&mut old);
        let mut grown = old.clone();
        grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert_eq!(
            messages(&PersistentVolumeClaims.validate_update(&grown, &old)),
            vec![
                "spec: Forbidden: spec is immutable after creation except resources.requests \
                 and volumeAttributesClassName for bound claims\n-  resources: \
                 {\"requests\":{\"storage\":\"1Gi\"}}\n+  resources: \
                 {\"requests\":{\"storage\":\"2Gi\"}}"
            ]
        );
        // Bound (the status the update keeps): the request may grow, and shrink down to the
        // capacity the status reports but not to it.
        old["status"] = json!({"phase": "Bound", "capacity": {"storage": "1Gi"}});
        old["spec"]["volumeName"] = json!("pv1");
        grown["status"] = old["status"].clone();
        grown["spec"]["volumeName"] = json!("pv1");
        assert!(
            PersistentVolumeClaims
                .validate_update(&grown, &old)
                .is_empty()
        );
        let mut shrunk = grown.clone();
        shrunk["spec"]["resources"]["requests"]["storage"] = json!("512Mi");
        assert_eq!(
            messages(&PersistentVolumeClaims.validate_update(&shrunk, &grown)),
            vec![
                "spec.resources.requests.storage: Forbidden: field can not be less than \
                 status.capacity"
            ]
        );
        // The volume name is set once; the class may go from the annotation to the field.
        let mut renamed = grown.clone();
        renamed["spec"]["volumeName"] = json!("pv2");
        assert_eq!(
            PersistentVolumeClaims
                .validate_update(&renamed, &grown)
                .len(),
            1
        );
        let mut annotated = applied();
        annotated["metadata"]["annotations"] = json!({CLASS_ANNOTATION: "fast"});
        PersistentVolumeClaims.prepare_for_create(&mut annotated);
        let mut upgraded = annotated.clone();
        upgraded["spec"]["storageClassName"] = json!("fast");
        assert!(
            PersistentVolumeClaims
                .validate_update(&upgraded, &annotated)
                .is_empty()
        );
    }

    #[test]
    fn claims_print_as_print_persistent_volume_claim_does() {
        let now = Time::parse("2026-05-28T20:30:00Z").unwrap();
        let mut pvc = applied();
        PersistentVolumeClaims.prepare_for_create(&mut pvc);
        pvc["metadata"]["creationTimestamp"] = json!("2026-05-28T20:25:00Z");
        pvc["spec"]["storageClassName"] = json!("standard");
        assert_eq!(
            PersistentVolumeClaims.cells(&pvc, now),
            vec![
                json!("data"),
                json!("Pending"),
                json!(""),
                json!(""),
                json!(""),
                json!("standard"),
                json!("<unset>"),
                json!("5m"),
                json!("Filesystem"),
            ]
        );
        pvc["spec"]["volumeName"] = json!("pv1");
        pvc["status"] = json!({"phase": "Bound", "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"]});
        assert_eq!(
            PersistentVolumeClaims.cells(&pvc, now)[1..5],
            [json!("Bound"), json!("pv1"), json!("1Gi"), json!("RWO")]
        );
        assert!(PersistentVolumeClaims.returns_deleted_object());
    }

    #[test]
    fn a_status_update_needs_a_resource_version_access_modes_and_quantities() {
        let claim = json!({"metadata": {"name": "c"}, "spec": {},
            "status": {"capacity": {"storage": "-1Gi"}}});
        assert_eq!(
            crate::registry::rules::messages(
                &PersistentVolumeClaims.validate_status_update(&claim, &claim)
            ),
            [
                "resourceVersion: Required value",
                "Spec.accessModes: Required value",
                "status.capacity[storage]: Invalid value: -1073741824: must be a valid resource \
                 quantity",
            ]
        );
    }
}
