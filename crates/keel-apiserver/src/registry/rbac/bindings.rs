//! RoleBindings and ClusterRoleBindings (`pkg/registry/rbac/rolebinding`,
//! `pkg/registry/rbac/clusterrolebinding`): defaulted as `SetDefaults_RoleBinding`,
//! `SetDefaults_ClusterRoleBinding` and `SetDefaults_Subject` do (the roleRef's and a User's
//! or Group's apiGroup), validated as `ValidateRoleBinding` and `ValidateClusterRoleBinding`
//! (the roleRef, never changed; each subject's kind, apiGroup, name and namespace), and
//! printed as `printRoleBinding` and `printClusterRoleBinding`: NAME, ROLE, AGE, and with
//! `-o wide` USERS, GROUPS, SERVICEACCOUNTS.

use serde_json::Value;

use super::GROUP;
use crate::apimachinery::time::Time;
use crate::apimachinery::validation::{is_dns1123_subdomain, path_segment_name};
use crate::registry::names::NameRule;
use crate::registry::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, text};
use crate::storage::FieldError;

/// The RoleBinding strategy.
pub struct RoleBindings;

/// The ClusterRoleBinding strategy.
pub struct ClusterRoleBindings;

static ROLE_BINDING: ResourceInfo = ResourceInfo {
    name_rule: NameRule::PathSegment,
    ..ResourceInfo::new(GROUP, "v1", "RoleBinding", "rolebindings", "rolebinding")
};

static CLUSTER_ROLE_BINDING: ResourceInfo = ResourceInfo {
    name_rule: NameRule::PathSegment,
    namespaced: false,
    ..ResourceInfo::new(
        GROUP,
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        "clusterrolebinding",
    )
};

const fn columns(role: &'static str) -> [Column; 6] {
    [
        NAME_COLUMN,
        Column::string("Role", 0, role),
        AGE_COLUMN,
        Column::string("Users", 1, "Users in the roleBinding"),
        Column::string("Groups", 1, "Groups in the roleBinding"),
        Column::string("ServiceAccounts", 1, "ServiceAccounts in the roleBinding"),
    ]
}

static ROLE_BINDING_COLUMNS: [Column; 6] = columns(
    "RoleRef can reference a Role in the current namespace or a ClusterRole in the global \
     namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
);

static CLUSTER_ROLE_BINDING_COLUMNS: [Column; 6] = columns(
    "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot \
     be resolved, the Authorizer must return an error.",
);

impl Strategy for RoleBindings {
    fn info(&self) -> &'static ResourceInfo {
        &ROLE_BINDING
    }

    fn set_defaults(&self, obj: &mut Value) {
        set_defaults(obj);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate(obj, true)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_update(new, old, true)
    }

    fn columns(&self) -> &'static [Column] {
        &ROLE_BINDING_COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        cells(obj, now)
    }
}

impl Strategy for ClusterRoleBindings {
    fn info(&self) -> &'static ResourceInfo {
        &CLUSTER_ROLE_BINDING
    }

    fn set_defaults(&self, obj: &mut Value) {
        set_defaults(obj);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate(obj, false)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_update(new, old, false)
    }

    fn columns(&self) -> &'static [Column] {
        &CLUSTER_ROLE_BINDING_COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        cells(obj, now)
    }
}

/// `SetDefaults_RoleBinding` / `SetDefaults_ClusterRoleBinding` (an empty roleRef.apiGroup
/// is the RBAC group) and `SetDefaults_Subject` (an empty apiGroup of a User or Group is the
/// RBAC group; a ServiceAccount's stays empty).
fn set_defaults(obj: &mut Value) {
    if let Some(role_ref) = obj.get_mut("roleRef").and_then(Value::as_object_mut)
        && role_ref
            .get("apiGroup")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
    {
        role_ref.insert("apiGroup".into(), GROUP.into());
    }
    let subjects = obj.get_mut("subjects").and_then(Value::as_array_mut);
    for subject in subjects.into_iter().flatten() {
        let Some(subject) = subject.as_object_mut() else {
            continue;
        };
        let empty = subject
            .get("apiGroup")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty();
        let kind = subject.get("kind").and_then(Value::as_str).unwrap_or("");
        if empty && matches!(kind, "User" | "Group") {
            subject.insert("apiGroup".into(), GROUP.into());
        }
    }
}

/// `ValidateRoleBinding` (`namespaced`) or `ValidateClusterRoleBinding`.
fn validate(obj: &Value, namespaced: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let api_group = text(obj, "/roleRef/apiGroup");
    if api_group != GROUP {
        errors.push(FieldError::not_supported(
            "roleRef.apiGroup",
            api_group,
            &[GROUP],
        ));
    }
    let kind = text(obj, "/roleRef/kind");
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&kind) {
        errors.push(FieldError::not_supported("roleRef.kind", kind, kinds));
    }
    let name = text(obj, "/roleRef/name");
    if name.is_empty() {
        errors.push(FieldError::required("roleRef.name", ""));
    }
    for problem in path_segment_name(name) {
        errors.push(FieldError::invalid("roleRef.name", name, &problem));
    }
    let subjects = obj.get("subjects").and_then(Value::as_array);
    for (i, subject) in subjects.into_iter().flatten().enumerate() {
        errors.extend(validate_subject(
            subject,
            namespaced,
            &format!("subjects[{i}]"),
        ));
    }
    errors
}

/// The update's validation, and `cannot change roleRef`.
fn validate_update(new: &Value, old: &Value, namespaced: bool) -> Vec<FieldError> {
    let mut errors = validate(new, namespaced);
    let role_ref = |obj: &Value| {
        ["apiGroup", "kind", "name"].map(|f| text(obj, &format!("/roleRef/{f}")).to_string())
    };
    let now = role_ref(new);
    if now != role_ref(old) {
        // The internal rbac.RoleRef has no JSON tags: json.Marshal names its Go fields.
        let [group, kind, name] = now.map(Value::from);
        errors.push(FieldError::invalid_printed(
            "roleRef",
            format!("{{\"APIGroup\":{group},\"Kind\":{kind},\"Name\":{name}}}"),
            "cannot change roleRef",
        ));
    }
    errors
}

/// `validateRoleBindingSubject`.
fn validate_subject(subject: &Value, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let field = |f: &str| subject.get(f).and_then(Value::as_str).unwrap_or("");
    let (name, api_group) = (field("name"), field("apiGroup"));
    if name.is_empty() {
        errors.push(FieldError::required(&format!("{path}.name"), ""));
    }
    match field("kind") {
        "ServiceAccount" => {
            if !name.is_empty() {
                for problem in is_dns1123_subdomain(name) {
                    errors.push(FieldError::invalid(&format!("{path}.name"), name, &problem));
                }
            }
            if !api_group.is_empty() {
                errors.push(FieldError::not_supported(
                    &format!("{path}.apiGroup"),
                    api_group,
                    &[""],
                ));
            }
            if !namespaced && field("namespace").is_empty() {
                errors.push(FieldError::required(&format!("{path}.namespace"), ""));
            }
        }
        kind @ ("User" | "Group") => {
            if name.is_empty() {
                let what = if kind == "User" { "user" } else { "group" };
                errors.push(FieldError::invalid(
                    &format!("{path}.name"),
                    name,
                    &format!("{what} name cannot be empty"),
                ));
            }
            if api_group != GROUP {
                errors.push(FieldError::not_supported(
                    &format!("{path}.apiGroup"),
                    api_group,
                    &[GROUP],
                ));
            }
        }
        other => errors.push(FieldError::not_supported(
            &format!("{path}.kind"),
            other,
            &["ServiceAccount", "User", "Group"],
        )),
    }
    errors
}

/// NAME, ROLE (`<kind>/<name>`), AGE; then (wide) the users, groups and service accounts
/// (`<namespace>/<name>`) as `rbac.SubjectsStrings` sorts them, each joined by ", ".
fn cells(obj: &Value, now: Time) -> Vec<Value> {
    let role = format!(
        "{}/{}",
        text(obj, "/roleRef/kind"),
        text(obj, "/roleRef/name")
    );
    let mut row = crate::registry::name_age_row(obj, now, [Value::from(role)]);
    let (mut users, mut groups, mut accounts) = (Vec::new(), Vec::new(), Vec::new());
    for subject in obj
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let field = |f: &str| subject.get(f).and_then(Value::as_str).unwrap_or("");
        match field("kind") {
            "ServiceAccount" => accounts.push(format!("{}/{}", field("namespace"), field("name"))),
            "User" => users.push(field("name").to_string()),
            "Group" => groups.push(field("name").to_string()),
            _ => {}
        }
    }
    row.extend([users, groups, accounts].map(|l| Value::from(l.join(", "))));
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::json;

    #[test]
    fn defaults_are_set_defaults_role_binding_and_subject() {
        let mut binding = json!({"roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs"},
                {"kind": "ServiceAccount", "name": "default", "namespace": "ns"},
                {"kind": "User", "name": "bob", "apiGroup": "other"}]});
        RoleBindings.set_defaults(&mut binding);
        // Written from defaults.go: the RBAC group for the roleRef, Users and Groups; a
        // ServiceAccount keeps "", a given apiGroup stays.
        assert_eq!(
            binding,
            json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                "subjects": [
                    {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"},
                    {"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.k8s.io"},
                    {"kind": "ServiceAccount", "name": "default", "namespace": "ns"},
                    {"kind": "User", "name": "bob", "apiGroup": "other"}]})
        );
        assert!(RoleBindings.validate(&binding).len() == 1);
    }

    #[test]
    fn role_refs_and_subjects_are_validated_with_upstreams_words() {
        let bad = json!({"roleRef": {"apiGroup": "x", "kind": "Role", "name": "a/b"},
            "subjects": [{"kind": "ServiceAccount", "name": "Bad_Name", "apiGroup": "rbac.authorization.k8s.io"},
                {"kind": "Group", "name": "", "apiGroup": ""}, {"kind": "Robot", "name": "r"}]});
        assert_eq!(
            messages(&ClusterRoleBindings.validate(&bad)),
            vec![
                "roleRef.apiGroup: Unsupported value: \"x\": supported values: \"rbac.authorization.k8s.io\"",
                "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                "roleRef.name: Invalid value: \"a/b\": may not contain '/'",
                "subjects[0].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "subjects[0].apiGroup: Unsupported value: \"rbac.authorization.k8s.io\": supported values: \"\"",
                "subjects[0].namespace: Required value",
                "subjects[1].name: Required value",
                "subjects[1].name: Invalid value: \"\": group name cannot be empty",
                "subjects[1].apiGroup: Unsupported value: \"\": supported values: \"rbac.authorization.k8s.io\"",
                "subjects[2].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
            ]
        );
        let empty = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role"}});
        assert_eq!(
            messages(&RoleBindings.validate(&empty)),
            vec!["roleRef.name: Required value"]
        );
    }

    #[test]
    fn the_role_ref_cannot_change() {
        let old = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}});
        let mut new = old.clone();
        assert!(RoleBindings.validate_update(&new, &old).is_empty());
        new["roleRef"]["name"] = json!("edit");
        assert_eq!(
            messages(&RoleBindings.validate_update(&new, &old)),
            vec![
                "roleRef: Invalid value: {\"APIGroup\":\"rbac.authorization.k8s.io\",\"Kind\":\"ClusterRole\",\"Name\":\"edit\"}: cannot change roleRef"
            ]
        );
    }

    #[test]
    fn bindings_print_role_and_subjects_as_print_role_binding_does() {
        let binding = json!({"metadata": {"name": "b", "creationTimestamp": "2026-05-28T20:16:40Z"},
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"},
                {"kind": "Group", "name": "devs"},
                {"kind": "ServiceAccount", "name": "default", "namespace": "ns"}]});
        assert_eq!(
            ClusterRoleBindings.cells(&binding, Time(1_780_000_000)),
            vec![
                json!("b"),
                json!("ClusterRole/view"),
                json!("10m"),
                json!("alice, bob"),
                json!("devs"),
                json!("ns/default")
            ]
        );
        let columns: Vec<_> = RoleBindings
            .columns()
            .iter()
            .map(|c| (c.name, c.priority))
            .collect();
        assert_eq!(
            columns,
            vec![
                ("Name", 0),
                ("Role", 0),
                ("Age", 0),
                ("Users", 1),
                ("Groups", 1),
                ("ServiceAccounts", 1)
            ]
        );
    }
}
