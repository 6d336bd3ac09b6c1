//! autoscaling/v1 ↔ v2 round trips, validation messages and the printer, with expected
//! objects written from `pkg/apis/autoscaling/v1/conversion.go`, `validation.go` and
//! `printers.go`.

use serde_json::{Value, json};

use super::conversion::{
    BEHAVIOR_ANNOTATION, CONDITIONS_ANNOTATION, CURRENT_METRICS_ANNOTATION, METRICS_ANNOTATION,
    from_v1, to_v1,
};
use super::hpa::{HorizontalPodAutoscalersV1, HorizontalPodAutoscalersV2};
use crate::apimachinery::time::Time;
use crate::registry::Strategy;
use crate::registry::rules::messages;

fn v2_full() -> Value {
    json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default", "creationTimestamp": "2026-05-28T20:16:40Z"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2, "maxReplicas": 5,
            "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}},
                {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
                {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}}],
            "behavior": {"scaleDown": {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}},
        "status": {"currentReplicas": 3, "desiredReplicas": 3,
            "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 40, "averageValue": "100m"}}}],
            "conditions": [{"type": "AbleToScale", "status": "True", "lastTransitionTime": "2026-05-28T20:16:40Z", "reason": "ReadyForNewScale", "message": "ok"}]}})
}

#[test]
fn v2_reads_as_v1_with_round_trip_annotations() {
    let v1 = to_v1(&v2_full());
    assert_eq!(v1["apiVersion"], json!("autoscaling/v1"));
    assert_eq!(
        v1["spec"],
        json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2, "maxReplicas": 5, "targetCPUUtilizationPercentage": 70})
    );
    assert_eq!(
        v1["status"],
        json!({"currentReplicas": 3, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 40})
    );
    let a = &v1["metadata"]["annotations"];
    assert_eq!(
        a[METRICS_ANNOTATION],
        json!(
            r#"[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"500Mi"}},{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"10"}}]"#
        )
    );
    assert_eq!(
        a[CURRENT_METRICS_ANNOTATION],
        json!(
            r#"[{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":40,"currentAverageValue":"100m"}}]"#
        )
    );
    assert_eq!(
        a[BEHAVIOR_ANNOTATION],
        json!(
            r#"{"ScaleUp":null,"ScaleDown":{"StabilizationWindowSeconds":null,"SelectPolicy":"Max","Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null}}"#
        )
    );
    assert_eq!(
        a[CONDITIONS_ANNOTATION],
        json!(
            r#"[{"type":"AbleToScale","status":"True","lastTransitionTime":"2026-05-28T20:16:40Z","reason":"ReadyForNewScale","message":"ok"}]"#
        )
    );
}

#[test]
fn v1_round_trip_restores_v2() {
    let original = v2_full();
    let back = from_v1(&to_v1(&original));
    // The CPU target comes back last (after the annotation's metrics), as upstream appends it.
    let mut expected = original.clone();
    let metrics = expected["spec"]["metrics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    expected["spec"]["metrics"] = json!([metrics[1], metrics[2], metrics[0]]);
    assert_eq!(back["spec"], expected["spec"]);
    assert_eq!(back["status"], expected["status"]);
    assert_eq!(back["metadata"], expected["metadata"]);
}

#[test]
fn v1_without_a_target_gets_the_implied_cpu_80_percent() {
    let v1 = json!({"metadata": {"name": "web", "annotations": {"keep": "me"}},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5, "minReplicas": 1},
        "status": {"currentReplicas": 0, "desiredReplicas": 0}});
    assert_eq!(
        from_v1(&v1),
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "annotations": {"keep": "me"}},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5, "minReplicas": 1,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 80}}}]},
            "status": {"desiredReplicas": 0, "currentMetrics": null}})
    );
    let back = to_v1(&from_v1(&v1));
    assert_eq!(back["spec"]["targetCPUUtilizationPercentage"], json!(80));
    assert_eq!(back["metadata"]["annotations"], json!({"keep": "me"}));
}

#[test]
fn validation_messages_are_upstreams() {
    let bad = json!({"spec": {"minReplicas": 0, "maxReplicas": 0,
        "scaleTargetRef": {"kind": "", "name": "a/b"},
        "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 0}}},
            {"type": "Bogus"}],
        "behavior": {"scaleUp": {"selectPolicy": "Any", "policies": [{"type": "Pods", "value": 0, "periodSeconds": 1801}]}}}});
    assert_eq!(
        messages(&HorizontalPodAutoscalersV2.validate(&bad)),
        vec![
            "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1",
            "spec.maxReplicas: Invalid value: 0: must be greater than 0",
            "spec.scaleTargetRef.kind: Required value",
            "spec.scaleTargetRef.name: Invalid value: \"a/b\": may not contain '/'",
            "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0",
            "spec.metrics[1].type: Unsupported value: \"Bogus\": supported values: \"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"",
            "spec.metrics: Forbidden: must specify at least one Object or External metric to support scaling to zero replicas",
            "spec.behavior.scaleUp.selectPolicy: Unsupported value: \"Any\": supported values: \"Disabled\", \"Max\", \"Min\"",
            "spec.behavior.scaleUp.policies[0].value: Invalid value: 0: must be greater than zero",
            "spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 1801: must be less than or equal to 1800",
        ]
    );
    let v1 = json!({"spec": {"minReplicas": 3, "maxReplicas": 2,
        "scaleTargetRef": {"kind": "Deployment", "name": "web"}}});
    assert_eq!(
        messages(&HorizontalPodAutoscalersV1.validate(&v1)),
        vec!["spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"]
    );
}

#[test]
fn printed_as_print_horizontal_pod_autoscaler() {
    let cells = HorizontalPodAutoscalersV2.cells(&v2_full(), Time(1_780_000_000));
    assert_eq!(
        cells,
        vec![
            json!("web"),
            json!("Deployment/web"),
            json!("cpu: 40%/70%, memory: <unknown>/500Mi + 1 more..."),
            json!("2"),
            json!(5),
            json!(3),
            json!("10m")
        ]
    );
    let v1 = json!({"metadata": {"name": "w"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "w"},
        "maxReplicas": 4, "targetCPUUtilizationPercentage": 50}});
    let cells = HorizontalPodAutoscalersV1.cells(&v1, Time(1_780_000_000));
    assert_eq!(cells[2], json!("cpu: <unknown>/50%"));
    assert_eq!(cells[3], json!("<unset>"));
}

#[test]
fn create_resets_status_and_drops_alpha_tolerance() {
    let mut hpa = json!({"spec": {"maxReplicas": 3, "behavior": {"scaleUp": {"tolerance": "0.05"}}},
        "status": {"desiredReplicas": 9}});
    HorizontalPodAutoscalersV2.prepare_for_create(&mut hpa);
    assert_eq!(
        hpa["status"],
        json!({"currentMetrics": null, "desiredReplicas": 0})
    );
    assert!(
        hpa["spec"]["behavior"]["scaleUp"]
            .get("tolerance")
            .is_none()
    );
    assert_eq!(hpa["spec"]["minReplicas"], json!(1));
}

#[test]
fn a_status_update_keeps_its_replica_counts_non_negative() {
    use crate::registry::Strategy;
    let hpa = json!({"status": {"currentReplicas": -1, "desiredReplicas": -2}});
    let expected = [
        "status.currentReplicas: Invalid value: -1: must be greater than or equal to 0",
        "status.desiredReplicas: Invalid value: -2: must be greater than or equal to 0",
    ];
    let v2 = crate::registry::rules::messages(
        &HorizontalPodAutoscalersV2.validate_status_update(&hpa, &hpa),
    );
    assert_eq!(v2, expected);
    let v1 = crate::registry::rules::messages(
        &HorizontalPodAutoscalersV1.validate_status_update(&hpa, &hpa),
    );
    assert_eq!(v1, expected);
}
