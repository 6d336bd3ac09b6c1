//! What the apps/v1 workloads (Deployments, ReplicaSets, StatefulSets, DaemonSets) share:
//! filling in a spec's defaults, the checks of Kubernetes' `pkg/apis/apps/validation/
//! validation.go` they have in common (non-negative counts, the label selector, int-or-percent
//! rolling update bounds, selector immutability) with upstream's words and values as Go's
//! `json.Marshal` prints them, and the CONTAINERS and IMAGES cells of
//! `pkg/printers/internalversion/printers.go`.
//!
//! The defaults, non-negative counts, immutable fields, a selector's Go JSON and the
//! containers cells come from [`crate::registry::defaults`], [`crate::registry::rules`] and
//! [`crate::registry::printing`], which batch/v1 and the core kinds use too.

use serde_json::{Map, Value, json};

use crate::apimachinery::time::Time;
use crate::apimachinery::validation::{NON_NEGATIVE, percent_digits, percent_error};
use crate::json_pointer::At;
use crate::registry::defaults::object_entry;
use crate::registry::printing::{self, selector_json};
use crate::registry::rules::immutable_printed;
use crate::registry::selector::{LabelSelector, validate_label_selector};
use crate::registry::{name_age_row, template};
use crate::storage::FieldError;

/// The string at `map[key]` ("" when missing), as Go reads a string field.
pub fn str_field<'a>(map: &'a Map<String, Value>, key: &str) -> &'a str {
    map.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Runs `defaults` on the object's spec (made if missing, as Go's struct always is), then
/// gives its pod template the pod spec's defaults (the generated `SetObjectDefaults_*`
/// call `SetDefaults_PodSpec` on `spec.template.spec` whether or not a template was sent).
pub fn default_spec(obj: &mut Value, defaults: impl FnOnce(&mut Map<String, Value>)) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    let spec = object_entry(o, "spec");
    defaults(spec);
    object_entry(spec, "template");
    template::set_defaults(obj, "/spec/template");
}

/// Replaces the status with what a create starts from (kube's `PrepareForCreate` clears
/// it; `zero` is the empty status as Go writes it, its non-`omitempty` counts 0).
pub fn clear_status(obj: &mut Value, zero: Value) {
    if let Some(o) = obj.as_object_mut() {
        o.insert("status".into(), zero);
    }
}

/// The selector checks of `ValidateDeploymentSpec`, `ValidateReplicaSetSpec` and
/// `ValidateStatefulSetSpec`: required, valid (`ValidateLabelSelector`) and not empty
/// (`empty selector is invalid for <kind>`). Also whether it reads as a selector
/// (`LabelSelectorAsSelector`), which decides whether the template is checked against it.
pub fn validate_selector(spec: &Value, kind: &str) -> (Vec<FieldError>, bool) {
    let selector = spec.get("selector").filter(|s| !s.is_null());
    let Some(selector) = selector else {
        return (vec![FieldError::required("spec.selector", "")], true);
    };
    let mut errors = validate_label_selector(selector, "spec.selector");
    let count = |f: &str| {
        selector
            .get(f)
            .and_then(Value::as_object)
            .map_or(0, Map::len)
    };
    let expressions = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if count("matchLabels") + expressions == 0 {
        errors.push(FieldError::invalid_printed(
            "spec.selector",
            selector_json(Some(selector)),
            &format!("empty selector is invalid for {kind}"),
        ));
    }
    (errors, LabelSelector::from_object(selector).is_ok())
}

/// `ValidateImmutableField` of `spec.selector` (what apps/v1 updates of Deployments,
/// ReplicaSets and DaemonSets check), compared as `apiequality.Semantic` does.
pub fn selector_unchanged(new: &Value, old: &Value) -> Option<FieldError> {
    let new_selector = new.at("/spec/selector");
    let normal = |s: Option<&Value>| s.map(semantic);
    immutable_printed(
        "spec.selector",
        normal(new_selector).as_ref(),
        normal(old.at("/spec/selector")).as_ref(),
        selector_json(new_selector),
    )
}

/// `v` as `apiequality.Semantic.DeepEqual` compares it: zero values (null, "", 0, false,
/// empty lists and maps) are what an omitted field decodes to in Go, so they are left out.
pub fn semantic(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), semantic(v)))
                .filter(|(_, v)| !is_zero(v))
                .collect(),
        ),
        Value::Array(l) => Value::Array(l.iter().map(semantic).collect()),
        other => other.clone(),
    }
}

/// Whether `v` is what Go decodes an omitted field to.
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(l) => l.is_empty(),
        Value::Object(m) => m.is_empty(),
    }
}

/// `getPercentValue`: the number of a valid percent string (`25%`).
fn percent(v: &Value) -> Option<i64> {
    percent_digits(v.as_str()?)?.parse().ok()
}

/// `getIntOrPercentValue`: a percent's number, an integer, or (as `IntValue` reads a string
/// that is not one) the string's integer, 0 when it has none.
pub fn int_or_percent_value(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(s @ Value::String(text)) => percent(s).unwrap_or_else(|| text.parse().unwrap_or(0)),
        _ => 0,
    }
}

/// An int-or-string as Go's `json.Marshal` writes it (its zero value is the integer 0).
pub fn int_or_string_json(v: Option<&Value>) -> Value {
    match v {
        Some(v @ (Value::Number(_) | Value::String(_))) => v.clone(),
        _ => json!(0),
    }
}

/// `ValidatePositiveIntOrPercent`: a percent string (`IsValidPercent`) or a non-negative
/// integer.
pub fn positive_int_or_percent(v: Option<&Value>, path: &str) -> Vec<FieldError> {
    match v {
        Some(s @ Value::String(_)) if percent(s).is_none() => {
            vec![FieldError::invalid(path, s.clone(), &percent_error())]
        }
        Some(Value::Number(n)) if n.as_i64().is_some_and(|n| n < 0) => {
            vec![FieldError::invalid(path, n.clone(), NON_NEGATIVE)]
        }
        _ => Vec::new(),
    }
}

/// `IsNotMoreThan100Percent`.
pub fn not_more_than_100_percent(v: Option<&Value>, path: &str) -> Option<FieldError> {
    let value = percent(v?)?;
    (value > 100).then(|| FieldError::invalid(path, v.cloned(), "must not be greater than 100%"))
}

/// `layoutContainerCells` of the pod template: its container names and images,
/// comma-separated, as cells.
pub fn container_cells(obj: &Value) -> [Value; 2] {
    let (names, images) = printing::container_cells(obj, "/spec/template/spec");
    [names.into(), images.into()]
}

/// A workload's table row: its name, the `middle` cells, its age, and (wide) the template's
/// containers and images and, if the kind shows one, the `selector` cell.
pub fn wide_row(
    obj: &Value,
    now: Time,
    middle: impl IntoIterator<Item = Value>,
    selector: Option<Value>,
) -> Vec<Value> {
    let mut row = name_age_row(obj, now, middle);
    row.extend(container_cells(obj));
    row.extend(selector);
    row
}

/// The integer at `pointer` in `obj` (0 when unset), as an `int64` cell.
pub fn count(obj: &Value, pointer: &str) -> i64 {
    obj.at(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// The READY cell of Deployments and StatefulSets: `<status.readyReplicas>/<spec.replicas>`.
pub fn ready_of_desired(obj: &Value) -> Value {
    format!(
        "{}/{}",
        count(obj, "/status/readyReplicas"),
        count(obj, "/spec/replicas")
    )
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;

    #[test]
    fn int_or_percent_values_are_checked_as_upstream_checks_them() {
        assert_eq!(int_or_percent_value(Some(&json!("25%"))), 25);
        assert_eq!(int_or_percent_value(Some(&json!(3))), 3);
        assert_eq!(int_or_percent_value(Some(&json!("x"))), 0);
        assert!(positive_int_or_percent(Some(&json!("10%")), "p").is_empty());
        assert_eq!(
            messages(&positive_int_or_percent(Some(&json!("10")), "p")),
            vec![
                "p: Invalid value: \"10\": a valid percent string must be a numeric string \
                 followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is \
                 '[0-9]+%')"
            ]
        );
        assert_eq!(
            messages(&positive_int_or_percent(Some(&json!(-1)), "p")),
            vec!["p: Invalid value: -1: must be greater than or equal to 0"]
        );
        assert_eq!(
            not_more_than_100_percent(Some(&json!("101%")), "p").map(|e| e.to_string()),
            Some("p: Invalid value: \"101%\": must not be greater than 100%".to_string())
        );
    }

    #[test]
    fn zero_values_compare_equal_to_missing_fields() {
        assert_eq!(
            semantic(&json!({"a": {"b": []}, "c": 1, "d": ""})),
            json!({"c": 1})
        );
    }
}
