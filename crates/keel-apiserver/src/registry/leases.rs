//! coordination.k8s.io/v1 Leases: NAME, HOLDER, AGE. An update of a missing lease creates
//! it (as kube's lease strategy allows), and the spec's counters are validated.

use serde_json::Value;

use super::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy};
use crate::apimachinery::time::Time;
use crate::storage::FieldError;

/// The Lease strategy.
pub struct Leases;

static INFO: ResourceInfo =
    ResourceInfo::new("coordination.k8s.io", "v1", "Lease", "leases", "lease");

static COLUMNS: [Column; 3] = [
    NAME_COLUMN,
    Column::string(
        "Holder",
        0,
        "holderIdentity contains the identity of the holder of a current lease. If \
            Coordinated Leader Election is used, the holder identity must be equal to the \
            elected LeaseCandidate.metadata.name field.",
    ),
    AGE_COLUMN,
];

const STRATEGIES: [&str; 1] = ["OldestEmulationVersion"];

impl Strategy for Leases {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let spec = obj.get("spec");
        let int = |field: &str| spec.and_then(|s| s.get(field)).and_then(Value::as_i64);
        if let Some(d) = int("leaseDurationSeconds")
            && d <= 0
        {
            errors.push(FieldError::invalid(
                "spec.leaseDurationSeconds",
                d,
                "must be greater than 0",
            ));
        }
        if let Some(t) = int("leaseTransitions")
            && t < 0
        {
            errors.push(FieldError::invalid(
                "spec.leaseTransitions",
                t,
                "must be greater than or equal to 0",
            ));
        }
        let strategy = spec.and_then(|s| s.get("strategy")).and_then(Value::as_str);
        if let Some(s) = strategy
            && !STRATEGIES.contains(&s)
        {
            errors.push(FieldError::not_supported("spec.strategy", s, &STRATEGIES));
        }
        let preferred = spec
            .and_then(|s| s.get("preferredHolder"))
            .and_then(Value::as_str);
        if preferred.is_some_and(|p| !p.is_empty()) && strategy.is_none() {
            errors.push(FieldError::forbidden(
                "spec.preferredHolder",
                "may only be specified if `strategy` is defined",
            ));
        }
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        super::name_age_row(
            obj,
            now,
            [Value::from(super::text(obj, "/spec/holderIdentity"))],
        )
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::json;

    #[test]
    fn holder_is_shown_and_counters_validated() {
        let lease = json!({"metadata": {"name": "kube-scheduler", "creationTimestamp": "2026-05-28T20:16:40Z"},
            "spec": {"holderIdentity": "node-1_abc", "leaseDurationSeconds": 15}});
        assert_eq!(
            Leases.cells(&lease, Time(1_780_000_000)),
            vec![json!("kube-scheduler"), json!("node-1_abc"), json!("10m")]
        );
        assert!(Leases.validate(&lease).is_empty());
        let bad = json!({"spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1,
            "preferredHolder": "x"}});
        let errors = messages(&Leases.validate(&bad));
        assert_eq!(
            errors,
            vec![
                "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
                "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
                "spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined",
            ]
        );
        assert!(Leases.allow_create_on_update());
    }
}
