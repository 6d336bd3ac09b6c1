//! Server-side field validation (`?fieldValidation=Ignore|Warn|Strict`, KEP-2885), as
//! kube-apiserver does it by decoding request bodies into its Go types:
//!
//! - a create or update body is read strictly, as `sigs.k8s.io/json`'s `UnmarshalStrict`
//!   reads it: in document order, every field the kind's type lacks is `unknown field
//!   "spec.foo"` (paths joined with `.`, list items as `[0]`), every field given twice is
//!   `duplicate field "data.a"`; map keys count as fields for duplicates, and nothing is
//!   checked inside values Go keeps raw (`RawExtension`, `FieldsV1`, preserved unknown fields);
//! - a patch is checked for duplicates in its own body, then the patched object for unknown
//!   fields (JSON and merge patches: in the order the re-encoded object lists them, sorted
//!   keys; strategic merge patches: sorted by message, as `FromUnstructuredWithValidation`
//!   sorts them);
//! - `Strict` fails the request with those errors (400 `<Kind> in version "v1" cannot be
//!   handled as a <Kind>: strict decoding error: unknown field "a", duplicate field "b"` for a
//!   body, 422 `patch: Invalid value: ...: strict decoding error: ...` for a patch); `Warn` (the
//!   default) answers each as a `Warning: 299 - "..."` header; `Ignore` says nothing.
//!
//! Whatever the directive, unknown fields are never stored: the object is pruned to its
//! schema, as decoding into Go types drops them. The schemas are the OpenAPI definitions
//! ([`super::openapi`]).

use std::collections::HashSet;
use std::fmt;

use axum::response::Response;
use http::HeaderValue;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::negotiate::Body;
use super::openapi::schemas::{self, Flavor};
use super::strategic_merge;
use crate::registry::Strategy;
use crate::storage::{FieldError, Status, field::go_quote};

/// What the client asked to happen to unknown and duplicate fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directive {
    /// Drop them silently.
    Ignore,
    /// Drop them, with a warning each (the default).
    Warn,
    /// Fail the request.
    Strict,
}

impl Directive {
    /// The `fieldValidation` query parameter of a request whose options are `options`
    /// (`CreateOptions`, `UpdateOptions`, `PatchOptions`): unset is `Warn`; a value that is not
    /// a directive is 422 Invalid, as `ValidateFieldValidation` words it.
    pub fn parse(value: Option<&str>, options: &str) -> Result<Directive, Status> {
        match value.unwrap_or("") {
            "" | "Warn" => Ok(Directive::Warn),
            "Ignore" => Ok(Directive::Ignore),
            "Strict" => Ok(Directive::Strict),
            other => Err(Status::invalid(
                "meta.k8s.io",
                options,
                "",
                &[FieldError::not_supported(
                    "fieldValidation",
                    other,
                    &["", "Ignore", "Strict", "Warn"],
                )],
            )),
        }
    }
}

/// The definition a kind's objects are read against.
fn root(kind: &dyn Strategy) -> Option<String> {
    let info = kind.info();
    schemas::definition_name(info.group, info.version, info.kind)
}

/// A create or update body (`bytes`, JSON or YAML, already decoded as `obj`): checked as the
/// directive says and pruned to the kind's schema; the warnings to answer with.
pub fn check_body(
    kind: &dyn Strategy,
    defs: &Map<String, Value>,
    bytes: &[u8],
    form: Body,
    obj: &mut Value,
    directive: Directive,
) -> Result<Vec<String>, Status> {
    let Some(root) = root(kind) else {
        return Ok(Vec::new());
    };
    let errors = if directive == Directive::Ignore {
        Vec::new()
    } else if form == Body::Yaml {
        // Read again as the JSON the YAML converts to (Go's `YAMLToJSON`).
        strict_errors(&serde_json::to_vec(obj).unwrap_or_default(), &root, defs)
    } else {
        strict_errors(bytes, &root, defs)
    };
    prune(obj, &root, defs);
    if directive == Directive::Strict && !errors.is_empty() {
        let info = kind.info();
        return Err(Status::failure(
            400,
            "BadRequest",
            format!(
                "{} in version {} cannot be handled as a {}: {}",
                info.kind,
                go_quote(info.version),
                info.kind,
                strict_decoding_error(&errors)
            ),
        ));
    }
    Ok(errors)
}

/// The fields of an applied configuration that the kind's schema does not declare, as
/// structured-merge-diff's typed conversion names them (`.spec.foo`): kube-apiserver refuses
/// such an apply whatever the directive, as it cannot make the typed patch object.
pub fn undeclared_fields(
    kind: &dyn Strategy,
    defs: &Map<String, Value>,
    config: &Value,
) -> Vec<String> {
    let Some(root) = root(kind) else {
        return Vec::new();
    };
    let mut copy = config.clone();
    prune(&mut copy, &root, defs)
        .into_iter()
        .map(|path| format!(".{path}"))
        .collect()
}

/// A patched object: the patch body's duplicates and the unknown fields of `patched` (which
/// is pruned), checked as the directive says; the warnings to answer with.
pub fn check_patch(
    kind: &dyn Strategy,
    defs: &Map<String, Value>,
    form: Body,
    patch_bytes: &[u8],
    patch: &Value,
    patched: &mut Value,
    directive: Directive,
) -> Result<Vec<String>, Status> {
    let Some(root) = root(kind) else {
        return Ok(Vec::new());
    };
    let invalid_value = match form {
        Body::StrategicMergePatch => strategic_merge::go_fmt(patch),
        _ => go_json(patched),
    };
    let mut unknown: Vec<String> = prune(patched, &root, defs)
        .iter()
        .map(|path| format!("unknown field {}", go_quote(path)))
        .collect();
    if directive == Directive::Ignore {
        return Ok(Vec::new());
    }
    let mut errors = duplicate_errors(patch_bytes);
    if form == Body::StrategicMergePatch {
        unknown.sort();
    }
    errors.extend(unknown);
    if directive == Directive::Strict && !errors.is_empty() {
        return Err(Status::invalid(
            "",
            "",
            "",
            &[FieldError::invalid(
                "patch",
                invalid_value,
                &strict_decoding_error(&errors),
            )],
        ));
    }
    Ok(errors)
}

/// `strict decoding error: a, b`.
fn strict_decoding_error(errors: &[String]) -> String {
    format!("strict decoding error: {}", errors.join(", "))
}

/// JSON as Go's `json.Marshal` writes a decoded object: compact, keys sorted, `<`, `>` and
/// `&` escaped.
fn go_json(value: &Value) -> String {
    serde_json::to_string(value)
        .unwrap_or_default()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// Adds one `Warning: 299 - "<text>"` header per warning, as kube-apiserver's warning
/// recorder does (each text once).
pub fn add_warnings(response: &mut Response, warnings: &[String]) {
    let mut seen = HashSet::new();
    for warning in warnings {
        if !seen.insert(warning) {
            continue;
        }
        if let Ok(value) = HeaderValue::from_str(&format!("299 - {}", go_quote(warning))) {
            response.headers_mut().append("warning", value);
        }
    }
}

/// Follows `$ref`s (`{"$ref"}` or `{"allOf": [{"$ref"}]}`) to the schema itself.
fn resolve<'a>(schema: &'a Value, defs: &'a Map<String, Value>) -> &'a Value {
    let mut current = schema;
    for _ in 0..16 {
        let reference = current
            .get("$ref")
            .or_else(|| current.pointer("/allOf/0/$ref"))
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix(Flavor::V3.prefix()));
        match reference.and_then(|name| defs.get(name)) {
            Some(next) => current = next,
            None => break,
        }
    }
    current
}

/// How a value is read.
#[derive(Clone, Copy)]
enum Shape<'a> {
    /// Against this schema.
    Typed(&'a Value),
    /// As Go's `map[string]interface{}`: duplicates count, unknown fields do not.
    Untyped,
    /// Kept raw: nothing counts.
    Raw,
}

impl<'a> Shape<'a> {
    fn of(schema: &'a Value, defs: &'a Map<String, Value>) -> Shape<'a> {
        let schema = resolve(schema, defs);
        if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
            || schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
        {
            return Shape::Raw;
        }
        let typed = schema.get("properties").is_some()
            || schema
                .get("additionalProperties")
                .is_some_and(Value::is_object)
            || schema.get("items").is_some();
        if typed {
            Shape::Typed(schema)
        } else {
            Shape::Raw
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Removes from `obj` what the schema `root` does not know; the paths removed (`spec.foo`,
/// list items as `[0]`), in key order.
pub fn prune(obj: &mut Value, root: &str, defs: &Map<String, Value>) -> Vec<String> {
    let mut removed = Vec::new();
    if let Some(schema) = defs.get(root) {
        prune_value(obj, Shape::of(schema, defs), defs, "", &mut removed);
    }
    removed
}

fn prune_value(
    value: &mut Value,
    shape: Shape<'_>,
    defs: &Map<String, Value>,
    path: &str,
    removed: &mut Vec<String>,
) {
    let Shape::Typed(schema) = shape else {
        return;
    };
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = schema.get("properties") {
                let keys: Vec<String> = map.keys().cloned().collect();
                for key in keys {
                    let field = join(path, &key);
                    match properties.get(&key) {
                        Some(schema) => {
                            let child = map.get_mut(&key).expect("the key is in the map");
                            prune_value(child, Shape::of(schema, defs), defs, &field, removed);
                        }
                        None => {
                            removed.push(field);
                            map.remove(&key);
                        }
                    }
                }
            } else if let Some(values) =
                schema.get("additionalProperties").filter(|v| v.is_object())
            {
                let shape = Shape::of(values, defs);
                for (key, child) in map.iter_mut() {
                    prune_value(child, shape, defs, &join(path, key), removed);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                let shape = Shape::of(item, defs);
                for (i, child) in items.iter_mut().enumerate() {
                    prune_value(child, shape, defs, &format!("{path}[{i}]"), removed);
                }
            }
        }
        _ => {}
    }
}

/// The unknown and duplicate fields of the JSON `bytes` read as the definition `root`, in
/// document order (empty when the bytes are not JSON: the decoder reports that).
pub fn strict_errors(bytes: &[u8], root: &str, defs: &Map<String, Value>) -> Vec<String> {
    let Some(schema) = defs.get(root) else {
        return Vec::new();
    };
    read(bytes, Shape::of(schema, defs), defs)
}

/// The duplicate fields of a JSON patch body, read as Go reads it into untyped maps.
fn duplicate_errors(bytes: &[u8]) -> Vec<String> {
    read(bytes, Shape::Untyped, &Map::new())
}

fn read(bytes: &[u8], shape: Shape<'_>, defs: &Map<String, Value>) -> Vec<String> {
    let mut errors = Vec::new();
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let walk = Walk {
        shape,
        defs,
        path: String::new(),
        errors: &mut errors,
    };
    if walk.deserialize(&mut deserializer).is_err() {
        return Vec::new();
    }
    errors
}

/// One value of a strict read: a [`DeserializeSeed`] that notes unknown and duplicate fields
/// as it goes.
struct Walk<'s, 'e> {
    shape: Shape<'s>,
    defs: &'s Map<String, Value>,
    path: String,
    errors: &'e mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        if matches!(self.shape, Shape::Raw) {
            deserializer.deserialize_ignored_any(IgnoredAny)?;
            return Ok(());
        }
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let item = match self.shape {
            Shape::Typed(schema) => match schema.get("items") {
                Some(item) => Shape::of(item, self.defs),
                None => Shape::Raw,
            },
            other => other,
        };
        let mut i = 0;
        loop {
            let walk = Walk {
                shape: item,
                defs: self.defs,
                path: format!("{}[{i}]", self.path),
                errors: &mut *self.errors,
            };
            if seq.next_element_seed(walk)?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let (properties, values) = match self.shape {
            Shape::Typed(schema) => (
                schema.get("properties").and_then(Value::as_object),
                schema
                    .get("additionalProperties")
                    .filter(|v| v.is_object())
                    .map(|v| Shape::of(v, self.defs)),
            ),
            _ => (None, Some(Shape::Untyped)),
        };
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = join(&self.path, &key);
            let shape = match (properties, values) {
                (Some(properties), _) => match properties.get(&key) {
                    Some(schema) => Some(Shape::of(schema, self.defs)),
                    None => None,
                },
                (None, Some(values)) => Some(values),
                (None, None) => Some(Shape::Raw),
            };
            let Some(shape) = shape else {
                self.errors
                    .push(format!("unknown field {}", go_quote(&path)));
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            if !seen.insert(key) {
                self.errors
                    .push(format!("duplicate field {}", go_quote(&path)));
            }
            map.next_value_seed(Walk {
                shape,
                defs: self.defs,
                path,
                errors: &mut *self.errors,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::openapi;
    use crate::registry;
    use serde_json::json;

    fn defs() -> &'static Map<String, Value> {
        openapi::documents(&registry::kinds()).definitions()
    }

    fn kind(resource: &str) -> &'static dyn Strategy {
        registry::kinds()
            .into_iter()
            .find(|k| k.info().resource == resource && k.info().group.is_empty())
            .unwrap()
    }

    #[test]
    fn directives_are_read_as_upstream_reads_them() {
        assert_eq!(Directive::parse(None, "CreateOptions"), Ok(Directive::Warn));
        assert_eq!(
            Directive::parse(Some("Strict"), "CreateOptions"),
            Ok(Directive::Strict)
        );
        let bad = Directive::parse(Some("strict"), "PatchOptions").unwrap_err();
        assert_eq!((bad.code, bad.reason), (422, "Invalid"));
        assert_eq!(
            bad.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \
             \"strict\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
        );
    }

    #[test]
    fn a_strict_body_names_unknown_and_duplicate_fields_in_document_order() {
        let body = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"1","a":"2"},"foo":1},
            "spec":{"containers":[{"name":"c","image":"i","bogus":{"x":1}}],"zzz":true},"bar":[1]}"#;
        assert_eq!(
            strict_errors(body, "io.k8s.api.core.v1.Pod", defs()),
            [
                "duplicate field \"metadata.labels.a\"",
                "unknown field \"metadata.foo\"",
                "unknown field \"spec.containers[0].bogus\"",
                "unknown field \"spec.zzz\"",
                "unknown field \"bar\"",
            ]
        );
        // Raw values are not looked into; quantities and int-or-strings are values.
        let body = br#"{"metadata":{"managedFields":[{"fieldsV1":{"f:data":{},"f:data":{}}}]},
            "spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1"}},
            "ports":[{"containerPort":1}],"livenessProbe":{"httpGet":{"port":"http"}}}]}}"#;
        assert!(strict_errors(body, "io.k8s.api.core.v1.Pod", defs()).is_empty());
    }

    #[test]
    fn bodies_are_pruned_whatever_the_directive() {
        let cm = kind("configmaps");
        let bytes = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"b"},"spec":{"foo":1},"bar":1}"#;
        let mut obj: Value = serde_json::from_slice(bytes).unwrap();
        let warnings =
            check_body(cm, defs(), bytes, Body::Json, &mut obj, Directive::Warn).unwrap();
        assert_eq!(
            warnings,
            ["unknown field \"spec\"", "unknown field \"bar\""]
        );
        assert_eq!(
            obj,
            json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"b"}})
        );
        let mut obj: Value = serde_json::from_slice(bytes).unwrap();
        let warnings =
            check_body(cm, defs(), bytes, Body::Json, &mut obj, Directive::Ignore).unwrap();
        assert!(warnings.is_empty());
        assert!(obj.get("spec").is_none());
        let mut obj: Value = serde_json::from_slice(bytes).unwrap();
        let refused =
            check_body(cm, defs(), bytes, Body::Json, &mut obj, Directive::Strict).unwrap_err();
        assert_eq!((refused.code, refused.reason), (400, "BadRequest"));
        assert_eq!(
            refused.message,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding \
             error: unknown field \"spec\", unknown field \"bar\""
        );
    }

    #[test]
    fn patches_report_their_duplicates_then_the_unknown_fields_they_bring() {
        let cm = kind("configmaps");
        let patch_bytes = br#"{"data":{"a":"1","a":"2"},"zed":1,"metadata":{"x":1}}"#;
        let patch: Value = serde_json::from_slice(patch_bytes).unwrap();
        let patched = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","x":1},"data":{"a":"2"},"zed":1});
        let mut merged = patched.clone();
        let refused = check_patch(
            cm,
            defs(),
            Body::MergePatch,
            patch_bytes,
            &patch,
            &mut merged,
            Directive::Strict,
        )
        .unwrap_err();
        assert_eq!((refused.code, refused.reason), (422, "Invalid"));
        assert_eq!(
            refused.message,
            " \"\" is invalid: patch: Invalid value: \"{\\\"apiVersion\\\":\\\"v1\\\",\\\"data\\\":{\\\"a\\\":\\\"2\\\"},\\\"kind\\\":\\\"ConfigMap\\\",\\\"metadata\\\":{\\\"name\\\":\\\"c\\\",\\\"x\\\":1},\\\"zed\\\":1}\": \
             strict decoding error: duplicate field \"data.a\", unknown field \"metadata.x\", unknown field \"zed\""
        );
        let mut merged = patched.clone();
        let refused = check_patch(
            cm,
            defs(),
            Body::StrategicMergePatch,
            patch_bytes,
            &patch,
            &mut merged,
            Directive::Strict,
        )
        .unwrap_err();
        assert!(
            refused.message.starts_with(
                " \"\" is invalid: patch: Invalid value: \"map[data:map[a:2] metadata:map[x:1] zed:1]\": strict decoding error: duplicate field \"data.a\""
            ),
            "{}",
            refused.message
        );
        let mut merged = patched.clone();
        let warnings = check_patch(
            cm,
            defs(),
            Body::JsonPatch,
            b"[]",
            &json!([]),
            &mut merged,
            Directive::Warn,
        )
        .unwrap();
        assert_eq!(
            warnings,
            ["unknown field \"metadata.x\"", "unknown field \"zed\""]
        );
        assert_eq!(
            merged,
            json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"2"}})
        );
    }

    #[test]
    fn warnings_are_quoted_as_go_quotes_them() {
        let mut response = Response::new(axum::body::Body::empty());
        add_warnings(
            &mut response,
            &[
                "unknown field \"spec.foo\"".into(),
                "unknown field \"spec.foo\"".into(),
            ],
        );
        let all: Vec<_> = response.headers().get_all("warning").iter().collect();
        assert_eq!(all, ["299 - \"unknown field \\\"spec.foo\\\"\""]);
    }
}
