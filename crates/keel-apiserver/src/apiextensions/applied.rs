//! An applied configuration (server-side apply) of a custom resource checked as
//! structured-merge-diff validates it when kube-apiserver's field manager makes the typed
//! patch object (`TypeConverter.ObjectToTyped` with the type converter apiextensions-apiserver
//! builds from the CRD's schema; structured-merge-diff's `typed/validate.go`): a field the
//! schema does not declare is `.spec.foo: field not declared in schema`, a value of the
//! wrong type `.spec.replicas: expected numeric (int or float), got string`. Upstream
//! refuses such an apply with 500 whatever `fieldValidation` says (the error comes before
//! the directive is looked at), so nothing undeclared is pruned from an applied
//! configuration: it is refused.
//!
//! The schema is the CRD's, as its OpenAPI builder publishes it: `apiVersion` and `kind`
//! strings and `metadata` an `ObjectMeta` at the root and in every
//! `x-kubernetes-embedded-resource`; `x-kubernetes-preserve-unknown-fields` keeps any field
//! besides the declared ones (which are still checked); `x-kubernetes-int-or-string` takes
//! any scalar. Items of `x-kubernetes-list-type: map` lists are named by their keys
//! (`.spec.ports[name="a"].x`), of sets by their value, of other lists by their index. As
//! upstream stops walking a map at its first undeclared field (in Go's random map order),
//! this walk, which goes in key order, stops at the first in key order.

use serde_json::{Map, Value};

use crate::fieldmanager::fieldpath::{Ordered, PathElement, path_string};
use crate::http::decode::fit;
use crate::http::decode::prune::prune;
use crate::http::decode::{Scalar, Shape};
use crate::schema::builtin;

/// `ObjectMeta`'s definition.
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// What structured-merge-diff's validation reports of `config`, an applied configuration of
/// a custom resource whose schema is `schema` (the version's `openAPIV3Schema`): each error
/// as `<path>: <message>`, in key order.
pub fn errors(schema: &Value, config: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(schema, config, &mut Vec::new(), true, &mut out);
    out
}

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name) == Some(&Value::Bool(true))
}

fn walk(
    schema: &Value,
    value: &Value,
    path: &mut Vec<PathElement>,
    resource: bool,
    out: &mut Vec<String>,
) {
    if value.is_null() || (flag(schema, "x-kubernetes-preserve-unknown-fields") && !resource) {
        // A preserved subtree with declared properties still has them checked.
        if let (Some(map), Some(_)) = (value.as_object(), schema.get("properties")) {
            object(schema, map, path, false, out);
        }
        return;
    }
    if flag(schema, "x-kubernetes-int-or-string") {
        return report(Shape::Scalar(Scalar::IntOrString), value, path, out);
    }
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or("");
    match (ty, value) {
        ("object", Value::Object(map)) => object(schema, map, path, resource, out),
        ("object", _) => report(Shape::Map(&Value::Null), value, path, out),
        ("array", Value::Array(items)) => list(schema, items, path, out),
        ("array", _) => report(Shape::Slice(&Value::Null), value, path, out),
        ("string", _) => report(Shape::Scalar(Scalar::String), value, path, out),
        ("integer" | "number", _) => report(Shape::Scalar(Scalar::Float), value, path, out),
        ("boolean", _) => report(Shape::Scalar(Scalar::Bool), value, path, out),
        _ if resource && value.is_object() => {
            object(
                schema,
                value.as_object().unwrap_or(&Map::new()),
                path,
                true,
                out,
            );
        }
        _ => {}
    }
}

/// Structured-merge-diff's judgement of a value against a scalar or container shape.
fn report(shape: Shape<'_>, value: &Value, path: &[PathElement], out: &mut Vec<String>) {
    if let Some(error) = fit::typed(shape, value) {
        out.push(format!("{}: {error}", path_string(path)));
    }
}

fn object(
    schema: &Value,
    map: &Map<String, Value>,
    path: &mut Vec<PathElement>,
    resource: bool,
    out: &mut Vec<String>,
) {
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    let open = flag(schema, "x-kubernetes-preserve-unknown-fields")
        || schema.get("additionalProperties") == Some(&Value::Bool(true));
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    for key in keys {
        let value = &map[key];
        path.push(PathElement::Field(key.clone()));
        match (key.as_str(), properties.and_then(|p| p.get(key))) {
            ("metadata", _) if resource => metadata(value, path, out),
            ("apiVersion" | "kind", _) if resource => {
                report(Shape::Scalar(Scalar::String), value, path, out);
            }
            (_, Some(property)) => {
                let embedded = flag(property, "x-kubernetes-embedded-resource");
                walk(property, value, path, embedded, out);
            }
            _ if additional.is_some() => {
                walk(additional.unwrap_or(&Value::Null), value, path, false, out);
            }
            _ if open => {}
            _ => {
                out.push(format!(
                    "{}: field not declared in schema",
                    path_string(path)
                ));
                path.pop();
                return;
            }
        }
        path.pop();
    }
}

/// A resource's `metadata`, checked as an `ObjectMeta`.
fn metadata(value: &Value, path: &[PathElement], out: &mut Vec<String>) {
    let here = path_string(path);
    let found = prune(&mut value.clone(), OBJECT_META, builtin::definitions()).typed;
    for error in found {
        // The walk reports from `metadata` itself: `.: ...` there, `.name: ...` below.
        let rest = error.strip_prefix('.').unwrap_or(&error);
        if rest.starts_with(':') {
            out.push(format!("{here}{rest}"));
        } else {
            out.push(format!("{here}.{rest}"));
        }
    }
}

fn list(schema: &Value, items: &[Value], path: &mut Vec<PathElement>, out: &mut Vec<String>) {
    let item_schema = schema.get("items").unwrap_or(&Value::Null);
    let embedded = flag(item_schema, "x-kubernetes-embedded-resource");
    let list_type = schema
        .get("x-kubernetes-list-type")
        .and_then(Value::as_str)
        .unwrap_or("atomic");
    let keys: Vec<&str> = schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|k| k.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (i, item) in items.iter().enumerate() {
        let element = match list_type {
            "map" => {
                let mut key: Vec<(String, Ordered)> = keys
                    .iter()
                    .filter_map(|k| {
                        let v = item.get(*k)?;
                        Some((k.to_string(), Ordered(v.clone())))
                    })
                    .collect();
                key.sort_by(|a, b| a.0.cmp(&b.0));
                // An item without its keys is the field manager's own error to report.
                (!key.is_empty()).then_some(PathElement::Key(key))
            }
            "set" if !item.is_object() && !item.is_array() && !item.is_null() => {
                Some(PathElement::Value(Ordered(item.clone())))
            }
            "set" => None,
            _ => Some(PathElement::Index(i)),
        };
        let Some(element) = element else {
            continue;
        };
        path.push(element);
        walk(item_schema, item, path, embedded, out);
        path.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "replicas": {"type": "integer"},
                        "color": {"type": "string"},
                        "port": {"x-kubernetes-int-or-string": true},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "extra": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": true,
                            "properties": {"known": {"type": "boolean"}}
                        },
                        "ports": {
                            "type": "array",
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name"],
                            "items": {"type": "object", "properties": {"name": {"type": "string"}}}
                        },
                        "tags": {
                            "type": "array",
                            "x-kubernetes-list-type": "set",
                            "items": {"type": "string"}
                        },
                        "template": {
                            "type": "object",
                            "x-kubernetes-embedded-resource": true,
                            "properties": {"spec": {"type": "object"}}
                        }
                    }
                }
            }
        })
    }

    fn cr(spec: Value) -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": "w", "labels": {"a": "b"}}, "spec": spec})
    }

    #[test]
    fn declared_fields_and_preserved_ones_pass() {
        let spec = json!({
            "replicas": 2, "color": "red", "port": "http", "labels": {"x": "y"},
            "extra": {"anything": {"goes": [1]}, "known": true},
            "ports": [{"name": "a"}], "tags": ["t"],
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                         "spec": {}},
        });
        assert_eq!(errors(&schema(), &cr(spec)), Vec::<String>::new());
        assert_eq!(errors(&schema(), &cr(Value::Null)), Vec::<String>::new());
    }

    #[test]
    fn undeclared_fields_are_named_by_their_path() {
        let spec = json!({"foo": 1, "zzz": 2, "color": "red"});
        // The walk of a map stops at its first undeclared field.
        assert_eq!(
            errors(&schema(), &cr(spec)),
            [".spec.foo: field not declared in schema"]
        );
        let spec = json!({"ports": [{"name": "a", "x": 1}], "tags": ["t"],
                          "template": {"spec": {"y": 1}}});
        assert_eq!(
            errors(&schema(), &cr(spec)),
            [
                ".spec.ports[name=\"a\"].x: field not declared in schema",
                ".spec.template.spec.y: field not declared in schema"
            ]
        );
        let mut top = cr(json!({}));
        top["other"] = json!(1);
        top["metadata"]["bogus"] = json!(true);
        assert_eq!(
            errors(&schema(), &top),
            [
                ".metadata.bogus: field not declared in schema",
                ".other: field not declared in schema"
            ]
        );
    }

    #[test]
    fn values_of_the_wrong_type_are_refused_in_structured_merge_diffs_words() {
        let spec = json!({"replicas": "two", "color": 3, "port": [1], "labels": "x",
                          "extra": {"known": "yes"}});
        assert_eq!(
            errors(&schema(), &cr(spec)),
            [
                ".spec.color: expected string, got &value.valueUnstructured{Value:3}",
                ".spec.extra.known: expected boolean, got &{yes}",
                ".spec.labels: expected map, got &{x}",
                ".spec.port: expected any scalar, got &{[1]}",
                ".spec.replicas: expected numeric (int or float), got string"
            ]
        );
    }
}
