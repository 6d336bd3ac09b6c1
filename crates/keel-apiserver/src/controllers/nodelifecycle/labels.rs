//! The beta OS and architecture labels kept in step with the GA ones
//! (`reconcileNodeLabels`): `beta.kubernetes.io/os` and `beta.kubernetes.io/arch` are added
//! from, or set back to, `kubernetes.io/os` and `kubernetes.io/arch`.

use crate::json_pointer::At;
use serde_json::{Map, Value};

/// (GA label, beta label).
const PAIRS: [(&str, &str); 2] = [
    ("kubernetes.io/os", "beta.kubernetes.io/os"),
    ("kubernetes.io/arch", "beta.kubernetes.io/arch"),
];

/// The beta labels to set on the node, with their values (empty: nothing to do).
pub fn to_reconcile(node: &Value) -> Map<String, Value> {
    let mut set = Map::new();
    let Some(labels) = node.at("/metadata/labels").and_then(Value::as_object) else {
        return set;
    };
    for (ga, beta) in PAIRS {
        if let Some(value) = labels.get(ga)
            && labels.get(beta) != Some(value)
        {
            set.insert(beta.to_string(), value.clone());
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn beta_labels_follow_the_ga_ones() {
        let node = json!({"metadata": {"labels": {
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "arm64",
            "beta.kubernetes.io/arch": "amd64",
        }}});
        let set = to_reconcile(&node);
        assert_eq!(
            Value::Object(set),
            json!({"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "arm64"})
        );
        assert!(
            to_reconcile(&json!({"metadata": {"labels": {"beta.kubernetes.io/os": "x"}}}))
                .is_empty()
        );
    }
}
