//! autoscaling/v1 ↔ autoscaling/v2 HorizontalPodAutoscalers, as
//! `pkg/apis/autoscaling/v1/conversion.go` converts v1 to and from the internal version
//! (which v2 mirrors field for field). v1 has one metric, `targetCPUUtilizationPercentage`;
//! every other v2 field makes the trip through v1 in an annotation:
//!
//! | annotation | holds |
//! |---|---|
//! | `autoscaling.alpha.kubernetes.io/metrics` | the metrics but a CPU utilization target, as v1 `MetricSpec`s |
//! | `autoscaling.alpha.kubernetes.io/current-metrics` | `status.currentMetrics`, as v1 `MetricStatus`es |
//! | `autoscaling.alpha.kubernetes.io/behavior` | `spec.behavior`, the internal struct's JSON (untagged: `ScaleUp`, ...) |
//! | `autoscaling.alpha.kubernetes.io/conditions` | `status.conditions` |
//!
//! A v1 object without metrics converts with the CPU 80% target v1 always implied.

use serde_json::{Map, Value, json};

use super::go_json;
use crate::registry::storage_k8s_io::fields::{present, str_at};

/// `autoscaling.MetricSpecsAnnotation`.
pub const METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
/// `autoscaling.MetricStatusesAnnotation`.
pub const CURRENT_METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
/// `autoscaling.BehaviorSpecsAnnotation`.
pub const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";
/// `autoscaling.HorizontalPodAutoscalerConditionsAnnotation`.
pub const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// `autoscaling.DefaultCPUUtilization`.
pub const DEFAULT_CPU_UTILIZATION: i64 = 80;

const ROUND_TRIP: [&str; 4] = [
    METRICS_ANNOTATION,
    CURRENT_METRICS_ANNOTATION,
    BEHAVIOR_ANNOTATION,
    CONDITIONS_ANNOTATION,
];

/// A copy of `obj` without `keys` (absent ones skipped).
fn pick(obj: Option<&Value>, keys: &[&str]) -> Map<String, Value> {
    let mut out = Map::new();
    for k in keys {
        if let Some(v) = obj.and_then(|o| o.get(*k)).filter(|v| !v.is_null()) {
            out.insert((*k).to_string(), v.clone());
        }
    }
    out
}

/// `DropRoundTripHorizontalPodAutoscalerAnnotations` on `metadata` (an emptied map goes,
/// as Go's `omitempty` drops it).
fn drop_round_trip(metadata: &mut Map<String, Value>) {
    if let Some(Value::Object(a)) = metadata.get_mut("annotations") {
        for k in ROUND_TRIP {
            a.remove(k);
        }
        if a.is_empty() {
            metadata.remove("annotations");
        }
    }
}

fn is_cpu_resource(metric: &Value) -> bool {
    metric.get("type").and_then(Value::as_str) == Some("Resource")
        && str_at(metric, "/resource/name") == "cpu"
}

/// A `resource.Quantity` that is not a pointer: Go writes its zero value as "0".
fn quantity(v: Option<&Value>) -> Value {
    v.filter(|v| !v.is_null()).cloned().unwrap_or(json!("0"))
}

/// `MetricIdentifier` fields (`name`, `selector`) under v1's names.
fn identifier(metric: Option<&Value>, name: &str, selector: &str, out: &mut Map<String, Value>) {
    out.insert(
        name.into(),
        json!(metric.map_or("", |m| str_at(m, "/name"))),
    );
    if let Some(s) = metric.and_then(|m| present(m, "/selector")) {
        out.insert(selector.into(), s.clone());
    }
}

/// An internal (v2) `MetricSpec` as a v1 one.
fn spec_to_v1(m: &Value) -> Value {
    let mut out = pick(Some(m), &["type"]);
    if let Some(o) = present(m, "/object") {
        let mut s = pick(Some(o), &[]);
        s.insert(
            "target".into(),
            o.get("describedObject").cloned().unwrap_or(json!({})),
        );
        identifier(o.get("metric"), "metricName", "selector", &mut s);
        s.insert("targetValue".into(), quantity(o.pointer("/target/value")));
        s.extend(pick(o.get("target"), &["averageValue"]));
        out.insert("object".into(), Value::Object(s));
    }
    if let Some(p) = present(m, "/pods") {
        let mut s = Map::new();
        identifier(p.get("metric"), "metricName", "selector", &mut s);
        s.insert(
            "targetAverageValue".into(),
            quantity(p.pointer("/target/averageValue")),
        );
        out.insert("pods".into(), Value::Object(s));
    }
    for kind in ["resource", "containerResource"] {
        if let Some(r) = present(m, &format!("/{kind}")) {
            let mut s = pick(Some(r), &["name", "container"]);
            let t = r.get("target");
            if let Some(u) = t.and_then(|t| present(t, "/averageUtilization")) {
                s.insert("targetAverageUtilization".into(), u.clone());
            }
            if let Some(v) = t.and_then(|t| present(t, "/averageValue")) {
                s.insert("targetAverageValue".into(), v.clone());
            }
            out.insert(kind.into(), Value::Object(s));
        }
    }
    if let Some(e) = present(m, "/external") {
        let mut s = Map::new();
        identifier(e.get("metric"), "metricName", "metricSelector", &mut s);
        let t = e.get("target");
        if let Some(v) = t.and_then(|t| present(t, "/value")) {
            s.insert("targetValue".into(), v.clone());
        }
        if let Some(v) = t.and_then(|t| present(t, "/averageValue")) {
            s.insert("targetAverageValue".into(), v.clone());
        }
        out.insert("external".into(), Value::Object(s));
    }
    Value::Object(out)
}

/// `{"name": .., "selector": ..}` from v1's names.
fn metric_id(s: &Value, name: &str, selector: &str) -> Value {
    let mut id = Map::new();
    id.insert("name".into(), json!(str_at(s, &format!("/{name}"))));
    if let Some(sel) = present(s, &format!("/{selector}")) {
        id.insert("selector".into(), sel.clone());
    }
    Value::Object(id)
}

/// A v1 `MetricSpec` as an internal (v2) one.
fn spec_from_v1(m: &Value) -> Value {
    let mut out = pick(Some(m), &["type"]);
    if let Some(o) = present(m, "/object") {
        let average = present(o, "/averageValue");
        let mut target = Map::new();
        target.insert(
            "type".into(),
            json!(if average.is_none() {
                "Value"
            } else {
                "AverageValue"
            }),
        );
        target.insert("value".into(), quantity(o.get("targetValue")));
        target.extend(pick(Some(o), &["averageValue"]));
        out.insert(
            "object".into(),
            json!({"describedObject": o.get("target").cloned().unwrap_or(json!({})),
                "metric": metric_id(o, "metricName", "selector"), "target": target}),
        );
    }
    if let Some(p) = present(m, "/pods") {
        out.insert(
            "pods".into(),
            json!({"metric": metric_id(p, "metricName", "selector"),
                "target": {"type": "AverageValue", "averageValue": quantity(p.get("targetAverageValue"))}}),
        );
    }
    for kind in ["resource", "containerResource"] {
        if let Some(r) = present(m, &format!("/{kind}")) {
            let mut s = pick(Some(r), &["name", "container"]);
            let utilization = present(r, "/targetAverageUtilization");
            let mut target = Map::new();
            target.insert(
                "type".into(),
                json!(if utilization.is_none() {
                    "AverageValue"
                } else {
                    "Utilization"
                }),
            );
            if let Some(v) = present(r, "/targetAverageValue") {
                target.insert("averageValue".into(), v.clone());
            }
            if let Some(u) = utilization {
                target.insert("averageUtilization".into(), u.clone());
            }
            s.insert("target".into(), Value::Object(target));
            out.insert(kind.into(), Value::Object(s));
        }
    }
    if let Some(e) = present(m, "/external") {
        let value = present(e, "/targetValue");
        let mut target = Map::new();
        target.insert(
            "type".into(),
            json!(if value.is_none() {
                "AverageValue"
            } else {
                "Value"
            }),
        );
        if let Some(v) = value {
            target.insert("value".into(), v.clone());
        }
        if let Some(v) = present(e, "/targetAverageValue") {
            target.insert("averageValue".into(), v.clone());
        }
        out.insert(
            "external".into(),
            json!({"metric": metric_id(e, "metricName", "metricSelector"), "target": target}),
        );
    }
    Value::Object(out)
}

/// An internal (v2) `MetricStatus` as a v1 one.
fn status_to_v1(m: &Value) -> Value {
    let mut out = pick(Some(m), &["type"]);
    let current = |s: &Value, f: &str| s.pointer(&format!("/current/{f}")).cloned();
    if let Some(o) = present(m, "/object") {
        let mut s = Map::new();
        s.insert(
            "target".into(),
            o.get("describedObject").cloned().unwrap_or(json!({})),
        );
        identifier(o.get("metric"), "metricName", "selector", &mut s);
        s.insert(
            "currentValue".into(),
            quantity(current(o, "value").as_ref()),
        );
        if let Some(v) = current(o, "averageValue").filter(|v| !v.is_null()) {
            s.insert("averageValue".into(), v);
        }
        out.insert("object".into(), Value::Object(s));
    }
    if let Some(p) = present(m, "/pods") {
        let mut s = Map::new();
        identifier(p.get("metric"), "metricName", "selector", &mut s);
        s.insert(
            "currentAverageValue".into(),
            quantity(current(p, "averageValue").as_ref()),
        );
        out.insert("pods".into(), Value::Object(s));
    }
    for kind in ["resource", "containerResource"] {
        if let Some(r) = present(m, &format!("/{kind}")) {
            let mut s = pick(Some(r), &["name", "container"]);
            if let Some(u) = current(r, "averageUtilization").filter(|v| !v.is_null()) {
                s.insert("currentAverageUtilization".into(), u);
            }
            s.insert(
                "currentAverageValue".into(),
                quantity(current(r, "averageValue").as_ref()),
            );
            out.insert(kind.into(), Value::Object(s));
        }
    }
    if let Some(e) = present(m, "/external") {
        let mut s = Map::new();
        identifier(e.get("metric"), "metricName", "metricSelector", &mut s);
        s.insert(
            "currentValue".into(),
            quantity(current(e, "value").as_ref()),
        );
        if let Some(v) = current(e, "averageValue").filter(|v| !v.is_null()) {
            s.insert("currentAverageValue".into(), v);
        }
        out.insert("external".into(), Value::Object(s));
    }
    Value::Object(out)
}

/// A v1 `MetricStatus` as an internal (v2) one.
fn status_from_v1(m: &Value) -> Value {
    let mut out = pick(Some(m), &["type"]);
    if let Some(o) = present(m, "/object") {
        let mut current = Map::new();
        current.insert("value".into(), quantity(o.get("currentValue")));
        current.extend(pick(Some(o), &["averageValue"]));
        out.insert(
            "object".into(),
            json!({"describedObject": o.get("target").cloned().unwrap_or(json!({})),
                "metric": metric_id(o, "metricName", "selector"), "current": current}),
        );
    }
    if let Some(p) = present(m, "/pods") {
        out.insert(
            "pods".into(),
            json!({"metric": metric_id(p, "metricName", "selector"),
                "current": {"averageValue": quantity(p.get("currentAverageValue"))}}),
        );
    }
    for kind in ["resource", "containerResource"] {
        if let Some(r) = present(m, &format!("/{kind}")) {
            let mut s = pick(Some(r), &["name", "container"]);
            let mut current = Map::new();
            current.insert(
                "averageValue".into(),
                quantity(r.get("currentAverageValue")),
            );
            if let Some(u) = present(r, "/currentAverageUtilization") {
                current.insert("averageUtilization".into(), u.clone());
            }
            s.insert("current".into(), Value::Object(current));
            out.insert(kind.into(), Value::Object(s));
        }
    }
    if let Some(e) = present(m, "/external") {
        let mut current = Map::new();
        current.insert("value".into(), quantity(e.get("currentValue")));
        if let Some(v) = present(e, "/currentAverageValue") {
            current.insert("averageValue".into(), v.clone());
        }
        out.insert(
            "external".into(),
            json!({"metric": metric_id(e, "metricName", "metricSelector"), "current": current}),
        );
    }
    Value::Object(out)
}

/// v2 `HPAScalingRules` as the internal struct marshals (untagged fields, nil as null).
fn rules_to_internal(r: Option<&Value>) -> Value {
    let Some(r) = r.filter(|r| !r.is_null()) else {
        return Value::Null;
    };
    let policies = r.get("policies").and_then(Value::as_array).map(|ps| {
        ps.iter()
            .map(|p| {
                json!({"Type": p.get("type").cloned().unwrap_or(json!("")),
                    "Value": p.get("value").cloned().unwrap_or(json!(0)),
                    "PeriodSeconds": p.get("periodSeconds").cloned().unwrap_or(json!(0))})
            })
            .collect::<Vec<_>>()
    });
    json!({"StabilizationWindowSeconds": r.get("stabilizationWindowSeconds").cloned().unwrap_or(Value::Null),
        "SelectPolicy": r.get("selectPolicy").cloned().unwrap_or(Value::Null),
        "Policies": policies.map_or(Value::Null, Value::from),
        "Tolerance": r.get("tolerance").cloned().unwrap_or(Value::Null)})
}

/// A field of Go-unmarshalled JSON: keys match case-insensitively.
fn go_field<'a>(obj: &'a Value, name: &str) -> Option<&'a Value> {
    obj.as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
        .filter(|v| !v.is_null())
}

/// The internal behavior's JSON as v2 `HPAScalingRules`.
fn rules_from_internal(r: Option<&Value>) -> Option<Value> {
    let r = r?;
    let mut out = Map::new();
    for (go, v2) in [
        ("StabilizationWindowSeconds", "stabilizationWindowSeconds"),
        ("SelectPolicy", "selectPolicy"),
        ("Tolerance", "tolerance"),
    ] {
        if let Some(v) = go_field(r, go) {
            out.insert(v2.into(), v.clone());
        }
    }
    if let Some(ps) = go_field(r, "Policies").and_then(Value::as_array) {
        let ps: Vec<Value> = ps
            .iter()
            .map(|p| {
                let f = |n: &str| go_field(p, n).cloned();
                json!({"type": f("Type").unwrap_or(json!("")), "value": f("Value").unwrap_or(json!(0)),
                    "periodSeconds": f("PeriodSeconds").unwrap_or(json!(0))})
            })
            .collect();
        out.insert("policies".into(), Value::from(ps));
    }
    Some(Value::Object(out))
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// A v2 (stored) HPA as autoscaling/v1 serves it
/// (`Convert_autoscaling_HorizontalPodAutoscaler_To_v1_HorizontalPodAutoscaler`).
pub fn to_v1(v2: &Value) -> Value {
    let mut metadata = v2
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    drop_round_trip(&mut metadata);
    let spec = v2.get("spec");
    let metrics: &[Value] = spec
        .and_then(|s| s.get("metrics"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let mut v1_spec = pick(spec, &["scaleTargetRef", "minReplicas", "maxReplicas"]);
    v1_spec.entry("maxReplicas").or_insert(json!(0));
    v1_spec
        .entry("scaleTargetRef")
        .or_insert(json!({"kind": "", "name": ""}));
    if let Some(cpu) = metrics.iter().find(|m| is_cpu_resource(m))
        && let Some(u) = present(cpu, "/resource/target/averageUtilization")
    {
        v1_spec.insert("targetCPUUtilizationPercentage".into(), u.clone());
    }
    let other: Vec<Value> = metrics
        .iter()
        .filter(|m| {
            !(is_cpu_resource(m) && present(m, "/resource/target/averageUtilization").is_some())
        })
        .map(spec_to_v1)
        .collect();
    let status = v2.get("status");
    let mut v1_status = pick(status, &["observedGeneration", "lastScaleTime"]);
    for field in ["currentReplicas", "desiredReplicas"] {
        let n = status
            .and_then(|s| s.get(field))
            .cloned()
            .unwrap_or(json!(0));
        v1_status.insert(field.into(), n);
    }
    let current: &[Value] = status
        .and_then(|s| s.get("currentMetrics"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    for m in current.iter().filter(|m| is_cpu_resource(m)) {
        if let Some(u) = present(m, "/resource/current/averageUtilization") {
            v1_status.insert("currentCPUUtilizationPercentage".into(), u.clone());
        }
    }
    let conditions: &[Value] = status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let behavior = spec.and_then(|s| present(s, "/behavior"));
    let mut added: Vec<(&str, String)> = Vec::new();
    if !other.is_empty() {
        added.push((METRICS_ANNOTATION, go_json::encode(&Value::from(other))));
    }
    if !current.is_empty() {
        let list: Vec<Value> = current.iter().map(status_to_v1).collect();
        added.push((
            CURRENT_METRICS_ANNOTATION,
            go_json::encode(&Value::from(list)),
        ));
    }
    if let Some(b) = behavior {
        let internal = json!({"ScaleUp": rules_to_internal(b.get("scaleUp")),
            "ScaleDown": rules_to_internal(b.get("scaleDown"))});
        added.push((BEHAVIOR_ANNOTATION, go_json::encode(&internal)));
    }
    if !conditions.is_empty() {
        let list: Vec<Value> = conditions
            .iter()
            .map(|c| {
                let mut c = pick(
                    Some(c),
                    &["type", "status", "lastTransitionTime", "reason", "message"],
                );
                c.entry("lastTransitionTime").or_insert(Value::Null);
                Value::Object(c)
            })
            .collect();
        added.push((CONDITIONS_ANNOTATION, go_json::encode(&Value::from(list))));
    }
    if !added.is_empty() {
        let annotations = metadata.entry("annotations").or_insert(json!({}));
        for (k, v) in added {
            annotations[k] = Value::from(v);
        }
    }
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("autoscaling/v1"));
    out.insert("kind".into(), json!("HorizontalPodAutoscaler"));
    out.insert("metadata".into(), Value::Object(metadata));
    out.insert("spec".into(), Value::Object(v1_spec));
    if status.is_some() {
        out.insert("status".into(), Value::Object(v1_status));
    }
    Value::Object(out)
}

/// An autoscaling/v1 HPA as v2 keeps it
/// (`Convert_v1_HorizontalPodAutoscaler_To_autoscaling_HorizontalPodAutoscaler`).
pub fn from_v1(v1: &Value) -> Value {
    let mut metadata = v1
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let spec = v1.get("spec");
    let mut v2_spec = pick(spec, &["scaleTargetRef", "minReplicas", "maxReplicas"]);
    let mut metrics: Vec<Value> = Vec::new();
    if let Some(pct) = spec.and_then(|s| present(s, "/targetCPUUtilizationPercentage")) {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": pct}}}));
    }
    let parsed = |key: &str| -> Option<Value> { serde_json::from_str(annotation(v1, key)?).ok() };
    if let Some(Value::Array(other)) = parsed(METRICS_ANNOTATION) {
        let mut out: Vec<Value> = other.iter().map(spec_from_v1).collect();
        out.extend(metrics.drain(..).take(1));
        metrics = out;
    }
    let status = v1.get("status");
    let mut v2_status = pick(
        status,
        &["observedGeneration", "lastScaleTime", "currentReplicas"],
    );
    v2_status.insert(
        "desiredReplicas".into(),
        status
            .and_then(|s| s.get("desiredReplicas"))
            .cloned()
            .unwrap_or(json!(0)),
    );
    if v2_status.get("currentReplicas") == Some(&json!(0)) {
        v2_status.remove("currentReplicas");
    }
    let mut current = Value::Null;
    if let Some(pct) = status.and_then(|s| present(s, "/currentCPUUtilizationPercentage")) {
        current = json!([{"type": "Resource",
            "resource": {"name": "cpu", "current": {"averageUtilization": pct}}}]);
    }
    if let Some(Value::Array(list)) = parsed(CURRENT_METRICS_ANNOTATION) {
        current = Value::from(list.iter().map(status_from_v1).collect::<Vec<_>>());
    }
    v2_status.insert("currentMetrics".into(), current);
    if metrics.is_empty() {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}}}));
    }
    v2_spec.insert("metrics".into(), Value::from(metrics));
    if let Some(Value::Array(list)) = parsed(CONDITIONS_ANNOTATION) {
        let conditions: Vec<Value> = list
            .iter()
            .map(|c| {
                Value::Object(pick(
                    Some(c),
                    &["type", "status", "lastTransitionTime", "reason", "message"],
                ))
            })
            .collect();
        v2_status.insert("conditions".into(), Value::from(conditions));
    }
    if let Some(b) = parsed(BEHAVIOR_ANNOTATION) {
        let up = rules_from_internal(go_field(&b, "ScaleUp"));
        let down = rules_from_internal(go_field(&b, "ScaleDown"));
        if up.is_some() || down.is_some() {
            let mut behavior = Map::new();
            behavior.extend(up.map(|r| ("scaleUp".to_string(), r)));
            behavior.extend(down.map(|r| ("scaleDown".to_string(), r)));
            v2_spec.insert("behavior".into(), Value::Object(behavior));
        }
    }
    drop_round_trip(&mut metadata);
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("autoscaling/v2"));
    out.insert("kind".into(), json!("HorizontalPodAutoscaler"));
    out.insert("metadata".into(), Value::Object(metadata));
    out.insert("spec".into(), Value::Object(v2_spec));
    if status.is_some() {
        out.insert("status".into(), Value::Object(v2_status));
    }
    Value::Object(out)
}
