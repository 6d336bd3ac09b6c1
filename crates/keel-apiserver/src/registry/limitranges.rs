//! core/v1 LimitRanges: NAME, CREATED AT. A LimitRange created without a name is named
//! with a fresh UUID (kube's `limitrangeStrategy`); an update of a missing one creates it;
//! its limits are validated as `ValidateLimitRange` validates them (each type once, resource
//! names by type, no defaults for `Pod`, a storage bound for `PersistentVolumeClaim`, and
//! `min <= defaultRequest <= default <= max` with the ratio bounds), one map's keys in sorted
//! order where Go's map iteration takes any.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::resource_lists::{
    milli_value, nanos, overcommit_allowed, quantity_text, validate_container_name, validate_name,
    value,
};
use super::{Column, NAME_COLUMN, ResourceInfo, Strategy, meta, meta_str};
use crate::apimachinery::time::Time;
use crate::apimachinery::validation::is_qualified_name;
use crate::json_pointer::At;
use crate::storage::FieldError;

/// The LimitRange strategy.
pub struct LimitRanges;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["limits"],
    ..ResourceInfo::new("", "v1", "LimitRange", "limitranges", "limitrange")
};

static COLUMNS: [Column; 2] = [
    NAME_COLUMN,
    Column {
        name: "Created At",
        kind: "date",
        format: "",
        description: super::AGE_COLUMN.description,
        priority: 0,
    },
];

/// `standardLimitRangeTypes`.
const TYPES: [&str; 3] = ["Pod", "Container", "PersistentVolumeClaim"];

/// `Quantity.MaxMilliValue`.
const MAX_MILLI_VALUE: i128 = (i64::MAX / 1000) as i128;

/// `validateLimitRangeTypeName`.
fn validate_type(value: &str, path: &str) -> Vec<FieldError> {
    let errors: Vec<FieldError> = is_qualified_name(value)
        .iter()
        .map(|msg| FieldError::invalid(path, value, msg))
        .collect();
    if errors.is_empty() && !value.contains('/') && !TYPES.contains(&value) {
        return vec![FieldError::invalid(
            path,
            value,
            "must be a standard limit type or fully qualified",
        )];
    }
    errors
}

/// `validateLimitRangeResourceName`: container resources for `Pod` and `Container`, any
/// resource otherwise.
fn validate_resource(limit_type: &str, name: &str, path: &str) -> Vec<FieldError> {
    match limit_type {
        "Pod" | "Container" => validate_container_name(name, path),
        _ => validate_name(name, path),
    }
}

/// One bound of one resource: its value in billionths and its text.
struct Bound {
    nanos: i128,
    text: String,
}

/// The quantities of one LimitRangeItem, by bound and resource.
#[derive(Default)]
struct Bounds(BTreeMap<&'static str, BTreeMap<String, Bound>>);

impl Bounds {
    fn get(&self, bound: &str, resource: &str) -> Option<&Bound> {
        self.0.get(bound).and_then(|m| m.get(resource))
    }
}

/// How a bound is named in the messages about it.
fn bound_words(bound: &str) -> &'static str {
    match bound {
        "min" => "min value",
        "default" => "default value",
        _ => "default request value",
    }
}

/// The ordering checks of `ValidateLimitRange`, in its order: `(a, b, at, shown, b's
/// words)`: when `a` is greater than `b`, the error is at `at[k]` and shows the `shown`
/// bound's quantity.
const ORDER: [(&str, &str, &str, &str, &str); 6] = [
    ("min", "max", "min", "min", "max value"),
    (
        "min",
        "defaultRequest",
        "defaultRequest",
        "defaultRequest",
        "default request value",
    ),
    (
        "defaultRequest",
        "max",
        "defaultRequest",
        "defaultRequest",
        "max value",
    ),
    (
        "defaultRequest",
        "default",
        "defaultRequest",
        "defaultRequest",
        "default limit value",
    ),
    ("min", "default", "default", "min", "default value"),
    ("default", "max", "default", "max", "max value"),
];

/// `ValidateLimitRange`'s checks of one item.
fn validate_item(item: &Value, index: usize, seen: &mut BTreeSet<String>) -> Vec<FieldError> {
    let at = |field: &str| format!("spec.limits[{index}].{field}");
    let limit_type = item.get("type").and_then(Value::as_str).unwrap_or("");
    let mut errors = validate_type(limit_type, &at("type"));
    if !seen.insert(limit_type.to_string()) {
        errors.push(FieldError::duplicate(&at("type"), limit_type));
    }
    let map = |field: &str| item.get(field).and_then(Value::as_object);
    let mut keys = BTreeSet::new();
    let mut bounds = Bounds::default();
    let mut collect =
        |field: &'static str, list: Option<&Map<String, Value>>, errors: &mut Vec<FieldError>| {
            for (name, quantity) in list.into_iter().flatten() {
                errors.extend(validate_resource(
                    limit_type,
                    name,
                    &at(&format!("{field}[{name}]")),
                ));
                keys.insert(name.clone());
                if let Some(n) = nanos(quantity) {
                    let bound = Bound {
                        nanos: n,
                        text: quantity_text(quantity),
                    };
                    bounds
                        .0
                        .entry(field)
                        .or_default()
                        .insert(name.clone(), bound);
                }
            }
        };
    collect("max", map("max"), &mut errors);
    collect("min", map("min"), &mut errors);
    let non_empty = |field: &str| map(field).is_some_and(|m| !m.is_empty());
    if limit_type == "Pod" {
        for field in ["default", "defaultRequest"] {
            if non_empty(field) {
                errors.push(FieldError::forbidden(
                    &at(field),
                    "may not be specified when `type` is 'Pod'",
                ));
            }
        }
    } else {
        collect("default", map("default"), &mut errors);
        collect("defaultRequest", map("defaultRequest"), &mut errors);
    }
    if limit_type == "PersistentVolumeClaim" {
        let has = |field: &str| map(field).is_some_and(|m| m.contains_key("storage"));
        if !has("min") && !has("max") {
            errors.push(FieldError::required(
                &at("limits"),
                "either minimum or maximum storage value is required, but neither was provided",
            ));
        }
    }
    collect(
        "maxLimitRequestRatio",
        map("maxLimitRequestRatio"),
        &mut errors,
    );
    for k in &keys {
        errors.extend(compare(&bounds, k, index));
    }
    errors
}

/// The order and ratio checks of one resource's bounds.
fn compare(bounds: &Bounds, k: &str, index: usize) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (a, b, at, shown, b_words) in ORDER {
        let (Some(x), Some(y), Some(shown)) =
            (bounds.get(a, k), bounds.get(b, k), bounds.get(shown, k))
        else {
            continue;
        };
        if x.nanos > y.nanos {
            errors.push(FieldError::invalid(
                &format!("spec.limits[{index}].{at}[{k}]"),
                shown.text.as_str(),
                &format!(
                    "{} {} is greater than {b_words} {}",
                    bound_words(a),
                    x.text,
                    y.text
                ),
            ));
        }
    }
    let path = format!("spec.limits[{index}].maxLimitRequestRatio[{k}]");
    if let Some(ratio) = bounds.get("maxLimitRequestRatio", k) {
        if ratio.nanos < 1_000_000_000 {
            errors.push(FieldError::invalid(
                &path,
                ratio.text.as_str(),
                &format!("ratio {} is less than 1", ratio.text),
            ));
        }
        if let (Some(min), Some(max)) = (bounds.get("min", k), bounds.get("max", k)) {
            let (mut ratio_value, mut lo, mut hi) = (
                value(ratio.nanos) as f64,
                value(min.nanos),
                value(max.nanos),
            );
            if value(ratio.nanos) < MAX_MILLI_VALUE && lo < MAX_MILLI_VALUE && hi < MAX_MILLI_VALUE
            {
                ratio_value = milli_value(ratio.nanos) as f64 / 1000.0;
                lo = milli_value(min.nanos);
                hi = milli_value(max.nanos);
            }
            let limit = hi as f64 / lo as f64;
            if ratio_value > limit {
                errors.push(FieldError::invalid(
                    &path,
                    ratio.text.as_str(),
                    &format!(
                        "ratio {} is greater than max/min = {}",
                        ratio.text,
                        go_f(limit)
                    ),
                ));
            }
        }
    }
    if let (false, Some(default), Some(request)) = (
        overcommit_allowed(k),
        bounds.get("default", k),
        bounds.get("defaultRequest", k),
    ) && default.nanos != request.nanos
    {
        errors.push(FieldError::invalid(
            &format!("spec.limits[{index}].defaultRequest[{k}]"),
            request.text.as_str(),
            &format!(
                "default value {} must equal to defaultRequest value {} in {k}",
                default.text, request.text
            ),
        ));
    }
    errors
}

/// Go's `%f`: six decimals, `+Inf` for an infinity.
fn go_f(x: f64) -> String {
    if x.is_infinite() {
        return if x > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if x.is_nan() {
        return "NaN".to_string();
    }
    format!("{x:.6}")
}

/// `ValidateLimitRange` (without the metadata, which every kind's write checks).
fn validate_limits(obj: &Value) -> Vec<FieldError> {
    let mut seen = BTreeSet::new();
    let limits = obj.at("/spec/limits").and_then(Value::as_array);
    limits
        .into_iter()
        .flatten()
        .enumerate()
        .flat_map(|(i, item)| validate_item(item, i, &mut seen))
        .collect()
}

impl Strategy for LimitRanges {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if meta_str(obj, "name").is_empty() {
            let name = uuid::Uuid::new_v4().to_string();
            meta::metadata(obj).insert("name".into(), name.into());
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_limits(obj)
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, _now: Time) -> Vec<Value> {
        vec![
            Value::from(meta_str(obj, "name")),
            Value::from(meta_str(obj, "creationTimestamp")),
        ]
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(obj: &Value) -> Vec<String> {
        LimitRanges
            .validate(obj)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_limit_range_without_a_name_is_named_and_shown_with_its_creation_time() {
        let mut lr = json!({"metadata": {"creationTimestamp": "2026-05-28T20:16:40Z"}});
        LimitRanges.prepare_for_create(&mut lr);
        assert_eq!(meta_str(&lr, "name").len(), 36);
        assert_eq!(
            LimitRanges.cells(&lr, Time(0))[1],
            json!("2026-05-28T20:16:40Z")
        );
        assert!(LimitRanges.allow_create_on_update());
    }

    #[test]
    fn types_and_resource_names_are_checked_by_type() {
        let lr = json!({"spec": {"limits": [
            {"type": "Container", "max": {"storage": "1Gi"}},
            {"type": "Container"},
            {"type": "Pod", "default": {"cpu": "1"}},
            {"type": "PersistentVolumeClaim", "max": {"cpu": "1"}},
            {"type": "Bogus"},
        ]}});
        assert_eq!(
            messages(&lr),
            [
                "spec.limits[0].max[storage]: Invalid value: \"storage\": must be a standard \
                 resource for containers",
                "spec.limits[1].type: Duplicate value: \"Container\"",
                "spec.limits[2].default: Forbidden: may not be specified when `type` is 'Pod'",
                "spec.limits[3].limits: Required value: either minimum or maximum storage value \
                 is required, but neither was provided",
                "spec.limits[4].type: Invalid value: \"Bogus\": must be a standard limit type or \
                 fully qualified",
            ]
        );
    }

    #[test]
    fn bounds_are_ordered_and_ratios_bounded() {
        let lr = json!({"spec": {"limits": [{"type": "Container",
            "min": {"cpu": "2", "memory": "1Gi"}, "max": {"cpu": "1", "memory": "2Gi"},
            "default": {"memory": "4Gi"}, "defaultRequest": {"memory": "512Mi"},
            "maxLimitRequestRatio": {"memory": "3", "cpu": "500m"}}]}});
        assert_eq!(
            messages(&lr),
            [
                "spec.limits[0].min[cpu]: Invalid value: \"2\": min value 2 is greater than max \
                 value 1",
                "spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: \"500m\": ratio 500m is \
                 less than 1",
                "spec.limits[0].defaultRequest[memory]: Invalid value: \"512Mi\": min value 1Gi \
                 is greater than default request value 512Mi",
                "spec.limits[0].default[memory]: Invalid value: \"2Gi\": default value 4Gi is \
                 greater than max value 2Gi",
                "spec.limits[0].maxLimitRequestRatio[memory]: Invalid value: \"3\": ratio 3 is \
                 greater than max/min = 2.000000",
            ]
        );
        let gpu = json!({"spec": {"limits": [{"type": "Container",
            "default": {"example.com/gpu": "2"}, "defaultRequest": {"example.com/gpu": "1"}}]}});
        assert_eq!(
            messages(&gpu),
            [
                "spec.limits[0].defaultRequest[example.com/gpu]: Invalid value: \"1\": default \
              value 2 must equal to defaultRequest value 1 in example.com/gpu"
            ]
        );
    }
}
