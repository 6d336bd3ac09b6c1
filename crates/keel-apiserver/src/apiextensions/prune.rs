//! Pruning: what a custom resource's schema does not declare is dropped, as
//! apiextensions-apiserver's structural pruning drops it from every request's object (and a
//! CRD's defaults). An object keeps the properties its schema names, every key where it has
//! `additionalProperties`, and everything under `x-kubernetes-preserve-unknown-fields`
//! (whose named properties are still pruned inside). At the root of the resource, and of
//! every `x-kubernetes-embedded-resource`, `apiVersion`, `kind` and `metadata` always stay.
//! The dropped fields' paths come back (`spec.foo`, `spec.items[0].bar`), for
//! `fieldValidation` to warn of or refuse (`unknown field "spec.foo"`).

use serde_json::Value;

/// Drops from `value` what `schema` does not declare; the paths of the fields dropped, in
/// the order met (keys in name order).
pub fn prune(schema: &Value, value: &mut Value) -> Vec<String> {
    let mut dropped = Vec::new();
    walk(schema, value, "", true, &mut dropped);
    dropped
}

/// [`prune`] of a value that is not a resource (a default): `apiVersion`, `kind` and
/// `metadata` at its top are pruned like any other field.
pub fn prune_value(schema: &Value, value: &mut Value) -> Vec<String> {
    let mut dropped = Vec::new();
    walk(schema, value, "", false, &mut dropped);
    dropped
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn walk(
    schema: &Value,
    value: &mut Value,
    path: &str,
    resource_root: bool,
    dropped: &mut Vec<String>,
) {
    let preserve = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let mut names: Vec<String> = map.keys().cloned().collect();
            names.sort();
            for name in names {
                let here = join(path, &name);
                if resource_root && matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
                    if let (Some(property), Some(v)) =
                        (properties.and_then(|p| p.get(&name)), map.get_mut(&name))
                        && name != "metadata"
                    {
                        walk(property, v, &here, false, dropped);
                    }
                    continue;
                }
                let schema_of = properties.and_then(|p| p.get(&name)).or(additional);
                match (schema_of, map.get_mut(&name)) {
                    (Some(s), Some(v)) => {
                        let embedded =
                            s.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
                        walk(s, v, &here, embedded, dropped);
                    }
                    _ if preserve || additional_allows_all(schema) => {}
                    _ => {
                        map.remove(&name);
                        dropped.push(here);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                let embedded =
                    item_schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
                for (i, item) in items.iter_mut().enumerate() {
                    walk(
                        item_schema,
                        item,
                        &format!("{path}[{i}]"),
                        embedded,
                        dropped,
                    );
                }
            }
        }
        _ => {}
    }
}

/// `additionalProperties: true`: any key, nothing known about its value.
fn additional_allows_all(schema: &Value) -> bool {
    schema.get("additionalProperties") == Some(&Value::Bool(true))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn unknown_fields_go_and_their_paths_come_back() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                    "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}}},
            }},
        }});
        let mut value = json!({
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "status": {"ready": true},
            "spec": {
                "replicas": 1, "extra": 2,
                "items": [{"name": "a", "bad": 1}],
                "labels": {"x": "1"},
                "free": {"anything": {"goes": 1}, "known": {"a": "1", "b": "2"}},
                "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                    "spec": {"x": "1", "y": "2"}, "other": 1},
            },
        });
        let dropped = prune(&schema, &mut value);
        assert_eq!(
            dropped,
            [
                "spec.extra",
                "spec.free.known.b",
                "spec.items[0].bad",
                "spec.template.other",
                "spec.template.spec.y",
                "status",
            ]
        );
        assert_eq!(
            value,
            json!({
                "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                "spec": {
                    "replicas": 1,
                    "items": [{"name": "a"}],
                    "labels": {"x": "1"},
                    "free": {"anything": {"goes": 1}, "known": {"a": "1"}},
                    "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                        "spec": {"x": "1"}},
                },
            })
        );
    }
}
