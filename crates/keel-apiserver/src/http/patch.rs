//! PATCH bodies, as kube-apiserver's patch handler applies them to the stored object: JSON
//! patch (RFC 6902), JSON merge patch (RFC 7386), and strategic merge patch (merge keys of
//! the built-in kinds, [`super::strategic_merge`]). The patched object then goes through the
//! same update path as a PUT. Server-side apply is [`super::apply`]'s.

use serde_json::Value;

use super::negotiate::{self, Body};
use super::strategic_merge;
use crate::json_pointer::At;
use crate::registry::Strategy;
use crate::storage::Status;

/// Reads a patch document (400 BadRequest when it is not one).
pub fn read(form: Body, bytes: &[u8]) -> Result<Value, Status> {
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
pub fn apply(
    kind: &dyn Strategy,
    form: Body,
    current: &Value,
    patch: &Value,
) -> Result<Value, Status> {
    let info = kind.info();
    let unprocessable = |message: String| Status::failure(422, "UnprocessableEntity", message);
    let mut patched = current.clone();
    match form {
        Body::MergePatch => json_patch::merge(&mut patched, patch),
        Body::JsonPatch => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|e| {
                Status::failure(400, "BadRequest", format!("invalid JSON patch: {e}"))
            })?;
            apply_json_patch(&mut patched, ops).map_err(|e| unprocessable(e.to_string()))?;
        }
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
