//! core/v1 Nodes (cluster-scoped): NAME, STATUS, ROLES, AGE, VERSION and, wide,
//! INTERNAL-IP, EXTERNAL-IP, OS-IMAGE, KERNEL-VERSION, CONTAINER-RUNTIME. A node may be
//! created with its status (kube's strategy allows every field on create); allocatable
//! defaults to capacity.

use std::collections::BTreeSet;

use serde_json::Value;

use super::rules::required_one_of;
use super::text;
use super::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy};
use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::storage::FieldError;

/// The Node strategy.
pub struct Nodes;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["no"],
    namespaced: false,
    status: true,
    ..ResourceInfo::new("", "v1", "Node", "nodes", "node")
};

const ADDRESSES: &str = "List of addresses reachable to the node. Queried from cloud provider, \
    if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses \
    Note: This field is declared as mergeable, but the merge key is not sufficiently unique, \
    which can cause data corruption when it is merged. Callers should instead use a \
    full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume \
    that addresses can change during the lifetime of a Node. However, there are some \
    exceptions where this may not be possible, such as Pods that inherit a Node's address in \
    its own status or consumers of the downward API (status.hostIP).";

static COLUMNS: [Column; 10] = [
    NAME_COLUMN,
    Column::string("Status", 0, "The status of the node"),
    Column::string("Roles", 0, "The roles of the node"),
    AGE_COLUMN,
    Column::string("Version", 0, "Kubelet Version reported by the node."),
    Column::string("Internal-IP", 1, ADDRESSES),
    Column::string("External-IP", 1, ADDRESSES),
    Column::string(
        "OS-Image",
        1,
        "OS Image reported by the node from /etc/os-release (e.g. Debian \
            GNU/Linux 7 (wheezy)).",
    ),
    Column::string(
        "Kernel-Version",
        1,
        "Kernel Version reported by the node from 'uname -r' (e.g. \
            3.16.0-0.bpo.4-amd64).",
    ),
    Column::string(
        "Container-Runtime",
        1,
        "ContainerRuntime Version reported by the node through runtime remote \
            API (e.g. containerd://1.4.2).",
    ),
];

const LABEL_NODE_ROLE_PREFIX: &str = "node-role.kubernetes.io/";
const NODE_LABEL_ROLE: &str = "kubernetes.io/role";
const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// `findNodeRoles`: `node-role.kubernetes.io/<role>` labels and the `kubernetes.io/role`
/// label's value, sorted (kube's set is unordered; sorted is one of its orders).
pub fn roles(obj: &Value) -> Vec<String> {
    let mut roles = BTreeSet::new();
    let labels = obj.at("/metadata/labels").and_then(Value::as_object);
    for (k, v) in labels.into_iter().flatten() {
        if let Some(role) = k.strip_prefix(LABEL_NODE_ROLE_PREFIX) {
            if !role.is_empty() {
                roles.insert(role.to_string());
            }
        } else if k == NODE_LABEL_ROLE {
            let v = v.as_str().unwrap_or("");
            if !v.is_empty() {
                roles.insert(v.to_string());
            }
        }
    }
    roles.into_iter().collect()
}

fn address(obj: &Value, kind: &str) -> String {
    let addresses = obj.at("/status/addresses").and_then(Value::as_array);
    addresses
        .into_iter()
        .flatten()
        .find(|a| a.get("type").and_then(Value::as_str) == Some(kind))
        .and_then(|a| a.get("address").and_then(Value::as_str))
        .unwrap_or("<none>")
        .to_string()
}

fn or_unknown(s: &str) -> &str {
    if s.is_empty() { "<unknown>" } else { s }
}

/// `SetDefaults_NodeStatus`: allocatable defaults to capacity.
fn default_allocatable(obj: &mut Value) {
    let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    if status.get("allocatable").is_none_or(Value::is_null)
        && let Some(capacity) = status.get("capacity").cloned()
    {
        status.insert("allocatable".into(), capacity);
    }
}

impl Strategy for Nodes {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn set_defaults(&self, obj: &mut Value) {
        default_allocatable(obj);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let taints = obj.at("/spec/taints").and_then(Value::as_array);
        for (i, t) in taints.into_iter().flatten().enumerate() {
            let key = t.get("key").and_then(Value::as_str).unwrap_or("");
            if key.is_empty() {
                errors.push(FieldError::required(&format!("spec.taints[{i}].key"), ""));
            }
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
            errors.extend(required_one_of(
                &format!("spec.taints[{i}].effect"),
                effect,
                &TAINT_EFFECTS,
            ));
        }
        errors
    }

    /// `ValidateNodeUpdate`, what `nodeStatusStrategy` checks: the node as any update
    /// checks it, each status address listed once.
    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = self.validate_update(new, old);
        let addresses = super::status::items(new, "/status/addresses");
        for (i, address) in addresses.iter().enumerate() {
            if addresses[..i].contains(address) {
                // Go's JSON of a `NodeAddress`: its fields in their declared order.
                let field = |k: &str| Value::from(text(address, &format!("/{k}"))).to_string();
                let printed = format!(
                    "{{\"type\":{},\"address\":{}}}",
                    field("type"),
                    field("address")
                );
                let at = format!("status.addresses[{i}]");
                errors.push(FieldError {
                    printed: Some(printed),
                    ..FieldError::duplicate(&at, address.clone())
                });
            }
        }
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let conditions = obj.at("/status/conditions").and_then(Value::as_array);
        let ready = conditions
            .into_iter()
            .flatten()
            .rfind(|c| c.get("type").and_then(Value::as_str) == Some("Ready"));
        let mut status = vec![match ready {
            Some(c) if c.get("status").and_then(Value::as_str) == Some("True") => "Ready",
            Some(_) => "NotReady",
            None => "Unknown",
        }];
        if obj.at("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
            status.push("SchedulingDisabled");
        }
        let roles = roles(obj).join(",");
        let info = |field: &str| or_unknown(text(obj, &format!("/status/nodeInfo/{field}")));
        vec![
            Value::from(super::meta_str(obj, "name")),
            Value::from(status.join(",")),
            Value::from(if roles.is_empty() {
                "<none>".into()
            } else {
                roles
            }),
            super::age(obj, now),
            Value::from(text(obj, "/status/nodeInfo/kubeletVersion")),
            Value::from(address(obj, "InternalIP")),
            Value::from(address(obj, "ExternalIP")),
            Value::from(info("osImage")),
            Value::from(info("kernelVersion")),
            Value::from(info("containerRuntimeVersion")),
        ]
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["spec.unschedulable"]
    }

    fn field(&self, obj: &Value, field: &str) -> String {
        match field {
            "spec.unschedulable" => {
                let u = obj.at("/spec/unschedulable").and_then(Value::as_bool);
                u.unwrap_or(false).to_string()
            }
            _ => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::json;

    fn node(ready: &str, unschedulable: bool) -> Value {
        json!({
            "metadata": {"name": "worker-1", "creationTimestamp": "2026-05-18T20:26:40Z",
                "labels": {"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/": "",
                    "kubernetes.io/role": "master", "kubernetes.io/hostname": "worker-1"}},
            "spec": {"unschedulable": unschedulable},
            "status": {
                "conditions": [{"type": "MemoryPressure", "status": "False"},
                    {"type": "Ready", "status": ready}],
                "addresses": [{"type": "Hostname", "address": "worker-1"},
                    {"type": "InternalIP", "address": "10.0.0.4"}],
                "nodeInfo": {"kubeletVersion": "v1.34.1", "osImage": "Debian GNU/Linux 12 (bookworm)",
                    "kernelVersion": "6.1.0-18-amd64", "containerRuntimeVersion": ""}
            }
        })
    }

    #[test]
    fn cells_show_status_roles_and_node_info_as_print_node_does() {
        let now = Time(1_780_000_000);
        assert_eq!(
            Nodes.cells(&node("False", false), now),
            vec![
                json!("worker-1"),
                json!("NotReady"),
                json!("control-plane,master"),
                json!("10d"),
                json!("v1.34.1"),
                json!("10.0.0.4"),
                json!("<none>"),
                json!("Debian GNU/Linux 12 (bookworm)"),
                json!("6.1.0-18-amd64"),
                json!("<unknown>"),
            ]
        );
        assert_eq!(
            Nodes.cells(&node("True", true), now)[1],
            json!("Ready,SchedulingDisabled")
        );
        let bare = json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}});
        let cells = Nodes.cells(&bare, now);
        assert_eq!(cells[1], json!("Unknown,SchedulingDisabled"));
        assert_eq!(cells[2], json!("<none>"));
        assert_eq!(cells[3], json!("<unknown>"));
        assert_eq!(Nodes.field(&bare, "spec.unschedulable"), "true");
        assert_eq!(Nodes.field(&json!({}), "spec.unschedulable"), "false");
    }

    #[test]
    fn allocatable_defaults_to_capacity_and_taints_are_validated() {
        let mut n = json!({"status": {"capacity": {"cpu": "4"}}});
        Nodes.prepare_for_create(&mut n);
        assert_eq!(n["status"]["allocatable"], json!({"cpu": "4"}));
        let bad = json!({"spec": {"taints": [{"key": "k", "effect": "Sometimes"}, {"effect": "NoSchedule"}]}});
        let errors = messages(&Nodes.validate(&bad));
        assert_eq!(
            errors,
            vec![
                "spec.taints[0].effect: Unsupported value: \"Sometimes\": supported values: \
                 \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
                "spec.taints[1].key: Required value",
            ]
        );
    }

    #[test]
    fn a_status_update_lists_each_address_once() {
        let node = json!({"metadata": {"name": "n"}, "status": {"addresses": [
            {"type": "Hostname", "address": "n"}, {"type": "Hostname", "address": "n"}]}});
        assert_eq!(
            crate::registry::rules::messages(&Nodes.validate_status_update(&node, &node)),
            ["status.addresses[1]: Duplicate value: {\"type\":\"Hostname\",\"address\":\"n\"}"]
        );
    }
}
