//! Server-side field validation (`?fieldValidation=Ignore|Warn|Strict`, KEP-2885) and the
//! type checks of every write, as kube-apiserver does both by decoding request bodies into
//! its Go types ([`super::decode`]):
//!
//! - a create or update body is read strictly ([`strict`]): a value the field's Go
//!   type does not take fails it, whatever the directive (400 `<Kind> in version "v1"
//!   cannot be handled as a <Kind>: json: cannot unmarshal number into Go struct field
//!   ConfigMap.data of type string`); else its unknown and duplicate fields are what the
//!   directive acts on;
//! - a patched object is checked as kube-apiserver decodes it: the result of a JSON or merge
//!   patch as a body, of a strategic merge patch by the unstructured converter; a value of
//!   the wrong type fails it with 422 (`patch: Invalid value: "<the object or the patch>":
//!   <the error>`), whatever the directive; else the directive acts on the patch body's
//!   duplicates, then the patched object's unknown fields (JSON and merge patches: in the
//!   order the re-encoded object lists them, sorted keys; strategic merge patches: sorted by
//!   message, as `FromUnstructuredWithValidation` sorts them);
//! - an applied configuration (server-side apply) is checked as structured-merge-diff
//!   validates it ([`apply_errors`]; a custom resource against its CRD's schema), the object it makes as the converter reads it
//!   ([`conversion_error`]), and, once the apply has succeeded, for the keys it repeats as
//!   yaml.v2 reads it strictly ([`check_applied`]), whether it is YAML or JSON;
//! - a YAML body's repeated keys come first, as yaml.v2 reports them (`yaml: unmarshal
//!   errors:\n  line 7: key "a" already set in map`), before the unknown fields of the JSON
//!   it converts to;
//! - `Strict` fails the request with the unknown and duplicate fields (400 `... cannot be
//!   handled as a <Kind>: strict decoding error: unknown field "a", duplicate field "b"` for
//!   a body, 422 `patch: Invalid value: ...: strict decoding error: ...` for a patch, 400
//!   `error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:...`
//!   for an applied configuration); `Warn` (the default) answers each as a `Warning: 299 -
//!   "..."` header, a repeated YAML key one line each (`line 7: key "a" already set in
//!   map`); `Ignore` says nothing.
//!
//! Whatever the directive, unknown fields are never stored: the object is pruned to its
//! schema ([`prune`]), as decoding into Go types drops them. The schemas are the
//! OpenAPI definitions ([`super::openapi`]).

use std::collections::HashSet;

use axum::response::Response;
use http::HeaderValue;
use serde_json::{Map, Value};

use super::decode::{prune::prune, strict, yaml_strict};
use super::negotiate::Body;
use super::openapi::schemas;
use crate::apimachinery::go_value::go_fmt;
use crate::apimachinery::quote::go_quote;
use crate::fieldmanager::fieldpath::go_json;
use crate::registry::Strategy;
use crate::storage::{FieldError, Status};

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

/// A JSON create or update body read strictly as the kind's type and decoded, in one pass
/// (see [`check_body`]); None when the kind has no definition or the body is not one JSON
/// value.
pub fn read_json(
    kind: &dyn Strategy,
    defs: &Map<String, Value>,
    bytes: &[u8],
) -> Option<(strict::Read, Value)> {
    strict::read_value(bytes, &root(kind)?, defs)
}

/// A create or update body (`bytes` in `form`, already decoded as `obj`; `read` its strict
/// read by [`read_json`], if made): refused if a value does not fit its field's type, else
/// checked as the directive says and pruned to the kind's schema; the warnings to answer
/// with.
pub fn check_body(
    kind: &dyn Strategy,
    defs: &Map<String, Value>,
    bytes: &[u8],
    form: Body,
    obj: &mut Value,
    directive: Directive,
    read: Option<strict::Read>,
) -> Result<Vec<String>, Status> {
    let Some(root) = root(kind) else {
        return custom_unknown_fields(kind, obj, directive)
            .map_err(|errors| cannot_be_handled(kind, &strict_decoding_error(&errors)));
    };
    let read = match (read, form) {
        (Some(read), _) => read,
        (None, Body::Json) => strict::read(bytes, &root, defs),
        // Protobuf bodies are decoded into the types themselves.
        (None, Body::Protobuf) => strict::Read::default(),
        // Read again as the JSON the YAML converts to (Go's `YAMLToJSON`).
        (None, _) => strict::read(&serde_json::to_vec(obj).unwrap_or_default(), &root, defs),
    };
    if let Some(error) = read.error {
        return Err(cannot_be_handled(kind, &error));
    }
    if !read.nothing_to_prune {
        prune(obj, &root, defs);
    }
    if directive == Directive::Ignore {
        return Ok(Vec::new());
    }
    // A YAML body is read strictly again, for the keys its conversion to JSON dropped.
    let repeated = match form {
        Body::Yaml => yaml_strict::duplicate_keys(bytes),
        _ => Vec::new(),
    };
    if directive == Directive::Strict && !(repeated.is_empty() && read.strict.is_empty()) {
        let yaml = (!repeated.is_empty()).then(|| yaml_strict::unmarshal_errors(&repeated));
        let errors: Vec<String> = yaml.into_iter().chain(read.strict).collect();
        return Err(cannot_be_handled(kind, &strict_decoding_error(&errors)));
    }
    Ok(repeated.into_iter().chain(read.strict).collect())
}

/// The keys an applied configuration (`body`, YAML or JSON) repeats, checked as
/// kube-apiserver's `applyPatcher` checks them once the apply itself has succeeded: under
/// `Strict` 400 `error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal
/// errors:\n  line 10: key "paused" already set in map`, under `Warn` a warning each
/// (`line 10: key "paused" already set in map`), under `Ignore` nothing. The warnings to
/// answer with.
pub fn check_applied(body: &[u8], directive: Directive) -> Result<Vec<String>, Status> {
    if directive == Directive::Ignore {
        return Ok(Vec::new());
    }
    let repeated = yaml_strict::duplicate_keys(body);
    if directive == Directive::Strict && !repeated.is_empty() {
        return Err(Status::failure(
            400,
            "BadRequest",
            format!(
                "error strict decoding YAML: error converting YAML to JSON: {}",
                yaml_strict::unmarshal_errors(&repeated)
            ),
        ));
    }
    Ok(repeated)
}

/// 400 `<Kind> in version "<version>" cannot be handled as a <Kind>: <why>`, as
/// kube-apiserver answers a body its decoder refuses.
fn cannot_be_handled(kind: &dyn Strategy, why: &str) -> Status {
    let info = kind.info();
    Status::failure(
        400,
        "BadRequest",
        format!(
            "{} in version {} cannot be handled as a {}: {why}",
            info.kind,
            go_quote(info.version),
            info.kind
        ),
    )
}

/// What structured-merge-diff's validation reports about an applied configuration: its
/// values of the wrong type and the fields the kind's schema does not declare, each at its
/// path (`.data.a: expected string, got ...`, `.spec.foo: field not declared in schema`).
/// kube-apiserver refuses such an apply whatever the directive, as it cannot make the typed
/// patch object. A custom resource is checked against its CRD's schema
/// ([`crate::apiextensions::applied`]).
pub fn apply_errors(kind: &dyn Strategy, defs: &Map<String, Value>, config: &Value) -> Vec<String> {
    let Some(root) = root(kind) else {
        return kind
            .custom_schema()
            .map(|schema| crate::apiextensions::applied::errors(&schema, config))
            .unwrap_or_default();
    };
    prune(&mut config.clone(), &root, defs).typed
}

/// The error the unstructured converter fails with reading `obj` into the kind's type (as
/// the object an apply makes is read), if any.
pub fn conversion_error(
    kind: &dyn Strategy,
    defs: &Map<String, Value>,
    obj: &Value,
) -> Option<String> {
    let root = root(kind)?;
    prune(&mut obj.clone(), &root, defs).conversion
}

/// A patched object: refused if a value does not fit its field's type, else the patch
/// body's duplicates and the unknown fields of `patched` (which is pruned) checked as the
/// directive says; the warnings to answer with.
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
        let invalid_value = go_json(patched);
        return custom_unknown_fields(kind, patched, directive).map_err(|errors| {
            let detail = strict_decoding_error(&errors);
            Status::invalid(
                "",
                "",
                "",
                &[FieldError::invalid(
                    "patch",
                    invalid_value.as_str(),
                    &detail,
                )],
            )
        });
    };
    let (invalid_value, read) = match form {
        Body::StrategicMergePatch => (go_fmt(patch), None),
        _ => {
            let bytes = serde_json::to_vec(patched).unwrap_or_default();
            (go_json(patched), Some(strict::read(&bytes, &root, defs)))
        }
    };
    let pruned = prune(patched, &root, defs);
    let type_error = match read {
        Some(read) => read.error,
        None => pruned.conversion,
    };
    let invalid = |detail: &str| {
        Status::invalid(
            "",
            "",
            "",
            &[FieldError::invalid("patch", invalid_value.as_str(), detail)],
        )
    };
    if let Some(error) = type_error {
        return Err(invalid(&error));
    }
    if directive == Directive::Ignore {
        return Ok(Vec::new());
    }
    let mut unknown: Vec<String> = pruned
        .removed
        .iter()
        .map(|path| format!("unknown field {}", go_quote(path)))
        .collect();
    let mut errors = strict::duplicate_errors(patch_bytes);
    if form == Body::StrategicMergePatch {
        unknown.sort();
    }
    errors.extend(unknown);
    if directive == Directive::Strict && !errors.is_empty() {
        return Err(invalid(&strict_decoding_error(&errors)));
    }
    Ok(errors)
}

/// A custom resource's object pruned to its schema (as apiextensions-apiserver prunes every
/// request's object), the fields dropped answered as `directive` says: under `Strict` the
/// error's parts (`unknown field "spec.x"`), under `Warn` a warning each. Nothing for a kind
/// without a custom schema.
fn custom_unknown_fields(
    kind: &dyn Strategy,
    obj: &mut Value,
    directive: Directive,
) -> Result<Vec<String>, Vec<String>> {
    let Some(schema) = kind.custom_schema() else {
        return Ok(Vec::new());
    };
    let dropped = crate::apiextensions::prune::prune(&schema, obj);
    let unknown: Vec<String> = dropped
        .iter()
        .map(|path| format!("unknown field {}", go_quote(path)))
        .collect();
    match directive {
        Directive::Ignore => Ok(Vec::new()),
        Directive::Strict if !unknown.is_empty() => Err(unknown),
        _ => Ok(unknown),
    }
}

/// `strict decoding error: a, b`.
fn strict_decoding_error(errors: &[String]) -> String {
    format!("strict decoding error: {}", errors.join(", "))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::openapi;
    use crate::registry;
    use serde_json::json;

    fn defs() -> &'static Map<String, Value> {
        openapi::documents(&registry::kinds()).definitions()
    }

    /// A JSON body decoded and checked as a create or update reads it (one pass, see
    /// [`read_json`]): the object as checked, and the answer.
    fn json_body(
        kind: &dyn Strategy,
        bytes: &[u8],
        directive: Directive,
    ) -> (Value, Result<Vec<String>, Status>) {
        let (read, mut obj) = read_json(kind, defs(), bytes).unwrap();
        let answer = check_body(
            kind,
            defs(),
            bytes,
            Body::Json,
            &mut obj,
            directive,
            Some(read),
        );
        (obj, answer)
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
    fn bodies_are_pruned_whatever_the_directive() {
        let cm = kind("configmaps");
        let bytes = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"b"},"spec":{"foo":1},"bar":1}"#;
        let (obj, warnings) = json_body(cm, bytes, Directive::Warn);
        let warnings = warnings.unwrap();
        assert_eq!(
            warnings,
            ["unknown field \"spec\"", "unknown field \"bar\""]
        );
        assert_eq!(
            obj,
            json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"b"}})
        );
        let (obj, warnings) = json_body(cm, bytes, Directive::Ignore);
        assert!(warnings.unwrap().is_empty());
        assert!(obj.get("spec").is_none());
        let refused = json_body(cm, bytes, Directive::Strict).1.unwrap_err();
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
    fn a_value_of_the_wrong_type_fails_a_body_whatever_the_directive() {
        let cm = kind("configmaps");
        let bytes = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"y":5},"bogus":1}"#;
        for directive in [Directive::Ignore, Directive::Warn, Directive::Strict] {
            let refused = json_body(cm, bytes, directive).1.unwrap_err();
            assert_eq!((refused.code, refused.reason), (400, "BadRequest"));
            assert_eq!(
                refused.message,
                "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot \
                 unmarshal number into Go struct field ConfigMap.data of type string"
            );
        }
        // YAML is read as the JSON it converts to.
        let yaml = b"apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  ports:\n  - port: \"80\"\n";
        let mut obj = crate::http::negotiate::decode(yaml, true).unwrap();
        let svc = kind("services");
        let refused = check_body(
            svc,
            defs(),
            yaml,
            Body::Yaml,
            &mut obj,
            Directive::Warn,
            None,
        )
        .unwrap_err();
        assert_eq!(
            refused.message,
            "Service in version \"v1\" cannot be handled as a Service: json: cannot unmarshal \
             string into Go struct field ServicePort.spec.ports.port of type int32"
        );
    }

    #[test]
    fn a_patch_making_a_value_of_the_wrong_type_is_invalid() {
        let cm = kind("configmaps");
        let patched =
            json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":5}});
        let patch = json!({"data": {"a": 5}});
        let bytes = br#"{"data":{"a":5}}"#;
        let mut merged = patched.clone();
        let refused = check_patch(
            cm,
            defs(),
            Body::MergePatch,
            bytes,
            &patch,
            &mut merged,
            Directive::Ignore,
        )
        .unwrap_err();
        assert_eq!((refused.code, refused.reason), (422, "Invalid"));
        assert_eq!(
            refused.message,
            " \"\" is invalid: patch: Invalid value: \"{\\\"apiVersion\\\":\\\"v1\\\",\\\"data\\\":{\\\"a\\\":5},\\\"kind\\\":\\\"ConfigMap\\\",\\\"metadata\\\":{\\\"name\\\":\\\"c\\\"}}\": \
             json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
        );
        // A strategic merge patch's result is read by the unstructured converter.
        let mut merged = patched.clone();
        let refused = check_patch(
            cm,
            defs(),
            Body::StrategicMergePatch,
            bytes,
            &patch,
            &mut merged,
            Directive::Warn,
        )
        .unwrap_err();
        assert_eq!(
            refused.message,
            " \"\" is invalid: patch: Invalid value: \"map[data:map[a:5]]\": cannot convert int64 to string"
        );
    }

    #[test]
    fn applied_configurations_are_validated_as_structured_merge_diff_validates_them() {
        let pod = kind("pods");
        let config = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "bogus": 1},
            "spec": {"containers": [{"name": "c", "ports": [{"containerPort": "80"}]}]}
        });
        assert_eq!(
            apply_errors(pod, defs(), &config),
            [
                ".metadata.bogus: field not declared in schema",
                ".spec.containers[0].ports[0].containerPort: expected numeric (int or float), got string"
            ]
        );
        let made = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80.5}]}]}
        });
        assert_eq!(
            conversion_error(pod, defs(), &made).as_deref(),
            Some("cannot convert float64 to int32")
        );
    }

    #[test]
    fn an_applied_configuration_repeating_keys_is_refused_warned_about_or_let_be() {
        // Upstream's field validation test body: JSON read as YAML, lines counted from 1.
        let body = b"{\n\t\"apiVersion\": \"apps/v1\",\n\t\"kind\": \"Deployment\",\n\t\"metadata\": {\n\t\t\"name\": \"d\",\n\t\t\"labels\": {\"app\": \"nginx\"}\n\t},\n\t\"spec\": {\n\t\t\"paused\": false,\n\t\t\"paused\": true,\n\t\t\"selector\": {\n\t\t\t\"matchLabels\": {\n\t\t\t\t\"app\": \"nginx\"\n\t\t\t}\n\t\t},\n\t\t\"template\": {\n\t\t\t\"metadata\": {\n\t\t\t\t\"labels\": {\n\t\t\t\t\t\"app\": \"nginx\"\n\t\t\t\t}\n\t\t\t},\n\t\t\t\"spec\": {\n\t\t\t\t\"containers\": [{\n\t\t\t\t\t\"name\":  \"nginx\",\n\t\t\t\t\t\"image\": \"nginx:latest\",\n\t\t\t\t\t\"imagePullPolicy\": \"Never\",\n\t\t\t\t\t\"imagePullPolicy\": \"Always\"\n\t\t\t\t}]\n\t\t\t}\n\t\t}\n\t}\n}";
        let refused = check_applied(body, Directive::Strict).unwrap_err();
        assert_eq!((refused.code, refused.reason), (400, "BadRequest"));
        assert_eq!(
            refused.message,
            "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  \
             line 10: key \"paused\" already set in map\n  \
             line 27: key \"imagePullPolicy\" already set in map"
        );
        assert_eq!(
            check_applied(body, Directive::Warn).unwrap(),
            [
                "line 10: key \"paused\" already set in map",
                "line 27: key \"imagePullPolicy\" already set in map"
            ]
        );
        assert!(check_applied(body, Directive::Ignore).unwrap().is_empty());
        assert!(
            check_applied(b"a: 1\nb: 2\n", Directive::Strict)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_yaml_bodys_repeated_keys_come_before_its_unknown_fields() {
        let cm = kind("configmaps");
        let yaml = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  name: w\n  foo: 1\ndata:\n  a: b\n  a: c\nbar: 1\n";
        let decoded = || crate::http::negotiate::decode(yaml, true).unwrap();
        let mut obj = decoded();
        let refused = check_body(
            cm,
            defs(),
            yaml,
            Body::Yaml,
            &mut obj,
            Directive::Strict,
            None,
        )
        .unwrap_err();
        assert_eq!(
            refused.message,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding \
             error: yaml: unmarshal errors:\n  line 5: key \"name\" already set in map\n  \
             line 9: key \"a\" already set in map, unknown field \"bar\", unknown field \
             \"metadata.foo\""
        );
        let mut obj = decoded();
        assert_eq!(
            check_body(
                cm,
                defs(),
                yaml,
                Body::Yaml,
                &mut obj,
                Directive::Warn,
                None
            )
            .unwrap(),
            [
                "line 5: key \"name\" already set in map",
                "line 9: key \"a\" already set in map",
                "unknown field \"bar\"",
                "unknown field \"metadata.foo\""
            ]
        );
        assert_eq!(obj["data"]["a"], "c");
        let mut obj = decoded();
        assert!(
            check_body(
                cm,
                defs(),
                yaml,
                Body::Yaml,
                &mut obj,
                Directive::Ignore,
                None
            )
            .unwrap()
            .is_empty()
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
