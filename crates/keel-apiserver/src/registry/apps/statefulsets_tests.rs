//! StatefulSet defaults, validation and printing, against expectations written from
//! upstream's `SetDefaults_StatefulSet`, `ValidateStatefulSet(Update)` and `printStatefulSet`.

use super::*;
use crate::registry::rules::messages;

fn web() -> Value {
    json!({"metadata": {"name": "web"},
        "spec": {"serviceName": "nginx", "selector": {"matchLabels": {"app": "nginx"}},
                 "template": {"metadata": {"labels": {"app": "nginx"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}},
                 "volumeClaimTemplates": [{"metadata": {"name": "www"},
                     "spec": {"accessModes": ["ReadWriteOnce"],
                              "resources": {"requests": {"storage": "1Gi"}}}}]}})
}

#[test]
fn a_new_statefulset_gets_upstreams_defaults() {
    let mut s = web();
    StatefulSets.prepare_for_create(&mut s);
    let spec = &s["spec"];
    // SetDefaults_StatefulSet: OrderedReady, RollingUpdate with partition 0 (type was empty),
    // Retain/Retain, replicas 1, revisionHistoryLimit 10.
    assert_eq!(spec["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        spec["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    assert_eq!(
        spec["persistentVolumeClaimRetentionPolicy"],
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
    );
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["revisionHistoryLimit"], 10);
    // SetDefaults_PersistentVolumeClaim(Spec), and the conversion's apiVersion and kind.
    assert_eq!(
        spec["volumeClaimTemplates"],
        json!([{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "www"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                     "volumeMode": "Filesystem"},
            "status": {"phase": "Pending"}}])
    );
    assert_eq!(spec["template"]["spec"]["dnsPolicy"], "ClusterFirst");
    assert_eq!(s["status"], json!({"replicas": 0, "availableReplicas": 0}));
    assert!(StatefulSets.validate(&s).is_empty());
}

#[test]
fn an_explicit_strategy_type_gets_no_rolling_update_and_max_unavailable_is_dropped() {
    let mut s = web();
    s["spec"]["updateStrategy"] = json!({"type": "RollingUpdate"});
    StatefulSets.set_defaults(&mut s);
    assert_eq!(
        s["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate"})
    );
    let mut s = web();
    s["spec"]["updateStrategy"] =
        json!({"rollingUpdate": {"maxUnavailable": 2}, "type": "RollingUpdate"});
    StatefulSets.prepare_for_create(&mut s);
    assert_eq!(
        s["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
}

#[test]
fn statefulsets_are_validated_in_upstream_words() {
    let mut s = web();
    s["spec"]["podManagementPolicy"] = json!("Random");
    s["spec"]["updateStrategy"] = json!({"type": "OnDelete", "rollingUpdate": {"partition": 1}});
    s["spec"]["persistentVolumeClaimRetentionPolicy"] = json!({"whenDeleted": "Keep"});
    s["spec"]["serviceName"] = json!("Nginx");
    s["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    StatefulSets.set_defaults(&mut s);
    let errors = messages(&StatefulSets.validate(&s));
    assert_eq!(
        errors,
        [
            "spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or \
             'Parallel'",
            "spec.updateStrategy.rollingUpdate: Invalid value: {\"Partition\":1,\
             \"MaxUnavailable\":null}: only allowed for updateStrategy 'RollingUpdate'",
            "spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: \"Keep\": \
             supported values: \"Retain\", \"Delete\"",
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \
             \"Always\"",
            "spec.serviceName: Invalid value: \"Nginx\": a lowercase RFC 1123 label must consist \
             of lower case alphanumeric characters or '-', and must start and end with an \
             alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation \
             is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        ]
    );
    let mut s = web();
    s["spec"]["selector"] = json!({});
    s["spec"]["updateStrategy"] = json!({"type": "Blue"});
    StatefulSets.set_defaults(&mut s);
    assert_eq!(
        messages(&StatefulSets.validate(&s)),
        vec![
            "spec.updateStrategy: Invalid value: {\"Type\":\"Blue\",\"RollingUpdate\":null}: \
             must be 'RollingUpdate' or 'OnDelete'",
            "spec.selector: Invalid value: {}: empty selector is invalid for statefulset",
        ]
    );
}

#[test]
fn an_update_may_change_only_what_upstream_lets_it() {
    let mut old = web();
    StatefulSets.prepare_for_create(&mut old);
    let mut scaled = old.clone();
    scaled["spec"]["replicas"] = json!(3);
    scaled["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.28");
    scaled["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
    StatefulSets.prepare_for_update(&mut scaled, &old);
    assert!(StatefulSets.validate_update(&scaled, &old).is_empty());
    let mut renamed = old.clone();
    renamed["spec"]["serviceName"] = json!("other");
    renamed["spec"]["revisionHistoryLimit"] = json!(3);
    assert_eq!(
        messages(&StatefulSets.validate_update(&renamed, &old)),
        vec![
            "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', \
             'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' \
             and 'minReadySeconds' are forbidden"
        ]
    );
}

/// Kubernetes 1.34's `ValidateStatefulSetUpdate` carries over `replicas`, `template`,
/// `updateStrategy`, `minReadySeconds`, `ordinals` and `persistentVolumeClaimRetentionPolicy`
/// before comparing the specs: each of those alone may change; `revisionHistoryLimit` (made
/// updatable only after 1.34) and the other fields may not, each alone refused with the one
/// message.
#[test]
fn each_field_alone_is_updatable_exactly_as_in_1_34() {
    let mut old = web();
    StatefulSets.prepare_for_create(&mut old);
    let forbidden = "spec: Forbidden: updates to statefulset spec for fields other than \
        'replicas', 'ordinals', 'template', 'updateStrategy', \
        'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden";
    let allowed = [
        ("replicas", json!(5)),
        ("minReadySeconds", json!(10)),
        ("ordinals", json!({"start": 2})),
        (
            "persistentVolumeClaimRetentionPolicy",
            json!({"whenDeleted": "Delete", "whenScaled": "Retain"}),
        ),
        ("updateStrategy", json!({"type": "OnDelete"})),
    ];
    for (field, value) in allowed {
        let mut new = old.clone();
        new["spec"][field] = value;
        StatefulSets.prepare_for_update(&mut new, &old);
        assert!(
            StatefulSets.validate_update(&new, &old).is_empty(),
            "{field}: {:?}",
            messages(&StatefulSets.validate_update(&new, &old))
        );
    }
    let refused = [
        ("revisionHistoryLimit", json!(3)),
        ("serviceName", json!("other")),
        ("podManagementPolicy", json!("Parallel")),
        (
            "volumeClaimTemplates",
            json!([{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "2Gi"}}}}]),
        ),
    ];
    for (field, value) in refused {
        let mut new = old.clone();
        new["spec"][field] = value;
        StatefulSets.prepare_for_update(&mut new, &old);
        assert_eq!(
            messages(&StatefulSets.validate_update(&new, &old)),
            vec![forbidden],
            "{field}"
        );
    }
}

#[test]
fn statefulsets_print_ready_of_desired() {
    let mut s = web();
    StatefulSets.prepare_for_create(&mut s);
    s["metadata"]["creationTimestamp"] = json!("2026-05-28T20:16:40Z");
    s["status"]["readyReplicas"] = json!(1);
    assert_eq!(
        StatefulSets.cells(&s, Time(1_780_000_000)),
        vec![
            json!("web"),
            json!("1/1"),
            json!("10m"),
            json!("nginx"),
            json!("nginx:1.27")
        ]
    );
    assert_eq!(StatefulSets.info().name_rule, NameRule::Label);
}

#[test]
fn a_status_update_is_checked_as_validate_stateful_set_status_update() {
    let old = json!({"status": {"replicas": 2}});
    let new = json!({"status": {"replicas": 2, "readyReplicas": 1, "currentReplicas": 3,
        "availableReplicas": 2, "observedGeneration": -1}});
    assert_eq!(
        messages(&StatefulSets.validate_status_update(&new, &old)),
        [
            "status.observedGeneration: Invalid value: -1: must be greater than or equal to 0",
            "status.currentReplicas: Invalid value: 3: cannot be greater than status.replicas",
            "status.availableReplicas: Invalid value: 2: cannot be greater than \
             status.readyReplicas",
        ]
    );
}
