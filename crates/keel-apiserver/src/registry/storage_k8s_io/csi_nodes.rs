//! storage.k8s.io/v1 CSINodes, cluster-scoped and named after their node: no defaults;
//! validation from `pkg/apis/storage/validation/validation.go` (`ValidateCSINode`: each
//! driver's name, node ID and allocatable count, no driver twice, topology keys; on update a
//! driver already listed may change only its `allocatable`, as 1.34's default
//! `MutableCSINodeAllocatableCount` allows), printed as `printCSINode` (NAME DRIVERS AGE).

use serde_json::Value;

use super::fields::{items, present};
use crate::apimachinery::time::Time;
use crate::apimachinery::validation::{is_dns1123_subdomain, is_qualified_name};
use crate::registry::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, name_age_row};
use crate::storage::FieldError;

/// The CSINode strategy.
pub struct CsiNodes;

static INFO: ResourceInfo = ResourceInfo {
    returns_deleted_object: true,
    namespaced: false,
    ..ResourceInfo::new("storage.k8s.io", "v1", "CSINode", "csinodes", "csinode")
};

static COLUMNS: [Column; 3] = [
    NAME_COLUMN,
    Column {
        name: "Drivers",
        kind: "integer",
        format: "",
        description: "Drivers indicates the number of CSI drivers registered on the node",
        priority: 0,
    },
    AGE_COLUMN,
];

/// `csiNodeIDMaxLength`.
const NODE_ID_MAX: usize = 192;
/// `csiNodeIDLongerMaxLength` (allowed once a stored node ID is longer than 192).
const NODE_ID_LONGER_MAX: usize = 256;

/// `ValidateCSIDriverName`: required, at most 63 characters, a DNS subdomain once
/// lower-cased (also a VolumeAttachment's attacher).
pub fn validate_csi_driver_name(name: &str, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if name.is_empty() {
        errors.push(FieldError::required(path, ""));
    }
    if name.len() > 63 {
        errors.push(FieldError::too_long(path, 63));
    }
    for problem in is_dns1123_subdomain(&name.to_lowercase()) {
        errors.push(FieldError::invalid(path, name, &problem));
    }
    errors
}

fn validate_drivers(obj: &Value, long_ids: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for (i, driver) in items(obj, "/spec/drivers").iter().enumerate() {
        let path = format!("spec.drivers[{i}]");
        let name = driver.get("name").and_then(Value::as_str).unwrap_or("");
        errors.extend(validate_csi_driver_name(name, &format!("{path}.name")));
        let id = driver.get("nodeID").and_then(Value::as_str).unwrap_or("");
        let id_path = format!("{path}.nodeID");
        if id.is_empty() {
            errors.push(FieldError::required(&id_path, ""));
        }
        let max = if long_ids {
            NODE_ID_LONGER_MAX
        } else {
            NODE_ID_MAX
        };
        if id.len() > max {
            errors.push(FieldError::invalid(
                &id_path,
                id,
                &format!("must be {max} characters or less"),
            ));
        }
        if let Some(count) = present(driver, "/allocatable/count").and_then(Value::as_i64)
            && count < 0
        {
            errors.push(FieldError::invalid(
                &format!("{path}.allocatable.count"),
                count,
                "must be greater than or equal to 0",
            ));
        }
        if names.contains(&name) {
            errors.push(FieldError::duplicate(&format!("{path}.name"), name));
        }
        names.push(name);
        let mut keys: Vec<&str> = Vec::new();
        for key in items(driver, "/topologyKeys") {
            let key = key.as_str().unwrap_or("");
            if key.is_empty() {
                errors.push(FieldError::required(&path, ""));
            }
            if keys.contains(&key) {
                errors.push(FieldError::duplicate(&path, key));
            }
            keys.push(key);
            for problem in is_qualified_name(key) {
                errors.push(FieldError::invalid(&path, key, &problem));
            }
        }
    }
    errors
}

/// Whether a stored node ID is longer than the usual limit (then longer ones stay allowed).
fn has_long_node_id(obj: &Value) -> bool {
    items(obj, "/spec/drivers").iter().any(|d| {
        d.get("nodeID")
            .and_then(Value::as_str)
            .is_some_and(|id| id.len() > NODE_ID_MAX)
    })
}

/// A driver without its `allocatable`, as the update check compares drivers.
fn without_allocatable(driver: &Value) -> Value {
    let mut d = driver.clone();
    if let Some(m) = d.as_object_mut() {
        m.remove("allocatable");
    }
    d
}

impl Strategy for CsiNodes {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_drivers(obj, false)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = validate_drivers(new, has_long_node_id(old));
        for old_driver in items(old, "/spec/drivers") {
            for new_driver in items(new, "/spec/drivers") {
                if old_driver.get("name") == new_driver.get("name")
                    && without_allocatable(old_driver) != without_allocatable(new_driver)
                {
                    errors.push(FieldError::invalid(
                        "spec.drivers",
                        without_allocatable(new_driver),
                        "field is immutable",
                    ));
                }
            }
        }
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        name_age_row(obj, now, [Value::from(items(obj, "/spec/drivers").len())])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::json;

    #[test]
    fn drivers_are_validated_and_only_allocatable_may_change() {
        let node = json!({"metadata": {"name": "node-1"}, "spec": {"drivers": [
            {"name": "csi.example.com", "nodeID": "n1", "topologyKeys": ["topology.example.com/zone"],
             "allocatable": {"count": 10}}]}});
        assert!(CsiNodes.validate(&node).is_empty());
        let bad = json!({"spec": {"drivers": [
            {"name": "csi.example.com", "nodeID": "", "allocatable": {"count": -1}},
            {"name": "csi.example.com", "nodeID": "x".repeat(193)}]}});
        let errors = messages(&CsiNodes.validate(&bad));
        assert_eq!(errors[0], "spec.drivers[0].nodeID: Required value");
        assert_eq!(
            errors[1],
            "spec.drivers[0].allocatable.count: Invalid value: -1: must be greater than or equal to 0"
        );
        assert!(errors[2].ends_with(": must be 192 characters or less"));
        assert_eq!(
            errors[3],
            "spec.drivers[1].name: Duplicate value: \"csi.example.com\""
        );
        let mut more = node.clone();
        more["spec"]["drivers"][0]["allocatable"]["count"] = json!(20);
        assert!(CsiNodes.validate_update(&more, &node).is_empty());
        let mut moved = node.clone();
        moved["spec"]["drivers"][0]["nodeID"] = json!("n2");
        assert_eq!(
            messages(&CsiNodes.validate_update(&moved, &node)),
            vec![
                "spec.drivers: Invalid value: {\"name\":\"csi.example.com\",\"nodeID\":\"n2\",\"topologyKeys\":[\"topology.example.com/zone\"]}: field is immutable"
            ]
        );
        assert_eq!(CsiNodes.cells(&node, Time(1_780_000_000))[1], json!(1));
    }
}
