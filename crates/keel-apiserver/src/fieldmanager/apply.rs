//! Server-side apply (`PATCH` with `Content-Type: application/apply-patch+yaml`), as
//! kube-apiserver's `applyPatcher` serves it: the body (YAML, or JSON, which is YAML) read
//! as the applied configuration, refused 400 when its apiVersion or kind is not the
//! endpoint's (`invalid object type: apps/v1, Kind=Service`, the field manager's first
//! check, before any schema check), merged into the stored object by
//! [`FieldManager::apply`] or, when there is none, made into a new one (201), and the result
//! checked for the keys it repeats as `fieldValidation` says and against the URL's name and
//! namespace before it goes through the same update path as every other write. The wording
//! of every refusal is kube-apiserver's.

use serde_json::Value;

use super::managed::FieldManager;
use super::options::Options;
use crate::apimachinery::time::Time;
use crate::http::auth::User;
use crate::http::field_validation::{self, Directive};
use crate::http::response::target;
use crate::http::{negotiate, openapi};
use crate::registry::store::Registry;
use crate::registry::{Strategy, meta, meta_str};
use crate::storage::Status;

/// What an apply wrote: the object as stored, whether it was created, and the warnings to
/// answer with.
pub struct Applied {
    /// The object as stored.
    pub object: Value,
    /// Whether the apply created it.
    pub created: bool,
    /// The field validation's warnings.
    pub warnings: Vec<String>,
}

/// Applies the configuration in `body` to the object `name` (created if missing, except
/// through a subresource, as `user`'s create), its repeated keys checked as `directive` says.
#[allow(clippy::too_many_arguments)]
pub async fn patch(
    registry: &Registry,
    kind: &'static dyn Strategy,
    namespace: Option<&str>,
    name: &str,
    subresource: Option<&str>,
    dry_run: bool,
    body: &[u8],
    options: &Options,
    directive: Directive,
    user: &User,
) -> Result<Applied, Status> {
    let config = read(body)?;
    // Upstream checks the body once the apply has succeeded, so its conflicts and schema
    // errors come first; the result does not depend on the object.
    let strict = field_validation::check_applied(body, directive);
    let defs = openapi::documents(&registry.kinds()).definitions();
    let manager = FieldManager::new(kind, subresource, Time::now());
    manager.check_applied(&config).map_err(|e| e.status())?;
    let errors = field_validation::apply_errors(kind, defs, &config);
    if !errors.is_empty() {
        let errors = match errors.as_slice() {
            [one] => one.clone(),
            many => format!("errors:\n  {}", many.join("\n  ")),
        };
        return Err(internal(format!(
            "failed to create typed patch object ({}): {errors}",
            manager.describe(&config)
        )));
    }
    let (object, created) = registry
        .update_or_create(
            kind,
            namespace,
            name,
            subresource,
            dry_run,
            Some(user),
            |current| {
                let mut obj = manager
                    .apply(current, &config, &options.manager, options.force)
                    .map_err(|e| e.status())?;
                if let Some(error) = field_validation::conversion_error(kind, defs, &obj) {
                    let info = kind.info();
                    return Err(internal(format!(
                        "failed to convert new object ({}) to proper version: unable to convert \
                     unstructured object to {}/{}, Kind={}: {error}",
                        manager.describe(&config),
                        info.group,
                        info.version,
                        info.kind
                    )));
                }
                strict.clone()?;
                check(kind, current.is_some(), &mut obj, namespace, name)?;
                Ok(obj)
            },
        )
        .await?;
    Ok(Applied {
        object,
        created,
        warnings: strict.unwrap_or_default(),
    })
}

/// kube-apiserver's answer to an applied configuration its field manager cannot take (its
/// schema does not declare a field, a value is of the wrong type): 500 with no reason, as
/// for any error that is not a Status, so nothing unknown or mistyped is stored or owned.
fn internal(message: String) -> Status {
    Status::failure(500, "", message)
}

/// The applied configuration: a YAML (or JSON) object; nothing at all is an empty one.
pub fn read(body: &[u8]) -> Result<Value, Status> {
    let bad = |m: String| Status::failure(400, "BadRequest", m);
    let doc = negotiate::from_yaml(body).map_err(|e| {
        bad(format!(
            "error encoding patch: error converting YAML to JSON: yaml: {e}"
        ))
    })?;
    let kind = match &doc {
        Value::Object(_) => return Ok(doc),
        Value::Null => return Ok(Value::Object(Default::default())),
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
    };
    Err(bad(format!(
        "error decoding patch: json: cannot unmarshal {kind} into Go value of type \
         map[string]interface {{}}"
    )))
}

/// The checks of the patcher's `applyPatch`: a new object may not claim a uid, the
/// namespace is the request's (filled in when left out), the name is the URL's.
fn check(
    kind: &dyn Strategy,
    existed: bool,
    obj: &mut Value,
    namespace: Option<&str>,
    name: &str,
) -> Result<(), Status> {
    let info = kind.info();
    let uid = meta_str(obj, "uid");
    if !existed && !uid.is_empty() {
        let why = format!(
            "uid mismatch: the provided object specified uid {uid}, and no existing object was found"
        );
        return Err(Status::conflict(&target(kind, name), &why));
    }
    let bad = |m: String| Status::failure(400, "BadRequest", m);
    let given = meta_str(obj, "namespace").to_string();
    let expected = namespace.filter(|_| info.namespaced).unwrap_or("");
    match (given.is_empty(), expected.is_empty()) {
        _ if given == expected => {}
        (true, false) => {
            meta::metadata(obj).insert("namespace".into(), expected.into());
        }
        (false, true) => {
            meta::metadata(obj).remove("namespace");
        }
        _ => {
            return Err(bad(
                "the namespace of the provided object does not match the namespace sent on \
                 the request"
                    .into(),
            ));
        }
    }
    let given = meta_str(obj, "name");
    if given != name {
        return Err(bad(format!(
            "the name of the object ({given}) does not match the name on the URL ({name})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_yaml_or_json_objects() {
        assert_eq!(
            read(b"apiVersion: v1\nkind: ConfigMap\n").unwrap()["kind"],
            "ConfigMap"
        );
        assert_eq!(
            read(br#"{"kind":"ConfigMap"}"#).unwrap()["kind"],
            "ConfigMap"
        );
        assert_eq!(read(b"").unwrap(), serde_json::json!({}));
        let e = read(b"- a\n").unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
        assert!(
            read(b"a: [")
                .unwrap_err()
                .message
                .starts_with("error encoding patch")
        );
    }

    #[test]
    fn the_result_must_be_the_urls_object() {
        let cm = &crate::registry::configmaps::ConfigMaps;
        let mut obj = serde_json::json!({"metadata": {"name": "a"}});
        check(cm, false, &mut obj, Some("d"), "a").unwrap();
        assert_eq!(obj["metadata"]["namespace"], "d");
        let mut other = serde_json::json!({"metadata": {"name": "b", "namespace": "d"}});
        let e = check(cm, true, &mut other, Some("d"), "a").unwrap_err();
        assert_eq!(
            e.message,
            "the name of the object (b) does not match the name on the URL (a)"
        );
        let mut elsewhere = serde_json::json!({"metadata": {"name": "a", "namespace": "x"}});
        assert_eq!(
            check(cm, true, &mut elsewhere, Some("d"), "a")
                .unwrap_err()
                .code,
            400
        );
        let mut claimed = serde_json::json!({"metadata": {"name": "a", "uid": "u"}});
        let e = check(cm, false, &mut claimed, Some("d"), "a").unwrap_err();
        assert_eq!((e.code, e.reason), (409, "Conflict"));
        assert!(e.message.ends_with(
            "uid mismatch: the provided object specified uid u, and no existing object was found"
        ));
    }
}
