use super::*;
use crate::registry::rules::messages;
use serde_json::json;

#[test]
fn counts_may_not_be_negative_nor_above_the_replicas() {
    let rs = json!({"status": {"replicas": 2, "fullyLabeledReplicas": -1, "readyReplicas": 3,
        "availableReplicas": 3, "observedGeneration": 1}});
    assert_eq!(
        messages(&replica_set_status(&rs)),
        [
            "status.fullyLabeledReplicas: Invalid value: -1: must be greater than or equal to 0",
            "status.readyReplicas: Invalid value: 3: cannot be greater than status.replicas",
            "status.availableReplicas: Invalid value: 3: cannot be greater than status.replicas",
        ]
    );
    let rs = json!({"status": {"replicas": 3, "readyReplicas": 1, "availableReplicas": 2}});
    assert_eq!(
        messages(&replica_set_status(&rs)),
        ["status.availableReplicas: Invalid value: 2: cannot be greater than readyReplicas"]
    );
}

#[test]
fn a_collision_count_may_not_go_down_nor_away() {
    let old = json!({"status": {"collisionCount": 2}});
    let lower = json!({"status": {"collisionCount": 1}});
    let gone = json!({"status": {}});
    assert_eq!(
        messages(
            &collision_count_kept(&lower, &old)
                .into_iter()
                .collect::<Vec<_>>()
        ),
        ["status.collisionCount: Invalid value: 1: cannot be decremented"]
    );
    assert_eq!(
        collision_count_kept(&gone, &old).map(|e| e.to_string()),
        Some("status.collisionCount: Invalid value: 0: cannot be decremented".into())
    );
    assert!(collision_count_kept(&old, &gone).is_none());
}

#[test]
fn load_balancer_points_have_ips_and_dns_hostnames() {
    let point = json!({"ip": "1.2.3.256", "hostname": "10.0.0.1"});
    assert_eq!(
        messages(&ingress_point(
            &point,
            "status.loadBalancer.ingress[0]",
            &[]
        )),
        [
            "status.loadBalancer.ingress[0].ip: Invalid value: \"1.2.3.256\": must be a valid IP \
             address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            "status.loadBalancer.ingress[0].hostname: Invalid value: \"10.0.0.1\": must be a DNS \
             name, not an IP address",
        ]
    );
    // An IP the stored object has may stay, and IPv4 octets may have leading zeros.
    assert!(ingress_point(&json!({"ip": "bad"}), "x", &["bad"]).is_empty());
    assert!(ingress_point(&json!({"ip": "010.1.1.1"}), "x", &[]).is_empty());
}

#[test]
fn conditions_are_checked_as_metav1_validate_conditions_checks_them() {
    let list = [
        json!({"type": "Ready", "status": "True", "reason": "Fine",
            "lastTransitionTime": "2024-01-01T00:00:00Z"}),
        json!({"type": "Ready", "status": "Maybe", "reason": "not ok", "observedGeneration": -1}),
    ];
    assert_eq!(
        messages(&conditions(&list, "status.conditions")),
        [
            "status.conditions[1].type: Duplicate value: \"Ready\"",
            "status.conditions[1].status: Unsupported value: \"Maybe\": supported values: \
             \"False\", \"True\", \"Unknown\"",
            "status.conditions[1].observedGeneration: Invalid value: -1: must be greater than or \
             equal to zero",
            "status.conditions[1].lastTransitionTime: Required value",
            "status.conditions[1].reason: Invalid value: \"not ok\": a condition reason must start \
             with alphabetic character, optionally followed by a string of alphanumeric \
             characters or '_,:', and must end with an alphanumeric character or '_' (e.g. \
             'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or \
             'ReasonA:ReasonB', regex used for validation is \
             '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')",
        ]
    );
    assert!(is_reason("A") && is_reason("Reason_A:b,c_") && !is_reason("A:") && !is_reason("1a"));
}

#[test]
fn reset_meta_keeps_the_stored_metadata_but_the_rest() {
    let old = json!({"metadata": {"name": "a", "labels": {"a": "1"}, "generation": 2,
        "finalizers": ["f"]}});
    let mut new = json!({"metadata": {"name": "a", "labels": {"b": "2"}, "annotations": {"x": "y"},
        "generation": 7, "resourceVersion": "5"}});
    reset_meta(&mut new, &old);
    assert_eq!(
        new["metadata"],
        json!({"name": "a", "labels": {"a": "1"}, "generation": 2, "finalizers": ["f"],
            "resourceVersion": "5"})
    );
}
