//! Roles and ClusterRoles (`pkg/registry/rbac/role`, `pkg/registry/rbac/clusterrole`):
//! their rules validated as `ValidateRole` and `ValidateClusterRole` do (a Role's rules may
//! not name non-resource URLs; a ClusterRole's `aggregationRule` needs at least one valid
//! selector), printed by kube-apiserver's default table convertor: NAME, CREATED AT.

use serde_json::Value;

use super::{CREATED_AT_COLUMN, GROUP, validate_rules};
use crate::apimachinery::time::Time;
use crate::registry::names::NameRule;
use crate::registry::selector::LabelSelector;
use crate::registry::selector::validate_label_selector;
use crate::registry::{Column, NAME_COLUMN, ResourceInfo, Strategy, meta_str};
use crate::storage::FieldError;

/// The Role strategy.
pub struct Roles;

/// The ClusterRole strategy.
pub struct ClusterRoles;

static ROLE: ResourceInfo = ResourceInfo {
    name_rule: NameRule::PathSegment,
    ..ResourceInfo::new(GROUP, "v1", "Role", "roles", "role")
};

static CLUSTER_ROLE: ResourceInfo = ResourceInfo {
    name_rule: NameRule::PathSegment,
    namespaced: false,
    ..ResourceInfo::new(GROUP, "v1", "ClusterRole", "clusterroles", "clusterrole")
};

static COLUMNS: [Column; 2] = [NAME_COLUMN, CREATED_AT_COLUMN];

/// NAME and CREATED AT (the creation time as RFC 3339, UTC).
fn created_at_row(obj: &Value) -> Vec<Value> {
    vec![
        Value::from(meta_str(obj, "name")),
        Value::from(meta_str(obj, "creationTimestamp")),
    ]
}

impl Strategy for Roles {
    fn info(&self) -> &'static ResourceInfo {
        &ROLE
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_rules(obj, true)
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, _now: Time) -> Vec<Value> {
        created_at_row(obj)
    }
}

impl Strategy for ClusterRoles {
    fn info(&self) -> &'static ResourceInfo {
        &CLUSTER_ROLE
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = validate_rules(obj, false);
        errors.extend(validate_aggregation(obj));
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, _now: Time) -> Vec<Value> {
        created_at_row(obj)
    }
}

/// `ValidateClusterRole`'s check of an `aggregationRule`: at least one selector, each a
/// valid label selector.
fn validate_aggregation(obj: &Value) -> Vec<FieldError> {
    let Some(rule) = obj.get("aggregationRule").filter(|r| !r.is_null()) else {
        return Vec::new();
    };
    let path = "aggregationRule.clusterRoleSelectors";
    let selectors = rule
        .get("clusterRoleSelectors")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut errors = Vec::new();
    if selectors.is_empty() {
        errors.push(FieldError::required(
            path,
            "at least one clusterRoleSelector required if aggregationRule is non-nil",
        ));
    }
    for (i, selector) in selectors.iter().enumerate() {
        errors.extend(validate_label_selector(selector, &format!("{path}[{i}]")));
    }
    errors
}

/// The selectors of a ClusterRole's `aggregationRule` (None: it aggregates nothing, or a
/// selector does not parse).
pub fn aggregation_selectors(role: &Value) -> Option<Vec<LabelSelector>> {
    let selectors = role
        .get("aggregationRule")?
        .get("clusterRoleSelectors")?
        .as_array()?;
    selectors
        .iter()
        .map(|s| LabelSelector::from_object(s).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::meta;
    use crate::registry::rules::messages;
    use serde_json::json;

    #[test]
    fn names_are_path_segments_and_rules_are_checked() {
        let role = json!({"metadata": {"name": "system:pod-reader", "namespace": "ns",
            "creationTimestamp": "2026-05-28T20:16:40Z"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]});
        assert!(meta::validate(&role, Roles.info()).is_empty());
        assert!(Roles.validate(&role).is_empty());
        assert_eq!(
            Roles.cells(&role, Time(0)),
            vec![json!("system:pod-reader"), json!("2026-05-28T20:16:40Z")]
        );
        assert_eq!(Roles.columns()[1].name, "Created At");
        let bad = json!({"metadata": {"name": "a/b%c", "namespace": "ns"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}]});
        let mut errors = meta::validate(&bad, Roles.info());
        errors.extend(Roles.validate(&bad));
        assert_eq!(
            messages(&errors),
            vec![
                "metadata.name: Invalid value: \"a/b%c\": may not contain '/'",
                "metadata.name: Invalid value: \"a/b%c\": may not contain '%'",
                "rules[0].nonResourceURLs: Invalid value: [\"/x\"]: namespaced rules cannot apply to non-resource URLs",
            ]
        );
        let dots = json!({"metadata": {"name": ".."}});
        assert_eq!(
            messages(&meta::validate(&dots, ClusterRoles.info())),
            vec!["metadata.name: Invalid value: \"..\": may not be '..'"]
        );
    }

    #[test]
    fn cluster_roles_may_name_urls_and_need_aggregation_selectors() {
        let urls = json!({"metadata": {"name": "x"}, "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]});
        assert!(ClusterRoles.validate(&urls).is_empty());
        let empty = json!({"metadata": {"name": "x"}, "aggregationRule": {}});
        assert_eq!(
            messages(&ClusterRoles.validate(&empty)),
            vec![
                "aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"
            ]
        );
        let agg = json!({"aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}]}});
        assert!(ClusterRoles.validate(&agg).is_empty());
        assert_eq!(aggregation_selectors(&agg).map(|s| s.len()), Some(1));
        assert!(aggregation_selectors(&urls).is_none());
    }
}
