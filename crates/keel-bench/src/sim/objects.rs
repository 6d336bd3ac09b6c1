//! The objects a simulated kubelet writes, as the kubelet writes them.
//!
//! A Node is registered with its whole status in the POST, as the kubelet's `initialNode`
//! does: the well-known labels (`kubernetes.io/hostname`, `kubernetes.io/os`, `.../arch`,
//! their `beta.` twins), `topology.kubernetes.io/region` and `zone`, `type: keel-sim` (the
//! label the simulator watches by, as kwok's `type: kwok`), capacity and allocatable, the four
//! kubelet conditions (MemoryPressure, DiskPressure, PIDPressure, Ready, in the kubelet's
//! order and with its reasons and messages), an InternalIP and Hostname address, the kubelet
//! endpoint and nodeInfo. Its Lease lives in `kube-node-lease` under the node's name, held by
//! the node, with an owner reference to the Node (the kubelet's `SetNodeOwnerFunc`).
//!
//! A status post is the kubelet's strategic merge patch of `nodes/<name>/status`: what
//! `CreateTwoWayMergePatch` makes of the node read just before and the node with fresh
//! heartbeats, i.e. `$setElementOrder/conditions` and, per condition, its `type`, the new
//! `lastHeartbeatTime` and whatever else differs (a condition another component changed, such
//! as Ready set to Unknown by the node lifecycle controller, is set back with a new
//! `lastTransitionTime`).
//!
//! A lease renewal is a PUT of the lease last written with `spec.renewTime` bumped. The lease
//! is kept as the bytes the server answered, and the bump rewrites the time inside them, so a
//! renewal costs no JSON parsing; anything unexpected falls back to parsing.

use bytes::Bytes;
use serde_json::{Map, Value, json};

/// The label every simulated node carries, as kwok's nodes carry `type: kwok`.
pub const SIM_LABEL: (&str, &str) = ("type", "keel-sim");

/// The label selector matching the simulated nodes.
pub const SIM_SELECTOR: &str = "type%3Dkeel-sim";

/// The namespace of node leases (`v1.NamespaceNodeLease`).
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// The kubelet version the nodes report.
const KUBELET_VERSION: &str = "v1.34.0";

/// The kubelet's port, reported in `daemonEndpoints`.
const KUBELET_PORT: u16 = 10250;

/// The kubelet's node conditions, in its order: type, status, reason, message.
const CONDITIONS: [(&str, &str, &str, &str); 4] = [
    (
        "MemoryPressure",
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    (
        "DiskPressure",
        "False",
        "KubeletHasNoDiskPressure",
        "kubelet has no disk pressure",
    ),
    (
        "PIDPressure",
        "False",
        "KubeletHasSufficientPID",
        "kubelet has sufficient PID available",
    ),
    (
        "Ready",
        "True",
        "KubeletReady",
        "kubelet is posting ready status",
    ),
];

/// How simulated nodes are named and placed.
#[derive(Debug, Clone)]
pub struct Fleet {
    /// Node `i` is named this prefix followed by `i`.
    pub prefix: String,
    /// Zones the nodes are spread over, node `i` in zone `i % zones`.
    pub zones: u32,
    /// `spec.leaseDurationSeconds` of the leases.
    pub lease_duration: u32,
}

impl Fleet {
    /// The name of node `i`.
    pub fn name(&self, i: u32) -> String {
        format!("{}{i}", self.prefix)
    }

    /// The number of the node named `name`, if it is one of the fleet's.
    pub fn index(&self, name: &str) -> Option<u32> {
        let digits = name.strip_prefix(&self.prefix)?;
        if digits.starts_with('0') && digits.len() > 1 {
            return None;
        }
        digits.parse().ok()
    }

    /// The collection path of the node leases.
    pub fn leases_path() -> String {
        format!("/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases")
    }

    /// Node `i` as the kubelet registers it, its heartbeats at `now` (a `metav1.Time`).
    pub fn node(&self, i: u32, now: &str) -> Value {
        let name = self.name(i);
        let zone = format!("keel-sim-zone-{}", i % self.zones);
        let conditions: Vec<Value> = CONDITIONS
            .iter()
            .map(|(kind, status, reason, message)| {
                json!({
                    "type": kind,
                    "status": status,
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                    "reason": reason,
                    "message": message,
                })
            })
            .collect();
        let ip = internal_ip(i);
        let resources = |cpu: &str, memory: &str, storage: &str| {
            json!({
                "cpu": cpu,
                "ephemeral-storage": storage,
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
                "memory": memory,
                "pods": "110",
            })
        };
        let (label, value) = SIM_LABEL;
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "beta.kubernetes.io/arch": "amd64",
                    "beta.kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "topology.kubernetes.io/region": "keel-sim",
                    "topology.kubernetes.io/zone": zone,
                    label: value,
                },
                "annotations": {
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                },
            },
            "spec": {},
            "status": {
                "capacity": resources("16", "65843296Ki", "101430960Ki"),
                "allocatable": resources("16", "65740896Ki", "93478772582"),
                "conditions": conditions,
                "addresses": [
                    {"type": "InternalIP", "address": ip},
                    {"type": "Hostname", "address": name},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": KUBELET_PORT}},
                "nodeInfo": {
                    "machineID": machine_id(i, 0x6d),
                    "systemUUID": as_uuid(&machine_id(i, 0x73)),
                    "bootID": as_uuid(&machine_id(i, 0x62)),
                    "kernelVersion": "6.8.0-keel-sim",
                    "osImage": "keel sim nodes",
                    "containerRuntimeVersion": "keel-sim://1.0.0",
                    "kubeletVersion": KUBELET_VERSION,
                    "kubeProxyVersion": "",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
            },
        })
    }

    /// The lease of node `name` (UID `uid`) as the kubelet creates it, renewed at
    /// `renew_time` (a MicroTime).
    pub fn lease(&self, name: &str, uid: &str, renew_time: &str) -> Value {
        json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": name,
                "namespace": LEASE_NAMESPACE,
                "ownerReferences": [owner_reference(name, uid)],
            },
            "spec": {
                "holderIdentity": name,
                "leaseDurationSeconds": self.lease_duration,
                "renewTime": renew_time,
            },
        })
    }
}

/// The owner reference of a node lease to its Node.
fn owner_reference(name: &str, uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid})
}

/// Node `i`'s InternalIP: the `i`-th address of 10.0.0.0/8 after 10.0.0.1.
fn internal_ip(i: u32) -> String {
    let n = (i + 2) & 0x00ff_ffff;
    format!("10.{}.{}.{}", n >> 16, (n >> 8) & 0xff, n & 0xff)
}

/// A stable 32-digit hex identifier of node `i` (machineID, systemUUID, bootID by `kind`).
fn machine_id(i: u32, kind: u8) -> String {
    let mut x = (u64::from(i) << 8 | u64::from(kind)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut id = String::with_capacity(32);
    for _ in 0..2 {
        x ^= x >> 31;
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        id.push_str(&format!("{x:016x}"));
    }
    id
}

/// 32 hex digits in the 8-4-4-4-12 form of a UUID (systemUUID and bootID are read so).
fn as_uuid(hex: &str) -> String {
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The kubelet's status patch for a node whose current state is `current` (the node read
/// just before), with heartbeats at `now` (a `metav1.Time`). See the module comment.
pub fn status_patch(current: &Value, now: &str) -> Value {
    let empty = Vec::new();
    let existing = current
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let find = |kind: &str| {
        existing
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
    };
    let mut order: Vec<Value> = existing
        .iter()
        .filter_map(|c| c.get("type").cloned())
        .map(|kind| json!({ "type": kind }))
        .collect();
    let mut conditions = Vec::with_capacity(CONDITIONS.len());
    for (kind, status, reason, message) in CONDITIONS {
        let old = find(kind);
        let field = |name: &str| old.and_then(|c| c.get(name)).and_then(Value::as_str);
        let mut change = Map::new();
        change.insert("lastHeartbeatTime".into(), now.into());
        if field("status") != Some(status) {
            change.insert("status".into(), status.into());
            change.insert("lastTransitionTime".into(), now.into());
        }
        if field("reason") != Some(reason) {
            change.insert("reason".into(), reason.into());
        }
        if field("message") != Some(message) {
            change.insert("message".into(), message.into());
        }
        change.insert("type".into(), kind.into());
        conditions.push(Value::Object(change));
        if old.is_none() {
            order.push(json!({ "type": kind }));
        }
    }
    json!({
        "status": {
            "$setElementOrder/conditions": order,
            "conditions": conditions,
        }
    })
}

/// The lease to PUT for a renewal: `last` (the lease as last written, as the server
/// answered it) with `spec.renewTime` set to `renew_time`, and the owner reference to node
/// `name` (UID `uid`) added if it has none (the kubelet's `SetNodeOwnerFunc`, run on every
/// renewal). None if `last` is not a JSON object.
pub fn renewed_lease(last: &[u8], name: &str, uid: &str, renew_time: &str) -> Option<Bytes> {
    const FIELD: &[u8] = b"\"renewTime\":\"";
    let owned = find(last, b"\"ownerReferences\":[{").is_some();
    if owned && let Some(at) = find(last, FIELD) {
        let start = at + FIELD.len();
        let len = last[start..].iter().position(|&b| b == b'"')?;
        let mut out = Vec::with_capacity(last.len() + renew_time.len());
        out.extend_from_slice(&last[..start]);
        out.extend_from_slice(renew_time.as_bytes());
        out.extend_from_slice(&last[start + len..]);
        return Some(Bytes::from(out));
    }
    let mut lease: Value = serde_json::from_slice(last).ok()?;
    let object = lease.as_object_mut()?;
    let meta = object
        .entry("metadata")
        .or_insert_with(|| json!({}))
        .as_object_mut()?;
    let has_owner = meta
        .get("ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| !refs.is_empty());
    if !has_owner {
        meta.insert(
            "ownerReferences".into(),
            json!([owner_reference(name, uid)]),
        );
    }
    let spec = object
        .entry("spec")
        .or_insert_with(|| json!({}))
        .as_object_mut()?;
    spec.insert("renewTime".into(), renew_time.into());
    Some(Bytes::from(serde_json::to_vec(&lease).ok()?))
}

/// Where `needle` first occurs in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet() -> Fleet {
        Fleet {
            prefix: "sim-".into(),
            zones: 3,
            lease_duration: 40,
        }
    }

    #[test]
    fn names_and_numbers() {
        let f = fleet();
        assert_eq!(f.name(42), "sim-42");
        assert_eq!(f.index("sim-42"), Some(42));
        assert_eq!(f.index("sim-0"), Some(0));
        assert_eq!(f.index("sim-042"), None);
        assert_eq!(f.index("other-1"), None);
        assert_eq!(f.index("sim-x"), None);
        assert_eq!(internal_ip(0), "10.0.0.2");
        assert_eq!(internal_ip(300), "10.0.1.46");
        assert_ne!(machine_id(1, 0x6d), machine_id(2, 0x6d));
        assert_eq!(machine_id(1, 0x6d).len(), 32);
        let uuid = as_uuid(&machine_id(1, 0x62));
        assert_eq!(uuid.len(), 36);
        assert_eq!(
            uuid::Uuid::parse_str(&uuid).map(|u| u.to_string()),
            Ok(uuid)
        );
    }

    #[test]
    fn a_node_as_the_kubelet_registers_it() {
        let node = fleet().node(4, "2025-01-01T00:00:00Z");
        assert_eq!(node["metadata"]["name"], "sim-4");
        let labels = &node["metadata"]["labels"];
        assert_eq!(labels["kubernetes.io/hostname"], "sim-4");
        assert_eq!(labels["topology.kubernetes.io/zone"], "keel-sim-zone-1");
        assert_eq!(labels["type"], "keel-sim");
        let conditions = node["status"]["conditions"].as_array().unwrap();
        let kinds: Vec<_> = conditions.iter().map(|c| c["type"].clone()).collect();
        assert_eq!(
            kinds,
            ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
        );
        assert_eq!(conditions[3]["status"], "True");
        assert_eq!(conditions[3]["lastHeartbeatTime"], "2025-01-01T00:00:00Z");
        assert_eq!(node["status"]["capacity"]["pods"], "110");
        assert_eq!(node["status"]["addresses"][0]["address"], "10.0.0.6");
        assert_eq!(
            node["status"]["nodeInfo"]["kubeletVersion"],
            KUBELET_VERSION
        );
    }

    #[test]
    fn status_patches_carry_heartbeats_and_repairs() {
        let f = fleet();
        let node = f.node(1, "2025-01-01T00:00:00Z");
        let patch = status_patch(&node, "2025-01-01T00:05:00Z");
        let expected_order = json!([
            {"type": "MemoryPressure"}, {"type": "DiskPressure"},
            {"type": "PIDPressure"}, {"type": "Ready"},
        ]);
        assert_eq!(
            patch["status"]["$setElementOrder/conditions"],
            expected_order
        );
        assert_eq!(
            patch["status"]["conditions"][3],
            json!({"type": "Ready", "lastHeartbeatTime": "2025-01-01T00:05:00Z"})
        );

        // Ready set to Unknown by the lifecycle controller, NetworkUnavailable added by another.
        let mut node = node;
        node["status"]["conditions"][3]["status"] = "Unknown".into();
        node["status"]["conditions"][3]["reason"] = "NodeStatusUnknown".into();
        node["status"]["conditions"][3]["message"] = "Kubelet stopped posting node status.".into();
        let conditions = node["status"]["conditions"].as_array_mut().unwrap();
        conditions.insert(0, json!({"type": "NetworkUnavailable", "status": "False"}));
        let patch = status_patch(&node, "2025-01-01T00:06:00Z");
        assert_eq!(
            patch["status"]["$setElementOrder/conditions"][0],
            json!({"type": "NetworkUnavailable"})
        );
        assert_eq!(
            patch["status"]["conditions"][3],
            json!({
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": "2025-01-01T00:06:00Z",
                "lastTransitionTime": "2025-01-01T00:06:00Z",
            })
        );

        // A node without conditions gets them all, in the kubelet's order.
        let patch = status_patch(&json!({"status": {}}), "2025-01-01T00:07:00Z");
        assert_eq!(
            patch["status"]["$setElementOrder/conditions"],
            expected_order
        );
        assert_eq!(patch["status"]["conditions"][0]["status"], "False");
    }

    #[test]
    fn renewals_bump_the_last_lease() {
        let f = fleet();
        let served = serde_json::to_vec(&json!({
            "kind": "Lease",
            "metadata": {
                "name": "sim-1", "namespace": LEASE_NAMESPACE, "resourceVersion": "17",
                "ownerReferences": [owner_reference("sim-1", "u-1")],
            },
            "spec": {"holderIdentity": "sim-1", "renewTime": "2025-01-01T00:00:00.000000Z"},
        }))
        .unwrap();
        let put = renewed_lease(&served, "sim-1", "u-1", "2025-01-01T00:00:10.123456Z").unwrap();
        let put: Value = serde_json::from_slice(&put).unwrap();
        assert_eq!(put["spec"]["renewTime"], "2025-01-01T00:00:10.123456Z");
        assert_eq!(put["metadata"]["resourceVersion"], "17");

        // Without an owner reference (created by another), the reference is added.
        let mut bare = f.lease("sim-2", "u-2", "2025-01-01T00:00:00.000000Z");
        bare["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("ownerReferences");
        let put = renewed_lease(
            &serde_json::to_vec(&bare).unwrap(),
            "sim-2",
            "u-2",
            "2025-01-01T00:00:10.000000Z",
        )
        .unwrap();
        let put: Value = serde_json::from_slice(&put).unwrap();
        assert_eq!(put["metadata"]["ownerReferences"][0]["uid"], "u-2");
        assert_eq!(put["spec"]["renewTime"], "2025-01-01T00:00:10.000000Z");
        assert_eq!(put["spec"]["leaseDurationSeconds"], 40);
        assert_eq!(renewed_lease(b"[1]", "a", "b", "c"), None);
    }
}
