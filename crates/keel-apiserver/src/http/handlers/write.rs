//! The writes of a whole object: create (POST) and update (PUT), as kube-apiserver's
//! `CreateResource` and `UpdateResource` serve them: the body decoded and checked as its
//! decoder checks it (`read_object`), the write recorded by the field manager, the object
//! stored by the registry.

use axum::response::Response;
use http::header;
use serde_json::Value;

use super::request::{Call, ResourceRequest};
use crate::apimachinery::go_value::GoType;
use crate::apimachinery::time::Time;
use crate::fieldmanager::FieldManager;
use crate::fieldmanager::options::{self, Verb};
use crate::http::field_validation::{self, Directive};
use crate::http::{negotiate, openapi, protobuf};
use crate::registry::store::{Registry, canonical_quantities};
use crate::registry::{Strategy, meta, meta_str};
use crate::storage::Status;

/// POST of a new object to a collection.
pub async fn create(call: &Call<'_>) -> Result<Response, Status> {
    let (registry, kind, req) = (call.registry, call.kind, call.req);
    // Before the body is read, as apiextensions-apiserver's handler refuses it (a create by
    // server-side apply is a patch, which it lets through).
    if let Some(status) = kind.refuses_create() {
        return Err(status);
    }
    let namespace = req.namespace();
    let directive = Directive::parse(req.param("fieldValidation"), "CreateOptions")?;
    let options = options::options(&req.query, &req.headers, Verb::Create)?;
    let (mut body, warnings) = read_object(registry, kind, req, None, directive)?;
    FieldManager::new(kind, None, Time::now()).update(None, &mut body, &options.manager);
    let created = registry
        .create_by(kind, namespace, body, req.dry_run()?, Some(&req.user))
        .await?;
    call.written(true, created, &warnings)
}

/// PUT of the object `name` (or of its subresource), created when it is missing and the
/// kind allows that.
pub async fn update(call: &Call<'_>, name: &str) -> Result<Response, Status> {
    let (registry, kind, req) = (call.registry, call.kind, call.req);
    let directive = Directive::parse(req.param("fieldValidation"), "UpdateOptions")?;
    let options = options::options(&req.query, &req.headers, Verb::Update)?;
    let (body, warnings) = read_object(registry, kind, req, Some(name), directive)?;
    let subresource = req.subresource();
    let fields = FieldManager::new(kind, subresource, Time::now());
    let mut first = Some(body);
    let (obj, created) = registry
        .update(
            kind,
            req.namespace(),
            name,
            subresource,
            req.dry_run()?,
            |current| {
                // The body read once serves the first try; a retry (the cached object was
                // stale) reads it again rather than every try copying it.
                let mut new = match first.take() {
                    Some(body) => body,
                    None => read_object(registry, kind, req, Some(name), directive)?.0,
                };
                canonical_quantities(kind, &mut new);
                fields.update(current, &mut new, &options.manager);
                Ok(new)
            },
        )
        .await?;
    call.written(created, obj, &warnings)
}

/// The body of a create or update: JSON, YAML or protobuf, of this kind and version, its
/// values of its fields' types, checked for unknown and duplicate fields as `directive`
/// says and pruned to the kind's schema (as kube-apiserver's decoder does all that), then
/// in the request's namespace, with this name (for an update); with the warnings to answer.
pub(super) fn read_object(
    registry: &Registry,
    kind: &dyn Strategy,
    req: &ResourceRequest,
    name: Option<&str>,
    directive: Directive,
) -> Result<(Value, Vec<String>), Status> {
    let info = kind.info();
    let namespace = req.namespace();
    let form = negotiate::body(
        req.header(header::CONTENT_TYPE),
        false,
        kind.custom_schema().is_some(),
    )?;
    let defs = openapi::documents(&registry.kinds()).definitions();
    // A JSON body is read strictly and decoded in one pass; what that cannot read is
    // decoded alone, for the decoder's error.
    let read = match form {
        negotiate::Body::Json => field_validation::read_json(kind, defs, &req.body),
        _ => None,
    };
    let (mut obj, read) = match read {
        Some((read, obj)) => (obj, Some(read)),
        None => {
            let obj = negotiate::decode_object(&req.body, form, &info.api_version(), info.kind)?;
            (obj, None)
        }
    };
    if !obj.is_object() {
        return Err(Status::failure(
            400,
            "BadRequest",
            "couldn't get version/kind; json parse error: the body is not a JSON object".into(),
        ));
    }
    check_type(kind, &obj, &req.body)?;
    let warnings =
        field_validation::check_body(kind, defs, &req.body, form, &mut obj, directive, read)?;
    let bad = |message: String| Status::failure(400, "BadRequest", message);
    if info.namespaced {
        let given = meta_str(&obj, "namespace");
        if !given.is_empty() && Some(given) != namespace {
            return Err(bad(
                "the namespace of the provided object does not match the namespace sent on the request".into(),
            ));
        }
        // Left out, it is the request's (as kube-apiserver's BeforeCreate and BeforeUpdate
        // fill it in).
        if let (true, Some(namespace)) = (given.is_empty(), namespace) {
            meta::metadata(&mut obj).insert("namespace".into(), namespace.into());
        }
    }
    if let Some(name) = name {
        let given = meta_str(&obj, "name");
        if given != name {
            return Err(bad(format!(
                "the name of the object ({given}) does not match the name on the URL ({name})"
            )));
        }
    }
    Ok((obj, warnings))
}

/// A body's apiVersion and kind must be strings, this kind's (or left out), as
/// kube-apiserver's decoder requires (`body`: the request's, as sent).
pub fn check_type(kind: &dyn Strategy, obj: &Value, body: &[u8]) -> Result<(), Status> {
    let info = kind.info();
    // Go reads them into a struct of two strings first, to learn what the body is.
    for field in ["apiVersion", "kind"] {
        let got = GoType::of(obj.get(field).unwrap_or(&Value::Null));
        if !matches!(got, GoType::Nil | GoType::String) {
            return Err(Status::failure(
                400,
                "BadRequest",
                format!(
                    "the object provided is unrecognized (must be of type {}): couldn't get \
                     version/kind; json parse error: json: cannot unmarshal {} into Go struct \
                     field .{field} of type string ({})",
                    info.kind,
                    got.json_kind(),
                    protobuf::summary(body)
                ),
            ));
        }
    }
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let body_kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let expected = info.api_version();
    if !api_version.is_empty() && api_version != expected {
        return Err(Status::failure(
            400,
            "BadRequest",
            format!(
                "the API version in the data ({api_version}) does not match the expected API version ({expected})"
            ),
        ));
    }
    if !body_kind.is_empty() && body_kind != info.kind {
        return Err(Status::failure(
            400,
            "BadRequest",
            format!(
                "the kind in the data ({body_kind}) does not match the expected kind ({})",
                info.kind
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_version_or_kind_that_is_not_a_string_leaves_the_body_unrecognized() {
        let cm = &crate::registry::configmaps::ConfigMaps;
        let body = br#"{"apiVersion":5,"kind":"ConfigMap","metadata":{"name":"x"}}"#;
        let obj: Value = serde_json::from_slice(body).unwrap();
        let refused = check_type(cm, &obj, body).unwrap_err();
        assert_eq!((refused.code, refused.reason), (400, "BadRequest"));
        assert_eq!(
            refused.message,
            "the object provided is unrecognized (must be of type ConfigMap): couldn't get \
             version/kind; json parse error: json: cannot unmarshal number into Go struct \
             field .apiVersion of type string ({\"apiVersion\":5,\"kind\":\"Config ...)"
        );
        let yaml = b"kind: [ConfigMap]\n";
        let obj = negotiate::decode(yaml, true).unwrap();
        assert!(check_type(cm, &obj, yaml).unwrap_err().message.ends_with(
            "array into Go struct field .kind of type string (6b696e643a205b436f6e6669674d61705d0a)"
        ));
        let fine = serde_json::json!({"apiVersion": "v1", "kind": null});
        assert!(check_type(cm, &fine, b"{}").is_ok());
        let other = serde_json::json!({"apiVersion": "v2"});
        assert!(
            check_type(cm, &other, b"{}")
                .unwrap_err()
                .message
                .starts_with("the API version")
        );
    }
}
