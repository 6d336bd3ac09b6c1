//! The data maps ConfigMaps and Secrets share: their keys checked as config keys, their size
//! counted against one limit, and what an `immutable` one may not change.

use serde_json::Value;

use crate::apimachinery::validation::is_config_map_key;
use crate::storage::FieldError;

/// The most a Secret's data, or a ConfigMap's data and binaryData together, may hold, in
/// bytes (`core.MaxSecretSize`).
pub const MAX_SECRET_SIZE: usize = 1024 * 1024;

/// The keys of `obj.<field>` checked as config keys (`data[a b]: Invalid value: "a b": ...`),
/// and each a duplicate if `obj.<other>` has it too (pass "" for no other field).
pub fn validate_data_keys(obj: &Value, field: &str, other: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(map) = obj.get(field).and_then(Value::as_object) else {
        return errors;
    };
    let others = obj.get(other).and_then(Value::as_object);
    for key in map.keys() {
        let path = format!("{field}[{key}]");
        for problem in is_config_map_key(key) {
            errors.push(FieldError::invalid(&path, key.as_str(), &problem));
        }
        if others.is_some_and(|o| o.contains_key(key)) {
            let detail = format!("duplicate of key present in {other}");
            errors.push(FieldError::invalid(&path, key.as_str(), &detail));
        }
    }
    errors
}

/// The bytes the data of a ConfigMap or a Secret holds, as their validation counts them
/// (Go's `len` of each value: a string's bytes, a `[]byte`'s decoded bytes): the maps at
/// `text` hold strings, those at `binary` base64 (already read as Go's decoder reads it).
pub fn data_size(obj: &Value, text: &[&str], binary: &[&str]) -> usize {
    let strings = |fields: &[&str]| {
        fields
            .iter()
            .filter_map(|f| obj.get(*f).and_then(Value::as_object))
            .flat_map(|m| m.values().filter_map(Value::as_str))
            .collect::<Vec<&str>>()
    };
    let decoded = |b64: &str| {
        let chars: Vec<u8> = b64
            .bytes()
            .filter(|c| !matches!(c, b'\n' | b'\r'))
            .collect();
        let padding = chars.iter().rev().take_while(|c| **c == b'=').count();
        (chars.len() / 4 * 3).saturating_sub(padding)
    };
    strings(text).iter().map(|s| s.len()).sum::<usize>()
        + strings(binary).iter().map(|s| decoded(s)).sum::<usize>()
}

/// An update of an object whose stored `immutable` is true: `immutable` may not be unset
/// and `fields` may not change (as ConfigMaps and Secrets are validated).
pub fn immutable_data(new: &Value, old: &Value, fields: &[&str]) -> Vec<FieldError> {
    const DETAIL: &str = "field is immutable when `immutable` is set";
    let mut errors = Vec::new();
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return errors;
    }
    if new.get("immutable").and_then(Value::as_bool) != Some(true) {
        errors.push(FieldError::forbidden("immutable", DETAIL));
    }
    for field in fields {
        if new.get(*field) != old.get(*field) {
            errors.push(FieldError::forbidden(field, DETAIL));
        }
    }
    errors
}
