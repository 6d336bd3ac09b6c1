//! core/v1 PersistentVolumes (cluster-scoped, `pv`): NAME, CAPACITY, ACCESS MODES, RECLAIM
//! POLICY, STATUS, CLAIM, STORAGECLASS, VOLUMEATTRIBUTESCLASS, REASON, AGE and, wide,
//! VOLUMEMODE (`printPersistentVolume`). Defaults as `SetDefaults_PersistentVolume` and
//! `SetDefaults_HostPathVolumeSource` (`pkg/apis/core/v1/defaults.go`) set them: reclaim
//! policy `Retain`, volume mode `Filesystem`, phase `Pending`, a host path's type "". A new
//! PV's status is `Pending` since now (`pkg/registry/core/persistentvolume/strategy.go`);
//! `ValidatePersistentVolume` and `ValidatePersistentVolumeUpdate`
//! (`pkg/apis/core/validation/validation.go`): access modes, a storage capacity, exactly one
//! volume source (host path, NFS, local and CSI checked further), reclaim policy, volume
//! mode and class; the source and mode may not change. The access mode and class helpers
//! here serve PersistentVolumeClaims too.

use serde_json::{Map, Value, json};

use super::persistentvolumeclaims::diff_lines;
use super::printing::json_text;
use super::resource_lists::{nanos, quantity_text};
use super::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, meta_str, status};
use crate::apimachinery::time::Time;
use crate::apimachinery::validation::is_dns1123_subdomain;
use crate::json_pointer::At;
use crate::registry::defaults::default_value;
use crate::registry::rules::immutable_at;
use crate::storage::FieldError;
use crate::storage::field::Kind;

/// The PersistentVolume strategy.
pub struct PersistentVolumes;

static INFO: ResourceInfo = ResourceInfo {
    // The store's `ReturnDeletedObject: true` (its `storage/storage.go`).
    returns_deleted_object: true,
    short_names: &["pv"],
    namespaced: false,
    status: true,
    ..ResourceInfo::new(
        "",
        "v1",
        "PersistentVolume",
        "persistentvolumes",
        "persistentvolume",
    )
};

static COLUMNS: [Column; 11] = [
    NAME_COLUMN,
    Column::string(
        "Capacity",
        0,
        "capacity is the description of the persistent volume's resources and capacity.",
    ),
    Column::string(
        "Access Modes",
        0,
        "accessModes contains all ways the volume can be mounted.",
    ),
    Column::string(
        "Reclaim Policy",
        0,
        "persistentVolumeReclaimPolicy defines what happens to a persistent volume when \
         released from its claim. Valid options are Retain (default for manually created \
         PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), \
         and Recycle (deprecated).",
    ),
    Column::string(
        "Status",
        0,
        "phase indicates if a volume is available, bound to a claim, or released by a claim.",
    ),
    Column::string(
        "Claim",
        0,
        "claimRef is part of a bi-directional binding between PersistentVolume and \
         PersistentVolumeClaim.",
    ),
    Column::string("StorageClass", 0, "StorageClass of the pv"),
    Column::string(
        "VolumeAttributesClass",
        0,
        "VolumeAttributesClass of the pv",
    ),
    Column::string(
        "Reason",
        0,
        "reason is a brief CamelCase string that describes any failure and is meant for \
         machine parsing and tidy display in the CLI.",
    ),
    AGE_COLUMN,
    Column::string(
        "VolumeMode",
        1,
        "volumeMode defines if a volume is intended to be used with a formatted filesystem or \
         to remain in raw block state. Value of Filesystem is implied when not included in \
         spec.",
    ),
];

/// `supportedAccessModes`, sorted as `sets.List` sorts them.
pub const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];
/// `supportedReclaimPolicy`.
const RECLAIM_POLICIES: [&str; 3] = ["Delete", "Recycle", "Retain"];
/// `supportedVolumeModes`.
pub const VOLUME_MODES: [&str; 2] = ["Block", "Filesystem"];
/// `supportedHostPathTypes`, sorted.
const HOST_PATH_TYPES: [&str; 8] = [
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
];
/// The volume sources of a PV, in the order `ValidatePersistentVolumeSpec` counts them (its
/// "more than 1" error names `cephfs` as `cephFS`).
const SOURCES: &str = "hostPath gcePersistentDisk awsElasticBlockStore glusterfs flocker nfs \
    rbd quobyte cephfs iscsi cinder fc flexVolume azureFile vsphereVolume photonPersistentDisk \
    portworxVolume azureDisk scaleIO local storageos csi";

/// The beta storage class annotation, which wins over `storageClassName`.
const CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// The strings of the list at `field` of `spec`.
fn strings<'a>(spec: &'a Value, field: &str) -> Vec<&'a str> {
    let list = spec.get(field).and_then(Value::as_array);
    list.into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// `GetAccessModesAsString`: RWO, ROX, RWX, RWOP, in that order, each once.
pub fn access_modes_text(modes: Option<&Value>) -> String {
    let modes: Vec<&str> = modes
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| modes.contains(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// `GetPersistentVolumeClass` and `GetPersistentVolumeClaimClass`: the beta annotation if
/// set, else `spec.storageClassName`.
pub fn storage_class(obj: &Value) -> String {
    let annotations = obj.at("/metadata/annotations").and_then(Value::as_object);
    if let Some(class) = annotations.and_then(|a| a.get(CLASS_ANNOTATION)) {
        return class.as_str().unwrap_or("").to_string();
    }
    super::text(obj, "/spec/storageClassName").to_string()
}

/// The access modes at `<path>.accessModes`: each one known, and `ReadWriteOncePod` alone.
pub fn validate_access_modes(spec: &Value, path: &str) -> Vec<FieldError> {
    let at = format!("{path}.accessModes");
    let mut errors = Vec::new();
    let (mut once_pod, mut other) = (false, false);
    for mode in strings(spec, "accessModes") {
        if !ACCESS_MODES.contains(&mode) {
            errors.push(FieldError::not_supported(&at, mode, &ACCESS_MODES));
        } else if mode == "ReadWriteOncePod" {
            once_pod = true;
        } else {
            other = true;
        }
    }
    if once_pod && other {
        errors.push(FieldError::forbidden(
            &at,
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
    errors
}

/// `ValidatePersistentVolumeSpec`'s and `ValidatePersistentVolumeClaimSpec`'s checks of the
/// class (`storageClassName`) and the volume mode of `spec`.
pub fn validate_class_and_mode(spec: &Value) -> Vec<FieldError> {
    let mut errors = validate_class(spec, "storageClassName", "spec");
    if let Some(mode) = spec.get("volumeMode").and_then(Value::as_str)
        && !VOLUME_MODES.contains(&mode)
    {
        errors.push(FieldError::not_supported(
            "spec.volumeMode",
            mode,
            &VOLUME_MODES,
        ));
    }
    errors
}

/// The STATUS cell of a volume or claim: `Terminating` while it is being deleted, else its
/// phase.
pub fn phase_cell(obj: &Value) -> &str {
    let deleting = obj
        .at("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    if deleting {
        "Terminating"
    } else {
        super::text(obj, "/status/phase")
    }
}

/// The string at `pointer` in `obj`, `<unset>` when it is missing.
pub fn or_unset(obj: &Value, pointer: &str) -> String {
    obj.at(pointer)
        .and_then(Value::as_str)
        .unwrap_or("<unset>")
        .to_string()
}

/// The value of the selectable field `name` (the object's name) of a volume or claim.
pub fn name_field(obj: &Value, field: &str) -> String {
    match field {
        "name" => meta_str(obj, "name").to_string(),
        _ => String::new(),
    }
}

/// `ValidateClassName` of the class at `<path>.<field>`, if set and not empty.
pub fn validate_class(spec: &Value, field: &str, path: &str) -> Vec<FieldError> {
    let class = spec.get(field).and_then(Value::as_str).unwrap_or("");
    if class.is_empty() {
        return Vec::new();
    }
    is_dns1123_subdomain(class)
        .iter()
        .map(|e| FieldError::invalid(&format!("{path}.{field}"), class, e))
        .collect()
}

/// `ValidatePositiveQuantityValue`: `<path>: Invalid value: "<q>": must be greater than zero`.
pub fn positive_quantity(quantity: &Value, path: &str) -> Option<FieldError> {
    (nanos(quantity).unwrap_or(0) <= 0)
        .then(|| FieldError::invalid(path, quantity_text(quantity), "must be greater than zero"))
}

/// `validatePathNoBacksteps`.
fn no_backsteps(path_value: &str, path: &str) -> Option<FieldError> {
    path_value
        .split('/')
        .any(|part| part == "..")
        .then(|| FieldError::invalid(path, path_value, "must not contain '..'"))
}

/// The checks of one volume source (those keel ports: host path, NFS, local, CSI).
fn validate_source(field: &str, source: &Value, at: &str, spec: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let text = |f: &str| source.get(f).and_then(Value::as_str).unwrap_or("");
    match field {
        "hostPath" | "local" => {
            let path = text("path");
            if path.is_empty() {
                return vec![FieldError::required(&format!("{at}.path"), "")];
            }
            errors.extend(no_backsteps(path, &format!("{at}.path")));
            if field == "hostPath"
                && let Some(kind) = source.get("type").and_then(Value::as_str)
                && !HOST_PATH_TYPES.contains(&kind)
            {
                errors.push(FieldError::not_supported(
                    &format!("{at}.type"),
                    kind,
                    &HOST_PATH_TYPES,
                ));
            }
            let affinity = spec
                .at("/nodeAffinity/required")
                .is_some_and(|r| !r.is_null());
            if field == "local" && !affinity {
                errors.push(FieldError::required(
                    "spec.nodeAffinity",
                    "Local volume requires node affinity",
                ));
            }
        }
        "nfs" => {
            if text("server").is_empty() {
                errors.push(FieldError::required(&format!("{at}.server"), ""));
            }
            if text("path").is_empty() {
                errors.push(FieldError::required(&format!("{at}.path"), ""));
            }
            if !text("path").starts_with('/') {
                errors.push(FieldError::invalid(
                    &format!("{at}.path"),
                    text("path"),
                    "must be an absolute path",
                ));
            }
        }
        "csi" => {
            let driver = text("driver");
            if driver.is_empty() {
                errors.push(FieldError::required(&format!("{at}.driver"), ""));
            } else {
                for e in is_dns1123_subdomain(&driver.to_lowercase()) {
                    errors.push(FieldError::invalid(&format!("{at}.driver"), driver, &e));
                }
            }
            if text("volumeHandle").is_empty() {
                errors.push(FieldError::required(&format!("{at}.volumeHandle"), ""));
            }
        }
        _ => {}
    }
    errors
}

/// `ValidatePersistentVolumeSpec` of a PV (not an inline one).
fn validate_spec(obj: &Value) -> Vec<FieldError> {
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let mut errors = Vec::new();
    if strings(&spec, "accessModes").is_empty() {
        errors.push(FieldError::required("spec.accessModes", ""));
    }
    errors.extend(validate_access_modes(&spec, "spec"));
    let capacity = spec.get("capacity").and_then(Value::as_object);
    if capacity.is_none_or(Map::is_empty) {
        errors.push(FieldError::required("spec.capacity", ""));
    }
    if capacity.is_none_or(|c| !c.contains_key("storage") || c.len() > 1) {
        errors.push(FieldError {
            kind: Kind::NotSupported,
            field: "spec.capacity".into(),
            value: None,
            printed: Some(json_text(spec.get("capacity"))),
            detail: "supported values: \"storage\"".into(),
        });
    }
    for (name, quantity) in capacity.into_iter().flatten() {
        errors.extend(positive_quantity(
            quantity,
            &format!("spec.capacity[{name}]"),
        ));
    }
    let policy = spec
        .get("persistentVolumeReclaimPolicy")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !policy.is_empty() && !RECLAIM_POLICIES.contains(&policy) {
        errors.push(FieldError::not_supported(
            "spec.persistentVolumeReclaimPolicy",
            policy,
            &RECLAIM_POLICIES,
        ));
    }
    let mut count = 0;
    for field in SOURCES.split_whitespace() {
        let named = if field == "cephfs" { "cephFS" } else { field };
        let Some(source) = spec.get(field).filter(|s| !s.is_null()) else {
            continue;
        };
        let at = format!("spec.{field}");
        if count > 0 && field != "flexVolume" {
            errors.push(FieldError::forbidden(
                &format!("spec.{named}"),
                "may not specify more than 1 volume type",
            ));
            continue;
        }
        count += 1;
        errors.extend(validate_source(field, source, &at, &spec));
    }
    if count == 0 {
        errors.push(FieldError::required("spec", "must specify a volume type"));
    }
    let host_path = spec.at("/hostPath/path").and_then(Value::as_str);
    let root = |p: &str| p.starts_with('/') && p.split('/').all(|s| s.is_empty() || s == ".");
    if host_path.is_some_and(root) && policy == "Recycle" {
        errors.push(FieldError::forbidden(
            "spec.persistentVolumeReclaimPolicy",
            "may not be 'recycle' for a hostPath mount of '/'",
        ));
    }
    errors.extend(validate_class_and_mode(&spec));
    if let Some(class) = spec
        .get("volumeAttributesClassName")
        .and_then(Value::as_str)
    {
        if class.is_empty() {
            errors.push(FieldError::required(
                "spec.volumeAttributesClassName",
                "an empty string is disallowed",
            ));
        } else {
            errors.extend(validate_class(&spec, "volumeAttributesClassName", "spec"));
        }
        if spec.get("csi").is_none_or(Value::is_null) {
            errors.push(FieldError::required(
                "spec.csi",
                "has to be specified when using volumeAttributesClassName",
            ));
        }
    }
    errors
}

/// The volume source of a PV spec: its source fields only.
fn source_of(obj: &Value) -> Map<String, Value> {
    let spec = obj.get("spec").and_then(Value::as_object);
    let mut source: Map<String, Value> = spec
        .into_iter()
        .flatten()
        .filter(|(k, v)| !v.is_null() && SOURCES.split_whitespace().any(|f| f == k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    // A controller expand secret may be added to a CSI source that had none.
    if let Some(csi) = source.get_mut("csi").and_then(Value::as_object_mut) {
        csi.remove("controllerExpandSecretRef");
    }
    source
}

impl Strategy for PersistentVolumes {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    /// `SetDefaults_PersistentVolume` and `SetDefaults_HostPathVolumeSource`.
    fn set_defaults(&self, obj: &mut Value) {
        let Some(o) = obj.as_object_mut() else {
            return;
        };
        for (key, defaults) in [
            (
                "spec",
                vec![
                    ("persistentVolumeReclaimPolicy", json!("Retain")),
                    ("volumeMode", json!("Filesystem")),
                ],
            ),
            ("status", vec![("phase", json!("Pending"))]),
        ] {
            let part = o.entry(key).or_insert_with(|| json!({}));
            if let Some(part) = part.as_object_mut() {
                for (field, value) in defaults {
                    if part
                        .get(field)
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                    {
                        part.insert(field.into(), value);
                    }
                }
            }
        }
        if let Some(host_path) = obj.at_mut("/spec/hostPath").and_then(Value::as_object_mut) {
            default_value(host_path, "type", json!(""));
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        self.set_defaults(obj);
        if let Some(o) = obj.as_object_mut() {
            o.insert(
                "status".into(),
                json!({"phase": "Pending", "lastPhaseTransitionTime": Time::now().rfc3339()}),
            );
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_spec(obj)
    }

    /// `persistentvolumeStatusStrategy.PrepareForUpdate`: a phase change without a new
    /// transition time is stamped now.
    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        let since = new.at("/status/lastPhaseTransitionTime").cloned();
        let phase_changed = new.at("/status/phase") != old.at("/status/phase");
        let stale = since
            .as_ref()
            .is_none_or(|t| t.is_null() || Some(t) == old.at("/status/lastPhaseTransitionTime"));
        if phase_changed
            && stale
            && let Some(status) = new.get_mut("status").and_then(Value::as_object_mut)
        {
            status.insert(
                "lastPhaseTransitionTime".into(),
                Time::now().rfc3339().into(),
            );
        }
    }

    /// `ValidatePersistentVolumeStatusUpdate`: a resource version.
    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        status::resource_version_required(new).into_iter().collect()
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = validate_spec(new);
        let (source, old_source) = (source_of(new), source_of(old));
        if source != old_source {
            errors.push(FieldError::forbidden(
                "spec.persistentvolumesource",
                &format!(
                    "spec.persistentvolumesource is immutable after creation\n{}",
                    diff_lines(&old_source, &source)
                ),
            ));
        }
        errors.extend(immutable_at(new, old, "/spec/volumeMode", "volumeMode"));
        let old_affinity = old.at("/spec/nodeAffinity").filter(|a| !a.is_null());
        let affinity = new.at("/spec/nodeAffinity").filter(|a| !a.is_null());
        if old_affinity.is_some() && affinity != old_affinity {
            errors.push(FieldError::invalid_printed(
                "nodeAffinity",
                json_text(affinity),
                "field is immutable",
            ));
        }
        let (class, old_class) = (
            new.at("/spec/volumeAttributesClassName")
                .filter(|c| !c.is_null()),
            old.at("/spec/volumeAttributesClassName")
                .filter(|c| !c.is_null()),
        );
        if old_class.is_some() && class.is_none() {
            errors.push(FieldError::forbidden(
                "spec.volumeAttributesClassName",
                "update from non-nil value to nil is forbidden",
            ));
        }
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let claim = match obj.at("/spec/claimRef").filter(|c| c.is_object()) {
            Some(c) => format!(
                "{}/{}",
                super::text(c, "/namespace"),
                super::text(c, "/name")
            ),
            None => String::new(),
        };
        let capacity = obj
            .at("/spec/capacity/storage")
            .map_or_else(|| "0".into(), quantity_text);
        let phase = phase_cell(obj);
        vec![
            Value::from(meta_str(obj, "name")),
            Value::from(capacity),
            Value::from(access_modes_text(obj.at("/spec/accessModes"))),
            Value::from(super::text(obj, "/spec/persistentVolumeReclaimPolicy")),
            Value::from(phase),
            Value::from(claim),
            Value::from(storage_class(obj)),
            Value::from(or_unset(obj, "/spec/volumeAttributesClassName")),
            Value::from(super::text(obj, "/status/reason")),
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
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "hostPath": {"path": "/data/pv1"}}})
    }

    #[test]
    fn a_new_pv_gets_upstreams_defaults() {
        let mut pv = applied();
        PersistentVolumes.prepare_for_create(&mut pv);
        let since = pv["status"]["lastPhaseTransitionTime"].clone();
        assert!(since.as_str().and_then(Time::parse).is_some(), "{pv}");
        // SetDefaults_PersistentVolume (Retain, Filesystem), SetDefaults_HostPathVolumeSource
        // (type ""), and the strategy's status: Pending since now.
        assert_eq!(
            pv,
            json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                         "hostPath": {"path": "/data/pv1", "type": ""},
                         "persistentVolumeReclaimPolicy": "Retain",
                         "volumeMode": "Filesystem"},
                "status": {"phase": "Pending", "lastPhaseTransitionTime": since}})
        );
        assert!(PersistentVolumes.validate(&pv).is_empty());
    }

    #[test]
    fn pvs_are_validated_in_upstream_words() {
        let pv = json!({"spec": {"accessModes": ["ReadWriteOncePod", "ReadWriteOnce", "Sometimes"],
            "capacity": {"storage": "0", "cpu": "1"}, "persistentVolumeReclaimPolicy": "Keep",
            "hostPath": {"path": "/a/../b", "type": "Pipe"}, "nfs": {"server": "s", "path": "p"},
            "volumeMode": "Raw"}});
        assert_eq!(
            messages(&PersistentVolumes.validate(&pv)),
            vec![
                "spec.accessModes: Unsupported value: \"Sometimes\": supported values: \
                 \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
                "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes",
                "spec.capacity: Unsupported value: {\"cpu\":\"1\",\"storage\":\"0\"}: supported \
                 values: \"storage\"",
                "spec.capacity[storage]: Invalid value: \"0\": must be greater than zero",
                "spec.persistentVolumeReclaimPolicy: Unsupported value: \"Keep\": supported \
                 values: \"Delete\", \"Recycle\", \"Retain\"",
                "spec.hostPath.path: Invalid value: \"/a/../b\": must not contain '..'",
                "spec.hostPath.type: Unsupported value: \"Pipe\": supported values: \"\", \
                 \"BlockDevice\", \"CharDevice\", \"Directory\", \"DirectoryOrCreate\", \"File\", \
                 \"FileOrCreate\", \"Socket\"",
                "spec.nfs: Forbidden: may not specify more than 1 volume type",
                "spec.volumeMode: Unsupported value: \"Raw\": supported values: \"Block\", \
                 \"Filesystem\"",
            ]
        );
        assert_eq!(
            messages(&PersistentVolumes.validate(&json!({"spec": {}}))),
            vec![
                "spec.accessModes: Required value",
                "spec.capacity: Required value",
                "spec.capacity: Unsupported value: null: supported values: \"storage\"",
                "spec: Required value: must specify a volume type",
            ]
        );
        let local = json!({"spec": {"accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "1Gi"}, "local": {"path": "/mnt/disk"},
            "csi": {"driver": "", "volumeHandle": "h"}}});
        assert_eq!(
            messages(&PersistentVolumes.validate(&local)),
            vec![
                "spec.nodeAffinity: Required value: Local volume requires node affinity",
                "spec.csi: Forbidden: may not specify more than 1 volume type",
            ]
        );
    }

    #[test]
    fn a_pvs_source_and_mode_may_not_change() {
        let mut old = applied();
        PersistentVolumes.prepare_for_create(&mut old);
        let mut new = old.clone();
        new["spec"]["capacity"]["storage"] = json!("2Gi");
        new["spec"]["persistentVolumeReclaimPolicy"] = json!("Delete");
        assert!(PersistentVolumes.validate_update(&new, &old).is_empty());
        new["spec"]["hostPath"]["path"] = json!("/data/other");
        new["spec"]["volumeMode"] = json!("Block");
        assert_eq!(
            messages(&PersistentVolumes.validate_update(&new, &old)),
            vec![
                "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is \
                 immutable after creation\n-  hostPath: {\"path\":\"/data/pv1\",\"type\":\"\"}\n\
                 +  hostPath: {\"path\":\"/data/other\",\"type\":\"\"}",
                "volumeMode: Invalid value: \"Block\": field is immutable",
            ]
        );
    }

    #[test]
    fn pvs_print_as_print_persistent_volume_does() {
        let mut pv = applied();
        PersistentVolumes.prepare_for_create(&mut pv);
        pv["metadata"]["creationTimestamp"] = json!("2026-05-28T20:29:30Z");
        pv["spec"]["claimRef"] = json!({"namespace": "default", "name": "data"});
        pv["spec"]["storageClassName"] = json!("manual");
        pv["spec"]["accessModes"] = json!(["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"]);
        assert_eq!(
            PersistentVolumes.cells(&pv, Time::parse("2026-05-28T20:30:00Z").unwrap()),
            vec![
                json!("pv1"),
                json!("1Gi"),
                json!("RWO,RWX"),
                json!("Retain"),
                json!("Pending"),
                json!("default/data"),
                json!("manual"),
                json!("<unset>"),
                json!(""),
                json!("30s"),
                json!("Filesystem"),
            ]
        );
        assert_eq!(PersistentVolumes.field(&pv, "name"), "pv1");
        assert!(PersistentVolumes.returns_deleted_object());
    }
}
