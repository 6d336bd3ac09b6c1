//! The taints the node lifecycle controller owns, and how it sets and lifts them on a node
//! (kube's `taintutils` and `SwapNodeControllerTaint`): a taint matches another by key and
//! effect; one added gets `timeAdded`; the NoSchedule taints follow the node's conditions
//! (`doNoScheduleTaintingPass`).

use serde_json::{Value, json};

use crate::apimachinery::time::Time;
use crate::json_pointer::At;

/// `node.kubernetes.io/unreachable`: Ready is Unknown.
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// `node.kubernetes.io/not-ready`: Ready is False.
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
/// `node.kubernetes.io/unschedulable`: `spec.unschedulable`.
pub const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// The NoSchedule taint for each condition and status (`nodeConditionToTaintKeyStatusMap`).
const CONDITION_TAINTS: [(&str, &str, &str); 6] = [
    ("Ready", "False", NOT_READY),
    ("Ready", "Unknown", UNREACHABLE),
    (
        "MemoryPressure",
        "True",
        "node.kubernetes.io/memory-pressure",
    ),
    ("DiskPressure", "True", "node.kubernetes.io/disk-pressure"),
    (
        "NetworkUnavailable",
        "True",
        "node.kubernetes.io/network-unavailable",
    ),
    ("PIDPressure", "True", "node.kubernetes.io/pid-pressure"),
];

/// A taint's key and effect (`NoSchedule`, `NoExecute`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taint {
    /// The key.
    pub key: &'static str,
    /// The effect.
    pub effect: &'static str,
}

/// `node.kubernetes.io/unreachable:NoExecute`.
pub const UNREACHABLE_NO_EXECUTE: Taint = Taint {
    key: UNREACHABLE,
    effect: "NoExecute",
};
/// `node.kubernetes.io/not-ready:NoExecute`.
pub const NOT_READY_NO_EXECUTE: Taint = Taint {
    key: NOT_READY,
    effect: "NoExecute",
};

/// The node's condition of `kind` (`Ready`, ...).
pub fn condition<'a>(node: &'a Value, kind: &str) -> Option<&'a Value> {
    node.at("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// The node's taints.
pub fn taints(node: &Value) -> &[Value] {
    node.at("/spec/taints")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn matches(taint: &Value, wanted: Taint) -> bool {
    taint["key"] == wanted.key && taint["effect"] == wanted.effect
}

/// Whether the node has `taint` (by key and effect).
pub fn has(node: &Value, taint: Taint) -> bool {
    taints(node).iter().any(|t| matches(t, taint))
}

/// Adds the taints of `add` (with `timeAdded` now, replacing any of the same key and
/// effect) and removes those of `remove`; true if the node changed.
pub fn swap(node: &mut Value, add: &[Taint], remove: &[Taint], now: Time) -> bool {
    let before = taints(node).to_vec();
    let mut after: Vec<Value> = before
        .iter()
        .filter(|t| !remove.iter().any(|r| matches(t, *r)))
        .cloned()
        .collect();
    for taint in add {
        let new = json!({"key": taint.key, "effect": taint.effect, "timeAdded": now.rfc3339()});
        match after.iter_mut().find(|t| matches(t, *taint)) {
            Some(old) => *old = new,
            None => after.push(new),
        }
    }
    if after == before {
        return false;
    }
    let spec = node
        .as_object_mut()
        .map(|o| o.entry("spec").or_insert_with(|| json!({})));
    if let Some(spec) = spec.and_then(Value::as_object_mut) {
        if after.is_empty() {
            spec.remove("taints");
        } else {
            spec.insert("taints".into(), Value::Array(after));
        }
    }
    true
}

/// The NoSchedule taints the node's conditions and `spec.unschedulable` call for, and
/// those it has that they no longer call for: (to add, to remove).
pub fn no_schedule_diff(node: &Value) -> (Vec<Taint>, Vec<Taint>) {
    let mut wanted: Vec<Taint> = Vec::new();
    for c in node
        .at("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for (kind, status, key) in CONDITION_TAINTS {
            if c["type"] == kind && c["status"] == status {
                wanted.push(Taint {
                    key,
                    effect: "NoSchedule",
                });
            }
        }
    }
    if node.at("/spec/unschedulable") == Some(&Value::Bool(true)) {
        wanted.push(Taint {
            key: UNSCHEDULABLE,
            effect: "NoSchedule",
        });
    }
    let owned = CONDITION_TAINTS
        .iter()
        .map(|(_, _, key)| *key)
        .chain([UNSCHEDULABLE]);
    let mut have = Vec::new();
    for key in owned {
        let taint = Taint {
            key,
            effect: "NoSchedule",
        };
        if has(node, taint) && !have.contains(&taint) {
            have.push(taint);
        }
    }
    let add = wanted
        .iter()
        .filter(|t| !have.contains(t))
        .copied()
        .collect();
    let remove = have.into_iter().filter(|t| !wanted.contains(t)).collect();
    (add, remove)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_swap_adds_with_time_added_and_removes_by_key_and_effect() {
        let mut node = json!({"spec": {"taints": [
            {"key": NOT_READY, "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"},
            {"key": "dedicated", "effect": "NoSchedule", "value": "gpu"},
        ]}});
        assert!(swap(
            &mut node,
            &[UNREACHABLE_NO_EXECUTE],
            &[NOT_READY_NO_EXECUTE],
            Time(0)
        ));
        assert_eq!(
            node["spec"]["taints"],
            json!([
                {"key": "dedicated", "effect": "NoSchedule", "value": "gpu"},
                {"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": "1970-01-01T00:00:00Z"},
            ])
        );
        assert!(!swap(&mut node, &[], &[NOT_READY_NO_EXECUTE], Time(5)));
        assert!(swap(&mut node, &[], &[UNREACHABLE_NO_EXECUTE], Time(5)));
        assert!(has(
            &node,
            Taint {
                key: "dedicated",
                effect: "NoSchedule"
            }
        ));
    }

    #[test]
    fn no_schedule_taints_follow_the_conditions() {
        let node = json!({
            "spec": {"unschedulable": true, "taints": [
                {"key": NOT_READY, "effect": "NoSchedule"},
                {"key": "dedicated", "effect": "NoSchedule"},
            ]},
            "status": {"conditions": [
                {"type": "Ready", "status": "Unknown"},
                {"type": "MemoryPressure", "status": "Unknown"},
                {"type": "DiskPressure", "status": "True"},
            ]},
        });
        let (add, remove) = no_schedule_diff(&node);
        let keys: Vec<&str> = add.iter().map(|t| t.key).collect();
        assert_eq!(
            keys,
            [
                UNREACHABLE,
                "node.kubernetes.io/disk-pressure",
                UNSCHEDULABLE
            ]
        );
        assert_eq!(
            remove,
            [Taint {
                key: NOT_READY,
                effect: "NoSchedule"
            }]
        );
    }
}
