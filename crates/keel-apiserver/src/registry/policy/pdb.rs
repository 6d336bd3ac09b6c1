//! policy/v1 PodDisruptionBudgets (`pdb`): NAME, MIN AVAILABLE, MAX UNAVAILABLE, ALLOWED
//! DISRUPTIONS, AGE (`printPodDisruptionBudget`, pkg/printers/internalversion/printers.go).
//! policy/v1 has no defaults. As pkg/registry/policy/poddisruptionbudget/strategy.go: a new
//! budget's status is the zero status (its four counters 0), an update keeps the status and
//! bumps the generation when the spec changed, and the `status` subresource keeps the spec.
//! Validated as pkg/apis/policy/validation/validation.go does: minAvailable and
//! maxUnavailable exclusive, each a non-negative number or a percent up to 100%, the
//! selector, the unhealthy pod eviction policy, and a status update's conditions and counters
//! (`ValidatePodDisruptionBudgetStatusUpdate`).

use serde_json::{Value, json};

use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::registry::networking::shared::{int_or_percent, int_or_string_text};
use crate::registry::selector::validate_label_selector;
use crate::registry::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, status};
use crate::storage::FieldError;

/// The PodDisruptionBudget strategy.
pub struct PodDisruptionBudgets;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["pdb"],
    status: true,
    ..ResourceInfo::new(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        "poddisruptionbudget",
    )
};

static COLUMNS: [Column; 5] = [
    NAME_COLUMN,
    Column::string(
        "Min Available",
        0,
        "The minimum number of pods that must be available.",
    ),
    Column::string(
        "Max Unavailable",
        0,
        "The maximum number of pods that may be unavailable.",
    ),
    Column {
        name: "Allowed Disruptions",
        kind: "integer",
        format: "",
        description: "Calculated number of pods that may be disrupted at this time.",
        priority: 0,
    },
    AGE_COLUMN,
];

/// `supportedUnhealthyPodEvictionPolicies`, sorted as `sets.List` lists them.
const EVICTION_POLICIES: [&str; 2] = ["AlwaysAllow", "IfHealthyBudget"];

/// The status counters a status update may not make negative.
const COUNTERS: [&str; 4] = [
    "disruptionsAllowed",
    "currentHealthy",
    "desiredHealthy",
    "expectedPods",
];

/// A pointer field of the internal spec as `%#v` prints it: `(*T)(nil)` or an address.
fn go_pointer(spec: &Value, field: &str, ty: &str, address: &str) -> String {
    match spec.get(field) {
        Some(v) if !v.is_null() => format!("(*{ty})({address})"),
        _ => format!("(*{ty})(nil)"),
    }
}

/// The internal `policy.PodDisruptionBudgetSpec` as `%#v` prints it (its pointers as
/// addresses, which Go's output shows and no two runs share).
fn spec_go(spec: &Value) -> String {
    format!(
        "policy.PodDisruptionBudgetSpec{{MinAvailable:{}, Selector:{}, MaxUnavailable:{}, \
         UnhealthyPodEvictionPolicy:{}}}",
        go_pointer(spec, "minAvailable", "intstr.IntOrString", "0xc000a1c010"),
        go_pointer(spec, "selector", "v1.LabelSelector", "0xc000a1c020"),
        go_pointer(spec, "maxUnavailable", "intstr.IntOrString", "0xc000a1c030"),
        go_pointer(
            spec,
            "unhealthyPodEvictionPolicy",
            "policy.UnhealthyPodEvictionPolicyType",
            "0xc000a1c040"
        ),
    )
}

/// `ValidatePodDisruptionBudgetSpec`.
fn validate_spec(spec: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let set = |f: &str| spec.get(f).filter(|v| !v.is_null());
    if set("minAvailable").is_some() && set("maxUnavailable").is_some() {
        errors.push(FieldError::invalid_printed(
            "spec",
            spec_go(spec),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for field in ["minAvailable", "maxUnavailable"] {
        if let Some(v) = set(field) {
            errors.extend(int_or_percent(v, &format!("spec.{field}")));
        }
    }
    if let Some(selector) = set("selector") {
        errors.extend(validate_label_selector(selector, "spec.selector"));
    }
    if let Some(policy) = set("unhealthyPodEvictionPolicy") {
        let policy = policy.as_str().unwrap_or("");
        if !EVICTION_POLICIES.contains(&policy) {
            errors.push(FieldError::not_supported(
                "spec.unhealthyPodEvictionPolicy",
                policy,
                &EVICTION_POLICIES,
            ));
        }
    }
    errors
}

impl Strategy for PodDisruptionBudgets {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    /// `PrepareForCreate`: the status a client sent is dropped for the zero status.
    fn prepare_for_create(&self, obj: &mut Value) {
        if let Some(o) = obj.as_object_mut() {
            o.insert(
                "status".into(),
                json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                    "expectedPods": 0}),
            );
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_spec(obj.get("spec").unwrap_or(&Value::Null))
    }

    /// `ValidatePodDisruptionBudgetUpdate`: the spec as on create.
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        self.validate(new)
    }

    /// `ValidatePodDisruptionBudgetStatusUpdate` (policy/v1): the conditions and the
    /// counters non-negative.
    fn validate_status_update(&self, new: &Value, _old: &Value) -> Vec<FieldError> {
        let mut errors = status::conditions(
            status::items(new, "/status/conditions"),
            "status.conditions",
        );
        errors.extend(status::non_negative_counts(new, &COUNTERS));
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let bound = |field: &str| match obj.at(&format!("/spec/{field}")) {
            Some(v) if !v.is_null() => int_or_string_text(v),
            _ => "N/A".to_string(),
        };
        let allowed = obj
            .at("/status/disruptionsAllowed")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        crate::registry::name_age_row(
            obj,
            now,
            [
                Value::from(bound("minAvailable")),
                Value::from(bound("maxUnavailable")),
                Value::from(allowed),
            ],
        )
    }

    fn tracks_generation(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;

    #[test]
    fn a_new_budget_gets_the_zero_status() {
        // PrepareForCreate sets `Status = policy.PodDisruptionBudgetStatus{}`; v1 writes its
        // four int32 counters without omitempty, and nothing else.
        let mut pdb = json!({"spec": {"minAvailable": 1}, "status": {"expectedPods": 7,
            "observedGeneration": 3}});
        PodDisruptionBudgets.prepare_for_create(&mut pdb);
        let expected = json!({"spec": {"minAvailable": 1}, "status": {"disruptionsAllowed": 0,
            "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}});
        assert_eq!(pdb, expected);
        assert!(PodDisruptionBudgets.tracks_generation());
        assert!(PodDisruptionBudgets.info().status);
    }

    #[test]
    fn specs_are_validated_in_upstream_words() {
        let both = json!({"spec": {"minAvailable": 1, "maxUnavailable": "120%",
            "unhealthyPodEvictionPolicy": "Never"}});
        assert_eq!(
            messages(&PodDisruptionBudgets.validate(&both)),
            vec![
                "spec: Invalid value: policy.PodDisruptionBudgetSpec{MinAvailable:\
                 (*intstr.IntOrString)(0xc000a1c010), Selector:(*v1.LabelSelector)(nil), \
                 MaxUnavailable:(*intstr.IntOrString)(0xc000a1c030), UnhealthyPodEvictionPolicy:\
                 (*policy.UnhealthyPodEvictionPolicyType)(0xc000a1c040)}: minAvailable and \
                 maxUnavailable cannot be both set",
                "spec.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, \
                 StrVal:\"120%\"}: must not be greater than 100%",
                "spec.unhealthyPodEvictionPolicy: Unsupported value: \"Never\": supported \
                 values: \"AlwaysAllow\", \"IfHealthyBudget\"",
            ]
        );
        let selector = json!({"spec": {"minAvailable": -2, "selector": {"matchExpressions":
            [{"key": "a", "operator": "In"}]}}});
        assert_eq!(
            messages(&PodDisruptionBudgets.validate(&selector)),
            vec![
                "spec.minAvailable: Invalid value: -2: must be greater than or equal to 0",
                "spec.selector.matchExpressions[0].values: Required value: must be specified \
                 when `operator` is 'In' or 'NotIn'",
            ]
        );
        let good = json!({"spec": {"maxUnavailable": "50%", "selector": {"matchLabels": {"a": "b"}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow"}});
        assert!(PodDisruptionBudgets.validate(&good).is_empty());
        let status = json!({"spec": {}, "status": {"expectedPods": -1, "conditions": [
            {"type": "DisruptionAllowed", "status": "True", "reason": "SufficientPods"}]}});
        assert_eq!(
            messages(&PodDisruptionBudgets.validate_status_update(&status, &good)),
            vec![
                "status.conditions[0].lastTransitionTime: Required value",
                "status.expectedPods: Invalid value: -1: must be greater than or equal to 0",
            ]
        );
    }

    #[test]
    fn the_row_shows_both_bounds_and_the_allowed_disruptions() {
        let pdb = json!({"metadata": {"name": "web", "creationTimestamp": "2026-05-28T20:00:00Z"},
            "spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 2}});
        assert_eq!(
            PodDisruptionBudgets.cells(&pdb, Time(1_780_000_000)),
            vec![
                json!("web"),
                json!("50%"),
                json!("N/A"),
                json!(2),
                json!("26m")
            ]
        );
        let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "Name",
                "Min Available",
                "Max Unavailable",
                "Allowed Disruptions",
                "Age"
            ]
        );
    }
}
