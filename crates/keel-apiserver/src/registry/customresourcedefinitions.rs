//! apiextensions.k8s.io/v1 CustomResourceDefinitions: NAME, CREATED AT; defaulted,
//! validated and updated as [`crate::apiextensions::crd`] says, each version's CEL rules
//! compiled ([`crate::apiextensions::cel`]). A new CRD gets the
//! `customresourcecleanup.apiextensions.k8s.io` finalizer (its objects are deleted before it
//! is) and its storage version in `status.storedVersions`; the rest of its status (accepted
//! names, conditions) is the CRD controller's.

use serde_json::{Value, json};

use super::names::NameRule;
use super::time::Time;
use super::{Column, NAME_COLUMN, ResourceInfo, Strategy, meta};
use crate::apiextensions::crd::storage_version;
use crate::apiextensions::{cel, crd};
use crate::storage::FieldError;

/// The finalizer that holds a CRD until its objects are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The CustomResourceDefinition strategy.
pub struct CustomResourceDefinitions;

static INFO: ResourceInfo = ResourceInfo {
    group: "apiextensions.k8s.io",
    version: "v1",
    kind: "CustomResourceDefinition",
    resource: "customresourcedefinitions",
    singular: "customresourcedefinition",
    short_names: &["crd", "crds"],
    categories: &["api-extensions"],
    namespaced: false,
    name_rule: NameRule::Subdomain,
    status: true,
    returns_deleted_object: false,
};

static COLUMNS: [Column; 2] = [
    NAME_COLUMN,
    Column {
        name: "Created At",
        kind: "date",
        format: "",
        description: "CreationTimestamp is a timestamp representing the server time when this \
            object was created. It is not guaranteed to be set in happens-before order across \
            separate operations. Clients may not set this value. It is represented in RFC3339 \
            form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More \
            info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
        priority: 0,
    },
];

/// The errors of each version's CEL rules.
fn compile_rules(obj: &Value) -> Vec<FieldError> {
    let versions = obj.pointer("/spec/versions").and_then(Value::as_array);
    let mut errors = Vec::new();
    for (i, version) in versions.into_iter().flatten().enumerate() {
        if let Some(schema) = version.pointer("/schema/openAPIV3Schema") {
            let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
            errors.extend(cel::compile_rules(schema, &path));
        }
    }
    errors
}

impl Strategy for CustomResourceDefinitions {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn key_resource(&self) -> &'static str {
        "apiextensions.k8s.io/customresourcedefinitions"
    }

    fn set_defaults(&self, obj: &mut Value) {
        crd::set_defaults(obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        crd::set_defaults(obj);
        let stored: Vec<Value> = storage_version(obj).map(Value::from).into_iter().collect();
        obj["status"] = json!({
            "acceptedNames": {"plural": "", "kind": ""},
            "conditions": [],
            "storedVersions": stored,
        });
        let finalizers = meta::metadata(obj)
            .entry("finalizers")
            .or_insert_with(|| json!([]));
        if let Some(list) = finalizers.as_array_mut()
            && !list.iter().any(|f| f == CLEANUP_FINALIZER)
        {
            list.push(CLEANUP_FINALIZER.into());
        }
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        crd::set_defaults(new);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = crd::validate(obj);
        errors.extend(compile_rules(obj));
        errors
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = crd::validate_update(new, old);
        errors.extend(compile_rules(new));
        errors
    }

    /// `ValidateUpdateCustomResourceDefinitionStatus`: the accepted names. (Upstream's
    /// status `PrepareForUpdate` resets the metadata to itself, so a status update keeps
    /// the metadata it sends, which the CRD finalizer counts on.)
    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let empty = Value::Null;
        let accepted = new.pointer("/status/acceptedNames").unwrap_or(&empty);
        crd::names_errors(accepted, "status.acceptedNames")
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, _now: Time) -> Vec<Value> {
        vec![
            Value::from(super::meta_str(obj, "name")),
            Value::from(super::meta_str(obj, "creationTimestamp")),
        ]
    }

    fn tracks_generation(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_crd_is_defaulted_held_by_its_finalizer_and_stores_its_storage_version() {
        let mut obj = json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-validations": [{"rule": "self.x"}]}}}],
            },
            "status": {"storedVersions": ["v0"]},
        });
        CustomResourceDefinitions.prepare_for_create(&mut obj);
        assert_eq!(obj["metadata"]["finalizers"], json!([CLEANUP_FINALIZER]));
        assert_eq!(obj["status"]["storedVersions"], json!(["v1"]));
        assert_eq!(obj["spec"]["names"]["listKind"], "WidgetList");
        let errors = CustomResourceDefinitions.validate(&obj);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0]
                .field
                .starts_with("spec.versions[0].schema.openAPIV3Schema.x-kubernetes-validations[0]"),
            "{errors:?}"
        );
    }

    #[test]
    fn a_status_update_checks_the_accepted_names() {
        let crd = json!({"status": {"acceptedNames": {"plural": "Widgets", "kind": "Widget",
            "listKind": "Widget", "shortNames": ["w_d"]}}});
        let errors = crate::registry::rules::messages(
            &CustomResourceDefinitions.validate_status_update(&crd, &crd),
        );
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].starts_with("status.acceptedNames.plural: Invalid value: \"Widgets\""));
        assert!(
            errors[1].starts_with("status.acceptedNames.shortNames[0]: Invalid value: \"w_d\"")
        );
        assert_eq!(
            errors[2],
            "status.acceptedNames.listKind: Invalid value: \"Widget\": kind and listKind may not \
             be the same or parsing become ambiguous"
        );
    }
}
