//! HorizontalPodAutoscaler defaults: autoscaling/v2's from `pkg/apis/autoscaling/v2/defaults.go`
//! (`SetDefaults_HorizontalPodAutoscaler`: `minReplicas` 1, a CPU 80% utilization target when
//! there are no metrics, and a given `behavior`'s missing rules and fields from
//! `GenerateHPAScaleUpRules` / `GenerateHPAScaleDownRules`), and autoscaling/v1's from
//! `pkg/apis/autoscaling/v1/defaults.go` (`minReplicas` 1 only: v1's CPU target is applied
//! in conversion, [`super::conversion::from_v1`]).

use serde_json::{Map, Value, json};

use super::conversion::DEFAULT_CPU_UTILIZATION;
use crate::registry::defaults::{as_map, default_value, object_entry};

/// `defaultHPAScaleUpRules`: no stabilization window, the larger change of 4 pods or 100%
/// every 15 seconds.
fn scale_up_rules() -> Value {
    json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15}]})
}

/// `defaultHPAScaleDownRules`: 100% every 15 seconds; the stabilization window is left to
/// the controller's flag (nil).
fn scale_down_rules() -> Value {
    json!({"selectPolicy": "Max", "policies": [
        {"type": "Percent", "value": 100, "periodSeconds": 15}]})
}

/// `copyHPAScalingRules(from, defaults)`: the defaults with what `from` sets.
fn rules(from: Option<&Value>, defaults: Value) -> Value {
    let mut to = defaults;
    if let (Some(Value::Object(from)), Value::Object(to)) = (from, &mut to) {
        for k in [
            "selectPolicy",
            "stabilizationWindowSeconds",
            "policies",
            "tolerance",
        ] {
            if let Some(v) = from.get(k).filter(|v| !v.is_null()) {
                to.insert(k.into(), v.clone());
            }
        }
    }
    to
}

/// `SetDefaults_HorizontalPodAutoscaler` (autoscaling/v2).
pub fn set_v2(obj: &mut Value) {
    let spec = object_entry(as_map(obj), "spec");
    default_value(spec, "minReplicas", json!(1));
    if spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}}}]),
        );
    }
    if let Some(Value::Object(behavior)) = spec.get_mut("behavior") {
        let up = rules(behavior.get("scaleUp"), scale_up_rules());
        let down = rules(behavior.get("scaleDown"), scale_down_rules());
        behavior.insert("scaleUp".into(), up);
        behavior.insert("scaleDown".into(), down);
    }
}

/// `SetDefaults_HorizontalPodAutoscaler` (autoscaling/v1).
pub fn set_v1(obj: &mut Value) {
    let spec: &mut Map<String, Value> = object_entry(as_map(obj), "spec");
    default_value(spec, "minReplicas", json!(1));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_defaults_are_upstreams() {
        let mut hpa = json!({"spec": {"maxReplicas": 5,
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}});
        set_v2(&mut hpa);
        assert_eq!(
            hpa,
            json!({"spec": {"maxReplicas": 5, "minReplicas": 1,
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 80}}}]}})
        );
        let mut with_behavior = json!({"spec": {"minReplicas": 2, "metrics": [{"type": "Pods"}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}});
        set_v2(&mut with_behavior);
        assert_eq!(
            with_behavior["spec"]["behavior"],
            json!({"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
                    {"type": "Pods", "value": 4, "periodSeconds": 15},
                    {"type": "Percent", "value": 100, "periodSeconds": 15}]},
                "scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Max", "policies": [
                    {"type": "Percent", "value": 100, "periodSeconds": 15}]}})
        );
        assert_eq!(with_behavior["spec"]["minReplicas"], json!(2));
        assert_eq!(with_behavior["spec"]["metrics"], json!([{"type": "Pods"}]));
    }

    #[test]
    fn v1_defaults_only_min_replicas() {
        let mut hpa = json!({"spec": {"maxReplicas": 5}});
        set_v1(&mut hpa);
        assert_eq!(hpa, json!({"spec": {"maxReplicas": 5, "minReplicas": 1}}));
    }
}
