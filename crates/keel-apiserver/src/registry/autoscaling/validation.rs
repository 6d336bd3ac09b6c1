//! HorizontalPodAutoscaler validation, as `pkg/apis/autoscaling/validation/validation.go`
//! words it (`ValidateHorizontalPodAutoscaler`): replicas bounds, the scale target reference,
//! each metric's source and target, and the behavior's scaling rules. Objects are in the v2
//! shape (autoscaling/v1 objects are converted first, as upstream validates the internal
//! version).

use serde_json::Value;

use crate::apimachinery::quantity::quantity_nanos;
use crate::apimachinery::validation::path_segment_name;
use crate::registry::storage_k8s_io::fields::{items, present, str_at};
use crate::storage::FieldError;

/// `MaxPeriodSeconds`.
const MAX_PERIOD_SECONDS: i64 = 1800;
/// `MaxStabilizationWindowSeconds`.
const MAX_STABILIZATION_WINDOW_SECONDS: i64 = 3600;
/// `validMetricSourceTypesList` (sorted).
const SOURCE_TYPES: [&str; 5] = [
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];

/// `ValidateCrossVersionObjectReference`.
fn cross_version_ref(r: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for field in ["kind", "name"] {
        let value = r.map_or("", |r| str_at(r, &format!("/{field}")));
        let at = format!("{path}.{field}");
        if value.is_empty() {
            errors.push(FieldError::required(&at, ""));
        }
        for problem in path_segment_name(value) {
            errors.push(FieldError::invalid(&at, value, &problem));
        }
    }
    errors
}

fn positive(q: &Value) -> bool {
    q.as_str().and_then(quantity_nanos).is_some_and(|n| n > 0)
        || q.as_f64().is_some_and(|n| n > 0.0)
}

/// `validateMetricTarget`.
fn metric_target(t: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let ty = t.map_or("", |t| str_at(t, "/type"));
    if ty.is_empty() {
        errors.push(FieldError::required(
            &format!("{path}.type"),
            "must specify a metric target type",
        ));
    }
    if !["Utilization", "Value", "AverageValue"].contains(&ty) {
        errors.push(FieldError::invalid(
            &format!("{path}.type"),
            ty,
            "must be either Utilization, Value, or AverageValue",
        ));
    }
    for field in ["value", "averageValue"] {
        if let Some(q) = t.and_then(|t| present(t, &format!("/{field}")))
            && !positive(q)
        {
            errors.push(FieldError::invalid(
                &format!("{path}.{field}"),
                q.clone(),
                "must be positive",
            ));
        }
    }
    if let Some(u) = t
        .and_then(|t| present(t, "/averageUtilization"))
        .and_then(Value::as_i64)
        .filter(|u| *u < 1)
    {
        errors.push(FieldError::invalid(
            &format!("{path}.averageUtilization"),
            u,
            "must be greater than 0",
        ));
    }
    errors
}

/// `validateMetricIdentifier` (the name required).
fn metric_name(src: &Value, path: &str) -> Option<FieldError> {
    str_at(src, "/metric/name")
        .is_empty()
        .then(|| FieldError::required(&format!("{path}.metric.name"), "must specify a metric name"))
}

fn source(kind: &str, src: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let target = src.get("target");
    let has = |f: &str| target.and_then(|t| present(t, &format!("/{f}"))).is_some();
    match kind {
        "resource" | "containerResource" => {
            if str_at(src, "/name").is_empty() {
                errors.push(FieldError::required(
                    &format!("{path}.name"),
                    "must specify a resource name",
                ));
            }
            if kind == "containerResource" && str_at(src, "/container").is_empty() {
                errors.push(FieldError::required(
                    &format!("{path}.container"),
                    "must specify a container",
                ));
            }
            errors.extend(metric_target(target, &format!("{path}.target")));
            if !has("averageUtilization") && !has("averageValue") {
                errors.push(FieldError::required(
                    &format!("{path}.target.averageUtilization"),
                    "must set either a target raw value or a target utilization",
                ));
            }
            if has("averageUtilization") && has("averageValue") {
                errors.push(FieldError::forbidden(
                    &format!("{path}.target.averageValue"),
                    "may not set both a target raw value and a target utilization",
                ));
            }
        }
        "pods" => {
            errors.extend(metric_name(src, path));
            errors.extend(metric_target(target, &format!("{path}.target")));
            if !has("averageValue") {
                errors.push(FieldError::required(
                    &format!("{path}.target.averageValue"),
                    "must specify a positive target averageValue",
                ));
            }
        }
        _ => {
            if kind == "object" {
                errors.extend(cross_version_ref(
                    src.get("describedObject"),
                    &format!("{path}.describedObject"),
                ));
            }
            errors.extend(metric_name(src, path));
            errors.extend(metric_target(target, &format!("{path}.target")));
            if !has("value") && !has("averageValue") {
                errors.push(FieldError::required(
                    &format!("{path}.target.averageValue"),
                    "must set either a target value or averageValue",
                ));
            }
        }
    }
    errors
}

/// `validateMetricSpec`.
fn metric_spec(m: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let ty = str_at(m, "/type");
    if ty.is_empty() {
        errors.push(FieldError::required(
            &format!("{path}.type"),
            "must specify a metric source type",
        ));
    }
    let kinds = [
        "object",
        "pods",
        "resource",
        "containerResource",
        "external",
    ];
    let present_kinds: Vec<&str> = kinds
        .into_iter()
        .filter(|k| present(m, &format!("/{k}")).is_some())
        .collect();
    if let Some(first) = present_kinds.first() {
        errors.extend(source(first, &m[*first], &format!("{path}.{first}")));
    }
    let expected = match ty {
        "Object" => "object",
        "Pods" => "pods",
        "Resource" => "resource",
        "ContainerResource" => "containerResource",
        "External" => "external",
        _ => {
            errors.push(FieldError::not_supported(
                &format!("{path}.type"),
                ty,
                &SOURCE_TYPES,
            ));
            ""
        }
    };
    if !expected.is_empty() && !present_kinds.contains(&expected) {
        errors.push(FieldError::required(
            &format!("{path}.{expected}"),
            "must populate information for the given metric source",
        ));
    }
    if present_kinds.len() != 1 {
        for k in present_kinds.iter().filter(|k| **k != expected) {
            errors.push(FieldError::forbidden(
                &format!("{path}.{k}"),
                "must populate the given metric source only",
            ));
        }
    }
    errors
}

/// `validateScalingRules`.
fn scaling_rules(r: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(w) = present(r, "/stabilizationWindowSeconds").and_then(Value::as_i64) {
        let at = format!("{path}.stabilizationWindowSeconds");
        if w < 0 {
            errors.push(FieldError::invalid(
                &at,
                w,
                "must be greater than or equal to zero",
            ));
        }
        if w > MAX_STABILIZATION_WINDOW_SECONDS {
            errors.push(FieldError::invalid(
                &at,
                w,
                &format!("must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"),
            ));
        }
    }
    if let Some(p) = present(r, "/selectPolicy").and_then(Value::as_str)
        && !["Disabled", "Max", "Min"].contains(&p)
    {
        errors.push(FieldError::not_supported(
            &format!("{path}.selectPolicy"),
            p,
            &["Disabled", "Max", "Min"],
        ));
    }
    let policies = items(r, "/policies");
    if policies.is_empty() {
        errors.push(FieldError::required(
            &format!("{path}.policies"),
            "must specify at least one Policy",
        ));
    }
    for (i, p) in policies.iter().enumerate() {
        let at = format!("{path}.policies[{i}]");
        let ty = str_at(p, "/type");
        if ty != "Pods" && ty != "Percent" {
            errors.push(FieldError::not_supported(
                &format!("{at}.type"),
                ty,
                &["Percent", "Pods"],
            ));
        }
        let value = p.get("value").and_then(Value::as_i64).unwrap_or(0);
        if value <= 0 {
            errors.push(FieldError::invalid(
                &format!("{at}.value"),
                value,
                "must be greater than zero",
            ));
        }
        let period = p.get("periodSeconds").and_then(Value::as_i64).unwrap_or(0);
        if period <= 0 {
            errors.push(FieldError::invalid(
                &format!("{at}.periodSeconds"),
                period,
                "must be greater than zero",
            ));
        }
        if period > MAX_PERIOD_SECONDS {
            errors.push(FieldError::invalid(
                &format!("{at}.periodSeconds"),
                period,
                &format!("must be less than or equal to {MAX_PERIOD_SECONDS}"),
            ));
        }
    }
    errors
}

/// `validateHorizontalPodAutoscalerSpec` of a v2-shaped HPA; `min_replicas_lower_bound` is 1
/// (0 only where the stored object already scales to zero, as the alpha `HPAScaleToZero`
/// gate is off).
pub fn validate(obj: &Value, min_replicas_lower_bound: i64) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let min = present(obj, "/spec/minReplicas").and_then(Value::as_i64);
    let max = obj
        .pointer("/spec/maxReplicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if let Some(min) = min
        && min < min_replicas_lower_bound
    {
        errors.push(FieldError::invalid(
            "spec.minReplicas",
            min,
            &format!("must be greater than or equal to {min_replicas_lower_bound}"),
        ));
    }
    if max < 1 {
        errors.push(FieldError::invalid(
            "spec.maxReplicas",
            max,
            "must be greater than 0",
        ));
    }
    if let Some(min) = min
        && max < min
    {
        errors.push(FieldError::invalid(
            "spec.maxReplicas",
            max,
            "must be greater than or equal to `minReplicas`",
        ));
    }
    errors.extend(cross_version_ref(
        obj.pointer("/spec/scaleTargetRef"),
        "spec.scaleTargetRef",
    ));
    let metrics = items(obj, "/spec/metrics");
    for (i, m) in metrics.iter().enumerate() {
        errors.extend(metric_spec(m, &format!("spec.metrics[{i}]")));
    }
    if min == Some(0)
        && !metrics
            .iter()
            .any(|m| matches!(str_at(m, "/type"), "Object" | "External"))
    {
        errors.push(FieldError::forbidden(
            "spec.metrics",
            "must specify at least one Object or External metric to support scaling to zero replicas",
        ));
    }
    for rule in ["scaleUp", "scaleDown"] {
        if let Some(r) = present(obj, &format!("/spec/behavior/{rule}")) {
            errors.extend(scaling_rules(r, &format!("spec.behavior.{rule}")));
        }
    }
    errors
}
