//! core/v1 ResourceQuotas: NAME, AGE, REQUEST, LIMIT. The status is the quota controller's:
//! a create starts with an empty one, an update keeps the stored one and an update of
//! `status` keeps the spec (kube's `resourcequotaStrategy`); hard limits, scopes and scope
//! selectors are validated as `ValidateResourceQuota` validates them, and scopes may not
//! change. keel runs no quota controller, so nothing fills the status in.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::resource_lists::{is_standard_quota, validate_quota_list};
use super::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, status};
use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::storage::FieldError;

/// The ResourceQuota strategy.
pub struct ResourceQuotas;

static INFO: ResourceInfo = ResourceInfo {
    // `ReturnDeletedObject: true` (pkg/registry/core/resourcequota/storage).
    returns_deleted_object: true,
    short_names: &["quota"],
    status: true,
    ..ResourceInfo::new("", "v1", "ResourceQuota", "resourcequotas", "resourcequota")
};

static COLUMNS: [Column; 4] = [
    NAME_COLUMN,
    AGE_COLUMN,
    Column::string(
        "Request",
        0,
        "Request represents a minimum amount of cpu/memory that a container may \
            consume.",
    ),
    Column::string(
        "Limit",
        0,
        "Limits control the maximum amount of cpu/memory that a container may use \
            independent of contention on the node.",
    ),
];

/// `standardResourceQuotaScopes` and the scopes `IsStandardResourceQuotaScope` adds.
const SCOPES: [&str; 7] = [
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
    "VolumeAttributesClass",
];

/// Scopes that may not be used together.
const CONFLICTING: [[&str; 2]; 2] = [
    ["BestEffort", "NotBestEffort"],
    ["Terminating", "NotTerminating"],
];

/// `IsResourceQuotaScopeValidForResource`.
fn scope_fits(scope: &str, resource: &str) -> bool {
    let pod_count = resource == "pods";
    let pod_compute = [
        "cpu",
        "memory",
        "limits.cpu",
        "limits.memory",
        "requests.cpu",
        "requests.memory",
    ]
    .contains(&resource);
    match scope {
        "Terminating"
        | "NotTerminating"
        | "NotBestEffort"
        | "PriorityClass"
        | "CrossNamespacePodAffinity" => pod_count || pod_compute,
        "BestEffort" => pod_count,
        "VolumeAttributesClass" => {
            ["persistentvolumeclaims", "requests.storage"].contains(&resource)
        }
        _ => true,
    }
}

fn strings(value: Option<&Value>) -> Vec<&str> {
    value
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The standard quota resources of `spec.hard`, sorted (`sets.List`).
fn hard_names(spec: Option<&Value>) -> Vec<&str> {
    let hard = spec.and_then(|s| s.get("hard")).and_then(Value::as_object);
    hard.into_iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .filter(|k| is_standard_quota(k))
        .collect()
}

/// `spec.scopes` as Go's JSON writes the slice (`null` when unset), the value of every
/// error about it.
fn scopes_value(spec: Option<&Value>) -> Value {
    match spec.and_then(|s| s.get("scopes")) {
        Some(Value::Array(items)) => Value::Array(items.clone()),
        _ => Value::Null,
    }
}

/// `spec.scopes` as a set.
fn scope_set(obj: &Value) -> BTreeSet<&str> {
    strings(obj.at("/spec/scopes")).into_iter().collect()
}

/// The errors of one conflicting pair found in `scopes`, at `path` with `value`.
fn conflicts(scopes: &[&str], path: &str, value: &Value) -> Vec<FieldError> {
    CONFLICTING
        .iter()
        .filter(|pair| pair.iter().all(|s| scopes.contains(s)))
        .map(|_| FieldError::invalid(path, value.clone(), "conflicting scopes"))
        .collect()
}

/// `validateResourceQuotaScopes`.
fn validate_scopes(spec: Option<&Value>) -> Vec<FieldError> {
    let scopes = strings(spec.and_then(|s| s.get("scopes")));
    if scopes.is_empty() {
        return Vec::new();
    }
    let path = "spec.scopes";
    let value = scopes_value(spec);
    let hard = hard_names(spec);
    let mut errors = Vec::new();
    for scope in &scopes {
        if !SCOPES.contains(scope) {
            errors.push(FieldError::invalid(
                path,
                value.clone(),
                "unsupported scope",
            ));
        }
        for resource in &hard {
            if !scope_fits(scope, resource) {
                errors.push(FieldError::invalid(
                    path,
                    value.clone(),
                    "unsupported scope applied to resource",
                ));
            }
        }
    }
    errors.extend(conflicts(&scopes, path, &value));
    errors
}

/// The internal `core.ScopeSelector` as Go's `json.Marshal` writes it: the internal types
/// have no JSON tags, so their Go field names in declared order. The value of an error
/// about the selector.
fn internal_selector(selector: &Value) -> String {
    let json = |v: Option<&Value>, zero: &str| {
        v.map_or(zero.to_string(), |v| {
            serde_json::to_string(v).unwrap_or_default()
        })
    };
    let expressions = match selector.get("matchExpressions").and_then(Value::as_array) {
        None => "null".to_string(),
        Some(items) => {
            let items: Vec<String> = items
                .iter()
                .map(|e| {
                    format!(
                        "{{\"ScopeName\":{},\"Operator\":{},\"Values\":{}}}",
                        json(e.get("scopeName"), "\"\""),
                        json(e.get("operator"), "\"\""),
                        json(e.get("values"), "null")
                    )
                })
                .collect();
            format!("[{}]", items.join(","))
        }
    };
    format!("{{\"MatchExpressions\":{expressions}}}")
}

/// `validateScopeSelector` and `validateScopedResourceSelectorRequirement`.
fn validate_scope_selector(spec: Option<&Value>) -> Vec<FieldError> {
    let Some(selector) = spec
        .and_then(|s| s.get("scopeSelector"))
        .filter(|s| !s.is_null())
    else {
        return Vec::new();
    };
    let path = "spec.scopeSelector.matchExpressions";
    let hard = hard_names(spec);
    let mut errors = Vec::new();
    let mut scopes = Vec::new();
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    for req in expressions.into_iter().flatten() {
        let text = |f: &str| req.get(f).and_then(Value::as_str).unwrap_or("");
        let (scope, operator) = (text("scopeName"), text("operator"));
        if !SCOPES.contains(&scope) {
            errors.push(FieldError::invalid(
                &format!("{path}.scopeName"),
                scope,
                "unsupported scope",
            ));
        }
        for resource in &hard {
            if !scope_fits(scope, resource) {
                errors.push(FieldError::invalid_printed(
                    path,
                    internal_selector(selector),
                    "unsupported scope applied to resource",
                ));
            }
        }
        let exists_only = [
            "BestEffort",
            "NotBestEffort",
            "Terminating",
            "NotTerminating",
            "CrossNamespacePodAffinity",
        ];
        if exists_only.contains(&scope) && operator != "Exists" {
            errors.push(FieldError::invalid(
                &format!("{path}.operator"),
                operator,
                "must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, \
                 ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, \
                 ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
            ));
        }
        let values = req.get("values").and_then(Value::as_array);
        let count = values.map_or(0, Vec::len);
        match operator {
            "In" | "NotIn" if count == 0 => errors.push(FieldError::required(
                &format!("{path}.values"),
                "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
            )),
            "In" | "NotIn" => {}
            "Exists" | "DoesNotExist" if count != 0 => errors.push(FieldError::invalid(
                &format!("{path}.values"),
                req.get("values").cloned().unwrap_or(Value::Null),
                "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
            )),
            "Exists" | "DoesNotExist" => {}
            _ => errors.push(FieldError::invalid(
                &format!("{path}.operator"),
                operator,
                "not a valid selector operator",
            )),
        }
        scopes.push(scope);
    }
    // Upstream reports a conflict in the selector with the value of `spec.scopes`.
    errors.extend(conflicts(&scopes, path, &scopes_value(spec)));
    errors
}

/// `ValidateResourceQuotaSpec`.
fn validate_spec(obj: &Value) -> Vec<FieldError> {
    let spec = obj.get("spec");
    let hard = spec.and_then(|s| s.get("hard")).and_then(Value::as_object);
    let mut errors = validate_quota_list(hard, "spec.hard");
    errors.extend(validate_scopes(spec));
    errors.extend(validate_scope_selector(spec));
    errors
}

/// `ValidateResourceQuotaStatus`.
fn validate_status(obj: &Value) -> Vec<FieldError> {
    let list = |field: &str| {
        obj.at(&format!("/status/{field}"))
            .and_then(Value::as_object)
    };
    let mut errors = validate_quota_list(list("hard"), "status.hard");
    errors.extend(validate_quota_list(list("used"), "status.used"));
    errors
}

/// One `Request` or `Limit` cell: `<name>: <used>/<hard>` for each resource of the status
/// whose name starts with `limits.` (or does not), sorted by name.
fn usage_cell(obj: &Value, limits: bool) -> String {
    let list = |field: &str| {
        obj.at(&format!("/status/{field}"))
            .and_then(Value::as_object)
    };
    let quantity = |field: &str, name: &str| {
        list(field)
            .and_then(|l| l.get(name))
            .map_or("0".to_string(), super::resource_lists::quantity_text)
    };
    let mut cells = Vec::new();
    for name in list("hard").into_iter().flat_map(|l| l.keys()) {
        let is_limit = name
            .split_once('.')
            .is_some_and(|(first, _)| first == "limits");
        if is_limit == limits {
            cells.push(format!(
                "{name}: {}/{}",
                quantity("used", name),
                quantity("hard", name)
            ));
        }
    }
    cells.join(", ")
}

impl Strategy for ResourceQuotas {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({}));
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = validate_spec(obj);
        errors.extend(validate_status(obj));
        errors
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = validate_spec(new);
        if scope_set(new) != scope_set(old) {
            errors.push(FieldError::invalid(
                "spec.scopes",
                scopes_value(new.get("spec")),
                "field is immutable",
            ));
        }
        errors
    }

    /// `ValidateResourceQuotaStatusUpdate`: a resource version and the status's lists.
    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errors: Vec<FieldError> =
            status::resource_version_required(new).into_iter().collect();
        errors.extend(validate_status(new));
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        vec![
            Value::from(super::meta_str(obj, "name")),
            super::age(obj, now),
            Value::from(usage_cell(obj, false)),
            Value::from(usage_cell(obj, true)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;

    #[test]
    fn a_new_quota_has_an_empty_status_and_its_usage_is_shown_from_the_status() {
        let mut quota = json!({"metadata": {"name": "q", "creationTimestamp": "2026-05-28T20:16:40Z"},
            "spec": {"hard": {"pods": "10"}}, "status": {"used": {"pods": "3"}}});
        ResourceQuotas.prepare_for_create(&mut quota);
        assert_eq!(quota["status"], json!({}));
        assert_eq!(
            ResourceQuotas.cells(&quota, Time(1_780_000_000)),
            vec![json!("q"), json!("10m"), json!(""), json!("")]
        );
        quota["status"] = json!({"hard": {"pods": "10", "limits.cpu": "2", "requests.cpu": "1"},
            "used": {"pods": "3"}});
        assert_eq!(
            ResourceQuotas.cells(&quota, Time(1_780_000_000)),
            vec![
                json!("q"),
                json!("10m"),
                json!("pods: 3/10, requests.cpu: 0/1"),
                json!("limits.cpu: 0/2")
            ]
        );
    }

    #[test]
    fn scopes_are_checked_against_the_hard_limits_and_each_other() {
        let quota = json!({"spec": {"hard": {"cpu": "1", "services": "2"},
            "scopes": ["BestEffort", "NotBestEffort", "Bogus"]}});
        assert_eq!(
            messages(&ResourceQuotas.validate(&quota)),
            [
                "spec.scopes: Invalid value: [\"BestEffort\",\"NotBestEffort\",\"Bogus\"]: \
                 unsupported scope applied to resource",
                "spec.scopes: Invalid value: [\"BestEffort\",\"NotBestEffort\",\"Bogus\"]: \
                 unsupported scope applied to resource",
                "spec.scopes: Invalid value: [\"BestEffort\",\"NotBestEffort\",\"Bogus\"]: \
                 unsupported scope applied to resource",
                "spec.scopes: Invalid value: [\"BestEffort\",\"NotBestEffort\",\"Bogus\"]: \
                 unsupported scope",
                "spec.scopes: Invalid value: [\"BestEffort\",\"NotBestEffort\",\"Bogus\"]: \
                 conflicting scopes",
            ]
        );
        let fine = json!({"spec": {"hard": {"pods": "1"}, "scopes": ["BestEffort"]}});
        assert!(ResourceQuotas.validate(&fine).is_empty());
    }

    #[test]
    fn scope_selectors_are_validated_in_upstreams_words() {
        let quota = json!({"spec": {"hard": {"services": "1"}, "scopeSelector": {"matchExpressions": [
            {"scopeName": "BestEffort", "operator": "In"},
            {"scopeName": "PriorityClass", "operator": "Exists", "values": ["high"]},
        ]}}});
        assert_eq!(
            messages(&ResourceQuotas.validate(&quota)),
            [
                "spec.scopeSelector.matchExpressions: Invalid value: {\"MatchExpressions\":[\
                 {\"ScopeName\":\"BestEffort\",\"Operator\":\"In\",\"Values\":null},\
                 {\"ScopeName\":\"PriorityClass\",\"Operator\":\"Exists\",\"Values\":[\"high\"]}]}: \
                 unsupported scope applied to resource",
                "spec.scopeSelector.matchExpressions.operator: Invalid value: \"In\": must be \
                 'Exists' when scope is any of ResourceQuotaScopeTerminating, \
                 ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, \
                 ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
                "spec.scopeSelector.matchExpressions.values: Required value: must be at least \
                 one value when `operator` is 'In' or 'NotIn' for scope selector",
                "spec.scopeSelector.matchExpressions: Invalid value: {\"MatchExpressions\":[\
                 {\"ScopeName\":\"BestEffort\",\"Operator\":\"In\",\"Values\":null},\
                 {\"ScopeName\":\"PriorityClass\",\"Operator\":\"Exists\",\"Values\":[\"high\"]}]}: \
                 unsupported scope applied to resource",
                "spec.scopeSelector.matchExpressions.values: Invalid value: [\"high\"]: must be \
                 no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
            ]
        );
    }

    #[test]
    fn scopes_may_not_change_and_a_status_is_validated() {
        let old = json!({"spec": {"hard": {"pods": "1"}, "scopes": ["BestEffort"]}});
        let new = json!({"spec": {"hard": {"pods": "1"}},
            "status": {"used": {"pods": "-1"}}});
        assert_eq!(
            messages(&ResourceQuotas.validate_update(&new, &old)),
            ["spec.scopes: Invalid value: null: field is immutable"]
        );
        assert_eq!(
            messages(&ResourceQuotas.validate_status_update(&new, &old)),
            [
                "resourceVersion: Required value",
                "status.used[pods]: Invalid value: \"-1\": must be greater than or equal to 0",
            ]
        );
    }
}
