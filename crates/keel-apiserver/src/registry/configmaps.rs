//! core/v1 ConfigMaps: NAME, DATA, AGE; data keys validated as apimachinery's
//! `IsConfigMapKey` validates them, data and binaryData together at most 1 MiB, and an
//! `immutable` ConfigMap's data kept as it is.

use serde_json::Value;

use crate::storage::FieldError;

use super::data::{MAX_SECRET_SIZE, data_size, immutable_data, validate_data_keys};
use super::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy};
use crate::apimachinery::time::Time;

/// The ConfigMap strategy.
pub struct ConfigMaps;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["cm"],
    ..ResourceInfo::new("", "v1", "ConfigMap", "configmaps", "configmap")
};

static COLUMNS: [Column; 3] = [
    NAME_COLUMN,
    Column::string(
        "Data",
        0,
        "Data contains the configuration data. Each key must consist of \
            alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must \
            use the BinaryData field. The keys stored in Data must not overlap with the keys in \
            the BinaryData field, this is enforced during validation process.",
    ),
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
        super::name_age_row(obj, now, [Value::from(count("data") + count("binaryData"))])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
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
        let errors = messages(&ConfigMaps.validate(&cm));
        assert_eq!(
            errors,
            vec![
                "data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric \
                 characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex \
                 used for validation is '[-._a-zA-Z0-9]+')",
                "data[dup]: Invalid value: \"dup\": duplicate of key present in binaryData",
            ]
        );
        let old = json!({"immutable": true, "data": {"a": "1"}});
        let new = json!({"data": {"a": "2"}});
        let errors = messages(&ConfigMaps.validate_update(&new, &old));
        assert_eq!(
            errors,
            vec![
                "immutable: Forbidden: field is immutable when `immutable` is set",
                "data: Forbidden: field is immutable when `immutable` is set",
            ]
        );
    }
}
