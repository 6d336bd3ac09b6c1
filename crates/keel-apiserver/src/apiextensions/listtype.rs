//! The uniqueness of `x-kubernetes-list-type: set` and `map` lists in a custom resource, as
//! apiextensions-apiserver's `listtype.ValidateListSetsAndMaps` checks it after the schema:
//! each item of a set once, each key of a map list once (an item without the key has the
//! empty key). A repeat is `<path>[i]: Duplicate value: <value>`, the value as Go prints it
//! (`map[string]interface {}{"type":"Ready"}` for a map list's key). On an update a list
//! that already repeated in the old object is let be (upstream's ratcheting).

use serde_json::{Map, Value};

use crate::apimachinery::quote::go_quote;
use crate::storage::FieldError;

/// The duplicates in `obj`'s set and map lists under `schema`.
pub fn validate(schema: &Value, obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Value::Object(map) = obj {
        object(schema, map, "", &mut errors);
    }
    errors
}

/// As [`validate`] on an update: the new object's errors, unless the old object had some.
pub fn validate_update(schema: &Value, new: &Value, old: &Value) -> Vec<FieldError> {
    let errors = validate(schema, new);
    if errors.is_empty() || !validate(schema, old).is_empty() {
        return Vec::new();
    }
    errors
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn object(schema: &Value, map: &Map<String, Value>, path: &str, errors: &mut Vec<FieldError>) {
    if let Some(extra) = schema.get("additionalProperties").filter(|s| s.is_object()) {
        for (k, v) in map {
            node(extra, v, &format!("{path}[{k}]"), errors);
        }
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (k, v) in map {
            if let Some(sub) = properties.get(k) {
                node(sub, v, &child(path, k), errors);
            }
        }
    }
}

fn node(schema: &Value, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    match value {
        Value::Array(items) => list(schema, items, path, errors),
        Value::Object(map) => object(schema, map, path, errors),
        _ => {}
    }
}

fn list(schema: &Value, items: &[Value], path: &str, errors: &mut Vec<FieldError>) {
    match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => {
            for i in repeats(items) {
                errors.push(duplicate(&format!("{path}[{i}]"), &items[i]));
            }
        }
        Some("map") => map_list(schema, items, path, errors),
        _ => {}
    }
    if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
        for (i, item) in items.iter().enumerate() {
            node(item_schema, item, &format!("{path}[{i}]"), errors);
        }
    }
}

fn map_list(schema: &Value, items: &[Value], path: &str, errors: &mut Vec<FieldError>) {
    if let Some(i) = items.iter().position(|x| !x.is_null() && !x.is_object()) {
        let detail = "must be an object for an array of list-type map";
        errors.push(FieldError::invalid(
            &format!("{path}[{i}]"),
            items[i].clone(),
            detail,
        ));
        return;
    }
    let key_fields: Vec<&str> = schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    // Each item's key: the key fields it has (an item without them has the empty key).
    let keys: Vec<Value> = items
        .iter()
        .map(|x| {
            let mut key = Map::new();
            for f in &key_fields {
                if let Some(v) = x.get(f) {
                    key.insert((*f).to_string(), v.clone());
                }
            }
            Value::Object(key)
        })
        .collect();
    for i in repeats(&keys) {
        errors.push(duplicate(&format!("{path}[{i}]"), &keys[i]));
    }
}

/// The index of each value's second appearance, in order (a value seen three times once).
fn repeats(items: &[Value]) -> Vec<usize> {
    let mut seen: Vec<(&Value, usize)> = Vec::new();
    let mut out = Vec::new();
    for (i, x) in items.iter().enumerate() {
        match seen.iter_mut().find(|(v, _)| *v == x) {
            Some((_, times)) => {
                *times += 1;
                if *times == 2 {
                    out.push(i);
                }
            }
            None => seen.push((x, 1)),
        }
    }
    out
}

/// `field.Duplicate(path, value)`: scalars as `ErrorBody` prints them, compounds as `%#v`.
fn duplicate(path: &str, value: &Value) -> FieldError {
    let mut e = FieldError::duplicate(path, value.clone());
    if matches!(value, Value::Object(_) | Value::Array(_)) {
        e.printed = Some(go_sharp_v(value));
    }
    e
}

/// A decoded JSON value as Go's `%#v` prints it inside an `interface{}`.
fn go_sharp_v(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(f)) if f.fract() == 0.0 && f.abs() < 1e21 => format!("{}", f as i64),
            _ => n.to_string(),
        },
        Value::String(s) => go_quote(s),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(go_sharp_v).collect();
            format!("[]interface {{}}{{{}}}", inner.join(", "))
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", go_quote(k), go_sharp_v(&map[k.as_str()])))
                .collect();
            format!("map[string]interface {{}}{{{}}}", inner.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::storage::field::aggregate;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "status": {"type": "object", "properties": {
                "conditions": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["type"],
                    "items": {"type": "object", "properties": {
                        "type": {"type": "string"}, "status": {"type": "string"}}}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["port", "protocol"],
                    "items": {"type": "object"}},
                "tags": {"type": "array", "x-kubernetes-list-type": "set",
                    "items": {"type": "string"}},
                "plain": {"type": "array", "items": {"type": "string"}},
                "byName": {"type": "object", "additionalProperties": {
                    "type": "array", "x-kubernetes-list-type": "set",
                    "items": {"type": "integer"}}},
            }},
        }})
    }

    #[test]
    fn repeats_in_set_and_map_lists_are_upstreams_duplicates() {
        let obj = json!({"status": {
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "Ready", "status": "False"},
                {"type": "Ready"}, {"status": "x"}, {"status": "y"}],
            "ports": [{"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "TCP", "name": "b"}],
            "tags": ["a", "b", "a"],
            "plain": ["a", "a"],
            "byName": {"x": [1, 1]},
        }});
        assert_eq!(
            aggregate(&validate(&schema(), &obj)),
            "[status.byName[x][1]: Duplicate value: 1, \
             status.conditions[1]: Duplicate value: map[string]interface {}{\"type\":\"Ready\"}, \
             status.conditions[4]: Duplicate value: map[string]interface {}{}, \
             status.ports[1]: Duplicate value: map[string]interface {}{\"port\":80, \"protocol\":\"TCP\"}, \
             status.tags[2]: Duplicate value: \"a\"]"
        );
        let fine = json!({"status": {"conditions": [{"type": "Ready"}, {"type": "Issuing"}],
            "tags": ["a", "b"], "plain": ["a", "a"]}});
        assert!(validate(&schema(), &fine).is_empty());
        let not_object = json!({"status": {"conditions": ["Ready"]}});
        assert_eq!(
            aggregate(&validate(&schema(), &not_object)),
            "status.conditions[0]: Invalid value: \"Ready\": must be an object for an array of list-type map"
        );
    }

    #[test]
    fn an_update_keeps_an_old_repeat() {
        let bad = json!({"status": {"tags": ["a", "a"]}});
        let good = json!({"status": {"tags": ["a"]}});
        assert!(validate_update(&schema(), &bad, &bad).is_empty());
        assert_eq!(validate_update(&schema(), &bad, &good).len(), 1);
    }
}
