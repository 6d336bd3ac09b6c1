//! storage.k8s.io/v1 CSIDrivers, cluster-scoped: defaults from
//! `pkg/apis/storage/v1/defaults.go` (`SetDefaults_CSIDriver`, with 1.34's default feature
//! gates: `SELinuxMountReadWriteOncePod` on, so `seLinuxMount` is defaulted and required),
//! validation from `pkg/apis/storage/validation/validation.go` (`ValidateCSIDriver`,
//! `ValidateCSIDriverUpdate`: `attachRequired` and `volumeLifecycleModes` immutable), and
//! `printCSIDriver`'s columns.

use serde_json::{Value, json};

use super::fields::{bool_or, items, present};
use crate::apimachinery::quote::go_quote;
use crate::apimachinery::time::Time;
use crate::registry::defaults::{as_map, default_value, object_entry};
use crate::registry::rules::immutable_at;
use crate::registry::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, age, meta_str};
use crate::storage::FieldError;

/// The CSIDriver strategy.
pub struct CsiDrivers;

static INFO: ResourceInfo = ResourceInfo {
    returns_deleted_object: true,
    namespaced: false,
    ..ResourceInfo::new(
        "storage.k8s.io",
        "v1",
        "CSIDriver",
        "csidrivers",
        "csidriver",
    )
};

const fn boolean(name: &'static str, description: &'static str) -> Column {
    Column {
        name,
        kind: "boolean",
        format: "",
        description,
        priority: 0,
    }
}

static COLUMNS: [Column; 8] = [
    NAME_COLUMN,
    boolean(
        "AttachRequired",
        "attachRequired indicates this CSI volume driver requires an attach operation.",
    ),
    boolean(
        "PodInfoOnMount",
        "podInfoOnMount indicates this CSI volume driver requires additional pod information \
            (like podName, podUID, etc.) during mount operations.",
    ),
    boolean(
        "StorageCapacity",
        "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider \
            the storage capacity that the driver deployment will report.",
    ),
    Column::string(
        "TokenRequests",
        0,
        "tokenRequests indicates the CSI driver needs pods' service account tokens it is \
            mounting volume for to do necessary authentication.",
    ),
    boolean(
        "RequiresRepublish",
        "requiresRepublish indicates the CSI driver wants `NodePublishVolume` being \
            periodically called to reflect any possible change in the mounted volume.",
    ),
    Column::string(
        "Modes",
        0,
        "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports.",
    ),
    AGE_COLUMN,
];

/// `supportedFSGroupPolicy`, sorted.
const FS_GROUP_POLICIES: [&str; 3] = ["File", "None", "ReadWriteOnceWithFSType"];
/// The volume lifecycle modes, as `validateVolumeLifecycleModes` lists them.
const MODES: [&str; 2] = ["Persistent", "Ephemeral"];

/// `%#v` of a `[]storage.VolumeLifecycleMode` (how `ValidateImmutableField` shows it).
fn modes_go(modes: Option<&Value>) -> String {
    let quoted: Vec<String> = modes
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|v| go_quote(v.as_str().unwrap_or("")))
        .collect();
    match modes {
        None => "[]storage.VolumeLifecycleMode(nil)".to_string(),
        Some(_) => format!("[]storage.VolumeLifecycleMode{{{}}}", quoted.join(", ")),
    }
}

fn validate_spec(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (pointer, path) in [
        ("/spec/attachRequired", "spec.attachedRequired"),
        ("/spec/podInfoOnMount", "spec.podInfoOnMount"),
        ("/spec/storageCapacity", "spec.storageCapacity"),
    ] {
        if present(obj, pointer).is_none() {
            errors.push(FieldError::required(path, ""));
        }
    }
    if let Some(policy) = present(obj, "/spec/fsGroupPolicy") {
        let policy = policy.as_str().unwrap_or("");
        if !FS_GROUP_POLICIES.contains(&policy) {
            errors.push(FieldError::not_supported(
                "spec.fsGroupPolicy",
                policy,
                &FS_GROUP_POLICIES,
            ));
        }
    }
    let mut audiences = Vec::new();
    for (i, request) in items(obj, "/spec/tokenRequests").iter().enumerate() {
        let audience = request
            .get("audience")
            .and_then(Value::as_str)
            .unwrap_or("");
        if audiences.contains(&audience) {
            errors.push(FieldError::duplicate(
                &format!("spec.tokenRequests[{i}].audience"),
                audience,
            ));
            continue;
        }
        audiences.push(audience);
        let Some(seconds) = request.get("expirationSeconds").and_then(Value::as_i64) else {
            continue;
        };
        let path = format!("spec.tokenRequests[{i}].expirationSeconds");
        if seconds < 600 {
            errors.push(FieldError::invalid(
                &path,
                seconds,
                "may not specify a duration less than 10 minutes",
            ));
        }
        if seconds > 1 << 32 {
            errors.push(FieldError::invalid(
                &path,
                seconds,
                "may not specify a duration larger than 2^32 seconds",
            ));
        }
    }
    for mode in items(obj, "/spec/volumeLifecycleModes") {
        let mode = mode.as_str().unwrap_or("");
        if !MODES.contains(&mode) {
            errors.push(FieldError::not_supported(
                "spec.volumeLifecycleModes",
                mode,
                &MODES,
            ));
        }
    }
    if present(obj, "/spec/seLinuxMount").is_none() {
        errors.push(FieldError::required("spec.seLinuxMount", ""));
    }
    if let Some(period) = present(obj, "/spec/nodeAllocatableUpdatePeriodSeconds")
        .and_then(Value::as_i64)
        .filter(|p| *p < 10)
    {
        errors.push(FieldError::invalid(
            "spec.nodeAllocatableUpdatePeriodSeconds",
            period,
            "must be greater than or equal to 10 seconds",
        ));
    }
    errors
}

impl Strategy for CsiDrivers {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn set_defaults(&self, obj: &mut Value) {
        let spec = object_entry(as_map(obj), "spec");
        default_value(spec, "attachRequired", json!(true));
        default_value(spec, "podInfoOnMount", json!(false));
        default_value(spec, "storageCapacity", json!(false));
        default_value(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
        if spec
            .get("volumeLifecycleModes")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            spec.insert("volumeLifecycleModes".into(), json!(["Persistent"]));
        }
        default_value(spec, "requiresRepublish", json!(false));
        default_value(spec, "seLinuxMount", json!(false));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_spec(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = validate_spec(new);
        errors.extend(immutable_at(
            new,
            old,
            "/spec/attachRequired",
            "spec.attachedRequired",
        ));
        let (n, o) = (
            present(new, "/spec/volumeLifecycleModes"),
            present(old, "/spec/volumeLifecycleModes"),
        );
        if n != o {
            errors.push(FieldError::invalid_printed(
                "spec.volumeLifecycleModes",
                modes_go(n),
                "field is immutable",
            ));
        }
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let modes: Vec<&str> = items(obj, "/spec/volumeLifecycleModes")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let modes = if modes.is_empty() {
            "<none>".to_string()
        } else {
            modes.join(",")
        };
        let tokens = match present(obj, "/spec/tokenRequests") {
            None => "<unset>".to_string(),
            Some(_) => items(obj, "/spec/tokenRequests")
                .iter()
                .map(|t| t.get("audience").and_then(Value::as_str).unwrap_or(""))
                .collect::<Vec<_>>()
                .join(","),
        };
        vec![
            Value::from(meta_str(obj, "name")),
            bool_or(obj, "/spec/attachRequired", true),
            bool_or(obj, "/spec/podInfoOnMount", false),
            bool_or(obj, "/spec/storageCapacity", false),
            Value::from(tokens),
            bool_or(obj, "/spec/requiresRepublish", false),
            Value::from(modes),
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
        let mut d = json!({"metadata": {"name": "csi.example.com"}});
        CsiDrivers.set_defaults(&mut d);
        assert_eq!(
            d,
            json!({"metadata": {"name": "csi.example.com"}, "spec": {
                "attachRequired": true, "podInfoOnMount": false, "storageCapacity": false,
                "fsGroupPolicy": "ReadWriteOnceWithFSType",
                "volumeLifecycleModes": ["Persistent"], "requiresRepublish": false,
                "seLinuxMount": false}})
        );
        let mut set = json!({"spec": {"attachRequired": false, "volumeLifecycleModes": ["Ephemeral"],
            "fsGroupPolicy": "File"}});
        CsiDrivers.set_defaults(&mut set);
        assert_eq!(set["spec"]["attachRequired"], json!(false));
        assert_eq!(set["spec"]["volumeLifecycleModes"], json!(["Ephemeral"]));
        assert_eq!(set["spec"]["fsGroupPolicy"], json!("File"));
    }

    #[test]
    fn validation_and_immutable_fields() {
        let bad = json!({"spec": {"fsGroupPolicy": "Any", "volumeLifecycleModes": ["Forever"],
            "tokenRequests": [{"audience": "a", "expirationSeconds": 60}, {"audience": "a"}]}});
        assert_eq!(
            messages(&CsiDrivers.validate(&bad)),
            vec![
                "spec.attachedRequired: Required value",
                "spec.podInfoOnMount: Required value",
                "spec.storageCapacity: Required value",
                "spec.fsGroupPolicy: Unsupported value: \"Any\": supported values: \"File\", \"None\", \"ReadWriteOnceWithFSType\"",
                "spec.tokenRequests[0].expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes",
                "spec.tokenRequests[1].audience: Duplicate value: \"a\"",
                "spec.volumeLifecycleModes: Unsupported value: \"Forever\": supported values: \"Persistent\", \"Ephemeral\"",
                "spec.seLinuxMount: Required value",
            ]
        );
        let mut old = json!({"spec": {}});
        CsiDrivers.set_defaults(&mut old);
        let mut new = json!({"spec": {"attachRequired": false,
            "volumeLifecycleModes": ["Persistent", "Ephemeral"], "podInfoOnMount": true}});
        CsiDrivers.set_defaults(&mut new);
        assert_eq!(
            messages(&CsiDrivers.validate_update(&new, &old)),
            vec![
                "spec.attachedRequired: Invalid value: false: field is immutable",
                "spec.volumeLifecycleModes: Invalid value: []storage.VolumeLifecycleMode{\"Persistent\", \"Ephemeral\"}: field is immutable",
            ]
        );
    }

    #[test]
    fn printed_as_print_csi_driver() {
        let d = json!({"metadata": {"name": "csi.example.com", "creationTimestamp": "2026-05-28T20:16:40Z"},
            "spec": {"attachRequired": false, "tokenRequests": [{"audience": "a"}, {"audience": "b"}],
                "volumeLifecycleModes": ["Persistent", "Ephemeral"]}});
        assert_eq!(
            CsiDrivers.cells(&d, Time(1_780_000_000)),
            vec![
                json!("csi.example.com"),
                json!(false),
                json!(false),
                json!(false),
                json!("a,b"),
                json!(false),
                json!("Persistent,Ephemeral"),
                json!("10m")
            ]
        );
        let bare = json!({"metadata": {"name": "x"}});
        let cells = CsiDrivers.cells(&bare, Time(1_780_000_000));
        assert_eq!(
            (&cells[1], &cells[4], &cells[6]),
            (&json!(true), &json!("<unset>"), &json!("<none>"))
        );
    }
}
