//! node.k8s.io/v1 RuntimeClasses (cluster-scoped): NAME, HANDLER, AGE (`printRuntimeClass`,
//! pkg/printers/internalversion/printers.go). node/v1 sets no defaults; as
//! pkg/registry/node/runtimeclass/strategy.go an update of a missing class creates it and
//! the generation is not kept. Validated as pkg/apis/node/validation/validation.go does: the
//! handler a DNS label and immutable, the overhead's resources (`ValidateContainerResourceRequirements`
//! of its `podFixed` as limits), the scheduling node selector's labels and tolerations
//! (`ValidateTolerations` and uniqueness).

use serde_json::Value;

use crate::apimachinery::quantity::quantity_nanos;
use crate::apimachinery::quote::go_quote;
use crate::apimachinery::time::Time;
use crate::apimachinery::validation::{is_dns1123_label, is_qualified_name, is_valid_label_value};
use crate::json_pointer::At;
use crate::registry::meta::validate_labels;
use crate::registry::rules::immutable;
use crate::registry::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, text};
use crate::storage::FieldError;

/// The RuntimeClass strategy.
pub struct RuntimeClasses;

static INFO: ResourceInfo = ResourceInfo {
    namespaced: false,
    ..ResourceInfo::new(
        "node.k8s.io",
        "v1",
        "RuntimeClass",
        "runtimeclasses",
        "runtimeclass",
    )
};

/// The Handler column's description is `metav1.ObjectMeta{}.SwaggerDoc()["handler"]`
/// upstream, which is empty.
static COLUMNS: [Column; 3] = [NAME_COLUMN, Column::string("Handler", 0, ""), AGE_COLUMN];

/// The taint effects a toleration may name.
const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
/// The toleration operators.
const OPERATORS: [&str; 2] = ["Equal", "Exists"];

/// `IsStandardContainerResourceName`.
fn standard_container_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-")
}

/// `ValidateContainerResourceRequirements` of the overhead's `podFixed` (as limits).
fn validate_overhead(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let fixed = obj.at("/overhead/podFixed").and_then(Value::as_object);
    for (name, quantity) in fixed.into_iter().flatten() {
        let at = format!("overhead.limits[{name}]");
        for problem in is_qualified_name(name) {
            errors.push(FieldError::invalid(&at, name.as_str(), &problem));
        }
        if !name.contains('/') && !standard_container_resource(name) {
            errors.push(FieldError::invalid(
                &at,
                name.as_str(),
                "must be a standard resource for containers",
            ));
        }
        let text = match quantity {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if quantity_nanos(&text).is_some_and(|n| n < 0) {
            errors.push(FieldError::invalid(
                &at,
                text.as_str(),
                "must be greater than or equal to 0",
            ));
        }
    }
    errors
}

/// A toleration as Go's `%#v` prints the internal `core.Toleration`.
fn toleration_go(t: &Value) -> String {
    let seconds = match t.get("tolerationSeconds").and_then(Value::as_i64) {
        Some(_) => "(*int64)(0xc000b2d000)".to_string(),
        None => "(*int64)(nil)".to_string(),
    };
    format!(
        "core.Toleration{{Key:{}, Operator:{}, Value:{}, Effect:{}, TolerationSeconds:{seconds}}}",
        go_quote(text(t, "/key")),
        go_quote(text(t, "/operator")),
        go_quote(text(t, "/value")),
        go_quote(text(t, "/effect")),
    )
}

/// `ValidateTolerations` and the uniqueness of (key, operator, value, effect).
fn validate_tolerations(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let list = obj.at("/scheduling/tolerations").and_then(Value::as_array);
    let list: Vec<&Value> = list.into_iter().flatten().collect();
    for (i, t) in list.iter().enumerate() {
        let at = format!("scheduling.tolerations[{i}]");
        let (key, operator, value, effect) = (
            text(t, "/key"),
            text(t, "/operator"),
            text(t, "/value"),
            text(t, "/effect"),
        );
        for problem in is_qualified_name(key)
            .into_iter()
            .filter(|_| !key.is_empty())
        {
            errors.push(FieldError::invalid(&format!("{at}.key"), key, &problem));
        }
        if key.is_empty() && operator != "Exists" {
            errors.push(FieldError::invalid(
                &format!("{at}.operator"),
                operator,
                "operator must be Exists when `key` is empty, which means \"match all values \
                 and all keys\"",
            ));
        }
        if t.get("tolerationSeconds").is_some_and(|s| !s.is_null()) && effect != "NoExecute" {
            errors.push(FieldError::invalid(
                &format!("{at}.effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match operator {
            "Equal" | "" => {
                let problems = is_valid_label_value(value);
                if !problems.is_empty() {
                    let at = format!("{at}.operator");
                    errors.push(FieldError::invalid(&at, value, &problems.join(";")));
                }
            }
            "Exists" if !value.is_empty() => errors.push(FieldError::invalid_printed(
                &format!("{at}.operator"),
                toleration_go(t),
                "value must be empty when `operator` is 'Exists'",
            )),
            "Exists" => {}
            other => errors.push(FieldError::not_supported(
                &format!("{at}.operator"),
                other,
                &OPERATORS,
            )),
        }
        if !effect.is_empty() && !EFFECTS.contains(&effect) {
            errors.push(FieldError::not_supported(
                &format!("{at}.effect"),
                effect,
                &EFFECTS,
            ));
        }
    }
    let mut seen: Vec<(&str, &str, &str, &str)> = Vec::new();
    for (i, t) in list.iter().enumerate() {
        let entry = (
            text(t, "/key"),
            text(t, "/operator"),
            text(t, "/value"),
            text(t, "/effect"),
        );
        if seen.contains(&entry) {
            errors.push(FieldError {
                printed: Some(toleration_go(t)),
                ..FieldError::duplicate(&format!("scheduling.tolerations[{i}]"), Value::Null)
            });
        } else {
            seen.push(entry);
        }
    }
    errors
}

impl Strategy for RuntimeClasses {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    /// `ValidateRuntimeClass`.
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let handler = text(obj, "/handler");
        for problem in is_dns1123_label(handler) {
            errors.push(FieldError::invalid("handler", handler, &problem));
        }
        errors.extend(validate_overhead(obj));
        if let Some(selector) = obj.at("/scheduling/nodeSelector").filter(|v| !v.is_null()) {
            errors.extend(validate_labels(selector, "scheduling.nodeSelector"));
        }
        errors.extend(validate_tolerations(obj));
        errors
    }

    /// `ValidateRuntimeClass` and `ValidateRuntimeClassUpdate`: the handler may not change.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = self.validate(new);
        errors.extend(immutable("handler", new.get("handler"), old.get("handler")));
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        crate::registry::name_age_row(obj, now, [Value::from(text(obj, "/handler"))])
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::json;

    #[test]
    fn handlers_overhead_and_scheduling_are_validated_in_upstream_words() {
        let good = json!({"handler": "runc", "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}},
            "scheduling": {"nodeSelector": {"runtime": "runc"}, "tolerations": [
                {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}});
        assert!(RuntimeClasses.validate(&good).is_empty());
        let bad = json!({"handler": "Run_C", "overhead": {"podFixed": {"cpu": "-1", "gpus": "1"}},
            "scheduling": {"nodeSelector": {"bad key": "x"}, "tolerations": [
                {"operator": "Equal", "value": "v"},
                {"key": "a", "operator": "Exists", "value": "v"},
                {"key": "a", "operator": "Near", "effect": "Sometimes", "tolerationSeconds": 5},
                {"key": "b", "effect": "NoExecute"},
                {"key": "b", "effect": "NoExecute"}]}});
        let errors = messages(&RuntimeClasses.validate(&bad));
        assert_eq!(errors.len(), 10, "{errors:#?}");
        assert!(
            errors[0].starts_with("handler: Invalid value: \"Run_C\": a lowercase RFC 1123 label")
        );
        assert_eq!(
            errors[1..3],
            [
                "overhead.limits[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
                "overhead.limits[gpus]: Invalid value: \"gpus\": must be a standard resource for \
                 containers",
            ]
        );
        assert!(errors[3].starts_with("scheduling.nodeSelector: Invalid value: \"bad key\""));
        assert_eq!(
            errors[4..],
            [
                "scheduling.tolerations[0].operator: Invalid value: \"Equal\": operator must be \
                 Exists when `key` is empty, which means \"match all values and all keys\"",
                "scheduling.tolerations[1].operator: Invalid value: core.Toleration{Key:\"a\", \
                 Operator:\"Exists\", Value:\"v\", Effect:\"\", TolerationSeconds:(*int64)(nil)}: \
                 value must be empty when `operator` is 'Exists'",
                "scheduling.tolerations[2].effect: Invalid value: \"Sometimes\": effect must be \
                 'NoExecute' when `tolerationSeconds` is set",
                "scheduling.tolerations[2].operator: Unsupported value: \"Near\": supported \
                 values: \"Equal\", \"Exists\"",
                "scheduling.tolerations[2].effect: Unsupported value: \"Sometimes\": supported \
                 values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
                "scheduling.tolerations[4]: Duplicate value: core.Toleration{Key:\"b\", \
                 Operator:\"\", Value:\"\", Effect:\"NoExecute\", TolerationSeconds:(*int64)(nil)}",
            ]
        );
    }

    #[test]
    fn the_handler_is_immutable_and_printed() {
        let old = json!({"handler": "runc"});
        let new = json!({"handler": "kata"});
        assert_eq!(
            messages(&RuntimeClasses.validate_update(&new, &old)),
            vec!["handler: Invalid value: \"kata\": field is immutable"]
        );
        let rc = json!({"metadata": {"name": "gvisor", "creationTimestamp": "2026-05-28T20:00:00Z"},
            "handler": "runsc"});
        assert_eq!(
            RuntimeClasses.cells(&rc, Time(1_780_000_000)),
            vec![json!("gvisor"), json!("runsc"), json!("26m")]
        );
        assert!(RuntimeClasses.allow_create_on_update());
        assert!(!RuntimeClasses.tracks_generation());
    }
}
