//! Whether a CRD's `openAPIV3Schema` is structural and uses only what apiextensions-apiserver
//! allows, with its words (errors under `spec.versions[i].schema.openAPIV3Schema`):
//!
//! - every node says its `type` (`Required value: must not be empty for specified object
//!   fields`, `... for specified array items`), but where `x-kubernetes-int-or-string` (then
//!   `type` must be empty) or `x-kubernetes-preserve-unknown-fields` stands, and the root is
//!   an `object`;
//! - `properties` and `additionalProperties` do not meet; `items` is one schema;
//! - the keywords a structural schema forbids are absent (`$ref`, `definitions`, `id`,
//!   `$schema`, `patternProperties`, `additionalItems`, `dependencies`, `uniqueItems: true`);
//! - `x-kubernetes-preserve-unknown-fields` and `-embedded-resource` are `true` if set, an
//!   embedded resource is an `object`;
//! - `metadata` at the root says at most `type: object` (`name` and `generateName`
//!   restricted are left out: keel refuses any other content, as upstream does);
//! - `x-kubernetes-list-type` is `atomic`, `set` or `map`; a `map` has
//!   `x-kubernetes-list-map-keys` naming scalar properties of object items that are required
//!   or defaulted; a `set` has scalar items;
//! - `x-kubernetes-map-type` is `atomic` or `granular`;
//! - a `default` fits its schema ([`super::validate`]) and has nothing pruning would drop;
//!   there is none at the root or under `metadata`.
//!
//! The value validations under `allOf`, `anyOf`, `oneOf` and `not` are checked only for the
//! forbidden keywords (upstream also forbids types and defaults inside them).

use serde_json::{Map, Value};

use super::{prune, validate};
use crate::storage::FieldError;

/// The errors of the schema `schema`, which sits at `path`.
pub fn check(schema: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(root) = schema.as_object() else {
        errors.push(FieldError::required(path, "schemas are required"));
        return errors;
    };
    match root.get("type").and_then(Value::as_str) {
        Some("object") => {}
        None | Some("") => errors.push(FieldError::required(
            &format!("{path}.type"),
            "must not be empty at the root",
        )),
        Some(other) => errors.push(FieldError::invalid(
            &format!("{path}.type"),
            other,
            "must be object at the root",
        )),
    }
    if root.contains_key("default") {
        errors.push(FieldError::forbidden(
            &format!("{path}.default"),
            "must not be set at the root",
        ));
    }
    if let Some(metadata) = root.get("properties").and_then(|p| p.get("metadata")) {
        let only_type = metadata.as_object().is_some_and(|m| {
            m.keys().all(|k| k == "type") && m.get("type").is_none_or(|t| t == "object")
        });
        if !only_type {
            errors.push(FieldError::forbidden(
                &format!("{path}.properties[metadata]"),
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    node(root, path, Place::Root, &mut errors);
    errors
}

/// What a node is to its parent, for the words of a missing type.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    Root,
    Field,
    Item,
    Value,
}

const FORBIDDEN: [&str; 7] = [
    "$ref",
    "definitions",
    "id",
    "$schema",
    "patternProperties",
    "additionalItems",
    "dependencies",
];

fn flag(schema: &Map<String, Value>, name: &str, path: &str, errors: &mut Vec<FieldError>) -> bool {
    match schema.get(name) {
        None => false,
        Some(Value::Bool(true)) => true,
        Some(other) => {
            errors.push(FieldError::invalid(
                &format!("{path}.{name}"),
                other.clone(),
                "must be true or undefined",
            ));
            false
        }
    }
}

fn node(schema: &Map<String, Value>, path: &str, place: Place, errors: &mut Vec<FieldError>) {
    for keyword in FORBIDDEN {
        if schema.contains_key(keyword) {
            errors.push(FieldError::forbidden(
                &format!("{path}.{keyword}"),
                &format!("{keyword} is not supported"),
            ));
        }
    }
    if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
        errors.push(FieldError::forbidden(
            &format!("{path}.uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields", path, errors);
    let int_or_string = flag(schema, "x-kubernetes-int-or-string", path, errors);
    let embedded = flag(schema, "x-kubernetes-embedded-resource", path, errors);
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or("");
    if int_or_string && !ty.is_empty() {
        errors.push(FieldError::invalid(
            &format!("{path}.type"),
            ty,
            "must be empty if x-kubernetes-int-or-string is true",
        ));
    }
    if ty.is_empty() && !int_or_string && !preserve && place != Place::Root {
        let what = match place {
            Place::Item => "must not be empty for specified array items",
            _ => "must not be empty for specified object fields",
        };
        errors.push(FieldError::required(&format!("{path}.type"), what));
    }
    if !ty.is_empty()
        && !matches!(
            ty,
            "object" | "array" | "string" | "integer" | "number" | "boolean"
        )
    {
        errors.push(FieldError::not_supported(
            &format!("{path}.type"),
            ty,
            &["array", "boolean", "integer", "number", "object", "string"],
        ));
    }
    if embedded && ty != "object" {
        errors.push(FieldError::invalid(
            &format!("{path}.type"),
            ty,
            "must be object if x-kubernetes-embedded-resource is true",
        ));
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    if properties.is_some() && additional.is_some_and(|a| a != &Value::Bool(false)) {
        errors.push(FieldError::forbidden(
            &format!("{path}.additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    for (name, property) in properties.into_iter().flatten() {
        let here = format!("{path}.properties[{name}]");
        match property.as_object() {
            Some(p) => node(p, &here, Place::Field, errors),
            None => errors.push(FieldError::invalid(
                &here,
                property.clone(),
                "must be a schema",
            )),
        }
    }
    if let Some(Value::Object(a)) = additional {
        node(
            a,
            &format!("{path}.additionalProperties"),
            Place::Value,
            errors,
        );
    }
    match schema.get("items") {
        None => {
            if ty == "array" {
                errors.push(FieldError::required(
                    &format!("{path}.items"),
                    "must be specified",
                ));
            }
        }
        Some(Value::Object(items)) => node(items, &format!("{path}.items"), Place::Item, errors),
        Some(other) => errors.push(FieldError::forbidden(
            &format!("{path}.items"),
            &format!(
                "items must be a schema object and not an array, got {}",
                other
            ),
        )),
    }
    for combinator in ["allOf", "anyOf", "oneOf"] {
        for (i, s) in schema
            .get(combinator)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(s) = s.as_object() {
                forbidden_only(s, &format!("{path}.{combinator}[{i}]"), errors);
            }
        }
    }
    if let Some(Value::Object(not)) = schema.get("not") {
        forbidden_only(not, &format!("{path}.not"), errors);
    }
    list_type(schema, path, errors);
    if let Some(map_type) = schema.get("x-kubernetes-map-type")
        && !matches!(map_type.as_str(), Some("atomic" | "granular"))
    {
        errors.push(FieldError::not_supported(
            &format!("{path}.x-kubernetes-map-type"),
            map_type.as_str().unwrap_or(""),
            &["atomic", "granular"],
        ));
    }
    if let Some(default) = schema.get("default") {
        check_default(schema, default, path, errors);
    }
}

/// The forbidden keywords inside `allOf`, `anyOf`, `oneOf` and `not`.
fn forbidden_only(schema: &Map<String, Value>, path: &str, errors: &mut Vec<FieldError>) {
    for keyword in FORBIDDEN {
        if schema.contains_key(keyword) {
            errors.push(FieldError::forbidden(
                &format!("{path}.{keyword}"),
                &format!("{keyword} is not supported"),
            ));
        }
    }
}

fn list_type(schema: &Map<String, Value>, path: &str, errors: &mut Vec<FieldError>) {
    let Some(list_type) = schema.get("x-kubernetes-list-type") else {
        if schema.contains_key("x-kubernetes-list-map-keys") {
            errors.push(FieldError::forbidden(
                &format!("{path}.x-kubernetes-list-map-keys"),
                "must not be specified when x-kubernetes-list-type is not map",
            ));
        }
        return;
    };
    let here = format!("{path}.x-kubernetes-list-type");
    let items = schema.get("items").and_then(Value::as_object);
    let item_type = items
        .and_then(|i| i.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("");
    match list_type.as_str() {
        Some("atomic") => {}
        Some("set") => {
            if matches!(item_type, "object" | "array") {
                errors.push(FieldError::invalid(
                    &format!("{path}.items.type"),
                    item_type,
                    "must be a scalar type if parent array type is set",
                ));
            }
        }
        Some("map") => {
            let keys: Vec<&str> = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if keys.is_empty() {
                errors.push(FieldError::required(
                    &format!("{path}.x-kubernetes-list-map-keys"),
                    "must not be empty if x-kubernetes-list-type is map",
                ));
            }
            if item_type != "object" {
                errors.push(FieldError::invalid(
                    &format!("{path}.items.type"),
                    item_type,
                    "must be object if parent array's x-kubernetes-list-type is map",
                ));
                return;
            }
            let properties = items
                .and_then(|i| i.get("properties"))
                .and_then(Value::as_object);
            let required: Vec<&str> = items
                .and_then(|i| i.get("required"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            for (i, key) in keys.iter().enumerate() {
                let here = format!("{path}.x-kubernetes-list-map-keys[{i}]");
                match properties.and_then(|p| p.get(*key)) {
                    None => errors.push(FieldError::invalid(
                        &here,
                        *key,
                        "entries must all be names of item properties",
                    )),
                    Some(property) => {
                        let scalar = !matches!(
                            property.get("type").and_then(Value::as_str),
                            Some("object" | "array")
                        );
                        if !scalar {
                            errors.push(FieldError::invalid(
                                &here,
                                *key,
                                "must be a scalar property",
                            ));
                        }
                        if !required.contains(key) && property.get("default").is_none() {
                            errors.push(FieldError::required(
                                &format!("{path}.items.required"),
                                &format!("all map keys must be required or have a default value, but {key:?} is neither"),
                            ));
                        }
                    }
                }
            }
        }
        _ => errors.push(FieldError::not_supported(
            &here,
            list_type.as_str().unwrap_or(""),
            &["atomic", "set", "map"],
        )),
    }
}

/// A default must fit its schema and keep everything pruning would keep.
fn check_default(
    schema: &Map<String, Value>,
    default: &Value,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    let here = format!("{path}.default");
    let node = Value::Object(schema.clone());
    let mut pruned = default.clone();
    let dropped = prune::prune_value(&node, &mut pruned);
    if !dropped.is_empty() {
        errors.push(FieldError::invalid(
            &here,
            default.clone(),
            "must not have unknown fields",
        ));
    }
    for e in validate::validate(&node, default) {
        let field = if e.field.is_empty() {
            here.clone()
        } else {
            format!("{here}.{}", e.field)
        };
        errors.push(FieldError { field, ..e });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const P: &str = "spec.versions[0].schema.openAPIV3Schema";

    fn errors(schema: Value) -> Vec<String> {
        check(&schema, P).iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn a_structural_schema_passes() {
        let schema = json!({"type": "object", "properties": {
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer", "default": 1, "minimum": 0},
                "port": {"x-kubernetes-int-or-string": true},
                "raw": {"x-kubernetes-preserve-unknown-fields": true},
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["port"],
                    "items": {"type": "object", "required": ["port"],
                        "properties": {"port": {"type": "integer"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            }},
        }});
        assert_eq!(errors(schema), Vec::<String>::new());
    }

    #[test]
    fn what_is_not_structural_is_named() {
        let schema = json!({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
            "spec": {"properties": {
                "a": {"type": "string", "x-kubernetes-int-or-string": true},
                "b": {"type": "array", "items": {"properties": {}}},
                "c": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
                "d": {"type": "array", "uniqueItems": true, "items": {"type": "string"}},
                "e": {"$ref": "#/x"},
                "f": {"type": "string", "default": 5},
                "g": {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "string"}},
            }},
        }});
        let p = |s: &str| format!("{P}.properties[spec]{s}");
        assert_eq!(
            errors(schema),
            [
                format!(
                    "{P}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
                ),
                p(".type: Required value: must not be empty for specified object fields"),
                p(
                    ".properties[a].type: Invalid value: \"string\": must be empty if x-kubernetes-int-or-string is true"
                ),
                p(
                    ".properties[b].items.type: Required value: must not be empty for specified array items"
                ),
                p(
                    ".properties[c].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
                ),
                p(
                    ".properties[d].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
                ),
                p(".properties[e].$ref: Forbidden: $ref is not supported"),
                p(
                    ".properties[e].type: Required value: must not be empty for specified object fields"
                ),
                p(
                    ".properties[f].default: Invalid value: \"integer\": . in body must be of type string: \"integer\""
                ),
                p(
                    ".properties[g].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"
                ),
                p(
                    ".properties[g].items.type: Invalid value: \"string\": must be object if parent array's x-kubernetes-list-type is map"
                ),
            ]
        );
        assert_eq!(
            errors(json!({"type": "string"})),
            [format!(
                "{P}.type: Invalid value: \"string\": must be object at the root"
            )]
        );
    }
}
