//! core/v1 ConfigMaps: NAME, DATA, AGE; data keys validated as apimachinery's
//! `IsConfigMapKey` validates them, data and binaryData together at most 1 MiB, and an
//! `immutable` ConfigMap's data kept as it is.

use serde_json::Value;

use crate::storage::FieldError;

use super::names::NameRule;
use super::secrets::MAX_SECRET_SIZE;
use super::time::Time;
use super::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy};

/// The ConfigMap strategy.
pub struct ConfigMaps;

static INFO: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "ConfigMap",
    resource: "configmaps",
    singular: "configmap",
    short_names: &["cm"],
    categories: &[],
    namespaced: true,
    name_rule: NameRule::Subdomain,
    status: false,
};

static COLUMNS: [Column; 3] = [
    NAME_COLUMN,
    Column {
        name: "Data",
        kind: "string",
        format: "",
        description: "Data contains the configuration data. Each key must consist of \
            alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must \
            use the BinaryData field. The keys stored in Data must not overlap with the keys in \
            the BinaryData field, this is enforced during validation process.",
        priority: 0,
    },
    AGE_COLUMN,
];

impl Strategy for ConfigMaps {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = validate_data_keys(obj, "data", "binaryData");
        errors.extend(validate_data_keys(obj, "binaryData", ""));
        if data_size(obj, &["data"], &["binaryData"]) > MAX_SECRET_SIZE {
            // The path "" names the whole object: Go writes it `[]`.
            errors.push(FieldError::too_long("[]", MAX_SECRET_SIZE));
        }
        errors
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = self.validate(new);
        errors.extend(immutable_data(new, old, &["data", "binaryData"]));
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let count = |field: &str| {
            obj.get(field)
                .and_then(Value::as_object)
                .map_or(0, |m| m.len())
        };
        vec![
            Value::from(super::meta_str(obj, "name")),
            Value::from(count("data") + count("binaryData")),
            super::age(obj, now),
        ]
    }
}

const CONFIG_KEY_MESSAGE: &str = "a valid config key must consist of alphanumeric characters, \
    '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for \
    validation is '[-._a-zA-Z0-9]+')";

/// What is wrong with a ConfigMap or Secret data key (apimachinery's `IsConfigMapKey`).
pub fn config_key_problems(key: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if key.len() > 253 {
        problems.push("must be no more than 253 characters".to_string());
    }
    let ok = !key.is_empty()
        && key
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    if !ok {
        problems.push(CONFIG_KEY_MESSAGE.to_string());
    }
    if key == "." {
        problems.push("must not be '.'".to_string());
    } else if key == ".." {
        problems.push("must not be '..'".to_string());
    } else if key.starts_with("..") {
        problems.push("must not start with '..'".to_string());
    }
    problems
}

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
        for problem in config_key_problems(key) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Status;
    use serde_json::json;

    #[test]
    fn data_above_a_mebibyte_is_too_long_for_the_whole_object() {
        let half = "x".repeat(MAX_SECRET_SIZE / 2);
        let at_limit = json!({"data": {"a": half, "b": half}});
        assert!(ConfigMaps.validate(&at_limit).is_empty());
        // binaryData counts its decoded bytes: 3 more.
        let over = json!({"data": {"a": half, "b": half}, "binaryData": {"c": "AAAA"}});
        let status = Status::invalid("", "ConfigMap", "x", &ConfigMaps.validate(&over));
        assert_eq!((status.code, status.reason), (422, "Invalid"));
        assert_eq!(
            status.message,
            "ConfigMap \"x\" is invalid: []: Too long: may not be more than 1048576 bytes"
        );
        let cause = &status.details.unwrap().causes[0];
        assert_eq!(
            (cause.kind.as_str(), cause.field.as_str()),
            ("FieldValueTooLong", "[]")
        );
        assert_eq!(
            data_size(
                &json!({"binaryData": {"a": "aGk=\n"}}),
                &[],
                &["binaryData"]
            ),
            2
        );
    }

    #[test]
    fn cells_count_data_and_binary_data() {
        let cm = json!({"metadata": {"name": "c", "creationTimestamp": "2026-05-28T20:21:40Z"},
            "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
        let cells = ConfigMaps.cells(&cm, Time(1_780_000_000));
        assert_eq!(cells, vec![json!("c"), json!(3), json!("5m")]);
    }

    #[test]
    fn data_keys_are_validated_as_apimachinery_words_it() {
        let cm =
            json!({"data": {"a b": "x", "ok.key": "y", "dup": "z"}, "binaryData": {"dup": "AA=="}});
        let errors: Vec<String> = ConfigMaps
            .validate(&cm)
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            errors,
            vec![
                "data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric \
                 characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex \
                 used for validation is '[-._a-zA-Z0-9]+')",
                "data[dup]: Invalid value: \"dup\": duplicate of key present in binaryData",
            ]
        );
        assert_eq!(config_key_problems(".."), vec!["must not be '..'"]);
        assert_eq!(config_key_problems("..a"), vec!["must not start with '..'"]);
        let old = json!({"immutable": true, "data": {"a": "1"}});
        let new = json!({"data": {"a": "2"}});
        let errors: Vec<String> = ConfigMaps
            .validate_update(&new, &old)
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            errors,
            vec![
                "immutable: Forbidden: field is immutable when `immutable` is set",
                "data: Forbidden: field is immutable when `immutable` is set",
            ]
        );
    }
}
