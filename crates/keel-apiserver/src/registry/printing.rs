//! What the printers and validation errors of workload kinds show, as upstream writes it:
//! `layoutContainerCells` and `printBoolPtr` of `pkg/printers/internalversion/printers.go`,
//! and bad values as apimachinery's `field.Error` prints them in 1.34 (`json.Marshal` of the
//! Go value, a `metav1.LabelSelector`'s fields in their declared order, or no value at all
//! for `field.OmitValueType`), and the wide columns that show them. The apps and batch kinds,
//! ReplicationControllers, PodTemplates and PersistentVolumes use them.

use serde_json::Value;

use crate::json_pointer::At;
use crate::registry::Column;
use crate::storage::FieldError;

/// The `Containers` column (`-o wide`) of a kind with a pod template.
pub const CONTAINERS_COLUMN: Column =
    Column::string("Containers", 1, "Names of each container in the template.");

/// The `Images` column (`-o wide`) of a kind with a pod template.
pub const IMAGES_COLUMN: Column = Column::string(
    "Images",
    1,
    "Images referenced by each container in the template.",
);

/// The `Selector` column (`-o wide`) of Jobs and CronJobs.
pub const SELECTOR_COLUMN: Column = Column::string(
    "Selector",
    1,
    "A label query over pods that should match the pod count. Normally, the system sets this \
     field for you. More info: \
     https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
);

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

/// `json.Marshal` of a `*metav1.LabelSelector` (`null` when unset or not an object).
pub fn label_selector_json(selector: Option<&Value>) -> String {
    selector_json(selector.filter(|s| s.is_object()))
}

/// A `metav1.LabelSelector` as Go's `json.Marshal` writes it (`matchLabels` first, its keys
/// sorted; each requirement's `key`, `operator` and `values` in that order; empty fields left
/// out); `null` when there is none.
pub fn selector_json(selector: Option<&Value>) -> String {
    let Some(selector) = selector.filter(|s| !s.is_null()) else {
        return "null".into();
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
                let text = |f: &str| Value::from(e.get(f).and_then(Value::as_str).unwrap_or(""));
                let mut item = format!(
                    "{{\"key\":{},\"operator\":{}",
                    text("key"),
                    text("operator")
                );
                if let Some(values) = e.get("values").and_then(Value::as_array)
                    && !values.is_empty()
                {
                    item.push_str(&format!(",\"values\":{}", Value::Array(values.clone())));
                }
                item.push('}');
                item
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
        assert_eq!(label_selector_json(Some(&json!("x"))), "null");
        let s = json!({"matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [{"key": "k", "operator": "Exists"}]});
        assert_eq!(
            selector_json(Some(&s)),
            r#"{"matchLabels":{"a":"1","b":"2"},"matchExpressions":[{"key":"k","operator":"Exists"}]}"#
        );
        assert_eq!(selector_json(Some(&json!({}))), "{}");
        assert_eq!(selector_json(Some(&json!("x"))), "{}");
        assert_eq!(selector_json(None), "null");
    }
}
