//! A custom resource checked against its CRD's `openAPIV3Schema`, as apiextensions-apiserver
//! checks it (kube-openapi's schema validator, its results turned into field errors by
//! `kubeOpenAPIResultToFieldErrors`). Each node runs kube-openapi's validators in their
//! order: type (a value of the wrong type ends the node), string (`maxLength`, `minLength`,
//! `pattern`), format, number (`multipleOf`, `maximum`, `minimum`), list (`minItems`,
//! `maxItems`, items), `enum`, object (`maxProperties`, `minProperties`, `required`,
//! properties and `additionalProperties`), then `allOf`, `anyOf`, `oneOf` and `not`. Words
//! are upstream's: `spec.replicas: Invalid value: "string": spec.replicas in body must be of
//! type integer: "string"`, `spec.size: Invalid value: 11: spec.size in body should be less
//! than or equal to 10`, `spec.name: Too long: may not be more than 5 bytes`,
//! `spec.items: Too many: 3: must have at most 2 items`, `spec.mode: Unsupported value: "x":
//! supported values: "a", "b"`, `spec.host: Required value`. Properties are checked in name
//! order (Go walks a map, in no order at all).

use serde_json::{Map, Value};

use super::formats;
use crate::storage::FieldError;
use crate::storage::field::Kind;

/// The errors of `value` against `schema` (nothing when it fits).
pub fn validate(schema: &Value, value: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    check(schema, value, "", &mut errors);
    errors
}

/// The name of a JSON value's type, as kube-openapi's errors print it.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `<path> in body`, kube-openapi's name for the place (`.` at the root).
fn place(path: &str) -> String {
    let name = if path.is_empty() { "." } else { path };
    format!("{name} in body")
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name) == Some(&Value::Bool(true))
}

/// A number as Go's `%v` prints a float64 of the schema (`10`, `1.5`).
fn number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e21 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

fn check(schema: &Value, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    if !check_type(schema, value, path, errors) {
        return;
    }
    match value {
        Value::String(s) => {
            check_string(schema, s, path, errors);
            check_format(schema, s, path, errors);
        }
        Value::Number(n) => check_number(schema, value, n.as_f64().unwrap_or(0.0), path, errors),
        Value::Array(items) => check_list(schema, items, path, errors),
        _ => {}
    }
    check_enum(schema, value, path, errors);
    if let Value::Object(map) = value {
        check_object(schema, map, path, errors);
    }
    check_combinators(schema, value, path, errors);
}

/// The type check: false when the value is not of the schema's type (or null where null is
/// not allowed), which ends the node.
fn check_type(schema: &Value, value: &Value, path: &str, errors: &mut Vec<FieldError>) -> bool {
    let want = schema.get("type").and_then(Value::as_str).unwrap_or("");
    if value.is_null() {
        if flag(schema, "nullable") || want.is_empty() {
            return false;
        }
    } else if flag(schema, "x-kubernetes-int-or-string") {
        if matches!(type_name(value), "integer" | "string") {
            return true;
        }
    } else {
        let got = type_name(value);
        let fits = match want {
            "" => true,
            "number" => matches!(got, "integer" | "number"),
            want => got == want,
        };
        if fits {
            return true;
        }
    }
    let want = if want.is_empty() {
        "integer,string"
    } else {
        want
    };
    let got = type_name(value);
    let detail = format!("{} must be of type {want}: \"{got}\"", place(path));
    errors.push(FieldError::type_invalid(path, got, &detail));
    false
}

fn check_string(schema: &Value, s: &str, path: &str, errors: &mut Vec<FieldError>) {
    let length = s.chars().count() as u64;
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && length > max
    {
        errors.push(FieldError::too_long(path, max as usize));
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && length < min
    {
        let detail = format!("{} should be at least {min} chars long", place(path));
        errors.push(FieldError::invalid(path, s, &detail));
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        let fits = super::go_regex::compile(pattern).map(|re| re.is_match(s));
        if fits != Ok(true) {
            let detail = format!("{} should match '{pattern}'", place(path));
            errors.push(FieldError::invalid(path, s, &detail));
        }
    }
}

fn check_format(schema: &Value, s: &str, path: &str, errors: &mut Vec<FieldError>) {
    let Some(format) = schema.get("format").and_then(Value::as_str) else {
        return;
    };
    if formats::fits(format, s) == Some(false) {
        let detail = format!("{} must be of type {format}: \"{s}\"", place(path));
        errors.push(FieldError::type_invalid(path, s, &detail));
    }
}

fn check_number(schema: &Value, value: &Value, n: f64, path: &str, errors: &mut Vec<FieldError>) {
    let bound = |name: &str| schema.get(name).and_then(Value::as_f64);
    let mut fail = |detail: String| errors.push(FieldError::invalid(path, value.clone(), &detail));
    if let Some(m) = bound("multipleOf")
        && m != 0.0
        && (n / m).fract() != 0.0
    {
        fail(format!(
            "{} should be a multiple of {}",
            place(path),
            number(m)
        ));
    }
    if let Some(max) = bound("maximum") {
        if flag(schema, "exclusiveMaximum") && n >= max {
            fail(format!(
                "{} should be less than {}",
                place(path),
                number(max)
            ));
        } else if n > max {
            fail(format!(
                "{} should be less than or equal to {}",
                place(path),
                number(max)
            ));
        }
    }
    if let Some(min) = bound("minimum") {
        if flag(schema, "exclusiveMinimum") && n <= min {
            fail(format!(
                "{} should be greater than {}",
                place(path),
                number(min)
            ));
        } else if n < min {
            fail(format!(
                "{} should be greater than or equal to {}",
                place(path),
                number(min)
            ));
        }
    }
}

fn check_list(schema: &Value, items: &[Value], path: &str, errors: &mut Vec<FieldError>) {
    let size = items.len();
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
        && (size as u64) < min
    {
        let detail = format!("{} should have at least {min} items", place(path));
        errors.push(FieldError::invalid(path, size, &detail));
    }
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
        && size as u64 > max
    {
        errors.push(FieldError::too_many(path, size, max as usize));
    }
    if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
        for (i, item) in items.iter().enumerate() {
            check(item_schema, item, &format!("{path}[{i}]"), errors);
        }
    }
}

fn check_enum(schema: &Value, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let Some(allowed) = schema.get("enum").and_then(Value::as_array) else {
        return;
    };
    if allowed.contains(value) {
        return;
    }
    let quoted: Vec<String> = allowed
        .iter()
        .map(|v| match v {
            Value::String(s) => crate::apimachinery::quote::go_quote(s),
            other => crate::apimachinery::quote::go_quote(&other.to_string()),
        })
        .collect();
    errors.push(FieldError {
        kind: Kind::NotSupported,
        field: path.to_string(),
        value: Some(value.clone()),
        printed: None,
        detail: format!("supported values: {}", quoted.join(", ")),
    });
}

fn check_object(
    schema: &Value,
    map: &Map<String, Value>,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    let size = map.len();
    if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
        && size as u64 > max
    {
        errors.push(FieldError::too_many(path, size, max as usize));
    }
    if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
        && (size as u64) < min
    {
        let detail = format!("{} should have at least {min} properties", place(path));
        errors.push(FieldError::invalid(path, "", &detail));
    }
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !map.contains_key(name) {
            errors.push(FieldError::required(&child(path, name), ""));
        }
    }
    if flag(schema, "x-kubernetes-embedded-resource") {
        for name in ["apiVersion", "kind"] {
            if map
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                errors.push(FieldError::required(
                    &child(path, name),
                    "must not be empty",
                ));
            }
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    let mut names: Vec<&String> = map.keys().collect();
    names.sort();
    for name in names {
        let value = &map[name];
        match properties.and_then(|p| p.get(name)) {
            Some(property) => check(property, value, &child(path, name), errors),
            None => {
                if let Some(additional) = additional {
                    check(additional, value, &child(path, name), errors);
                }
            }
        }
    }
}

fn check_combinators(schema: &Value, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let list = |name: &str| schema.get(name).and_then(Value::as_array);
    let passes = |s: &Value| {
        let mut found = Vec::new();
        check(s, value, path, &mut found);
        found.is_empty()
    };
    for s in list("allOf").into_iter().flatten() {
        check(s, value, path, errors);
    }
    let mut fail = |what: &str| {
        let detail = format!("{} {what}", place(path));
        errors.push(FieldError::invalid(path, "", &detail));
    };
    if let Some(any) = list("anyOf")
        && !any.iter().any(passes)
    {
        fail("must validate at least one schema (anyOf)");
    }
    if let Some(one) = list("oneOf")
        && one.iter().filter(|s| passes(s)).count() != 1
    {
        fail("must validate one and only one schema (oneOf)");
    }
    if let Some(not) = schema.get("not")
        && passes(not)
    {
        fail("must not validate the schema (not)");
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::storage::field::aggregate;

    fn errors(schema: Value, value: Value) -> String {
        aggregate(&validate(&schema, &value))
    }

    fn spec(properties: Value) -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": properties}}})
    }

    #[test]
    fn types_are_checked_and_a_wrong_type_ends_the_node() {
        let schema = spec(json!({"replicas": {"type": "integer", "maximum": 10}}));
        assert_eq!(
            errors(schema.clone(), json!({"spec": {"replicas": "3"}})),
            r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#
        );
        assert_eq!(
            errors(schema.clone(), json!({"spec": {"replicas": 1.5}})),
            r#"spec.replicas: Invalid value: "number": spec.replicas in body must be of type integer: "number""#
        );
        assert_eq!(
            errors(schema.clone(), json!({"spec": {"replicas": null}})),
            r#"spec.replicas: Invalid value: "null": spec.replicas in body must be of type integer: "null""#
        );
        assert!(validate(&schema, &json!({"spec": {"replicas": 3}})).is_empty());
        let nullable = spec(json!({"x": {"type": "string", "nullable": true}}));
        assert!(validate(&nullable, &json!({"spec": {"x": null}})).is_empty());
        let ios = spec(json!({"port": {"x-kubernetes-int-or-string": true}}));
        assert!(validate(&ios, &json!({"spec": {"port": "http"}})).is_empty());
        assert!(validate(&ios, &json!({"spec": {"port": 80}})).is_empty());
        assert_eq!(
            errors(ios, json!({"spec": {"port": true}})),
            r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#
        );
    }

    #[test]
    fn bounds_lengths_patterns_and_enums_read_as_upstream_words_them() {
        let schema = spec(json!({
            "size": {"type": "integer", "minimum": 1, "maximum": 10},
            "ratio": {"type": "number", "exclusiveMaximum": true, "maximum": 1.5, "multipleOf": 0.5},
            "name": {"type": "string", "maxLength": 5, "minLength": 2, "pattern": "^[a-z]+$"},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "items": {"type": "array", "maxItems": 2, "minItems": 1, "items": {"type": "string"}},
            "labels": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}},
        }));
        let value = json!({"spec": {
            "size": 11, "ratio": 1.5, "name": "ABCDEF", "mode": "x",
            "items": ["a", "b", 3], "labels": {"a": "1", "b": 2},
        }});
        let got: Vec<String> = validate(&schema, &value)
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            got,
            [
                "spec.items: Too many: 3: must have at most 2 items",
                r#"spec.items[2]: Invalid value: "integer": spec.items[2] in body must be of type string: "integer""#,
                "spec.labels: Too many: 2: must have at most 1 items",
                r#"spec.labels.b: Invalid value: "integer": spec.labels.b in body must be of type string: "integer""#,
                r#"spec.mode: Unsupported value: "x": supported values: "a", "b""#,
                "spec.name: Too long: may not be more than 5 bytes",
                r#"spec.name: Invalid value: "ABCDEF": spec.name in body should match '^[a-z]+$'"#,
                "spec.ratio: Invalid value: 1.5: spec.ratio in body should be less than 1.5",
                "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10",
            ]
        );
        let low = json!({"spec": {"size": 0, "name": "a", "items": []}});
        let got: Vec<String> = validate(&schema, &low)
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            got,
            [
                "spec.items: Invalid value: 0: spec.items in body should have at least 1 items",
                r#"spec.name: Invalid value: "a": spec.name in body should be at least 2 chars long"#,
                "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
            ]
        );
    }

    #[test]
    fn required_fields_formats_and_embedded_resources() {
        let schema = json!({"type": "object", "required": ["spec"], "properties": {"spec": {
            "type": "object",
            "required": ["host"],
            "properties": {
                "host": {"type": "string"},
                "when": {"type": "string", "format": "date-time"},
                "id": {"type": "string", "format": "uuid"},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                    "x-kubernetes-preserve-unknown-fields": true},
            },
        }}});
        assert_eq!(errors(schema.clone(), json!({})), "spec: Required value");
        let got: Vec<String> = validate(
            &schema,
            &json!({"spec": {"when": "yesterday", "id": "x", "template": {}}}),
        )
        .iter()
        .map(|e| e.to_string())
        .collect();
        assert_eq!(
            got,
            [
                "spec.host: Required value",
                r#"spec.id: Invalid value: "x": spec.id in body must be of type uuid: "x""#,
                "spec.template.apiVersion: Required value: must not be empty",
                "spec.template.kind: Required value: must not be empty",
                r#"spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday""#,
            ]
        );
        let good = json!({"spec": {"host": "h", "when": "2024-01-02T03:04:05Z",
            "id": "123e4567-e89b-12d3-a456-426614174000",
            "template": {"apiVersion": "v1", "kind": "Pod"}}});
        assert!(
            validate(&schema, &good).is_empty(),
            "{:?}",
            validate(&schema, &good)
        );
    }

    #[test]
    fn combinators_say_which_rule_failed() {
        let schema = spec(json!({"x": {
            "x-kubernetes-int-or-string": true,
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "not": {"enum": [0]},
        }}));
        assert!(validate(&schema, &json!({"spec": {"x": 1}})).is_empty());
        assert_eq!(
            errors(schema, json!({"spec": {"x": 0}})),
            r#"spec.x: Invalid value: "": spec.x in body must not validate the schema (not)"#
        );
    }
}
