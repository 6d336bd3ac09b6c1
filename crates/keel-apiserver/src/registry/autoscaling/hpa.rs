//! HorizontalPodAutoscalers, stored as autoscaling/v2 (kube-apiserver's storage version since
//! 1.27) and served as autoscaling/v2 ([`HorizontalPodAutoscalersV2`]) and autoscaling/v1
//! ([`HorizontalPodAutoscalersV1`], converted on the way in and out as
//! [`super::conversion`] says), with a `status` subresource.
//! `pkg/registry/autoscaling/horizontalpodautoscaler/strategy.go`: a new HPA's status is
//! reset, and the alpha `HPAConfigurableTolerance` field (`behavior.*.tolerance`) is dropped
//! unless the stored object already uses it. Printed as `printHorizontalPodAutoscaler`:
//! NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE.

use serde_json::{Value, json};

use super::{conversion, defaults, validation};
use crate::apimachinery::time::Time;
use crate::registry::defaults::as_map;
use crate::registry::storage_k8s_io::fields::{items, present, str_at};
use crate::registry::{
    AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, name_age_row, status,
};
use crate::storage::FieldError;

/// HorizontalPodAutoscalers as autoscaling/v2 serves them (the stored form).
pub struct HorizontalPodAutoscalersV2;

/// HorizontalPodAutoscalers as autoscaling/v1 serves them.
pub struct HorizontalPodAutoscalersV1;

const fn hpa_info(version: &'static str) -> ResourceInfo {
    ResourceInfo {
        short_names: &["hpa"],
        categories: &["all"],
        status: true,
        ..ResourceInfo::new(
            "autoscaling",
            version,
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            "horizontalpodautoscaler",
        )
    }
}

static INFO_V2: ResourceInfo = hpa_info("v2");
static INFO_V1: ResourceInfo = hpa_info("v1");

static COLUMNS: [Column; 7] = [
    NAME_COLUMN,
    Column::string(
        "Reference",
        0,
        "reference to scaled resource; horizontal pod autoscaler will learn the current \
            resource consumption and will set the desired number of pods by using its Scale \
            subresource.",
    ),
    Column::string(
        "Targets",
        0,
        "metrics contains the specifications for which to use to calculate the desired \
            replica count.",
    ),
    Column::string(
        "MinPods",
        0,
        "minReplicas is the lower limit for the number of replicas to which the autoscaler \
            can scale down.",
    ),
    Column::string(
        "MaxPods",
        0,
        "maxReplicas is the upper limit for the number of replicas to which the autoscaler \
            can scale up.",
    ),
    Column::string(
        "Replicas",
        0,
        "currentReplicas is current number of replicas of pods managed by this autoscaler.",
    ),
    AGE_COLUMN,
];

/// A quantity as `Quantity.String()` shows it (its text).
fn q(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "0".to_string(),
    }
}

/// One metric of `formatHPAMetrics`, `status` the metric status at the same index.
fn format_metric(spec: &Value, status: Option<&Value>) -> String {
    let cur = |kind: &str, field: &str| {
        status
            .and_then(|s| present(s, &format!("/{kind}")))
            .and_then(|k| present(k, &format!("/current/{field}")))
    };
    let has_status = |kind: &str| {
        status
            .and_then(|s| present(s, &format!("/{kind}")))
            .is_some()
    };
    let unknown = "<unknown>".to_string();
    match str_at(spec, "/type") {
        ty @ ("External" | "Object") => {
            let kind = if ty == "External" {
                "external"
            } else {
                "object"
            };
            let target = spec.pointer(&format!("/{kind}/target"));
            if let Some(avg) = target.and_then(|t| present(t, "/averageValue")) {
                let current = cur(kind, "averageValue").map_or(unknown, |v| q(Some(v)));
                format!("{current}/{} (avg)", q(Some(avg)))
            } else {
                let current = if has_status(kind) {
                    q(cur(kind, "value"))
                } else {
                    unknown
                };
                format!("{current}/{}", q(target.and_then(|t| t.get("value"))))
            }
        }
        "Pods" => {
            let current = if has_status("pods") {
                q(cur("pods", "averageValue"))
            } else {
                unknown
            };
            format!("{current}/{}", q(spec.pointer("/pods/target/averageValue")))
        }
        ty @ ("Resource" | "ContainerResource") => {
            let kind = if ty == "Resource" {
                "resource"
            } else {
                "containerResource"
            };
            let name = str_at(spec, &format!("/{kind}/name"));
            let target = spec.pointer(&format!("/{kind}/target"));
            if let Some(avg) = target.and_then(|t| present(t, "/averageValue")) {
                let current = if has_status(kind) {
                    q(cur(kind, "averageValue"))
                } else {
                    unknown
                };
                format!("{name}: {current}/{}", q(Some(avg)))
            } else {
                let current = cur(kind, "averageUtilization")
                    .and_then(Value::as_i64)
                    .map_or(unknown, |u| format!("{u}%"));
                let target = target
                    .and_then(|t| present(t, "/averageUtilization"))
                    .and_then(Value::as_i64)
                    .map_or("<auto>".to_string(), |u| format!("{u}%"));
                format!("{name}: {current}/{target}")
            }
        }
        _ => "<unknown type>".to_string(),
    }
}

/// `formatHPAMetrics`: at most two metrics, then `+ N more...`.
fn format_metrics(hpa: &Value) -> String {
    let specs = items(hpa, "/spec/metrics");
    if specs.is_empty() {
        return "<none>".to_string();
    }
    let statuses = items(hpa, "/status/currentMetrics");
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| format_metric(s, statuses.get(i)))
        .collect();
    if list.len() > 2 {
        format!("{} + {} more...", list[..2].join(", "), list.len() - 2)
    } else {
        list.join(", ")
    }
}

/// `printHorizontalPodAutoscaler` of a v2-shaped HPA.
fn cells_v2(hpa: &Value, now: Time) -> Vec<Value> {
    let reference = format!(
        "{}/{}",
        str_at(hpa, "/spec/scaleTargetRef/kind"),
        str_at(hpa, "/spec/scaleTargetRef/name")
    );
    let min = present(hpa, "/spec/minReplicas").map_or("<unset>".to_string(), |m| m.to_string());
    let int = |p: &str| hpa.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    name_age_row(
        hpa,
        now,
        [
            Value::from(reference),
            Value::from(format_metrics(hpa)),
            Value::from(min),
            Value::from(int("/spec/maxReplicas")),
            Value::from(int("/status/currentReplicas")),
        ],
    )
}

/// Drops `behavior.*.tolerance` (the alpha `HPAConfigurableTolerance` is off) unless `old`
/// already has one.
fn drop_tolerance(obj: &mut Value, old: Option<&Value>) {
    let uses = |o: &Value| {
        ["scaleUp", "scaleDown"]
            .iter()
            .any(|r| present(o, &format!("/spec/behavior/{r}/tolerance")).is_some())
    };
    if old.is_some_and(uses) {
        return;
    }
    for r in ["scaleUp", "scaleDown"] {
        if let Some(Value::Object(rules)) = obj.pointer_mut(&format!("/spec/behavior/{r}")) {
            rules.remove("tolerance");
        }
    }
}

/// The lower bound of `minReplicas`: 0 only where the stored HPA already has 0.
fn lower_bound(old: &Value) -> i64 {
    match present(old, "/spec/minReplicas").and_then(Value::as_i64) {
        Some(0) => 0,
        _ => 1,
    }
}

/// `ValidateHorizontalPodAutoscalerStatusUpdate`
/// (pkg/apis/autoscaling/validation/validation.go): the current and desired replicas not
/// negative (the same fields in autoscaling/v1 and v2).
fn validate_status_update(hpa: &Value) -> Vec<FieldError> {
    status::non_negative_counts(hpa, &["currentReplicas", "desiredReplicas"])
}

impl Strategy for HorizontalPodAutoscalersV2 {
    fn info(&self) -> &'static ResourceInfo {
        &INFO_V2
    }

    fn set_defaults(&self, obj: &mut Value) {
        defaults::set_v2(obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        defaults::set_v2(obj);
        drop_tolerance(obj, None);
        as_map(obj).insert(
            "status".into(),
            json!({"currentMetrics": null, "desiredReplicas": 0}),
        );
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        defaults::set_v2(new);
        drop_tolerance(new, Some(old));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validation::validate(obj, 1)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validation::validate(new, lower_bound(old))
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        validate_status_update(new)
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        cells_v2(obj, now)
    }
}

impl Strategy for HorizontalPodAutoscalersV1 {
    fn info(&self) -> &'static ResourceInfo {
        &INFO_V1
    }

    fn storage_resource(&self) -> (&'static str, &'static str) {
        ("autoscaling", "horizontalpodautoscalers")
    }

    fn to_storage(&self, obj: Value) -> Value {
        conversion::from_v1(&obj)
    }

    fn to_served(&self, obj: Value) -> Value {
        conversion::to_v1(&obj)
    }

    fn set_defaults(&self, obj: &mut Value) {
        defaults::set_v1(obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        defaults::set_v1(obj);
        as_map(obj).insert(
            "status".into(),
            json!({"currentReplicas": 0, "desiredReplicas": 0}),
        );
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validation::validate(&conversion::from_v1(obj), 1)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let old = conversion::from_v1(old);
        validation::validate(&conversion::from_v1(new), lower_bound(&old))
    }

    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        validate_status_update(new)
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        cells_v2(&conversion::from_v1(obj), now)
    }
}
