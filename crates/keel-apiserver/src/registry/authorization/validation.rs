//! `pkg/apis/authorization/validation/validation.go`: a review asks about resource or
//! non-resource attributes (exactly one), a SubjectAccessReview names a user or a group, and
//! a review's metadata is empty (a LocalSubjectAccessReview's but for its namespace, which
//! its resource attributes must name). Bad values are printed as Go's `json.Marshal` writes
//! the internal structs (which have no JSON tags: their Go field names).

use serde_json::Value;

use crate::storage::FieldError;

/// `ValidateSubjectAccessReview`.
pub fn subject_access_review(obj: &Value) -> Vec<FieldError> {
    let mut errors = spec(obj, true);
    errors.extend(empty_metadata(obj, false));
    errors
}

/// `ValidateSelfSubjectAccessReview`.
pub fn self_subject_access_review(obj: &Value) -> Vec<FieldError> {
    let mut errors = spec(obj, false);
    errors.extend(empty_metadata(obj, false));
    errors
}

/// `ValidateLocalSubjectAccessReview`.
pub fn local_subject_access_review(obj: &Value) -> Vec<FieldError> {
    let mut errors = spec(obj, true);
    errors.extend(empty_metadata(obj, true));
    let namespace = crate::registry::meta_str(obj, "namespace");
    if let Some(attributes) = present(obj, "resourceAttributes") {
        let given = attributes
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        if given != namespace {
            errors.push(FieldError::invalid(
                "spec.resourceAttributes.namespace",
                given,
                "must match metadata.namespace",
            ));
        }
    }
    if let Some(attributes) = present(obj, "nonResourceAttributes") {
        errors.push(FieldError::invalid_printed(
            "spec.nonResourceAttributes",
            non_resource(attributes),
            "disallowed on this kind of request",
        ));
    }
    errors
}

fn present<'a>(obj: &'a Value, field: &str) -> Option<&'a Value> {
    obj.get("spec")?.get(field).filter(|v| !v.is_null())
}

/// The internal `NonResourceAttributes` as `json.Marshal` writes it.
fn non_resource(attributes: &Value) -> String {
    let field = |f: &str| Value::from(attributes.get(f).and_then(Value::as_str).unwrap_or(""));
    format!("{{\"Path\":{},\"Verb\":{}}}", field("path"), field("verb"))
}

/// `ValidateSubjectAccessReviewSpec` (`subject`: a user or group must be named) or
/// `ValidateSelfSubjectAccessReviewSpec`.
fn spec(obj: &Value, subject: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let resource = present(obj, "resourceAttributes");
    let non_resource_attributes = present(obj, "nonResourceAttributes");
    match (resource, non_resource_attributes) {
        (Some(_), Some(n)) => errors.push(FieldError::invalid_printed(
            "spec.nonResourceAttributes",
            non_resource(n),
            "cannot be specified in combination with resourceAttributes",
        )),
        (None, None) => errors.push(FieldError::invalid(
            "spec.resourceAttributes",
            Value::Null,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        _ => {}
    }
    if subject {
        let user = obj
            .pointer("/spec/user")
            .and_then(Value::as_str)
            .unwrap_or("");
        let groups = obj
            .pointer("/spec/groups")
            .and_then(Value::as_array)
            .is_some_and(|g| !g.is_empty());
        if user.is_empty() && !groups {
            errors.push(FieldError::invalid(
                "spec.user",
                user,
                "at least one of user or group must be specified",
            ));
        }
    }
    errors
}

/// `metav1.ObjectMeta`'s fields in declared order (how `json.Marshal` writes them).
const META_FIELDS: [&str; 14] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
];

/// The metadata must be empty but for managedFields (and the namespace, `local`).
fn empty_metadata(obj: &Value, local: bool) -> Vec<FieldError> {
    let Some(metadata) = obj.get("metadata").and_then(Value::as_object) else {
        return Vec::new();
    };
    let set = |field: &str| {
        metadata.get(field).is_some_and(|v| match v {
            Value::Null => false,
            Value::String(s) => !s.is_empty(),
            Value::Number(n) => n.as_i64() != Some(0),
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
            Value::Bool(b) => *b,
        })
    };
    let other = META_FIELDS
        .iter()
        .any(|f| set(f) && !(local && *f == "namespace"));
    if !other {
        return Vec::new();
    }
    let mut printed = Vec::new();
    for field in META_FIELDS {
        if field == "creationTimestamp" {
            let value = metadata.get(field).cloned().unwrap_or(Value::Null);
            printed.push(format!("\"{field}\":{value}"));
        } else if set(field) {
            printed.push(format!("\"{field}\":{}", metadata[field]));
        }
    }
    let detail = if local {
        "must be empty except for namespace"
    } else {
        "must be empty"
    };
    vec![FieldError::invalid_printed(
        "metadata",
        format!("{{{}}}", printed.join(",")),
        detail,
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::json;

    #[test]
    fn attributes_subjects_and_metadata_are_checked_with_upstreams_words() {
        let both = json!({"metadata": {"name": "x", "managedFields": [{}]},
            "spec": {"resourceAttributes": {"verb": "get"},
                "nonResourceAttributes": {"path": "/healthz", "verb": "get"}}});
        assert_eq!(
            messages(&subject_access_review(&both)),
            vec![
                "spec.nonResourceAttributes: Invalid value: {\"Path\":\"/healthz\",\"Verb\":\"get\"}: cannot be specified in combination with resourceAttributes",
                "spec.user: Invalid value: \"\": at least one of user or group must be specified",
                "metadata: Invalid value: {\"name\":\"x\",\"creationTimestamp\":null}: must be empty",
            ]
        );
        let neither = json!({"metadata": {"creationTimestamp": null}, "spec": {"groups": ["g"]}});
        assert_eq!(
            messages(&subject_access_review(&neither)),
            vec![
                "spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified"
            ]
        );
        let fine = json!({"spec": {"nonResourceAttributes": {"path": "/api", "verb": "get"}}});
        assert!(self_subject_access_review(&fine).is_empty());
    }

    #[test]
    fn a_local_review_stays_in_its_namespace() {
        let review = json!({"metadata": {"namespace": "ns"}, "spec": {"user": "u",
            "resourceAttributes": {"namespace": "other", "verb": "get"}}});
        assert_eq!(
            messages(&local_subject_access_review(&review)),
            vec![
                "spec.resourceAttributes.namespace: Invalid value: \"other\": must match metadata.namespace"
            ]
        );
        let urls = json!({"metadata": {"namespace": "ns", "labels": {"a": "b"}}, "spec": {"user": "u",
            "nonResourceAttributes": {"path": "/x", "verb": "get"}}});
        assert_eq!(
            messages(&local_subject_access_review(&urls)),
            vec![
                "metadata: Invalid value: {\"namespace\":\"ns\",\"creationTimestamp\":null,\"labels\":{\"a\":\"b\"}}: must be empty except for namespace",
                "spec.nonResourceAttributes: Invalid value: {\"Path\":\"/x\",\"Verb\":\"get\"}: disallowed on this kind of request",
            ]
        );
    }
}
