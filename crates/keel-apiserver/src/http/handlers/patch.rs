//! PATCH, as kube-apiserver's `PatchResource` serves it. A patch body is applied to the
//! stored object as its patcher applies it: JSON patch (RFC 6902), JSON merge patch (RFC
//! 7386), and strategic merge patch (merge keys of the built-in kinds,
//! [`crate::http::strategic_merge`]); the patched object is then checked as `fieldValidation`
//! says, recorded by the field manager and goes through the same update path as a PUT.
//! Server-side apply is [`crate::fieldmanager::apply`]'s.

use axum::response::Response;
use http::header;
use serde_json::Value;

use super::request::Call;
use crate::apimachinery::time::Time;
use crate::fieldmanager::options::{self, Verb};
use crate::fieldmanager::{FieldManager, apply};
use crate::http::field_validation::{self, Directive};
use crate::http::negotiate::{self, Body};
use crate::http::response::not_found_object;
use crate::http::{openapi, strategic_merge};
use crate::json_pointer::At;
use crate::registry::Strategy;
use crate::registry::store::canonical_quantities;
use crate::storage::Status;

/// PATCH of the object `name` (or of its subresource): a server-side apply, or a patch of
/// the stored object.
pub async fn patch(call: &Call<'_>, name: &str) -> Result<Response, Status> {
    let (registry, kind, req) = (call.registry, call.kind, call.req);
    let namespace = req.namespace();
    let directive = Directive::parse(req.param("fieldValidation"), "PatchOptions")?;
    let form = negotiate::body(
        req.header(header::CONTENT_TYPE),
        true,
        kind.custom_schema().is_some(),
    )?;
    let subresource = req.subresource();
    let mut warnings = Vec::new();
    let (obj, created) = if form == Body::ApplyPatch {
        let options = options::options(&req.query, &req.headers, Verb::Apply)?;
        let dry_run = req.dry_run()?;
        let applied = apply::patch(
            registry,
            kind,
            namespace,
            name,
            subresource,
            dry_run,
            &req.body,
            &options,
            directive,
            &req.user,
        )
        .await?;
        warnings = applied.warnings;
        (applied.object, applied.created)
    } else {
        let options = options::options(&req.query, &req.headers, Verb::Patch)?;
        let defs = openapi::documents(&registry.kinds()).definitions();
        let patch_doc = read_patch(form, &req.body)?;
        // A merge patch's values go into the object as written, so Go reads a quantity given
        // as a number by its text (`1e3` stays `1e3`): read the body as the kind's type,
        // which does that. A strategic merge patch is read into floats first, as upstream.
        let patch_doc = match form {
            Body::MergePatch => field_validation::read_json(kind, defs, &req.body)
                .map(|(_, doc)| doc)
                .filter(Value::is_object)
                .unwrap_or(patch_doc),
            _ => patch_doc,
        };
        let fields = FieldManager::new(kind, subresource, Time::now());
        registry
            .update(
                kind,
                namespace,
                name,
                subresource,
                req.dry_run()?,
                |current| {
                    let Some(current) = current else {
                        return Err(not_found_object(kind, name));
                    };
                    let mut patched = apply_patch(kind, form, current, &patch_doc)?;
                    warnings = field_validation::check_patch(
                        kind,
                        defs,
                        form,
                        &req.body,
                        &patch_doc,
                        &mut patched,
                        directive,
                    )?;
                    canonical_quantities(kind, &mut patched);
                    fields.update(Some(current), &mut patched, &options.manager);
                    Ok(patched)
                },
            )
            .await?
    };
    call.written(created, obj, &warnings)
}

/// Reads a patch document (400 BadRequest when it is not one).
fn read_patch(form: Body, bytes: &[u8]) -> Result<Value, Status> {
    let doc = negotiate::decode(bytes, form == Body::ApplyPatch).map_err(|e| {
        Status::failure(
            400,
            "BadRequest",
            e.message.replace("couldn't get version/kind; ", ""),
        )
    })?;
    match form {
        Body::JsonPatch if !doc.is_array() => Err(Status::failure(
            400,
            "BadRequest",
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch".into(),
        )),
        Body::MergePatch | Body::StrategicMergePatch | Body::ApplyPatch if !doc.is_object() => {
            Err(Status::failure(
                400,
                "BadRequest",
                "json: cannot unmarshal array into Go value of type map[string]interface {}".into(),
            ))
        }
        _ => Ok(doc),
    }
}

/// `current` with `patch` applied.
fn apply_patch(
    kind: &dyn Strategy,
    form: Body,
    current: &Value,
    patch: &Value,
) -> Result<Value, Status> {
    let info = kind.info();
    let unprocessable = |message: String| Status::failure(422, "UnprocessableEntity", message);
    let mut patched = current.clone();
    match form {
        Body::MergePatch | Body::JsonPatch => merge_or_json_patch(form, &mut patched, patch)?,
        Body::StrategicMergePatch => {
            let schema = strategic_merge::schema_for(info.group, info.kind);
            patched = strategic_merge::apply(current, patch, &schema).map_err(|e| {
                let code = e.status_code();
                let reason = match code {
                    400 => "BadRequest",
                    422 => "Invalid",
                    _ => "InternalError",
                };
                Status::failure(code, reason, e.to_string())
            })?;
        }
        Body::ApplyPatch | Body::Json | Body::Yaml | Body::Protobuf => {
            return Err(Status::failure(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types \
                 include: application/json-patch+json, application/merge-patch+json, \
                 application/strategic-merge-patch+json, application/apply-patch+yaml"
                    .into(),
            ));
        }
    }
    if !patched.is_object() {
        return Err(unprocessable(
            "the patched object is not a JSON object".into(),
        ));
    }
    Ok(patched)
}

/// Applies an RFC 6902 JSON patch as kube-apiserver's JSON patch library does, where a `test`
/// of `null` passes on a missing value (clients test that `/metadata/finalizers` is absent
/// before they add it).
/// Applies a merge patch or a JSON patch (`form`) to `doc`: 400 for a JSON patch that is not
/// one, 422 for one that does not apply.
pub(super) fn merge_or_json_patch(
    form: Body,
    doc: &mut Value,
    patch: &Value,
) -> Result<(), Status> {
    if form != Body::JsonPatch {
        json_patch::merge(doc, patch);
        return Ok(());
    }
    let ops: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| Status::failure(400, "BadRequest", format!("invalid JSON patch: {e}")))?;
    apply_json_patch(doc, ops)
        .map_err(|e| Status::failure(422, "UnprocessableEntity", e.to_string()))
}

fn apply_json_patch(doc: &mut Value, ops: json_patch::Patch) -> Result<(), json_patch::PatchError> {
    for op in ops.0 {
        if let json_patch::PatchOperation::Test(test) = &op
            && test.value.is_null()
            && doc.at(test.path.as_str()).is_none()
        {
            continue;
        }
        json_patch::patch(doc, &[op])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn json_patch(doc: Value, ops: Value) -> Result<Value, String> {
        let mut doc = doc;
        let ops = serde_json::from_value(ops).expect("a JSON patch");
        apply_json_patch(&mut doc, ops).map_err(|e| e.to_string())?;
        Ok(doc)
    }

    #[test]
    fn a_test_of_null_passes_on_a_missing_value_and_fails_on_a_present_one() {
        let add = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["f"]},
        ]);
        let added = json_patch(json!({"metadata": {"name": "a"}}), add.clone()).unwrap();
        assert_eq!(added["metadata"]["finalizers"], json!(["f"]));
        assert!(json_patch(added, add).is_err(), "present: the test fails");
        let other = json!([{"op": "test", "path": "/metadata/name", "value": "b"}]);
        assert!(json_patch(json!({"metadata": {"name": "a"}}), other).is_err());
    }
}
