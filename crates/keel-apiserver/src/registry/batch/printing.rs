//! What the printers and validation errors of workload kinds show, as upstream writes it:
//! `layoutContainerCells` and `printBoolPtr` of `pkg/printers/internalversion/printers.go`,
//! and bad values as apimachinery's `field.Error` prints them in 1.34 (`json.Marshal` of the
//! Go value, a `metav1.LabelSelector`'s fields in their declared order, or no value at all
//! for `field.OmitValueType`). Jobs, CronJobs and ReplicationControllers use them; the apps
//! kinds could too.

use serde_json::Value;

use crate::json_pointer::At;
use crate::storage::FieldError;

/// `layoutContainerCells` of the pod spec at `pointer` in `obj`: the containers' names and
/// images, each joined with commas.
pub fn container_cells(obj: &Value, pointer: &str) -> (String, String) {
    let containers = obj
        .at(&format!("{pointer}/containers"))
        .and_then(Value::as_array);
    let field = |name: &str| -> String {
        containers
            .into_iter()
            .flatten()
            .map(|c| c.get(name).and_then(Value::as_str).unwrap_or(""))
            .collect::<Vec<_>>()
            .join(",")
    };
    (field("name"), field("image"))
}

/// `printBoolPtr`: `True`, `False`, or `<unset>` when the field is missing.
pub fn bool_ptr(value: Option<&Value>) -> &'static str {
    match value.and_then(Value::as_bool) {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    }
}

/// `json.Marshal` of a `*metav1.LabelSelector` (`null` when unset): `matchLabels` before
/// `matchExpressions`, each requirement's `key`, `operator` and `values` in that order.
pub fn label_selector_json(selector: Option<&Value>) -> String {
    let Some(selector) = selector.filter(|s| s.is_object()) else {
        return "null".to_string();
    };
    let mut parts = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object)
        && !labels.is_empty()
    {
        parts.push(format!("\"matchLabels\":{}", Value::Object(labels.clone())));
    }
    if let Some(expressions) = selector.get("matchExpressions").and_then(Value::as_array)
        && !expressions.is_empty()
    {
        let items: Vec<String> = expressions
            .iter()
            .map(|e| {
                let mut fields = Vec::new();
                for key in ["key", "operator"] {
                    let v = e.get(key).and_then(Value::as_str).unwrap_or("");
                    fields.push(format!("\"{key}\":{}", Value::from(v)));
                }
                if let Some(values) = e.get("values").and_then(Value::as_array)
                    && !values.is_empty()
                {
                    fields.push(format!("\"values\":{}", Value::Array(values.clone())));
                }
                format!("{{{}}}", fields.join(","))
            })
            .collect();
        parts.push(format!("\"matchExpressions\":[{}]", items.join(",")));
    }
    format!("{{{}}}", parts.join(","))
}

/// `field.Invalid(path, field.OmitValueType{}, detail)`: `<path>: Invalid value: <detail>`,
/// no value shown.
pub fn invalid_without_value(path: &str, detail: &str) -> FieldError {
    FieldError::invalid_printed(path, detail.to_string(), "")
}

/// `ValidateImmutableField`: `<path>: Invalid value: <new>: field is immutable` when the
/// values differ (`printed` is the new value as upstream prints it).
pub fn immutable(
    path: &str,
    new: Option<&Value>,
    old: Option<&Value>,
    printed: String,
) -> Option<FieldError> {
    let unset = |v: Option<&Value>| v.filter(|v| !v.is_null()).cloned();
    (unset(new) != unset(old))
        .then(|| FieldError::invalid_printed(path, printed, "field is immutable"))
}

/// A value as `json.Marshal` writes it (`null` when unset).
pub fn json_text(value: Option<&Value>) -> String {
    value.map_or_else(|| "null".to_string(), Value::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cells_and_values_print_as_upstream_prints_them() {
        let job = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "x:1"}, {"name": "b", "image": "y"}]}}}});
        assert_eq!(
            container_cells(&job, "/spec/template/spec"),
            ("a,b".to_string(), "x:1,y".to_string())
        );
        assert_eq!(
            container_cells(&json!({}), "/spec/template/spec"),
            (String::new(), String::new())
        );
        assert_eq!(bool_ptr(Some(&json!(true))), "True");
        assert_eq!(bool_ptr(Some(&json!(false))), "False");
        assert_eq!(bool_ptr(None), "<unset>");
        let selector = json!({"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}],
            "matchLabels": {"b": "2", "a": "1"}});
        assert_eq!(
            label_selector_json(Some(&selector)),
            r#"{"matchLabels":{"a":"1","b":"2"},"matchExpressions":[{"key":"k","operator":"In","values":["v"]}]}"#
        );
        assert_eq!(label_selector_json(None), "null");
        assert_eq!(
            invalid_without_value("spec.x", "specifying one is required").to_string(),
            "spec.x: Invalid value: specifying one is required"
        );
        assert_eq!(
            immutable("spec.a", Some(&json!(2)), Some(&json!(1)), "2".into())
                .map(|e| e.to_string()),
            Some("spec.a: Invalid value: 2: field is immutable".to_string())
        );
        assert!(immutable("spec.a", Some(&Value::Null), None, "null".into()).is_none());
    }
}
