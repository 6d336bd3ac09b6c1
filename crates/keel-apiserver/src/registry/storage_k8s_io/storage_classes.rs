//! storage.k8s.io/v1 StorageClasses (`sc`), cluster-scoped: defaults from
//! `pkg/apis/storage/v1/defaults.go` (`SetDefaults_StorageClass`), validation from
//! `pkg/apis/storage/validation/validation.go` (`ValidateStorageClass`,
//! `ValidateStorageClassUpdate`), printed as `printStorageClass` prints them (NAME with
//! ` (default)` for the default class, PROVISIONER, RECLAIMPOLICY, VOLUMEBINDINGMODE,
//! ALLOWVOLUMEEXPANSION, AGE).

use serde_json::{Value, json};

use super::fields::{bool_or, present, str_at};
use crate::apimachinery::time::Time;
use crate::apimachinery::validation::is_qualified_name;
use crate::registry::defaults::{as_map, default_value};
use crate::registry::rules::immutable_at;
use crate::registry::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, age, meta_str};
use crate::storage::FieldError;

/// The StorageClass strategy.
pub struct StorageClasses;

static INFO: ResourceInfo = ResourceInfo {
    returns_deleted_object: true,
    short_names: &["sc"],
    namespaced: false,
    ..ResourceInfo::new(
        "storage.k8s.io",
        "v1",
        "StorageClass",
        "storageclasses",
        "storageclass",
    )
};

static COLUMNS: [Column; 6] = [
    NAME_COLUMN,
    Column::string(
        "Provisioner",
        0,
        "provisioner indicates the type of the provisioner.",
    ),
    Column::string(
        "ReclaimPolicy",
        0,
        "reclaimPolicy controls the reclaimPolicy for dynamically provisioned \
            PersistentVolumes of this storage class. Defaults to Delete.",
    ),
    Column::string(
        "VolumeBindingMode",
        0,
        "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and \
            bound.  When unset, VolumeBindingImmediate is used.",
    ),
    Column::string(
        "AllowVolumeExpansion",
        0,
        "allowVolumeExpansion shows whether the storage class allow volume expand.",
    ),
    AGE_COLUMN,
];

/// The annotation that marks the default class (`storageutil.IsDefaultAnnotation` reads it
/// and its beta form).
pub const IS_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
/// The beta form of [`IS_DEFAULT_CLASS`].
const BETA_IS_DEFAULT_CLASS: &str = "storageclass.beta.kubernetes.io/is-default-class";

/// `maxProvisionerParameterLen`.
const MAX_PARAMETERS: usize = 512;
/// `maxProvisionerParameterSize` (256 kB).
const MAX_PARAMETER_BYTES: usize = 256 * 1024;

/// Whether `obj` is annotated the default class (`IsDefaultAnnotation`).
pub fn is_default(obj: &Value) -> bool {
    [IS_DEFAULT_CLASS, BETA_IS_DEFAULT_CLASS].iter().any(|key| {
        obj.get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(*key))
            .and_then(Value::as_str)
            == Some("true")
    })
}

/// `validateProvisioner`: required, and a qualified name once lower-cased (also a
/// VolumeAttributesClass's driver name).
pub fn validate_provisioner(provisioner: &str, path: &str) -> Vec<FieldError> {
    if provisioner.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let lower = provisioner.to_lowercase();
    is_qualified_name(&lower)
        .iter()
        .map(|problem| FieldError::invalid(path, lower.as_str(), problem))
        .collect()
}

/// `validateParameters` (empty allowed): at most 512 keys, none empty, 256 kB in all.
fn validate_parameters(parameters: Option<&Value>) -> Vec<FieldError> {
    let Some(params) = parameters.and_then(Value::as_object) else {
        return Vec::new();
    };
    if params.len() > MAX_PARAMETERS {
        return vec![FieldError::too_long("parameters", MAX_PARAMETERS)];
    }
    let mut errors = Vec::new();
    let mut size = 0;
    for (k, v) in params {
        if k.is_empty() {
            errors.push(FieldError::invalid(
                "parameters",
                "",
                "field can not be empty.",
            ));
        }
        size += k.len() + v.as_str().map_or(0, str::len);
    }
    if size > MAX_PARAMETER_BYTES {
        errors.push(FieldError::too_long("parameters", MAX_PARAMETER_BYTES));
    }
    errors
}

impl Strategy for StorageClasses {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn set_defaults(&self, obj: &mut Value) {
        let sc = as_map(obj);
        default_value(sc, "reclaimPolicy", json!("Delete"));
        default_value(sc, "volumeBindingMode", json!("Immediate"));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = validate_provisioner(str_at(obj, "/provisioner"), "provisioner");
        errors.extend(validate_parameters(obj.get("parameters")));
        let reclaim = str_at(obj, "/reclaimPolicy");
        if !reclaim.is_empty() && !["Delete", "Retain"].contains(&reclaim) {
            errors.push(FieldError::not_supported(
                "reclaimPolicy",
                reclaim,
                &["Delete", "Retain"],
            ));
        }
        match present(obj, "/volumeBindingMode") {
            None => errors.push(FieldError::required("volumeBindingMode", "")),
            Some(mode) => {
                let mode = mode.as_str().unwrap_or("");
                let supported = ["Immediate", "WaitForFirstConsumer"];
                if !supported.contains(&mode) {
                    errors.push(FieldError::not_supported(
                        "volumeBindingMode",
                        mode,
                        &supported,
                    ));
                }
            }
        }
        errors
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = self.validate(new);
        if new.get("parameters") != old.get("parameters") {
            errors.push(FieldError::forbidden(
                "parameters",
                "updates to parameters are forbidden.",
            ));
        }
        if str_at(new, "/provisioner") != str_at(old, "/provisioner") {
            errors.push(FieldError::forbidden(
                "provisioner",
                "updates to provisioner are forbidden.",
            ));
        }
        if str_at(new, "/reclaimPolicy") != str_at(old, "/reclaimPolicy") {
            errors.push(FieldError::forbidden(
                "reclaimPolicy",
                "updates to reclaimPolicy are forbidden.",
            ));
        }
        errors.extend(immutable_at(
            new,
            old,
            "/volumeBindingMode",
            "volumeBindingMode",
        ));
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let mut name = meta_str(obj, "name").to_string();
        if is_default(obj) {
            name.push_str(" (default)");
        }
        let or = |pointer: &str, unset: &str| match str_at(obj, pointer) {
            "" if present(obj, pointer).is_none() => unset.to_string(),
            s => s.to_string(),
        };
        vec![
            Value::from(name),
            Value::from(str_at(obj, "/provisioner")),
            Value::from(or("/reclaimPolicy", "Delete")),
            Value::from(or("/volumeBindingMode", "Immediate")),
            bool_or(obj, "/allowVolumeExpansion", false),
            age(obj, now),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;

    #[test]
    fn defaults_are_upstreams() {
        // SetDefaults_StorageClass: ReclaimPolicy Delete, VolumeBindingMode Immediate, only
        // where nil.
        let mut sc = json!({"metadata": {"name": "fast"}, "provisioner": "csi.example.com"});
        StorageClasses.set_defaults(&mut sc);
        assert_eq!(
            sc,
            json!({"metadata": {"name": "fast"}, "provisioner": "csi.example.com",
                "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"})
        );
        let mut set =
            json!({"reclaimPolicy": "Retain", "volumeBindingMode": "WaitForFirstConsumer"});
        StorageClasses.set_defaults(&mut set);
        assert_eq!(
            set,
            json!({"reclaimPolicy": "Retain", "volumeBindingMode": "WaitForFirstConsumer"})
        );
    }

    #[test]
    fn validation_is_worded_as_upstream() {
        let bad = json!({"provisioner": "", "reclaimPolicy": "Recycle",
            "volumeBindingMode": "Later", "parameters": {"": "x"}});
        assert_eq!(
            messages(&StorageClasses.validate(&bad)),
            vec![
                "provisioner: Required value",
                "parameters: Invalid value: \"\": field can not be empty.",
                "reclaimPolicy: Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\"",
                "volumeBindingMode: Unsupported value: \"Later\": supported values: \"Immediate\", \"WaitForFirstConsumer\"",
            ]
        );
        let bad_name = json!({"provisioner": "Not Qualified", "volumeBindingMode": "Immediate"});
        assert!(messages(&StorageClasses.validate(&bad_name))[0].starts_with(
            "provisioner: Invalid value: \"not qualified\": name part must consist of alphanumeric"
        ));
        let mut old = json!({"provisioner": "a.io", "parameters": {"type": "ssd"}});
        StorageClasses.set_defaults(&mut old);
        let mut new = json!({"provisioner": "b.io", "parameters": {"type": "hdd"},
            "reclaimPolicy": "Retain", "volumeBindingMode": "WaitForFirstConsumer"});
        StorageClasses.set_defaults(&mut new);
        assert_eq!(
            messages(&StorageClasses.validate_update(&new, &old)),
            vec![
                "parameters: Forbidden: updates to parameters are forbidden.",
                "provisioner: Forbidden: updates to provisioner are forbidden.",
                "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden.",
                "volumeBindingMode: Invalid value: \"WaitForFirstConsumer\": field is immutable",
            ]
        );
    }

    #[test]
    fn the_default_class_is_marked() {
        let sc = json!({"metadata": {"name": "standard", "creationTimestamp": "2026-05-28T20:16:40Z",
            "annotations": {IS_DEFAULT_CLASS: "true"}},
            "provisioner": "rancher.io/local-path", "allowVolumeExpansion": true});
        assert_eq!(
            StorageClasses.cells(&sc, Time(1_780_000_000)),
            vec![
                json!("standard (default)"),
                json!("rancher.io/local-path"),
                json!("Delete"),
                json!("Immediate"),
                json!(true),
                json!("10m")
            ]
        );
        let beta = json!({"metadata": {"annotations": {BETA_IS_DEFAULT_CLASS: "true"}}});
        assert!(is_default(&beta));
        let no = json!({"metadata": {"annotations": {IS_DEFAULT_CLASS: "false"}}});
        assert!(!is_default(&no));
    }
}
