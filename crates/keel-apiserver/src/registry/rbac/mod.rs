//! rbac.authorization.k8s.io/v1: Roles, ClusterRoles, RoleBindings and ClusterRoleBindings
//! ([`roles`], [`bindings`]), with upstream's defaults (`pkg/apis/rbac/v1/defaults.go`),
//! validation (`pkg/apis/rbac/validation/validation.go`) and printing
//! (`pkg/printers/internalversion/printers.go`); the roles and bindings kube-apiserver
//! keeps at start ([`bootstrap`], reconciled by [`hook`] as [`reconcile`] says). Names of all four follow the path-segment rule
//! (`minimalNameRequirements`), so `system:node` is a name.

pub mod bindings;
pub mod bootstrap;
pub mod hook;
pub mod reconcile;
pub mod roles;

use serde_json::Value;

use super::{Column, Strategy};
use crate::storage::FieldError;

/// The group's name.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    vec![
        &bindings::ClusterRoleBindings,
        &roles::ClusterRoles,
        &bindings::RoleBindings,
        &roles::Roles,
    ]
}

/// The `Created At` column of kinds without a printer of their own (kube-apiserver's default
/// table convertor: roles and cluster roles).
pub const CREATED_AT_COLUMN: Column = Column {
    name: "Created At",
    kind: "date",
    format: "",
    description: super::AGE_COLUMN.description,
    priority: 0,
};

/// The strings of `obj[field]` (none when unset or not a list).
pub fn strings<'a>(obj: &'a Value, field: &str) -> Vec<&'a str> {
    obj.get(field)
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// `validatePolicyRule`: a rule needs verbs, and either non-resource URLs (in a cluster role
/// only, and alone) or API groups and resources (resource names for one resource only).
pub fn validate_rule(rule: &Value, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let len = |field: &str| strings(rule, field).len();
    if len("verbs") == 0 {
        errors.push(FieldError::required(
            &format!("{path}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    if len("nonResourceURLs") > 0 {
        let urls = rule.get("nonResourceURLs").cloned().unwrap_or_default();
        let at = format!("{path}.nonResourceURLs");
        if namespaced {
            errors.push(FieldError::invalid(
                &at,
                urls.clone(),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if len("apiGroups") > 0 || len("resources") > 0 || len("resourceNames") > 0 {
            errors.push(FieldError::invalid(
                &at,
                urls,
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return errors;
    }
    if len("apiGroups") == 0 {
        errors.push(FieldError::required(
            &format!("{path}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if len("resources") == 0 {
        errors.push(FieldError::required(
            &format!("{path}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
    if len("resourceNames") > 0 && len("resources") > 1 {
        errors.push(FieldError::required(
            &format!("{path}.resourceNames"),
            "resource names cannot apply to multiple resources",
        ));
    }
    errors
}

/// Every rule of `obj.rules`, validated.
pub fn validate_rules(obj: &Value, namespaced: bool) -> Vec<FieldError> {
    let rules = obj.get("rules").and_then(Value::as_array);
    rules
        .into_iter()
        .flatten()
        .enumerate()
        .flat_map(|(i, rule)| validate_rule(rule, namespaced, &format!("rules[{i}]")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::json;

    #[test]
    fn rules_are_validated_as_validate_policy_rule_does() {
        let good = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]});
        assert!(validate_rule(&good, true, "rules[0]").is_empty());
        let empty = json!({});
        assert_eq!(
            messages(&validate_rule(&empty, false, "rules[0]")),
            vec![
                "rules[0].verbs: Required value: verbs must contain at least one value",
                "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[0].resources: Required value: resource rules must supply at least one resource",
            ]
        );
        let both =
            json!({"verbs": ["get"], "nonResourceURLs": ["/healthz"], "resources": ["pods"]});
        assert_eq!(
            messages(&validate_rule(&both, true, "rules[1]")),
            vec![
                "rules[1].nonResourceURLs: Invalid value: [\"/healthz\"]: namespaced rules cannot apply to non-resource URLs",
                "rules[1].nonResourceURLs: Invalid value: [\"/healthz\"]: rules cannot apply to both regular resources and non-resource URLs",
            ]
        );
        let names = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods", "services"],
            "resourceNames": ["a"]});
        assert_eq!(
            messages(&validate_rule(&names, false, "rules[0]")),
            vec![
                "rules[0].resourceNames: Required value: resource names cannot apply to multiple resources"
            ]
        );
    }
}
