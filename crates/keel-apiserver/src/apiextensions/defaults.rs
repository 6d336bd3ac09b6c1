//! A custom resource's defaults, as apiextensions-apiserver's structural defaulting sets them
//! (on a request's object and on every object read from storage): a property missing from
//! its object, or `null` where the schema does not allow `null`, gets a copy of its
//! `default`, and so does a `null` item of a list or value of a map whose schema has one;
//! defaults nest (a defaulted object is defaulted in turn). Then, as upstream does since
//! 1.20, a `null` that remains where `null` is not allowed is dropped.

use serde_json::Value;

/// Sets the defaults `schema` gives `value`, in place.
pub fn apply(schema: &Value, value: &mut Value) {
    default(schema, value);
    drop_nulls(schema, value);
}

fn nullable(schema: &Value) -> bool {
    schema.get("nullable") == Some(&Value::Bool(true))
}

fn default(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    let Some(default) = property.get("default") else {
                        continue;
                    };
                    let missing = match map.get(name) {
                        None => true,
                        Some(Value::Null) => !nullable(property),
                        Some(_) => false,
                    };
                    if missing {
                        map.insert(name.clone(), default.clone());
                    }
                }
            }
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (name, v) in map.iter_mut() {
                match property(schema, name) {
                    Some(property) => default(property, v),
                    None => {
                        if let Some(additional) = additional {
                            fill_null(additional, v);
                            default(additional, v);
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for item in items {
                    fill_null(item_schema, item);
                    default(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

fn property<'a>(schema: &'a Value, name: &str) -> Option<&'a Value> {
    schema.get("properties")?.get(name)
}

/// A `null` where `schema` allows none but has a default becomes the default.
fn fill_null(schema: &Value, value: &mut Value) {
    if value.is_null()
        && !nullable(schema)
        && let Some(default) = schema.get("default")
    {
        *value = default.clone();
    }
}

/// Drops the `null` properties (list items stay) where `null` is not allowed
/// (upstream's `PruneNonNullableNullsWithoutDefaults`).
fn drop_nulls(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let keep = |name: &str, v: &Value| {
                if !v.is_null() {
                    return true;
                }
                match property(schema, name).or(additional) {
                    Some(s) => nullable(s) || s.get("default").is_some(),
                    None => true,
                }
            };
            let names: Vec<String> = map
                .iter()
                .filter(|(k, v)| !keep(k, v))
                .map(|(k, _)| k.clone())
                .collect();
            for name in names {
                map.remove(&name);
            }
            for (name, v) in map.iter_mut() {
                if let Some(s) = property(schema, name).or(additional) {
                    drop_nulls(s, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                items
                    .iter_mut()
                    .for_each(|item| drop_nulls(item_schema, item));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn missing_and_null_fields_get_their_defaults_and_defaults_nest() {
        let schema = json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "default": {},
            "properties": {
                "replicas": {"type": "integer", "default": 1},
                "mode": {"type": "string", "default": "fast"},
                "keep": {"type": "string", "nullable": true, "default": "x"},
                "gone": {"type": "string"},
                "strategy": {"type": "object", "default": {"type": "Rolling"},
                    "properties": {"type": {"type": "string"}, "maxSurge": {"type": "integer", "default": 25}}},
                "ports": {"type": "array", "items": {"type": "object",
                    "properties": {"protocol": {"type": "string", "default": "TCP"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string", "default": "v"}},
            },
        }}});
        let mut empty = json!({});
        apply(&schema, &mut empty);
        assert_eq!(
            empty,
            json!({"spec": {"replicas": 1, "mode": "fast", "keep": "x",
                "strategy": {"type": "Rolling", "maxSurge": 25}}})
        );
        let mut value = json!({"spec": {
            "replicas": 3, "mode": null, "keep": null, "gone": null,
            "ports": [{"port": 80}, {"protocol": "UDP"}],
            "labels": {"a": null, "b": "1"},
        }});
        apply(&schema, &mut value);
        assert_eq!(
            value,
            json!({"spec": {
                "replicas": 3, "mode": "fast", "keep": null, "strategy": {"type": "Rolling", "maxSurge": 25},
                "ports": [{"port": 80, "protocol": "TCP"}, {"protocol": "UDP"}],
                "labels": {"a": "v", "b": "1"},
            }})
        );
    }
}
