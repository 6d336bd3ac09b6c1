//! Defaults set where a field is missing, as Kubernetes' defaulters set them: a value where a
//! nil pointer is (`if x == nil { x = ... }`), a string where it is empty (`len(x) == 0`), and
//! an object made where a struct (or a pointer to one a defaulter allocates) is missing.

use serde_json::{Map, Value, json};

/// `obj` as a map, made an empty one if it is not an object.
pub fn as_map(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    match obj {
        Value::Object(m) => m,
        _ => unreachable!("just made an object"),
    }
}

/// `map[key]` as a map, made an empty one if it is missing or is not an object (Go's nil
/// pointer to a struct that a defaulter allocates).
pub fn object_entry<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    as_map(map.entry(key).or_insert(Value::Null))
}

/// Sets `map[key]` to `value` when it is missing or null (a nil pointer field).
pub fn default_value(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.into(), value);
    }
}

/// Sets `map[key]` to `value` when it is missing, null, not a string or "" (a string field's
/// zero value).
pub fn default_str(map: &mut Map<String, Value>, key: &str, value: &str) {
    if map
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        map.insert(key.into(), Value::from(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_only_what_is_missing() {
        let mut obj = json!({"a": null, "b": 2, "s": "", "t": "x", "o": 3});
        let map = as_map(&mut obj);
        default_value(map, "a", json!(1));
        default_value(map, "b", json!(1));
        default_value(map, "c", json!(1));
        default_str(map, "s", "d");
        default_str(map, "t", "d");
        default_str(map, "u", "d");
        object_entry(map, "o").insert("k".into(), json!(1));
        object_entry(map, "p");
        assert_eq!(
            obj,
            json!({"a": 1, "b": 2, "c": 1, "s": "d", "t": "x", "u": "d", "o": {"k": 1}, "p": {}})
        );
        let mut scalar = json!(5);
        as_map(&mut scalar);
        assert_eq!(scalar, json!({}));
    }
}
