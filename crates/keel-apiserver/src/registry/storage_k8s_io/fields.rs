//! Small steps the storage, autoscaling, admissionregistration, certificates and
//! apiregistration kinds share: a default set where a field is missing (as a `nil` pointer
//! is in Go), a child object made where it is missing, and `ValidateImmutableField`.

use serde_json::{Map, Value, json};

use crate::apimachinery::validation::{max_len_error, regex_error};
use crate::json_pointer::At;
use crate::storage::FieldError;

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

/// `map[key]` as a map, made an empty one if it is missing or not an object.
pub fn child<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    as_map(map.entry(key).or_insert(Value::Null))
}

/// Sets `map[key]` to `value` when it is missing or null (Go's `if x == nil { x = ... }`).
pub fn default_value(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.into(), value);
    }
}

/// Sets `map[key]` to `value` when it is missing, null or "" (a string field's zero value).
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

/// The value at `pointer` in `obj`, null ones read as missing.
pub fn present<'a>(obj: &'a Value, pointer: &str) -> Option<&'a Value> {
    obj.at(pointer).filter(|v| !v.is_null())
}

/// `ValidateImmutableField`: `<path>: Invalid value: <new>: field is immutable` when the
/// value at `pointer` differs between `new` and `old` (missing and null alike).
pub fn immutable(new: &Value, old: &Value, pointer: &str, path: &str) -> Option<FieldError> {
    let (n, o) = (present(new, pointer), present(old, pointer));
    (n != o).then(|| {
        FieldError::invalid(
            path,
            n.cloned().unwrap_or(Value::Null),
            "field is immutable",
        )
    })
}

/// A string field's value at `pointer` ("" when unset).
pub fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.at(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The array at `pointer` (empty when unset).
pub fn items<'a>(obj: &'a Value, pointer: &str) -> &'a [Value] {
    obj.at(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A bool cell: the value at `pointer`, `unset` when missing (printers' `if x != nil`).
pub fn bool_or(obj: &Value, pointer: &str, unset: bool) -> Value {
    Value::from(obj.at(pointer).and_then(Value::as_bool).unwrap_or(unset))
}

/// `IsDNS1035Label`: what is wrong with `value` as a DNS-1035 label (an API version, an
/// admission review version).
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    let b = value.as_bytes();
    let ok = match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_lowercase()
                && (l.is_ascii_lowercase() || l.is_ascii_digit())
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        }
        _ => false,
    };
    if !ok {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start \
                with an alphabetic character, and end with an alphanumeric character",
            "[a-z]([-a-z0-9]*[a-z0-9])?",
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `%#v` of a Go `[]string` (how a field error shows a string list it holds).
pub fn go_strings(list: &[Value]) -> String {
    let quoted: Vec<String> = list
        .iter()
        .map(|v| crate::apimachinery::quote::go_quote(v.as_str().unwrap_or("")))
        .collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_only_what_is_missing_and_immutable_fields_compare_values() {
        let mut m = Map::new();
        m.insert("a".into(), json!(null));
        m.insert("b".into(), json!(false));
        default_value(&mut m, "a", json!(1));
        default_value(&mut m, "b", json!(true));
        default_str(&mut m, "c", "x");
        assert_eq!(Value::Object(m), json!({"a": 1, "b": false, "c": "x"}));
        let (old, new) = (json!({"s": {"x": 1}}), json!({"s": {"x": 2}}));
        assert_eq!(
            immutable(&new, &old, "/s/x", "s.x").map(|e| e.to_string()),
            Some("s.x: Invalid value: 2: field is immutable".to_string())
        );
        assert!(immutable(&old, &json!({"s": {"x": 1, "y": null}}), "/s/y", "s.y").is_none());
        assert!(is_dns1035_label("v1beta1").is_empty());
        assert_eq!(
            is_dns1035_label("1v"),
            vec![
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', \
                start with an alphabetic character, and end with an alphanumeric character (e.g. \
                'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert_eq!(
            go_strings(&[json!("a"), json!("b")]),
            r#"[]string{"a", "b"}"#
        );
    }
}
