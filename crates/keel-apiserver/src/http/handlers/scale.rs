//! The `scale` subresource (`autoscaling/v1` Scale), as kube-apiserver serves it for a kind
//! that has one: GET answers the object's replicas (`spec.replicas` from the kind's spec path,
//! `status.replicas` and `status.selector` from its status paths); PUT and PATCH (merge or
//! JSON patch) of the Scale set the object's desired replicas, at the resourceVersion the
//! Scale names if it names one, and answer the Scale of the object written. This is what
//! `kubectl scale` and a HorizontalPodAutoscaler use.

use axum::response::Response;
use http::{StatusCode, header};
use serde_json::{Value, json};

use super::request::Call;
use crate::http::negotiate::{self, Body};
use crate::http::response::{not_found_object, value_response};
use crate::registry::selector::LabelSelector;
use crate::registry::{ScalePaths, Strategy, meta_str};
use crate::storage::{FieldError, Status};

/// The value at a dotted path (`.spec.replicas`).
fn at<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    path.trim_start_matches('.')
        .split('.')
        .try_fold(obj, |v, step| v.get(step))
}

/// Sets the value at a dotted path, making the objects on the way.
fn set(obj: &mut Value, path: &str, value: Value) {
    let steps: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    let mut here = obj;
    for step in &steps[..steps.len() - 1] {
        if !here.get(*step).is_some_and(Value::is_object) {
            here[*step] = json!({});
        }
        here = &mut here[*step];
    }
    here[steps[steps.len() - 1]] = value;
}

/// The Scale of `obj`.
fn scale_of(obj: &Value, paths: &ScalePaths) -> Value {
    let replicas = |path: &str| at(obj, path).and_then(Value::as_i64).unwrap_or(0);
    let mut status = json!({"replicas": replicas(&paths.status_replicas)});
    // A custom resource's selector path names a string; a built-in kind's names its
    // `metav1.LabelSelector`, which the Scale shows as text (`LabelSelectorAsSelector`).
    match paths.label_selector.as_deref().and_then(|p| at(obj, p)) {
        Some(Value::String(selector)) => status["selector"] = selector.as_str().into(),
        Some(Value::Object(selector)) => {
            // A ReplicationController's selector is a plain map of labels
            // (`labels.SelectorFromSet`), the others' a `metav1.LabelSelector`.
            let object = if selector.contains_key("matchLabels")
                || selector.contains_key("matchExpressions")
            {
                Value::Object(selector.clone())
            } else {
                json!({"matchLabels": selector})
            };
            if let Ok(selector) = LabelSelector::from_object(&object) {
                status["selector"] = selector.to_string().into();
            }
        }
        _ => {}
    }
    let meta = &obj["metadata"];
    let mut metadata = json!({});
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta.get(field) {
            metadata[field] = v.clone();
        }
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": replicas(&paths.spec_replicas)},
        "status": status,
    })
}

fn paths(kind: &dyn Strategy) -> Result<ScalePaths, Status> {
    kind.scale().ok_or_else(|| {
        Status::failure(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
        )
    })
}

/// GET of the Scale of `name`.
pub async fn get(call: &Call<'_>, name: &str) -> Result<Response, Status> {
    let paths = paths(call.kind)?;
    let rv = call.req.param("resourceVersion").unwrap_or("");
    let obj = call
        .registry
        .get(call.kind, call.req.namespace(), name, rv)
        .await?;
    Ok(value_response(
        StatusCode::OK,
        &scale_of(&obj, &paths),
        call.output,
    ))
}

/// PUT (`patch` None) or PATCH of the Scale of `name`.
pub async fn write(call: &Call<'_>, name: &str, patch: bool) -> Result<Response, Status> {
    let (registry, kind, req) = (call.registry, call.kind, call.req);
    let paths = paths(kind)?;
    // A Scale has no lists, so a strategic merge patch of one (built-in kinds take them,
    // custom resources do not) merges as a merge patch does.
    let custom = kind.custom_schema().is_some();
    let form = negotiate::body(req.header(header::CONTENT_TYPE), patch, custom)?;
    let body = negotiate::decode(&req.body, false)
        .map_err(|e| Status::failure(400, "BadRequest", e.message))?;
    let (obj, _) = registry
        .update(
            kind,
            req.namespace(),
            name,
            None,
            req.dry_run()?,
            |current| {
                let Some(current) = current else {
                    return Err(not_found_object(kind, name));
                };
                let mut scale = scale_of(current, &paths);
                match form {
                    Body::MergePatch | Body::JsonPatch | Body::StrategicMergePatch => {
                        super::patch::merge_or_json_patch(form, &mut scale, &body)?
                    }
                    Body::ApplyPatch => {
                        return Err(Status::failure(
                            415,
                            "UnsupportedMediaType",
                            "apply patches are not supported on the scale subresource".into(),
                        ));
                    }
                    _ => {
                        // As the update handler's `checkName`.
                        let given = meta_str(&body, "name");
                        if given != name {
                            return Err(Status::failure(
                                400,
                                "BadRequest",
                                format!("the name of the object ({given}) does not match the name on the URL ({name})"),
                            ));
                        }
                        scale = body.clone()
                    }
                }
                let replicas = &scale["spec"]["replicas"];
                let Some(replicas) = replicas
                    .as_i64()
                    .filter(|r| *r >= 0 && *r <= i32::MAX as i64)
                else {
                    let error = FieldError::invalid(
                        "spec.replicas",
                        replicas.clone(),
                        "must be greater than or equal to 0",
                    );
                    return Err(Status::invalid("autoscaling", "Scale", name, &[error]));
                };
                let asked = meta_str(&scale, "resourceVersion");
                let mut new = current.clone();
                if !asked.is_empty() {
                    new["metadata"]["resourceVersion"] = asked.into();
                }
                set(&mut new, &paths.spec_replicas, replicas.into());
                Ok(new)
            },
        )
        .await?;
    Ok(value_response(
        StatusCode::OK,
        &scale_of(&obj, &paths),
        call.output,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scale_reads_and_writes_the_kinds_paths() {
        let paths = ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: Some(".status.selector".into()),
        };
        let obj = json!({"metadata": {"name": "w", "namespace": "d", "resourceVersion": "5", "labels": {"a": "b"}},
            "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=w"}});
        let scale = scale_of(&obj, &paths);
        assert_eq!(
            scale,
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {"name": "w", "namespace": "d", "resourceVersion": "5"},
                "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=w"}})
        );
        let mut empty = json!({});
        set(&mut empty, ".spec.deep.replicas", json!(4));
        assert_eq!(empty, json!({"spec": {"deep": {"replicas": 4}}}));
    }
}
