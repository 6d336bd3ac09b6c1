//! core/v1 Secrets: NAME, TYPE, DATA, AGE. `stringData` is folded into `data` (as the v1
//! to internal conversion does), `type` defaults to `Opaque`, data keys and each type's
//! required keys are validated, and `type` (and an `immutable` Secret's data) may not change.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use super::data::{MAX_SECRET_SIZE, data_size, immutable_data, validate_data_keys};
use super::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy};
use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::storage::FieldError;

/// The Secret strategy.
pub struct Secrets;

static INFO: ResourceInfo = ResourceInfo::new("", "v1", "Secret", "secrets", "secret");

static COLUMNS: [Column; 4] = [
    NAME_COLUMN,
    Column::string(
        "Type",
        0,
        "Used to facilitate programmatic handling of secret data. More info: \
            https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
    ),
    Column::string(
        "Data",
        0,
        "Data contains the secret data. Each key must consist of alphanumeric \
            characters, '-', '_' or '.'. The serialized form of the secret data is a base64 \
            encoded string, representing the arbitrary (possibly non-string) data value here. \
            Described in https://tools.ietf.org/html/rfc4648#section-4",
    ),
    AGE_COLUMN,
];

/// `stringData` merged into `data` (base64-encoded, overwriting) and dropped; `type`
/// defaulted to `Opaque`.
fn normalize(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(strings)) = o.remove("stringData")
        && !strings.is_empty()
    {
        let data = o.entry("data").or_insert_with(|| Value::Object(Map::new()));
        if !data.is_object() {
            *data = Value::Object(Map::new());
        }
        if let Some(data) = data.as_object_mut() {
            for (k, v) in strings {
                let text = v.as_str().unwrap_or_default();
                data.insert(k, Value::from(STANDARD.encode(text)));
            }
        }
    }
    if o.get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        o.insert("type".into(), Value::from("Opaque"));
    }
}

fn has_key(obj: &Value, key: &str) -> bool {
    obj.get("data")
        .and_then(Value::as_object)
        .is_some_and(|d| d.contains_key(key))
}

impl Strategy for Secrets {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        normalize(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        normalize(new);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = validate_data_keys(obj, "data", "");
        if data_size(obj, &[], &["data"]) > MAX_SECRET_SIZE {
            errors.push(FieldError::too_long("data", MAX_SECRET_SIZE));
        }
        let required = |key: &str| FieldError::required(&format!("data[{key}]"), "");
        match obj.get("type").and_then(Value::as_str).unwrap_or("") {
            "kubernetes.io/service-account-token" => {
                let name = obj
                    .at("/metadata/annotations/kubernetes.io~1service-account.name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if name.is_empty() {
                    errors.push(FieldError::required(
                        "metadata.annotations[kubernetes.io/service-account.name]",
                        "",
                    ));
                }
            }
            "kubernetes.io/dockercfg" if !has_key(obj, ".dockercfg") => {
                errors.push(required(".dockercfg"))
            }
            "kubernetes.io/dockerconfigjson" if !has_key(obj, ".dockerconfigjson") => {
                errors.push(required(".dockerconfigjson"))
            }
            "kubernetes.io/basic-auth"
                if !has_key(obj, "username") && !has_key(obj, "password") =>
            {
                errors.push(required("username"));
                errors.push(required("password"));
            }
            "kubernetes.io/ssh-auth" => {
                let key = obj
                    .at("/data/ssh-privatekey")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if key.is_empty() {
                    errors.push(required("ssh-privatekey"));
                }
            }
            "kubernetes.io/tls" => {
                for key in ["tls.crt", "tls.key"] {
                    if !has_key(obj, key) {
                        errors.push(required(key));
                    }
                }
            }
            _ => {}
        }
        errors
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let new_type = new.get("type").and_then(Value::as_str).unwrap_or("");
        let old_type = old.get("type").and_then(Value::as_str).unwrap_or("");
        if new_type != old_type {
            errors.push(FieldError::invalid("type", new_type, "field is immutable"));
        }
        errors.extend(immutable_data(new, old, &["data"]));
        errors.extend(self.validate(new));
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let data = obj
            .get("data")
            .and_then(Value::as_object)
            .map_or(0, |m| m.len());
        super::name_age_row(
            obj,
            now,
            [
                Value::from(obj.get("type").and_then(Value::as_str).unwrap_or("")),
                Value::from(data),
            ],
        )
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["type"]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::json;

    #[test]
    fn string_data_is_folded_into_data_and_type_defaults_to_opaque() {
        let mut s = json!({"metadata": {"name": "s"}, "data": {"a": "eA=="},
            "stringData": {"a": "hello", "b": "x"}});
        Secrets.prepare_for_create(&mut s);
        assert_eq!(
            s,
            json!({"metadata": {"name": "s"}, "type": "Opaque",
                "data": {"a": "aGVsbG8=", "b": "eA=="}})
        );
        let created = json!({"metadata": {"name": "s", "creationTimestamp": "2026-05-28T18:26:40Z"},
            "type": "Opaque", "data": {"a": "aGVsbG8=", "b": "eA=="}});
        assert_eq!(
            Secrets.cells(&created, Time(1_780_000_000)),
            vec![json!("s"), json!("Opaque"), json!(2), json!("120m")]
        );
        assert_eq!(Secrets.field(&created, "type"), "Opaque");
    }

    #[test]
    fn keys_types_and_updates_are_validated_as_kube_words_them() {
        let tls = json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "", "bad key": ""}});
        assert_eq!(
            messages(&Secrets.validate(&tls)),
            vec![
                "data[bad key]: Invalid value: \"bad key\": a valid config key must consist of \
                 alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or \
                 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                "data[tls.key]: Required value",
            ]
        );
        let sa = json!({"type": "kubernetes.io/service-account-token", "metadata": {}});
        assert_eq!(
            messages(&Secrets.validate(&sa)),
            vec!["metadata.annotations[kubernetes.io/service-account.name]: Required value"]
        );
        let basic = json!({"type": "kubernetes.io/basic-auth"});
        assert_eq!(
            messages(&Secrets.validate(&basic)),
            vec![
                "data[username]: Required value",
                "data[password]: Required value"
            ]
        );
        let old = json!({"type": "Opaque", "immutable": true, "data": {"a": "eA=="}});
        let new = json!({"type": "kubernetes.io/ssh-auth", "immutable": true, "data": {}});
        assert_eq!(
            messages(&Secrets.validate_update(&new, &old)),
            vec![
                "type: Invalid value: \"kubernetes.io/ssh-auth\": field is immutable",
                "data: Forbidden: field is immutable when `immutable` is set",
                "data[ssh-privatekey]: Required value",
            ]
        );
        let big = json!({"type": "Opaque", "data": {"a": STANDARD.encode(vec![0u8; MAX_SECRET_SIZE + 1])}});
        assert_eq!(
            messages(&Secrets.validate(&big)),
            vec!["data: Too long: may not be more than 1048576 bytes"]
        );
    }
}
