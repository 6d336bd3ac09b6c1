//! `metadata` as every kind's create and update treat it (apimachinery's
//! `rest.BeforeCreate` / `rest.BeforeUpdate` and `ValidateObjectMeta`): the system fields
//! (uid, creationTimestamp, generation, resourceVersion) are the server's, names follow the
//! kind's rule, and an update may not change what identifies the object.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use super::names;
use super::{ResourceInfo, meta_str};
use crate::apimachinery::time::Time;
use crate::apimachinery::validation::{is_qualified_name, is_valid_label_value};
use crate::json_pointer::At;
use crate::storage::FieldError;

/// The characters a generated name's suffix is drawn from (apimachinery's
/// `utilrand.String`: no vowels, no confusable digits).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The length of a generated name's random suffix.
const SUFFIX_LEN: usize = 5;

/// A generated name's prefix is cut to leave room for the suffix (`maxGeneratedNameLength`).
const MAX_GENERATED_PREFIX: usize = 63 - SUFFIX_LEN;

/// `obj.metadata`, created if missing (an object that is not a JSON object is replaced by
/// the caller's checks before this runs).
pub fn metadata(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"]
        .as_object_mut()
        .expect("metadata was just made an object")
}

/// A random name from `prefix`, as `generateName` asks.
pub fn generate_name(prefix: &str) -> String {
    let prefix = if prefix.len() > MAX_GENERATED_PREFIX {
        &prefix[..MAX_GENERATED_PREFIX]
    } else {
        prefix
    };
    let random = uuid::Uuid::new_v4();
    let suffix: String = random.as_bytes()[..SUFFIX_LEN]
        .iter()
        .map(|b| SUFFIX_ALPHABET[*b as usize % SUFFIX_ALPHABET.len()] as char)
        .collect();
    format!("{prefix}{suffix}")
}

/// Sets the system fields of a new object: a fresh uid, the creation time, generation 1 for
/// kinds that count it, and clears what a client may not set on create (resourceVersion,
/// deletion fields, selfLink).
pub fn prepare_create(obj: &mut Value, tracks_generation: bool, now: Time) {
    let meta = metadata(obj);
    if meta_field(meta, "name").is_empty()
        && let Some(prefix) = meta.get("generateName").and_then(Value::as_str)
        && !prefix.is_empty()
    {
        let name = generate_name(prefix);
        meta.insert("name".into(), name.into());
    }
    drop_empty(meta);
    meta.insert("uid".into(), uuid::Uuid::new_v4().to_string().into());
    meta.insert("creationTimestamp".into(), now.rfc3339().into());
    for field in [
        "resourceVersion",
        "selfLink",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        meta.remove(field);
    }
    if tracks_generation {
        meta.insert("generation".into(), 1.into());
    } else {
        meta.remove("generation");
    }
}

/// Removes what Go's `omitempty` would leave out of ObjectMeta (empty strings, maps and
/// lists, nulls), so an object reads back as kube-apiserver would store it.
fn drop_empty(meta: &mut Map<String, Value>) {
    meta.retain(|_, v| match v {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Object(m) => !m.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => true,
    });
}

/// Carries over from `old` the fields an update never changes: the uid when none is given,
/// the creation time, the deletion fields and the generation (the caller bumps it).
pub fn prepare_update(new: &mut Value, old: &Value) {
    let old_meta = old.get("metadata").and_then(Value::as_object);
    let meta = metadata(new);
    meta.remove("selfLink");
    drop_empty(meta);
    let carried = |field: &str| old_meta.and_then(|m| m.get(field)).cloned();
    if meta_field(meta, "uid").is_empty()
        && let Some(uid) = carried("uid")
    {
        meta.insert("uid".into(), uid);
    }
    for field in [
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match carried(field) {
            Some(value) => meta.insert(field.into(), value),
            None => meta.remove(field),
        };
    }
}

/// Bumps `metadata.generation` when anything but metadata and status changed.
pub fn bump_generation(new: &mut Value, old: &Value) {
    let spec_of = |v: &Value| -> Map<String, Value> {
        v.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| {
                        !["metadata", "status", "apiVersion", "kind"].contains(&k.as_str())
                    })
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    if spec_of(new) != spec_of(old) {
        let next = old
            .at("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            + 1;
        metadata(new).insert("generation".into(), next.into());
    }
}

/// An object with finalizers marked for deletion (`deletionTimestamp` now, grace period 0,
/// unless it is marked already); None when it has no finalizers and can go at once.
pub fn mark_for_finalizers(obj: &Value, now: Time) -> Option<Value> {
    let finalizers = obj.at("/metadata/finalizers").and_then(Value::as_array);
    if finalizers.is_none_or(|f| f.is_empty()) {
        return None;
    }
    let mut marked = obj.clone();
    let meta = metadata(&mut marked);
    if !meta.contains_key("deletionTimestamp") {
        meta.insert("deletionTimestamp".into(), now.rfc3339().into());
        meta.insert("deletionGracePeriodSeconds".into(), 0.into());
    }
    Some(marked)
}

/// Whether `obj`, marked for deletion, may go now: no grace period left and no finalizers.
pub fn deletes_now(obj: &Value) -> bool {
    let no_finalizers = |path: &str| {
        obj.at(path)
            .and_then(Value::as_array)
            .is_none_or(|f| f.is_empty())
    };
    !meta_str(obj, "deletionTimestamp").is_empty()
        && obj
            .at("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            == Some(0)
        && no_finalizers("/metadata/finalizers")
        && no_finalizers("/spec/finalizers")
}

/// kube's `shouldDeleteDuringUpdate`: an update that removes the last finalizer of an
/// object marked for deletion (with no grace period left) deletes it.
pub fn should_delete_during_update(new: &Value, old: &Value) -> bool {
    let none = |path: &str| {
        new.at(path)
            .and_then(Value::as_array)
            .is_none_or(|f| f.is_empty())
    };
    // A namespace also waits for its own finalizers (`spec.finalizers`).
    none("/metadata/finalizers")
        && none("/spec/finalizers")
        && !meta_str(old, "deletionTimestamp").is_empty()
        && old
            .at("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .is_none_or(|g| g == 0)
}

fn meta_field<'a>(meta: &'a Map<String, Value>, field: &str) -> &'a str {
    meta.get(field).and_then(Value::as_str).unwrap_or("")
}

/// `ValidateLabels` of the map at `path`: qualified names to valid label values.
pub fn validate_labels(labels: &Value, path: &str) -> Vec<FieldError> {
    map_of_strings(labels, path, true)
}

/// A map of strings whose keys are qualified names (and whose values are label values when
/// `label_values`).
fn map_of_strings(map: &Value, path: &str, label_values: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(map) = map.as_object() else {
        errors.push(FieldError::invalid(
            path,
            map.clone(),
            "must be a map of strings",
        ));
        return errors;
    };
    for (key, value) in map {
        // Annotation keys are qualified names whatever their case (`ValidateAnnotations`).
        let checked = if label_values {
            Cow::Borrowed(key.as_str())
        } else {
            Cow::Owned(key.to_lowercase())
        };
        for problem in is_qualified_name(&checked) {
            errors.push(FieldError::invalid(path, key.as_str(), &problem));
        }
        match value.as_str() {
            Some(v) if label_values => {
                for problem in is_valid_label_value(v) {
                    errors.push(FieldError::invalid(path, v, &problem));
                }
            }
            Some(_) => {}
            None => errors.push(FieldError::invalid(
                &format!("{path}.{key}"),
                value.clone(),
                "must be a string",
            )),
        }
    }
    errors
}

/// `ValidateObjectMeta`: the name, the namespace against the kind's scope, labels and
/// annotations.
pub fn validate(obj: &Value, info: &ResourceInfo) -> Vec<FieldError> {
    let mut errors = names::validate(
        meta_str(obj, "name"),
        meta_str(obj, "generateName"),
        info.name_rule,
    );
    let namespace = meta_str(obj, "namespace");
    if info.namespaced {
        if namespace.is_empty() {
            errors.push(FieldError::required("metadata.namespace", ""));
        }
    } else if !namespace.is_empty() {
        errors.push(FieldError::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    if let Some(labels) = obj.at("/metadata/labels") {
        errors.extend(validate_labels(labels, "metadata.labels"));
    }
    if let Some(map) = obj.at("/metadata/annotations") {
        errors.extend(map_of_strings(map, "metadata.annotations", false));
        errors.extend(annotations_size(map));
    }
    if let Some(refs) = obj.at("/metadata/ownerReferences") {
        errors.extend(validate_owner_references(refs));
    }
    if let Some(finalizers) = obj.at("/metadata/finalizers") {
        errors.extend(validate_finalizers(finalizers));
    }
    errors.extend(crate::fieldmanager::entries::validate(obj));
    errors
}

/// [`validate`] for an update of `old`: ownerReferences and finalizers the update leaves as
/// they were (or only shortens) are not checked again, so an object stored before keel
/// checked them can still lose a finalizer or a reference (the collector's and
/// controllers' own updates), where kube-apiserver, which always checked them, checks
/// them again.
pub fn validate_updated(new: &Value, old: &Value, info: &ResourceInfo) -> Vec<FieldError> {
    let unchanged = |path: &str| {
        let listed = |obj: &Value| -> Vec<Value> {
            obj.at(path)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let was = listed(old);
        listed(new).iter().all(|item| was.contains(item))
    };
    let (refs, finalizers) = (
        unchanged("/metadata/ownerReferences"),
        unchanged("/metadata/finalizers"),
    );
    validate(new, info)
        .into_iter()
        .filter(|e| {
            !(refs && e.field.starts_with("metadata.ownerReferences")
                || finalizers && e.field == "metadata.finalizers")
        })
        .collect()
}

/// The most the keys and values of an object's annotations may hold together
/// (`TotalAnnotationSizeLimitB`).
const ANNOTATIONS_SIZE_LIMIT: usize = 256 * 1024;

/// `ValidateAnnotationsSize`.
fn annotations_size(map: &Value) -> Option<FieldError> {
    let total: usize = map
        .as_object()?
        .iter()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    (total > ANNOTATIONS_SIZE_LIMIT)
        .then(|| FieldError::too_long("metadata.annotations", ANNOTATIONS_SIZE_LIMIT))
}

/// `ValidateOwnerReferences`: each reference names an apiVersion with a version, a kind, a
/// name and a uid (errors on the list's path, as upstream reports them), and at most one
/// is the controller.
fn validate_owner_references(refs: &Value) -> Vec<FieldError> {
    const PATH: &str = "metadata.ownerReferences";
    let mut errors = Vec::new();
    let mut controller: Option<String> = None;
    for r in refs.as_array().into_iter().flatten() {
        let text = |field: &str| r.get(field).and_then(Value::as_str).unwrap_or("");
        let api_version = text("apiVersion");
        // `ParseGroupVersion`: more than one `/` is no version at all.
        let (group, version) = match api_version.split('/').collect::<Vec<_>>()[..] {
            [version] => ("", version),
            [group, version] => (group, version),
            _ => ("", ""),
        };
        if version.is_empty() {
            errors.push(FieldError::invalid(
                &format!("{PATH}.apiVersion"),
                api_version,
                "version must not be empty",
            ));
        }
        for field in ["kind", "name", "uid"] {
            if text(field).is_empty() {
                errors.push(FieldError::invalid(
                    &format!("{PATH}.{field}"),
                    "",
                    "must not be empty",
                ));
            }
        }
        // `BannedOwners`.
        if (group, version, text("kind")) == ("", "v1", "Event") {
            errors.push(FieldError::invalid(
                PATH,
                r.clone(),
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if r.get("controller").and_then(Value::as_bool) == Some(true) {
            let this = format!("{}/{}", text("kind"), text("name"));
            match &controller {
                Some(first) => errors.push(FieldError::invalid(
                    PATH,
                    refs.clone(),
                    &format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}"
                    ),
                )),
                None => controller = Some(this),
            }
        }
    }
    errors
}

/// `ValidateFinalizers`: qualified names, and not both `orphan` and `foregroundDeletion`.
fn validate_finalizers(finalizers: &Value) -> Vec<FieldError> {
    const PATH: &str = "metadata.finalizers";
    let names: Vec<&str> = finalizers
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut errors = Vec::new();
    for name in &names {
        for problem in is_qualified_name(name) {
            errors.push(FieldError::invalid(PATH, *name, &problem));
        }
    }
    if names.contains(&"orphan") && names.contains(&"foregroundDeletion") {
        errors.push(FieldError::invalid(
            PATH,
            finalizers.clone(),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    errors
}

/// `ValidateNoNewFinalizers`, for an update of an object already being deleted: no
/// finalizer may be added (the server's own mark of a delete aside).
pub fn validate_no_new_finalizers(new: &Value, old: &Value) -> Option<FieldError> {
    if meta_str(old, "deletionTimestamp").is_empty() {
        return None;
    }
    let names = |obj: &Value| -> std::collections::BTreeSet<String> {
        obj.at("/metadata/finalizers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    let was = names(old);
    let extra: Vec<String> = names(new)
        .into_iter()
        .filter(|f| !was.contains(f))
        .map(|f| crate::apimachinery::quote::go_quote(&f))
        .collect();
    (!extra.is_empty()).then(|| {
        FieldError::forbidden(
            "metadata.finalizers",
            &format!(
                "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                extra.join(", ")
            ),
        )
    })
}

/// `ValidateObjectMetaUpdate`: what identifies an object may not change.
pub fn validate_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for field in ["name", "namespace", "uid"] {
        let (now, was) = (meta_str(new, field), meta_str(old, field));
        if now != was {
            errors.push(FieldError::invalid(
                &format!("metadata.{field}"),
                now,
                "field is immutable",
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errors: impl IntoIterator<Item = FieldError>) -> Vec<String> {
        errors.into_iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn owner_references_finalizers_and_annotations_are_checked_as_object_meta_is() {
        let refs = json!([
            {"apiVersion": "v1", "kind": "", "name": "", "uid": "", "controller": true},
            {"apiVersion": "apps/", "kind": "ReplicaSet", "name": "rs", "uid": "u",
             "controller": true},
        ]);
        let got = messages(validate_owner_references(&refs));
        assert_eq!(
            got[0],
            r#"metadata.ownerReferences.kind: Invalid value: "": must not be empty"#
        );
        assert_eq!(
            got[1],
            r#"metadata.ownerReferences.name: Invalid value: "": must not be empty"#
        );
        assert_eq!(
            got[2],
            r#"metadata.ownerReferences.uid: Invalid value: "": must not be empty"#
        );
        assert_eq!(
            got[3],
            r#"metadata.ownerReferences.apiVersion: Invalid value: "apps/": version must not be empty"#
        );
        assert!(got[4].contains(
            r#"Only one reference can have Controller set to true. Found "true" in references for /"#
        ));
        assert!(got[4].ends_with(" and ReplicaSet/rs"), "{}", got[4]);
        assert_eq!(got.len(), 5);

        let got = messages(validate_finalizers(&json!([
            "orphan",
            "foregroundDeletion",
            "a b"
        ])));
        assert_eq!(got.len(), 2);
        assert!(got[0].starts_with(
            r#"metadata.finalizers: Invalid value: "a b": name part must consist of"#
        ));
        assert!(got[1].ends_with("finalizer orphan and foregroundDeletion cannot be both set"));
        assert!(validate_finalizers(&json!(["example.com/x", "kubernetes"])).is_empty());

        let big = json!({"a": "x".repeat(ANNOTATIONS_SIZE_LIMIT)});
        assert_eq!(
            annotations_size(&big).map(|e| e.to_string()).as_deref(),
            Some("metadata.annotations: Too long: may not be more than 262144 bytes")
        );
        assert!(annotations_size(&json!({"a": "x".repeat(ANNOTATIONS_SIZE_LIMIT - 1)})).is_none());
        // Annotation keys are qualified names whatever their case.
        assert!(
            map_of_strings(
                &json!({"Example.com/Key": "v"}),
                "metadata.annotations",
                false
            )
            .is_empty()
        );
    }

    #[test]
    fn a_reference_is_parsed_as_a_group_version_and_unchanged_ones_are_not_checked_again() {
        let refs = json!([{"apiVersion": "apps/v1/x", "kind": "K", "name": "n", "uid": "u"},
            {"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "u"}]);
        let got = messages(validate_owner_references(&refs));
        assert_eq!(
            got[0],
            r#"metadata.ownerReferences.apiVersion: Invalid value: "apps/v1/x": version must not be empty"#
        );
        assert!(got[1].ends_with("/v1, Kind=Event is disallowed from being an owner"));
        assert_eq!(got.len(), 2);
        // Stored before the checks: an update that keeps or drops them is not refused.
        let info = crate::registry::Strategy::info(&crate::registry::configmaps::ConfigMaps);
        let old = json!({"metadata": {"name": "a", "namespace": "d", "ownerReferences": refs,
            "finalizers": ["a b", "x/y"]}});
        let mut new = old.clone();
        new["metadata"]["finalizers"] = json!(["a b"]);
        assert!(validate_updated(&new, &old, info).is_empty());
        new["metadata"]["finalizers"] = json!(["a b", "c d"]);
        assert_eq!(validate_updated(&new, &old, info).len(), 2);
    }

    #[test]
    fn no_finalizer_is_added_to_an_object_being_deleted() {
        let old = json!({"metadata": {"name": "a", "finalizers": ["x/a"],
            "deletionTimestamp": "2026-12-07T00:00:00Z"}});
        let new = json!({"metadata": {"name": "a", "finalizers": ["x/a", "x/c", "x/b"]}});
        assert_eq!(
            validate_no_new_finalizers(&new, &old)
                .map(|e| e.to_string())
                .as_deref(),
            Some(
                r#"metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"x/b", "x/c"}"#
            )
        );
        let alive = json!({"metadata": {"name": "a"}});
        assert!(validate_no_new_finalizers(&new, &alive).is_none());
        assert!(validate_no_new_finalizers(&old, &old).is_none());
    }

    #[test]
    fn generated_names_keep_the_prefix_and_add_five_characters() {
        let name = generate_name("web-");
        assert_eq!(name.len(), 9);
        assert!(name.starts_with("web-"));
        assert!(name[4..].bytes().all(|c| SUFFIX_ALPHABET.contains(&c)));
        assert_eq!(generate_name(&"a".repeat(100)).len(), 63);
    }

    #[test]
    fn updates_keep_the_system_fields() {
        let old = json!({"metadata": {"name": "a", "uid": "u1", "creationTimestamp": "t", "generation": 3}});
        let mut new =
            json!({"metadata": {"name": "a", "creationTimestamp": "other"}, "spec": {"x": 1}});
        prepare_update(&mut new, &old);
        assert_eq!(new["metadata"]["uid"], "u1");
        assert_eq!(new["metadata"]["creationTimestamp"], "t");
        bump_generation(&mut new, &old);
        assert_eq!(new["metadata"]["generation"], 4);
        let mut same = old.clone();
        bump_generation(&mut same, &old);
        assert_eq!(same["metadata"]["generation"], 3);
    }

    #[test]
    fn label_keys_and_values_are_checked() {
        let info = crate::registry::configmaps::ConfigMaps;
        let info = crate::registry::Strategy::info(&info);
        let obj = json!({"metadata": {"name": "a", "namespace": "d", "labels": {"app": "web", "bad key": "x", "k": "-v"}}});
        let errors = validate(&obj, info);
        let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(errors.len(), 2, "{text:?}");
        assert!(
            text[0]
                .starts_with("metadata.labels: Invalid value: \"bad key\": name part must consist")
        );
        assert!(
            text[1].starts_with("metadata.labels: Invalid value: \"-v\": a valid label must be")
        );
    }
}
