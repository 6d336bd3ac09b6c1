//! admissionregistration.k8s.io/v1 ValidatingAdmissionPolicies (with a `status`
//! subresource) and ValidatingAdmissionPolicyBindings, stored with their defaults
//! (`pkg/apis/admissionregistration/v1/defaults.go`: `failurePolicy` Fail; a match's
//! `matchPolicy` Equivalent, empty selectors and rule `scope` `*`; a `paramRef`'s
//! `parameterNotFoundAction` Deny) and the required fields `validation.go` asks for (the CEL
//! expressions compiled: `expressions`), printed as `printValidatingAdmissionPolicy` (NAME
//! VALIDATIONS PARAMKIND AGE) and `printValidatingAdmissionPolicyBinding` (NAME POLICYNAME
//! PARAMREF AGE). Not enforced.

use serde_json::{Map, Value, json};

use super::expressions::{self, Options, Preexisting};
use super::rules::validate_rule;
use crate::apimachinery::time::Time;
use crate::registry::defaults::{as_map, default_value, object_entry};
use crate::registry::selector::LabelSelector;
use crate::registry::storage_k8s_io::fields::{items, present, str_at};
use crate::registry::{
    AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, name_age_row, status,
};
use crate::storage::FieldError;

/// ValidatingAdmissionPolicies.
pub struct ValidatingAdmissionPolicies;

/// ValidatingAdmissionPolicyBindings.
pub struct ValidatingAdmissionPolicyBindings;

static POLICY: ResourceInfo = ResourceInfo {
    namespaced: false,
    status: true,
    categories: &["api-extensions"],
    ..ResourceInfo::new(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        "validatingadmissionpolicy",
    )
};

static BINDING: ResourceInfo = ResourceInfo {
    namespaced: false,
    categories: &["api-extensions"],
    ..ResourceInfo::new(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        "validatingadmissionpolicybinding",
    )
};

static POLICY_COLUMNS: [Column; 4] = [
    NAME_COLUMN,
    Column {
        name: "Validations",
        kind: "integer",
        format: "",
        description: "Validations indicates the number of validation rules defined in this configuration",
        priority: 0,
    },
    Column::string(
        "ParamKind",
        0,
        "ParamKind specifies the kind of resources used to parameterize this policy",
    ),
    AGE_COLUMN,
];

static BINDING_COLUMNS: [Column; 4] = [
    NAME_COLUMN,
    Column::string(
        "PolicyName",
        0,
        "PolicyName indicates the policy definition which the policy binding binded to",
    ),
    Column::string(
        "ParamRef",
        0,
        "ParamRef indicates the param resource which sets the configration param",
    ),
    AGE_COLUMN,
];

/// `SetDefaults_MatchResources` and `SetDefaults_Rule` of its rules.
fn match_defaults(m: &mut Map<String, Value>) {
    default_value(m, "matchPolicy", json!("Equivalent"));
    default_value(m, "namespaceSelector", json!({}));
    default_value(m, "objectSelector", json!({}));
    for rules in ["resourceRules", "excludeResourceRules"] {
        if let Some(Value::Array(list)) = m.get_mut(rules) {
            for rule in list.iter_mut() {
                default_value(as_map(rule), "scope", json!("*"));
            }
        }
    }
}

fn validate_match(m: Option<&Value>, path: &str, rules_required: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(m) = m else {
        return errors;
    };
    let rules = items(m, "/resourceRules");
    if rules_required && rules.is_empty() {
        errors.push(FieldError::required(&format!("{path}.resourceRules"), ""));
    }
    for (i, rule) in rules.iter().enumerate() {
        errors.extend(validate_rule(
            rule,
            &format!("{path}.resourceRules[{i}]"),
            true,
        ));
    }
    if let Some(p) = present(m, "/matchPolicy").and_then(Value::as_str)
        && !["Equivalent", "Exact"].contains(&p)
    {
        errors.push(FieldError::not_supported(
            &format!("{path}.matchPolicy"),
            p,
            &["Equivalent", "Exact"],
        ));
    }
    errors
}

/// The failurePolicy and matchConstraints of a policy's spec.
fn spec_fields(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(p) = present(obj, "/spec/failurePolicy").and_then(Value::as_str)
        && !["Fail", "Ignore"].contains(&p)
    {
        errors.push(FieldError::not_supported(
            "spec.failurePolicy",
            p,
            &["Fail", "Ignore"],
        ));
    }
    match present(obj, "/spec/matchConstraints") {
        None => errors.push(FieldError::required("spec.matchConstraints", "")),
        m => errors.extend(validate_match(m, "spec.matchConstraints", true)),
    }
    errors
}

impl Strategy for ValidatingAdmissionPolicies {
    fn info(&self) -> &'static ResourceInfo {
        &POLICY
    }

    fn set_defaults(&self, obj: &mut Value) {
        let spec = object_entry(as_map(obj), "spec");
        default_value(spec, "failurePolicy", json!("Fail"));
        if let Some(m) = spec.get_mut("matchConstraints").filter(|m| m.is_object()) {
            match_defaults(as_map(m));
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        self.set_defaults(obj);
        as_map(obj).insert("status".into(), json!({}));
    }

    /// `validatingAdmissionPolicyStatusStrategy.PrepareForUpdate`:
    /// `metav1.ResetObjectMetaForStatus`.
    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        status::reset_meta(new, old);
    }

    /// `ValidateValidatingAdmissionPolicyStatusUpdate`: each type-checking warning has its
    /// words and a field reference, and the conditions are `metav1.Condition`s.
    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let warnings = status::items(new, "/status/typeChecking/expressionWarnings");
        for (i, w) in warnings.iter().enumerate() {
            let at = format!("status.typeChecking.expressionWarnings[{i}]");
            if str_at(w, "/warning").is_empty() {
                errors.push(FieldError::required(&format!("{at}.warning"), ""));
            }
            if str_at(w, "/fieldRef").trim().is_empty() {
                errors.push(FieldError::required(&format!("{at}.fieldRef"), ""));
            }
        }
        errors.extend(status::conditions(
            status::items(new, "/status/conditions"),
            "status.conditions",
        ));
        errors
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = spec_fields(obj);
        let opts = Options {
            params: present(obj, "/spec/paramKind").is_some(),
            ..Options::default()
        };
        errors.extend(expressions::policy(obj, &opts));
        errors
    }

    /// `ValidateValidatingAdmissionPolicyUpdate`: the matchConditions are not checked again
    /// when neither they nor the `paramKind` changed, and the expressions the stored policy
    /// had are not refused (see `expressions`).
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let unchanged = |pointer: &str| new.pointer(pointer) == old.pointer(pointer);
        let opts = Options {
            params: present(new, "/spec/paramKind").is_some(),
            ignore_match_conditions: unchanged("/spec/paramKind")
                && unchanged("/spec/matchConditions"),
            preexisting: Preexisting::of_policy(old),
        };
        let mut errors = spec_fields(new);
        errors.extend(expressions::policy(new, &opts));
        errors
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn columns(&self) -> &'static [Column] {
        &POLICY_COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let param_kind = present(obj, "/spec/paramKind").map_or("<unset>".to_string(), |k| {
            format!("{}/{}", str_at(k, "/apiVersion"), str_at(k, "/kind"))
        });
        name_age_row(
            obj,
            now,
            [
                Value::from(items(obj, "/spec/validations").len()),
                Value::from(param_kind),
            ],
        )
    }
}

impl Strategy for ValidatingAdmissionPolicyBindings {
    fn info(&self) -> &'static ResourceInfo {
        &BINDING
    }

    fn set_defaults(&self, obj: &mut Value) {
        let spec = object_entry(as_map(obj), "spec");
        if let Some(m) = spec.get_mut("matchResources").filter(|m| m.is_object()) {
            match_defaults(as_map(m));
        }
        if let Some(p) = spec.get_mut("paramRef").filter(|p| p.is_object()) {
            default_value(as_map(p), "parameterNotFoundAction", json!("Deny"));
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        if str_at(obj, "/spec/policyName").is_empty() {
            errors.push(FieldError::required("spec.policyName", ""));
        }
        errors.extend(validate_match(
            present(obj, "/spec/matchResources"),
            "spec.matchResources",
            false,
        ));
        if let Some(a) =
            present(obj, "/spec/paramRef/parameterNotFoundAction").and_then(Value::as_str)
            && !["Allow", "Deny"].contains(&a)
        {
            errors.push(FieldError::not_supported(
                "spec.paramRef.parameterNotFoundAction",
                a,
                &["Allow", "Deny"],
            ));
        }
        let actions = items(obj, "/spec/validationActions");
        if actions.is_empty() {
            errors.push(FieldError::required(
                "spec.validationActions",
                "at least one validation action is required",
            ));
        }
        for (i, a) in actions.iter().enumerate() {
            let a = a.as_str().unwrap_or("");
            if !["Audit", "Deny", "Warn"].contains(&a) {
                errors.push(FieldError::not_supported(
                    &format!("spec.validationActions[{i}]"),
                    a,
                    &["Audit", "Deny", "Warn"],
                ));
            }
        }
        errors
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn columns(&self) -> &'static [Column] {
        &BINDING_COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let param = match present(obj, "/spec/paramRef") {
            None => "<unset>".to_string(),
            Some(p) => match (str_at(p, "/name"), str_at(p, "/namespace")) {
                ("", _) => present(p, "/selector")
                    .map_or("<unset>".to_string(), LabelSelector::format_object),
                (name, "") => format!("*/{name}"),
                (name, ns) => format!("{ns}/{name}"),
            },
        };
        name_age_row(
            obj,
            now,
            [
                Value::from(str_at(obj, "/spec/policyName")),
                Value::from(param),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;

    #[test]
    fn policies_and_bindings_default_validate_and_print() {
        let mut p = json!({"metadata": {"name": "replicas"}, "spec": {
            "matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": ["apps"],
                "apiVersions": ["v1"], "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.replicas <= 5"}]}});
        ValidatingAdmissionPolicies.prepare_for_create(&mut p);
        assert_eq!(
            p["spec"],
            json!({"failurePolicy": "Fail", "matchConstraints": {"matchPolicy": "Equivalent",
                "namespaceSelector": {}, "objectSelector": {}, "resourceRules": [{"operations": ["CREATE"],
                "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"], "scope": "*"}]},
                "validations": [{"expression": "object.spec.replicas <= 5"}]})
        );
        assert!(ValidatingAdmissionPolicies.validate(&p).is_empty());
        assert_eq!(
            ValidatingAdmissionPolicies.cells(&p, Time(1_780_000_000))[1..3],
            [json!(1), json!("<unset>")]
        );
        assert_eq!(
            messages(&ValidatingAdmissionPolicies.validate(&json!({"spec": {}}))),
            vec![
                "spec.matchConstraints: Required value",
                "spec.validations: Required value: validations or auditAnnotations must contain at least one item",
                "spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item",
            ]
        );
        let mut b = json!({"spec": {"paramRef": {"name": "limits"}}});
        ValidatingAdmissionPolicyBindings.set_defaults(&mut b);
        assert_eq!(
            b["spec"]["paramRef"]["parameterNotFoundAction"],
            json!("Deny")
        );
        assert_eq!(
            messages(&ValidatingAdmissionPolicyBindings.validate(&b)),
            vec![
                "spec.policyName: Required value",
                "spec.validationActions: Required value: at least one validation action is required",
            ]
        );
        assert_eq!(
            ValidatingAdmissionPolicyBindings.cells(&b, Time(1_780_000_000))[2],
            json!("*/limits")
        );
    }

    #[test]
    fn a_status_update_resets_the_metadata_and_checks_warnings_and_conditions() {
        let old = json!({"metadata": {"name": "p", "generation": 3, "labels": {"a": "b"}}});
        let mut new = json!({"metadata": {"name": "p", "generation": 9},
            "status": {"typeChecking": {"expressionWarnings": [{"fieldRef": " "}]},
                "conditions": [{"type": "Ready", "status": "True", "reason": "Fine",
                    "lastTransitionTime": "2024-01-01T00:00:00Z"}]}});
        ValidatingAdmissionPolicies.prepare_for_status_update(&mut new, &old);
        assert_eq!(new["metadata"], old["metadata"]);
        assert_eq!(
            crate::registry::rules::messages(
                &ValidatingAdmissionPolicies.validate_status_update(&new, &old)
            ),
            [
                "status.typeChecking.expressionWarnings[0].warning: Required value",
                "status.typeChecking.expressionWarnings[0].fieldRef: Required value",
            ]
        );
    }
}
